#![allow(clippy::unwrap_used)]
//! Java (OpenJDK 17's SunPKCS11 provider) with the PKCS#11 module
//! against a real `rampart kms serve` over KMIP. The Java side is
//! helpers/Pkcs11Java.java, compiled with `javac` into a scratch
//! directory; the provider is configured with `name`, `library` (the
//! module) and `slot = 0`, and the `PKCS11` KeyStore is loaded with the
//! PIN.
//!
//! - An AES-256 key made with `pkcs11-tool --keygen` is a secret-key
//!   entry of the KeyStore; AES/GCM/NoPadding encrypts and decrypts with
//!   it on the key manager, and a ciphertext with one bit flipped fails
//!   with AEADBadTagException.
//! - EC P-256 and RSA-2048 private keys made with `pkcs11-tool
//!   --keypairgen`, each with a certificate of the same CKA_ID written
//!   with `pkcs11-tool --write-object` (SunPKCS11 lists a private key only
//!   with such a certificate), sign with SHA256withECDSA and
//!   SHA256withRSA; Java verifies each signature with the certificate's
//!   public key in its own providers, and `openssl dgst -verify` checks it
//!   with the public key `pkcs11-tool --read-object` exports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::helpers::common::{describe, output, p, text, tool};
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

#[track_caller]
fn succeeded(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&format!("{what} failed"), &out));
    out
}

fn openssl(args: &[&str]) -> Output {
    let mut command = Command::new(tool("openssl"));
    command.args(args);
    output(command)
}

fn pkcs11_tool(setup: &Pkcs11Setup, what: &str, args: &[&str]) -> Output {
    let mut command = setup.pkcs11_tool();
    command.args(args);
    succeeded(&format!("pkcs11-tool {what}"), output(command))
}

/// helpers/Pkcs11Java.java compiled, and the provider's configuration.
struct Java {
    classes: PathBuf,
    provider_config: PathBuf,
}

impl Java {
    fn new(setup: &Pkcs11Setup) -> Self {
        let classes = setup.dir.path().join("classes");
        std::fs::create_dir_all(&classes).unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/Pkcs11Java.java");
        let mut javac = Command::new(tool("javac"));
        javac.arg("-d").arg(&classes).arg(&source);
        succeeded("javac Pkcs11Java.java", output(javac));
        let provider_config = setup.dir.path().join("sunpkcs11.cfg");
        std::fs::write(
            &provider_config,
            format!("name = Rampart\nlibrary = {}\nslot = 0\n", p(&setup.module)),
        )
        .unwrap();
        Self { classes, provider_config }
    }

    /// Runs `Pkcs11Java CONFIG ARGS`; its `ok ...` lines.
    fn run(&self, setup: &Pkcs11Setup, args: &[&str]) -> String {
        let mut java = Command::new(tool("java"));
        java.env("RAMPART_PKCS11_CONFIG", &setup.config)
            .env("PKCS11_PIN", PIN)
            .arg("-cp")
            .arg(&self.classes)
            .arg("Pkcs11Java")
            .arg(&self.provider_config)
            .args(args);
        let out = succeeded(&format!("java Pkcs11Java {args:?}"), output(java));
        text(&out.stdout)
    }
}

#[test]
fn java_keystore_aes_key_encrypts_and_decrypts_gcm_on_the_key_manager() {
    let setup = Pkcs11Setup::start(None);
    pkcs11_tool(
        &setup,
        "--keygen",
        &[
            "--login",
            "--pin",
            PIN,
            "--keygen",
            "--key-type",
            "AES:32",
            "--label",
            "java-aes",
            "--id",
            "41",
            "--sensitive",
        ],
    );
    let java = Java::new(&setup);

    let listed = java.run(&setup, &["list"]);
    assert!(listed.contains("ok alias java-aes secret"), "no secret-key entry java-aes:\n{listed}");

    let said = java.run(&setup, &["aes", "java-aes"]);
    // 127 bytes of plaintext and a 16-byte tag.
    assert!(said.contains("ok aes round trip 143"), "no AES-GCM round trip:\n{said}");
    assert!(
        said.contains("ok aes tampered refused AEADBadTagException"),
        "a flipped bit was not refused with AEADBadTagException:\n{said}"
    );
}

