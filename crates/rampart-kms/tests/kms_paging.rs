//! Paged lists of the key server (keys, clients, audit), end to end: an
//! in-process server with real TLS and a real store, driven by the client
//! library, on SQLite and again on PostgreSQL (a fresh database in the
//! cluster at `$RAMPART_TEST_PG_URL`, which scripts/test starts, or outside
//! CI a throwaway cluster from scripts/pg-test-cluster).
//!
//! - every list walked to its end while items are inserted and deleted:
//!   no item twice, none missing among those that existed throughout;
//! - bad limits and cursors (garbage, truncated, forged, from another
//!   list, given with other filters) refused with 400 and a clear message;
//! - every filter (prefix, state, selector, label, admin, revoked, and the
//!   audit's time, client, key, operation and outcome);
//! - on PostgreSQL, a page of one state walks the state index and reads
//!   no table from end to end.

use crate::common;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use common::{Backend, PgCluster, TempDir};
use rampart_kms::client::{AuditQuery, ClientError, ClientQuery, KeyQuery, KmsClient, RetryPolicy};
use rampart_kms::model::{
    now_ms, AuditDraft, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Labels, Selector,
};
use rampart_kms::store::{StateChange, Store};
use rampart_kms::testing::{TestDeployment, TestServer};
use rampart_kms::Bundle;

/// Deletes rows behind the server's back, as another server of the
/// deployment (or a later delete operation) would.
enum Sql {
    Sqlite(std::sync::Mutex<rusqlite::Connection>),
    Postgres(tokio_postgres::Client),
}

impl Sql {
    async fn exec(&self, sql: &str, name: &str) {
        match self {
            Self::Sqlite(conn) => {
                let conn = conn.lock().unwrap();
                conn.execute(&sql.replace("$1", "?1"), [name]).unwrap();
            }
            Self::Postgres(client) => {
                client.execute(sql, &[&name]).await.unwrap();
            }
        }
    }
}

struct Deployment {
    store: Arc<dyn Store>,
    admin: Bundle,
    sql: Sql,
    // Dropped in this order: the server stops, then its directory and its
    // cluster go.
    _server: TestServer,
    _dir: TempDir,
    _cluster: Option<PgCluster>,
}

impl Deployment {
    async fn on(backend: Backend, tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let data_dir = dir.path().join("data");
        let cluster = (backend == Backend::Postgres).then(PgCluster::get);
        let pg = cluster.as_ref().map(|c| c.database(tag));
        let how = TestDeployment { store_url: pg.as_deref(), ..TestDeployment::default() };
        // The walks below are many small requests from one certificate.
        let server = TestServer::start(&data_dir, &how, |o| o.limits.rate = 0.0).await;
        let sql = match &pg {
            Some(url) => {
                let (client, connection) =
                    tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
                tokio::spawn(connection);
                Sql::Postgres(client)
            }
            None => {
                let conn = rusqlite::Connection::open(data_dir.join("kms.db")).unwrap();
                conn.busy_timeout(Duration::from_secs(10)).unwrap();
                Sql::Sqlite(std::sync::Mutex::new(conn))
            }
        };
        Self {
            store: Arc::clone(&server.store),
            admin: server.admin.clone(),
            sql,
            _server: server,
            _dir: dir,
            _cluster: cluster,
        }
    }

    fn admin(&self) -> KmsClient {
        let policy =
            RetryPolicy { rounds: 2, backoff: Duration::from_millis(10), ..RetryPolicy::default() };
        KmsClient::with_policy(&self.admin, policy).unwrap()
    }

    /// A key straight into the store (its material is never opened here).
    async fn key(&self, name: &str, allow: &[&str]) {
        let allow = allow.iter().map(|s| Selector::parse(s).unwrap()).collect();
        let key = KeyInfo {
            name: name.into(),
            exportable: false,
            allow,
            created_ms: now_ms(),
            versions: vec![KeyVersionInfo {
                version: 1,
                state: KeyState::Active,
                created_ms: now_ms(),
                changed_ms: None,
            }],
        };
        self.store.create_key(key, vec![0u8; 60]).await.unwrap();
    }

