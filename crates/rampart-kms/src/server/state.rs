//! The state every front end (REST, console, KMIP) and background task
//! shares: the store, the root key and how it is unsealed, the identity
//! cache, the audit writer's queue, metrics and limits. It imports none of
//! the front ends.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rampart_crypto::SecretBytes;
use tokio::sync::{mpsc, oneshot, Notify};

use super::console::sessions::Console;
use super::key_cache::KeyCache;
use super::limits::{Limits, RateLimiter};
use super::metrics::Metrics;
use crate::deployment::SealConfig;
use crate::error::{KmsError, Result};
use crate::hsm::{HsmConfig, HsmRoot};
use crate::keys::RootKey;
use crate::model::{AuditDraft, ClientInfo};
use crate::shamir::{self, Share};
use crate::store::Store;

/// How often the revoked certificates and client labels are reloaded
/// from the store (changes made on this server apply at once).
pub const CLIENT_REFRESH: Duration = Duration::from_secs(5);
/// How often a serving server announces itself in the store; peers not
/// heard from for three periods are shown as gone.
pub const PRESENCE_INTERVAL: Duration = Duration::from_secs(10);

/// Fingerprints of revoked client certificates.
pub(crate) type RevokedSet = Arc<RwLock<HashSet<String>>>;

/// Shared server state.
pub(crate) struct State {
    /// Whether KMIP Interop is answered (interop testing only).
    pub(crate) kmip_interop: bool,
    pub(super) store: Arc<dyn Store>,
    pub(super) seal: SealConfig,
    pub(super) root_check: Vec<u8>,
    pub(super) root: Arc<RwLock<Option<Arc<RootKey>>>>,
    pub(super) shares: Mutex<Vec<Share>>,
    /// With [`SealConfig::Hsm`]: where the root key is, and the audit MAC
    /// key sealed by it.
    pub(super) hsm: Option<(HsmConfig, Vec<u8>)>,
    /// One PIN login at a time (a token counts wrong PINs).
    pub(super) hsm_login: tokio::sync::Mutex<()>,
    pub(super) clients: Mutex<HashMap<String, ClientInfo>>,
    pub(super) revoked: RevokedSet,
    pub(super) auditor: mpsc::Sender<(AuditDraft, oneshot::Sender<Result<()>>)>,
    pub(super) metrics: Metrics,
    pub(super) limits: Limits,
    pub(super) rate: RateLimiter,
    /// Each client's last heartbeat answer (a digest), to chain only the
    /// heartbeats whose answer changed.
    pub(super) heartbeat_answers: Mutex<HashMap<String, [u8; 32]>>,
    /// Wakes the checkpointer when enough entries were appended.
    pub(super) checkpoint_wake: Arc<Notify>,
    /// Set to reopen the audit file (SIGHUP).
    pub(super) sink_reopen: Option<Arc<AtomicBool>>,
    /// The web console's login codes and sessions.
    pub(super) console: Console,
    /// This server's id in the store's list of servers.
    pub(super) server_id: String,
    /// This server's certificate (PEM) as read at start.
    pub(super) server_cert_pem: String,
    /// Private and public keys parsed from their material, for Sign,
    /// Signature Verify and RSA Encrypt/Decrypt.
    pub(super) key_cache: KeyCache,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("store", &self.store)
            .field("seal", &self.seal)
            .finish_non_exhaustive()
    }
}

impl State {
    pub(crate) fn root(&self) -> Option<Arc<RootKey>> {
        self.root.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn require_root(&self) -> Result<Arc<RootKey>> {
        self.root().ok_or(KmsError::Sealed)
    }

    pub(super) fn set_root(&self, key: RootKey) {
        *self.root.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(key));
    }

    /// Tries `key` as the root key.
    pub(super) fn unseal_with(&self, key: &SecretBytes) -> Result<()> {
        let root = RootKey::new(key)?;
        if !root.verify_check(&self.root_check) {
            return Err(KmsError::UnsealFailed("the key does not match this deployment".into()));
        }
        self.set_root(root);
        tracing::info!("unsealed");
        Ok(())
    }

    /// Unseals an HSM deployment: logs in to the token with `pin` and
    /// checks that its key is this deployment's root key.
    pub(crate) async fn unseal_with_pin(&self, pin: SecretBytes) -> Result<()> {
        let Some((config, sealed_audit_key)) = &self.hsm else {
            return Err(KmsError::invalid(
                "this deployment does not keep its root key in an HSM: it takes no PIN",
            ));
        };
        let _one_at_a_time = self.hsm_login.lock().await;
        if self.root().is_some() {
            return Ok(());
        }
        let (config, sealed_audit_key) = (config.clone(), sealed_audit_key.clone());
        // Logging in and searching the token are blocking calls into the
        // module (a network HSM may take a while).
        let root = tokio::task::spawn_blocking(move || {
            let hsm = HsmRoot::open(&config, &pin)?;
            drop(pin);
            RootKey::with_root(Arc::new(hsm), &sealed_audit_key)
        })
        .await
        .map_err(|e| KmsError::Crypto(format!("the HSM login task failed: {e}")))??;
        if !root.verify_check(&self.root_check) {
            return Err(KmsError::UnsealFailed(format!(
                "the {} is not this deployment's root key",
                root.describe()
            )));
        }
        self.set_root(root);
        tracing::info!("unsealed (root key in the HSM)");
        Ok(())
    }

