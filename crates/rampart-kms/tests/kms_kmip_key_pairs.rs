//! Asymmetric keys, certificates and the other managed object types over
//! raw TTLV, checked against real peers: private keys made by Python's
//! `cryptography` registered and read back in each Key Format Type and
//! compared with what `cryptography` serializes; a pair from Create Key
//! Pair whose public key `cryptography` derives again from its private
//! key; a certificate from `openssl req -x509` whose derived attributes
//! match `openssl x509`; opaque objects and split keys; and the Result
//! Reasons of malformed DER, a mismatched length and a wrong format. On
//! SQLite and PostgreSQL; on PostgreSQL also a key revoked through one
//! server refused at once by another.

use std::process::Command;

use rampart_kmip::enums::{
    CryptographicAlgorithm, KeyFormatType, LinkType, ObjectType, Operation, ResultReason,
};
use rampart_kmip::message::{Attribute, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, connect, ec_pair, ok, one, reason, sign_ecdsa, text_of, uid, Deployment, Tls};

/// Runs Python with `cryptography`; stdout lines, hex-decoded.
fn python(script: &str) -> Vec<Vec<u8>> {
    let out = Command::new("python3").arg("-c").arg(script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| hex::decode(l).unwrap()).collect()
}

fn key_block(format: KeyFormatType, material: &[u8], alg: u32, len: i32) -> Item {
    Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, material)]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, alg),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, len),
        ],
    )
}

async fn register(tls: &mut Tls, object_type: ObjectType, object: Item) -> ResponseBatchItem {
    one(tls, Operation::REGISTER, vec![Item::enumeration(Tag::OBJECT_TYPE, object_type.0), object])
        .await
}

/// The Key Material bytes of a Get answer's key, in `format` (None: default).
async fn get_material(tls: &mut Tls, uid: &str, format: Option<KeyFormatType>) -> Vec<u8> {
    let mut fields = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
    if let Some(f) = format {
        fields.push(Item::enumeration(Tag::KEY_FORMAT_TYPE, f.0));
    }
    let got = ok(&one(tls, Operation::GET, fields).await);
    let object = got.iter().find(|i| i.tag == Tag::PRIVATE_KEY || i.tag == Tag::PUBLIC_KEY);
    let block = Fields::of(object.unwrap()).unwrap();
    let block = Fields::of(block.required(Tag::KEY_BLOCK).unwrap()).unwrap();
    let value = Fields::of(block.required(Tag::KEY_VALUE).unwrap()).unwrap();
    value.required(Tag::KEY_MATERIAL).unwrap().as_bytes().unwrap().to_vec()
}

async fn get_with_format(tls: &mut Tls, uid: &str, format: KeyFormatType) -> ResponseBatchItem {
    one(
        tls,
        Operation::GET,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0),
        ],
    )
    .await
}

async fn attributes(tls: &mut Tls, uid: &str) -> Vec<Attribute> {
    let got =
        ok(&one(tls, Operation::GET_ATTRIBUTES, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
            .await);
    got.iter().filter(|i| i.tag == Tag::ATTRIBUTE).map(|i| Attribute::parse(i).unwrap()).collect()
}

fn value_of<'a>(attrs: &'a [Attribute], name: &str) -> &'a Item {
    attrs.iter().find(|a| a.name == name).and_then(|a| a.value.as_ref()).unwrap_or_else(|| {
        panic!("{name} missing: {:?}", attrs.iter().map(|a| &a.name).collect::<Vec<_>>())
    })
}

const KEYS: &str = "
from cryptography.hazmat.primitives.asymmetric import rsa, ec
from cryptography.hazmat.primitives import serialization as s
r = rsa.generate_private_key(public_exponent=65537, key_size=2048)
e = ec.generate_private_key(ec.SECP256R1())
for k in (r, e):
    print(k.private_bytes(s.Encoding.DER, s.PrivateFormat.PKCS8, s.NoEncryption()).hex())
print(r.private_bytes(s.Encoding.DER, s.PrivateFormat.TraditionalOpenSSL, s.NoEncryption()).hex())
print(r.public_key().public_bytes(s.Encoding.DER, s.PublicFormat.PKCS1).hex())
print(r.public_key().public_bytes(s.Encoding.DER, s.PublicFormat.SubjectPublicKeyInfo).hex())
";

