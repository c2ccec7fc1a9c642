//! Filtered audit lists against the store, on SQLite and PostgreSQL: the
//! key and client filters answered from the reference table (schema step
//! 9) where it is filled and by a scan after its mark, the rare operation
//! and outcome filters from their partial indexes, the common ones by a
//! walk of the log; every walk compared entry for entry with the same
//! filter applied to what was appended, across two segment borders of the
//! reference table (indexed a complete segment at a time, from a mark at
//! a border or inside a segment, with rows already there), after a
//! prune, and after the step's migration ran again over a filled log.
//! The key selector and client label side tables of schema step 10 are
//! checked against their migration here too.

use crate::common;

use std::sync::Arc;

use common::{psql, Backend, PgCluster, TempDir};
use rampart_kms::audit::Mark;
use rampart_kms::model::AuditDraft;
use rampart_kms::store::{AuditFilter, PostgresStore, SqliteStore, Store};

/// Crosses two segment borders of the reference table (65,536 and
/// 131,072).
const ENTRIES: u64 = 140_000;
/// Appended first, to look at the first segment alone.
const FIRST_PART: u64 = 70_000;
const RARE_KEY_AT: &[u64] =
    &[3, 40_000, 65_535, 65_536, 65_537, 66_100, 69_999, 100_000, 131_071, 131_072, 139_999];

fn draft(seq: u64) -> AuditDraft {
    let key = if RARE_KEY_AT.contains(&seq) {
        Some("rare-key".to_owned())
    } else if seq % 5 == 0 {
        None
    } else {
        Some(format!("key-{}", seq.wrapping_mul(7_919) % 101))
    };
    let client = if seq == 65_540 { "admin".to_owned() } else { format!("host-{}", seq % 37) };
    AuditDraft {
        time_ms: 1_700_000_000_000 + i64::try_from(seq).unwrap(),
        client,
        operation: match seq {
            s if s % 1000 == 0 => "key.create",
            s if s % 3 == 0 => "kmip.sign",
            _ => "key.unwrap",
        }
        .to_owned(),
        version: key.as_ref().map(|_| 1),
        key,
        outcome: if seq % 777 == 0 { "denied" } else { "ok" }.to_owned(),
        detail: "200".to_owned(),
    }
}

fn passes(seq: u64, f: &AuditFilter) -> bool {
    let d = draft(seq);
    f.since_ms.is_none_or(|t| d.time_ms >= t)
        && f.until_ms.is_none_or(|t| d.time_ms < t)
        && f.client.as_ref().is_none_or(|c| *c == d.client)
        && f.key.as_ref().is_none_or(|k| d.key.as_ref() == Some(k))
        && f.operation.as_ref().is_none_or(|o| *o == d.operation)
        && f.outcome.as_ref().is_none_or(|o| *o == d.outcome)
}

fn filters() -> Vec<AuditFilter> {
    let f = AuditFilter::default;
    vec![
        AuditFilter { key: Some("rare-key".into()), ..f() },
        AuditFilter { key: Some("key-3".into()), ..f() },
        AuditFilter { key: Some("key-3".into()), outcome: Some("denied".into()), ..f() },
        AuditFilter { key: Some("no-such-key".into()), ..f() },
        AuditFilter { client: Some("admin".into()), ..f() },
        AuditFilter { client: Some("host-5".into()), operation: Some("key.create".into()), ..f() },
        AuditFilter {
            client: Some("host-7".into()),
            since_ms: Some(1_700_000_000_000 + 60_000),
            until_ms: Some(1_700_000_000_000 + 68_000),
            ..f()
        },
        AuditFilter { operation: Some("key.create".into()), ..f() },
        AuditFilter { outcome: Some("denied".into()), ..f() },
        AuditFilter { outcome: Some("denied".into()), operation: Some("key.create".into()), ..f() },
        AuditFilter {
            operation: Some("key.unwrap".into()),
            since_ms: Some(1_700_000_069_000),
            ..f()
        },
        AuditFilter {
            operation: Some("kmip.sign".into()),
            since_ms: Some(1_700_000_069_000),
            ..f()
        },
        AuditFilter { outcome: Some("ok".into()), until_ms: Some(1_700_000_001_000), ..f() },
    ]
}

