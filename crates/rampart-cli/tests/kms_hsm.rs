#![allow(clippy::unwrap_used)]
//! The key manager's root key in a PKCS#11 token, against a real SoftHSM2
//! (Debian's `softhsm2`, installed by scripts/test) with a private token
//! directory per test: `kms init --hsm-module`, serving with the PIN from
//! a file or through `kms unseal`, wrap/unwrap across restarts, refusals
//! (wrong PIN, unknown token, missing module), and the key object's
//! PKCS#11 attributes read back from the token.

use crate::helpers::kms_support as support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::error::{Error as P11Error, RvError};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass};
use cryptoki::session::UserType;
use cryptoki::types::AuthPin;
use support::{free_port, json_lines, rampart_bin, TempDir};

const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
const TOKEN: &str = "rampart-test";
/// Distinctive, so that a leak into any output is found.
const PIN: &str = "pin-7f3a9c51";
const SO_PIN: &str = "so-pin-0d2e";

/// A SoftHSM2 configuration with its own token directory and one
/// initialised token labelled [`TOKEN`].
struct SoftHsm {
    tmp: TempDir,
    conf: PathBuf,
}

impl SoftHsm {
    fn new(tag: &str) -> Self {
        assert!(
            Path::new(MODULE).exists(),
            "{MODULE} is missing: install Debian's softhsm2 (scripts/test does)"
        );
        let tmp = TempDir::new(tag);
        let tokens = tmp.join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = tmp.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                tokens.display()
            ),
        )
        .unwrap();
        let out = Command::new("softhsm2-util")
            .args(["--init-token", "--free", "--label", TOKEN, "--pin", PIN, "--so-pin", SO_PIN])
            .env("SOFTHSM2_CONF", &conf)
            .output()
            .expect("softhsm2-util (Debian's softhsm2, installed by scripts/test)");
        assert!(out.status.success(), "init-token: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(tmp.join("pin"), format!("{PIN}\n")).unwrap();
        std::fs::write(tmp.join("wrong-pin"), "not-the-pin\n").unwrap();
        Self { tmp, conf }
    }

    fn path(&self, name: &str) -> String {
        self.tmp.join(name).display().to_string()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(rampart_bin());
        command
            .args(args)
            .env("SOFTHSM2_CONF", &self.conf)
            .env_remove("RAMPART_KMS")
            .env_remove("RUST_BACKTRACE")
            .env_remove("CREDENTIALS_DIRECTORY");
        command
    }

    /// Runs `rampart ARGS` with `stdin`.
    fn run_in(&self, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !String::from_utf8_lossy(stream).contains(PIN),
                "the PIN appeared in the output of rampart {args:?}"
            );
        }
        out
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_in(args, b"")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "rampart {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kms init` with the root key in the token; returns the data directory.
    fn init(&self, port: u16) -> PathBuf {
        let dir = self.tmp.join("data");
        let out = self.run(&[
            "kms",
            "init",
            "--data-dir",
            &dir.display().to_string(),
            "--endpoint",
            &format!("127.0.0.1:{port}"),
            "--hsm-module",
            MODULE,
            "--hsm-token",
            TOKEN,
            "--hsm-pin-file",
            &self.path("pin"),
        ]);
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("never extractable"));
        dir
    }

    /// `kms serve` until its address line; `pin_file` unseals at start.
    fn serve(&self, dir: &Path, port: u16, pin_file: Option<&str>) -> Server {
        self.serve_with(dir, port, pin_file, None)
    }

    /// [`SoftHsm::serve`], with systemd's credentials directory.
    fn serve_with(
        &self,
        dir: &Path,
        port: u16,
        pin_file: Option<&str>,
        credentials: Option<&Path>,
    ) -> Server {
        let dir = dir.display().to_string();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["kms", "serve", "--data-dir", &dir, "--listen", &listen];
        if let Some(pin_file) = pin_file {
            args.extend(["--hsm-pin-file", pin_file]);
        }
        let mut command = self.command(&args);
        if let Some(credentials) = credentials {
            command.env("CREDENTIALS_DIRECTORY", credentials);
        }
        // Debug logs, kept to search them for the PIN afterwards.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.join("server.log"))
            .unwrap();
        let mut child =
            command.env("RAMPART_LOG", "debug").stdout(Stdio::piped()).stderr(log).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("https://127.0.0.1:"), "server did not start: {line:?}");
        Server(child)
    }
}