async fn private_keys_come_back_in_every_format(backend: Backend) {
    let d = Deployment::on(backend, "key-formats").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let keys = python(KEYS);
    let (rsa8, ec8, rsa1, rsa_pub1, rsa_spki) = (&keys[0], &keys[1], &keys[2], &keys[3], &keys[4]);
    let rsa = CryptographicAlgorithm::RSA.0;
    // RSA registered as PKCS#1: Get answers in PKCS#1 by default.
    let block = key_block(KeyFormatType::PKCS1, rsa1, rsa, 2048);
    let uid = text_of(
        &ok(&register(
            &mut tls,
            ObjectType::PRIVATE_KEY,
            Item::structure(Tag::PRIVATE_KEY, vec![block]),
        )
        .await),
        Tag::UNIQUE_IDENTIFIER,
    );
    assert_eq!(&get_material(&mut tls, &uid, None).await, rsa1);
    assert_eq!(&get_material(&mut tls, &uid, Some(KeyFormatType::PKCS8)).await, rsa8);
    assert_eq!(&get_material(&mut tls, &uid, Some(KeyFormatType::PKCS1)).await, rsa1);
    let transparent =
        ok(&get_with_format(&mut tls, &uid, KeyFormatType::TRANSPARENT_RSA_PRIVATE_KEY).await);
    assert!(format!("{transparent:?}").contains("Modulus"));
    assert_eq!(
        reason(&get_with_format(&mut tls, &uid, KeyFormatType::X509).await),
        ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED
    );
    let attrs = attributes(&mut tls, &uid).await;
    assert_eq!(value_of(&attrs, "Cryptographic Length").value, Value::Integer(2048));
    assert_eq!(
        value_of(&attrs, "Object Type").value,
        Value::Enumeration(ObjectType::PRIVATE_KEY.0)
    );

    // EC registered as PKCS#8: PKCS#8 back; PKCS#1 does not apply.
    let block = key_block(KeyFormatType::PKCS8, ec8, CryptographicAlgorithm::EC.0, 256);
    let uid = text_of(
        &ok(&register(
            &mut tls,
            ObjectType::PRIVATE_KEY,
            Item::structure(Tag::PRIVATE_KEY, vec![block]),
        )
        .await),
        Tag::UNIQUE_IDENTIFIER,
    );
    assert_eq!(&get_material(&mut tls, &uid, None).await, ec8);
    assert_eq!(
        reason(&get_with_format(&mut tls, &uid, KeyFormatType::PKCS1).await),
        ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED
    );

    // A public key registered as PKCS#1 answers X.509 as cryptography does.
    let block = key_block(KeyFormatType::PKCS1, rsa_pub1, rsa, 2048);
    let uid = text_of(
        &ok(&register(
            &mut tls,
            ObjectType::PUBLIC_KEY,
            Item::structure(Tag::PUBLIC_KEY, vec![block]),
        )
        .await),
        Tag::UNIQUE_IDENTIFIER,
    );
    assert_eq!(&get_material(&mut tls, &uid, Some(KeyFormatType::X509)).await, rsa_spki);
    assert_eq!(&get_material(&mut tls, &uid, None).await, rsa_pub1);

    // Malformed DER, a length that is not the key's, a format a private
    // key cannot be in.
    let mut broken = rsa1.clone();
    broken.truncate(100);
    for (block, expected) in [
        (key_block(KeyFormatType::PKCS1, &broken, rsa, 2048), ResultReason::INVALID_FIELD),
        (key_block(KeyFormatType::PKCS1, rsa1, rsa, 3072), ResultReason::INVALID_FIELD),
        (
            key_block(KeyFormatType::RAW, rsa1, rsa, 2048),
            ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED,
        ),
        (
            key_block(KeyFormatType::X509, rsa8, rsa, 2048),
            ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED,
        ),
    ] {
        let object = Item::structure(Tag::PRIVATE_KEY, vec![block]);
        assert_eq!(reason(&register(&mut tls, ObjectType::PRIVATE_KEY, object).await), expected);
    }
}
on_each_store!(private_keys_come_back_in_every_format);