    /// Adds one share; unseals once enough have arrived. Returns
    /// (progress, threshold).
    pub(crate) fn add_share(&self, share: Share) -> Result<(usize, usize)> {
        let threshold =
            match self.seal {
                SealConfig::Shamir { threshold, .. } => threshold,
                SealConfig::Hsm => return Err(KmsError::invalid(
                    "this deployment's root key is in an HSM: give the token's PIN, not a share",
                )),
                SealConfig::File => {
                    return Err(KmsError::invalid(
                        "this deployment unseals with a key file, not shares",
                    ))
                }
            };
        if self.root().is_some() {
            return Ok((0, usize::from(threshold)));
        }
        if share.threshold() != threshold {
            return Err(KmsError::UnsealFailed("the share belongs to another split".into()));
        }
        let mut shares = self.shares.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if shares.iter().any(|s| s.index() == share.index()) {
            return Err(KmsError::invalid(format!("share #{} was already given", share.index())));
        }
        shares.push(share);
        if shares.len() < usize::from(threshold) {
            return Ok((shares.len(), usize::from(threshold)));
        }
        let key = shamir::combine(&shares);
        shares.clear();
        let key = key?;
        self.unseal_with(&key).map_err(|_| {
            KmsError::UnsealFailed("the shares do not reconstruct the root key; start again".into())
        })?;
        Ok((0, usize::from(threshold)))
    }

    /// Applies a change to a client made on this server: the identity
    /// cache forgets it and, when revoked, its certificate is refused from
    /// the next handshake on.
    pub(crate) fn client_changed(&self, client: &ClientInfo) {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&client.fingerprint);
        if client.revoked.is_some() {
            self.revoked
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(client.fingerprint.clone());
        }
    }

    /// Reloads the revoked certificates from the store and forgets cached
    /// identities (labels may have changed on another server).
    pub(super) async fn refresh_clients(&self) -> Result<()> {
        // Page through the revoked clients only: the set of revocations is
        // what this holds in memory anyway, not the whole client table.
        let filter = crate::store::ClientFilter { revoked: Some(true), ..Default::default() };
        let mut revoked = HashSet::new();
        let mut after = String::new();
        loop {
            let page =
                self.store.client_page(after, filter.clone(), crate::store::MAX_PAGE).await?;
            let full = page.len() == crate::store::MAX_PAGE as usize;
            let Some(last) = page.last() else { break };
            after = last.name.clone();
            revoked.extend(page.into_iter().map(|c| c.fingerprint));
            if !full {
                break;
            }
        }
        // Revocations are never undone: merging keeps one made here
        // while the list was being read.
        self.revoked.write().unwrap_or_else(std::sync::PoisonError::into_inner).extend(revoked);
        self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        Ok(())
    }

    /// Whether `answer` to `client`'s heartbeat over `keys` is the one it
    /// got last time from this server; records it either way.
    pub(crate) fn heartbeat_unchanged(
        &self,
        client: &str,
        keys: &[crate::model::HeldKey],
        answer: &serde_json::Value,
    ) -> bool {
        let mut bytes = serde_json::to_vec(keys).unwrap_or_default();
        bytes.extend_from_slice(answer.to_string().as_bytes());
        let mut digest = [0u8; 32];
        digest.copy_from_slice(
            rampart_crypto::digest(rampart_crypto::HashAlg::Sha256, &bytes).expose(),
        );
        let mut answers =
            self.heartbeat_answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match answers.get_mut(client) {
            Some(last) => std::mem::replace(last, digest) == digest,
            None => {
                // Bounded like the identity cache: past it, every check-in
                // of a client not yet remembered is chained.
                if answers.len() < 1_000_000 {
                    answers.insert(client.to_owned(), digest);
                }
                false
            }
        }
    }

    pub(crate) fn share_progress(&self) -> usize {
        self.shares.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// The registered client holding the certificate with `fp`.
    pub(crate) async fn identify(&self, fp: &str) -> Result<ClientInfo> {
        if let Some(client) =
            self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(fp)
        {
            return Ok(client.clone());
        }
        let client = self
            .store
            .client_by_fingerprint(fp.to_owned())
            .await?
            .ok_or(KmsError::UnknownClient)?;
        if let Some(revoked) = &client.revoked {
            return Err(KmsError::ClientRevoked {
                name: client.name.clone(),
                reason: revoked.reason.clone(),
            });
        }
        let mut cache = self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() < 100_000 {
            cache.insert(fp.to_owned(), client.clone());
        }
        Ok(client)
    }

    /// Appends an entry to the audit chain and waits until it is committed.
    pub(crate) async fn audit(&self, draft: AuditDraft) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.auditor
            .send((draft, tx))
            .await
            .map_err(|_| KmsError::Store("the audit writer stopped".into()))?;
        rx.await.map_err(|_| KmsError::Store("the audit writer stopped".into()))?
    }
}