/// A key pair of `key_type` (pkcs11-tool's spelling) with `label` and
/// `id`, and a certificate for its public key (issued by a throwaway CA)
/// written to the token with the same ID and label. Returns the public
/// key's PEM file.
fn pair_with_certificate(setup: &Pkcs11Setup, key_type: &str, label: &str, id: &str) -> PathBuf {
    let dir = setup.dir.path();
    let mut generate = vec!["--login", "--pin", PIN, "--keypairgen", "--key-type", key_type];
    generate.extend(["--label", label, "--id", id, "--usage-sign", "--sensitive"]);
    if key_type.starts_with("rsa") {
        generate.push("--usage-decrypt");
    }
    pkcs11_tool(setup, "--keypairgen", &generate);

    let public_der = dir.join(format!("{label}.pub.der"));
    pkcs11_tool(
        setup,
        "--read-object",
        &["--read-object", "--type", "pubkey", "--id", id, "-o", p(&public_der)],
    );
    let public = dir.join(format!("{label}.pub.pem"));
    succeeded(
        "openssl pkey",
        openssl(&["pkey", "-pubin", "-inform", "der", "-in", p(&public_der), "-out", p(&public)]),
    );

    let (ca_key, ca) = (dir.join("ca.key"), dir.join("ca.pem"));
    if !ca.exists() {
        succeeded(
            "openssl req -x509 (the CA)",
            openssl(&[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                p(&ca_key),
                "-out",
                p(&ca),
                "-subj",
                "/CN=Test CA",
                "-days",
                "2",
            ]),
        );
    }
    let certificate = dir.join(format!("{label}.crt.der"));
    let subject = format!("/CN={label}");
    succeeded(
        "openssl x509 -new (the key's certificate)",
        openssl(&[
            "x509",
            "-new",
            "-subj",
            &subject,
            "-force_pubkey",
            p(&public),
            "-CA",
            p(&ca),
            "-CAkey",
            p(&ca_key),
            "-days",
            "2",
            "-outform",
            "der",
            "-out",
            p(&certificate),
        ]),
    );
    pkcs11_tool(
        setup,
        "--write-object (the certificate, C_CreateObject)",
        &[
            "--login",
            "--pin",
            PIN,
            "--write-object",
            p(&certificate),
            "--type",
            "cert",
            "--id",
            id,
            "--label",
            label,
        ],
    );
    public
}

#[test]
fn java_signs_with_ec_and_rsa_private_keys_of_the_key_manager() {
    let setup = Pkcs11Setup::start(None);
    let ec_public = pair_with_certificate(&setup, "EC:prime256v1", "java-ec", "42");
    let rsa_public = pair_with_certificate(&setup, "rsa:2048", "java-rsa", "43");
    let java = Java::new(&setup);

    let listed = java.run(&setup, &["list"]);
    for alias in ["java-ec", "java-rsa"] {
        assert!(
            listed.contains(&format!("ok alias {alias} private")),
            "no private-key entry {alias}:\n{listed}"
        );
    }

    let message = setup.dir.path().join("message");
    std::fs::write(&message, b"signed by the key manager for Java").unwrap();
    for (alias, algorithm, public, verifier) in [
        ("java-ec", "SHA256withECDSA", &ec_public, "SunEC"),
        ("java-rsa", "SHA256withRSA", &rsa_public, "SunRsaSign"),
    ] {
        let signature = setup.dir.path().join(format!("{alias}.sig"));
        let said = java.run(&setup, &["sign", alias, algorithm, p(&message), p(&signature)]);
        assert!(
            said.contains(&format!("ok signed {algorithm}"))
                && said.contains(&format!("verified by {verifier}")),
            "{alias}: {said}"
        );
        let verified = openssl(&[
            "dgst",
            "-sha256",
            "-verify",
            p(public),
            "-signature",
            p(&signature),
            p(&message),
        ]);
        assert!(
            verified.status.success() && text(&verified.stdout).contains("Verified OK"),
            "{}",
            describe(&format!("openssl dgst -verify of Java's {algorithm} signature"), &verified)
        );
    }
}
