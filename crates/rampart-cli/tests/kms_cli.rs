#![allow(clippy::unwrap_used)]
//! `rampart kms` as a user runs it, on the default SQLite store: init,
//! serve (a real server process), client bundles, the key lifecycle,
//! wrap/unwrap, the audit log and Shamir unsealing.

use crate::helpers::kms_support as support;

use std::os::unix::fs::PermissionsExt;

use support::{free_port, issue_client, ok, rampart, rampart_in, ServerProcess, TempDir};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn kms_cli_end_to_end_on_sqlite() {
    let tmp = TempDir::new("kms-cli");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    ok(&["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint, "--san", "kms.example"]);
    for (file, want) in
        [("admin.bundle", 0o600), ("unseal.key", 0o600), ("server.key", 0o600), ("kms.db", 0o600)]
    {
        assert_eq!(mode(&dir.join(file)), want, "{file}");
    }
    // A second init on the same directory is refused (usage error).
    let again = rampart(&["kms", "init", "--data-dir", &dir_s]);
    assert_eq!(again.status.code(), Some(2));

    let _server = ServerProcess::start(&dir, port, None);
    let admin = dir.join("admin.bundle").display().to_string();
    let eu = tmp.join("eu.bundle").display().to_string();
    let us = tmp.join("us.bundle").display().to_string();
    ok(&["kms", "key", "create", "disk", "--allow", "label:region=eu", "--kms", &admin]);
    issue_client(&admin, "host-eu", "region=eu,role=host", &eu);
    issue_client(&admin, "host-us", "region=us", &us);
    assert_eq!(mode(&tmp.join("eu.bundle")), 0o600);
    let clients = support::json_lines(ok(&["kms", "client", "list", "--json", "--kms", &admin]));
    assert_eq!(clients.as_array().unwrap().len(), 3);

    // wrap from standard input, unwrap to standard output.
    let wrapped = rampart_in(
        &["kms", "key", "wrap", "disk", "--context", "vol-1", "--kms", &eu],
        b"s3cret\x00bytes",
    );
    assert!(wrapped.status.success(), "{}", String::from_utf8_lossy(&wrapped.stderr));
    let ciphertext = String::from_utf8(wrapped.stdout).unwrap().trim().to_owned();
    assert!(ciphertext.starts_with("rampart:v1:disk:1:"));
    let out = rampart(&["kms", "key", "unwrap", &ciphertext, "--context", "vol-1", "--kms", &eu]);
    assert!(out.status.success());
    assert_eq!(out.stdout, b"s3cret\x00bytes");
    // Refused: wrong region (exit 2, one line), wrong context.
    let refused =
        rampart(&["kms", "key", "unwrap", &ciphertext, "--context", "vol-1", "--kms", &us]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not allowed"), "{err}");
    assert_eq!(
        rampart(&["kms", "key", "unwrap", &ciphertext, "--context", "vol-2", "--kms", &eu])
            .status
            .code(),
        Some(2)
    );
    // No bundle at all.
    assert_eq!(rampart(&["kms", "key", "list"]).status.code(), Some(2));

    // Rotate, revoke, destroy.
    ok(&["kms", "key", "rotate", "disk", "--kms", &admin]);
    let newer = rampart_in(&["kms", "key", "wrap", "disk", "--kms", &eu], b"two");
    assert!(String::from_utf8(newer.stdout).unwrap().starts_with("rampart:v1:disk:2:"));
    let out = rampart(&["kms", "key", "unwrap", &ciphertext, "--context", "vol-1", "--kms", &eu]);
    assert_eq!(out.stdout, b"s3cret\x00bytes");
    ok(&["kms", "key", "revoke", "disk", "--reason", "stolen laptop", "--kms", &admin]);
    let show = ok(&["kms", "key", "show", "disk", "--kms", &admin]);
    assert!(show.contains("revoked") && show.contains("stolen laptop"), "{show}");
    assert_eq!(
        rampart(&["kms", "key", "unwrap", &ciphertext, "--context", "vol-1", "--kms", &eu])
            .status
            .code(),
        Some(2)
    );
    ok(&["kms", "key", "destroy", "disk", "--kms", &admin]);
    let keys = support::json_lines(ok(&["kms", "key", "list", "--json", "--kms", &admin]));
    assert!(
        keys[0]["versions"].as_array().unwrap().iter().all(|v| v["state"] == "destroyed"),
        "{keys}"
    );

    // Export of an exportable key, hex to a 0600 file.
    ok(&[
        "kms",
        "key",
        "create",
        "raw",
        "--allow",
        "client:host-eu",
        "--exportable",
        "--kms",
        &admin,
    ]);
    let material = tmp.join("raw.key");
    ok(&["kms", "key", "export", "raw", "--out", &material.display().to_string(), "--kms", &eu]);
    assert_eq!(mode(&material), 0o600);
    assert_eq!(std::fs::read_to_string(&material).unwrap().trim().len(), 64);

    // The benchmark: unwraps over kept-alive mTLS.
    let bench = ok(&[
        "kms",
        "bench",
        "--key",
        "raw",
        "--concurrency",
        "1,2",
        "--seconds",
        "0.3",
        "--json",
        "--kms",
        &eu,
    ]);
    let bench: serde_json::Value = serde_json::from_str(&bench).unwrap();
    assert_eq!(bench["runs"].as_array().unwrap().len(), 2);
    assert!(bench["runs"][1]["ops_per_second"].as_f64().unwrap() > 10.0, "{bench}");

    // The audit log, from the environment's bundle.
    let audit = std::process::Command::new(support::rampart_bin())
        .args(["kms", "audit", "--json"])
        .env("RAMPART_KMS", &admin)
        .output()
        .unwrap();
    assert!(audit.status.success());
    let entries = support::json_lines(&audit.stdout);
    let entries = entries.as_array().unwrap();
    assert!(entries.iter().any(|e| e["client"] == "host-us"
        && e["operation"] == "key.unwrap"
        && e["outcome"] == "denied"));
    assert!(entries.iter().any(|e| e["client"] == "host-eu"
        && e["operation"] == "key.unwrap"
        && e["outcome"] == "ok"));
    let later = ok(&["kms", "audit", "--since", "2999-01-01T00:00:00Z", "--json", "--kms", &admin]);
    assert_eq!(later, "", "no entry is after 2999");
    let verify = ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(verify.contains("intact"), "{verify}");
}

#[test]
fn kms_cli_shamir_unseal() {
    let tmp = TempDir::new("kms-shamir");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let out = ok(&[
        "kms",
        "init",
        "--data-dir",
        &dir_s,
        "--shares",
        "3",
        "--threshold",
        "2",
        "--endpoint",
        &format!("127.0.0.1:{port}"),
    ]);
    let shares: Vec<&str> = out.lines().collect();
    assert_eq!(shares.len(), 3);
    assert!(!dir.join("unseal.key").exists());
    let db = std::fs::read(dir.join("kms.db")).unwrap();
    for share in &shares {
        assert!(!db.windows(share.len()).any(|w| w == share.as_bytes()));
    }

    let _server = ServerProcess::start(&dir, port, None);
    let admin = dir.join("admin.bundle").display().to_string();
    let sealed = rampart(&["kms", "key", "list", "--kms", &admin]);
    assert_eq!(sealed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&sealed.stderr).contains("sealed"));
    let status = ok(&["kms", "status", "--kms", &admin]);
    assert!(status.contains("\"sealed\": true"), "{status}");

    let first = ok(&["kms", "unseal", "--share", shares[2], "--kms", &admin]);
    assert!(first.contains("1 of 2"), "{first}");
    assert_eq!(rampart(&["kms", "key", "list", "--kms", &admin]).status.code(), Some(1));
    // The second share from standard input.
    let second =
        rampart_in(&["kms", "unseal", "--kms", &admin], format!("{}\n", shares[0]).as_bytes());
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(String::from_utf8(second.stdout).unwrap().trim(), "unsealed");
    ok(&["kms", "key", "list", "--kms", &admin]);
}

/// The inodes of the TCP sockets process `pid` holds in the listening
/// state (from its file descriptors and the kernel's socket tables).
fn listening_sockets(pid: u32) -> Vec<String> {
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.display().to_string();
            Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut listening = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // State 0A is LISTEN; field 9 is the socket's inode.
            if fields.get(3) == Some(&"0A")
                && held.iter().any(|i| Some(&i.as_str()) == fields.get(9))
            {
                listening.push(fields[9].to_owned());
            }
        }
    }
    listening
}