/// A server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn one_line_error(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "wanted '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn status(hsm: &SoftHsm, admin: &str) -> serde_json::Value {
    serde_json::from_str(&hsm.ok(&["kms", "status", "--kms", admin])).unwrap()
}

#[test]
fn hsm_root_key_wraps_across_restarts_and_unseals_with_the_pin() {
    let hsm = SoftHsm::new("kms-hsm");
    let port = free_port();
    let dir = hsm.init(port);
    assert!(!dir.join("unseal.key").exists());
    let recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("hsm.json")).unwrap()).unwrap();
    assert_eq!(recorded["module"], MODULE);
    assert_eq!(recorded["token"], TOKEN);
    let admin = dir.join("admin.bundle").display().to_string();
    let host = hsm.path("host.bundle");

    // Unsealed at start with the PIN file.
    let server = hsm.serve(&dir, port, Some(&hsm.path("pin")));
    let seal = status(&hsm, &admin);
    assert_eq!(seal["sealed"], false, "{seal}");
    assert_eq!(seal["scheme"], "hsm");
    assert_eq!(seal["token"], TOKEN);
    hsm.ok(&["kms", "key", "create", "disk", "--allow", "label:role=host", "--kms", &admin]);
    hsm.ok(&[
        "kms",
        "client",
        "issue",
        "h1",
        "--labels",
        "role=host",
        "--out",
        &host,
        "--kms",
        &admin,
    ]);
    let wrap = |context: &str, plaintext: &[u8]| {
        let out = hsm.run_in(
            &["kms", "key", "wrap", "disk", "--context", context, "--kms", &host],
            plaintext,
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let unwrap = |ciphertext: &str, context: &str| {
        hsm.run(&["kms", "key", "unwrap", ciphertext, "--context", context, "--kms", &host])
    };
    let first = wrap("vol-1", b"volume passphrase \x00\xff");
    assert!(first.starts_with("rampart:v1:disk:1:"), "{first}");
    assert_eq!(unwrap(&first, "vol-1").stdout, b"volume passphrase \x00\xff");
    assert_eq!(unwrap(&first, "vol-2").status.code(), Some(2));
    // A second version, sealed by the token as well.
    hsm.ok(&["kms", "key", "rotate", "disk", "--kms", &admin]);
    let second = wrap("vol-1", b"second");
    assert!(second.starts_with("rampart:v1:disk:2:"), "{second}");
    // The key versions are sealed in the store, never in the clear: the
    // store holds no plaintext and no unseal key file exists.
    drop(server);

    // Restarted without the PIN: sealed until `kms unseal`.
    let server = hsm.serve(&dir, port, None);
    let seal = status(&hsm, &admin);
    assert_eq!(seal["sealed"], true, "{seal}");
    let sealed = hsm.run(&["kms", "key", "list", "--kms", &admin]);
    assert_eq!(sealed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&sealed.stderr).contains("sealed"));
    // A wrong PIN: refused in one line, still sealed.
    let wrong =
        hsm.run(&["kms", "unseal", "--hsm-pin-file", &hsm.path("wrong-pin"), "--kms", &admin]);
    one_line_error(&wrong, 2, "refused the PIN");
    assert_eq!(status(&hsm, &admin)["sealed"], true);
    // A share is not what this deployment takes.
    let share = hsm.run(&["kms", "unseal", "--share", "020101", "--kms", &admin]);
    one_line_error(&share, 2, "HSM");
    // The PIN on standard input (what a prompt reads when not a terminal).
    let unsealed = hsm.run_in(&["kms", "unseal", "--kms", &admin], format!("{PIN}\n").as_bytes());
    assert!(unsealed.status.success(), "{}", String::from_utf8_lossy(&unsealed.stderr));
    assert_eq!(String::from_utf8(unsealed.stdout).unwrap().trim(), "unsealed");
    assert_eq!(status(&hsm, &admin)["sealed"], false);
    // The same ciphertexts open to the same plaintexts.
    assert_eq!(unwrap(&first, "vol-1").stdout, b"volume passphrase \x00\xff");
    assert_eq!(unwrap(&second, "vol-1").stdout, b"second");
    drop(server);

    // Under systemd, the PIN is the credential `hsm-pin`
    // (LoadCredential=hsm-pin:FILE).
    let credentials = hsm.tmp.join("credentials");
    std::fs::create_dir_all(&credentials).unwrap();
    std::fs::copy(hsm.tmp.join("pin"), credentials.join("hsm-pin")).unwrap();
    let _server = hsm.serve_with(&dir, port, None, Some(&credentials));
    assert_eq!(status(&hsm, &admin)["sealed"], false);
    assert_eq!(unwrap(&first, "vol-1").stdout, b"volume passphrase \x00\xff");

    // The audit chain's MACs are made with a key sealed by the token.
    // The PIN is nowhere: not in the server's debug log, the store (with
    // its audit log) or the data directory.
    let log = std::fs::read(hsm.tmp.join("server.log")).unwrap();
    assert!(!log.is_empty());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(!contains(&bytes, PIN.as_bytes()), "the PIN is in {}", path.display());
    }
    assert!(!contains(&log, PIN.as_bytes()), "the PIN is in the server's log");
    let verify = hsm.ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(verify.contains("intact"), "{verify}");
    let audit = hsm.ok(&["kms", "audit", "--json", "--kms", &admin]);
    let entries = json_lines(&audit);
    let unseals: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["operation"] == "sys.unseal")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert!(unseals.contains(&"ok") && unseals.len() >= 2, "{unseals:?}");
}

