//! Key pairs, signatures and certificates over the REST API, in-process
//! on SQLite and PostgreSQL: EC, RSA and Ed25519 pairs made by
//! `POST /v1/keys`, their signatures by every algorithm checked over REST
//! and again by Python's `cryptography` with the public PEM the API
//! gives; tampered messages refused; the same pair seen and used over
//! KMIP (Get Attributes, Locate, Sign); policy, usage and input errors
//! as 4xx JSON errors, audited; private keys exported as PKCS#8 only
//! when exportable; certificates registered and read back.

use std::process::Command;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use hyper::Method;
use rampart_kmip::enums::{LinkType, ObjectType, Operation};
use rampart_kmip::message::Attribute;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value as TValue};
use rampart_kms::client::{Body, ClientError, KmsClient};
use rampart_kms::model::Labels;
use serde_json::{json, Value};

use crate::common::{fast, Backend};
use crate::kmip_support as support;
use support::{connect, ok, one, Deployment};

fn api_code<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::Api { status, code, message }) => {
            assert!(!message.is_empty());
            (status, code)
        }
        other => panic!("not an API error: {other:?}"),
    }
}

/// A raw JSON request: its status and JSON answer (error or not).
async fn raw(client: &KmsClient, method: Method, path: &str, body: Value) -> (u16, String) {
    let body = Body::Json(Bytes::from(body.to_string()));
    api_code(
        client.call(method, path, body).await.map(|b| String::from_utf8_lossy(&b).into_owned()),
    )
}

/// Checks a signature with Python's `cryptography` and the public PEM.
fn python_verifies(pem: &str, algorithm: &str, message: &[u8], signature: &[u8]) -> bool {
    let script = r#"
import sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, ed25519
from cryptography.exceptions import InvalidSignature
pem, alg, msg, sig = sys.argv[1].encode(), sys.argv[2], bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4])
key = serialization.load_pem_public_key(pem)
h = {"sha256": hashes.SHA256(), "sha384": hashes.SHA384(), "sha512": hashes.SHA512()}
try:
    if alg.startswith("ecdsa-"):
        key.verify(sig, msg, ec.ECDSA(h[alg[6:]]))
    elif alg.startswith("rsa-pss-"):
        d = h[alg[8:]]
        key.verify(sig, msg, padding.PSS(mgf=padding.MGF1(d), salt_length=d.digest_size), d)
    elif alg.startswith("rsa-pkcs1-"):
        key.verify(sig, msg, padding.PKCS1v15(), h[alg[10:]])
    else:
        key.verify(sig, msg)
    print("valid")
except InvalidSignature:
    print("invalid")
"#;
    let out = Command::new("python3")
        .args(["-c", script, pem, algorithm, &hex::encode(message), &hex::encode(signature)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim() == "valid"
}

fn sha256(data: &[u8]) -> Vec<u8> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys,hashlib;print(hashlib.sha256(bytes.fromhex(sys.argv[1])).hexdigest())",
        ])
        .arg(hex::encode(data))
        .output()
        .unwrap();
    hex::decode(String::from_utf8(out.stdout).unwrap().trim()).unwrap()
}

async fn issue(admin: &KmsClient, d: &Deployment, name: &str) -> (KmsClient, rampart_kms::Bundle) {
    let labels = Labels::parse_list("role=test").unwrap();
    let bundle =
        admin.issue_client(name, &labels, false, Some(7), d.admin.endpoints.clone()).await.unwrap();
    (KmsClient::with_policy(&bundle, fast()).unwrap(), bundle)
}

fn signature_of(answer: &Value) -> Vec<u8> {
    B64.decode(answer["signature"].as_str().unwrap()).unwrap()
}

on_each_store!(rest_key_pairs_sign_verify_and_are_kmip_objects);

