#![allow(clippy::unwrap_used)]
//! `rampart kms audit export / prune / verify --file / --from-checkpoint`
//! and `kms serve --audit-file` as an administrator runs them, against a
//! real server process, on SQLite and on PostgreSQL.

use crate::helpers::kms_support as support;

use std::path::Path;
use std::time::Duration;

use support::{
    free_port, issue_client, json_lines, ok, rampart, rampart_in, wait_until, ServerProcess,
    TempDir,
};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = rampart(args);
    assert!(!out.status.success(), "rampart {args:?} succeeded");
    String::from_utf8(out.stderr).unwrap()
}

/// The sequence numbers and hashes in the sink files, in order.
fn sink(dir: &Path) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for name in ["audit.jsonl.1", "audit.jsonl"] {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else { continue };
        for line in text.lines() {
            let e = json(line);
            out.push((e["seq"].as_u64().unwrap(), e["hash"].as_str().unwrap().to_owned()));
        }
    }
    out
}

support::on_each_store!(audit_archive_from_the_cli, "archive_cli");

fn audit_archive_from_the_cli(store: Option<&str>) {
    let tmp = TempDir::new("kms-audit-cli");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let mut init = vec!["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint];
    if let Some(url) = store {
        init.extend_from_slice(&["--store", url]);
    }
    ok(&init);
    let audit_file = tmp.join("audit.jsonl");
    let audit_file_s = audit_file.display().to_string();
    let server = ServerProcess::start_with(
        &dir,
        port,
        store,
        &["--audit-checkpoint-entries", "5", "--audit-file", &audit_file_s],
    );
    let admin = dir.join("admin.bundle").display().to_string();
    let host = tmp.join("host.bundle").display().to_string();
    ok(&["kms", "key", "create", "disk", "--allow", "client:host", "--kms", &admin]);
    issue_client(&admin, "host", "", &host);
    for _ in 0..4 {
        let wrapped = rampart_in(&["kms", "key", "wrap", "disk", "--kms", &host], b"secret");
        assert!(wrapped.status.success());
        let c = String::from_utf8(wrapped.stdout).unwrap();
        ok(&["kms", "key", "unwrap", c.trim(), "--kms", &host]);
    }

    // The server checkpoints on its own (every 5 entries here).
    assert!(
        wait_until(Duration::from_secs(10), || {
            let report = json(&ok(&[
                "kms",
                "audit",
                "verify",
                "--from-checkpoint",
                "--json",
                "--kms",
                &admin,
            ]));
            report["ok"] == true && report["start"] == "checkpoint"
        }),
        "no checkpoint"
    );
    let text = ok(&["kms", "audit", "verify", "--from-checkpoint", "--kms", &admin]);
    assert!(text.contains("intact") && text.contains("after checkpoint"), "{text}");

    // Prune refuses entries no export covers (a usage error, exit 2).
    let out = rampart(&["kms", "audit", "prune", "--until", "5", "--kms", &admin]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no export covers"));

    let a1 = tmp.join("a1.jsonl");
    let a1_s = a1.display().to_string();
    ok(&["kms", "audit", "export", "--until", "5", "-o", &a1_s, "--kms", &admin]);
    assert!(!tmp.join("a1.jsonl.partial").exists());
    assert_eq!(std::fs::read_to_string(&a1).unwrap().lines().count(), 6);
    // An archive is never overwritten.
    let out = rampart(&["kms", "audit", "export", "--until", "6", "-o", &a1_s, "--kms", &admin]);
    assert_eq!(out.status.code(), Some(2));

    // Offline: links without the key, MACs with it.
    let offline = ok(&["kms", "audit", "verify", "--file", &a1_s]);
    assert!(
        offline.contains("intact: 5 entries") && offline.contains("MACs not checked"),
        "{offline}"
    );
    let key = dir.join("unseal.key").display().to_string();
    let report = json(&ok(&[
        "kms",
        "audit",
        "verify",
        "--file",
        &a1_s,
        "--unseal-key-file",
        &key,
        "--json",
    ]));
    assert_eq!(
        (report["ok"].as_bool(), report["macs_checked"].as_bool()),
        (Some(true), Some(true))
    );
    let head = report["head_hash"].as_str().unwrap().to_owned();
    // A removed line is caught with the entry number.
    let text = std::fs::read_to_string(&a1).unwrap();
    let cut = tmp.join("cut.jsonl");
    let mut kept: Vec<&str> = text.lines().collect();
    kept.remove(3);
    std::fs::write(&cut, kept.join("\n") + "\n").unwrap();
    let err = fails(&["kms", "audit", "verify", "--file", &cut.display().to_string()]);
    assert!(err.contains("FAILED at entry 3"), "{err}");

    let pruned = ok(&["kms", "audit", "prune", "--until", "5", "--kms", &admin]);
    assert!(pruned.contains("removed 5 entries"), "{pruned}");
    let full = ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(full.contains("intact") && full.contains("after anchor"), "{full}");
    ok(&["kms", "audit", "verify", "--from-checkpoint", "--kms", &admin]);

    // logrotate: rename, SIGHUP, and the server writes a new file.
    std::fs::rename(&audit_file, tmp.join("audit.jsonl.1")).unwrap();
    let pid = server.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    assert!(wait_until(Duration::from_secs(10), || {
        ok(&["kms", "key", "show", "disk", "--kms", &admin]);
        audit_file.exists()
    }));

    // The rest, up to a time, chains onto the first archive.
    let a2 = tmp.join("a2.jsonl");
    let a2_s = a2.display().to_string();
    ok(&[
        "kms",
        "audit",
        "export",
        "--until",
        "2999-01-01T00:00:00Z",
        "-o",
        &a2_s,
        "--kms",
        &admin,
    ]);
    let report =
        json(&ok(&["kms", "audit", "verify", "--file", &a2_s, "--anchor", &head, "--json"]));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["start_seq"], 5);
    let err = fails(&["kms", "audit", "verify", "--file", &a2_s, "--anchor", &"0".repeat(64)]);
    assert!(err.contains("FAILED at entry 6"), "{err}");

    // The sink holds every chained entry once, in order, across the
    // rename; and the same ones the store still holds.
    let in_sink = sink(tmp.path());
    let seqs: Vec<u64> = in_sink.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let stored = json_lines(ok(&["kms", "audit", "--json", "--kms", &admin]));
    for entry in stored.as_array().unwrap() {
        let seq = entry["seq"].as_u64().unwrap();
        if seq as usize <= in_sink.len() {
            assert_eq!(in_sink[seq as usize - 1].1, entry["hash"].as_str().unwrap(), "entry {seq}");
        }
    }
    assert!(stored[0]["seq"] == 6, "pruned entries are gone from the store");
}