    /// A client straight into the store.
    async fn client(&self, name: &str, labels: &str, admin: bool) {
        let client = ClientInfo {
            name: name.into(),
            labels: Labels::parse_list(labels).unwrap(),
            admin,
            serial: "01".into(),
            fingerprint: format!("{:0>64}", hex::encode(name)),
            created_ms: now_ms(),
            not_after_ms: now_ms() + 86_400_000,
            revoked: None,
        };
        self.store.add_client(client).await.unwrap();
    }

    async fn delete_key(&self, name: &str) {
        self.sql.exec("DELETE FROM kms_key_versions WHERE name = $1", name).await;
        self.sql.exec("DELETE FROM kms_keys WHERE name = $1", name).await;
    }

    async fn delete_client(&self, name: &str) {
        self.sql.exec("DELETE FROM kms_clients WHERE name = $1", name).await;
    }
}

fn draft(n: usize) -> AuditDraft {
    AuditDraft {
        time_ms: now_ms(),
        client: format!("seed-{}", n % 3),
        operation: "test.seed".into(),
        key: None,
        version: None,
        outcome: "ok".into(),
        detail: String::new(),
    }
}

fn key_name(i: usize) -> String {
    format!("key-{i:04}")
}

fn client_name(i: usize) -> String {
    format!("host-{i:04}")
}

/// Walks a list to its end; the items' identities in the order received.
/// Walks a list to its end, page by page.
async fn walk<T, F, Fut>(fetch: F, id: impl Fn(&T) -> String) -> Vec<String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<rampart_kms::client::Page<T>, ClientError>>,
{
    walk_pages(None, fetch, id).await
}

/// Walks a list to its end while a writer counts its rounds in
/// `changes`: between any two pages the store changed at least once, on
/// a machine of any speed.
async fn walk_between_changes<T, F, Fut>(
    changes: &AtomicUsize,
    fetch: F,
    id: impl Fn(&T) -> String,
) -> Vec<String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<rampart_kms::client::Page<T>, ClientError>>,
{
    walk_pages(Some(changes), fetch, id).await
}

