//! `rampart kms key` with key pairs, as a user runs it against a real
//! `rampart kms serve` (with KMIP) on SQLite and PostgreSQL: EC P-256 and
//! RSA-2048 pairs made over REST, signatures made over REST checked by
//! `openssl dgst -verify` with the PEM `kms key public` prints, tampered
//! messages refused by `kms key verify` (exit 1, one line) and by
//! OpenSSL, a digest signed for a message, a client outside the allow
//! list refused and audited, the pair found and read over KMIP by PyKMIP,
//! and a certificate imported and read back.

use crate::helpers::kms_support as support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{
    free_port, issue_client, json_lines, ok, rampart, rampart_in, ServerProcess, TempDir,
};

fn openssl(args: &[&str]) -> std::process::Output {
    Command::new("openssl").args(args).output().expect("openssl is installed")
}

fn python() -> String {
    std::env::var("RAMPART_PYKMIP_PYTHON")
        .unwrap_or_else(|_| "/opt/rampart-pykmip/bin/python".into())
}

/// PyKMIP's view (pykmip_probe.py) of the steps, as the client whose PEM
/// files are in `pem`.
fn pykmip(kmip: &str, pem: &Path, steps: &[&str]) -> Value {
    let (host, port) = kmip.rsplit_once(':').unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/pykmip_probe.py");
    let out = Command::new(python())
        .arg(script)
        .args([host, port])
        .args(["cert.pem", "key.pem", "ca.pem"].map(|f| pem.join(f)))
        .args(steps)
        .output()
        .expect("PyKMIP is installed (scripts/test)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

support::on_each_store!(key_pairs_sign_over_rest_and_verify_with_openssl, "keypairs");

fn key_pairs_sign_over_rest_and_verify_with_openssl(store: Option<&str>) {
    let tmp = TempDir::new(if store.is_some() { "pairs-pg" } else { "pairs-sqlite" });
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let mut init = vec!["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint];
    if let Some(store) = store {
        init.extend(["--store", store]);
    }
    ok(&init);
    let server = ServerProcess::start_kmip(&dir, port, free_port(), store);
    let kmip = server.kmip.clone().unwrap();
    let admin = dir.join("admin.bundle").display().to_string();
    let signer = tmp.join("signer.bundle").display().to_string();
    let outsider = tmp.join("outsider.bundle").display().to_string();
    issue_client(&admin, "signer", "role=signer", &signer);
    issue_client(&admin, "outsider", "role=other", &outsider);
    let file = |name: &str| tmp.join(name).display().to_string();

    let created = ok(&[
        "kms",
        "key",
        "create",
        "sig-ec",
        "--type",
        "ec-p256",
        "--allow",
        "label:role=signer",
        "--json",
        "--kms",
        &admin,
    ]);
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["type"], "private-key", "{created}");
    assert_eq!(created["curve"], "P-256", "{created}");
    assert_eq!(created["public_key"], "sig-ec.pub", "{created}");
    ok(&[
        "kms",
        "key",
        "create",
        "sig-rsa",
        "--type",
        "rsa-2048",
        "--allow",
        "label:role=signer",
        "--kms",
        &admin,
    ]);
    let show = ok(&["kms", "key", "show", "sig-rsa", "--kms", &admin]);
    assert!(show.contains("type:       private-key") && show.contains("rsa-2048"), "{show}");
    assert!(show.contains("public key: sig-rsa.pub"), "{show}");
    let list = ok(&["kms", "key", "list", "--kms", &admin]);
    assert!(list.lines().next().unwrap().contains("TYPE"), "{list}");
    assert!(
        list.lines().any(|l| l.starts_with("sig-ec.pub ")
            && l.contains("public-key")
            && l.contains("ec-p256")),
        "{list}"
    );
    let listed = json_lines(ok(&["kms", "key", "list", "--json", "--kms", &admin]));
    let types: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap().into(), k["type"].as_str().unwrap().into()))
        .collect();
    assert!(types.contains(&("sig-rsa.pub".into(), "public-key".into())), "{types:?}");

    let message = file("msg");
    let tampered = file("tampered");
    std::fs::write(&message, b"release 1.2.3\n").unwrap();
    std::fs::write(&tampered, b"release 1.2.4\n").unwrap();
    let pss = ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:-1"];
    for (key, algorithm, options) in [
        ("sig-ec", "ecdsa-sha256", &[][..]),
        ("sig-rsa", "rsa-pss-sha256", &pss[..]),
        ("sig-rsa", "rsa-pkcs1-sha256", &[][..]),
    ] {
        let pem = file(&format!("{key}.pem"));
        std::fs::write(&pem, ok(&["kms", "key", "public", key, "--kms", &signer])).unwrap();
        // Base64 to a file, and raw bytes from standard input.
        let signed = ok(&[
            "kms",
            "key",
            "sign",
            key,
            "--algorithm",
            algorithm,
            "--in",
            &message,
            "--kms",
            &signer,
        ]);
        let b64 = file("sig.b64");
        std::fs::write(&b64, signed.trim()).unwrap();
        let raw = rampart_in(
            &["kms", "key", "sign", key, "--algorithm", algorithm, "--raw", "--kms", &signer],
            &std::fs::read(&message).unwrap(),
        );
        assert!(raw.status.success(), "{}", String::from_utf8_lossy(&raw.stderr));
        let sig = file("sig.bin");
        std::fs::write(&sig, &raw.stdout).unwrap();
        for signature in [&sig, &file("sig.b64.der")] {
            if signature.ends_with(".der") {
                use base64::Engine as _;
                let der = base64::engine::general_purpose::STANDARD.decode(signed.trim()).unwrap();
                std::fs::write(signature, der).unwrap();
            }
            let mut args = vec!["dgst", "-sha256", "-verify", &pem];
            args.extend(options);
            args.extend(["-signature", signature]);
            let good = openssl(&[&args[..], &[message.as_str()]].concat());
            assert!(
                good.status.success(),
                "{key} {algorithm}: {}",
                String::from_utf8_lossy(&good.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&good.stdout).trim(), "Verified OK");
            let bad = openssl(&[&args[..], &[tampered.as_str()]].concat());
            assert!(!bad.status.success(), "{key} {algorithm}: OpenSSL took a tampered message");
        }
        let verified = ok(&[
            "kms",
            "key",
            "verify",
            key,
            "--algorithm",
            algorithm,
            "--signature",
            &b64,
            "--in",
            &message,
            "--kms",
            &signer,
        ]);
        assert!(verified.contains("signature verifies"), "{verified}");
        // The public key's name, and the signature as base64 text.
        ok(&[
            "kms",
            "key",
            "verify",
            &format!("{key}.pub"),
            "--algorithm",
            algorithm,
            "--signature",
            signed.trim(),
            "--in",
            &message,
            "--kms",
            &signer,
        ]);
        let refused = rampart(&[
            "kms",
            "key",
            "verify",
            key,
            "--algorithm",
            algorithm,
            "--signature",
            &sig,
            "--in",
            &tampered,
            "--kms",
            &signer,
        ]);
        assert_eq!(refused.status.code(), Some(1), "{key} {algorithm}");
        let err = String::from_utf8(refused.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("does not verify"), "{err}");
        let json = rampart(&[
            "kms",
            "key",
            "verify",
            key,
            "--algorithm",
            algorithm,
            "--signature",
            &sig,
            "--in",
            &tampered,
            "--json",
            "--kms",
            &signer,
        ]);
        assert_eq!(json.status.code(), Some(1));
        let answer: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(answer["valid"], false, "{answer}");
    }

    // A digest (raw bytes) signed: the message's signature for OpenSSL.
    let digest = file("msg.sha256");
    let out = openssl(&["dgst", "-sha256", "-binary", "-out", &digest, &message]);
    assert!(out.status.success());
    let signed = rampart(&[
        "kms", "key", "sign", "sig-ec", "--digest", "--raw", "--in", &digest, "--kms", &signer,
    ]);
    assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
    std::fs::write(file("digest.sig"), &signed.stdout).unwrap();
    let good = openssl(&[
        "dgst",
        "-sha256",
        "-verify",
        &file("sig-ec.pem"),
        "-signature",
        &file("digest.sig"),
        &message,
    ]);
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));

    // Outside the allow list: refused (exit 2, one line) and audited.
    let refused = rampart_in(&["kms", "key", "sign", "sig-ec", "--kms", &outsider], b"data");
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not allowed"), "{err}");
    assert_eq!(
        rampart(&["kms", "key", "public", "sig-ec", "--kms", &outsider]).status.code(),
        Some(2)
    );
    let audit = json_lines(ok(&["kms", "audit", "--json", "--kms", &admin]));
    let entries = audit.as_array().unwrap();
    let has = |client: &str, op: &str, outcome: &str| {
        entries.iter().any(|e| {
            e["client"] == client
                && e["operation"] == op
                && e["outcome"] == outcome
                && e["key"] == "sig-ec"
        })
    };
    assert!(has("outsider", "key.sign", "denied"), "{audit}");
    assert!(has("signer", "key.sign", "ok"), "{audit}");
    assert!(has("signer", "key.verify", "ok"), "{audit}");

    // The same objects over KMIP, seen by PyKMIP as the signer.
    let pem_dir = tmp.join("signer-pem");
    ok(&["kms", "client", "pem", "--out-dir", &pem_dir.display().to_string(), "--kms", &signer]);
    let v = pykmip(
        &kmip,
        &pem_dir,
        &["locate-name:sig-ec", "type:sig-ec/1", "type:sig-ec.pub/1", "get:sig-ec.pub/1"],
    );
    assert_eq!(v["locate-name:sig-ec"], serde_json::json!(["sig-ec/1"]), "{v}");
    // Not exportable over REST, not extractable over KMIP either.
    assert_eq!(
        v["type:sig-ec/1"],
        serde_json::json!(["OPERATION_FAILED", "NOT_EXTRACTABLE"]),
        "{v}"
    );
    assert_eq!(v["type:sig-ec.pub/1"], "PUBLIC_KEY", "{v}");
    assert!(v["get:sig-ec.pub/1"].as_u64().unwrap() > 60, "{v}");

    // A certificate imported and read back.
    let (cert, key) = (file("cert.pem"), file("cert.key"));
    let made = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &cert,
        "-subj",
        "/CN=web.example",
        "-days",
        "30",
    ]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let imported = ok(&[
        "kms",
        "key",
        "import-certificate",
        "web",
        "--in",
        &cert,
        "--allow",
        "label:role=signer",
        "--kms",
        &admin,
    ]);
    assert!(imported.contains("type:       certificate"), "{imported}");
    let back = ok(&["kms", "key", "certificate", "web", "--kms", &signer]);
    assert_eq!(back.trim(), std::fs::read_to_string(&cert).unwrap().trim());
    let details: Value = serde_json::from_str(&ok(&[
        "kms",
        "key",
        "certificate",
        "web",
        "--json",
        "--kms",
        &signer,
    ]))
    .unwrap();
    assert!(details["subject"].as_str().unwrap().contains("web.example"), "{details}");
    assert!(ok(&["kms", "key", "public", "web", "--kms", &signer])
        .starts_with("-----BEGIN PUBLIC KEY-----"));
    ok(&["kms", "audit", "verify", "--kms", &admin]);
}
