//! Re-key Key Pair, Certify and Re-certify over raw TTLV, checked with
//! `openssl`: a re-keyed pair's new public key verifies a signature its new
//! private key made (and the old one's does not), the pairs are linked
//! both ways and the Names move; a PKCS#10 request made by `openssl req`
//! (DER and PEM) and a managed public key are certified under the key
//! manager's CA as `openssl verify` accepts, for the request's key and
//! subject; a tampered request is refused with Invalid Field (KMIP 1.4)
//! or Invalid CSR (2.1); Re-certify renews a certificate and moves the
//! links; Batch Error Continuation Undo takes all of it back. On SQLite
//! and PostgreSQL.

use std::path::Path;
use std::process::Command;

use rampart_kmip::enums::{
    BatchErrorContinuationOption, CryptographicAlgorithm, LinkType, ObjectType, Operation,
    ResultReason, ResultStatus, State,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage};
use rampart_kmip::payload::Link;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{
    attr, connect, ec_pair, exchange, name, ok, one, reason, sign_ecdsa, text_of, uid, Deployment,
    Tls,
};

async fn attributes(tls: &mut Tls, id: &str) -> Vec<Attribute> {
    let got = ok(&one(tls, Operation::GET_ATTRIBUTES, vec![uid(id)]).await);
    got.iter().filter(|i| i.tag == Tag::ATTRIBUTE).map(|i| Attribute::parse(i).unwrap()).collect()
}

fn values<'a>(attrs: &'a [Attribute], name: &str) -> Vec<&'a Item> {
    attrs.iter().filter(|a| a.name == name).filter_map(|a| a.value.as_ref()).collect()
}

/// The objects `attrs` link to with `link_type`.
fn links(attrs: &[Attribute], link_type: LinkType) -> Vec<String> {
    values(attrs, "Link")
        .into_iter()
        .map(|v| Link::parse(v).unwrap())
        .filter(|l| l.link_type == link_type)
        .map(|l| l.linked_object)
        .collect()
}

fn state(attrs: &[Attribute]) -> State {
    State(values(attrs, "State")[0].as_enum().unwrap())
}

fn names(attrs: &[Attribute]) -> Vec<String> {
    values(attrs, "Name")
        .into_iter()
        .map(|v| {
            Fields::of(v).unwrap().required(Tag::NAME_VALUE).unwrap().as_text().unwrap().into()
        })
        .collect()
}

/// Runs `openssl` with `args` in `dir`; its stdout (it must succeed).
fn openssl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("openssl").current_dir(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether `openssl` with `args` in `dir` succeeds.
fn openssl_ok(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl").current_dir(dir).args(args).output().unwrap().status.success()
}

/// The Key Material (or Certificate Value) bytes Get answers for `id`.
async fn get_bytes(tls: &mut Tls, id: &str) -> Vec<u8> {
    let got = ok(&one(tls, Operation::GET, vec![uid(id)]).await);
    let object = got
        .iter()
        .find(|i| [Tag::PUBLIC_KEY, Tag::PRIVATE_KEY, Tag::CERTIFICATE].contains(&i.tag))
        .unwrap();
    let f = Fields::of(object).unwrap();
    if object.tag == Tag::CERTIFICATE {
        return f.required(Tag::CERTIFICATE_VALUE).unwrap().as_bytes().unwrap().to_vec();
    }
    let block = Fields::of(f.required(Tag::KEY_BLOCK).unwrap()).unwrap();
    let value = Fields::of(block.required(Tag::KEY_VALUE).unwrap()).unwrap();
    value.required(Tag::KEY_MATERIAL).unwrap().as_bytes().unwrap().to_vec()
}

/// Creates an EC P-256 pair named `private` and `public`, activated.
async fn rekey_pair(tls: &mut Tls, private: &str, extra: Vec<Item>) -> (String, String) {
    let mut fields = vec![Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, private)];
    fields.extend(extra);
    let got = ok(&one(tls, Operation::RE_KEY_KEY_PAIR, fields).await);
    (
        text_of(&got, Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER),
        text_of(&got, Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER),
    )
}

