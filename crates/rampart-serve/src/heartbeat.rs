//! `rampart serve`'s heartbeat: volumes unlocked through the key manager
//! keep asking it whether this host may still hold their keys.
//!
//! Every `--heartbeat`, the key versions behind the served exports are
//! sent to `POST /v1/heartbeat`; the server re-evaluates its policy (key
//! state, allow rules against the client's current labels, the client's
//! revocation and certificate validity) and audits the check. An export
//! whose key is refused is closed at once: no new connection finds it,
//! its clients' in-flight requests are answered and the clients are
//! disconnected, the volume is flushed and its device dropped, which wipes
//! the key schedules (`Xts`/`Cbc` zeroize and AWS-LC cleanses on drop).
//!
//! When no key server answers, exports keep serving for `--grace`, then
//! close the same way; an answer within the grace period resumes as if
//! nothing happened. A refusal of this client as a whole (its certificate
//! revoked, unknown or expired: HTTP 401/403 or a TLS alert saying so)
//! closes every managed export. Other TLS failures (a server certificate
//! this host does not trust) count as "no answer": they may be an
//! attacker in the path, who must not be able to unlock anything, but
//! also must not be able to close exports faster than the grace period.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_kms::client::{ClientError, KmsClient, RetryPolicy};
use rampart_kms::model::{HeartbeatVerdict, HeldKey};
use rampart_kms::Bundle;
use rampart_nbd::ServerHandle;
use tokio::time::Instant;

use crate::error::ServeError;

/// Who answers the heartbeat: the key manager ([`KmsClient`]).
pub trait KeyManager: Send + Sync + 'static {
    /// Whether this host may still hold `keys`: one verdict per key.
    fn heartbeat(
        &self,
        keys: &[HeldKey],
    ) -> impl Future<Output = Result<Vec<HeartbeatVerdict>, ClientError>> + Send;
}

impl KeyManager for KmsClient {
    fn heartbeat(
        &self,
        keys: &[HeldKey],
    ) -> impl Future<Output = Result<Vec<HeartbeatVerdict>, ClientError>> + Send {
        KmsClient::heartbeat(self, keys)
    }
}

/// What the heartbeat closes: the exports of a running NBD server
/// ([`ServerHandle`]).
pub trait Exports: Send + Sync + 'static {
    /// Closes export `name` (flushing it); `Ok(false)` when it was not open.
    fn close_export(&self, name: &str) -> impl Future<Output = std::io::Result<bool>> + Send;
    /// The exports still open.
    fn open_exports(&self) -> Vec<String>;
}

impl Exports for ServerHandle {
    fn close_export(&self, name: &str) -> impl Future<Output = std::io::Result<bool>> + Send {
        ServerHandle::close_export(self, name)
    }

    fn open_exports(&self) -> Vec<String> {
        ServerHandle::open_exports(self)
    }
}

/// An export whose volume was unlocked with a key-manager key.
#[derive(Debug, Clone)]
pub struct HeldVolume {
    pub export: String,
    pub key: String,
    /// The key version; an online reencryption that rebinds the volume
    /// moves it to the newest one (see [`crate::served`]).
    pub version: Arc<AtomicU32>,
}

impl HeldVolume {
    fn version(&self) -> u32 {
        self.version.load(Ordering::Relaxed)
    }
}

/// The heartbeat of one `rampart serve`.
#[derive(Debug)]
pub struct Checker<K = KmsClient> {
    client: K,
    held: Vec<HeldVolume>,
    every: Duration,
    grace: Duration,
}

/// What one heartbeat said.
enum Outcome {
    /// The key server answered: the exports (by index into `held`) it refused, with why.
    Answered(Vec<(usize, String)>),
    /// This client is refused as a whole.
    ClientRefused(String),
    /// No key server answered.
    NoAnswer(String),
}

/// How one heartbeat retries: it must end well before the next is due,
/// so a short period gets short timeouts and few retries.
#[must_use]
pub fn retry_policy(every: Duration) -> RetryPolicy {
    let limit = every.clamp(Duration::from_secs(1), Duration::from_secs(10));
    RetryPolicy {
        rounds: 2,
        backoff: Duration::from_millis(100),
        connect_timeout: limit,
        request_timeout: limit,
    }
}

impl Checker {
    /// Checks in with the key servers of `bundle` every `every`, closing
    /// exports after `grace` without an answer.
    pub fn connect(
        bundle: &Bundle,
        held: Vec<HeldVolume>,
        every: Duration,
        grace: Duration,
    ) -> Result<Self, ServeError> {
        let client = KmsClient::with_policy(bundle, retry_policy(every))?;
        Ok(Self::new(client, held, every, grace))
    }
}

