#![allow(clippy::unwrap_used)]
//! File encryption with key-manager keys, against a real `rampart kms
//! serve`: the `tar c dir | rampart encrypt --kms | rampart decrypt --kms
//! | tar x` pipe, each file-key unwrap audited with the client identity, a
//! wrong-region client and a revoked key refused (exit 2, no output), and
//! a stanza moved to another file refused.

use crate::helpers::kms_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kms_support::{free_port, ok, ServerProcess, TempDir};

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn rampart_file(args: &[&str], bundle: &Path) -> Output {
    Command::new(kms_support::rampart_bin())
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env("RAMPART_KMS", bundle)
        .env("RAMPART_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[track_caller]
fn refused(out: &Output, reason: &str, output: &Path) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(reason), "expected '{reason}': {err}");
    assert!(!output.exists());
}

#[test]
fn kms_recipients_pipes_policy_and_audit() {
    let tmp = TempDir::new("file-kms");
    let dir = tmp.join("kms");
    let port = free_port();
    ok(&["kms", "init", "--data-dir", s(&dir), "--endpoint", &format!("127.0.0.1:{port}")]);
    let _server = ServerProcess::start(&dir, port, None);
    let admin = dir.join("admin.bundle");
    let (eu, us): (PathBuf, PathBuf) = (tmp.join("eu.bundle"), tmp.join("us.bundle"));
    kms_support::issue_client(s(&admin), "backup-eu", "region=eu", s(&eu));
    kms_support::issue_client(s(&admin), "backup-us", "region=us", s(&us));
    ok(&["kms", "key", "create", "backups", "--allow", "label:region=eu", "--kms", s(&admin)]);

    // tar c dir | rampart encrypt | rampart decrypt | tar x
    let src = tmp.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.bin"), kms_support::common::random_bytes(1, 3_000_000)).unwrap();
    std::fs::write(src.join("sub/b.txt"), b"hello\n").unwrap();
    let dst = tmp.join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    let bin = kms_support::rampart_bin();
    let script = format!(
        "set -o pipefail; tar -C {src} -c . | RAMPART_KMS={eu} {bin} encrypt --key backups \
         | RAMPART_KMS={eu} {bin} decrypt | tar -C {dst} -x",
        src = s(&src),
        dst = s(&dst),
        eu = s(&eu)
    );
    let out =
        Command::new("bash").args(["-c", &script]).env_remove("RAMPART_KMS").output().unwrap();
    assert!(out.status.success(), "pipe: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read(src.join("a.bin")).unwrap(),
        std::fs::read(dst.join("a.bin")).unwrap()
    );
    assert_eq!(std::fs::read(dst.join("sub/b.txt")).unwrap(), b"hello\n");

    // A file encrypted to the key and to a recovery passphrase.
    let plain = tmp.join("plain");
    std::fs::write(&plain, kms_support::common::random_bytes(2, 100_000)).unwrap();
    let pass = tmp.join("pass");
    std::fs::write(&pass, b"recovery").unwrap();
    let enc = tmp.join("plain.rf");
    let out = rampart_file(
        &[
            "encrypt",
            s(&plain),
            "-o",
            s(&enc),
            "--key",
            "backups",
            "--key-file",
            s(&pass),
            "--pbkdf-force-iterations",
            "4",
            "--pbkdf-memory",
            "1024",
            "--json",
        ],
        &eu,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["recipients"], serde_json::json!(["kms:backups", "passphrase"]));
    let dec = tmp.join("plain.out");
    let out = rampart_file(&["decrypt", s(&enc), "-o", s(&dec)], &eu);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&dec).unwrap(), std::fs::read(&plain).unwrap());
    std::fs::remove_file(&dec).unwrap();

    // The wrong region is refused by the server's policy.
    let out = rampart_file(&["decrypt", s(&enc), "-o", s(&dec)], &us);
    refused(&out, "key manager", &dec);

    // A stanza moved to another file does not unwrap there.
    let other = tmp.join("other.rf");
    let out = rampart_file(&["encrypt", s(&plain), "-o", s(&other), "--key", "backups"], &eu);
    assert!(out.status.success());
    let a = std::fs::read(&enc).unwrap();
    let mut b = std::fs::read(&other).unwrap();
    let stanza_len = u16::from_be_bytes([a[37], a[38]]) as usize;
    let b_len = u16::from_be_bytes([b[37], b[38]]) as usize;
    assert_eq!(stanza_len, b_len);
    b[36..39 + stanza_len].copy_from_slice(&a[36..39 + stanza_len]);
    let moved = tmp.join("moved.rf");
    std::fs::write(&moved, &b).unwrap();
    let out = rampart_file(&["decrypt", s(&moved), "-o", s(&dec)], &eu);
    refused(&out, "key manager", &dec);

    // Every unwrap is audited with the client identity.
    let audit = rampart_file(&["kms", "audit", "--json"], &admin);
    let entries = kms_support::json_lines(&audit.stdout);
    let entries = entries.as_array().unwrap();
    let unwraps = |client: &str, outcome: &str| {
        entries
            .iter()
            .filter(|e| {
                e["client"] == client && e["operation"] == "key.unwrap" && e["outcome"] == outcome
            })
            .count()
    };
    assert!(unwraps("backup-eu", "ok") >= 2, "{entries:?}");
    assert!(unwraps("backup-us", "denied") >= 1, "{entries:?}");

    // Revoked: refused, but the recovery passphrase still opens the file.
    ok(&["kms", "key", "revoke", "backups", "--reason", "test", "--kms", s(&admin)]);
    let out = rampart_file(&["decrypt", s(&enc), "-o", s(&dec)], &eu);
    refused(&out, "key manager", &dec);
    let out = rampart_file(&["decrypt", s(&enc), "-o", s(&dec), "--key-file", s(&pass)], &eu);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&dec).unwrap(), std::fs::read(&plain).unwrap());
    // And new files cannot be encrypted to a revoked key.
    let out = rampart_file(
        &["encrypt", s(&plain), "-o", s(&tmp.join("new.rf")), "--key", "backups"],
        &eu,
    );
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!tmp.join("new.rf").exists());
}
