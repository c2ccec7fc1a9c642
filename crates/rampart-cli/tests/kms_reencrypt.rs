#![allow(clippy::unwrap_used)]
//! Re-encryption of volumes bound to the key manager (`rampart reencrypt
//! --kms`), against a real `rampart kms serve` process and the real
//! cryptsetup: after `rampart kms key rotate`, the volume moves to a new
//! volume key whose bindings are fresh secrets wrapped by the newest key
//! version, with no passphrase, offline (killed part-way, served and
//! resumed through the key manager alone; stopped part-way and finished by
//! cryptsetup) and online through `rampart serve`. The old
//! tokens and keyslots are gone at the end, the data is unchanged, the key
//! manager audited the unwraps and wraps, and a revoked client cannot
//! rebind. A missing tool fails the test (scripts/test installs them).

use crate::helpers::kms_support;

use crate::helpers::serve_support as nbd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kms_support::{free_port, ServerProcess, TempDir};
use serde_json::Value;

const PASSPHRASE: &[u8] = b"rebind test passphrase";
const CHEAP_KDF: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
/// The plaintext of a 32 MiB volume (16 MiB of header).
const DATA: usize = 16 << 20;

/// Runs `rampart ARGS` with `env` added, `RAMPART_KMS` removed.
fn rampart_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(kms_support::rampart_bin());
    command
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("RAMPART_KMS")
        .env("RAMPART_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"").unwrap();
    child.wait_with_output().unwrap()
}

