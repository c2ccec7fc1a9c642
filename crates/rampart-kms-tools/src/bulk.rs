//! Filling a store at fleet scale without going through a server's API:
//! keys, clients and audit entries written with exactly the values and
//! the calls the server uses ([`RootKey::seal_material`] for key
//! material, the deployment CA for client certificates,
//! [`Store::append_audit`] for the hash chain and its MACs), in large
//! batches. What it writes is indistinguishable from what a server would
//! have written: the keys unwrap, the clients' bundles connect, and
//! `kms audit verify` checks the chain it appended.
//!
//! For benchmarks and for rehearsing a deployment's size (`rampart kms
//! populate`); it opens the store directly, so it needs the unseal key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_crypto::random_secret;

use rampart_kms::bundle::{Bundle, BUNDLE_FORMAT};
use rampart_kms::deployment::{files, AdminError, StoreAccess};
use rampart_kms::error::{KmsError, Result};
use rampart_kms::keys::RootKey;
use rampart_kms::model::{
    now_ms, parse_policy, AuditDraft, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Labels,
};
use rampart_kms::pki::{client_request, Authority};
use rampart_kms::store::{meta, Store};

/// Bytes of a key's material, as `POST /v1/keys` creates it.
const KEY_BYTES: usize = 32;
/// Audit entries appended per store transaction.
const AUDIT_BATCH: usize = 10_000;
/// Keys or clients written at once (concurrent store calls).
const WORKERS: u64 = 4;

/// What [`populate`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkPlan {
    /// Keys `{key_prefix}{i}` for i in 0..keys, the index zero-padded to
    /// [`BulkPlan::width`] digits; each allows clients labelled
    /// `role=host`.
    pub keys: u64,
    pub key_prefix: String,
    /// Clients `{client_prefix}{i}` (padded the same way), labelled
    /// `role=host`, non-admin, each with a certificate from the
    /// deployment CA valid 365 days.
    pub clients: u64,
    pub client_prefix: String,
    /// Audit entries appended after the newest: unwraps of the keys by
    /// the clients (one in a thousand denied), stamped one millisecond
    /// apart up to now.
    pub audit: u64,
}

impl BulkPlan {
    /// Digits of the zero-padded index in key and client names (7: names
    /// up to ten million sort in index order).
    pub const WIDTH: usize = 7;

    /// The name of key `i`.
    #[must_use]
    pub fn key_name(&self, i: u64) -> String {
        format!("{}{i:0width$}", self.key_prefix, width = Self::WIDTH)
    }

    /// The name of client `i`.
    #[must_use]
    pub fn client_name(&self, i: u64) -> String {
        format!("{}{i:0width$}", self.client_prefix, width = Self::WIDTH)
    }
}

/// What [`populate`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    pub keys: u64,
    pub clients: u64,
    pub audit: u64,
    /// Bundles written (see [`populate`]).
    pub bundles: u64,
}

/// Where [`populate`] writes client bundles: the first `count` clients'
/// bundles go to `dir/NAME.bundle`, pointing at `endpoints`.
#[derive(Debug, Clone)]
pub struct BundleOut<'a> {
    pub dir: &'a Path,
    pub count: u64,
    pub endpoints: Vec<String>,
}