/// Walks every filter to its end in pages of `limit`, comparing with the
/// entries from `first` to `last` that pass it.
async fn check_filters(store: &dyn Store, (first, last): (u64, u64), limit: u32, stage: &str) {
    for filter in filters() {
        let mut got = Vec::new();
        let mut after = 0u64;
        loop {
            let page = store.audit_list(after, filter.clone(), limit).await.unwrap();
            assert!(page.len() <= limit as usize);
            for e in &page {
                assert!(
                    passes(e.seq, &filter),
                    "{stage}: entry {} does not pass {filter:?}",
                    e.seq
                );
                let d = draft(e.seq);
                assert_eq!((&e.client, &e.key, &e.operation), (&d.client, &d.key, &d.operation));
            }
            got.extend(page.iter().map(|e| e.seq));
            match page.last() {
                Some(last) if page.len() == limit as usize => after = last.seq,
                _ => break,
            }
        }
        let want: Vec<u64> = (first..=last).filter(|&s| passes(s, &filter)).collect();
        assert_eq!(got.len(), want.len(), "{stage}: {filter:?}");
        assert_eq!(got, want, "{stage}: {filter:?}");
    }
}

async fn filters_follow_the_log(backend: Backend) {
    let dir = TempDir::new("audit-filters");
    let pg = (backend == Backend::Postgres).then(PgCluster::get);
    let url = pg.as_ref().map(|pg| pg.database("audit_filters"));
    let open = || async {
        let store: Arc<dyn Store> = match &url {
            None => Arc::new(SqliteStore::open(&dir.path().join("kms.db")).unwrap()),
            Some(url) => Arc::new(PostgresStore::connect(url).await.unwrap()),
        };
        store
    };
    let store = open().await;
    let append = |from: u64, to: u64| {
        let store = Arc::clone(&store);
        async move {
            for start in (from..=to).step_by(10_000) {
                let drafts = (start..(start + 10_000).min(to + 1)).map(draft).collect();
                store.append_audit(drafts, None).await.unwrap();
            }
        }
    };
    let exec = |sql: &str| match &url {
        None => rusqlite::Connection::open(dir.path().join("kms.db"))
            .unwrap()
            .execute_batch(sql)
            .unwrap(),
        Some(url) => {
            psql(url, sql).unwrap();
        }
    };
    let count = |sql: &str| -> u64 {
        match &url {
            None => rusqlite::Connection::open(dir.path().join("kms.db"))
                .unwrap()
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .unwrap()
                .try_into()
                .unwrap(),
            Some(url) => psql(url, sql).unwrap().parse().unwrap(),
        }
    };
    let refs_of = |seqs: std::ops::RangeInclusive<u64>| {
        seqs.map(|s| 1 + u64::from(draft(s).key.is_some())).sum::<u64>()
    };
    let all = "SELECT count(*) FROM kms_audit_refs";

    append(1, FIRST_PART).await;
    // Nothing indexed: every filter is answered by scans.
    check_filters(store.as_ref(), (1, FIRST_PART), 1000, "unindexed").await;
    // The first segment (entries 1 to 65,535) is complete, the second not.
    assert_eq!(store.index_audit().await.unwrap(), 65_535);
    assert_eq!(store.index_audit().await.unwrap(), 0);
    assert_eq!(count(all), refs_of(1..=65_535));
    check_filters(store.as_ref(), (1, FIRST_PART), 3, "first segment indexed").await;
    // The second segment complete too, not indexed yet.
    append(FIRST_PART + 1, ENTRIES).await;
    check_filters(store.as_ref(), (1, ENTRIES), 10_000, "second segment not indexed").await;
    assert_eq!(store.index_audit().await.unwrap(), 65_536);
    assert_eq!(store.index_audit().await.unwrap(), 0);
    assert_eq!(count(all), refs_of(1..=131_071));
    check_filters(store.as_ref(), (1, ENTRIES), 3, "two segments indexed").await;

    // A mark inside a segment (left by a build that indexed in batches)
    // and rows after it already there (a run cut short): the rest of the
    // segment is indexed, nothing twice.
    exec(
        "DELETE FROM kms_audit_refs WHERE seq > 110000; \
         UPDATE kms_audit_refs_done SET seq = 90000",
    );
    assert_eq!(store.index_audit().await.unwrap(), 131_071 - 90_000);
    assert_eq!(store.index_audit().await.unwrap(), 0);
    assert_eq!(count(all), refs_of(1..=131_071));
    check_filters(store.as_ref(), (1, ENTRIES), 7, "indexed from inside a segment").await;

    // A prune past the border takes the references with the entries.
    let hash = store.audit_hash(65_600).await.unwrap().unwrap();
    let anchor = Mark { seq: 65_600, hash, time_ms: 0, mac: String::new() };
    assert_eq!(store.prune_audit(0, anchor).await.unwrap(), 65_600);
    check_filters(store.as_ref(), (65_601, ENTRIES), 4, "pruned").await;
    assert_eq!(count("SELECT count(*) FROM kms_audit_refs WHERE seq <= 65600"), 0);
    assert_eq!(count(all), refs_of(65_601..=131_071));

    // The migration run again over a filled log (its recorded version set
    // back, the references gone) rebuilds them all, up to the head.
    drop(store);
    exec(
        "DELETE FROM kms_audit_refs; DELETE FROM kms_audit_refs_done; \
         DELETE FROM kms_schema WHERE version >= 9",
    );
    let store = open().await;
    assert_eq!(count(all), refs_of(65_601..=ENTRIES));
    assert_eq!(store.index_audit().await.unwrap(), 0);
    check_filters(store.as_ref(), (65_601, ENTRIES), 5, "migrated again").await;
}