/// `kms serve` opens only the listeners it is asked for: without
/// `--kmip-listen` the process listens on one TCP socket (the REST API),
/// with it on two; an address already taken stops it at start with one
/// line naming the flag that moves it.
#[test]
fn kms_serve_listens_only_where_asked() {
    let tmp = TempDir::new("kms-listen");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    ok(&["kms", "init", "--data-dir", &dir_s, "--endpoint", &format!("127.0.0.1:{port}")]);
    {
        let server = ServerProcess::start(&dir, port, None);
        let sockets = listening_sockets(server.child.id());
        assert_eq!(sockets.len(), 1, "REST only, without --kmip-listen: {sockets:?}");
        assert!(server.kmip.is_none());
    }
    {
        let server = ServerProcess::start_kmip(&dir, port, free_port(), None);
        let sockets = listening_sockets(server.child.id());
        assert_eq!(sockets.len(), 2, "REST and KMIP: {sockets:?}");
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (flag, args) in [
        ("--listen", vec!["--listen", taken.as_str()]),
        ("--kmip-listen", vec!["--listen", "127.0.0.1:0", "--kmip-listen", taken.as_str()]),
    ] {
        let mut all = vec!["kms", "serve", "--data-dir", &dir_s];
        all.extend(args);
        let out = rampart(&all);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        // The server logs that it unsealed before it binds; the error is
        // the one line after.
        let err = String::from_utf8(out.stderr).unwrap();
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("rampart: error")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert_eq!(err.lines().last(), errors.first().copied(), "{err}");
        assert!(err.contains(&format!("cannot listen on {taken}")), "{err}");
        assert!(err.contains(&format!("(change it with {flag})")), "{err}");
    }
}
