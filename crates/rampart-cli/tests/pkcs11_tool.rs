//! OpenSC's `pkcs11-tool` with the PKCS#11 module against a real `rampart
//! kms serve`: it lists the token and its mechanisms, makes AES keys and
//! RSA, EC and Ed25519 key pairs in the key manager, encrypts and decrypts
//! (checked against `openssl enc` with the same key), signs (checked by
//! `openssl` with the public key it reads back), wraps and unwraps keys
//! (checked against pyca/cryptography's RFC 3394), and passes its own
//! `--test`.

use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::common::tool;
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

fn run(setup: &Pkcs11Setup, args: &[&str]) -> Output {
    let out = setup.pkcs11_tool().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "pkcs11-tool {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn logged_in(setup: &Pkcs11Setup, args: &[&str]) -> Output {
    let mut all = vec!["--login", "--pin", PIN];
    all.extend_from_slice(args);
    run(setup, &all)
}

fn openssl(args: &[&str]) -> Output {
    let out = Command::new(tool("openssl")).args(args).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn pkcs11_tool_lists_the_token_and_its_mechanisms() {
    let setup = Pkcs11Setup::start(None);
    let slots = String::from_utf8(run(&setup, &["--list-slots"]).stdout).unwrap();
    assert!(slots.contains("token label        : rampart"), "{slots}");
    assert!(slots.contains("login required"), "{slots}");
    let mechanisms = String::from_utf8(run(&setup, &["--list-mechanisms"]).stdout).unwrap();
    for name in [
        "AES-GCM",
        "AES-CBC-PAD",
        "AES-KEY-WRAP",
        "SHA256-HMAC",
        "RSA-PKCS-OAEP",
        "ECDSA-SHA256",
        "EDDSA",
    ] {
        assert!(mechanisms.contains(name), "{name} missing from:\n{mechanisms}");
    }
}

#[test]
fn pkcs11_tool_encrypts_signs_and_wraps_with_keys_the_key_manager_holds() {
    let setup = Pkcs11Setup::start(None);
    let dir = setup.dir.path();
    let data = dir.join("data");
    std::fs::write(&data, (0..333u32).map(|i| i as u8).collect::<Vec<u8>>()).unwrap();

    // AES-256-CBC-PAD with a known key: openssl enc's ciphertext.
    let key = [0x2Bu8; 32];
    let key_file = dir.join("aes.key");
    std::fs::write(&key_file, key).unwrap();
    logged_in(
        &setup,
        &[
            "--write-object",
            path(&key_file),
            "--type",
            "secrkey",
            "--key-type",
            "AES:32",
            "--label",
            "known",
            "--id",
            "01",
            "--sensitive",
        ],
    );
    let iv = "000102030405060708090a0b0c0d0e0f";
    let enc = dir.join("enc");
    logged_in(
        &setup,
        &[
            "--encrypt",
            "--mechanism",
            "AES-CBC-PAD",
            "--iv",
            iv,
            "--id",
            "01",
            "-i",
            path(&data),
            "-o",
            path(&enc),
        ],
    );
    let expected =
        openssl(&["enc", "-aes-256-cbc", "-K", &hex(&key), "-iv", iv, "-in", path(&data)]).stdout;
    assert_eq!(std::fs::read(&enc).unwrap(), expected, "AES-CBC-PAD against openssl enc");
    let dec = dir.join("dec");
    logged_in(
        &setup,
        &[
            "--decrypt",
            "--mechanism",
            "AES-CBC-PAD",
            "--iv",
            iv,
            "--id",
            "01",
            "-i",
            path(&enc),
            "-o",
            path(&dec),
        ],
    );
    assert_eq!(std::fs::read(&dec).unwrap(), std::fs::read(&data).unwrap());
    // A key made in the key manager round-trips too.
    logged_in(
        &setup,
        &["--keygen", "--key-type", "AES:32", "--label", "made", "--id", "02", "--sensitive"],
    );
    logged_in(
        &setup,
        &[
            "--encrypt",
            "--mechanism",
            "AES-CBC-PAD",
            "--iv",
            iv,
            "--id",
            "02",
            "-i",
            path(&data),
            "-o",
            path(&enc),
        ],
    );
    logged_in(
        &setup,
        &[
            "--decrypt",
            "--mechanism",
            "AES-CBC-PAD",
            "--iv",
            iv,
            "--id",
            "02",
            "-i",
            path(&enc),
            "-o",
            path(&dec),
        ],
    );
    assert_eq!(std::fs::read(&dec).unwrap(), std::fs::read(&data).unwrap());

    // Key pairs made in the key manager; OpenSSL checks each signature
    // with the public key pkcs11-tool reads back (pkcs11-tool 0.23 cannot
    // write an Ed25519 public key out: the SoftHSM2 comparison of
    // pkcs11_mechanisms.rs covers Ed25519).
    for (key_type, id, mechanism, usage, openssl_check) in [
        ("EC:prime256v1", "10", "ECDSA-SHA256", "--usage-sign", Some(&["-sha256"][..])),
        (
            "rsa:2048",
            "11",
            "SHA256-RSA-PKCS-PSS",
            "--usage-sign",
            Some(
                &["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:-1"][..],
            ),
        ),
        ("rsa:2048", "12", "SHA256-RSA-PKCS", "--usage-decrypt", Some(&["-sha256"][..])),
        ("EC:edwards25519", "13", "EDDSA", "--usage-sign", None),
    ] {
        let label = format!("pair-{id}");
        let mut generate = vec![
            "--keypairgen",
            "--key-type",
            key_type,
            "--label",
            &label,
            "--id",
            id,
            "--usage-sign",
            "--sensitive",
        ];
        if usage != "--usage-sign" {
            generate.push(usage);
        }
        logged_in(&setup, &generate);
        let signature = dir.join(format!("sig-{id}"));
        logged_in(
            &setup,
            &[
                "--sign",
                "--mechanism",
                mechanism,
                "--id",
                id,
                "-i",
                path(&data),
                "-o",
                path(&signature),
                "--signature-format",
                "openssl",
            ],
        );
        logged_in(
            &setup,
            &[
                "--verify",
                "--mechanism",
                mechanism,
                "--id",
                id,
                "-i",
                path(&data),
                "--signature-file",
                path(&signature),
                "--signature-format",
                "openssl",
            ],
        );
        let Some(digest_args) = openssl_check else { continue };
        let public = dir.join(format!("pub-{id}.der"));
        run(&setup, &["--read-object", "--type", "pubkey", "--id", id, "-o", path(&public)]);
        let mut args = vec!["dgst"];
        args.extend_from_slice(digest_args);
        args.extend([
            "-keyform",
            "DER",
            "-verify",
            path(&public),
            "-signature",
            path(&signature),
            path(&data),
        ]);
        let check = Command::new(tool("openssl")).args(&args).output().unwrap();
        assert!(
            check.status.success(),
            "{mechanism}: openssl does not verify: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }

    // Wrapping: a known key-wrapping key wraps a known extractable key
    // as RFC 3394 says; the unwrapped key is the same key.
    let kek = [0x4Cu8; 32];
    let kek_file = dir.join("kek.key");
    std::fs::write(&kek_file, kek).unwrap();
    logged_in(
        &setup,
        &[
            "--write-object",
            path(&kek_file),
            "--type",
            "secrkey",
            "--key-type",
            "AES:32",
            "--label",
            "kek",
            "--id",
            "20",
            "--sensitive",
            "--usage-wrap",
        ],
    );
    let inner = [0x3Du8; 32];
    let inner_file = dir.join("inner.key");
    std::fs::write(&inner_file, inner).unwrap();
    logged_in(
        &setup,
        &[
            "--write-object",
            path(&inner_file),
            "--type",
            "secrkey",
            "--key-type",
            "AES:32",
            "--label",
            "inner",
            "--id",
            "21",
            "--sensitive",
            "--extractable",
        ],
    );
    let wrapped = dir.join("wrapped");
    logged_in(
        &setup,
        &[
            "--wrap",
            "--mechanism",
            "AES-KEY-WRAP",
            "--id",
            "20",
            "--application-id",
            "21",
            "-o",
            path(&wrapped),
        ],
    );
    let python = Command::new(tool("python3"))
        .args(["-c", "import sys\nfrom cryptography.hazmat.primitives.keywrap import aes_key_wrap\nprint(aes_key_wrap(bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])).hex())", &hex(&kek), &hex(&inner)])
        .output()
        .unwrap();
    assert!(python.status.success(), "{}", String::from_utf8_lossy(&python.stderr));
    assert_eq!(
        hex(&std::fs::read(&wrapped).unwrap()),
        String::from_utf8(python.stdout).unwrap().trim()
    );
    logged_in(
        &setup,
        &[
            "--unwrap",
            "--mechanism",
            "AES-KEY-WRAP",
            "--id",
            "20",
            "-i",
            path(&wrapped),
            "--key-type",
            "AES:32",
            "--application-id",
            "22",
            "--application-label",
            "unwrapped",
            "--sensitive",
        ],
    );
    logged_in(
        &setup,
        &[
            "--encrypt",
            "--mechanism",
            "AES-CBC-PAD",
            "--iv",
            iv,
            "--id",
            "22",
            "-i",
            path(&data),
            "-o",
            path(&enc),
        ],
    );
    let expected =
        openssl(&["enc", "-aes-256-cbc", "-K", &hex(&inner), "-iv", iv, "-in", path(&data)]).stdout;
    assert_eq!(std::fs::read(&enc).unwrap(), expected, "the unwrapped key");

    // pkcs11-tool's own test of the token.
    let test = logged_in(&setup, &["--test"]);
    let report = String::from_utf8_lossy(&test.stdout);
    assert!(report.contains("No errors"), "{report}");
}