async fn walk_pages<T, F, Fut>(
    changes: Option<&AtomicUsize>,
    mut fetch: F,
    id: impl Fn(&T) -> String,
) -> Vec<String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<rampart_kms::client::Page<T>, ClientError>>,
{
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let round = changes.map(|c| c.load(Ordering::Relaxed));
        let page = fetch(cursor.take()).await.unwrap();
        seen.extend(page.items.iter().map(&id));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return seen,
        }
        // Let the writer in between pages.
        tokio::time::sleep(Duration::from_millis(2)).await;
        while let (Some(changes), Some(round)) = (changes, round) {
            if changes.load(Ordering::Relaxed) != round {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// No identity twice, and every one of `throughout` present.
fn check_walk(what: &str, seen: &[String], throughout: &BTreeSet<String>) {
    let mut unique = HashSet::new();
    for id in seen {
        assert!(unique.insert(id.clone()), "{what}: {id} listed twice");
    }
    let missing: Vec<&String> = throughout.iter().filter(|id| !unique.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{what}: skipped {} items, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}

on_each_store!(every_list_walks_to_its_end_under_concurrent_inserts_and_deletes);

/// Seeded items are split by index: `% 4 == 1` are deleted while the
/// walks run, `% 4 == 2` revoked (keys), the rest left alone; new items
/// are inserted between existing names all along.
async fn every_list_walks_to_its_end_under_concurrent_inserts_and_deletes(backend: Backend) {
    const KEYS: usize = 400;
    const CLIENTS: usize = 200;
    let d = Arc::new(Deployment::on(backend, "walk").await);
    // A third of the keys and clients carry a rarer selector or label,
    // walked through the side tables of schema step 10.
    let selectors = |i: usize| -> &'static [&'static str] {
        if i % 3 == 0 {
            &["label:role=db", "client:special"]
        } else {
            &["label:role=db"]
        }
    };
    let labels = |i: usize| if i % 3 == 0 { "role=host,tier=gold" } else { "role=host" };
    for i in 0..KEYS {
        d.key(&key_name(i), selectors(i)).await;
    }
    for i in 0..CLIENTS {
        d.client(&client_name(i), labels(i), false).await;
    }
    d.store.append_audit((0..500).map(draft).collect(), None).await.unwrap();
    let audit_head = d.store.audit_page(0, None, 10_000).await.unwrap().last().unwrap().seq;

    let stable_keys: BTreeSet<String> = (0..KEYS).filter(|i| i % 4 != 1).map(key_name).collect();
    let active_keys: BTreeSet<String> =
        (0..KEYS).filter(|i| i % 4 == 0 || i % 4 == 3).map(key_name).collect();
    let stable_clients: BTreeSet<String> = (0..CLIENTS)
        .filter(|i| i % 4 != 1)
        .map(client_name)
        .chain(std::iter::once("admin".to_owned()))
        .collect();
    let old_entries: BTreeSet<String> = (1..=audit_head).map(|s| s.to_string()).collect();
    let special_keys: BTreeSet<String> =
        (0..KEYS).filter(|i| i % 4 != 1 && i % 3 == 0).map(key_name).collect();
    let gold_clients: BTreeSet<String> =
        (0..CLIENTS).filter(|i| i % 4 != 1 && i % 3 == 0).map(client_name).collect();

    let running = Arc::new(AtomicBool::new(true));
    let changes = Arc::new(AtomicUsize::new(0));
    let mutator = {
        let (d, running, changes) = (Arc::clone(&d), Arc::clone(&running), Arc::clone(&changes));
        tokio::spawn(async move {
            let mut i = 0;
            while running.load(Ordering::Relaxed) {
                if i < KEYS {
                    // Inserted between existing names, before and after the walks' positions.
                    d.key(&format!("{}a", key_name(i)), selectors(i)).await;
                    if i % 4 == 1 {
                        d.delete_key(&key_name(i)).await;
                    }
                    if i % 4 == 2 {
                        let reason = StateChange::Revoke { reason: "walk".into() };
                        d.store.change_state(key_name(i), None, reason, now_ms()).await.unwrap();
                    }
                }
                if i < CLIENTS {
                    d.client(&format!("{}a", client_name(i)), labels(i), false).await;
                    if i % 4 == 1 {
                        d.delete_client(&client_name(i)).await;
                    }
                }
                d.store.append_audit(vec![draft(i), draft(i + 1)], None).await.unwrap();
                changes.fetch_add(1, Ordering::Relaxed);
                i = (i + 1) % (KEYS * 2);
                tokio::time::sleep(Duration::from_micros(300)).await;
            }
        })
    };

    let admin = d.admin();
    let all_keys = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = KeyQuery { limit: Some(7), ..KeyQuery::default() };
                admin.key_page(&q, cursor.as_deref()).await
            }
        },
        |k: &KeyInfo| k.name.clone(),
    );
    let active = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = KeyQuery {
                    limit: Some(5),
                    state: Some("active".into()),
                    ..KeyQuery::default()
                };
                admin.key_page(&q, cursor.as_deref()).await
            }
        },
        |k: &KeyInfo| {
            assert!(matches!(k.latest().unwrap().state, KeyState::Active), "{k:?}");
            k.name.clone()
        },
    );
    let clients = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = ClientQuery { limit: Some(5), ..ClientQuery::default() };
                admin.client_page(&q, cursor.as_deref()).await
            }
        },
        |c: &ClientInfo| c.name.clone(),
    );
    let entries = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = AuditQuery { limit: Some(40), ..AuditQuery::default() };
                admin.audit_list_page(&q, cursor.as_deref()).await
            }
        },
        |e: &rampart_kms::model::AuditEntry| e.seq.to_string(),
    );
    let special = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = KeyQuery {
                    limit: Some(4),
                    selector: Some("client:special".into()),
                    ..KeyQuery::default()
                };
                admin.key_page(&q, cursor.as_deref()).await
            }
        },
        |k: &KeyInfo| {
            assert!(k.allow.iter().any(|s| s.to_string() == "client:special"), "{k:?}");
            k.name.clone()
        },
    );
    let gold = walk_between_changes(
        &changes,
        |cursor| {
            let admin = admin.clone();
            async move {
                let q = ClientQuery {
                    limit: Some(3),
                    label: Some("tier=gold".into()),
                    ..ClientQuery::default()
                };
                admin.client_page(&q, cursor.as_deref()).await
            }
        },
        |c: &ClientInfo| {
            assert_eq!(c.labels.get("tier"), Some("gold"), "{c:?}");
            c.name.clone()
        },
    );
    let (all_keys, active, clients, entries, special, gold) =
        tokio::join!(all_keys, active, clients, entries, special, gold);
    let before = changes.load(Ordering::Relaxed);
    running.store(false, Ordering::Relaxed);
    mutator.await.unwrap();
    assert!(before > 50, "the store hardly changed during the walks ({before} rounds)");

    check_walk("keys", &all_keys, &stable_keys);
    check_walk("active keys", &active, &active_keys);
    check_walk("clients", &clients, &stable_clients);
    check_walk("audit", &entries, &old_entries);
    check_walk("keys by selector", &special, &special_keys);
    check_walk("clients by label", &gold, &gold_clients);
    let seqs: Vec<u64> = entries.iter().map(|s| s.parse().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "audit entries out of order");
    // Inserted items may or may not be listed, but nothing that never
    // existed is.
    for name in &all_keys {
        assert!(name.starts_with("key-"), "{name}");
    }
}

