//! Audit appends on PostgreSQL: batches sealed after the chain's head and
//! pipelined on the audit writer's own connection.
//!
//! Every server appends to one chain; a row lock on its head
//! (`kms_audit_head`) orders them. The connection remembers the head its
//! newest batch will leave, and the next batch is sealed after it and sent
//! at once as one statement ([`APPEND_AFTER`], its own transaction), even
//! while the batch before is still out: PostgreSQL runs a connection's
//! statements in the order they were sent, so the second starts the
//! moment the first commits, with no round trip between. The statement
//! moves the head and inserts only if the head is still where the batch
//! was sealed; when another server moved it, or an earlier batch failed,
//! nothing is written and the batch takes the *locked* path: it waits
//! until the batch sent before it has finished, then, alone on the
//! connection, locks and reads the head, seals after it, inserts, moves
//! the head and commits. So batches reach the chain in the order they were
//! sent, which is the order the audit writer hands them on.

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::{oneshot, Mutex};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::logic::to_i64;
use super::to_u64;
use crate::audit::{seal_entry, ExportedEntry};
use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::AuditDraft;

const HEAD: &str = "SELECT seq, hash FROM kms_audit_head WHERE id = 1 FOR UPDATE";
const INSERT: &str = "INSERT INTO kms_audit (seq, time_ms, client, operation, key_name,
         key_version, outcome, detail, prev_hash, hash, mac)
     SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[],
         $6::BIGINT[], $7::TEXT[], $8::TEXT[], $9::BYTEA[], $10::BYTEA[], $11::BYTEA[])";
const MOVE_HEAD: &str = "UPDATE kms_audit_head SET seq = $1, hash = $2 WHERE id = 1";
/// [`INSERT`] after moving the head from where the batch was sealed ($14,
/// $15) to $12, $13; when the head is elsewhere (the row lock waits for
/// whoever holds it to commit, then the condition is checked again on the
/// row it committed), nothing moves and nothing is inserted.
const APPEND_AFTER: &str = "WITH moved AS (
         UPDATE kms_audit_head SET seq = $12, hash = $13
         WHERE id = 1 AND seq = $14 AND hash = $15 RETURNING 1)
     INSERT INTO kms_audit (seq, time_ms, client, operation, key_name,
         key_version, outcome, detail, prev_hash, hash, mac)
     SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[],
         $6::BIGINT[], $7::TEXT[], $8::TEXT[], $9::BYTEA[], $10::BYTEA[], $11::BYTEA[])
     WHERE EXISTS (SELECT 1 FROM moved)";

/// The audit writer's connection and the order of the batches sent on it.
#[derive(Default)]
pub(super) struct AuditPipe {
    /// Held while a batch is sealed and sent, and across a whole locked
    /// append, so no other statement lands inside its transaction.
    state: Mutex<PipeState>,
}

#[derive(Default)]
struct PipeState {
    conn: Option<PipeConn>,
    /// Batches numbered in the order they were sent.
    sent: u64,
    /// Resolves (as an error: its sender dropped) when the newest batch
    /// sent has finished, whichever way.
    newest_finished: Option<oneshot::Receiver<()>>,
}

struct PipeConn {
    client: Arc<Client>,
    /// Prepared at connection, so that each statement of a batch is sent
    /// in one message, in order (a statement given as text is prepared
    /// first, in a round trip of its own, and would be overtaken).
    statements: Statements,
    /// The head the newest batch sent leaves when it commits, or `None`
    /// when that is not known (nothing sent yet, or a batch failed): the
    /// next batch then takes the locked path.
    head: Option<(u64, Vec<u8>)>,
}

