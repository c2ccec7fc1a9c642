//! Test harness shared by the key manager's integration tests: temporary
//! directories, the PostgreSQL cluster, psql.

use std::time::Duration;

use rampart_kms::client::RetryPolicy;

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