/// The error code and message of a GET.
async fn refusal(admin: &KmsClient, path: &str) -> (u16, String) {
    match admin.get_json(path).await {
        Err(ClientError::Api { status, message, .. }) => (status, message),
        other => panic!("GET {path} was not refused: {other:?}"),
    }
}

on_each_store!(bad_cursors_and_limits_are_refused_with_400);

async fn bad_cursors_and_limits_are_refused_with_400(backend: Backend) {
    let d = Deployment::on(backend, "refuse").await;
    for i in 0..3 {
        d.key(&key_name(i), &[]).await;
        d.client(&client_name(i), "", false).await;
    }
    let admin = d.admin();
    let next = |v: serde_json::Value| v["next_cursor"].as_str().unwrap().to_owned();
    let key_cursor = next(admin.get_json("/v1/keys?limit=1").await.unwrap());
    let client_cursor = next(admin.get_json("/v1/clients?limit=1").await.unwrap());
    let audit_cursor = next(admin.get_json("/v1/audit?limit=1").await.unwrap());
    // The cursors work.
    let page = admin.get_json(&format!("/v1/keys?limit=1&cursor={key_cursor}")).await.unwrap();
    assert_eq!(page["keys"][0]["name"], key_name(1));

    let flipped = |cursor: &str, at: usize| {
        let mut bytes = URL_SAFE_NO_PAD.decode(cursor).unwrap();
        let at = if at == usize::MAX { bytes.len() - 1 } else { at };
        bytes[at] ^= 1;
        URL_SAFE_NO_PAD.encode(bytes)
    };
    for (list, own, foreign, foreign_name) in [
        ("keys", &key_cursor, &client_cursor, "client list"),
        ("clients", &client_cursor, &audit_cursor, "audit list"),
        ("audit", &audit_cursor, &key_cursor, "key list"),
    ] {
        let base = format!("/v1/{list}");
        for limit in ["0", "10001", "abc", "-1", "1.5", ""] {
            let (status, message) = refusal(&admin, &format!("{base}?limit={limit}")).await;
            assert_eq!(status, 400, "{list} limit={limit}");
            assert!(
                message.ends_with("limit must be a whole number from 1 to 10000"),
                "{list}: {message}"
            );
        }
        for (what, cursor, want) in [
            ("garbage", "!!not-a-cursor!!".to_owned(), "cursor is malformed"),
            ("random base64", URL_SAFE_NO_PAD.encode([7u8; 30]), "cursor is malformed"),
            // Malformed or unauthenticated, depending on where the text was cut.
            ("truncated", own[..own.len() - 4].to_owned(), "cursor "),
            ("forged tag", flipped(own, usize::MAX), "cursor does not authenticate"),
            ("forged position", flipped(own, 3), "cursor does not authenticate"),
            ("from another list", foreign.clone(), foreign_name),
            ("oversized", "A".repeat(4000), "cursor is malformed"),
        ] {
            let (status, message) = refusal(&admin, &format!("{base}?cursor={cursor}")).await;
            assert_eq!(status, 400, "{list}: {what}");
            assert!(message.contains(want), "{list}: {what}: {message}");
        }
        let (status, message) = refusal(&admin, &format!("{base}?colour=blue")).await;
        assert_eq!(status, 400);
        assert!(message.contains("takes no query parameter 'colour'"), "{message}");
    }
    // A cursor is bound to the filters it was made with.
    let (status, message) =
        refusal(&admin, &format!("/v1/keys?cursor={key_cursor}&prefix=key-")).await;
    assert_eq!(status, 400);
    assert!(message.contains("other filters"), "{message}");
    let (_, message) =
        refusal(&admin, &format!("/v1/audit?cursor={audit_cursor}&after_seq=3")).await;
    assert!(message.contains("not both"), "{message}");
    for (path, want) in [
        ("/v1/keys?state=lost", "state must be"),
        ("/v1/keys?selector=region", "selector"),
        ("/v1/keys?prefix=a%2Fb", "prefix must be"),
        ("/v1/clients?admin=yes", "admin must be true or false"),
        ("/v1/clients?label=region", "label must be KEY=VALUE"),
        ("/v1/audit?outcome=meh", "outcome must be"),
        ("/v1/audit?since_ms=-5", "since_ms must be"),
        ("/v1/keys?limit=5&limit=6", "repeated"),
        ("/v1/keys?prefix=%zz", "%-escape"),
    ] {
        let (status, message) = refusal(&admin, path).await;
        assert_eq!(status, 400, "{path}");
        assert!(message.contains(want), "{path}: {message}");
    }
}

