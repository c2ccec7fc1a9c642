//! Group commit of the audit chain on PostgreSQL: many concurrent unwraps
//! share audit transactions, yet each request gets exactly one committed,
//! hash-chained row before its answer, and a request whose batch could not
//! be committed gets an error, never a success. Two servers appending at
//! once (each batch sealed after the head its server last left, and
//! sealed again after the locked head when the other server moved it)
//! keep one unbroken chain. A server sends its next batch while the one
//! before commits; when another server moves the head under both, they
//! still reach the chain, and the server's audit sink, in order.
//!
//! The cluster comes from `$RAMPART_TEST_PG_URL` (scripts/test starts one)
//! or, outside CI, is a throwaway one from scripts/pg-test-cluster.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{psql, PgCluster, TempDir};
use rampart_kms::client::{KmsClient, RetryPolicy};
use rampart_kms::model::Labels;
use rampart_kms::store::Store;
use rampart_kms::testing::{TestDeployment, TestServer};
use rampart_kms::Bundle;

struct Deployment {
    db: String,
    admin: Bundle,
    // Dropped in this order: the server stops, then its directory and its
    // cluster go.
    _server: TestServer,
    _dir: TempDir,
    _cluster: PgCluster,
}

fn once() -> RetryPolicy {
    // One attempt per call: each call is exactly one request to count.
    RetryPolicy { rounds: 1, ..RetryPolicy::default() }
}

impl Deployment {
    async fn new(tag: &str) -> Self {
        Self::with_sink(tag, None).await
    }

    /// A deployment whose server also writes its entries to `sink`.
    async fn with_sink(tag: &str, sink: Option<&Path>) -> Self {
        let cluster = PgCluster::get();
        let db = cluster.database(tag);
        let dir = TempDir::new(&format!("kms-gc-{tag}"));
        let how = TestDeployment { store_url: Some(&db), ..TestDeployment::default() };
        let server = TestServer::start(&dir.path().join("data"), &how, |o| {
            o.limits.rate = 0.0;
            o.audit.sinks.file = sink.map(Path::to_path_buf);
        })
        .await;
        let admin = server.admin.clone();
        Self { db, admin, _server: server, _dir: dir, _cluster: cluster }
    }

    fn admin(&self) -> KmsClient {
        KmsClient::with_policy(&self.admin, once()).unwrap()
    }

    /// A non-admin client allowed to use a new key `name`, and a wrapped
    /// secret under that key.
    async fn user_with_key(&self, name: &str) -> (KmsClient, String) {
        let admin = self.admin();
        let bundle = admin
            .issue_client(
                "worker",
                &Labels::default(),
                false,
                Some(7),
                self.admin.endpoints.clone(),
            )
            .await
            .unwrap();
        admin.create_key(name, &["client:worker".to_owned()], false).await.unwrap();
        let user = KmsClient::with_policy(&bundle, once()).unwrap();
        let wrapped = user.wrap(name, b"a volume passphrase", b"gc").await.unwrap();
        (user, wrapped)
    }

    /// Audit rows of `operation` with `outcome`, counted in the database.
    fn rows(&self, operation: &str, outcome: &str) -> u64 {
        psql(
            &self.db,
            &format!(
                "SELECT count(*) FROM kms_audit WHERE operation = '{operation}' \
                 AND outcome = '{outcome}'"
            ),
        )
        .unwrap()
        .parse()
        .unwrap()
    }
}