#[test]
fn hsm_wrong_pin_unknown_token_and_missing_module_are_refused() {
    let hsm = SoftHsm::new("kms-hsm-refuse");
    let port = free_port();
    let other = hsm.tmp.join("other").display().to_string();
    let init = |module: &str, token: &str, pin: &str| {
        hsm.run(&[
            "kms",
            "init",
            "--data-dir",
            &other,
            "--hsm-module",
            module,
            "--hsm-token",
            token,
            "--hsm-pin-file",
            &hsm.path(pin),
        ])
    };
    one_line_error(&init(MODULE, "no-such-token", "pin"), 2, "no token labelled 'no-such-token'");
    one_line_error(
        &init("/nonexistent/libpkcs11.so", TOKEN, "pin"),
        2,
        "cannot load the PKCS#11 module",
    );
    one_line_error(&init(MODULE, TOKEN, "wrong-pin"), 2, "refused the PIN");
    one_line_error(&init(MODULE, TOKEN, "no-pin-file"), 2, "cannot open");
    // --hsm-module alone is a usage error.
    let alone = hsm.run(&["kms", "init", "--data-dir", &other, "--hsm-module", MODULE]);
    assert_eq!(alone.status.code(), Some(2));

    // After the refusals, init still works (nothing half-made was left).
    let dir = hsm.init(port);
    // A server given the wrong PIN does not come up.
    let out = hsm.run(&[
        "kms",
        "serve",
        "--data-dir",
        &dir.display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--hsm-pin-file",
        &hsm.path("wrong-pin"),
    ]);
    one_line_error(&out, 2, "refused the PIN");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    // Nor with its hsm.json gone (clear message, not a panic).
    std::fs::rename(dir.join("hsm.json"), hsm.tmp.join("hsm.json.moved")).unwrap();
    let out = hsm.run(&[
        "kms",
        "serve",
        "--data-dir",
        &dir.display().to_string(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--hsm-pin-file",
        &hsm.path("pin"),
    ]);
    one_line_error(&out, 2, "hsm.json");
}

#[test]
fn hsm_root_key_is_sensitive_and_never_extractable() {
    let hsm = SoftHsm::new("kms-hsm-attrs");
    let dir = hsm.init(free_port());
    let recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("hsm.json")).unwrap()).unwrap();
    let label = recorded["key_label"].as_str().unwrap().to_owned();

    // Read the object back through PKCS#11 in this process, as any
    // auditor of the token would. The tests that load SoftHSM2 here take
    // turns (it reads SOFTHSM2_CONF once, at C_Initialize); the others
    // hand SOFTHSM2_CONF to their child processes explicitly.
    let _turn = crate::helpers::pkcs11_support::softhsm_turn();
    std::env::set_var("SOFTHSM2_CONF", &hsm.conf);
    let ctx = Pkcs11::new(MODULE).unwrap();
    ctx.initialize(CInitializeArgs::OsThreads).unwrap();
    let slot = ctx
        .get_slots_with_token()
        .unwrap()
        .into_iter()
        .find(|s| ctx.get_token_info(*s).unwrap().label().trim_end() == TOKEN)
        .unwrap();
    let session = ctx.open_rw_session(slot).unwrap();
    // Private objects are invisible before login.
    let template = [Attribute::Label(label.as_bytes().to_vec())];
    assert!(session.find_objects(&template).unwrap().is_empty());
    session.login(UserType::User, Some(&AuthPin::new(PIN.into()))).unwrap();
    let found = session.find_objects(&template).unwrap();
    assert_eq!(found.len(), 1, "one root key object labelled {label}");
    let key = found[0];
    let attributes = session
        .get_attributes(
            key,
            &[
                AttributeType::Class,
                AttributeType::KeyType,
                AttributeType::ValueLen,
                AttributeType::Token,
                AttributeType::Private,
                AttributeType::Sensitive,
                AttributeType::AlwaysSensitive,
                AttributeType::Extractable,
                AttributeType::NeverExtractable,
                AttributeType::Encrypt,
                AttributeType::Decrypt,
                AttributeType::Wrap,
                AttributeType::Unwrap,
                AttributeType::Modifiable,
            ],
        )
        .unwrap();
    let want = [
        Attribute::Class(ObjectClass::SECRET_KEY),
        Attribute::KeyType(KeyType::AES),
        Attribute::ValueLen(32.into()),
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::AlwaysSensitive(true),
        Attribute::Extractable(false),
        Attribute::NeverExtractable(true),
        Attribute::Encrypt(true),
        Attribute::Decrypt(true),
        Attribute::Wrap(false),
        Attribute::Unwrap(false),
        Attribute::Modifiable(false),
    ];
    for attribute in &want {
        assert!(attributes.contains(attribute), "{attribute:?} not in {attributes:?}");
    }
    // The key's value cannot be read...
    match session.get_attributes(key, &[AttributeType::Value]) {
        Ok(values) => {
            assert!(!values.iter().any(|a| matches!(a, Attribute::Value(_))), "{values:?}")
        }
        Err(P11Error::Pkcs11(rv, _)) => assert_eq!(rv, RvError::AttributeSensitive),
        Err(other) => panic!("{other}"),
    }
    // ...nor the key made extractable or not sensitive (in a read-write
    // session, so the refusal is the object's, not the session's).
    for change in [Attribute::Extractable(true), Attribute::Sensitive(false)] {
        match session.update_attributes(key, std::slice::from_ref(&change)) {
            Err(P11Error::Pkcs11(rv, _)) => assert_ne!(rv, RvError::SessionReadOnly),
            other => panic!("{change:?} was accepted: {other:?}"),
        }
    }
}