const DSA_KEY: &str = "
from cryptography.hazmat.primitives.asymmetric import dsa
from cryptography.hazmat.primitives import serialization as s
k = dsa.generate_private_key(key_size=2048)
n = k.private_numbers()
pn = n.public_numbers.parameter_numbers
for v in (pn.p, pn.q, pn.g, n.x, n.public_numbers.y):
    h = format(v, 'x')
    print(('0' if len(h) % 2 else '') + h)
print(k.private_bytes(s.Encoding.DER, s.PrivateFormat.PKCS8, s.NoEncryption()).hex())
print(k.public_key().public_bytes(s.Encoding.DER, s.PublicFormat.SubjectPublicKeyInfo).hex())
";

/// A transparent DSA key block of `integers` (P, Q, G and X or Y).
fn dsa_block(format: KeyFormatType, integers: &[(Tag, &Vec<u8>)]) -> Item {
    let material = integers
        .iter()
        .map(|(tag, v)| {
            let mut wire = vec![0u8; 8 - v.len() % 8];
            wire.extend_from_slice(v);
            Item::new(*tag, Value::BigInteger(wire))
        })
        .collect();
    Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0),
            Item::structure(Tag::KEY_VALUE, vec![Item::structure(Tag::KEY_MATERIAL, material)]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::DSA.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 2048),
        ],
    )
}

async fn dsa_keys_are_kept_in_the_forms_cryptography_writes(backend: Backend) {
    let d = Deployment::on(backend, "dsa-keys").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let k = python(DSA_KEY);
    let (p, q, g, x, y, pkcs8, spki) = (&k[0], &k[1], &k[2], &k[3], &k[4], &k[5], &k[6]);
    let private = dsa_block(
        KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY,
        &[(Tag::P, p), (Tag::Q, q), (Tag::G, g), (Tag::X, x)],
    );
    let uid = text_of(
        &ok(&register(
            &mut tls,
            ObjectType::PRIVATE_KEY,
            Item::structure(Tag::PRIVATE_KEY, vec![private]),
        )
        .await),
        Tag::UNIQUE_IDENTIFIER,
    );
    assert_eq!(&get_material(&mut tls, &uid, Some(KeyFormatType::PKCS8)).await, pkcs8);
    // By default, the transparent form it was registered in.
    let got =
        ok(&get_with_format(&mut tls, &uid, KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY).await);
    assert!(format!("{got:?}").contains("X (0x42009F)"), "{got:?}");
    // Kept, not used: a DSA signature is Feature Not Supported.
    ok(&one(&mut tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone())])
        .await);
    let sign = one(
        &mut tls,
        Operation::SIGN,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone()), Item::bytes(Tag::DATA, b"m")],
    )
    .await;
    assert_eq!(reason(&sign), ResultReason::FEATURE_NOT_SUPPORTED, "{:?}", sign.result_message);

    let public = dsa_block(
        KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY,
        &[(Tag::P, p), (Tag::Q, q), (Tag::G, g), (Tag::Y, y)],
    );
    let uid = text_of(
        &ok(&register(
            &mut tls,
            ObjectType::PUBLIC_KEY,
            Item::structure(Tag::PUBLIC_KEY, vec![public]),
        )
        .await),
        Tag::UNIQUE_IDENTIFIER,
    );
    assert_eq!(&get_material(&mut tls, &uid, Some(KeyFormatType::X509)).await, spki);
    // A Y that is not below P is refused.
    let bad = dsa_block(
        KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY,
        &[(Tag::P, p), (Tag::Q, q), (Tag::G, g), (Tag::Y, p)],
    );
    let refused =
        register(&mut tls, ObjectType::PUBLIC_KEY, Item::structure(Tag::PUBLIC_KEY, vec![bad]))
            .await;
    assert_eq!(reason(&refused), ResultReason::INVALID_FIELD);
}
on_each_store!(dsa_keys_are_kept_in_the_forms_cryptography_writes);

