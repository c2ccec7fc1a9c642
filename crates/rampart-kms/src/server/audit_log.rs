//! The audit log over years: verified checkpoints, incremental and full
//! verification from the anchor, export pages, and pruning.
//!
//! A checkpoint is only ever written after the server verified (hash
//! links, sequence numbers and MACs) every entry from the previous
//! checkpoint (or the anchor, or the first entry) to the new one, so by
//! induction a good checkpoint vouches for the whole chain before it, and
//! `verify --from-checkpoint` need only walk what follows the last one. A
//! run that finds the chain broken writes nothing (logged, counted in
//! `rampart_kms_audit_checkpoint_failures_total`), so the break stays in
//! what an incremental verification walks.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::state::State;
use crate::audit::{Mark, MarkKind, Verifier, VerifyReport, GENESIS};
use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::now_ms;

/// Entries read per store query while verifying.
const PAGE: u32 = 10_000;
/// Most entries one checkpoint run verifies; the rest wait for the next.
const MAX_CHECKPOINT_RUN: u64 = 2_000_000;

/// Where a walk starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkFrom {
    /// The anchor, or the first entry ever.
    Anchor,
    /// The last checkpoint (the anchor when there is none).
    Checkpoint,
}

/// A verifier positioned at the start `from` asks for: the anchor or the
/// last checkpoint, each checked against its MAC first. A mark with a
/// wrong MAC yields a verifier that already failed, naming it.
async fn start(state: &State, root: &RootKey, from: WalkFrom) -> Result<Verifier> {
    let anchor = state.store.audit_anchor().await?;
    if from == WalkFrom::Checkpoint {
        if let Some(cp) = state.store.last_audit_checkpoint().await? {
            let mut v = Verifier::starting_at(Some(root), cp.seq, &cp.hash_bytes()?, "checkpoint");
            if !cp.is_authentic(MarkKind::Checkpoint, root) {
                v.fail(
                    cp.seq,
                    format!(
                        "the checkpoint at entry {} (written {}) has a wrong MAC: the \
                         checkpoints were tampered with; run a full verification",
                        cp.seq,
                        crate::model::format_time(cp.time_ms)
                    ),
                );
                return Ok(v);
            }
            if anchor.as_ref().is_none_or(|a| a.seq <= cp.seq) {
                // The checkpointed entry itself must still be there, as it
                // was: otherwise the log was truncated or rewritten.
                match state.store.audit_hash(cp.seq).await? {
                    Some(hash) if hash == cp.hash => {}
                    Some(_) => v.fail(
                        cp.seq,
                        format!("entry {} no longer has the hash its checkpoint records", cp.seq),
                    ),
                    None if anchor.as_ref().is_some_and(|a| a.seq == cp.seq) => {}
                    None => v.fail(
                        cp.seq,
                        format!(
                            "entry {}, which the last checkpoint records, is gone: entries \
                             were removed",
                            cp.seq
                        ),
                    ),
                }
                return Ok(v);
            }
        }
    }
    match anchor {
        Some(anchor) => {
            let mut v =
                Verifier::starting_at(Some(root), anchor.seq, &anchor.hash_bytes()?, "anchor");
            if !anchor.is_authentic(MarkKind::Anchor, root) {
                v.fail(
                    anchor.seq.saturating_add(1),
                    format!(
                        "the anchor left by pruning (entry {}) has a wrong MAC: it was tampered with",
                        anchor.seq
                    ),
                );
            }
            Ok(v)
        }
        None => Ok(Verifier::starting_at(Some(root), 0, &GENESIS, "genesis")),
    }
}