/// An ECDSA-SHA256 signature of `message` by the private key `id`.
async fn sign(tls: &mut Tls, id: &str, message: &[u8]) -> Vec<u8> {
    let got = ok(&sign_ecdsa(tls, id, message).await);
    got.iter().find(|i| i.tag == Tag::SIGNATURE_DATA).unwrap().as_bytes().unwrap().to_vec()
}

async fn a_re_keyed_pair_signs_for_openssl_and_replaces_the_old_one(backend: Backend) {
    let d = Deployment::on(backend, "rekey-pair").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let dir = d.dir.join("rekey");
    std::fs::create_dir_all(&dir).unwrap();
    let (old_private, old_public) = ec_pair(&mut tls, "rk-private", "rk-public").await;
    let (private, public) = rekey_pair(&mut tls, &old_private, vec![]).await;
    assert_eq!((private.as_str(), public.as_str()), ("rk-private/2", "rk-public/2"));

    // The new private key signs; openssl verifies with the new public key
    // (Get answers it as SubjectPublicKeyInfo), not with the old one.
    let message = b"re-keyed by the key manager";
    std::fs::write(dir.join("message"), message).unwrap();
    std::fs::write(dir.join("signature"), sign(&mut tls, &private, message).await).unwrap();
    std::fs::write(dir.join("new.der"), get_bytes(&mut tls, &public).await).unwrap();
    std::fs::write(dir.join("old.der"), get_bytes(&mut tls, &old_public).await).unwrap();
    let verify = |key: &'static str| {
        let args = ["dgst", "-sha256", "-keyform", "DER", "-verify", key];
        [&args[..], &["-signature", "signature", "message"]].concat()
    };
    assert!(openssl(&dir, &verify("new.der")).contains("Verified OK"));
    assert!(!openssl_ok(&dir, &verify("old.der")), "the old public key verified the signature");

    // Replaced and Replacement links both ways, the new halves linked to
    // each other; the Names and the client's attributes moved to the new pair.
    let (old_p, old_q) =
        (attributes(&mut tls, &old_private).await, attributes(&mut tls, &old_public).await);
    let (new_p, new_q) =
        (attributes(&mut tls, &private).await, attributes(&mut tls, &public).await);
    assert_eq!(links(&old_p, LinkType::REPLACEMENT_OBJECT), [private.as_str()]);
    assert_eq!(links(&old_q, LinkType::REPLACEMENT_OBJECT), [public.as_str()]);
    assert_eq!(links(&new_p, LinkType::REPLACED_OBJECT), [old_private.as_str()]);
    assert_eq!(links(&new_q, LinkType::REPLACED_OBJECT), [old_public.as_str()]);
    assert_eq!(links(&new_p, LinkType::PUBLIC_KEY), [public.as_str()]);
    assert_eq!(links(&new_q, LinkType::PRIVATE_KEY), [private.as_str()]);
    assert_eq!(links(&old_p, LinkType::PUBLIC_KEY), [old_public.as_str()]);
    assert_eq!(
        (names(&new_p), names(&new_q)),
        (vec!["rk-private".into()], vec!["rk-public".into()])
    );
    assert!(names(&old_p).is_empty() && names(&old_q).is_empty());
    assert_eq!(values(&new_q, "x-purpose"), values(&old_q, "x-purpose"));
    // Without an Offset the new pair has the old one's dates (KMIP 1.4
    // §4.5): both stay Active, the old pair usable until it is revoked.
    assert_eq!(values(&new_p, "Activation Date"), values(&old_p, "Activation Date"));
    for attrs in [&old_p, &old_q, &new_p, &new_q] {
        assert_eq!(state(attrs), State::ACTIVE);
    }
    assert_eq!(values(&new_q, "Cryptographic Length")[0].value, Value::Integer(256));

    // With an Offset: Pre-Active until Initial Date + Offset.
    let offset = Item::new(Tag::OFFSET, Value::Interval(3600));
    let (third, _) = rekey_pair(&mut tls, &private, vec![offset.clone()]).await;
    let attrs = attributes(&mut tls, &third).await;
    assert_eq!(state(&attrs), State::PRE_ACTIVE);
    let initial = values(&attrs, "Initial Date")[0].as_date_time().unwrap();
    let activation = values(&attrs, "Activation Date")[0].as_date_time().unwrap();
    assert!((3599..=3601).contains(&(activation - initial)), "{initial} {activation}");

    // Refusals: a replaced pair, a public key, an Offset with a date.
    let again = one(
        &mut tls,
        Operation::RE_KEY_KEY_PAIR,
        vec![Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, old_private.clone())],
    )
    .await;
    assert_eq!(reason(&again), ResultReason::ILLEGAL_OPERATION);
    let public_half = one(
        &mut tls,
        Operation::RE_KEY_KEY_PAIR,
        vec![Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, old_public.clone())],
    )
    .await;
    // KMIP 1.4 §11.6: not able to be re-keyed.
    assert_eq!(reason(&public_half), ResultReason::PERMISSION_DENIED);
    let dated = one(
        &mut tls,
        Operation::RE_KEY_KEY_PAIR,
        vec![
            Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, third.clone()),
            offset,
            Item::structure(
                Tag::COMMON_TEMPLATE_ATTRIBUTE,
                vec![attr("Activation Date", Value::DateTime(activation))],
            ),
        ],
    )
    .await;
    assert_eq!(reason(&dated), ResultReason::INVALID_MESSAGE);
    let unknown = one(
        &mut tls,
        Operation::RE_KEY_KEY_PAIR,
        vec![Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, "no-such-key/1")],
    )
    .await;
    assert_eq!(reason(&unknown), ResultReason::ITEM_NOT_FOUND);

    // Another algorithm when the attributes ask for one.
    let rsa = Item::structure(
        Tag::COMMON_TEMPLATE_ATTRIBUTE,
        vec![
            attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::RSA.0)),
            attr("Cryptographic Length", Value::Integer(2048)),
        ],
    );
    let (rsa_private, rsa_public) = rekey_pair(&mut tls, &third, vec![rsa]).await;
    let attrs = attributes(&mut tls, &rsa_public).await;
    assert_eq!(
        values(&attrs, "Cryptographic Algorithm")[0].value,
        Value::Enumeration(CryptographicAlgorithm::RSA.0)
    );

    // KMIP 2.1: Public Key Attributes name the new public key's usage mask.
    let request = RequestMessage::new(
        ProtocolVersion::V2_1,
        vec![(
            Operation::RE_KEY_KEY_PAIR,
            vec![
                Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, rsa_private),
                Item::structure(
                    Tag::PUBLIC_KEY_ATTRIBUTES,
                    vec![Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, 2 | 4)],
                ),
            ],
        )],
    );
    let got = ok(&exchange(&mut tls, &request).await.batch_items[0]);
    let fifth = text_of(&got, Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER);
    assert_eq!(fifth, "rk-public/5");
    let attrs = attributes(&mut tls, &fifth).await;
    assert_eq!(values(&attrs, "Cryptographic Usage Mask")[0].value, Value::Integer(2 | 4));
    assert_eq!(values(&attrs, "Cryptographic Length")[0].value, Value::Integer(2048));

    // Batch Error Continuation Undo takes a Re-key Key Pair back whole.
    let (p, q) = ec_pair(&mut tls, "undo-private", "undo-public").await;
    let mut request = RequestMessage::new(
        ProtocolVersion::V1_4,
        vec![
            (
                Operation::RE_KEY_KEY_PAIR,
                vec![Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, p.clone())],
            ),
            (Operation::GET, vec![uid("no-such-key/1")]),
        ],
    );
    request.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
    let undone = exchange(&mut tls, &request).await;
    assert_eq!(undone.batch_items[0].result_status, ResultStatus::OPERATION_UNDONE);
    for id in ["undo-private/2", "undo-public/2"] {
        let gone = one(&mut tls, Operation::GET_ATTRIBUTES, vec![uid(id)]).await;
        assert_eq!(reason(&gone), ResultReason::ITEM_NOT_FOUND, "{id}");
    }
    let attrs = attributes(&mut tls, &p).await;
    assert_eq!(names(&attrs), ["undo-private"]);
    assert!(links(&attrs, LinkType::REPLACEMENT_OBJECT).is_empty());
    assert_eq!(names(&attributes(&mut tls, &q).await), ["undo-public"]);

    let audit = d.audit_ops().await;
    let rekeyed =
        audit.iter().filter(|(_, op, outcome)| op == "kmip.re_key_key_pair" && outcome == "ok");
    assert_eq!(rekeyed.count(), 5, "{audit:?}");
}
on_each_store!(a_re_keyed_pair_signs_for_openssl_and_replaces_the_old_one);

