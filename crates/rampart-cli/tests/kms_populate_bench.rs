#![allow(clippy::unwrap_used)]
//! `rampart kms populate` writes keys, clients and audit entries as the
//! server does (the keys unwrap, the bundles connect, `audit verify`
//! checks the appended chain and its MACs), refuses an unseal key that is
//! not the store's, and `rampart kms bench` plays many hosts with unwraps
//! of random keys mixed with heartbeats. On SQLite and on PostgreSQL.
//! A populated PostgreSQL store is left vacuumed and analysed.

use crate::helpers::kms_support as support;

use support::{free_port, json_lines, ok, rampart, ServerProcess, TempDir};

support::on_each_store!(populate_then_bench_and_verify, "populate");

fn populate_then_bench_and_verify(store: Option<&str>) {
    let tmp = TempDir::new("kms-populate");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let bundles = tmp.join("hosts").display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let with_store = |mut args: Vec<&'static str>| {
        let mut out: Vec<String> = args.drain(..).map(str::to_owned).collect();
        if let Some(url) = store {
            out.extend(["--store".to_owned(), url.to_owned()]);
        }
        out
    };
    let mut init: Vec<String> = ["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    init.extend(with_store(vec![]));
    ok(&init.iter().map(String::as_str).collect::<Vec<_>>());

    // An unseal key of another deployment is refused, and writes nothing.
    let other = tmp.join("other").display().to_string();
    ok(&["kms", "init", "--data-dir", &other, "--endpoint", "127.0.0.1:1"]);
    let other_key = format!("{other}/unseal.key");
    let mut wrong: Vec<String> =
        ["kms", "populate", "--data-dir", &dir_s, "--unseal-key-file", &other_key, "--keys", "3"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
    wrong.extend(with_store(vec![]));
    let out = rampart(&wrong.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not open this store"), "{err}");

    let mut populate: Vec<String> = [
        "kms",
        "populate",
        "--data-dir",
        &dir_s,
        "--keys",
        "40",
        "--clients",
        "4",
        "--audit",
        "3000",
        "--bundles",
        "2",
        "--bundle-dir",
        &bundles,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    populate.extend(with_store(vec![]));
    let said = ok(&populate.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(said.contains("40 keys, 4 clients (2 bundles), 3000 audit entries"), "{said}");
    if let Some(url) = store {
        assert_settled(url);
    }

    let _server = ServerProcess::start(&dir, port, store);
    let admin = dir.join("admin.bundle").display().to_string();
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kms", admin.as_str()]);
        ok(&all)
    };
    let keys = json_lines(cli(&["kms", "key", "list", "--json", "--state", "active"]));
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 40);
    assert_eq!(keys[0]["name"], "key-0000000");
    assert_eq!(keys[39]["name"], "key-0000039");
    let hosts = json_lines(cli(&["kms", "client", "list", "--json", "--label", "role=host"]));
    assert_eq!(hosts.as_array().unwrap().len(), 4);

    // The appended chain verifies, MACs included.
    let report: serde_json::Value =
        serde_json::from_str(&cli(&["kms", "audit", "verify", "--json"])).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["macs_checked"], true, "{report}");
    assert!(report["entries"].as_u64().unwrap() >= 3000, "{report}");
    assert_eq!(report["unauthenticated"], 0, "{report}");

    // Two hosts (the bundles populate wrote) unwrap secrets under 5 of
    // the 40 keys and send heartbeats.
    let bench = ok(&[
        "kms",
        "bench",
        "--key",
        "key-",
        "--key-count",
        "40",
        "--sample",
        "5",
        "--heartbeat-percent",
        "50",
        "--bundles",
        &bundles,
        "--concurrency",
        "2",
        "--seconds",
        "0.5",
        "--json",
    ]);
    let bench: serde_json::Value = serde_json::from_str(&bench).unwrap();
    let run = &bench["runs"][0];
    assert_eq!(run["hosts"], 2, "{bench}");
    assert_eq!(run["keys"], 5, "{bench}");
    assert!(run["unwraps"].as_u64().unwrap() > 0, "{bench}");
    assert!(run["heartbeats"].as_u64().unwrap() > 0, "{bench}");

    // The hosts' unwraps were chained after the bulk entries: still intact.
    let after: serde_json::Value =
        serde_json::from_str(&cli(&["kms", "audit", "verify", "--json"])).unwrap();
    assert_eq!(after["ok"], true, "{after}");
    assert!(after["entries"].as_u64() > report["entries"].as_u64(), "{after}");
    let by_host = json_lines(cli(&["kms", "audit", "--json", "--by", "host-0000001"]));
    // Each host checks in about the secret it holds: the first check-in
    // is chained, the unchanged ones after it are only counted.
    for host in ["host-0000000", "host-0000001"] {
        let entries = json_lines(cli(&["kms", "audit", "--json", "--by", host]));
        let beats = entries.as_array().unwrap().iter().filter(|e| e["operation"] == "heartbeat");
        assert_eq!(beats.count(), 1, "{host}: {entries}");
    }
    assert!(
        by_host.as_array().unwrap().iter().any(|e| e["operation"] == "key.unwrap"
            && e["outcome"] == "ok"
            && e["time_ms"].as_i64() > Some(0)),
        "{by_host}"
    );

    // Bad bench flags are a usage error.
    let out = rampart(&["kms", "bench", "--key", "k", "--heartbeat-percent", "101"]);
    assert_eq!(out.status.code(), Some(2));
}

/// What `populate` leaves on PostgreSQL: every table it filled vacuumed
/// and analysed, by the statistics views.
fn assert_settled(url: &str) {
    let tables = "'kms_keys', 'kms_key_versions', 'kms_key_selectors', 'kms_clients', \
                  'kms_client_labels', 'kms_audit', 'kms_audit_refs'";
    let query = format!(
        "SELECT relname FROM pg_stat_user_tables WHERE relname IN ({tables}) \
         AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL ORDER BY relname"
    );
    // The statistics of the populating backend reach the views within a
    // second of its end.
    let mut settled = String::new();
    let all = support::wait_until(std::time::Duration::from_secs(10), || {
        let out =
            std::process::Command::new("psql").args([url, "-XAtqc", &query]).output().unwrap();
        assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
        settled = String::from_utf8(out.stdout).unwrap();
        settled.lines().count() == 7
    });
    assert!(all, "tables vacuumed and analysed after populate: {settled}");
}