/// Checks the entries after the verifier's position, up to `until`
/// (inclusive) and at most `max` of them, and hands the verifier back.
/// Pages are checked on the blocking pool (a page of 10,000 entries is
/// milliseconds of hashing, which on a runtime thread would hold up the
/// requests queued behind it). After a first full page,
/// several pages are read at once while one is checked: the log's
/// sequence numbers are consecutive, so the page after one that ends at
/// `after + PAGE` starts after that, and is asked for before it arrives.
/// A store reads each on its own
/// connection (PostgreSQL's backends on every core, SQLite's readers),
/// which a walk page after page left idle between pages. Where the
/// numbers are not consecutive, the verifier stops at the first gap, so
/// a page asked for too early never matters.
async fn walk(state: &State, mut verifier: Verifier, until: u64, max: u64) -> Result<Verifier> {
    let fetch = |after: u64| {
        let store = Arc::clone(&state.store);
        (after, tokio::spawn(async move { store.audit_chain_page(after, PAGE).await }))
    };
    let joined =
        |e: tokio::task::JoinError| KmsError::Store(format!("an audit read task failed: {e}"));
    let mut budget = max;
    let start = verifier.expected_seq().saturating_sub(1);
    if start >= until || budget == 0 || !verifier.is_ok() {
        return Ok(verifier);
    }
    let page = u64::from(PAGE);
    // The pages asked for: each one's `after`, and the read under way.
    let mut pending = std::collections::VecDeque::new();
    let mut next_after = start;
    // Enough pages for `max` entries, not more.
    let reach = max.saturating_add(page - 1) / page * page;
    // One page first: a checkpoint run usually finds less than a page
    // after the last checkpoint, and reads ahead of it would find nothing.
    // Once a page comes back full, the walk reads ahead.
    let mut ask = |pending: &mut std::collections::VecDeque<_>, depth: usize| {
        while pending.len() < depth && next_after < until && next_after - start < reach {
            pending.push_back(fetch(next_after));
            next_after = next_after.saturating_add(page);
        }
    };
    ask(&mut pending, 1);
    while let Some((after, read)) = pending.pop_front() {
        let page_rows = read.await.map_err(joined)??;
        let full = page_rows.len() >= PAGE as usize;
        let last_seq = page_rows.last_seq();
        let checked;
        (verifier, budget, checked) = tokio::task::spawn_blocking(move || {
            let checked = verifier.check_page(&page_rows, until, &mut budget);
            (verifier, budget, checked)
        })
        .await
        .map_err(|e| KmsError::Store(format!("an audit check task failed: {e}")))?;
        if !checked || !full || last_seq != Some(after.saturating_add(page)) {
            // The end of the log, of the walk, or a problem the verifier
            // reported; a full page that is not consecutive already made
            // the verifier stop at its gap.
            break;
        }
        ask(&mut pending, PAGES_IN_FLIGHT);
    }
    for (_, read) in pending {
        read.abort();
    }
    Ok(verifier)
}

/// Pages read ahead of the one being checked (see [`walk`]).
const PAGES_IN_FLIGHT: usize = 3;

/// `POST /v1/audit/verify`: the whole chain from the anchor (or the
/// first entry), or, `from_checkpoint`, what follows the last checkpoint.
pub(crate) async fn verify(state: &State, root: &RootKey, from: WalkFrom) -> Result<VerifyReport> {
    let verifier = start(state, root, from).await?;
    let mut report = walk(state, verifier, u64::MAX, u64::MAX).await?.finish();
    if report.ok {
        // The last checkpoint must still describe the log: its entry there
        // with its hash (else the tail was cut off, and perhaps written
        // again), unless pruning took it.
        if let Some(cp) = state.store.last_audit_checkpoint().await? {
            if cp.is_authentic(MarkKind::Checkpoint, root) && cp.seq > report.start_seq {
                let problem = if cp.seq > report.head_seq {
                    Some(format!(
                        "the log ends at entry {} but a checkpoint was taken at entry {}: \
                         entries were removed from its end",
                        report.head_seq, cp.seq
                    ))
                } else if state.store.audit_hash(cp.seq).await?.as_deref() != Some(&cp.hash) {
                    Some(format!(
                        "entry {} no longer has the hash its checkpoint records: the log was \
                         cut and written again",
                        cp.seq
                    ))
                } else {
                    None
                };
                if let Some(problem) = problem {
                    report.ok = false;
                    report.first_bad_seq = Some(cp.seq.min(report.head_seq + 1));
                    report.problem = Some(problem);
                }
            }
        }
    }
    Ok(report)
}

/// One checkpoint run: verifies what follows the last checkpoint and, when
/// it holds and the chain grew, checkpoints its head.
pub(crate) async fn checkpoint_once(state: &State) -> Result<Option<Mark>> {
    let Some(root) = state.root() else { return Ok(None) };
    let verifier = start(state, &root, WalkFrom::Checkpoint).await?;
    let report = walk(state, verifier, u64::MAX, MAX_CHECKPOINT_RUN).await?.finish();
    if !report.ok {
        state.metrics.checkpoint(false);
        tracing::error!(
            "audit chain verification FAILED at entry {}: {}; no checkpoint written",
            report.first_bad_seq.unwrap_or_default(),
            report.problem.as_deref().unwrap_or("")
        );
        return Ok(None);
    }
    if report.head_seq <= report.start_seq {
        return Ok(None);
    }
    let mark = Mark::new(MarkKind::Checkpoint, report.head_seq, &report.head_hash, now_ms(), &root);
    state.store.add_audit_checkpoint(mark.clone()).await?;
    state.metrics.checkpoint(true);
    tracing::debug!("audit checkpoint at entry {}", mark.seq);
    Ok(Some(mark))
}

