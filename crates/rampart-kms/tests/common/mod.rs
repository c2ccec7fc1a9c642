//! Test harness shared by the key manager's integration tests: temporary
//! directories, the PostgreSQL cluster, psql, filling a store directly.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rampart_kms::client::RetryPolicy;
use rampart_kms::deployment::{files, read_unseal_key};
use rampart_kms::keys::RootKey;
use rampart_kms::model::{now_ms, parse_policy, AuditDraft, KeyInfo, KeyState, KeyVersionInfo};
use rampart_kms::server::ServerOptions;
use rampart_kms::store::Store;
use rampart_kms::testing::{TestDeployment, TestServer};

pub use rampart_test_support::{psql, PgCluster, TempDir};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// One test on each store: for an `async fn NAME(backend: Backend)`, the
/// tests `NAME::on_sqlite` and `NAME::on_postgres`.
macro_rules! on_each_store {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_sqlite() {
                super::$name(crate::common::Backend::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_postgres() {
                super::$name(crate::common::Backend::Postgres).await;
            }
        }
    };
}

/// Few, quick retries: tests want failures fast.
pub fn fast() -> RetryPolicy {
    RetryPolicy { rounds: 2, backoff: Duration::from_millis(10), ..RetryPolicy::default() }
}

/// Creates the keys `{prefix}0000000`, `{prefix}0000001`, ... (`count` of
/// them, 32 bytes each, allowing `label:role=host`) straight in the store, sealed as a
/// server seals them; returns their names in order.
pub async fn fill_keys(store: &dyn Store, root: &RootKey, prefix: &str, count: u64) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}{i:07}");
        let material = rampart_crypto::random_secret(32).unwrap();
        let sealed = root.seal_material(&name, 1, &material).unwrap();
        let version = KeyVersionInfo {
            version: 1,
            state: KeyState::Active,
            created_ms: now_ms(),
            changed_ms: None,
        };
        let key = KeyInfo {
            name: name.clone(),
            exportable: false,
            allow: parse_policy(&["label:role=host".to_owned()]).unwrap(),
            created_ms: now_ms(),
            versions: vec![version],
        };
        store.create_key(key, sealed).await.unwrap();
        names.push(name);
    }
    store.settle_after_bulk_load().await.unwrap();
    names
}

/// Appends `count` unwrap entries to the audit chain, hashed and MACed
/// with `root` as a server appends them.
pub async fn fill_audit(store: &dyn Store, root: &Arc<RootKey>, count: u64) {
    let drafts = (0..count).map(|i| AuditDraft {
        time_ms: now_ms(),
        client: format!("host-{i}"),
        operation: "key.unwrap".to_owned(),
        key: None,
        version: None,
        outcome: "ok".to_owned(),
        detail: "200".to_owned(),
    });
    let drafts: Vec<AuditDraft> = drafts.collect();
    for batch in drafts.chunks(10_000) {
        store.append_audit(batch.to_vec(), Some(Arc::clone(root))).await.unwrap();
    }
}

/// A deployment on one store for a test: the in-process server
/// ([`TestServer`], whose fields it derefs to), its directory and, on
/// PostgreSQL, its database.
pub struct StoreDeployment {
    // Dropped in this order: the server stops, then its directory and its
    // cluster go.
    pub running: TestServer,
    pub dir: TempDir,
    /// The database URL on PostgreSQL.
    pub pg: Option<String>,
    _cluster: Option<PgCluster>,
}

impl std::ops::Deref for StoreDeployment {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.running
    }
}

impl StoreDeployment {
    /// A deployment on `backend` (its root key split `shamir` when given,
    /// else in an unseal key file), served with the options `configure`
    /// leaves.
    pub async fn start(
        backend: Backend,
        tag: &str,
        shamir: Option<(u8, u8)>,
        configure: impl FnOnce(&mut ServerOptions),
    ) -> Self {
        let dir = TempDir::new(tag);
        let cluster = (backend == Backend::Postgres).then(PgCluster::get);
        let pg = cluster.as_ref().map(|c| c.database(tag));
        let how = TestDeployment { store_url: pg.as_deref(), shamir, kmip: false };
        let server = TestServer::start(&dir.path().join("data"), &how, configure).await;
        Self { running: server, dir, pg, _cluster: cluster }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The root key, from the unseal key file (what someone holding the
    /// whole data directory has).
    pub fn root(&self) -> RootKey {
        RootKey::new(&read_unseal_key(&self.data_dir().join(files::UNSEAL_KEY)).unwrap()).unwrap()
    }

    /// Runs SQL on the store's database directly, as someone with database
    /// access could; the first column of the first row.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        match &self.pg {
            Some(url) => psql(url, sql),
            None => {
                let db = rusqlite::Connection::open(self.data_dir().join("kms.db")).unwrap();
                let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
                if stmt.column_count() == 0 {
                    stmt.execute([]).map(|_| String::new()).map_err(|e| e.to_string())
                } else {
                    stmt.query_row([], |r| r.get::<_, rusqlite::types::Value>(0))
                        .map(|v| match v {
                            rusqlite::types::Value::Integer(i) => i.to_string(),
                            rusqlite::types::Value::Text(t) => t,
                            other => format!("{other:?}"),
                        })
                        .map_err(|e| e.to_string())
                }
            }
        }
    }

    /// Drops the triggers that keep the audit log append-only.
    pub fn drop_audit_guard(&self) {
        if self.pg.is_some() {
            self.sql("DROP TRIGGER kms_audit_no_change ON kms_audit").unwrap();
        } else {
            self.sql("DROP TRIGGER kms_audit_no_update").unwrap();
            self.sql("DROP TRIGGER kms_audit_no_delete").unwrap();
        }
    }
}