/// A Certify or Re-certify request of `fields` in KMIP `version`.
async fn certify_in(
    tls: &mut Tls,
    version: ProtocolVersion,
    operation: Operation,
    fields: Vec<Item>,
) -> rampart_kmip::message::ResponseBatchItem {
    let request = RequestMessage::new(version, vec![(operation, fields)]);
    exchange(tls, &request).await.batch_items.remove(0)
}

fn csr_fields(kind: u32, csr: &[u8]) -> Vec<Item> {
    vec![
        Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, kind),
        Item::bytes(Tag::CERTIFICATE_REQUEST, csr),
    ]
}

/// Gets certificate `id` into `dir/file` as PEM; `openssl verify` must
/// accept it under the key manager's CA. Its serial number.
async fn verified(tls: &mut Tls, dir: &Path, id: &str, file: &str) -> String {
    std::fs::write(dir.join(format!("{file}.der")), get_bytes(tls, id).await).unwrap();
    let der = format!("{file}.der");
    let pem = format!("{file}.pem");
    openssl(dir, &["x509", "-inform", "DER", "-in", &der, "-out", &pem]);
    let out = openssl(dir, &["verify", "-CAfile", "ca.pem", &pem]);
    assert_eq!(out.trim(), format!("{pem}: OK"));
    openssl(dir, &["x509", "-noout", "-serial", "-in", &pem])
}