on_each_store!(filters_select_by_prefix_state_selector_label_and_admin);

async fn filters_select_by_prefix_state_selector_label_and_admin(backend: Backend) {
    let d = Deployment::on(backend, "filter").await;
    let admin = d.admin();
    admin.create_key("db-1", &["label:region=eu".into()], false).await.unwrap();
    admin.create_key("db-2", &["client:host-a".into()], false).await.unwrap();
    admin.create_key("db_3", &[], false).await.unwrap();
    admin
        .create_key("web-1", &["label:region=eu".into(), "client:host-a".into()], false)
        .await
        .unwrap();
    admin.create_key("dc", &["label:region=eux".into()], false).await.unwrap();
    admin.revoke_key("db-2", "retired", None).await.unwrap();
    admin.destroy_key("web-1", None).await.unwrap();
    admin.rotate_key("dc").await.unwrap();
    admin.revoke_key("dc", "old", Some(1)).await.unwrap();
    d.client("host-a", "region=eu,role=host", false).await;
    d.client("host-b", "region=us,role=host", false).await;
    d.client("ops", "region=eu", true).await;
    d.client("hostile", "region=eu-west", false).await;
    d.store.revoke_client("host-b".into(), "lost".into(), now_ms()).await.unwrap();

    // Each query, walked one item per page (the cursor carries the
    // filters) and in one page: the same names.
    let keys = |q: KeyQuery| {
        let admin = admin.clone();
        async move {
            let one = walk(
                |cursor| {
                    let (admin, q) = (admin.clone(), KeyQuery { limit: Some(1), ..q.clone() });
                    async move { admin.key_page(&q, cursor.as_deref()).await }
                },
                |k: &KeyInfo| k.name.clone(),
            )
            .await;
            let all = admin.key_page(&q, None).await.unwrap();
            assert!(all.next_cursor.is_none());
            let all: Vec<String> = all.items.into_iter().map(|k| k.name).collect();
            assert_eq!(one, all, "{q:?}");
            all.into_iter().collect::<BTreeSet<String>>()
        }
    };
    let set = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    let q = |prefix: Option<&str>, state: Option<&str>, selector: Option<&str>| KeyQuery {
        prefix: prefix.map(Into::into),
        state: state.map(Into::into),
        selector: selector.map(Into::into),
        limit: None,
    };
    assert_eq!(keys(q(None, None, None)).await, set(&["db-1", "db-2", "db_3", "dc", "web-1"]));
    assert_eq!(keys(q(Some("db-"), None, None)).await, set(&["db-1", "db-2"]));
    assert_eq!(keys(q(Some("db"), None, None)).await, set(&["db-1", "db-2", "db_3"]));
    assert_eq!(keys(q(Some("d"), None, None)).await, set(&["db-1", "db-2", "db_3", "dc"]));
    assert_eq!(keys(q(Some("db-1"), None, None)).await, set(&["db-1"]));
    assert_eq!(keys(q(Some("x"), None, None)).await, set(&[]));
    assert_eq!(keys(q(Some(""), None, None)).await.len(), 5);
    // The newest version's state: dc's version 1 is revoked, 2 active.
    assert_eq!(keys(q(None, Some("active"), None)).await, set(&["db-1", "db_3", "dc"]));
    assert_eq!(keys(q(None, Some("revoked"), None)).await, set(&["db-2"]));
    assert_eq!(keys(q(None, Some("destroyed"), None)).await, set(&["web-1"]));
    // Selectors match whole selectors, not parts of them.
    assert_eq!(keys(q(None, None, Some("label:region=eu"))).await, set(&["db-1", "web-1"]));
    assert_eq!(keys(q(None, None, Some("label:region=eux"))).await, set(&["dc"]));
    assert_eq!(keys(q(None, None, Some("label:region=e"))).await, set(&[]));
    assert_eq!(keys(q(None, None, Some("client:host-a"))).await, set(&["db-2", "web-1"]));
    assert_eq!(keys(q(None, None, Some("client:host"))).await, set(&[]));
    assert_eq!(keys(q(Some("db"), Some("active"), Some("label:region=eu"))).await, set(&["db-1"]));

    let clients = |q: ClientQuery| {
        let admin = admin.clone();
        async move {
            let one = walk(
                |cursor| {
                    let (admin, q) = (admin.clone(), ClientQuery { limit: Some(1), ..q.clone() });
                    async move { admin.client_page(&q, cursor.as_deref()).await }
                },
                |c: &ClientInfo| c.name.clone(),
            )
            .await;
            one.into_iter().collect::<BTreeSet<String>>()
        }
    };
    let cq =
        |prefix: Option<&str>, label: Option<&str>, admin: Option<bool>, revoked: Option<bool>| {
            ClientQuery {
                prefix: prefix.map(Into::into),
                label: label.map(Into::into),
                admin,
                revoked,
                limit: None,
            }
        };
    assert_eq!(
        clients(cq(None, None, None, None)).await,
        set(&["admin", "host-a", "host-b", "hostile", "ops"])
    );
    assert_eq!(clients(cq(Some("host-"), None, None, None)).await, set(&["host-a", "host-b"]));
    assert_eq!(clients(cq(None, Some("region=eu"), None, None)).await, set(&["host-a", "ops"]));
    assert_eq!(clients(cq(None, Some("region=e"), None, None)).await, set(&[]));
    assert_eq!(clients(cq(None, Some("role=host"), None, None)).await, set(&["host-a", "host-b"]));
    assert_eq!(clients(cq(None, None, Some(true), None)).await, set(&["admin", "ops"]));
    assert_eq!(
        clients(cq(None, None, Some(false), None)).await,
        set(&["host-a", "host-b", "hostile"])
    );
    assert_eq!(clients(cq(None, None, None, Some(true))).await, set(&["host-b"]));
    assert_eq!(
        clients(cq(Some("host"), Some("region=eu"), Some(false), Some(false))).await,
        set(&["host-a"])
    );
    // The label filter follows a relabelling (the side table is rewritten
    // with the labels).
    let relabel = |l: &str| Labels::parse_list(l).unwrap();
    d.store.set_client_labels("host-a".into(), relabel("region=us,tier=gold")).await.unwrap();
    d.store.set_client_labels("hostile".into(), relabel("region=eu")).await.unwrap();
    assert_eq!(clients(cq(None, Some("region=eu"), None, None)).await, set(&["hostile", "ops"]));
    assert_eq!(clients(cq(None, Some("region=us"), None, None)).await, set(&["host-a", "host-b"]));
    assert_eq!(clients(cq(None, Some("tier=gold"), None, None)).await, set(&["host-a"]));
    assert_eq!(clients(cq(None, Some("role=host"), None, None)).await, set(&["host-b"]));
    d.store.set_client_labels("host-a".into(), relabel("")).await.unwrap();
    assert_eq!(clients(cq(None, Some("tier=gold"), None, None)).await, set(&[]));

    // The audit list's filters.
    let entries = |q: AuditQuery| {
        let admin = admin.clone();
        async move {
            walk(
                |cursor| {
                    let (admin, q) = (admin.clone(), AuditQuery { limit: Some(3), ..q.clone() });
                    async move { admin.audit_list_page(&q, cursor.as_deref()).await }
                },
                |e: &rampart_kms::model::AuditEntry| serde_json::to_string(e).unwrap(),
            )
            .await
            .into_iter()
            .map(|e| serde_json::from_str::<rampart_kms::model::AuditEntry>(&e).unwrap())
            .collect::<Vec<_>>()
        }
    };
    let about_db1 = entries(AuditQuery { key: Some("db-1".into()), ..AuditQuery::default() }).await;
    assert_eq!(about_db1.len(), 1, "{about_db1:?}");
    assert_eq!(about_db1[0].operation, "key.create");
    let revokes =
        entries(AuditQuery { operation: Some("key.revoke".into()), ..AuditQuery::default() }).await;
    assert_eq!(revokes.len(), 2);
    assert!(revokes.iter().all(|e| e.operation == "key.revoke" && e.client == "admin"));
    let by_admin =
        entries(AuditQuery { client: Some("admin".into()), ..AuditQuery::default() }).await;
    assert!(by_admin.len() >= 9 && by_admin.iter().all(|e| e.client == "admin"));
    let bad =
        entries(AuditQuery { outcome: Some("invalid".into()), ..AuditQuery::default() }).await;
    assert!(bad.iter().all(|e| e.outcome == "invalid"));
    let all = entries(AuditQuery::default()).await;
    let middle = all[all.len() / 2].time_ms;
    let early = entries(AuditQuery { until_ms: Some(middle), ..AuditQuery::default() }).await;
    let late = entries(AuditQuery { since_ms: Some(middle), ..AuditQuery::default() }).await;
    assert!(early.iter().all(|e| e.time_ms < middle) && late.iter().all(|e| e.time_ms >= middle));
    assert!(early.len() + late.len() >= all.len(), "time filters lost entries");
}

