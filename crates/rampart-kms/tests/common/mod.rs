//! Test harness shared by the key manager's integration tests: temporary
//! directories, the PostgreSQL cluster, psql.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rampart_kms::client::RetryPolicy;

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