async fn certify_issues_what_openssl_verifies_under_the_key_manager_ca(backend: Backend) {
    let d = Deployment::on(backend, "certify").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let dir = d.dir.join("certify");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), &d.admin.ca_cert).unwrap();
    let subject = "/CN=certify-test/O=Rampart";
    openssl(
        &dir,
        &["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-subj", subject]
            .iter()
            .chain(&["-out", "csr.pem"])
            .copied()
            .collect::<Vec<_>>(),
    );
    openssl(&dir, &["req", "-in", "csr.pem", "-outform", "DER", "-out", "csr.der"]);
    let (csr_pem, csr_der) =
        (std::fs::read(dir.join("csr.pem")).unwrap(), std::fs::read(dir.join("csr.der")).unwrap());
    let csr_key = openssl(&dir, &["req", "-in", "csr.pem", "-noout", "-pubkey"]);

    // A request alone, as DER (PKCS#10) and as PEM: a certificate for its
    // key and subject, issued by the key manager's CA.
    for (kind, csr, file) in [(2, &csr_der, "from-der"), (3, &csr_pem, "from-pem")] {
        let got = ok(&one(&mut tls, Operation::CERTIFY, csr_fields(kind, csr)).await);
        let id = text_of(&got, Tag::UNIQUE_IDENTIFIER);
        verified(&mut tls, &dir, &id, file).await;
        let pem = format!("{file}.pem");
        assert_eq!(openssl(&dir, &["x509", "-in", &pem, "-noout", "-pubkey"]), csr_key);
        let got_subject = openssl(&dir, &["x509", "-in", &pem, "-noout", "-subject"]);
        assert_eq!(got_subject.replace(' ', ""), "subject=CN=certify-test,O=Rampart\n");
        let attrs = attributes(&mut tls, &id).await;
        assert_eq!(
            values(&attrs, "Object Type")[0].value,
            Value::Enumeration(ObjectType::CERTIFICATE.0)
        );
        assert!(!values(&attrs, "X.509 Certificate Identifier").is_empty());
    }

    // A request whose self-signature no longer holds: Invalid Field to a
    // KMIP 1.4 client (§11.8), Invalid CSR to a 2.1 client.
    let mut tampered = csr_der.clone();
    let at = tampered.windows(12).position(|w| w == b"certify-test").unwrap();
    tampered[at] = b'C';
    let refused = one(&mut tls, Operation::CERTIFY, csr_fields(2, &tampered)).await;
    assert_eq!(reason(&refused), ResultReason::INVALID_FIELD, "{:?}", refused.result_message);
    let v2 = vec![
        Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 2),
        Item::bytes(Tag::CERTIFICATE_REQUEST_VALUE, &tampered),
    ];
    let refused = certify_in(&mut tls, ProtocolVersion::V2_1, Operation::CERTIFY, v2).await;
    assert_eq!(reason(&refused), ResultReason::INVALID_CSR, "{:?}", refused.result_message);
    let junk = one(&mut tls, Operation::CERTIFY, csr_fields(3, b"not a request")).await;
    assert_eq!(reason(&junk), ResultReason::INVALID_FIELD);

    // A managed public key by its Unique Identifier: the certificate is for
    // that key, and the two are linked both ways.
    let (_, public) = ec_pair(&mut tls, "ck-private", "ck-public").await;
    let template =
        Item::structure(Tag::TEMPLATE_ATTRIBUTE, vec![attr("Name", name("ck-certificate"))]);
    let got = ok(&one(&mut tls, Operation::CERTIFY, vec![uid(&public), template]).await);
    let cert = text_of(&got, Tag::UNIQUE_IDENTIFIER);
    assert_eq!(cert, "ck-certificate/1");
    let first_serial = verified(&mut tls, &dir, &cert, "by-uid").await;
    std::fs::write(dir.join("public.der"), get_bytes(&mut tls, &public).await).unwrap();
    let managed_key = openssl(&dir, &["pkey", "-pubin", "-inform", "DER", "-in", "public.der"]);
    assert_eq!(openssl(&dir, &["x509", "-in", "by-uid.pem", "-noout", "-pubkey"]), managed_key);
    assert_eq!(links(&attributes(&mut tls, &cert).await, LinkType::PUBLIC_KEY), [public.as_str()]);
    assert_eq!(links(&attributes(&mut tls, &public).await, LinkType::CERTIFICATE), [cert.as_str()]);
    // With the key, a request made with its own private key is taken (its
    // subject is the certificate's); another key's request is refused.
    std::fs::write(dir.join("private.der"), get_bytes(&mut tls, "ck-private/1").await).unwrap();
    openssl(
        &dir,
        &["req", "-new", "-key", "private.der", "-keyform", "DER", "-subj", "/CN=ck-own"]
            .iter()
            .chain(&["-outform", "DER", "-out", "own.der"])
            .copied()
            .collect::<Vec<_>>(),
    );
    let own = std::fs::read(dir.join("own.der")).unwrap();
    let with_own = [vec![uid(&public)], csr_fields(2, &own)].concat();
    let id =
        text_of(&ok(&one(&mut tls, Operation::CERTIFY, with_own).await), Tag::UNIQUE_IDENTIFIER);
    verified(&mut tls, &dir, &id, "own").await;
    let own_subject = openssl(&dir, &["x509", "-in", "own.pem", "-noout", "-subject"]);
    assert_eq!(own_subject.replace(' ', ""), "subject=CN=ck-own\n");
    let with_other = [vec![uid(&public)], csr_fields(2, &csr_der)].concat();
    let other = one(&mut tls, Operation::CERTIFY, with_other).await;
    assert_eq!(reason(&other), ResultReason::INVALID_FIELD, "{:?}", other.result_message);

    // Re-certify: a new certificate for the same key, the next version of
    // the certificate's key, linked to the old one both ways; the public
    // key's Certificate Link moves to it.
    let got = ok(&one(&mut tls, Operation::RE_CERTIFY, vec![uid(&cert)]).await);
    let renewed = text_of(&got, Tag::UNIQUE_IDENTIFIER);
    assert_eq!(renewed, "ck-certificate/2");
    let second_serial = verified(&mut tls, &dir, &renewed, "renewed").await;
    assert_ne!(first_serial, second_serial);
    assert_eq!(openssl(&dir, &["x509", "-in", "renewed.pem", "-noout", "-pubkey"]), managed_key);
    let (old_attrs, new_attrs) =
        (attributes(&mut tls, &cert).await, attributes(&mut tls, &renewed).await);
    assert_eq!(links(&old_attrs, LinkType::REPLACEMENT_OBJECT), [renewed.as_str()]);
    assert_eq!(links(&new_attrs, LinkType::REPLACED_OBJECT), [cert.as_str()]);
    assert_eq!(links(&new_attrs, LinkType::PUBLIC_KEY), [public.as_str()]);
    assert_eq!(names(&new_attrs), ["ck-certificate"]);
    assert!(names(&old_attrs).is_empty());
    let certificates = links(&attributes(&mut tls, &public).await, LinkType::CERTIFICATE);
    assert!(certificates.contains(&renewed) && !certificates.contains(&cert), "{certificates:?}");
    let again = one(&mut tls, Operation::RE_CERTIFY, vec![uid(&cert)]).await;
    assert_eq!(reason(&again), ResultReason::ILLEGAL_OPERATION);

    // Neither a symmetric key nor a private key is certified (KMIP 1.4
    // §11.8: Permission Denied; 2.1: Invalid Object Type).
    let aes = ok(&one(
        &mut tls,
        Operation::CREATE,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![
                    attr(
                        "Cryptographic Algorithm",
                        Value::Enumeration(CryptographicAlgorithm::AES.0),
                    ),
                    attr("Cryptographic Length", Value::Integer(256)),
                ],
            ),
        ],
    )
    .await);
    let aes = text_of(&aes, Tag::UNIQUE_IDENTIFIER);
    let refused = one(&mut tls, Operation::CERTIFY, vec![uid(&aes)]).await;
    assert_eq!(reason(&refused), ResultReason::PERMISSION_DENIED);
    let refused =
        certify_in(&mut tls, ProtocolVersion::V2_1, Operation::CERTIFY, vec![uid(&aes)]).await;
    assert_eq!(reason(&refused), ResultReason::INVALID_OBJECT_TYPE);

    // In one batch: Create Key Pair, Certify and Get by the ID Placeholder.
    let pair = vec![Item::structure(
        Tag::COMMON_TEMPLATE_ATTRIBUTE,
        vec![
            attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::EC.0)),
            attr("Cryptographic Length", Value::Integer(384)),
        ],
    )];
    let batch = RequestMessage::new(
        ProtocolVersion::V1_4,
        vec![
            (Operation::CREATE_KEY_PAIR, pair),
            (Operation::CERTIFY, vec![]),
            (Operation::GET, vec![]),
        ],
    );
    let answer = exchange(&mut tls, &batch).await;
    let got = ok(&answer.batch_items[2]);
    let value = Fields::of(got.iter().find(|i| i.tag == Tag::CERTIFICATE).unwrap()).unwrap();
    let der = value.required(Tag::CERTIFICATE_VALUE).unwrap().as_bytes().unwrap().to_vec();
    std::fs::write(dir.join("batch.der"), der).unwrap();
    openssl(&dir, &["x509", "-inform", "DER", "-in", "batch.der", "-out", "batch.pem"]);
    assert!(openssl(&dir, &["verify", "-CAfile", "ca.pem", "batch.pem"]).contains("OK"));

    // Batch Error Continuation Undo takes a Certify back: no certificate,
    // no Certificate Link on the key.
    let (_, undo_public) = ec_pair(&mut tls, "cu-private", "cu-public").await;
    let mut request = RequestMessage::new(
        ProtocolVersion::V1_4,
        vec![
            (
                Operation::CERTIFY,
                vec![
                    uid(&undo_public),
                    Item::structure(
                        Tag::TEMPLATE_ATTRIBUTE,
                        vec![attr("Name", name("undone-certificate"))],
                    ),
                ],
            ),
            (Operation::GET, vec![uid("no-such-key/1")]),
        ],
    );
    request.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
    let undone = exchange(&mut tls, &request).await;
    assert_eq!(undone.batch_items[0].result_status, ResultStatus::OPERATION_UNDONE);
    let gone = one(&mut tls, Operation::GET, vec![uid("undone-certificate/1")]).await;
    assert_eq!(reason(&gone), ResultReason::ITEM_NOT_FOUND);
    assert!(links(&attributes(&mut tls, &undo_public).await, LinkType::CERTIFICATE).is_empty());
}
on_each_store!(certify_issues_what_openssl_verifies_under_the_key_manager_ca);

