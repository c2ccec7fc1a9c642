#![allow(clippy::unwrap_used)]
//! `rampart kms key list`, `client list` and `audit` page through the
//! server's lists on their own: what they stream (`--json`, one object a
//! line) is exactly the API's pages walked to the end, with any page size,
//! `--limit N` stops after N items, and the filters reach the server. On
//! SQLite and on PostgreSQL (`$RAMPART_TEST_PG_URL`, which scripts/test
//! starts, or a throwaway cluster).

use crate::helpers::kms_support as support;

use rampart_kms::client::{AuditQuery, ClientQuery, KeyQuery, KmsClient};
use rampart_kms::Bundle;
use serde_json::Value;
use support::{free_port, json_lines, ok, ServerProcess, TempDir};

/// Walks an API list with pages of `limit`; every item as JSON.
async fn api_walk<T: serde::Serialize, F, Fut>(mut fetch: F) -> Vec<Value>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<
        Output = Result<rampart_kms::client::Page<T>, rampart_kms::client::ClientError>,
    >,
{
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = fetch(cursor.take()).await.unwrap();
        out.extend(page.items.iter().map(|i| serde_json::to_value(i).unwrap()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

/// Streamed key lines as the client's `KeyInfo` reads them: each line
/// also names its object type (which the typed model leaves out).
fn as_key_info(lines: Vec<Value>) -> Vec<Value> {
    lines
        .into_iter()
        .map(|line| {
            assert!(line["type"].is_string(), "no object type: {line}");
            let key: rampart_kms::model::KeyInfo = serde_json::from_value(line).unwrap();
            serde_json::to_value(key).unwrap()
        })
        .collect()
}

fn lines(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => panic!("not a list: {other}"),
    }
}

support::on_each_store!(async streamed_lists_equal_the_api_pages, "stream");

async fn streamed_lists_equal_the_api_pages(store: Option<&str>) {
    let tmp = TempDir::new("kms-stream");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let mut init = vec!["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint];
    if let Some(url) = store {
        init.extend(["--store", url]);
    }
    ok(&init);
    let _server = ServerProcess::start(&dir, port, store);
    let admin_path = dir.join("admin.bundle").display().to_string();
    let admin = KmsClient::new(&Bundle::read(&dir.join("admin.bundle")).unwrap()).unwrap();
    for i in 0..230 {
        let allow = if i % 3 == 0 { vec!["label:tier=gold".to_owned()] } else { Vec::new() };
        admin.create_key(&format!("key-{i:04}"), &allow, false).await.unwrap();
    }
    for i in 0..5 {
        let labels = rampart_kms::model::Labels::parse_list(&format!("n={i}")).unwrap();
        admin.issue_client(&format!("host-{i}"), &labels, false, Some(7), vec![]).await.unwrap();
    }
    admin.revoke_key("key-0007", "test", None).await.unwrap();
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kms", admin_path.as_str()]);
        ok(&all)
    };

    // Keys: every page size gives the API's walk, item for item.
    let api = api_walk(|cursor| {
        let admin = admin.clone();
        async move {
            let q = KeyQuery { limit: Some(7), ..KeyQuery::default() };
            admin.key_page(&q, cursor.as_deref()).await
        }
    })
    .await;
    assert_eq!(api.len(), 230);
    for page_size in ["7", "1000", "10000", "229"] {
        let streamed =
            lines(json_lines(cli(&["kms", "key", "list", "--json", "--page-size", page_size])));
        assert_eq!(as_key_info(streamed), api, "--page-size {page_size}");
    }
    let first = lines(json_lines(cli(&[
        "kms",
        "key",
        "list",
        "--json",
        "--limit",
        "10",
        "--page-size",
        "3",
    ])));
    assert_eq!(as_key_info(first), api[..10]);
    assert!(lines(json_lines(cli(&["kms", "key", "list", "--json", "--limit", "0"]))).is_empty());
    let text = cli(&["kms", "key", "list", "--limit", "5"]);
    assert_eq!(text.lines().count(), 6, "a header and five keys:\n{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("key-0000"), "{text}");

    // The filters reach the server.
    let filtered = api_walk(|cursor| {
        let admin = admin.clone();
        async move {
            let q = KeyQuery {
                limit: Some(4),
                prefix: Some("key-01".into()),
                selector: Some("label:tier=gold".into()),
                ..KeyQuery::default()
            };
            admin.key_page(&q, cursor.as_deref()).await
        }
    })
    .await;
    assert_eq!(filtered.len(), 33, "the multiples of 3 in key-0100..key-0199");
    let streamed = lines(json_lines(cli(&[
        "kms",
        "key",
        "list",
        "--json",
        "--prefix",
        "key-01",
        "--selector",
        "label:tier=gold",
        "--page-size",
        "5",
    ])));
    assert_eq!(as_key_info(streamed), filtered);
    let revoked = lines(json_lines(cli(&["kms", "key", "list", "--json", "--state", "revoked"])));
    assert_eq!(revoked.len(), 1);
    assert_eq!(revoked[0]["name"], "key-0007");

    // Clients.
    let api = api_walk(|cursor| {
        let admin = admin.clone();
        async move {
            let q = ClientQuery { limit: Some(2), ..ClientQuery::default() };
            admin.client_page(&q, cursor.as_deref()).await
        }
    })
    .await;
    assert_eq!(api.len(), 6);
    let streamed = lines(json_lines(cli(&["kms", "client", "list", "--json", "--page-size", "2"])));
    assert_eq!(streamed, api);
    let labelled = lines(json_lines(cli(&["kms", "client", "list", "--json", "--label", "n=3"])));
    assert_eq!(labelled.len(), 1);
    assert_eq!(labelled[0]["name"], "host-3");
    let admins = lines(json_lines(cli(&["kms", "client", "list", "--json", "--admin", "true"])));
    assert_eq!(admins.len(), 1);
    assert_eq!(admins[0]["name"], "admin");

    // The audit log, narrowed to one key (the listing's own requests add
    // entries about no key, so the walk has a fixed end).
    let api = api_walk(|cursor| {
        let admin = admin.clone();
        async move {
            let q = AuditQuery {
                limit: Some(1),
                key: Some("key-0007".into()),
                ..AuditQuery::default()
            };
            admin.audit_list_page(&q, cursor.as_deref()).await
        }
    })
    .await;
    assert_eq!(api.len(), 2, "create and revoke: {api:?}");
    let streamed = lines(json_lines(cli(&[
        "kms",
        "audit",
        "--json",
        "--key",
        "key-0007",
        "--page-size",
        "1",
    ])));
    assert_eq!(streamed, api);
    let creates = lines(json_lines(cli(&[
        "kms",
        "audit",
        "--json",
        "--operation",
        "key.create",
        "--limit",
        "100",
    ])));
    assert_eq!(creates.len(), 100);
    assert!(creates.iter().all(|e| e["operation"] == "key.create"));
    // A bad filter is the server's clear 400, and a non-zero exit.
    let out = support::rampart(&["kms", "key", "list", "--prefix", "a/b", "--kms", &admin_path]);
    assert_eq!(out.status.code(), Some(2), "a refused request is a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("prefix must be"), "{stderr}");
}
