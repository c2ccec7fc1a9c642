#![allow(clippy::unwrap_used)]
//! No secret leaves a process except where a command exists to print it.
//!
//! One deployment and one volume with known secrets — the passphrases, the
//! volume key, the key-manager binding's passphrase, the root (unseal) key,
//! an exportable key's material and a wrapped value — then every command a
//! user runs, at `RAMPART_LOG=debug`, including failing ones. Every byte
//! they print (but the one stream whose purpose is a secret: `dump
//! --dump-volume-key`, `unlock --print-passphrase`, `kms key export`,
//! `kms key unwrap`), the key server's log, the audit log as the API
//! returns it and the SQLite store are searched for each secret, raw, in
//! hex and in base64 at every alignment.

use crate::helpers::kms_support;

use crate::helpers::serve_support as nbd;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use base64::Engine;
use kms_support::{free_port, TempDir};

const PASSPHRASE: &[u8] = b"leak-check passphrase 7f3a";
const NEW_PASSPHRASE: &[u8] = b"leak-check second passphrase 91c2";
const WRONG_PASSPHRASE: &[u8] = b"leak-check wrong passphrase 55aa";
const WRAPPED_SECRET: &[u8] = b"leak-check wrapped value 0b6e";
const CHEAP_KDF: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Everything searched, and the secrets it must not contain.
#[derive(Default)]
struct Audit {
    secrets: Vec<(String, Vec<u8>)>,
    places: Vec<(String, Vec<u8>)>,
    /// Outputs that exist to show a secret: each must be found to hold one,
    /// which proves the search finds what it looks for.
    intended: Vec<(String, Vec<u8>)>,
}

impl Audit {
    fn secret(&mut self, name: &str, bytes: &[u8]) {
        assert!(bytes.len() >= 16, "{name} is too short to search for");
        self.secrets.push((name.to_owned(), bytes.to_vec()));
    }

    fn place(&mut self, name: impl Into<String>, bytes: &[u8]) {
        self.places.push((name.into(), bytes.to_vec()));
    }

    /// Runs `rampart ARGS` (stdin given, `RAMPART_LOG=debug`), records its
    /// standard error and, unless `secret_stdout`, its standard output.
    fn run(&mut self, args: &[&str], stdin: &[u8], secret_stdout: bool) -> Output {
        let mut child = Command::new(kms_support::rampart_bin())
            .args(args)
            .env("RAMPART_LOG", "debug")
            .env_remove("RAMPART_KMS")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        self.place(format!("stderr of rampart {args:?}"), &out.stderr);
        if secret_stdout {
            self.intended.push((format!("stdout of rampart {args:?}"), out.stdout.clone()));
        } else {
            self.place(format!("stdout of rampart {args:?}"), &out.stdout);
        }
        out
    }

