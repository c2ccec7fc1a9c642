//! The store's rules, called on the `Store` itself, one definition run on
//! SQLite and on PostgreSQL: what is not found, what conflicts, what a
//! state change does to each version, the first revocation kept, labels
//! replaced, a prune that only goes ahead from the anchor it expects, and
//! on PostgreSQL, a change made through one store seen at once through
//! another on the same database.

use std::sync::Arc;

use rampart_kms::audit::Mark;
use rampart_kms::model::{
    now_ms, parse_policy, AuditDraft, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Labels,
};
use rampart_kms::store::{self, KeyFilter, StateChange, Store};
use rampart_kms::KmsError;

use crate::common::{Backend, PgCluster, TempDir};

/// A store of `backend` in a new directory (or database), kept alive
/// with what it lives in.
struct Opened {
    store: Arc<dyn Store>,
    /// The database URL on PostgreSQL.
    url: Option<String>,
    _dir: TempDir,
    _cluster: Option<PgCluster>,
}

async fn open(backend: Backend, tag: &str) -> Opened {
    let dir = TempDir::new(tag);
    let cluster = (backend == Backend::Postgres).then(PgCluster::get);
    let url = cluster.as_ref().map(|c| c.database(tag));
    let store = store::open(url.as_deref(), dir.path()).await.unwrap();
    assert_eq!(store.kind(), if backend == Backend::Sqlite { "sqlite" } else { "postgresql" });
    Opened { store, url, _dir: dir, _cluster: cluster }
}