async fn rest_key_pairs_sign_verify_and_are_kmip_objects(backend: Backend) {
    let d = Deployment::on(backend, "rest-pairs").await;
    let admin = KmsClient::with_policy(&d.admin, fast()).unwrap();
    let (signer, signer_bundle) = issue(&admin, &d, "signer").await;
    let (outsider, _) = issue(&admin, &d, "outsider").await;
    let allow = ["client:signer".to_owned()];

    // Pairs of each family: the private key as named, the public key .pub.
    let ec = admin.create_typed_key("sig-ec", "ec-p256", &allow, false).await.unwrap();
    assert_eq!(ec.object.object_type, "private-key");
    assert_eq!(ec.object.key_type.as_deref(), Some("ec-p256"));
    assert_eq!(ec.object.curve.as_deref(), Some("P-256"));
    assert_eq!(ec.object.length, Some(256));
    assert_eq!(ec.object.public_key.as_deref(), Some("sig-ec.pub"));
    assert_eq!(ec.key.allow.len(), 1);
    let public = admin.describe_key("sig-ec.pub").await.unwrap();
    assert_eq!(public.object.object_type, "public-key");
    assert_eq!(public.object.private_key.as_deref(), Some("sig-ec"));
    let rsa = admin.create_typed_key("sig-rsa", "rsa-2048", &allow, true).await.unwrap();
    assert_eq!(rsa.object.algorithm.as_deref(), Some("rsa"));
    assert_eq!(rsa.object.length, Some(2048));
    let ed = admin.create_typed_key("sig-ed", "ed25519", &allow, false).await.unwrap();
    assert_eq!(ed.object.key_type.as_deref(), Some("ed25519"));
    // The default type is still an AES-256 key.
    let aes = admin.create_typed_key("plain", "aes-256", &allow, false).await.unwrap();
    assert_eq!(aes.object.object_type, "symmetric-key");
    assert_eq!(aes.object.key_type.as_deref(), Some("aes-256"));
    // Every object listed with its type.
    let page = admin.key_view_page(&Default::default(), None).await.unwrap();
    let types: Vec<(String, String)> =
        page.items.iter().map(|k| (k.key.name.clone(), k.object.object_type.clone())).collect();
    for (name, t) in [
        ("plain", "symmetric-key"),
        ("sig-ec", "private-key"),
        ("sig-ec.pub", "public-key"),
        ("sig-rsa.pub", "public-key"),
        ("sig-ed", "private-key"),
    ] {
        assert!(types.contains(&(name.into(), t.into())), "{name} {t} not in {types:?}");
    }

    let message = b"release 1.2.3 of everything".to_vec();
    let mut tampered = message.clone();
    tampered[0] ^= 1;
    for (key, algorithms) in [
        ("sig-ec", &["", "ecdsa-sha256", "ecdsa-sha384", "ecdsa-sha512"][..]),
        (
            "sig-rsa",
            &["", "rsa-pss-sha256", "rsa-pss-sha512", "rsa-pkcs1-sha256", "rsa-pkcs1-sha384"],
        ),
        ("sig-ed", &["", "ed25519"]),
    ] {
        let pem = signer.public_key(key).await.unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
        assert_eq!(pem, signer.public_key(&format!("{key}.pub")).await.unwrap());
        for algorithm in algorithms {
            let named = (!algorithm.is_empty()).then_some(*algorithm);
            let signed = signer.sign(key, &message, false, named).await.unwrap();
            let used = signed["algorithm"].as_str().unwrap().to_owned();
            let signature = signature_of(&signed);
            assert!(python_verifies(&pem, &used, &message, &signature), "{key} {used}");
            assert!(!python_verifies(&pem, &used, &tampered, &signature), "{key} {used}");
            for verifier in [key.to_owned(), format!("{key}.pub")] {
                let v = signer.verify(&verifier, &message, false, named, &signature).await.unwrap();
                assert_eq!(v["valid"], true, "{key} {used} {v}");
                assert_eq!(v["verified_with"], format!("{key}.pub/1"));
                let v =
                    signer.verify(&verifier, &tampered, false, named, &signature).await.unwrap();
                assert_eq!(v["valid"], false, "{key} {used} {v}");
            }
        }
    }
    // A digest signed is the message's signature.
    let digest = sha256(&message);
    let signed = signer.sign("sig-ec", &digest, true, Some("ecdsa-sha256")).await.unwrap();
    let pem = signer.public_key("sig-ec").await.unwrap();
    assert!(python_verifies(&pem, "ecdsa-sha256", &message, &signature_of(&signed)));
    let v = signer.verify("sig-ec", &message, false, None, &signature_of(&signed)).await.unwrap();
    assert_eq!(v["valid"], true);

    // Refused: outside the allow list (admins too), audited as denied.
    assert_eq!(api_code(outsider.sign("sig-ec", &message, false, None).await).0, 403);
    assert_eq!(api_code(outsider.public_key("sig-ec").await).0, 403);
    assert_eq!(api_code(admin.sign("sig-ec", &message, false, None).await).0, 403);
    let ops = d.audit_ops().await;
    assert!(
        ops.iter().any(|(c, o, r)| c == "outsider" && o == "key.sign" && r == "denied"),
        "{ops:?}"
    );
    assert!(ops.iter().any(|(c, o, r)| c == "signer" && o == "key.sign" && r == "ok"));
    assert!(ops.iter().any(|(c, o, r)| c == "signer" && o == "key.verify" && r == "ok"));

    // Bad input: 4xx JSON errors, never a 500.
    let wrong = [
        (Method::POST, "/v1/keys", json!({ "name": "x", "type": "dsa-1024" }), 400),
        (Method::POST, "/v1/keys", json!({ "name": "y".repeat(126), "type": "ec-p256" }), 400),
        (Method::POST, "/v1/keys", json!({ "name": "sig-ec", "type": "ec-p256" }), 409),
        (Method::POST, "/v1/keys/sig-ec/sign", json!({ "message": "!!not base64" }), 400),
        (Method::POST, "/v1/keys/sig-ec/sign", json!({}), 400),
        (Method::POST, "/v1/keys/sig-ec/sign", json!({ "message": "AA==", "digest": "AA==" }), 400),
        (
            Method::POST,
            "/v1/keys/sig-ec/sign",
            json!({ "message": "AA==", "algorithm": "md5" }),
            400,
        ),
        (
            Method::POST,
            "/v1/keys/sig-ec/sign",
            json!({ "message": B64.encode(vec![0u8; 130 * 1024]) }),
            400,
        ),
        (
            Method::POST,
            "/v1/keys/sig-ec/sign",
            json!({ "message": "AA==", "algorithm": "rsa-pss-sha256" }),
            400,
        ),
        (Method::POST, "/v1/keys/sig-ec/sign", json!({ "digest": "AAAA" }), 400),
        (Method::POST, "/v1/keys/sig-ed/sign", json!({ "digest": B64.encode(&digest) }), 400),
        (Method::POST, "/v1/keys/sig-ec.pub/sign", json!({ "message": "AA==" }), 400),
        (Method::POST, "/v1/keys/plain/sign", json!({ "message": "AA==" }), 400),
        (
            Method::POST,
            "/v1/keys/plain/verify",
            json!({ "message": "AA==", "signature": "AA==" }),
            400,
        ),
        (
            Method::POST,
            "/v1/keys/sig-ec/verify",
            json!({ "message": "AA==", "signature": "%%" }),
            400,
        ),
        (Method::POST, "/v1/keys/sig-ec/verify", json!({ "message": "AA==" }), 400),
        (Method::POST, "/v1/keys/nope/sign", json!({ "message": "AA==" }), 404),
        (Method::GET, "/v1/keys/plain/public", json!({}), 400),
        (Method::POST, "/v1/keys/sig-ec/public", json!({}), 405),
    ];
    for (method, path, body, status) in wrong {
        let client = if path == "/v1/keys" { &admin } else { &signer };
        let (got, code) = raw(client, method.clone(), path, body.clone()).await;
        assert_eq!(got, status, "{method} {path} {body}: {code}");
    }
    // A REST rotation would give a pair an AES version: refused.
    assert_eq!(api_code(admin.rotate_key("sig-ec").await).0, 400);

    // Export by policy: a non-exportable private key is refused, an
    // exportable one comes as PKCS#8 (and its public key matches).
    assert_eq!(api_code(signer.export_key("sig-ec", None).await).0, 403);
    let exported = signer
        .call_json::<Value>(Method::POST, "/v1/keys/sig-rsa/export", Some(json!({})))
        .await
        .unwrap();
    assert_eq!(exported["type"], "private-key");
    assert_eq!(exported["format"], "pkcs8");
    let private_pem = exported["pem"].as_str().unwrap();
    assert!(private_pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
    let derived = Command::new("python3")
        .args(["-c", "import sys\nfrom cryptography.hazmat.primitives import serialization as s\nk=s.load_pem_private_key(sys.argv[1].encode(), None)\nprint(k.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo).decode(), end='')", private_pem])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(derived.stdout).unwrap(),
        signer.public_key("sig-rsa").await.unwrap()
    );

    // Certificates: registered (PEM), read back, listed, public key given.
    let cert = rcgen::generate_simple_self_signed(vec!["web.example".into()]).unwrap();
    let cert_pem = cert.cert.pem();
    let view = admin.register_certificate(Some("web-cert"), &cert_pem, &allow).await.unwrap();
    assert_eq!(view.object.object_type, "certificate");
    assert_eq!(view.object.algorithm.as_deref(), Some("ec"));
    let got = signer.get_certificate("web-cert").await.unwrap();
    assert_eq!(
        got["pem"].as_str().unwrap().replace("\r\n", "\n").trim(),
        cert_pem.replace("\r\n", "\n").trim()
    );
    assert!(got["subject"].as_str().unwrap().contains("CN="), "{got}");
    assert!(signer.public_key("web-cert").await.unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));
    assert_eq!(api_code(outsider.get_certificate("web-cert").await).0, 403);
    let der_b64 = B64.encode(cert.cert.der());
    let unnamed = admin.register_certificate(None, &der_b64, &[]).await.unwrap();
    assert!(unnamed.key.name.starts_with("cert-"), "{}", unnamed.key.name);
    for bad in
        ["", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "bm90IGEgY2VydA=="]
    {
        let (status, _) =
            raw(&admin, Method::POST, "/v1/certificates", json!({ "certificate": bad })).await;
        assert_eq!(status, 400, "{bad}");
    }
    assert_eq!(raw(&admin, Method::GET, "/v1/certificates/sig-ec", json!({})).await.0, 400);

    // The same pair over KMIP: its objects, attributes and links, found by
    // name, and a KMIP Sign that the REST API verifies.
    let mut tls = connect(&signer_bundle, &d.kmip, &rustls::version::TLS13).await;
    let got = ok(&one(
        &mut tls,
        Operation::GET_ATTRIBUTES,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, "sig-ec/1")],
    )
    .await);
    let attributes: Vec<Attribute> = got
        .iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .map(|i| Attribute::parse(i).unwrap())
        .collect();
    let value = |name: &str| {
        attributes.iter().find(|a| a.name == name).and_then(|a| a.value.clone()).unwrap()
    };
    assert_eq!(value("Object Type").as_enum().unwrap(), ObjectType::PRIVATE_KEY.0);
    assert_eq!(value("Name").children().unwrap()[0].as_text().unwrap(), "sig-ec");
    let link = value("Link");
    let f = Fields::of(&link).unwrap();
    assert_eq!(f.required(Tag::LINK_TYPE).unwrap().as_enum().unwrap(), LinkType::PUBLIC_KEY.0);
    let linked = f.required(Tag::LINKED_OBJECT_IDENTIFIER).unwrap().as_text().unwrap().to_owned();
    assert_eq!(linked, "sig-ec.pub/1");
    let name = TValue::Structure(vec![
        Item::text(Tag::NAME_VALUE, "sig-ec"),
        Item::enumeration(Tag::NAME_TYPE, 1),
    ]);
    let located =
        ok(&one(&mut tls, Operation::LOCATE, vec![Attribute::new("Name", name).to_item()]).await);
    let uids: Vec<&str> = located
        .iter()
        .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
        .map(|i| i.as_text().unwrap())
        .collect();
    assert_eq!(uids, ["sig-ec/1"]);
    let params = Item::structure(
        Tag::CRYPTOGRAPHIC_PARAMETERS,
        vec![Item::enumeration(Tag::DIGITAL_SIGNATURE_ALGORITHM, 0x0E)], // ECDSA with SHA-256
    );
    let kmip_signed = ok(&one(
        &mut tls,
        Operation::SIGN,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, "sig-ec/1"),
            params,
            Item::bytes(Tag::DATA, &message),
        ],
    )
    .await);
    let kmip_signature = kmip_signed
        .iter()
        .find(|i| i.tag == Tag::SIGNATURE_DATA)
        .unwrap()
        .as_bytes()
        .unwrap()
        .to_vec();
    let v = signer
        .verify("sig-ec", &message, false, Some("ecdsa-sha256"), &kmip_signature)
        .await
        .unwrap();
    assert_eq!(v["valid"], true, "{v}");

    // An opaque object registered over KMIP: listed with its type, and,
    // once active, exported raw by policy to the client it allows.
    let opaque = Item::structure(
        Tag::OPAQUE_OBJECT,
        vec![
            Item::enumeration(Tag::OPAQUE_DATA_TYPE, 0x8000_0001),
            Item::bytes(Tag::OPAQUE_DATA_VALUE, b"opaque bytes"),
        ],
    );
    let registered = ok(&one(
        &mut tls,
        Operation::REGISTER,
        vec![Item::enumeration(Tag::OBJECT_TYPE, ObjectType::OPAQUE_OBJECT.0), opaque],
    )
    .await);
    let uid = registered.iter().find(|i| i.tag == Tag::UNIQUE_IDENTIFIER).unwrap();
    let uid = uid.as_text().unwrap().to_owned();
    let name = uid.rsplit_once('/').unwrap().0.to_owned();
    assert_eq!(admin.describe_key(&name).await.unwrap().object.object_type, "opaque-object");
    assert_eq!(api_code(signer.export_key(&name, None).await).0, 403, "Pre-Active");
    ok(&one(&mut tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let (_, material) = signer.export_key(&name, None).await.unwrap();
    assert_eq!(material.expose(), b"opaque bytes");
    assert_eq!(api_code(outsider.export_key(&name, None).await).0, 403);
}