/// On PostgreSQL, a page of keys in one state walks the (state, name)
/// index in order and stops at the page's end, and fetches the versions
/// of its keys by key, whatever the size of the store. Written as
/// `version = (SELECT max(version) ...)`, the planner's guess for "the
/// key's newest version" made it read and sort every version for one page
/// (45-75 ms for the first page of 10,000 keys, growing with the store);
/// joined plainly, the versions were read by a scan of the whole table.
/// Asserted on PostgreSQL's own counters: the page must use the state
/// index and read no table from end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_one_state_walks_the_state_index_on_postgres() {
    let d = Deployment::on(Backend::Postgres, "state_plan").await;
    let Sql::Postgres(pg) = &d.sql else { unreachable!("a PostgreSQL deployment") };
    // Many keys (with material the size sealed material has), written
    // straight to the tables: through the API this would take minutes.
    const KEYS: usize = 10_000;
    pg.batch_execute(&format!(
        "INSERT INTO kms_keys (name, exportable, allow, created_ms)
             SELECT 'bulk-' || lpad(i::text, 6, '0'), false, '[]', 0
             FROM generate_series(1, {KEYS}) i;
         INSERT INTO kms_key_versions (name, version, state, created_ms, material)
             SELECT 'bulk-' || lpad(i::text, 6, '0'), 1, 'active', 0,
                    decode(repeat('5c', 60), 'hex')
             FROM generate_series(1, {KEYS}) i;"
    ))
    .await
    .unwrap();
    // As a deployment's tables are once autovacuum has been by (and as
    // `kms populate` leaves them): the plan above is chosen only then.
    pg.batch_execute("VACUUM ANALYZE kms_keys, kms_key_versions").await.unwrap();
    let counters = || async {
        let row = pg
            .query_one(
                "SELECT (SELECT seq_tup_read FROM pg_stat_user_tables
                         WHERE relname = 'kms_key_versions'),
                        (SELECT idx_scan FROM pg_stat_user_indexes
                         WHERE indexrelname = 'kms_key_versions_state_c')",
                &[],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    let (read_before, index_before) = counters().await;
    let filter = rampart_kms::store::KeyFilter { state: Some("active"), ..Default::default() };
    let page = d.store.key_page(String::new(), filter, 100).await.unwrap();
    assert_eq!(page.len(), 100);
    assert_eq!(page[0].name, "bulk-000001");
    // A backend reports its counters when idle, at most once a second
    // and otherwise after an idle timeout of 10 s (PostgreSQL 15), so
    // wait (up to 30 s) for the index scan to show.
    let mut now = counters().await;
    for _ in 0..300 {
        if now.1 > index_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = counters().await;
    }
    let read = now.0 - read_before;
    assert!(
        now.1 > index_before,
        "the page never used the state index; versions read by table scans meanwhile: {read}"
    );
    // Scans of the near-empty table before the bulk insert may be
    // reported late; a scan of the bulk would read all of it.
    assert!(read < KEYS as i64, "the page read {read} versions by table scan");
}
