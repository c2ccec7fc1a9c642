//! Test harness shared by the key manager's integration tests: temporary
//! directories, the PostgreSQL cluster, psql, filling a store directly.

use std::sync::Arc;
use std::time::Duration;

use rampart_kms::client::RetryPolicy;
use rampart_kms::keys::RootKey;
use rampart_kms::model::{now_ms, parse_policy, AuditDraft, KeyInfo, KeyState, KeyVersionInfo};
use rampart_kms::store::Store;

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