/// Writes `plan` into `store` with `root` (checked against the store's
/// root check value first). `progress` is called with a phase name
/// (`keys`, `clients`, `audit`) and how many of it are written so far.
pub async fn populate(
    store: Arc<dyn Store>,
    root: Arc<RootKey>,
    plan: &BulkPlan,
    bundles: Option<BundleOut<'_>>,
    progress: &(dyn Fn(&'static str, u64) + Sync),
) -> Result<BulkReport> {
    let check = store
        .get_meta(meta::ROOT_CHECK)
        .await?
        .ok_or_else(|| KmsError::Config("the store is not initialised".into()))?;
    if !root.verify_check(&check) {
        return Err(KmsError::Config("the unseal key does not open this store".into()));
    }
    for (what, prefix) in [("key", &plan.key_prefix), ("client", &plan.client_prefix)] {
        rampart_kms::model::check_name(what, &format!("{prefix}0"))?;
    }
    let keys = populate_keys(&store, &root, plan, progress).await?;
    let (clients, bundles) = populate_clients(&store, &root, plan, bundles, progress).await?;
    let audit = populate_audit(&store, &root, plan, progress).await?;
    store.settle_after_bulk_load().await?;
    Ok(BulkReport { keys, clients, audit, bundles })
}

async fn populate_keys(
    store: &Arc<dyn Store>,
    root: &Arc<RootKey>,
    plan: &BulkPlan,
    progress: &(dyn Fn(&'static str, u64) + Sync),
) -> Result<u64> {
    let allow = parse_policy(&["label:role=host".to_owned()])?;
    let mut done = 0u64;
    let mut next = 0u64;
    while next < plan.keys {
        // A round of at most WORKERS * 1000 keys, WORKERS store calls at a
        // time (PostgreSQL answers each over a pooled connection).
        let end = plan.keys.min(next + WORKERS * 1000);
        let mut tasks = tokio::task::JoinSet::new();
        for w in 0..WORKERS {
            let (store, root, allow, plan) =
                (Arc::clone(store), Arc::clone(root), allow.clone(), plan.clone());
            let start = next + w;
            tasks.spawn(async move {
                let mut i = start;
                let mut count = 0u64;
                while i < end {
                    let name = plan.key_name(i);
                    let now = now_ms();
                    let material = random_secret(KEY_BYTES)?;
                    let sealed = root.seal_material(&name, 1, &material)?;
                    let key = KeyInfo {
                        name,
                        exportable: false,
                        allow: allow.clone(),
                        created_ms: now,
                        versions: vec![KeyVersionInfo {
                            version: 1,
                            state: KeyState::Active,
                            created_ms: now,
                            changed_ms: None,
                        }],
                    };
                    store.create_key(key, sealed).await?;
                    count += 1;
                    i += WORKERS;
                }
                Ok::<_, KmsError>(count)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            done += joined.map_err(|e| KmsError::Store(format!("a writer task failed: {e}")))??;
        }
        next = end;
        progress("keys", done);
    }
    Ok(done)
}

async fn populate_clients(
    store: &Arc<dyn Store>,
    root: &Arc<RootKey>,
    plan: &BulkPlan,
    bundles: Option<BundleOut<'_>>,
    progress: &(dyn Fn(&'static str, u64) + Sync),
) -> Result<(u64, u64)> {
    if plan.clients == 0 {
        return Ok((0, 0));
    }
    let missing = || KmsError::Corrupt("the store holds no CA".into());
    let ca_pem = String::from_utf8(store.get_meta(meta::CA_CERT).await?.ok_or_else(missing)?)
        .map_err(|_| KmsError::Corrupt("the CA certificate is not text".into()))?;
    let ca_key = root.open_ca_key(&store.get_meta(meta::CA_KEY).await?.ok_or_else(missing)?)?;
    let ca = Authority::load(&ca_pem, &ca_key)?;
    drop(ca_key);
    let labels = Labels::new([("role".to_owned(), "host".to_owned())].into_iter().collect())?;
    let mut written = 0u64;
    for i in 0..plan.clients {
        let name = plan.client_name(i);
        let (csr, key) = client_request(&name)?;
        let issued = ca.issue_client_days(&csr, &name, 365)?;
        store
            .add_client(ClientInfo {
                name: name.clone(),
                labels: labels.clone(),
                admin: false,
                serial: issued.serial,
                fingerprint: issued.fingerprint,
                created_ms: now_ms(),
                not_after_ms: issued.not_after_ms,
                revoked: None,
            })
            .await?;
        if let Some(out) = bundles.as_ref().filter(|b| i < b.count) {
            Bundle {
                format: BUNDLE_FORMAT.into(),
                name: name.clone(),
                endpoints: out.endpoints.clone(),
                ca_cert: ca_pem.clone(),
                cert: issued.cert_pem,
                key,
            }
            .write(&out.dir.join(format!("{name}.bundle")))?;
            written += 1;
        }
        if (i + 1) % 1000 == 0 || i + 1 == plan.clients {
            progress("clients", i + 1);
        }
    }
    Ok((plan.clients, written))
}

async fn populate_audit(
    store: &Arc<dyn Store>,
    root: &Arc<RootKey>,
    plan: &BulkPlan,
    progress: &(dyn Fn(&'static str, u64) + Sync),
) -> Result<u64> {
    // Stamped one millisecond apart, ending now, as a busy server's would.
    let start_ms = now_ms().saturating_sub(i64::try_from(plan.audit).unwrap_or(i64::MAX));
    let mut done = 0u64;
    while done < plan.audit {
        let n = usize::try_from((plan.audit - done).min(AUDIT_BATCH as u64)).unwrap_or(AUDIT_BATCH);
        let mut drafts = Vec::with_capacity(n);
        for j in 0..n as u64 {
            let i = done + j;
            let client = if plan.clients > 0 {
                plan.client_name(i % plan.clients)
            } else {
                "admin".to_owned()
            };
            let (key, version) = if plan.keys > 0 {
                // A stride through the keys that visits each in turn.
                (Some(plan.key_name(i.wrapping_mul(7_919) % plan.keys)), Some(1))
            } else {
                (None, None)
            };
            let denied = i % 1000 == 999;
            drafts.push(AuditDraft {
                time_ms: start_ms.saturating_add(i64::try_from(i).unwrap_or(i64::MAX)),
                client,
                operation: "key.unwrap".to_owned(),
                key,
                version,
                outcome: if denied { "denied" } else { "ok" }.to_owned(),
                detail: if denied {
                    "403 forbidden: the key's policy does not allow this client".to_owned()
                } else {
                    "200".to_owned()
                },
            });
        }
        store.append_audit(drafts, Some(Arc::clone(root))).await?;
        done += n as u64;
        progress("audit", done);
    }
    // The filter references of what was appended, every complete segment
    // (a server's indexer would catch up at its start; done here, it does
    // not compete with the first requests).
    while store.index_audit().await? > 0 {}
    Ok(done)
}

/// `rampart kms populate`: the deployment's store and root key, what to
/// write, and where the first clients' bundles go.
#[derive(Debug, Clone)]
pub struct PopulateSettings {
    pub access: StoreAccess,
    pub plan: BulkPlan,
    /// Write the bundles of the first N clients into `bundle_dir`
    /// (created if missing), pointing at the admin bundle's endpoints.
    pub bundles: u64,
    pub bundle_dir: Option<PathBuf>,
}

/// Fills the deployment's store as [`populate`] does, with its root key
/// read from the unseal key file and the store opened directly.
pub async fn populate_deployment(
    settings: &PopulateSettings,
    progress: &(dyn Fn(&'static str, u64) + Sync),
) -> std::result::Result<BulkReport, AdminError> {
    // Millions of short-lived secrets (material, hashes, MACs): locking
    // each on its own would cost more than making it (as a server does).
    let _ = rampart_crypto::lock_all_memory();
    let root = settings.access.root_key()?;
    let endpoints = if settings.bundles > 0 {
        Bundle::read(&settings.access.data_dir.join(files::ADMIN_BUNDLE))?.endpoints
    } else {
        Vec::new()
    };
    if let Some(dir) = &settings.bundle_dir {
        std::fs::create_dir_all(dir).map_err(|e| AdminError::io("cannot create", dir, &e))?;
    }
    let store = settings.access.open_store().await?;
    let out = settings.bundle_dir.as_deref().map(|dir| BundleOut {
        dir,
        count: settings.bundles,
        endpoints,
    });
    Ok(populate(store, Arc::new(root), &settings.plan, out, progress).await?)
}