impl AuditPipe {
    /// Appends `drafts` to the chain; only a committed batch returns `Ok`.
    /// Batches reach the chain in the order their futures were first
    /// polled.
    pub(super) async fn append(
        &self,
        url: &str,
        drafts: &[AuditDraft],
        root: Option<&RootKey>,
    ) -> Result<Vec<ExportedEntry>> {
        // Dropped when this append finishes or is cancelled: a batch sent
        // after it may then take the locked path.
        let (_finished, finished) = oneshot::channel::<()>();
        let mut state = self.state.lock().await;
        state.sent += 1;
        let number = state.sent;
        let before = state.newest_finished.replace(finished);
        let conn = state.connection(url).await?;
        if let Some((seq, hash)) = conn.head.take() {
            let batch = SealedBatch::new(seq, &hash, drafts, root);
            conn.head = Some(batch.head());
            let (client, statement) =
                (Arc::clone(&conn.client), conn.statements.append_after.clone());
            let expected_seq = to_i64(seq);
            let outcome = {
                let mut send = std::pin::pin!(async {
                    let mut params = batch.params();
                    params.extend([&batch.head_seq as &(dyn ToSql + Sync), &batch.head_hash]);
                    params.extend([&expected_seq as &(dyn ToSql + Sync), &hash]);
                    client.execute(&statement, &params).await
                });
                // The first poll sends the statement: while the state is
                // held, so batches go out in the order they were sealed.
                let sent = poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
                drop(state);
                match sent {
                    Poll::Ready(outcome) => outcome,
                    Poll::Pending => send.await,
                }
            };
            match outcome {
                Ok(n) if n == drafts.len() as u64 => return Ok(batch.entries),
                Ok(0) => {}
                Ok(n) => {
                    self.forget_head().await;
                    return Err(KmsError::Store(format!(
                        "audit append wrote {n} of {} entries",
                        drafts.len()
                    )));
                }
                Err(error) => {
                    self.forget_head().await;
                    return Err(error.into());
                }
            }
            // Every batch sent after this one was sealed after it, so it
            // fails the same way and follows this one down the locked path.
            self.forget_head().await;
        } else {
            drop(state);
        }
        if let Some(before) = before {
            let _ = before.await;
        }
        let mut guard = self.state.lock().await;
        let state = &mut *guard;
        let newest = state.sent == number;
        let conn = state.connection(url).await?;
        match append_locked(&conn.client, &conn.statements, drafts, root).await {
            Ok((entries, head)) => {
                // Batches sent after this one fail and follow it; the last
                // of them leaves the head for the next to be sealed after.
                if newest {
                    conn.head = Some(head);
                }
                Ok(entries)
            }
            Err(error) => {
                // Failed inside a transaction: the session's state is
                // unknown, and the database rolls back what a closed
                // session left open.
                state.conn = None;
                Err(error)
            }
        }
    }

    /// After a failure the head is not known: the next batch takes the
    /// locked path.
    async fn forget_head(&self) {
        if let Some(conn) = self.state.lock().await.conn.as_mut() {
            conn.head = None;
        }
    }
}

struct Statements {
    append_after: Statement,
    head: Statement,
    insert: Statement,
    move_head: Statement,
}

impl PipeState {
    /// The connection, opened again when there is none or it closed (a
    /// database restart, or a failed locked append dropped it).
    async fn connection(&mut self, url: &str) -> Result<&mut PipeConn> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = Some(PipeConn::open(url).await?);
        }
        self.conn.as_mut().ok_or_else(|| KmsError::Store("postgresql: not connected".into()))
    }
}

impl PipeConn {
    async fn open(url: &str) -> Result<Self> {
        let client = super::postgres_connection::connect(url, None).await?;
        let statements = Statements {
            append_after: client.prepare(APPEND_AFTER).await?,
            head: client.prepare(HEAD).await?,
            insert: client.prepare(INSERT).await?,
            move_head: client.prepare(MOVE_HEAD).await?,
        };
        Ok(Self { client: Arc::new(client), statements, head: None })
    }
}

