//! PyKMIP's client (PyPI `pykmip`, the independent reference
//! implementation, in the virtual environment scripts/test makes; its
//! interpreter is `$RAMPART_PYKMIP_PYTHON`, default
//! /opt/rampart-pykmip/bin/python) against the KMIP front end over TLS 1.2
//! with an admin bundle's certificate, key and CA: Discover Versions (all
//! and negotiated) and Query in KMIP 1.2, 1.4 and 2.0, every object type,
//! a signature and a Re-key Key Pair whose new pair signs, and operations the
//! front end does not serve (and an unknown object), which PyKMIP must
//! receive as well-formed failures with a Result Reason; a KMIP 1.4
//! Template registered and used; Derive Key by SP 800-108 feedback mode
//! and by ENCRYPT. The results are checked, not just the
//! status. A missing PyKMIP fails the test.

use std::path::Path;
use std::process::Command;

use crate::kmip_support as support;
use support::Deployment;

fn python() -> String {
    std::env::var("RAMPART_PYKMIP_PYTHON")
        .unwrap_or_else(|_| "/opt/rampart-pykmip/bin/python".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pykmip_queries_gets_result_reasons_and_keeps_every_object_type() {
    let d = Deployment::new("pykmip").await;
    let files = d.dir.join("client");
    support::write_pem_files(&d.admin, &files);
    let (host, port) = d.kmip.rsplit_once(':').unwrap();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kmip/pykmip_driver.py");
    let python = python();
    let files2 = files.clone();
    let (host, port) = (host.to_owned(), port.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg(driver)
            .args([&host, &port])
            .args(["cert.pem", "key.pem", "ca.pem"].map(|f| files2.join(f)))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {python} (scripts/test installs PyKMIP): {e}"))
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the PyKMIP driver failed:\n{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = serde_json::json!([[2, 1], [2, 0], [1, 4], [1, 3], [1, 2], [1, 1], [1, 0]]);
    for version in ["1.2", "1.4", "2.0"] {
        let r = &v[version];
        assert_eq!(r["tls"], "TLSv1.2", "{version}: {r}");
        assert_eq!(r["discover_status"], "SUCCESS", "{version}: {r}");
        assert_eq!(r["versions"], all, "{version}: {r}");
        assert_eq!(r["asked_versions"], serde_json::json!([[1, 3], [1, 1]]), "{version}: {r}");
        assert_eq!(r["query_status"], "SUCCESS", "{version}: {r}");
        // Interop is listed only by a server started for interop testing,
        // Log and Set Attribute only to a KMIP 2.x client.
        use rampart_kmip::enums::Operation;
        let served: Vec<String> = rampart_kms::server::kmip::OPERATIONS
            .iter()
            .filter(|op| **op != Operation::INTEROP)
            .filter(|op| {
                ![Operation::LOG, Operation::SET_ATTRIBUTE, Operation::ADJUST_ATTRIBUTE]
                    .contains(op)
                    || version == "2.0"
            })
            .map(|op| op.name().unwrap().to_ascii_uppercase().replace([' ', '-'], "_"))
            // PyKMIP spells Re-key and Re-certify without the underscore.
            .map(|n| n.replace("RE_KEY", "REKEY").replace("RE_CERTIFY", "RECERTIFY"))
            .collect();
        assert_eq!(r["operations"], serde_json::json!(served), "{version}: {r}");
        // KMIP 1.x Templates are listed to a 1.x client only.
        let mut types = vec![
            "CERTIFICATE",
            "SYMMETRIC_KEY",
            "PUBLIC_KEY",
            "PRIVATE_KEY",
            "SPLIT_KEY",
            "SECRET_DATA",
            "OPAQUE_DATA",
        ];
        if version != "2.0" {
            types.push("TEMPLATE");
        }
        assert_eq!(r["object_types"], serde_json::json!(types), "{version}: {r}");
        assert_eq!(r["vendor"], "Rampart", "{version}: {r}");
    }
    assert_eq!(
        v["unsupported"]["derive_key"],
        serde_json::json!(["OPERATION_FAILED", "ITEM_NOT_FOUND"]),
        "{v}"
    );
    // Every object type, made or registered by PyKMIP and read back.
    assert_eq!(
        v["objects"],
        serde_json::json!({
            "key_pair": ["PublicKey", "PrivateKey", "X_509", "PKCS_8"],
            "signature_verified_by_cryptography": true,
            "signature_verify": "VALID",
            "signature_verify_tampered": "INVALID",
            "rekey_key_pair": ["SUCCESS", true, true],
            "rekeyed_signature_verified_by_cryptography": true,
            "certificate": true,
            "private_key": true,
            "public_key": true,
            "secret_data": true,
            "opaque_object": true,
            "split_key": [true, 3, 1, 2, "XOR"],
        }),
        "{v}"
    );
    assert_eq!(
        v["unsupported"]["get_unknown"],
        serde_json::json!(["OPERATION_FAILED", "ITEM_NOT_FOUND"]),
        "{v}"
    );
    // A Template registered by PyKMIP's KMIP 1.4 client, read back and
    // named by a Create; a Template Name nothing holds is Item Not Found.
    assert_eq!(
        v["templates"],
        serde_json::json!({
            "register": "SUCCESS",
            "get_type": "Template",
            "get_attributes": ["Cryptographic Algorithm", "Cryptographic Length", "Object Group"],
            "create": "SUCCESS",
            "key_attributes": {"Cryptographic Length": 192, "Object Group": "pykmip-group"},
            "missing_template": ["OPERATION_FAILED", "ITEM_NOT_FOUND"],
        }),
        "{v}"
    );
    // Derive Key by SP 800-108 feedback mode and by ENCRYPT, sent by
    // PyKMIP and checked by it against `hmac` and `cryptography`.
    assert_eq!(v["derivation"], serde_json::json!({"nist800_108_f": true, "encrypt": true}), "{v}");
    // Every PyKMIP request is in the audit chain under the admin identity.
    let audit = d.audit_ops().await;
    let count = |name: &str| audit.iter().filter(|(c, op, _)| c == "admin" && op == name).count();
    assert_eq!(count("kmip.discover_versions"), 6);
    assert_eq!(count("kmip.query"), 3);
    assert_eq!(count("kmip.derive_key"), 3);
    assert_eq!(count("kmip.create_key_pair"), 1);
    assert_eq!(count("kmip.re_key_key_pair"), 1);
    assert_eq!(count("kmip.create"), 2);
    // The unknown object, the key pair's halves, the new public key, six
    // registered objects, two derived ones and the Template.
    assert_eq!(count("kmip.get"), 13);
    assert_eq!(count("kmip.register"), 9);
    assert_eq!(count("kmip.sign"), 2);
    assert_eq!(count("kmip.signature_verify"), 2);
}
