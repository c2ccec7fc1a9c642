#![allow(clippy::unwrap_used)]
//! Volumes bound to the key manager, against a real
//! `rampart kms serve` process, the real cryptsetup and libnbd's nbdinfo
//! and nbdcopy: `format --key`, `bind`, token-first unlocking in every
//! command that opens a volume, `unlock --print-passphrase` piped into
//! cryptsetup, rotation and `rewrap`, revocation with a passphrase slot
//! still working, `unbind`, tokens copied to another volume, and geo-fenced
//! keys. A missing tool fails the test (scripts/test installs them).

use crate::helpers::kms_support;

use crate::helpers::serve_support as nbd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kms_support::{free_port, ServerProcess, TempDir};

const PASSPHRASE: &[u8] = b"bind test passphrase";
const CHEAP_KDF: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

/// Runs `rampart ARGS` with `stdin` as standard input and, when given,
/// `RAMPART_KMS` set (it is removed otherwise).
fn rampart_env(args: &[&str], stdin: &[u8], kms_env: Option<&Path>) -> Output {
    let mut command = Command::new(kms_support::rampart_bin());
    command
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("RAMPART_KMS")
        .env("RAMPART_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(bundle) = kms_env {
        command.env("RAMPART_KMS", bundle);
    }
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn rampart(args: &[&str]) -> Output {
    rampart_env(args, b"", None)
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let out = rampart(args);
    assert!(
        out.status.success(),
        "rampart {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts a failure with exit status 2 and returns standard error.
#[track_caller]
fn refused(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{what}: expected exit 2: {err}");
    err
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A key server with an admin bundle, an `eu` and a `us` host bundle,
/// and key `disk` allowed for `label:region=eu`.
struct Deployment {
    tmp: TempDir,
    server: ServerProcess,
    admin: PathBuf,
    eu: PathBuf,
    us: PathBuf,
}

impl Deployment {
    fn start(tag: &str) -> Self {
        let tmp = TempDir::new(tag);
        let dir = tmp.join("kms");
        let port = free_port();
        let endpoint = format!("127.0.0.1:{port}");
        ok(&["kms", "init", "--data-dir", s(&dir), "--endpoint", &endpoint]);
        let server = ServerProcess::start(&dir, port, None);
        let admin = dir.join("admin.bundle");
        let (eu, us) = (tmp.join("eu.bundle"), tmp.join("us.bundle"));
        for (name, labels, out) in [("host-eu", "region=eu", &eu), ("host-us", "region=us", &us)] {
            kms_support::issue_client(s(&admin), name, labels, s(out));
        }
        ok(&["kms", "key", "create", "disk", "--allow", "label:region=eu", "--kms", s(&admin)]);
        Self { tmp, server, admin, eu, us }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.join(name)
    }

    fn pass_file(&self) -> PathBuf {
        let path = self.path("pass");
        if !path.exists() {
            std::fs::write(&path, PASSPHRASE).unwrap();
        }
        path
    }

    /// Formats a LUKS2 volume of 16 MiB of data; `bind_to` binds it at
    /// creation with that bundle.
    fn format(&self, name: &str, bind_to: Option<&Path>) -> (PathBuf, String) {
        let vol = self.path(name);
        let pass = self.pass_file();
        let mut args = vec!["format", s(&vol), "--size", "32M", "--key-file", s(&pass), "-q"];
        args.extend_from_slice(CHEAP_KDF);
        if let Some(bundle) = bind_to {
            args.extend_from_slice(&["--key", "disk", "--kms", s(bundle)]);
        }
        let out = ok(&args);
        (vol, out)
    }

    fn token(&self, vol: &Path, id: usize) -> serde_json::Value {
        let text = ok(&["token", "export", s(vol), "--token-id", &id.to_string()]);
        serde_json::from_str(&text).unwrap()
    }
}

fn dump_json(vol: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&["dump", s(vol), "--json"])).unwrap()
}

fn keyslot_ids(vol: &Path) -> Vec<String> {
    let dump = dump_json(vol);
    let mut ids: Vec<String> = match &dump["keyslots"] {
        serde_json::Value::Object(map) => map.keys().cloned().collect(),
        serde_json::Value::Array(list) => list.iter().map(|k| k["id"].to_string()).collect(),
        other => panic!("unexpected keyslots: {other}"),
    };
    ids.sort();
    ids
}

/// `cmd ARGS` with `stdin` piped in.
fn tool_with_input(program: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(nbd::tool(program))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn bind_format_serve_and_cryptsetup() {
    nbd::require(&["cryptsetup", "nbdinfo", "nbdcopy"]);
    let d = Deployment::start("bind-serve");
    let (vol, printed) = d.format("vol", Some(&d.eu));
    assert!(printed.contains("token 0: keyslot 1 bound to key disk version 1"), "{printed}");

    // The token as documented; cryptsetup still reads the header and
    // keeps the foreign token.
    let token = d.token(&vol, 0);
    assert_eq!(token["type"], "rampart-kms");
    assert_eq!(token["keyslots"], serde_json::json!(["1"]));
    assert_eq!(token["key"], "disk");
    assert_eq!(token["key_version"], 1);
    assert_eq!(token["format"], 1);
    assert!(token["wrapped"].as_str().unwrap().starts_with("rampart:v1:disk:1:"));
    assert_eq!(token["endpoints"].as_array().unwrap().len(), 1);
    let dump = nbd::ok("cryptsetup luksDump", nbd::run("cryptsetup", &["luksDump", s(&vol)]));
    let dump = nbd::text(&dump.stdout);
    assert!(dump.contains("rampart-kms"), "{dump}");

    // The bound passphrase, piped into cryptsetup, opens the volume there.
    let printed = rampart(&["unlock", s(&vol), "--print-passphrase", "--kms", s(&d.eu)]);
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    assert_eq!(printed.stdout.len(), 43, "43 base64url characters, no newline");
    assert!(printed.stdout.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_'));
    let test = tool_with_input(
        "cryptsetup",
        &["open", "--test-passphrase", "--key-file", "-", "--key-slot", "1", s(&vol)],
        &printed.stdout,
    );
    assert!(test.status.success(), "cryptsetup: {}", String::from_utf8_lossy(&test.stderr));
    // ... and a wrong one does not (the check above means something).
    let wrong = tool_with_input(
        "cryptsetup",
        &["open", "--test-passphrase", "--key-file", "-", s(&vol)],
        b"not the passphrase",
    );
    assert!(!wrong.status.success());

    // No passphrase anywhere (no key file, empty standard input): the token
    // opens the volume for test-key, dump --dump-volume-key, import, export,
    // with --kms or with RAMPART_KMS.
    ok(&["test-key", s(&vol), "--kms", s(&d.eu)]);
    let out = rampart_env(&["test-key", s(&vol)], b"", Some(&d.eu));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let keys: serde_json::Value = serde_json::from_str(&ok(&[
        "dump",
        s(&vol),
        "--json",
        "--dump-volume-key",
        "--kms",
        s(&d.eu),
    ]))
    .unwrap();
    assert_eq!(keys["unlocked_keyslot"], 1);
    let by_passphrase: serde_json::Value = serde_json::from_str(&ok(&[
        "dump",
        s(&vol),
        "--json",
        "--dump-volume-key",
        "--key-file",
        s(&d.pass_file()),
    ]))
    .unwrap();
    assert_eq!(keys["volume_key"], by_passphrase["volume_key"]);
    let data = nbd::random_bytes(5, 1 << 20);
    let input = d.path("data.bin");
    std::fs::write(&input, &data).unwrap();
    ok(&["import", s(&vol), s(&input), "--kms", s(&d.eu)]);
    let out = rampart_env(&["export", s(&vol), "-", "--length", "1M"], b"", Some(&d.eu));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    nbd::assert_same("export through the token", &out.stdout, &data);

    // serve with no passphrase: stdin is /dev/null, only the bundle.
    let socket = d.path("nbd.sock");
    let mut serve = nbd::Serve::start(
        &[s(&vol), "--socket", s(&socket), "--kms", s(&d.eu)],
        d.path("serve.log"),
        1,
    );
    let uri = nbd::unix_uri(&socket, "");
    let info = nbd::ok("nbdinfo", nbd::run("nbdinfo", &["--json", &uri]));
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["exports"][0]["export-size"], 16 << 20, "{info}");
    let copy = d.path("copy.raw");
    nbd::ok("nbdcopy", nbd::run("nbdcopy", &[uri.as_str(), s(&copy)]));
    let served = std::fs::read(&copy).unwrap();
    nbd::assert_same("nbdcopy of the served volume", &served[..data.len()], &data);
    serve.stop();

    // Geo-fencing: the us host is refused, one line, exit 2; without
    // --token-only it falls back to the passphrase on standard input.
    let out = rampart(&["test-key", s(&vol), "--kms", s(&d.us), "--token-only"]);
    let err = refused(&out, "us host, token only");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not allowed") && err.contains("token 0"), "{err}");
    let out = refused(
        &rampart(&["unlock", s(&vol), "--print-passphrase", "--kms", s(&d.us)]),
        "us host unlock",
    );
    assert!(out.contains("no token unlocked"), "{out}");
    let mut line = PASSPHRASE.to_vec();
    line.push(b'\n');
    let out = rampart_env(&["test-key", s(&vol), "--kms", s(&d.us)], &line, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one warning line: {err}");
    assert!(err.starts_with("rampart: warning: no token unlocked"), "{err}");
    assert!(!err.contains(std::str::from_utf8(&printed.stdout).unwrap()));

    // Without any bundle, tokens are skipped silently.
    let out = rampart_env(&["test-key", s(&vol)], &line, None);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    refused(&rampart(&["test-key", s(&vol), "--token-only"]), "token only, no bundle");

    // A token copied onto another volume (same keyslot number) does not
    // unwrap there: the wrap is bound to the volume's UUID and keyslot.
    let pass = d.pass_file();
    let (other, _) = d.format("other", None);
    let second = d.path("second");
    std::fs::write(&second, b"second passphrase").unwrap();
    let mut add = vec![
        "add-key",
        s(&other),
        "--key-file",
        s(&pass),
        "--new-key-file",
        s(&second),
        "--new-key-slot",
        "1",
    ];
    add.extend_from_slice(CHEAP_KDF);
    ok(&add);
    let copied = d.path("token.json");
    std::fs::write(&copied, serde_json::to_vec(&token).unwrap()).unwrap();
    ok(&["token", "add", s(&other), "--json-file", s(&copied)]);
    let err =
        refused(&rampart(&["test-key", s(&other), "--token-only", "--kms", s(&d.eu)]), "copied");
    assert!(err.contains("token 0"), "{err}");
    refused(&rampart(&["unlock", s(&other), "--kms", s(&d.eu)]), "copied token, unlock");

    // serve with several volumes: each tries its own token; the one whose
    // token fails falls back to the key file, with one warning line.
    let socket = d.path("two.sock");
    let vol_a = format!("{}=a", s(&vol));
    let other_b = format!("{}=b", s(&other));
    let mut serve = nbd::Serve::start(
        &[&vol_a, &other_b, "--socket", s(&socket), "--kms", s(&d.eu), "--key-file", s(&pass)],
        d.path("serve-two.log"),
        2,
    );
    for name in ["a", "b"] {
        nbd::ok("nbdinfo", nbd::run("nbdinfo", &[nbd::unix_uri(&socket, name).as_str()]));
    }
    let log = serve.stop();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("other") && warnings[0].contains("trying a passphrase"), "{log}");

    // cryptsetup rewrites the header (a new keyslot) and keeps the token:
    // the binding still opens the volume.
    let extra = d.path("extra");
    std::fs::write(&extra, b"extra passphrase").unwrap();
    let add = nbd::run(
        "cryptsetup",
        &[
            "luksAddKey",
            "-q",
            "--key-file",
            s(&pass),
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            s(&vol),
            s(&extra),
        ],
    );
    nbd::ok("cryptsetup luksAddKey", add);
    assert_eq!(d.token(&vol, 0), token);
    ok(&["test-key", s(&vol), "--token-only", "--kms", s(&d.eu)]);

    // A volume made by cryptsetup, bound by rampart, opened by cryptsetup
    // with the printed passphrase.
    let made = d.path("made-by-cryptsetup");
    std::fs::File::create(&made).unwrap().set_len(32 << 20).unwrap();
    let format = nbd::run(
        "cryptsetup",
        &[
            "luksFormat",
            "-q",
            "--type",
            "luks2",
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--key-file",
            s(&pass),
            s(&made),
        ],
    );
    nbd::ok("cryptsetup luksFormat", format);
    ok(&["bind", s(&made), "--key", "disk", "--kms", s(&d.eu), "--key-file", s(&pass)]);
    let printed = rampart(&["unlock", s(&made), "--print-passphrase", "--kms", s(&d.eu)]);
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let test = tool_with_input(
        "cryptsetup",
        &["open", "--test-passphrase", "--key-file", "-", s(&made)],
        &printed.stdout,
    );
    assert!(test.status.success(), "cryptsetup: {}", String::from_utf8_lossy(&test.stderr));
    let dump = nbd::ok("cryptsetup luksDump", nbd::run("cryptsetup", &["luksDump", s(&made)]));
    assert!(nbd::text(&dump.stdout).contains("rampart-kms"));

    // LUKS1 volumes cannot hold a binding.
    let v1 = d.path("v1");
    let mut args = vec![
        "format",
        s(&v1),
        "--type",
        "luks1",
        "--size",
        "8M",
        "--key-file",
        s(&pass),
        "-q",
        "--key",
        "disk",
        "--kms",
        s(&d.eu),
    ];
    args.extend_from_slice(CHEAP_KDF);
    let err = refused(&rampart(&args), "format luks1 --key");
    assert!(err.contains("LUKS1"), "{err}");
    args.truncate(args.len() - 4 - CHEAP_KDF.len());
    args.extend_from_slice(CHEAP_KDF);
    ok(&args);
    let err = refused(
        &rampart(&[
            "bind",
            s(&v1),
            "--key",
            "disk",
            "--kms",
            s(&d.eu),
            "--key-file",
            s(&d.pass_file()),
        ]),
        "bind luks1",
    );
    assert!(err.contains("LUKS1"), "{err}");
    let _ = &d.admin;
}

#[test]
fn bind_rotate_rewrap_revoke_unbind() {
    nbd::require(&["cryptsetup"]);
    let d = Deployment::start("bind-life");
    let admin = s(&d.admin).to_owned();
    let eu = s(&d.eu).to_owned();
    let (vol, _) = d.format("vol", None);
    let pass = d.pass_file();

    // bind needs an existing passphrase; a wrong one writes nothing.
    let wrong = d.path("wrong");
    std::fs::write(&wrong, b"nope").unwrap();
    refused(
        &rampart(&["bind", s(&vol), "--key", "disk", "--kms", &eu, "--key-file", s(&wrong)]),
        "bind with a wrong passphrase",
    );
    assert!(dump_json(&vol)["tokens"].as_array().is_none_or(Vec::is_empty));
    // A client the key does not allow writes nothing either.
    refused(
        &rampart(&["bind", s(&vol), "--key", "disk", "--kms", s(&d.us), "--key-file", s(&pass)]),
        "bind from the us host",
    );
    assert_eq!(keyslot_ids(&vol).len(), 1);

    let printed = ok(&[
        "bind",
        s(&vol),
        "--key",
        "disk",
        "--kms",
        &eu,
        "--key-file",
        s(&pass),
        "--key-slot",
        "3",
        "--token-id",
        "5",
    ]);
    assert!(printed.contains("token 5: keyslot 3 bound to key disk version 1"), "{printed}");
    assert_eq!(d.token(&vol, 5)["keyslots"], serde_json::json!(["3"]));
    let status = nbd::run("cryptsetup", &["luksDump", s(&vol)]);
    assert!(status.status.success());
    ok(&["test-key", s(&vol), "--token-only", "--kms", &eu]);

    // Rotate, then rewrap: the token moves to version 2 and still unlocks.
    ok(&["kms", "key", "rotate", "disk", "--kms", &admin]);
    let before = d.token(&vol, 5);
    let out = ok(&["rewrap", s(&vol), "--kms", &eu]);
    assert!(out.contains("token 5: key disk version 1 -> 2"), "{out}");
    let after = d.token(&vol, 5);
    assert_eq!(after["key_version"], 2);
    assert!(after["wrapped"].as_str().unwrap().starts_with("rampart:v1:disk:2:"));
    assert_ne!(before["wrapped"], after["wrapped"]);
    assert_eq!(after["keyslots"], before["keyslots"]);
    ok(&["test-key", s(&vol), "--token-only", "--kms", &eu]);
    let out = ok(&["rewrap", s(&vol), "--kms", &eu]);
    assert!(out.contains("already the newest"), "{out}");
    // Version 1 may now be revoked without harm.
    ok(&["kms", "key", "revoke", "disk", "--version", "1", "--reason", "rotated", "--kms", &admin]);
    ok(&["test-key", s(&vol), "--token-only", "--kms", &eu]);

    // Revoke the key: the bound keyslot no longer unlocks, clearly; the
    // passphrase slot still does, given or as the fallback.
    ok(&["kms", "key", "revoke", "disk", "--reason", "host lost", "--kms", &admin]);
    let err = refused(&rampart(&["test-key", s(&vol), "--token-only", "--kms", &eu]), "revoked");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("revoked"), "{err}");
    let err = refused(
        &rampart(&["unlock", s(&vol), "--print-passphrase", "--kms", &eu]),
        "revoked, print",
    );
    assert!(err.contains("revoked"), "{err}");
    ok(&["test-key", s(&vol), "--key-file", s(&pass)]);
    let mut line = PASSPHRASE.to_vec();
    line.push(b'\n');
    let out = rampart_env(&["export", s(&vol), "-", "--length", "4096"], &line, Some(&d.eu));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout.len(), 4096);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("revoked") && err.contains("trying a passphrase"), "{err}");
    refused(&rampart(&["rewrap", s(&vol), "--kms", &eu]), "rewrap of a revoked key");

    // unbind removes the token and its keyslot; the passphrase stays.
    let out = ok(&["unbind", s(&vol)]);
    assert!(out.contains("token 5 and keyslot 3 removed"), "{out}");
    assert!(dump_json(&vol)["tokens"].as_array().is_none_or(Vec::is_empty));
    assert_eq!(keyslot_ids(&vol).len(), 1);
    ok(&["test-key", s(&vol), "--key-file", s(&pass)]);
    refused(&rampart(&["unbind", s(&vol)]), "unbind of an unbound volume");
    let err =
        refused(&rampart(&["token", "remove", s(&vol), "--token-id", "5"]), "the token is gone");
    assert!(err.contains("does not exist"), "{err}");

    // unbind refuses to remove the last keyslot.
    ok(&["kms", "key", "create", "solo", "--allow", "client:host-eu", "--kms", &admin]);
    let (lone, _) = d.format("lone", None);
    ok(&["bind", s(&lone), "--key", "solo", "--kms", &eu, "--key-file", s(&pass)]);
    ok(&["kill-slot", s(&lone), "0", "-q"]);
    let err = refused(&rampart(&["unbind", s(&lone)]), "unbind of the last keyslot");
    assert!(err.contains("lock you out"), "{err}");
    ok(&["test-key", s(&lone), "--token-only", "--kms", &eu]);
    // A second binding: unbind must be told which.
    let extra = d.path("extra");
    std::fs::write(&extra, b"extra").unwrap();
    let mut add = vec!["add-key", s(&lone), "--new-key-file", s(&extra)];
    add.extend_from_slice(CHEAP_KDF);
    let out = rampart_env(&add, b"", None);
    // add-key needs a passphrase; the lone volume has none left but its
    // binding, which add-key does not use.
    assert_eq!(out.status.code(), Some(2));
    let bound_pass = rampart(&["unlock", s(&lone), "--print-passphrase", "--kms", &eu]);
    assert!(bound_pass.status.success());
    let bound_file = d.path("bound-pass");
    std::fs::write(&bound_file, &bound_pass.stdout).unwrap();
    ok(&["bind", s(&lone), "--key", "solo", "--kms", &eu, "--key-file", s(&bound_file)]);
    let err = refused(&rampart(&["unbind", s(&lone)]), "two bindings");
    assert!(err.contains("--token-id"), "{err}");
    ok(&["unbind", s(&lone), "--token-id", "0"]);
    ok(&["test-key", s(&lone), "--token-only", "--kms", &eu]);

    // The key server down: a runtime error (exit 1) with --token-only, else
    // one warning line and the passphrase.
    let (down, _) = d.format("down", None);
    ok(&["bind", s(&down), "--key", "solo", "--kms", &eu, "--key-file", s(&pass)]);
    let mut d = d;
    d.server.kill();
    let out = rampart(&["test-key", s(&down), "--token-only", "--kms", &eu]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no key server answered"), "{err}");
    let out = rampart_env(&["test-key", s(&down), "--kms", &eu], &line, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("trying a passphrase"), "{err}");
}

/// `clone --key NAME`: the clone gets its own binding (a new volume key, a
/// new wrapped passphrase) and, without --new-key-file, no passphrase at
/// all; a source opened through its token has no passphrase to pass on.
#[test]
fn clone_gets_a_fresh_binding() {
    nbd::require(&["cryptsetup"]);
    let d = Deployment::start("bind-clone");
    let eu = s(&d.eu).to_owned();
    let (src, _) = d.format("src", Some(&d.eu));
    let pass = d.pass_file();
    let dst = d.path("dst");
    // Opened through the token: a passphrase for the clone must be named.
    let out = rampart(&["clone", s(&src), s(&dst), "--kms", &eu, "--token-only"]);
    let err = refused(&out, "clone with nothing to give the clone");
    assert!(err.contains("--new-key-file or --key"), "{err}");
    assert!(!dst.exists() || std::fs::metadata(&dst).unwrap().len() == 0);

    let mut args = vec!["clone", s(&src), s(&dst), "--kms", &eu, "--token-only", "--key", "disk"];
    args.extend_from_slice(CHEAP_KDF);
    ok(&args);
    assert_eq!(keyslot_ids(&dst), vec!["1".to_owned()], "the throwaway keyslot 0 is gone");
    let (src_token, dst_token) = (d.token(&src, 0), d.token(&dst, 0));
    assert_eq!(dst_token["key"], "disk");
    assert_ne!(src_token["wrapped"], dst_token["wrapped"]);
    ok(&["test-key", s(&dst), "--token-only", "--kms", &eu]);
    refused(
        &rampart(&["test-key", s(&dst), "--key-file", s(&pass)]),
        "the source passphrase on the clone",
    );
    let key_of = |vol: &Path| {
        let dump: serde_json::Value = serde_json::from_str(&ok(&[
            "dump",
            s(vol),
            "--json",
            "--dump-volume-key",
            "--kms",
            &eu,
            "--token-only",
        ]))
        .unwrap();
        dump["volume_key"].as_str().unwrap().to_owned()
    };
    assert_ne!(key_of(&src), key_of(&dst));
    let export = |vol: &Path| {
        let out = rampart(&["export", s(vol), "-", "--kms", &eu, "--token-only"]);
        assert!(out.status.success(), "export: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    assert!(export(&src) == export(&dst), "the clone's plaintext differs");
    let dump = nbd::run("cryptsetup", &["luksDump", s(&dst)]);
    assert!(dump.status.success());
}