/// Every key type the key manager certifies, in requests `openssl req`
/// signs (Ed25519, ECDSA on P-256, P-384 and P-521, RSA): read, certified
/// by a CA for the request's own key; changed after signing, cut short or
/// followed by bytes, refused as invalid.
#[test]
fn certificate_requests_are_read_only_when_their_signature_holds() {
    use rampart_kms::pki::{read_certificate_request, Authority, RequestError};
    let temp = crate::common::TempDir::new("csr-kinds");
    let dir = temp.path();
    let (ca, _) = Authority::generate("csr-kinds").unwrap();
    std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
    for (kind, options) in [
        ("ed25519", vec!["-newkey", "ed25519"]),
        ("p256", vec!["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
        ("p384", vec!["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-sha384"]),
        ("p521", vec!["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521", "-sha512"]),
        ("rsa", vec!["-newkey", "rsa:2048"]),
    ] {
        let (key, csr) = (format!("{kind}.key"), format!("{kind}.der"));
        let subject = format!("/CN=csr-{kind}");
        let args = ["req", "-new", "-nodes", "-keyout", &key, "-subj", &subject];
        let out = ["-outform", "DER", "-out", &csr];
        openssl(dir, &[&args[..], &options, &out].concat());
        let der = std::fs::read(dir.join(&csr)).unwrap();
        let request = read_certificate_request(&der).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let cert = ca.issue_for_key(&request.spki, &request.subject, 1).unwrap();
        let (cert_der, cert_pem) = (format!("{kind}.crt.der"), format!("{kind}.crt"));
        std::fs::write(dir.join(&cert_der), cert).unwrap();
        openssl(dir, &["x509", "-inform", "DER", "-in", &cert_der, "-out", &cert_pem]);
        assert_eq!(
            openssl(dir, &["verify", "-CAfile", "ca.pem", &cert_pem]).trim(),
            format!("{cert_pem}: OK")
        );
        let cert_key = openssl(dir, &["x509", "-in", &cert_pem, "-noout", "-pubkey"]);
        let csr_key = openssl(dir, &["req", "-inform", "DER", "-in", &csr, "-noout", "-pubkey"]);
        assert_eq!(cert_key, csr_key, "{kind}");
        // Not for TLS: neither serverAuth nor clientAuth, and no CA.
        let text = openssl(dir, &["x509", "-in", &cert_pem, "-noout", "-text"]);
        assert!(text.contains("Code Signing") && !text.contains("TLS Web"), "{kind}: {text}");
        assert!(text.contains("CA:FALSE"), "{kind}: {text}");

        let at = der.windows(kind.len()).rposition(|w| w == kind.as_bytes()).unwrap();
        let mut changed = der.clone();
        changed[at] ^= 0x20;
        let mut longer = der.clone();
        longer.push(0);
        for bad in [changed, der[..der.len() - 1].to_vec(), longer] {
            let got = read_certificate_request(&bad);
            assert!(matches!(got, Err(RequestError::Invalid(_))), "{kind}: {got:?}");
        }
    }
}