async fn a_created_pair_is_linked_and_its_halves_match(backend: Backend) {
    let d = Deployment::on(backend, "key-pair").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let name = |n: &str| {
        Value::Structure(vec![Item::text(Tag::NAME_VALUE, n), Item::enumeration(Tag::NAME_TYPE, 1)])
    };
    let request = vec![
        Item::structure(
            Tag::COMMON_TEMPLATE_ATTRIBUTE,
            vec![
                attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::RSA.0)),
                attr("Cryptographic Length", Value::Integer(2048)),
            ],
        ),
        Item::structure(
            Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE,
            vec![attr("Name", name("pair-private"))],
        ),
        Item::structure(
            Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE,
            vec![attr("Name", name("pair-public"))],
        ),
    ];
    let got = ok(&one(&mut tls, Operation::CREATE_KEY_PAIR, request).await);
    let private = text_of(&got, Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER);
    let public = text_of(&got, Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER);
    assert_eq!((private.as_str(), public.as_str()), ("pair-private/1", "pair-public/1"));
    let pkcs8 = get_material(&mut tls, &private, None).await;
    let spki = get_material(&mut tls, &public, None).await;
    let derived = python(&format!(
        "from cryptography.hazmat.primitives import serialization as s
k = s.load_der_private_key(bytes.fromhex('{}'), None)
print(k.public_key().public_bytes(s.Encoding.DER, s.PublicFormat.SubjectPublicKeyInfo).hex())",
        hex::encode(&pkcs8)
    ));
    assert_eq!(derived[0], spki);
    // Each half links to the other; usage masks default to Sign and Verify.
    for (uid, other, link_type, mask) in [
        (&private, &public, LinkType::PUBLIC_KEY, 1),
        (&public, &private, LinkType::PRIVATE_KEY, 2),
    ] {
        let attrs = attributes(&mut tls, uid).await;
        let link = rampart_kmip::payload::Link::parse(value_of(&attrs, "Link")).unwrap();
        assert_eq!((link.link_type, &link.linked_object), (link_type, other));
        assert_eq!(value_of(&attrs, "Cryptographic Usage Mask").value, Value::Integer(mask));
    }
    // Revoking and destroying the private key leaves the public key as it was.
    let revoke = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, private.clone()),
        Item::structure(
            Tag::REVOCATION_REASON,
            vec![Item::enumeration(Tag::REVOCATION_REASON_CODE, 1)],
        ),
    ];
    let _ = one(
        &mut tls,
        Operation::ACTIVATE,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, private.clone())],
    )
    .await;
    ok(&one(&mut tls, Operation::REVOKE, revoke).await);
    ok(&one(
        &mut tls,
        Operation::DESTROY,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, private.clone())],
    )
    .await);
    let state = |attrs: &[Attribute]| value_of(attrs, "State").value.clone();
    assert_eq!(state(&attributes(&mut tls, &private).await), Value::Enumeration(5));
    assert_eq!(state(&attributes(&mut tls, &public).await), Value::Enumeration(1));
}
on_each_store!(a_created_pair_is_linked_and_its_halves_match);