/// The locked path: in one transaction, lock and read the head, seal the
/// batch after it, insert, move the head, commit; two round trips (BEGIN
/// with the lock, then the rest). Returns the entries and the new head.
async fn append_locked(
    client: &Client,
    statements: &Statements,
    drafts: &[AuditDraft],
    root: Option<&RootKey>,
) -> Result<(Vec<ExportedEntry>, (u64, Vec<u8>))> {
    let n = drafts.len();
    let (begun, head) =
        tokio::join!(client.batch_execute("BEGIN"), client.query_one(&statements.head, &[]));
    begun?;
    let head = head?;
    let seq = to_u64(head.try_get(0)?, "audit sequence number")?;
    let prev: Vec<u8> = head.try_get(1)?;
    let batch = SealedBatch::new(seq, &prev, drafts, root);
    let head_row: [&(dyn ToSql + Sync); 2] = [&batch.head_seq, &batch.head_hash];
    let rows = batch.params();
    let (inserted, moved, committed) = tokio::join!(
        client.execute(&statements.insert, &rows),
        client.execute(&statements.move_head, &head_row),
        client.batch_execute("COMMIT"),
    );
    // A failed statement aborts the transaction, and PostgreSQL then
    // answers the COMMIT with a rollback rather than an error: every
    // result is checked.
    let inserted = inserted?;
    let moved = moved?;
    committed?;
    if inserted != n as u64 || moved != 1 {
        return Err(KmsError::Store(format!(
            "audit append wrote {inserted} of {n} entries and moved the head {moved} times"
        )));
    }
    let head = batch.head();
    Ok((batch.entries, head))
}

/// A batch of audit entries sealed after a head: the entries and the
/// columns of their rows.
struct SealedBatch<'a> {
    entries: Vec<ExportedEntry>,
    seqs: Vec<i64>,
    times: Vec<i64>,
    clients: Vec<&'a str>,
    operations: Vec<&'a str>,
    keys: Vec<Option<&'a str>>,
    versions: Vec<Option<i64>>,
    outcomes: Vec<&'a str>,
    details: Vec<&'a str>,
    prevs: Vec<Vec<u8>>,
    hashes: Vec<Vec<u8>>,
    macs: Vec<Option<Vec<u8>>>,
    /// Where the head moves.
    head_seq: i64,
    head_hash: Vec<u8>,
}

impl<'a> SealedBatch<'a> {
    fn new(mut seq: u64, head: &[u8], drafts: &'a [AuditDraft], root: Option<&RootKey>) -> Self {
        let n = drafts.len();
        let mut prev = head.to_vec();
        let mut batch = SealedBatch {
            entries: Vec::with_capacity(n),
            seqs: Vec::with_capacity(n),
            times: Vec::with_capacity(n),
            clients: drafts.iter().map(|d| d.client.as_str()).collect(),
            operations: drafts.iter().map(|d| d.operation.as_str()).collect(),
            keys: drafts.iter().map(|d| d.key.as_deref()).collect(),
            versions: Vec::with_capacity(n),
            outcomes: drafts.iter().map(|d| d.outcome.as_str()).collect(),
            details: drafts.iter().map(|d| d.detail.as_str()).collect(),
            prevs: Vec::with_capacity(n),
            hashes: Vec::with_capacity(n),
            macs: Vec::with_capacity(n),
            head_seq: 0,
            head_hash: Vec::new(),
        };
        for draft in drafts {
            seq += 1;
            let row = seal_entry(&prev, seq, draft, root);
            batch.seqs.push(to_i64(seq));
            batch.times.push(draft.time_ms);
            batch.versions.push(draft.version.map(i64::from));
            batch.entries.push(ExportedEntry::sealed(draft, &row));
            batch.prevs.push(row.prev_hash);
            batch.hashes.push(row.hash.clone());
            batch.macs.push(row.mac);
            prev = row.hash;
        }
        batch.head_seq = to_i64(seq);
        batch.head_hash = prev;
        batch
    }

    /// The head after this batch.
    fn head(&self) -> (u64, Vec<u8>) {
        // Sealed from a u64, so never negative.
        (self.head_seq.unsigned_abs(), self.head_hash.clone())
    }

    /// The eleven columns of [`INSERT`], in order.
    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.seqs,
            &self.times,
            &self.clients,
            &self.operations,
            &self.keys,
            &self.versions,
            &self.outcomes,
            &self.details,
            &self.prevs,
            &self.hashes,
            &self.macs,
        ]
    }
}