impl<K: KeyManager> Checker<K> {
    /// Checks in with `client`.
    pub fn new(client: K, held: Vec<HeldVolume>, every: Duration, grace: Duration) -> Self {
        Self { client, held, every, grace }
    }

    /// Checks in every period until every managed export is closed; then,
    /// if no export at all is left, sends why on `emptied`.
    pub async fn run(
        mut self,
        handle: impl Exports,
        emptied: tokio::sync::oneshot::Sender<String>,
    ) {
        let mut unanswered_since: Option<Instant> = None;
        let mut ticks = tokio::time::interval(self.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: the keys were just unwrapped.
        ticks.tick().await;
        let mut last_reason = String::new();
        while !self.held.is_empty() {
            ticks.tick().await;
            let mut refused: Vec<(usize, String)> = Vec::new();
            match self.check().await {
                Outcome::Answered(denied) => {
                    if let Some(since) = unanswered_since.take() {
                        tracing::info!(
                            "the key server answered again after {:.0} s; exports keep serving",
                            since.elapsed().as_secs_f64()
                        );
                    }
                    refused = denied;
                }
                Outcome::ClientRefused(why) => {
                    refused = (0..self.held.len()).map(|i| (i, why.clone())).collect();
                }
                Outcome::NoAnswer(why) => {
                    let first = unanswered_since.is_none();
                    let since = *unanswered_since.get_or_insert_with(Instant::now);
                    let waited = since.elapsed();
                    if waited >= self.grace {
                        let why = format!(
                            "no key server answered the heartbeat for {} (--grace {}): {why}",
                            seconds(waited),
                            seconds(self.grace)
                        );
                        refused = (0..self.held.len()).map(|i| (i, why.clone())).collect();
                    } else if first {
                        tracing::warn!(
                            "no key server answered the heartbeat ({why}); exports keep serving \
                             for at most {} (--grace)",
                            seconds(self.grace)
                        );
                    }
                }
            }
            if refused.is_empty() {
                continue;
            }
            let mut gone = vec![false; self.held.len()];
            for (index, why) in refused {
                gone[index] = true;
                let volume = &self.held[index];
                tracing::error!(
                    export = %volume.export,
                    "closing export '{}': key {} version {} may no longer be held by this host: \
                     {why}",
                    volume.export,
                    volume.key,
                    volume.version()
                );
                match handle.close_export(&volume.export).await {
                    Ok(true) => tracing::error!(
                        export = %volume.export,
                        "export '{}' closed: pending writes flushed, clients disconnected, \
                         volume key wiped",
                        volume.export
                    ),
                    Ok(false) => {}
                    Err(error) => tracing::error!(
                        export = %volume.export,
                        "export '{}' closed, but flushing it failed: {error}",
                        volume.export
                    ),
                }
                last_reason = format!("export '{}': {why}", volume.export);
            }
            let mut index = 0;
            self.held.retain(|_| {
                index += 1;
                !gone[index - 1]
            });
        }
        if handle.open_exports().is_empty() {
            let _ = emptied.send(last_reason);
        } else {
            // Other exports keep serving: hold the sender (a dropped one
            // would read as "every export closed") until serve ends.
            std::future::pending::<()>().await;
        }
    }

    async fn check(&self) -> Outcome {
        let keys: Vec<HeldKey> = self
            .held
            .iter()
            .map(|v| HeldKey { name: v.key.clone(), version: v.version() })
            .collect();
        match self.client.heartbeat(&keys).await {
            Ok(verdicts) => {
                let mut denied = Vec::new();
                for (index, volume) in self.held.iter().enumerate() {
                    let verdict = verdicts
                        .iter()
                        .find(|v| v.name == volume.key && v.version == volume.version());
                    match verdict {
                        Some(v) if v.allowed => {}
                        Some(v) => denied.push((
                            index,
                            v.reason.clone().unwrap_or_else(|| "refused by the key server".into()),
                        )),
                        None => denied.push((
                            index,
                            "the key server's heartbeat answer does not mention this key".into(),
                        )),
                    }
                }
                Outcome::Answered(denied)
            }
            Err(error @ ClientError::Api { status: 401 | 403, .. }) => {
                Outcome::ClientRefused(format!("the key server refuses this host: {error}"))
            }
            Err(ClientError::Tls { endpoint, message })
                if message.contains("CertificateRevoked")
                    || message.contains("CertificateExpired") =>
            {
                Outcome::ClientRefused(format!(
                    "the key server {endpoint} refuses this host's certificate: {message}"
                ))
            }
            Err(error) => Outcome::NoAnswer(error.to_string()),
        }
    }
}

fn seconds(time: Duration) -> String {
    let s = time.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s:.0}s")
    }
}
