//! When the rows a PostgreSQL store keeps in memory ([`MaterialCache`])
//! may be served, with several servers writing to one database.
//!
//! Every transaction that changes keys or KMIP objects sends `NOTIFY
//! rampart_kms_changes` ([`NOTIFY`]); each server keeps one connection
//! listening and empties its whole cache on every notification. A request
//! reads the cache only after a *barrier*: an empty query on that
//! listening connection, sent after the request arrived. PostgreSQL
//! signals the listening sessions while the notifying transaction commits,
//! before that transaction's client learns it committed, and a session
//! sends the notifications it was signalled for before the ReadyForQuery
//! that ends its next command (`postgres.c`: "Process incoming notifies
//! ... before ReadyForQuery"). So when the barrier returns, every change
//! committed anywhere before the request arrived has emptied the cache,
//! and a cached row is served only where a read of its own would have
//! found the same row. Barriers are grouped: one empty query answers
//! every request that arrived together, and they pipeline on the one
//! connection.
//!
//! Without a listening connection (lost, refused, or a barrier that does
//! not come back in time) requests read the store, as if nothing were
//! kept; the cache is emptied again once LISTEN is back in place, since
//! what was committed meanwhile was not heard.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Mutex};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::material_cache::MaterialCache;
use crate::error::{KmsError, Result};

/// Sent by every transaction that changes keys or KMIP objects.
pub(super) const NOTIFY: &str = "NOTIFY rampart_kms_changes";
/// What the listening connection subscribes with: the same channel.
const LISTEN: &str = "LISTEN rampart_kms_changes";

/// How long a barrier may take before the listening connection is taken
/// for lost (a half-open TCP connection never answers).
const BARRIER_TIMEOUT: Duration = Duration::from_secs(5);

/// The listening connection and the requests waiting for a barrier.
pub(super) struct Changes {
    url: Arc<str>,
    cache: Arc<MaterialCache>,
    /// Requests waiting for the next barrier, and whether a task sends
    /// barriers.
    pending: std::sync::Mutex<(Vec<oneshot::Sender<bool>>, bool)>,
    listener: Mutex<Option<Arc<Client>>>,
}

impl Changes {
    pub(super) fn new(url: Arc<str>, cache: Arc<MaterialCache>) -> Self {
        Self {
            url,
            cache,
            pending: std::sync::Mutex::new((Vec::new(), false)),
            listener: Mutex::new(None),
        }
    }

    /// The cache generation a request may read in, once every change
    /// committed before the request arrived has been heard; `None` when
    /// that cannot be known now (the request reads the store).
    pub(super) async fn settled(self: &Arc<Self>) -> Option<u64> {
        let (answer, heard) = oneshot::channel();
        let start = {
            let mut pending =
                self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            pending.0.push(answer);
            !std::mem::replace(&mut pending.1, true)
        };
        if start {
            // A task of its own: the barrier answers many requests, none
            // of which may cancel it.
            let changes = Arc::clone(self);
            tokio::spawn(async move { changes.run().await });
        }
        // The generation is taken after the barrier: a write committed
        // later moves it on when heard, and what was read for it is not
        // kept (`MaterialCache::put`).
        heard.await.unwrap_or(false).then(|| self.cache.generation())
    }

    /// Sends a barrier for each group of waiting requests, without
    /// waiting for the previous one to come back (they pipeline on the
    /// one connection), until none is waiting.
    async fn run(self: Arc<Self>) {
        loop {
            let group: Vec<oneshot::Sender<bool>> = {
                let mut pending =
                    self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if pending.0.is_empty() {
                    pending.1 = false;
                    return;
                }
                std::mem::take(&mut pending.0)
            };
            let changes = Arc::clone(&self);
            let client = self.listener().await;
            tokio::spawn(async move {
                let heard = match client {
                    Some(client) => changes.barrier(client).await,
                    None => false,
                };
                for answer in group {
                    let _ = answer.send(heard);
                }
            });
            // Lets the requests already runnable join the next group.
            tokio::task::yield_now().await;
        }
    }

    /// The listening connection, opened when there is none.
    async fn listener(&self) -> Option<Arc<Client>> {
        let mut listener = self.listener.lock().await;
        if listener.as_ref().is_none_or(|c| c.is_closed()) {
            *listener = match self.listen().await {
                Ok(client) => Some(Arc::new(client)),
                Err(error) => {
                    tracing::warn!("cannot listen for key changes (keys are read afresh): {error}");
                    None
                }
            };
        }
        listener.clone()
    }

    /// One empty query on the listening connection `client`; whether it
    /// came back.
    async fn barrier(&self, client: Arc<Client>) -> bool {
        let outcome = tokio::time::timeout(BARRIER_TIMEOUT, client.batch_execute("")).await;
        if let Ok(Ok(())) = outcome {
            return true;
        }
        let why = match outcome {
            Ok(Err(error)) => KmsError::from(error).to_string(),
            _ => format!("no answer within {} s", BARRIER_TIMEOUT.as_secs()),
        };
        tracing::warn!("lost the connection listening for key changes: {why}");
        // Dropping the last handle closes the connection; its task then
        // empties the cache.
        let mut listener = self.listener.lock().await;
        if listener.as_ref().is_some_and(|c| Arc::ptr_eq(c, &client)) {
            *listener = None;
        }
        false
    }

    /// A new connection listening for [`NOTIFY`], whose task empties the
    /// cache on every notification and once more when it ends.
    async fn listen(&self) -> Result<Client> {
        let (client, mut connection) = tokio_postgres::connect(&self.url, NoTls).await?;
        let cache = Arc::clone(&self.cache);
        tokio::spawn(async move {
            loop {
                match poll_fn(|cx| connection.poll_message(cx)).await {
                    // Handled before the connection is polled again, so
                    // before any later reply (a barrier's) is delivered.
                    Some(Ok(AsyncMessage::Notification(_))) => cache.invalidate(),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        tracing::warn!("key-change listener: {}", KmsError::from(error));
                        break;
                    }
                    None => break,
                }
            }
            cache.invalidate();
        });
        client.batch_execute(LISTEN).await?;
        // Whatever was committed while nobody listened was not heard.
        self.cache.invalidate();
        Ok(client)
    }
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("Changes").finish_non_exhaustive()
    }
}