/// Runs [`checkpoint_once`] every `interval`, and whenever the audit
/// writer signals that enough entries were appended, until the server's
/// state is gone.
pub(crate) async fn checkpointer(state: Weak<State>, interval: Duration) {
    let wake = match state.upgrade() {
        Some(state) => Arc::clone(&state.checkpoint_wake),
        None => return,
    };
    loop {
        let _ = tokio::time::timeout(interval, wake.notified()).await;
        let Some(state) = state.upgrade() else { break };
        if let Err(error) = checkpoint_once(&state).await {
            tracing::warn!("cannot write an audit checkpoint: {error}");
        }
    }
}

/// How long the indexer lets appended entries gather before it looks
/// for a segment to index: the look costs two point queries.
const INDEX_DELAY: Duration = Duration::from_millis(200);

/// Keeps the audit reference table (schema step 9) less than a segment
/// behind the log: woken by the audit writer, it waits [`INDEX_DELAY`]
/// and then indexes each segment completed since
/// ([`Store::index_audit`](crate::store::Store::index_audit)); at start
/// it catches up with the complete segments not indexed yet. What it has
/// not reached, a filtered list scans instead, so the lag costs time on
/// those lists, never results.
pub(crate) async fn indexer(state: Weak<State>, wake: Arc<Notify>) {
    let mut first = true;
    loop {
        if !first {
            // A timeout as well, so the task ends soon after the server.
            if tokio::time::timeout(Duration::from_secs(5), wake.notified()).await.is_err() {
                if state.strong_count() == 0 {
                    break;
                }
                continue;
            }
            tokio::time::sleep(INDEX_DELAY).await;
        }
        first = false;
        let Some(store) = state.upgrade().map(|s| Arc::clone(&s.store)) else { break };
        loop {
            match store.index_audit().await {
                Ok(n) if n > 0 => {}
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!("cannot index the audit log: {error}");
                    break;
                }
            }
        }
    }
}

/// The anchor's position: (sequence number, hash hex), the genesis when
/// nothing was pruned.
pub(crate) async fn anchor_position(state: &State) -> Result<(u64, String)> {
    Ok(match state.store.audit_anchor().await? {
        Some(anchor) => (anchor.seq, anchor.hash),
        None => (0, hex::encode(GENESIS)),
    })
}

/// `POST /v1/audit/prune`: removes the entries up to `until`, which an
/// export recorded since the anchor must cover, after verifying them (an
/// archive of a broken chain would be the only copy). Returns (entries
/// removed, the new anchor).
pub(crate) async fn prune(state: &State, root: &RootKey, until: u64) -> Result<(u64, Mark)> {
    let (anchor_seq, _) = anchor_position(state).await?;
    if until <= anchor_seq {
        return Err(KmsError::Conflict(format!(
            "entries up to {anchor_seq} are already pruned; give a later --until"
        )));
    }
    let Some(until_hash) = state.store.audit_hash(until).await? else {
        return Err(KmsError::NotFound(format!("audit entry {until}")));
    };
    if !state.store.audit_export_covers(anchor_seq, until).await? {
        return Err(KmsError::Conflict(format!(
            "no export covers entries {} to {until}: run `rampart kms audit export --until \
             {until}` first (an archive of them must exist before they are removed)",
            anchor_seq + 1
        )));
    }
    let verifier = start(state, root, WalkFrom::Anchor).await?;
    let report = walk(state, verifier, until, u64::MAX).await?.finish();
    if !report.ok {
        return Err(KmsError::Conflict(format!(
            "the entries to prune do not verify (entry {}: {}); nothing was removed",
            report.first_bad_seq.unwrap_or_default(),
            report.problem.unwrap_or_default()
        )));
    }
    if report.head_seq != until || report.head_hash != until_hash {
        return Err(KmsError::Conflict(format!(
            "the chain up to entry {until} changed while it was verified; nothing was removed"
        )));
    }
    let anchor = Mark::new(MarkKind::Anchor, until, &until_hash, now_ms(), root);
    let removed = state.store.prune_audit(anchor_seq, anchor.clone()).await?;
    Ok((removed, anchor))
}
