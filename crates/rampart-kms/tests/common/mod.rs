//! Test harness shared by the key manager's integration tests: temporary
//! directories, the PostgreSQL cluster, psql, filling a store directly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rampart_kms::client::RetryPolicy;
use rampart_kms::keys::RootKey;
use rampart_kms::model::{now_ms, parse_policy, AuditDraft, KeyInfo, KeyState, KeyVersionInfo};
use rampart_kms::store::Store;

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let mut random = [0u8; 8];
        rampart_crypto::fill_random(&mut random).unwrap();
        let path = std::env::temp_dir().join(format!("rampart-kms-{tag}-{}", hex::encode(random)));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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

fn pg_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-cluster")
}

/// A PostgreSQL cluster: `$RAMPART_TEST_PG_URL` (scripts/test starts one),
/// or, not under CI, a throwaway one from scripts/pg-test-cluster, stopped
/// on drop.
pub struct PgCluster {
    pub url: String,
    owned: bool,
}

impl PgCluster {
    pub fn get() -> Self {
        if let Ok(url) = std::env::var("RAMPART_TEST_PG_URL") {
            return Self { url, owned: false };
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "RAMPART_TEST_PG_URL is not set: under CI, scripts/test starts the PostgreSQL cluster"
        );
        let out = Command::new(pg_script()).stderr(Stdio::inherit()).output().unwrap();
        assert!(out.status.success(), "scripts/pg-test-cluster failed");
        Self { url: String::from_utf8(out.stdout).unwrap().trim().to_owned(), owned: true }
    }

    /// A fresh database; returns its URL.
    pub fn database(&self, tag: &str) -> String {
        let mut random = [0u8; 6];
        rampart_crypto::fill_random(&mut random).unwrap();
        let name = format!("kms_{tag}_{}", hex::encode(random));
        psql(&self.url, &format!("CREATE DATABASE {name}")).unwrap();
        let (base, _) = self.url.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new(pg_script()).args(["stop", &self.url]).output();
        }
    }
}

/// Runs SQL with psql; the unaligned output, or the error.
pub fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([url, "-qtA", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
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