on_each_store!(filters_follow_the_log);

/// Schema step 10 run again over keys and clients written before it (its
/// recorded version set back, its side tables emptied) fills the side
/// tables from the stored policies and labels, so the selector and label
/// filters find them.
async fn the_selector_and_label_tables_are_rebuilt_by_their_migration(backend: Backend) {
    use rampart_kms::model::{now_ms, ClientInfo, KeyInfo, Labels, Selector};
    use rampart_kms::store::{ClientFilter, KeyFilter};
    let dir = TempDir::new("side-tables");
    let pg = (backend == Backend::Postgres).then(PgCluster::get);
    let url = pg.as_ref().map(|pg| pg.database("side_tables"));
    let open = || async {
        let store: Arc<dyn Store> = match &url {
            None => Arc::new(SqliteStore::open(&dir.path().join("kms.db")).unwrap()),
            Some(url) => Arc::new(PostgresStore::connect(url).await.unwrap()),
        };
        store
    };
    let store = open().await;
    for i in 0..20u32 {
        let mut allow = vec![Selector::parse("label:role=db").unwrap()];
        if i % 7 == 0 {
            allow.push(Selector::parse("client:special").unwrap());
        }
        let key = KeyInfo {
            name: format!("key-{i:02}"),
            exportable: false,
            allow,
            created_ms: now_ms(),
            versions: Vec::new(),
        };
        store.create_key(key, vec![0u8; 60]).await.unwrap();
        let labels = if i % 5 == 0 { "role=host,tier=gold" } else { "role=host" };
        store
            .add_client(ClientInfo {
                name: format!("host-{i:02}"),
                labels: Labels::parse_list(labels).unwrap(),
                admin: false,
                serial: "01".into(),
                fingerprint: format!("{i:064}"),
                created_ms: now_ms(),
                not_after_ms: now_ms() + 86_400_000,
                revoked: None,
            })
            .await
            .unwrap();
    }
    let check = |store: Arc<dyn Store>| async move {
        let selector = KeyFilter {
            selector: Some(Selector::parse("client:special").unwrap()),
            ..KeyFilter::default()
        };
        let keys = store.key_page(String::new(), selector, 100).await.unwrap();
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["key-00", "key-07", "key-14"]);
        let label =
            ClientFilter { label: Some(("tier".into(), "gold".into())), ..ClientFilter::default() };
        let clients = store.client_page(String::new(), label, 100).await.unwrap();
        let names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["host-00", "host-05", "host-10", "host-15"]);
    };
    check(Arc::clone(&store)).await;
    drop(store);
    let reset = "DELETE FROM kms_key_selectors; DELETE FROM kms_client_labels; \
                 DELETE FROM kms_schema WHERE version >= 10";
    match &url {
        None => rusqlite::Connection::open(dir.path().join("kms.db"))
            .unwrap()
            .execute_batch(reset)
            .unwrap(),
        Some(url) => {
            psql(url, reset).unwrap();
        }
    }
    check(open().await).await;
}

on_each_store!(the_selector_and_label_tables_are_rebuilt_by_their_migration);