fn rampart(args: &[&str]) -> Output {
    rampart_env(args, &[])
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

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A key server with an admin bundle, an `eu` host bundle, and key `disk`
/// allowed for `label:region=eu`.
struct Deployment {
    tmp: TempDir,
    _server: ServerProcess,
    admin: PathBuf,
    eu: PathBuf,
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
        let eu = tmp.join("eu.bundle");
        kms_support::issue_client(s(&admin), "host-eu", "region=eu", s(&eu));
        ok(&["kms", "key", "create", "disk", "--allow", "label:region=eu", "--kms", s(&admin)]);
        Self { tmp, _server: server, admin, eu }
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

    /// A 32 MiB LUKS2 volume with passphrase keyslot 0 and keyslot 1 bound
    /// to key `disk` (token 0), holding random plaintext.
    fn bound_volume(&self, name: &str) -> (PathBuf, Vec<u8>) {
        let vol = self.path(name);
        let pass = self.pass_file();
        let mut args = vec!["format", s(&vol), "--size", "32M", "--key-file", s(&pass), "-q"];
        args.extend_from_slice(CHEAP_KDF);
        args.extend_from_slice(&["--key", "disk", "--kms", s(&self.eu)]);
        ok(&args);
        let data = nbd::random_bytes(11, DATA);
        let input = self.path(&format!("{name}.plain"));
        std::fs::write(&input, &data).unwrap();
        ok(&["import", s(&vol), s(&input), "--kms", s(&self.eu), "--token-only"]);
        (vol, data)
    }

    fn rotate(&self) {
        ok(&["kms", "key", "rotate", "disk", "--kms", s(&self.admin)]);
    }

    fn audit(&self) -> Vec<Value> {
        let out = ok(&["kms", "audit", "--json", "--kms", s(&self.admin)]);
        kms_support::json_lines(out).as_array().unwrap().clone()
    }
}

/// The `rampart-kms` tokens of the volume, as `cryptsetup luksDump
/// --dump-json-metadata` shows them (id, token).
fn kms_tokens(vol: &Path) -> Vec<(String, Value)> {
    let out = nbd::ok(
        "cryptsetup luksDump --dump-json-metadata",
        nbd::run("cryptsetup", &["luksDump", "--dump-json-metadata", s(vol)]),
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["tokens"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, t)| t["type"] == "rampart-kms")
        .map(|(id, t)| (id.clone(), t.clone()))
        .collect()
}

fn keyslots(vol: &Path) -> Vec<String> {
    let out = nbd::ok(
        "cryptsetup luksDump --dump-json-metadata",
        nbd::run("cryptsetup", &["luksDump", "--dump-json-metadata", s(vol)]),
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["keyslots"].as_object().unwrap().keys().cloned().collect()
}

/// The volume key through the volume's tokens only.
fn token_volume_key(vol: &Path, bundle: &Path) -> String {
    let keys: Value = serde_json::from_str(&ok(&[
        "dump",
        s(vol),
        "--json",
        "--dump-volume-key",
        "--kms",
        s(bundle),
        "--token-only",
    ]))
    .unwrap();
    keys["volume_key"].as_str().unwrap().to_owned()
}

/// The plaintext through the volume's tokens only.
fn token_export(vol: &Path, bundle: &Path) -> Vec<u8> {
    let out = rampart(&["export", s(vol), "-", "--kms", s(bundle), "--token-only"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn cryptsetup_opens(vol: &Path, pass: &Path) -> bool {
    nbd::run("cryptsetup", &["open", "--test-passphrase", "--key-file", s(pass), s(vol)])
        .status
        .success()
}

/// After a finished rebind: one binding, to `version`, in a keyslot of the
/// new key; the old token and keyslot gone; cryptsetup opens the volume
/// with the passphrase and prints the key the token gives; the data is
/// unchanged.
#[track_caller]
fn assert_rebound(d: &Deployment, vol: &Path, old: &(String, Value), version: u64, data: &[u8]) {
    let tokens = kms_tokens(vol);
    assert_eq!(tokens.len(), 1, "one binding is left: {tokens:?}");
    let (_, token) = &tokens[0];
    assert_eq!(token["key"], "disk");
    assert_eq!(token["key_version"], version, "{token}");
    let prefix = format!("rampart:v1:disk:{version}:");
    assert!(token["wrapped"].as_str().unwrap().starts_with(&prefix), "{token}");
    assert_ne!(token["wrapped"], old.1["wrapped"]);
    let slot = token["keyslots"][0].as_str().unwrap().to_owned();
    let slots = keyslots(vol);
    assert!(slots.contains(&slot), "{slots:?}");
    assert!(!slots.contains(&old.1["keyslots"][0].as_str().unwrap().to_owned()), "{slots:?}");
    assert_eq!(slots.len(), 2, "the passphrase's keyslot and the binding's: {slots:?}");
    let dump = nbd::text(&nbd::run("cryptsetup", &["luksDump", s(vol)]).stdout);
    assert!(!dump.contains("reencrypt"), "reencryption metadata left behind:\n{dump}");
    let pass = d.pass_file();
    assert!(cryptsetup_opens(vol, &pass));
    let by_token = token_volume_key(vol, &d.eu);
    assert_eq!(nbd::cryptsetup_volume_key(vol, &pass), by_token);
    nbd::assert_same("the plaintext after the rebind", &token_export(vol, &d.eu), data);
}

#[test]
fn a_bound_volume_is_rebound_offline_after_rotation_and_resumes_through_the_key_manager() {
    nbd::require(&["cryptsetup", "nbdcopy"]);
    let d = Deployment::start("kms-reencrypt");
    let (vol, data) = d.bound_volume("vol");
    let pass = d.pass_file();
    let key_before = token_volume_key(&vol, &d.eu);
    let old = kms_tokens(&vol).pop().unwrap();
    assert_eq!(old.1["key_version"], 1);
    d.rotate();

    // Refusals change nothing: a bound volume without a bundle (the
    // binding would be lost), a passphrase keyslot whose passphrase is not
    // given (it would stop opening), a revoked client.
    let out = rampart(&["reencrypt", s(&vol), "--key-file", s(&pass)]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kms"), "{out:?}");
    let out = rampart(&["reencrypt", s(&vol), "--kms", s(&d.eu)]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keyslot(s) 0") && err.contains("--key-file"), "{err}");
    let gone = d.path("gone.bundle");
    kms_support::issue_client(s(&d.admin), "host-gone", "region=eu", s(&gone));
    ok(&["kms", "client", "revoke", "host-gone", "--reason", "stolen", "--kms", s(&d.admin)]);
    let out = rampart(&[
        "reencrypt",
        s(&vol),
        "--kms",
        s(&gone),
        "--key-file",
        s(&pass),
        "--hotzone-size",
        "1M",
    ]);
    assert!(!out.status.success(), "a revoked client rebound the volume: {out:?}");
    assert_eq!(kms_tokens(&vol), vec![old.clone()]);
    assert!(
        !nbd::text(&nbd::run("cryptsetup", &["luksDump", s(&vol)]).stdout).contains("reencrypt")
    );

    // Killed in the middle of a hotzone: both bindings exist (the old key's
    // and the new key's, version 2), and the key manager alone opens the
    // volume (export) and finishes the run.
    let mut args = vec![
        "reencrypt",
        s(&vol),
        "--kms",
        s(&d.eu),
        "--key-file",
        s(&pass),
        "--hotzone-size",
        "1M",
    ];
    args.extend_from_slice(CHEAP_KDF);
    let out = rampart_env(&args, &[("RAMPART_REENCRYPT_CRASH_AFTER", "3")]);
    assert_eq!(out.status.code(), Some(137), "{}", String::from_utf8_lossy(&out.stderr));
    let during = kms_tokens(&vol);
    let mut versions: Vec<u64> =
        during.iter().map(|(_, t)| t["key_version"].as_u64().unwrap()).collect();
    versions.sort_unstable();
    assert_eq!(versions, vec![1, 2], "{during:?}");
    assert!(nbd::text(&nbd::run("cryptsetup", &["luksDump", s(&vol)]).stdout)
        .contains("online-reencrypt"));
    // serve (which repairs the interrupted hotzone first) through the
    // tokens of both keys.
    let socket = d.path("mid.sock");
    let mut serve = nbd::Serve::start(
        &[s(&vol), "--socket", s(&socket), "--kms", s(&d.eu), "--token-only"],
        d.path("mid-serve.log"),
        1,
    );
    let copy = d.path("mid.raw");
    let uri = nbd::unix_uri(&socket, "");
    nbd::ok("nbdcopy", nbd::run("nbdcopy", &[uri.as_str(), s(&copy)]));
    nbd::assert_same("the plaintext mid-reencryption", &std::fs::read(&copy).unwrap(), &data);
    serve.stop();
    let out = rampart(&["reencrypt", s(&vol), "--resume-only", "--kms", s(&d.eu), "--token-only"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    assert_rebound(&d, &vol, &old, 2, &data);
    assert_ne!(token_volume_key(&vol, &d.eu), key_before, "the volume key did not change");

    // The key manager saw the unwraps of the old binding (version 1) and
    // of both while resuming, and the wrap under version 2.
    let audit = d.audit();
    let seen = |op: &str, version: u64| {
        audit.iter().any(|e| {
            e["client"] == "host-eu"
                && e["operation"] == op
                && e["key"] == "disk"
                && e["version"] == version
                && e["outcome"] == "ok"
        })
    };
    assert!(seen("key.unwrap", 1) && seen("key.wrap", 2) && seen("key.unwrap", 2), "{audit:?}");
    // The revoked client was turned away at the handshake.
    assert!(
        audit.iter().any(|e| e["operation"] == "tls.handshake"
            && e["outcome"] == "denied"
            && e["detail"].as_str().is_some_and(|d| d.contains("Revoked"))),
        "{audit:?}"
    );
    assert!(!audit.iter().any(|e| e["client"] == "host-gone" && e["outcome"] == "ok"));

    // Version 1 can go now: the volume still opens through its token.
    ok(&[
        "kms",
        "key",
        "revoke",
        "disk",
        "--version",
        "1",
        "--reason",
        "rotated",
        "--kms",
        s(&d.admin),
    ]);
    ok(&["test-key", s(&vol), "--token-only", "--kms", s(&d.eu)]);
}

#[test]
fn a_rebind_stopped_part_way_is_finished_by_cryptsetup() {
    nbd::require(&["cryptsetup"]);
    let d = Deployment::start("kms-reencrypt-cs");
    let (vol, data) = d.bound_volume("vol");
    let pass = d.pass_file();
    let old = kms_tokens(&vol).pop().unwrap();
    d.rotate();
    let mut args = vec![
        "reencrypt",
        s(&vol),
        "--kms",
        s(&d.eu),
        "--key-file",
        s(&pass),
        "--hotzone-size",
        "1M",
    ];
    args.extend_from_slice(CHEAP_KDF);
    let out = rampart_env(&args, &[("RAMPART_REENCRYPT_STOP_AFTER", "2")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = nbd::run_limited(
        "cryptsetup",
        &[
            "reencrypt",
            "--resume-only",
            "--force-offline-reencrypt",
            "--batch-mode",
            "--key-file",
            s(&pass),
            s(&vol),
        ],
        Duration::from_secs(120),
    );
    nbd::ok("cryptsetup reencrypt --resume-only", out);
    // cryptsetup keeps foreign tokens: the old binding stays, naming no
    // keyslot; the new one opens the volume.
    let tokens = kms_tokens(&vol);
    let new: Vec<&(String, Value)> = tokens
        .iter()
        .filter(|(_, t)| t["keyslots"].as_array().is_some_and(|l| !l.is_empty()))
        .collect();
    assert_eq!(new.len(), 1, "{tokens:?}");
    assert_eq!(new[0].1["key_version"], 2);
    ok(&["test-key", s(&vol), "--token-only", "--kms", s(&d.eu)]);
    assert!(cryptsetup_opens(&vol, &pass));
    nbd::assert_same("the plaintext after cryptsetup's finish", &token_export(&vol, &d.eu), &data);
    let _ = old;
}

#[test]
fn a_served_bound_volume_is_rebound_online() {
    nbd::require(&["cryptsetup", "nbdcopy"]);
    let d = Deployment::start("kms-reencrypt-online");
    let (vol, data) = d.bound_volume("vol");
    let pass = d.pass_file();
    let key_before = token_volume_key(&vol, &d.eu);
    let old = kms_tokens(&vol).pop().unwrap();
    d.rotate();
    // Served through its token, no passphrase anywhere.
    let socket = d.path("nbd.sock");
    let mut serve = nbd::Serve::start(
        &[s(&vol), "--socket", s(&socket), "--kms", s(&d.eu), "--token-only", "--heartbeat", "1s"],
        d.path("serve.log"),
        1,
    );
    let uri = nbd::unix_uri(&socket, "");
    let mut args = vec![
        "reencrypt",
        s(&vol),
        "--kms",
        s(&d.eu),
        "--key-file",
        s(&pass),
        "--hotzone-size",
        "1M",
        "--json",
    ];
    args.extend_from_slice(CHEAP_KDF);
    let out = rampart(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events = String::from_utf8(out.stdout).unwrap();
    assert!(events.lines().last().unwrap().contains("\"finished\""), "{events}");
    serve.assert_alive("the online rebind");
    // The server now holds the new volume key, bound to version 2: its
    // heartbeats say so, and revoking version 1 leaves the export open.
    ok(&[
        "kms",
        "key",
        "revoke",
        "disk",
        "--version",
        "1",
        "--reason",
        "rotated",
        "--kms",
        s(&d.admin),
    ]);
    std::thread::sleep(Duration::from_secs(3));
    serve.assert_alive("revoking the old key version");
    let beats: Vec<Value> =
        d.audit().into_iter().filter(|e| e["operation"] == "heartbeat").collect();
    let last = beats.last().unwrap_or_else(|| panic!("no heartbeat: {}", serve.log()));
    assert_eq!(last["outcome"], "ok", "{last}\n{}", serve.log());
    let copy = d.path("copy.raw");
    nbd::ok("nbdcopy", nbd::run("nbdcopy", &[uri.as_str(), s(&copy)]));
    nbd::assert_same(
        "the served plaintext after the rebind",
        &std::fs::read(&copy).unwrap(),
        &data,
    );
    serve.stop();
    assert_rebound(&d, &vol, &old, 2, &data);
    assert_ne!(token_volume_key(&vol, &d.eu), key_before, "the volume key did not change");
}