fn key(name: &str, allow: &[&str]) -> KeyInfo {
    KeyInfo {
        name: name.into(),
        exportable: false,
        allow: parse_policy(&allow.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap(),
        created_ms: now_ms(),
        versions: vec![KeyVersionInfo {
            version: 1,
            state: KeyState::Active,
            created_ms: now_ms(),
            changed_ms: None,
        }],
    }
}

fn client(name: &str, labels: &[(&str, &str)]) -> ClientInfo {
    let labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    ClientInfo {
        name: name.into(),
        labels: Labels::new(labels).unwrap(),
        admin: false,
        serial: format!("{name}-serial"),
        fingerprint: format!("{name}-fingerprint"),
        created_ms: now_ms(),
        not_after_ms: now_ms() + 86_400_000,
        revoked: None,
    }
}

fn draft(i: usize) -> AuditDraft {
    AuditDraft {
        time_ms: now_ms(),
        client: "admin".into(),
        operation: "key.create".into(),
        key: Some(format!("k{i}")),
        version: Some(1),
        outcome: "ok".into(),
        detail: String::new(),
    }
}

fn is_not_found(error: &KmsError, what: &str) -> bool {
    matches!(error, KmsError::NotFound(text) if text == what)
}

async fn keys_and_versions_follow_the_rules(backend: Backend) {
    let s = open(backend, "store_keys").await;
    let store = &s.store;
    store.create_key(key("db", &["label:role=db"]), vec![1; 60]).await.unwrap();
    let taken = store.create_key(key("db", &[]), vec![2; 60]).await.unwrap_err();
    assert!(matches!(&taken, KmsError::Conflict(text) if text == "key db"), "{taken:?}");

    // A version must follow the newest: a second version 2 is a rotation
    // that lost the race, and a key that does not exist is not found.
    store.add_version("db".into(), 2, now_ms(), vec![3; 60]).await.unwrap();
    let raced = store.add_version("db".into(), 2, now_ms(), vec![4; 60]).await.unwrap_err();
    assert!(matches!(&raced, KmsError::Conflict(text) if text.contains("rotated")), "{raced:?}");
    let missing = store.add_version("nope".into(), 2, now_ms(), vec![4; 60]).await.unwrap_err();
    assert!(is_not_found(&missing, "key nope"), "{missing:?}");

    let loaded = store.get_key("db".into()).await.unwrap().unwrap();
    assert_eq!(loaded.versions.iter().map(|v| v.version).collect::<Vec<_>>(), [1, 2]);
    assert!(store.get_key("nope".into()).await.unwrap().is_none());
    let newest = store.key_material("db".into(), None).await.unwrap().unwrap();
    assert_eq!((newest.version.version, newest.material.as_deref()), (2, Some(&[3u8; 60][..])));

    // Revoking names one version; a repeat changes nothing; destroying all
    // drops every version's material.
    let revoke = StateChange::Revoke { reason: "rotated".into() };
    assert_eq!(
        store.change_state("db".into(), Some(1), revoke.clone(), now_ms()).await.unwrap(),
        1
    );
    assert_eq!(
        store.change_state("db".into(), Some(1), revoke.clone(), now_ms()).await.unwrap(),
        0
    );
    let unknown = store.change_state("db".into(), Some(9), revoke.clone(), now_ms()).await;
    assert!(is_not_found(&unknown.unwrap_err(), "key db version 9"));
    let unknown = store.change_state("nope".into(), None, StateChange::Destroy, now_ms()).await;
    assert!(is_not_found(&unknown.unwrap_err(), "key nope"));
    assert_eq!(
        store.change_state("db".into(), None, StateChange::Destroy, now_ms()).await.unwrap(),
        2
    );
    for version in [1, 2] {
        let row = store.key_material("db".into(), Some(version)).await.unwrap().unwrap();
        assert_eq!(row.version.state, KeyState::Destroyed);
        assert!(row.material.is_none(), "version {version} kept its material");
    }

    // The selector side table follows the policy a key was created with.
    let filter = KeyFilter::parse(None, None, Some("label:role=db")).unwrap();
    let page = store.key_page(String::new(), filter, 10).await.unwrap();
    assert_eq!(page.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["db"]);
}
on_each_store!(keys_and_versions_follow_the_rules);

async fn clients_keep_their_first_revocation_and_take_new_labels(backend: Backend) {
    let s = open(backend, "store_clients").await;
    let store = &s.store;
    store.add_client(client("host-1", &[("region", "eu")])).await.unwrap();
    let taken = store.add_client(client("host-1", &[])).await.unwrap_err();
    assert!(matches!(&taken, KmsError::Conflict(text) if text.starts_with("client host-1")));

    let first = store.revoke_client("host-1".into(), "lost".into(), 1_000).await.unwrap();
    let again = store.revoke_client("host-1".into(), "stolen".into(), 2_000).await.unwrap();
    let revoked = again.revoked.unwrap();
    assert_eq!((revoked.revoked_ms, revoked.reason.as_str()), (1_000, "lost"));
    assert_eq!(first.revoked.unwrap().reason, "lost");
    let missing = store.revoke_client("nobody".into(), "x".into(), 1).await.unwrap_err();
    assert!(is_not_found(&missing, "client nobody"), "{missing:?}");

    let labels = Labels::new([("region".to_owned(), "us".to_owned())].into()).unwrap();
    let relabelled = store.set_client_labels("host-1".into(), labels.clone()).await.unwrap();
    assert_eq!(relabelled.labels, labels);
    let by_print = store.client_by_fingerprint("host-1-fingerprint".into()).await.unwrap();
    assert_eq!(by_print.unwrap().labels, labels);
    let missing = store.set_client_labels("nobody".into(), labels).await.unwrap_err();
    assert!(is_not_found(&missing, "client nobody"), "{missing:?}");
}
on_each_store!(clients_keep_their_first_revocation_and_take_new_labels);

async fn a_prune_goes_ahead_only_from_the_anchor_it_expects(backend: Backend) {
    let s = open(backend, "store_prune").await;
    let store = &s.store;
    let seqs = store.append_audit((0..5).map(draft).collect(), None).await.unwrap();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    let hash = store.audit_hash(3).await.unwrap().unwrap();
    let anchor = Mark { seq: 3, hash: hash.clone(), time_ms: now_ms(), mac: String::new() };

    // A wrong hash or an anchor already moved is refused, and nothing goes.
    let forged = Mark { hash: "00".repeat(32), ..anchor.clone() };
    assert!(matches!(store.prune_audit(0, forged).await.unwrap_err(), KmsError::Conflict(_)));
    assert!(matches!(
        store.prune_audit(7, anchor.clone()).await.unwrap_err(),
        KmsError::Conflict(_)
    ));
    assert_eq!(store.audit_page(0, None, 10).await.unwrap().len(), 5);

    assert_eq!(store.prune_audit(0, anchor.clone()).await.unwrap(), 3);
    assert_eq!(store.audit_anchor().await.unwrap().map(|m| (m.seq, m.hash)), Some((3, hash)));
    let left = store.audit_page(0, None, 10).await.unwrap();
    assert_eq!(left.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    // A second prune from the old anchor lost the race.
    assert!(matches!(store.prune_audit(0, anchor).await.unwrap_err(), KmsError::Conflict(_)));
    // The chain goes on after what is left.
    assert_eq!(store.append_audit(vec![draft(5)], None).await.unwrap(), [6]);
}
on_each_store!(a_prune_goes_ahead_only_from_the_anchor_it_expects);

/// Two stores on one PostgreSQL database, as two servers have: what one
/// keeps in memory of a key (`store/postgres_changes.rs`) must not be
/// served once the other has changed the key, from the very next read,
/// with no time for a notification to arrive on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_store_is_read_at_once_through_another_on_postgres() {
    let here = open(Backend::Postgres, "coherence").await;
    let there = store::open(here.url.as_deref(), here._dir.path()).await.unwrap();
    let revoke = StateChange::Revoke { reason: "moved".into() };
    for round in 0..200 {
        let name = format!("k{round}");
        here.store.create_key(key(&name, &[]), vec![round as u8; 40]).await.unwrap();
        for _ in 0..2 {
            let row = here.store.key_material(name.clone(), Some(1)).await.unwrap().unwrap();
            assert_eq!(row.version.state, KeyState::Active);
        }
        assert_eq!(
            there.change_state(name.clone(), Some(1), revoke.clone(), now_ms()).await.unwrap(),
            1
        );
        let row = here.store.key_material(name, Some(1)).await.unwrap().unwrap();
        assert!(
            matches!(row.version.state, KeyState::Revoked { .. }),
            "round {round}: a row from before the other store's change: {:?}",
            row.version.state
        );
    }
}