async fn certificates_and_opaque_objects_keep_what_the_spec_gives_them(backend: Backend) {
    let d = Deployment::on(backend, "certificates").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let dir = d.dir.join("cert");
    std::fs::create_dir_all(&dir).unwrap();
    let (key, der) = (dir.join("k.pem"), dir.join("c.der"));
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=rampart-test/O=Rampart", "-outform", "DER", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&der)
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let info = Command::new("openssl")
        .args(["x509", "-inform", "DER", "-noout", "-subject", "-issuer", "-serial", "-in"])
        .arg(&der)
        .output()
        .unwrap();
    let info = String::from_utf8(info.stdout).unwrap();
    let serial = info.lines().find_map(|l| l.strip_prefix("serial=")).unwrap().to_owned();
    let bytes = std::fs::read(&der).unwrap();
    let cert = Item::structure(
        Tag::CERTIFICATE,
        vec![
            Item::enumeration(Tag::CERTIFICATE_TYPE, 1),
            Item::bytes(Tag::CERTIFICATE_VALUE, &bytes),
        ],
    );
    let uid = text_of(
        &ok(&register(&mut tls, ObjectType::CERTIFICATE, cert).await),
        Tag::UNIQUE_IDENTIFIER,
    );
    let attrs = attributes(&mut tls, &uid).await;
    let length = i32::try_from(bytes.len()).unwrap();
    assert_eq!(value_of(&attrs, "Certificate Length").value, Value::Integer(length));
    assert_eq!(value_of(&attrs, "Cryptographic Length").value, Value::Integer(2048));
    let id = Fields::of(value_of(&attrs, "X.509 Certificate Identifier")).unwrap();
    let got_serial = id.required(Tag::CERTIFICATE_SERIAL_NUMBER).unwrap().as_bytes().unwrap();
    assert_eq!(hex::encode_upper(got_serial), serial.to_uppercase());
    let subject = Fields::of(value_of(&attrs, "Certificate Subject")).unwrap();
    let subject = subject.required(Tag::CERTIFICATE_SUBJECT_DISTINGUISHED_NAME).unwrap();
    // openssl writes "subject=CN = rampart-test, O = Rampart"; compare without spaces.
    let subject = subject.as_text().unwrap().replace(' ', "");
    let openssl = info.lines().find_map(|l| l.strip_prefix("subject=")).unwrap().replace(' ', "");
    assert_eq!(subject, openssl);
    let got =
        ok(&one(&mut tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    assert!(format!("{got:?}").contains(&format!("Bytes({} bytes)", bytes.len())));
    // Not a certificate: Invalid Field.
    let junk = Item::structure(
        Tag::CERTIFICATE,
        vec![
            Item::enumeration(Tag::CERTIFICATE_TYPE, 1),
            Item::bytes(Tag::CERTIFICATE_VALUE, b"junk"),
        ],
    );
    assert_eq!(
        reason(&register(&mut tls, ObjectType::CERTIFICATE, junk).await),
        ResultReason::INVALID_FIELD
    );

    let opaque = Item::structure(
        Tag::OPAQUE_OBJECT,
        vec![
            Item::enumeration(Tag::OPAQUE_DATA_TYPE, 0x8000_0001),
            Item::bytes(Tag::OPAQUE_DATA_VALUE, b"opaque"),
        ],
    );
    let uid = text_of(
        &ok(&register(&mut tls, ObjectType::OPAQUE_OBJECT, opaque.clone()).await),
        Tag::UNIQUE_IDENTIFIER,
    );
    let got =
        ok(&one(&mut tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone())])
            .await);
    assert_eq!(got.iter().find(|i| i.tag == Tag::OPAQUE_OBJECT), Some(&opaque));
    assert_eq!(
        reason(&get_with_format(&mut tls, &uid, KeyFormatType::RAW).await),
        ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED
    );
}
on_each_store!(certificates_and_opaque_objects_keep_what_the_spec_gives_them);

/// Two servers on one PostgreSQL database, each with its own store and
/// so its own kept rows (`store/postgres_changes.rs`): a private key
/// revoked through one is refused by the very next Sign on the other,
/// however recently that one signed with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_through_one_server_is_refused_at_once_by_another_on_postgres() {
    let d = Deployment::on(Backend::Postgres, "revoked-elsewhere").await;
    let (second, _stop) = d.another_kmip_server().await;
    let mut here = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let mut there = connect(&d.admin, &second, &rustls::version::TLS13).await;
    let revoke = |id: &str| {
        vec![
            uid(id),
            Item::structure(
                Tag::REVOCATION_REASON,
                vec![Item::enumeration(Tag::REVOCATION_REASON_CODE, 1)],
            ),
        ]
    };
    for round in 0..40 {
        let (private, _) =
            ec_pair(&mut here, &format!("signer-{round}"), &format!("checker-{round}")).await;
        // Signed twice here: the second is answered from what was kept.
        for _ in 0..2 {
            ok(&sign_ecdsa(&mut here, &private, b"before").await);
        }
        ok(&one(&mut there, Operation::REVOKE, revoke(&private)).await);
        let refused = sign_ecdsa(&mut here, &private, b"after").await;
        assert_eq!(
            reason(&refused),
            ResultReason::PERMISSION_DENIED,
            "round {round}: signed after a revocation made through the other server"
        );
        let message = refused.result_message.unwrap_or_default();
        assert!(message.contains("is Deactivated: it cannot sign"), "{message}");
    }
}