/// `tasks` tasks at once, each unwrapping `wrapped` `per_task` times and
/// checking every answer.
async fn unwrap_concurrently(user: &KmsClient, wrapped: &str, tasks: u64, per_task: u64) {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (user, wrapped) = (user.clone(), wrapped.to_owned());
        handles.push(tokio::spawn(async move {
            for _ in 0..per_task {
                let plain = user.unwrap(&wrapped, b"gc").await.unwrap();
                assert_eq!(plain.expose(), b"a volume passphrase");
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
}

/// Two stores on one new database, as two servers have them; the
/// database's URL; and what must live as long as they do.
async fn two_stores(tag: &str) -> (String, [Arc<dyn Store>; 2], (PgCluster, TempDir)) {
    let cluster = PgCluster::get();
    let db = cluster.database(tag);
    let dir = TempDir::new(&format!("kms-gc-{tag}"));
    let stores = [
        rampart_kms::store::open(Some(&db), dir.path()).await.unwrap(),
        rampart_kms::store::open(Some(&db), dir.path()).await.unwrap(),
    ];
    (db, stores, (cluster, dir))
}

/// An audit entry appended straight to a store, as `client` wrote it.
fn test_entry(client: &str, detail: &str) -> rampart_kms::model::AuditDraft {
    rampart_kms::model::AuditDraft {
        time_ms: 1,
        client: client.into(),
        operation: "test.append".into(),
        key: None,
        version: None,
        outcome: "ok".into(),
        detail: detail.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_unwraps_get_one_chained_row_each() {
    let d = Deployment::new("rows").await;
    let (user, wrapped) = d.user_with_key("gc-key").await;
    let (tasks, per_task) = (32, 60);
    unwrap_concurrently(&user, &wrapped, tasks, per_task).await;
    // Every answered request has exactly one row: none lost, none doubled.
    assert_eq!(d.rows("key.unwrap", "ok"), tasks * per_task);
    // The chain holds every row in one order with no gap, and its head row
    // agrees.
    let total: u64 = psql(&d.db, "SELECT count(*) FROM kms_audit").unwrap().parse().unwrap();
    assert_eq!(psql(&d.db, "SELECT seq FROM kms_audit_head").unwrap(), total.to_string());
    // (The verification is audited after it walked the chain.)
    let report = d.admin().audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, total);
    assert_eq!(report.head_seq, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_cannot_commit_fails_every_request_in_it() {
    let d = Deployment::new("fail").await;
    let (user, wrapped) = d.user_with_key("gc-key").await;
    // The database refuses audit rows for a while, mid-load (as a full
    // disk, a lost primary or a revoked grant would).
    psql(
        &d.db,
        "CREATE FUNCTION gc_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'audit rows refused by the test'; END $$",
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..16 {
        let (user, wrapped, stop) = (user.clone(), wrapped.clone(), Arc::clone(&stop));
        handles.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match user.unwrap(&wrapped, b"gc").await {
                    Ok(plain) => {
                        assert_eq!(plain.expose(), b"a volume passphrase");
                        ok += 1;
                    }
                    Err(error) => {
                        assert!(
                            error.to_string().contains("audit log cannot be written"),
                            "unexpected error: {error}"
                        );
                        failed += 1;
                    }
                }
            }
            (ok, failed)
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    psql(
        &d.db,
        "CREATE TRIGGER gc_test_refuse BEFORE INSERT ON kms_audit
             FOR EACH STATEMENT EXECUTE FUNCTION gc_test_refuse()",
    )
    .unwrap();
    let refused_from = d.rows("key.unwrap", "ok");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // While refused, no request is answered with success.
    let during = d.rows("key.unwrap", "ok");
    psql(&d.db, "DROP TRIGGER gc_test_refuse ON kms_audit").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failed) = (0, 0);
    for handle in handles {
        let (o, f) = handle.await.unwrap();
        ok += o;
        failed += f;
    }
    assert_eq!(during, refused_from, "rows were committed while the database refused them");
    assert!(failed > 0, "no request failed while audit rows were refused");
    // Every success, and only a success, has its committed row: a request
    // in a batch that failed was answered with an error and left no row.
    assert_eq!(d.rows("key.unwrap", "ok"), ok, "{ok} successes, {failed} failures");
    assert!(d.rows("key.unwrap", "ok") > during, "the server did not recover");
    let report = d.admin().audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_appending_at_once_keep_one_chain() {
    use rampart_kms::audit::Verifier;
    let (db, stores, _held) = two_stores("two_writers").await;
    let (tasks, per_task) = (8usize, 40usize);
    let mut handles = Vec::new();
    for task in 0..tasks {
        let store = std::sync::Arc::clone(&stores[task % 2]);
        handles.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..per_task {
                // Batches of one to three entries.
                let drafts = (0..=(i % 3))
                    .map(|j| {
                        test_entry(&format!("server-{}", task % 2), &format!("{task}/{i}/{j}"))
                    })
                    .collect::<Vec<_>>();
                let n = drafts.len();
                let got = store.append_audit(drafts, None).await.unwrap();
                assert_eq!(got.len(), n);
                seqs.extend(got);
            }
            seqs
        }));
    }
    let mut seqs = Vec::new();
    for handle in handles {
        seqs.extend(handle.await.unwrap());
    }
    // Every entry got its own place, with no gap.
    seqs.sort_unstable();
    let total = seqs.len() as u64;
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    assert_eq!(psql(&db, "SELECT seq FROM kms_audit_head").unwrap(), total.to_string());
    // One chain: each entry links to the one before it.
    let mut verifier = Verifier::new(None);
    let mut budget = u64::MAX;
    let mut after = 0;
    while after < total {
        let page = stores[1].audit_chain_page(after, 1000).await.unwrap();
        assert!(verifier.check_page(&page, u64::MAX, &mut budget) || after + 1000 >= total);
        after += 1000;
    }
    let report = verifier.finish();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_batches_stay_in_chain_order_when_another_server_moves_the_head() {
    use rampart_kms::audit::ExportedEntry;
    let sink_dir = TempDir::new("kms-gc-sink");
    let sink = sink_dir.path().join("audit.jsonl");
    let d = Deployment::with_sink("pipelined", Some(&sink)).await;
    let (user, wrapped) = d.user_with_key("gc-key").await;
    // Another server's store appends between this server's batches
    // throughout, so that batches sealed after the head this server
    // expected find it moved and take the locked path, often two at once.
    let dir = TempDir::new("kms-gc-other");
    let other = rampart_kms::store::open(Some(&d.db), dir.path()).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let interloper = {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut appended = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let draft = test_entry("other-server", &appended.to_string());
                other.append_audit(vec![draft], None).await.unwrap();
                appended += 1;
            }
            appended
        })
    };
    let (tasks, per_task) = (16, 40);
    unwrap_concurrently(&user, &wrapped, tasks, per_task).await;
    stop.store(true, Ordering::Relaxed);
    let interleaved = interloper.await.unwrap();
    assert!(interleaved > 0, "the other server appended nothing");
    assert_eq!(d.rows("key.unwrap", "ok"), tasks * per_task);
    // The sink has this server's entries in the order the file was
    // written, which is the chain's order, each as the chain holds it.
    let written: Vec<ExportedEntry> = std::fs::read_to_string(&sink)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        written.iter().filter(|e| e.operation == "key.unwrap").count() as u64 >= tasks * per_task
    );
    for pair in written.windows(2) {
        assert!(
            pair[0].seq < pair[1].seq,
            "sink out of chain order: {} then {}",
            pair[0].seq,
            pair[1].seq
        );
    }
    let chain: std::collections::HashMap<u64, String> =
        psql(&d.db, "SELECT seq || ' ' || encode(hash, 'hex') FROM kms_audit")
            .unwrap()
            .lines()
            .map(|line| {
                let (seq, hash) = line.split_once(' ').unwrap();
                (seq.parse().unwrap(), hash.to_owned())
            })
            .collect();
    for entry in &written {
        assert_eq!(chain.get(&entry.seq), Some(&entry.hash), "entry {}", entry.seq);
    }
    let report = d.admin().audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sent_later_never_overtakes_an_earlier_one_on_the_locked_path() {
    use std::task::Poll;
    let (_, [ours, other], _held) = two_stores("locked_order").await;
    let draft = |detail: &str| test_entry("test", detail);
    // Our store remembers the head its append left; the other server then
    // moves it, so both batches below are sealed after a head that is
    // gone, are refused, and must take the locked path in the order they
    // were sent.
    ours.append_audit(vec![draft("first")], None).await.unwrap();
    other.append_audit(vec![draft("interloper")], None).await.unwrap();
    let mut earlier = ours.append_audit(vec![draft("earlier")], None);
    let mut later = ours.append_audit(vec![draft("later")], None);
    for batch in [&mut earlier, &mut later] {
        let pending = std::future::poll_fn(|cx| Poll::Ready(batch.as_mut().poll(cx).is_pending()));
        assert!(pending.await, "sent and waiting for its answer");
    }
    // The later batch, driven alone, waits for the earlier one.
    let alone = tokio::time::timeout(Duration::from_millis(500), &mut later).await;
    assert!(alone.is_err(), "the later batch finished first: {alone:?}");
    let earlier = earlier.await.unwrap();
    let later = later.await.unwrap();
    assert!(earlier[0] < later[0], "earlier {earlier:?}, later {later:?}");
    assert_eq!(later[0], 4);
}