    fn ok(&mut self, args: &[&str], stdin: &[u8], secret_stdout: bool) -> Vec<u8> {
        let out = self.run(args, stdin, secret_stdout);
        assert!(out.status.success(), "rampart {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    fn check(&self) {
        let mut leaks = Vec::new();
        for (secret, bytes) in &self.secrets {
            for (form, needle) in encodings(bytes) {
                for (place, haystack) in &self.places {
                    if contains(haystack, &needle) {
                        leaks.push(format!("{secret} ({form}) in {place}"));
                    }
                }
            }
        }
        assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
        for (what, output) in &self.intended {
            let found = self.secrets.iter().any(|(_, secret)| {
                encodings(secret).iter().any(|(_, needle)| contains(output, needle))
            });
            assert!(found, "the search missed the secret in {what}");
        }
        assert!(self.places.len() > 40, "only {} places searched", self.places.len());
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The secret raw, in hex (both cases), and in standard and URL-safe
/// base64 as it appears inside a longer encoding at each of the three
/// alignments (the characters that depend on neighbouring bytes dropped).
fn encodings(secret: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut forms = vec![
        ("raw".to_owned(), secret.to_vec()),
        ("hex".to_owned(), hex::encode(secret).into_bytes()),
        ("HEX".to_owned(), hex::encode_upper(secret).into_bytes()),
    ];
    let engines = [
        ("base64", base64::engine::general_purpose::STANDARD_NO_PAD),
        ("base64url", base64::engine::general_purpose::URL_SAFE_NO_PAD),
    ];
    for (name, engine) in engines {
        for shift in 0..3usize {
            let mut shifted = vec![0u8; shift];
            shifted.extend_from_slice(secret);
            let text = engine.encode(&shifted);
            let skip = (shift * 4).div_ceil(3) + usize::from(shift > 0);
            let keep = text.len().saturating_sub(skip + 3);
            if keep >= 12 {
                forms.push((
                    format!("{name} at offset {shift}"),
                    text.as_bytes()[skip..skip + keep].to_vec(),
                ));
            }
        }
    }
    forms
}

/// `rampart kms serve` at debug level with its log in a file.
fn start_server(data_dir: &Path, port: u16, log: &Path) -> Child {
    let mut child = Command::new(kms_support::rampart_bin())
        .args(["kms", "serve", "--data-dir", s(data_dir), "--listen", &format!("127.0.0.1:{port}")])
        .env("RAMPART_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("https://"), "server did not start: {line:?}");
    child
}

fn read_all_files(dir: &Path, audit: &mut Audit) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The unseal key file is the one place the root key is meant to be.
        if path.is_file() && name != "unseal.key" {
            audit.place(format!("key server file {name}"), &std::fs::read(&path).unwrap());
        }
    }
}

#[test]
fn no_command_prints_logs_or_stores_a_secret() {
    nbd::require(&["nbdinfo", "cryptsetup"]);
    let dir = TempDir::new("secrets");
    let kms_dir = dir.join("kms");
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let mut audit = Audit::default();

    audit.ok(&["kms", "init", "--data-dir", s(&kms_dir), "--endpoint", &endpoint], b"", false);
    let root =
        hex::decode(std::fs::read_to_string(kms_dir.join("unseal.key")).unwrap().trim()).unwrap();
    audit.secret("the root (unseal) key", &root);
    let server_log = dir.join("kms.log");
    let mut server = start_server(&kms_dir, port, &server_log);
    let admin = kms_dir.join("admin.bundle");
    let host = dir.join("host.bundle");
    let issue = ["kms", "client", "issue", "host1", "--labels", "region=eu", "--out", s(&host)];
    let mut issue = issue.to_vec();
    issue.extend(["--kms", s(&admin)]);
    audit.ok(&issue, b"", false);
    for args in [
        vec![
            "kms",
            "key",
            "create",
            "disk",
            "--allow",
            "label:region=eu",
            "--allow",
            "client:admin",
            "--exportable",
        ],
        vec!["kms", "key", "list"],
        vec!["kms", "key", "show", "disk", "--json"],
        vec!["kms", "client", "list", "--json"],
    ] {
        let mut args = args;
        args.extend(["--kms", s(&admin)]);
        audit.ok(&args, b"", false);
    }
    let material = audit.ok(&["kms", "key", "export", "disk", "--kms", s(&admin)], b"", true);
    audit.secret(
        "an exportable key's material",
        &hex::decode(String::from_utf8(material).unwrap().trim()).unwrap(),
    );

    // A value wrapped and unwrapped through the key manager.
    audit.secret("a wrapped value", WRAPPED_SECRET);
    let wrapped =
        audit.ok(&["kms", "key", "wrap", "disk", "--kms", s(&host)], WRAPPED_SECRET, false);
    let wrapped = String::from_utf8(wrapped).unwrap();
    let unwrapped =
        audit.ok(&["kms", "key", "unwrap", wrapped.trim(), "--kms", s(&host)], b"", true);
    assert_eq!(unwrapped, WRAPPED_SECRET);

    // A volume bound to the key manager, with two passphrases.
    audit.secret("the passphrase", PASSPHRASE);
    audit.secret("the second passphrase", NEW_PASSPHRASE);
    audit.secret("a wrong passphrase", WRONG_PASSPHRASE);
    let pass = dir.file("pass", PASSPHRASE);
    let new_pass = dir.file("new-pass", NEW_PASSPHRASE);
    let wrong = dir.file("wrong", WRONG_PASSPHRASE);
    let vol = dir.join("vol.img");
    let mut format = vec!["format", s(&vol), "--size", "20M", "--key-file", s(&pass), "-q"];
    format.extend_from_slice(CHEAP_KDF);
    format.extend(["--key", "disk", "--kms", s(&host)]);
    audit.ok(&format, b"", false);
    let dumped = audit.ok(
        &["dump", s(&vol), "--json", "--dump-volume-key", "--key-file", s(&pass)],
        b"",
        true,
    );
    let dumped: serde_json::Value = serde_json::from_slice(&dumped).unwrap();
    let volume_key = hex::decode(dumped["volume_key"].as_str().unwrap()).unwrap();
    audit.secret("the volume key", &volume_key);
    let bound = audit.ok(&["unlock", s(&vol), "--print-passphrase", "--kms", s(&host)], b"", true);
    audit.secret("the bound keyslot's passphrase", &bound);

    let backup = dir.join("header.bak");
    let data = dir.file("data", &kms_support_data());
    let copy = dir.join("copy");
    let mut add = vec!["add-key", s(&vol), "--key-file", s(&pass), "--new-key-file", s(&new_pass)];
    add.extend_from_slice(CHEAP_KDF);
    let commands: Vec<Vec<&str>> = vec![
        vec!["dump", s(&vol)],
        vec!["dump", s(&vol), "--json"],
        vec!["test-key", s(&vol), "--key-file", s(&pass)],
        vec!["test-key", s(&vol), "--kms", s(&host), "--token-only"],
        add,
        vec!["token", "export", s(&vol), "--token-id", "0"],
        vec!["header", "backup", s(&vol), s(&backup)],
        vec!["import", s(&vol), s(&data), "--key-file", s(&new_pass)],
        vec!["export", s(&vol), s(&copy), "--kms", s(&host), "--length", "1M"],
        vec!["rewrap", s(&vol), "--kms", s(&host)],
        vec!["unlock", s(&vol), "--kms", s(&host)],
        vec!["uuid", s(&vol)],
        vec!["is-luks", s(&vol)],
    ];
    for args in &commands {
        audit.ok(args, b"", false);
    }
    // Failures must not echo what they were given either.
    for args in [
        vec!["test-key", s(&vol), "--key-file", s(&wrong)],
        vec!["add-key", s(&vol), "--key-file", s(&wrong), "--new-key-file", s(&new_pass)],
        vec!["export", s(&vol), "-", "--key-file", s(&wrong)],
        vec!["kms", "key", "unwrap", "rampart:v1:disk:1:AAAA", "--kms", s(&host)],
    ] {
        let out = audit.run(&args, b"", false);
        assert!(!out.status.success(), "rampart {args:?} succeeded");
    }
    // Headerless (plain) volumes: a raw key file, and passphrases from a
    // line and from `--key-file -`, succeeding and refused.
    let raw_key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5c).collect();
    audit.secret("a plain volume's raw key", &raw_key);
    let raw = dir.file("plain.key", &raw_key);
    let plain = dir.sparse("plain.img", 4 << 20);
    let line = [PASSPHRASE, b"\n"].concat();
    let xts = ["--type", "plain", "--cipher", "aes-xts-plain64", "--key-size", "512"];
    for (args, stdin) in [
        (vec!["import", s(&plain), s(&data), "--key-file", s(&raw)], &b""[..]),
        (vec!["export", s(&plain), s(&copy), "--key-file", s(&raw)], &b""[..]),
        (vec!["import", s(&plain), s(&data), "--hash", "sha256"], &line[..]),
        (vec!["export", s(&plain), s(&copy), "--key-file", "-"], PASSPHRASE),
    ] {
        let mut args = args.clone();
        args.extend(xts);
        audit.ok(&args, stdin, false);
    }
    for (args, stdin) in [
        (vec!["export", s(&plain), "-", "--key-file", s(&raw), "--sector-size", "999"], &b""[..]),
        (vec!["export", s(&plain), "-", "--keyfile-size", "99"], &line[..]),
        (vec!["export", s(&plain), "-", "--hash", "sha256:99"], &line[..]),
    ] {
        let mut args = args.clone();
        args.extend(xts);
        let out = audit.run(&args, stdin, false);
        assert!(!out.status.success(), "rampart {args:?} succeeded");
    }

    // A volume with integrity: its volume key holds the HMAC key too, and
    // a tampered sector's refusal names only where it is.
    let authenticated = dir.join("integrity.img");
    let mut format =
        vec!["format", s(&authenticated), "--size", "24M", "--key-file", s(&pass), "-q"];
    format.extend_from_slice(CHEAP_KDF);
    format.extend(["--integrity", "hmac-sha256", "--sector-size", "4096"]);
    audit.ok(&format, b"", false);
    let dumped = audit.ok(
        &["dump", s(&authenticated), "--json", "--dump-volume-key", "--key-file", s(&pass)],
        b"",
        true,
    );
    let dumped: serde_json::Value = serde_json::from_slice(&dumped).unwrap();
    let integrity_key = hex::decode(dumped["volume_key"].as_str().unwrap()).unwrap();
    assert_eq!(integrity_key.len(), 96, "XTS key and HMAC key");
    audit.secret("an integrity volume's key (XTS and HMAC)", &integrity_key);
    audit.secret("an integrity volume's HMAC key", &integrity_key[64..]);
    let mut add =
        vec!["add-key", s(&authenticated), "--key-file", s(&pass), "--new-key-file", s(&new_pass)];
    add.extend_from_slice(CHEAP_KDF);
    for args in [
        add,
        vec!["import", s(&authenticated), s(&data), "--key-file", s(&pass)],
        vec!["export", s(&authenticated), s(&copy), "--key-file", s(&new_pass), "--length", "1M"],
        vec!["dump", s(&authenticated)],
    ] {
        audit.ok(&args, b"", false);
    }
    let mut image = std::fs::read(&authenticated).unwrap();
    // 4 MiB into the data area, which starts at 16 MiB.
    let in_data = image.len() - (4 << 20);
    image[in_data] ^= 1;
    std::fs::write(&authenticated, &image).unwrap();
    let out = audit.run(&["export", s(&authenticated), "-", "--key-file", s(&pass)], b"", false);
    assert!(!out.status.success(), "a tampered volume exported");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("failed its integrity check"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut change =
        vec!["change-key", s(&vol), "--key-file", s(&new_pass), "--new-key-file", s(&wrong)];
    change.extend_from_slice(CHEAP_KDF);
    audit.ok(&change, b"", false);

    // Served over NBD, read by a real client, stopped with SIGTERM.
    let socket = dir.join("nbd.sock");
    let serve_log = dir.join("serve.log");
    let mut serve = nbd::Serve::start(
        &[s(&vol), "--socket", s(&socket), "--kms", s(&host), "--token-only"],
        serve_log.clone(),
        1,
    );
    let info = nbd::run_limited("nbdinfo", &[serve.uri()], Duration::from_secs(60));
    assert!(info.status.success());
    audit.place("nbdinfo output", &info.stdout);
    serve.stop();
    audit.place("serve log", &std::fs::read(&serve_log).unwrap());

    audit.ok(&["kms", "audit", "--json", "--kms", s(&admin)], b"", false);
    audit.ok(&["kms", "audit", "verify", "--kms", s(&admin)], b"", false);
    let _ = server.kill();
    let _ = server.wait();
    audit.place("key server log", &std::fs::read(&server_log).unwrap());
    read_all_files(&kms_dir, &mut audit);
    audit.check();
}

/// 1 MiB of plaintext for import.
fn kms_support_data() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
}
