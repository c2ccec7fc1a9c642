//! The audit chain: entry `n`'s hash is
//! `SHA-256(hash(n-1) || canonical bytes of entry n)`, with 32 zero bytes
//! before the first entry. The canonical bytes are a fixed tag followed by
//! every field (sequence number included) as a big-endian u32 length and
//! its bytes, so a changed field, a removed entry (a gap, and a broken
//! link) and a reordering (sequence numbers are bound) all break the chain.
//! Entries written while unsealed also carry an HMAC of their hash under a
//! key derived from the root key, so rewriting the chain from an edited
//! entry onwards needs the root key.
//!
//! Marks: a *checkpoint* records an entry's sequence number and hash after
//! the server verified the chain up to it, so a later verification can
//! start there; the *anchor* records the last entry pruned (archived), so
//! the entries that remain link to it instead of to [`GENESIS`]. Both are
//! MACed under a second key derived from the root key, over bytes that
//! name their kind, so neither can be forged from an entry's MAC or from
//! each other.

use rampart_crypto::{digest, digest_into, HashAlg};
use serde::{Deserialize, Serialize};

use crate::keys::{AuditMacer, RootKey};
use crate::model::{AuditDraft, AuditEntry};

/// The hash before the first entry.
pub const GENESIS: [u8; 32] = [0u8; 32];

/// The largest sequence number an entry can have: both stores keep them
/// as signed 64-bit integers (PostgreSQL `BIGINT`, SQLite `INTEGER`). An
/// entry numbered above it can only come from an edited file.
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// The canonical bytes of an entry with sequence number `seq`.
#[must_use]
pub fn canonical(seq: u64, draft: &AuditDraft) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + draft.detail.len());
    canonical_into(
        &mut out,
        seq,
        draft.time_ms,
        draft.client.as_bytes(),
        draft.operation.as_bytes(),
        draft.key.as_deref().map(str::as_bytes),
        draft.version.map(i64::from),
        draft.outcome.as_bytes(),
        draft.detail.as_bytes(),
    );
    out
}

/// Appends the canonical bytes of an entry to `out` (what [`canonical`]
/// returns), allocating nothing else: the verification walk builds a
/// page of them in one buffer. The text fields are taken as the bytes
/// stored (UTF-8 when written; a stored value that is not fails its hash,
/// as any edit does), so a walk spends nothing on validating them.
#[allow(clippy::too_many_arguments)]
pub fn canonical_into(
    out: &mut Vec<u8>,
    seq: u64,
    time_ms: i64,
    client: &[u8],
    operation: &[u8],
    key: Option<&[u8]>,
    version: Option<i64>,
    outcome: &[u8],
    detail: &[u8],
) {
    fn field(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(bytes);
    }
    /// The decimal text of a number (`-` then the digits of its magnitude),
    /// as `Display` writes it; `None` is the empty field.
    fn number(out: &mut Vec<u8>, n: Option<(bool, u64)>) {
        let mut text = [0u8; 21];
        let mut start = text.len();
        if let Some((negative, mut magnitude)) = n {
            loop {
                start -= 1;
                // A digit: below 10.
                text[start] = b'0' + (magnitude % 10) as u8;
                magnitude /= 10;
                if magnitude == 0 {
                    break;
                }
            }
            if negative {
                start -= 1;
                text[start] = b'-';
            }
        }
        field(out, &text[start..]);
    }
    let signed = |n: i64| (n < 0, n.unsigned_abs());
    out.extend_from_slice(b"rampart-kms-audit-v1");
    number(out, Some((false, seq)));
    number(out, Some(signed(time_ms)));
    field(out, client);
    field(out, operation);
    field(out, key.unwrap_or(b""));
    number(out, version.map(signed));
    field(out, outcome);
    field(out, detail);
}

/// A page of stored entries in the form verification needs: each entry's
/// canonical bytes in one shared buffer, with its stored hash and MAC.
/// Filling and checking one allocates nothing per entry, which is what
/// lets a walk check millions of entries a second.
#[derive(Debug, Default)]
pub struct ChainPage {
    buf: Vec<u8>,
    rows: Vec<ChainRow>,
}

#[derive(Debug)]
struct ChainRow {
    seq: u64,
    canonical: std::ops::Range<usize>,
    /// `None` when the stored hash is not 32 bytes (it cannot match).
    hash: Option<[u8; 32]>,
    /// Outer `None`: no MAC stored; inner `None`: not 32 bytes.
    mac: Option<Option<[u8; 32]>>,
}

impl ChainPage {
    #[must_use]
    pub fn with_capacity(entries: usize) -> Self {
        Self { buf: Vec::with_capacity(entries * 96), rows: Vec::with_capacity(entries) }
    }

    /// Adds a stored entry.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        seq: u64,
        time_ms: i64,
        client: &[u8],
        operation: &[u8],
        key: Option<&[u8]>,
        version: Option<i64>,
        outcome: &[u8],
        detail: &[u8],
        hash: &[u8],
        mac: Option<&[u8]>,
    ) {
        let start = self.buf.len();
        canonical_into(
            &mut self.buf,
            seq,
            time_ms,
            client,
            operation,
            key,
            version,
            outcome,
            detail,
        );
        self.rows.push(ChainRow {
            seq,
            canonical: start..self.buf.len(),
            hash: hash.try_into().ok(),
            mac: mac.map(|m| m.try_into().ok()),
        });
    }

    /// Adds an entry as the API and archives show it (hash and MAC in hex;
    /// malformed hex is kept as no hash, which cannot match).
    pub fn push_entry(&mut self, e: &AuditEntry) {
        let mac = e.mac.as_ref().map(|m| hex::decode(m).unwrap_or_default());
        self.push(
            e.seq,
            e.time_ms,
            e.client.as_bytes(),
            e.operation.as_bytes(),
            e.key.as_deref().map(str::as_bytes),
            e.version.map(i64::from),
            e.outcome.as_bytes(),
            e.detail.as_bytes(),
            &hex::decode(&e.hash).unwrap_or_default(),
            mac.as_deref(),
        );
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The sequence number of the last entry.
    #[must_use]
    pub fn last_seq(&self) -> Option<u64> {
        self.rows.last().map(|r| r.seq)
    }
}

/// `SHA-256(prev || canonical)`.
#[must_use]
pub fn chain_hash(prev: &[u8], seq: u64, draft: &AuditDraft) -> [u8; 32] {
    let mut input = prev.to_vec();
    input.extend_from_slice(&canonical(seq, draft));
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(HashAlg::Sha256, &input).expose());
    out
}

/// The stored row of an entry that follows `prev` as number `seq`.
#[must_use]
pub fn seal_entry(prev: &[u8], seq: u64, draft: &AuditDraft, root: Option<&RootKey>) -> ChainedRow {
    let hash = chain_hash(prev, seq, draft);
    ChainedRow {
        seq,
        prev_hash: prev.to_vec(),
        hash: hash.to_vec(),
        mac: root.map(|r| r.audit_mac(&hash)),
    }
}

/// What the store writes for one entry, besides the draft's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainedRow {
    pub seq: u64,
    pub prev_hash: Vec<u8>,
    pub hash: Vec<u8>,
    pub mac: Option<Vec<u8>>,
}

/// What a [`Mark`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// The chain was verified up to this entry.
    Checkpoint,
    /// Entries up to this one were pruned; the rest link to its hash.
    Anchor,
}

impl MarkKind {
    fn tag(self) -> &'static [u8] {
        match self {
            Self::Checkpoint => b"rampart-kms-audit-checkpoint-v1",
            Self::Anchor => b"rampart-kms-audit-anchor-v1",
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Checkpoint => "checkpoint",
            Self::Anchor => "anchor",
        }
    }
}

/// A checkpoint or the anchor: an entry's sequence number and hash (hex),
/// when it was written, and its MAC (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub seq: u64,
    pub hash: String,
    pub time_ms: i64,
    pub mac: String,
}

impl Mark {
    fn canonical(kind: MarkKind, seq: u64, hash: &str, time_ms: i64) -> Vec<u8> {
        let mut out = kind.tag().to_vec();
        for field in [seq.to_string(), hash.to_owned(), time_ms.to_string()] {
            out.extend_from_slice(&u32::try_from(field.len()).unwrap_or(u32::MAX).to_be_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }

    /// A new mark of `kind` for entry `seq` with hash `hash` (hex).
    #[must_use]
    pub fn new(kind: MarkKind, seq: u64, hash: &str, time_ms: i64, root: &RootKey) -> Self {
        let mac = hex::encode(root.audit_mark_mac(&Self::canonical(kind, seq, hash, time_ms)));
        Self { seq, hash: hash.to_owned(), time_ms, mac }
    }

    /// Whether the MAC was made by `root` for a mark of `kind`.
    #[must_use]
    pub fn is_authentic(&self, kind: MarkKind, root: &RootKey) -> bool {
        // Compared as text, as entry MACs are: the values are stored, not
        // guessed online, so the comparison's timing tells nothing.
        let expected =
            root.audit_mark_mac(&Self::canonical(kind, self.seq, &self.hash, self.time_ms));
        hex::encode(expected) == self.mac
    }

    /// The hash as bytes; a stored mark whose hash is not 32 hex bytes is
    /// corrupt.
    pub fn hash_bytes(&self) -> crate::error::Result<Vec<u8>> {
        match hex::decode(&self.hash) {
            Ok(bytes) if bytes.len() == 32 => Ok(bytes),
            _ => Err(crate::error::KmsError::Corrupt(format!(
                "the audit mark at entry {} holds no 32-byte hash",
                self.seq
            ))),
        }
    }
}

/// The outcome of `audit verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub ok: bool,
    /// The entry the walk started after (0: the first entry ever; else
    /// the anchor left by pruning, or the checkpoint an incremental
    /// verification started from), and that entry's hash.
    #[serde(default)]
    pub start_seq: u64,
    #[serde(default)]
    pub start_hash: String,
    /// What the walk started from: `genesis`, `anchor` or `checkpoint`.
    #[serde(default)]
    pub start: String,
    /// Whether MACs were checked (not offline without the root key).
    #[serde(default)]
    pub macs_checked: bool,
    /// Entries checked.
    pub entries: u64,
    /// Entries without a MAC (written while sealed).
    pub unauthenticated: u64,
    /// The last entry's sequence number and hash: note them to detect a
    /// later truncation of the log's tail.
    pub head_seq: u64,
    pub head_hash: String,
    /// The first entry found wrong, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_bad_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Incremental verification over entries in stored order. It owns all
/// it needs (the entry MAC's key as precomputed HMAC states, not the root
/// key), so a server can hand it to a blocking thread with a page.
#[derive(Debug)]
pub struct Verifier {
    /// `None` offline, without the root key: MACs are not checked.
    macer: Option<AuditMacer>,
    prev: Vec<u8>,
    expected_seq: u64,
    report: VerifyReport,
}

impl Verifier {
    #[must_use]
    pub fn new(root: Option<&RootKey>) -> Self {
        Self::starting_at(root, 0, &GENESIS, "genesis")
    }

    /// A walk of the entries after entry `seq`, whose hash is `hash`
    /// (the anchor, a checkpoint, or an archive's first link).
    #[must_use]
    pub fn starting_at(root: Option<&RootKey>, seq: u64, hash: &[u8], start: &str) -> Self {
        Self {
            macer: root.map(RootKey::audit_macer),
            prev: hash.to_vec(),
            expected_seq: seq.saturating_add(1),
            report: VerifyReport {
                ok: true,
                start_seq: seq,
                start_hash: hex::encode(hash),
                start: start.to_owned(),
                macs_checked: root.is_some(),
                entries: 0,
                unauthenticated: 0,
                head_seq: seq,
                head_hash: hex::encode(hash),
                first_bad_seq: None,
                problem: None,
            },
        }
    }

    /// Records a problem found outside the entries (a bad mark, a file
    /// that ends early); `seq` is the entry it concerns.
    pub fn fail(&mut self, seq: u64, problem: String) {
        if self.report.ok {
            self.report.ok = false;
            self.report.first_bad_seq = Some(seq);
            self.report.problem = Some(problem);
        }
    }

    /// The sequence number the next entry must have.
    #[must_use]
    pub fn expected_seq(&self) -> u64 {
        self.expected_seq
    }

    /// Whether no problem was found so far.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.report.ok
    }

    /// Checks the next entry; returns false once a problem was found.
    pub fn check(&mut self, entry: &AuditEntry) -> bool {
        if !self.report.ok {
            return false;
        }
        let problem = self.problem(entry);
        if let Some(problem) = problem {
            self.report.ok = false;
            self.report.first_bad_seq = Some(entry.seq);
            self.report.problem = Some(problem);
            return false;
        }
        self.report.entries += 1;
        self.report.head_seq = entry.seq;
        self.report.head_hash.clone_from(&entry.hash);
        self.report.head_hash.make_ascii_lowercase();
        // At most MAX_SEQ (checked above): one more fits.
        self.expected_seq = entry.seq + 1;
        true
    }

    fn problem(&mut self, entry: &AuditEntry) -> Option<String> {
        if entry.seq != self.expected_seq {
            return Some(format!(
                "expected entry {} but found {}: entries were removed or reordered",
                self.expected_seq, entry.seq
            ));
        }
        if entry.seq > MAX_SEQ {
            return Some(beyond_max_seq(entry.seq));
        }
        let draft = AuditDraft {
            time_ms: entry.time_ms,
            client: entry.client.clone(),
            operation: entry.operation.clone(),
            key: entry.key.clone(),
            version: entry.version,
            outcome: entry.outcome.clone(),
            detail: entry.detail.clone(),
        };
        let hash = chain_hash(&self.prev, entry.seq, &draft);
        // Hex is compared as a value: an archive's tools may upper-case it.
        if !entry.hash.eq_ignore_ascii_case(&hex::encode(hash)) {
            return Some(format!("entry {} does not match its hash: it was edited, or an entry before it was removed", entry.seq));
        }
        match (&entry.mac, &self.macer) {
            (Some(mac), Some(macer)) => {
                if !mac.eq_ignore_ascii_case(&hex::encode(macer.mac(&hash))) {
                    return Some(format!(
                        "entry {} has a wrong MAC: the chain was rewritten without the root key",
                        entry.seq
                    ));
                }
            }
            (None, _) => self.report.unauthenticated += 1,
            (Some(_), None) => {}
        }
        self.prev = hash.to_vec();
        None
    }

    /// Checks the entries of `page` numbered up to `until`, at most
    /// `*budget` of them (decremented); returns false once a problem was
    /// found or the end (`until`, the budget) reached. Equivalent to
    /// [`Self::check`] on each entry, without its allocations.
    ///
    /// Each entry's hash is recomputed from the hash stored in the entry
    /// before it, not from the one computed for it: when every entry
    /// before matched, the two are equal, so the first entry found wrong
    /// and the verdict are those of a walk in order; but the entries no
    /// longer depend on each other, and a large page is checked on
    /// several threads, each taking a contiguous run.
    pub fn check_page(&mut self, page: &ChainPage, until: u64, budget: &mut u64) -> bool {
        if !self.report.ok {
            return false;
        }
        let allowed = usize::try_from(*budget).unwrap_or(usize::MAX);
        let n = page.rows.iter().take(allowed).take_while(|r| r.seq <= until).count();
        let stopped = n < page.rows.len();
        let rows = &page.rows[..n];
        // Sequence numbers first: the run to hash ends at the first gap.
        let expected = |i: usize| self.expected_seq.checked_add(i as u64);
        let gap = rows
            .iter()
            .enumerate()
            .position(|(i, row)| Some(row.seq) != expected(i) || row.seq > MAX_SEQ);
        let run = &rows[..gap.unwrap_or(n)];
        let (good, unauthenticated, problem) =
            check_rows(page, run, &self.prev, self.macer.as_ref());
        let problem = problem.or_else(|| {
            gap.map(|i| match expected(i) {
                Some(seq) if seq == rows[i].seq => beyond_max_seq(seq),
                _ => format!(
                    "expected entry {} but found {}: entries were removed or reordered",
                    self.expected_seq.saturating_add(i as u64),
                    rows[i].seq
                ),
            })
        });
        self.report.unauthenticated += unauthenticated;
        self.report.entries += good as u64;
        *budget -= good as u64;
        if let Some(last) = good.checked_sub(1).map(|i| &run[i]) {
            // Checked: the stored hash is the computed one.
            let hash = last.hash.unwrap_or_default();
            self.prev.clear();
            self.prev.extend_from_slice(&hash);
            // At most MAX_SEQ (a gap otherwise): one more fits.
            self.expected_seq = last.seq + 1;
            self.report.head_seq = last.seq;
            self.report.head_hash = hex::encode(hash);
        }
        if let Some(problem) = problem {
            self.report.ok = false;
            self.report.first_bad_seq = Some(self.expected_seq);
            if let Some(row) = rows.get(good) {
                self.report.first_bad_seq = Some(row.seq);
            }
            self.report.problem = Some(problem);
            return false;
        }
        !stopped
    }

    #[must_use]
    pub fn finish(self) -> VerifyReport {
        self.report
    }
}

fn beyond_max_seq(seq: u64) -> String {
    format!("entry {seq} is numbered beyond the largest sequence number a store holds ({MAX_SEQ})")
}

/// Rows a thread of [`Verifier::check_page`] takes at least: below
/// this, starting a thread costs more than it saves.
const PARALLEL_RUN: usize = 1024;

/// Checks `rows` (consecutive, of `page`) against their hashes and MACs,
/// the first one linking to `prev`: how many passed before the first
/// problem, how many of those carry no MAC, and the problem.
fn check_rows(
    page: &ChainPage,
    rows: &[ChainRow],
    prev: &[u8],
    macer: Option<&AuditMacer>,
) -> (usize, u64, Option<String>) {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = threads.min(rows.len() / PARALLEL_RUN).clamp(1, 8);
    if threads == 1 {
        return check_run(page, rows, prev, macer);
    }
    let chunk = rows.len().div_ceil(threads);
    // Each run links to the stored hash of the row before it (a row whose
    // stored hash is malformed fails itself, before the next matters).
    let results: Vec<(usize, u64, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = rows
            .chunks(chunk)
            .enumerate()
            .skip(1)
            .map(|(i, run)| {
                let link = rows[i * chunk - 1].hash.unwrap_or_default();
                scope.spawn(move || check_run(page, run, &link[..], macer))
            })
            .collect();
        let mut results = vec![check_run(page, &rows[..chunk], prev, macer)];
        for handle in handles {
            // A run only hashes and compares: it does not panic.
            results.push(handle.join().unwrap_or((
                0,
                0,
                Some("a verification thread failed".into()),
            )));
        }
        results
    });
    let (mut good, mut unauthenticated) = (0, 0);
    for (passed, unauth, problem) in results {
        good += passed;
        unauthenticated += unauth;
        if problem.is_some() {
            return (good, unauthenticated, problem);
        }
    }
    (good, unauthenticated, None)
}

/// [`check_rows`] on one thread.
fn check_run(
    page: &ChainPage,
    rows: &[ChainRow],
    first_prev: &[u8],
    macer: Option<&AuditMacer>,
) -> (usize, u64, Option<String>) {
    let mut scratch = Vec::with_capacity(256);
    let mut prev = [0u8; 32];
    let mut unauthenticated = 0;
    for (i, row) in rows.iter().enumerate() {
        scratch.clear();
        scratch.extend_from_slice(if i == 0 { first_prev } else { &prev });
        scratch.extend_from_slice(&page.buf[row.canonical.clone()]);
        let mut hash = [0u8; 32];
        // A 32-byte buffer holds a SHA-256 digest: this cannot fail.
        let _ = digest_into(HashAlg::Sha256, &scratch, &mut hash);
        if row.hash != Some(hash) {
            return (
                i,
                unauthenticated,
                Some(format!(
                    "entry {} does not match its hash: it was edited, or an entry before it was removed",
                    row.seq
                )),
            );
        }
        match (&row.mac, macer) {
            (Some(mac), Some(macer)) => {
                if *mac != Some(macer.mac(&hash)) {
                    return (
                        i,
                        unauthenticated,
                        Some(format!(
                            "entry {} has a wrong MAC: the chain was rewritten without the root key",
                            row.seq
                        )),
                    );
                }
            }
            (None, _) => unauthenticated += 1,
            (Some(_), None) => {}
        }
        prev = hash;
    }
    (rows.len(), unauthenticated, None)
}

/// The `format` of an exported segment's header line.
pub const EXPORT_FORMAT: &str = "rampart-kms-audit-export";
/// Longest line an export reader accepts (an entry's detail is bounded by
/// the server's request limits, far below this).
pub const MAX_EXPORT_LINE: usize = 1 << 20;

/// The first line of an exported segment: the anchor (the entry before
/// the first exported one, and its hash) and the range that follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportHeader {
    pub format: String,
    pub version: u32,
    pub anchor_seq: u64,
    pub anchor_hash: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub exported_ms: i64,
}

/// One exported entry: every field the hash covers, the link to the
/// entry before, the hash and the MAC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedEntry {
    pub seq: u64,
    pub prev_hash: String,
    pub time_ms: i64,
    pub client: String,
    pub operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    pub outcome: String,
    pub detail: String,
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl ExportedEntry {
    /// The entry a store just wrote: `draft` sealed into `row`.
    #[must_use]
    pub fn sealed(draft: &AuditDraft, row: &ChainedRow) -> Self {
        Self {
            seq: row.seq,
            prev_hash: hex::encode(&row.prev_hash),
            time_ms: draft.time_ms,
            client: draft.client.clone(),
            operation: draft.operation.clone(),
            key: draft.key.clone(),
            version: draft.version,
            outcome: draft.outcome.clone(),
            detail: draft.detail.clone(),
            hash: hex::encode(&row.hash),
            mac: row.mac.as_ref().map(hex::encode),
        }
    }

    #[must_use]
    pub fn new(entry: AuditEntry, prev_hash: String) -> Self {
        Self {
            seq: entry.seq,
            prev_hash,
            time_ms: entry.time_ms,
            client: entry.client,
            operation: entry.operation,
            key: entry.key,
            version: entry.version,
            outcome: entry.outcome,
            detail: entry.detail,
            hash: entry.hash,
            mac: entry.mac,
        }
    }

    #[must_use]
    pub fn into_entry(self) -> (AuditEntry, String) {
        (
            AuditEntry {
                seq: self.seq,
                time_ms: self.time_ms,
                client: self.client,
                operation: self.operation,
                key: self.key,
                version: self.version,
                outcome: self.outcome,
                detail: self.detail,
                hash: self.hash,
                mac: self.mac,
            },
            self.prev_hash,
        )
    }
}

/// Checks an exported segment (header line, then one entry per line):
/// the header is well formed, every entry links to the one before (the
/// first to the anchor), sequence numbers follow each other, every hash
/// matches its entry, and the file holds exactly the range its header
/// names. With `root`, every MAC is checked too; without it (offline,
/// without the root key) the MACs cannot be, and the report says so
/// (`macs_checked: false`). With `expect_anchor` (a hash noted earlier:
/// the head of the archive before, or the anchor the store shows), the
/// header's anchor must be it, so a whole file rewritten from its first
/// entry is caught too. Read errors are errors; everything wrong with the
/// content is a failed report naming the entry.
pub fn verify_export(
    mut input: impl std::io::BufRead,
    root: Option<&RootKey>,
    expect_anchor: Option<&str>,
) -> std::io::Result<VerifyReport> {
    use std::io::{BufRead as _, Read as _};
    let mut line = Vec::new();
    let mut read_line = |line: &mut Vec<u8>| -> std::io::Result<bool> {
        line.clear();
        let n = input.by_ref().take(MAX_EXPORT_LINE as u64 + 1).read_until(b'\n', line)?;
        Ok(n > 0)
    };
    let bad_header = |problem: String| {
        let mut v = Verifier::new(root);
        v.fail(0, problem);
        let mut report = v.finish();
        report.macs_checked = root.is_some();
        report
    };
    if !read_line(&mut line)? {
        return Ok(bad_header("the file is empty: no export header".into()));
    }
    let header: ExportHeader = match serde_json::from_slice(&line) {
        Ok(h) => h,
        Err(e) => return Ok(bad_header(format!("line 1 is not an export header: {e}"))),
    };
    if header.format != EXPORT_FORMAT || header.version != 1 {
        return Ok(bad_header(format!(
            "line 1 is not a version 1 {EXPORT_FORMAT} header (format '{}', version {})",
            header.format, header.version
        )));
    }
    let anchor = match hex::decode(&header.anchor_hash) {
        Ok(bytes) if bytes.len() == 32 => bytes,
        _ => return Ok(bad_header("the header's anchor_hash is not a 32-byte hex hash".into())),
    };
    let mut verifier = Verifier::starting_at(root, header.anchor_seq, &anchor, "anchor");
    if let Some(expected) = expect_anchor {
        if !expected.eq_ignore_ascii_case(&header.anchor_hash) {
            verifier.fail(
                header.first_seq,
                format!(
                    "the file's anchor (entry {}, {}) is not the expected {expected}",
                    header.anchor_seq, header.anchor_hash
                ),
            );
        }
    }
    if header.first_seq != header.anchor_seq.saturating_add(1)
        || header.last_seq < header.anchor_seq
    {
        verifier.fail(
            header.first_seq,
            format!(
                "the header's range (anchor {}, entries {} to {}) is inconsistent",
                header.anchor_seq, header.first_seq, header.last_seq
            ),
        );
    }
    let mut number = 1u64;
    while verifier.is_ok() && read_line(&mut line)? {
        number += 1;
        let at = verifier.expected_seq();
        if line.len() > MAX_EXPORT_LINE {
            verifier.fail(
                at,
                format!("line {number} (entry {at}) is longer than {MAX_EXPORT_LINE} bytes"),
            );
            break;
        }
        let exported: ExportedEntry = match serde_json::from_slice(&line) {
            Ok(e) => e,
            Err(e) => {
                verifier
                    .fail(at, format!("line {number} (entry {at}) is not an exported entry: {e}"));
                break;
            }
        };
        let (entry, prev_hash) = exported.into_entry();
        if entry.seq != at {
            verifier.fail(
                at,
                format!(
                    "entry {at} is missing: line {number} holds entry {} instead (entries were \
                     removed or reordered)",
                    entry.seq
                ),
            );
            break;
        }
        if !prev_hash.eq_ignore_ascii_case(&hex::encode(&verifier.prev)) {
            verifier.fail(
                at,
                format!("entry {at} does not link to the entry before it (its prev_hash differs)"),
            );
            break;
        }
        if entry.seq > header.last_seq {
            verifier.fail(
                entry.seq,
                format!(
                    "entry {} lies beyond the header's last entry {}",
                    entry.seq, header.last_seq
                ),
            );
            break;
        }
        verifier.check(&entry);
    }
    if verifier.is_ok() && verifier.expected_seq() != header.last_seq.saturating_add(1) {
        let at = verifier.expected_seq();
        verifier.fail(
            at,
            format!(
                "the file ends before entry {at}: its header says it holds entries up to {}",
                header.last_seq
            ),
        );
    }
    let mut report = verifier.finish();
    report.macs_checked = root.is_some();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(n: u32) -> AuditDraft {
        AuditDraft {
            time_ms: 1000 + i64::from(n),
            client: "admin".into(),
            operation: "key.unwrap".into(),
            key: Some("k".into()),
            version: Some(n),
            outcome: "ok".into(),
            detail: "200".into(),
        }
    }

    fn chain(root: &RootKey, n: u32) -> Vec<AuditEntry> {
        chain_after(root, 0, &GENESIS, n)
    }

    /// `n` entries after entry `anchor`, whose hash is `prev`.
    fn chain_after(root: &RootKey, anchor: u64, prev: &[u8], n: u32) -> Vec<AuditEntry> {
        let mut prev = prev.to_vec();
        let mut out = Vec::new();
        for i in 1..=n {
            let d = draft(i);
            let row = seal_entry(&prev, anchor + u64::from(i), &d, Some(root));
            prev.clone_from(&row.hash);
            out.push(AuditEntry {
                seq: row.seq,
                time_ms: d.time_ms,
                client: d.client,
                operation: d.operation,
                key: d.key,
                version: d.version,
                outcome: d.outcome,
                detail: d.detail,
                hash: hex::encode(&row.hash),
                mac: row.mac.map(hex::encode),
            });
        }
        out
    }

    fn verify(root: &RootKey, entries: &[AuditEntry]) -> VerifyReport {
        let mut v = Verifier::new(Some(root));
        for e in entries {
            v.check(e);
        }
        v.finish()
    }

    #[test]
    fn intact_chain_verifies_and_tampering_is_found() {
        let (root, _) = RootKey::generate().unwrap();
        let entries = chain(&root, 5);
        let report = verify(&root, &entries);
        assert!(report.ok && report.entries == 5 && report.head_seq == 5, "{report:?}");

        let mut edited = entries.clone();
        edited[2].outcome = "denied".into();
        assert_eq!(verify(&root, &edited).first_bad_seq, Some(3));

        let mut removed = entries.clone();
        removed.remove(1);
        assert_eq!(verify(&root, &removed).first_bad_seq, Some(3));

        let mut reordered = entries.clone();
        reordered.swap(1, 2);
        assert!(!verify(&root, &reordered).ok);

        // Rewriting the hashes without the root key leaves wrong MACs.
        let (other, _) = RootKey::generate().unwrap();
        let forged = chain(&other, 5);
        assert_eq!(verify(&root, &forged).first_bad_seq, Some(1));
    }

    fn verify_pages(root: &RootKey, entries: &[AuditEntry]) -> VerifyReport {
        verify_pages_of(root, entries, 2, u64::MAX)
    }

    fn verify_pages_of(
        root: &RootKey,
        entries: &[AuditEntry],
        size: usize,
        mut budget: u64,
    ) -> VerifyReport {
        let mut v = Verifier::new(Some(root));
        for chunk in entries.chunks(size) {
            if !v.check_page(&page_of(chunk), u64::MAX, &mut budget) {
                break;
            }
        }
        v.finish()
    }

    fn page_of(entries: &[AuditEntry]) -> ChainPage {
        let mut page = ChainPage::with_capacity(entries.len());
        entries.iter().for_each(|e| page.push_entry(e));
        page
    }

    /// Pages large enough to be checked on several threads reach the
    /// verdicts of the entry walk, whichever run a problem falls in (the
    /// first, a later one, at a run's first or last row), with a budget
    /// that ends inside a page too.
    #[test]
    fn the_parallel_page_walk_agrees_with_the_entry_walk() {
        let (root, _) = RootKey::generate().unwrap();
        let entries = chain(&root, 5000);
        assert_eq!(verify_pages_of(&root, &entries, 5000, u64::MAX), verify(&root, &entries));
        let report = verify_pages_of(&root, &entries, 4096, 4500);
        assert!(report.ok);
        assert_eq!((report.entries, report.head_seq), (4500, 4500));
        assert_eq!(report.head_hash, entries[4499].hash);
        for at in [0, 1, 1249, 1250, 1251, 2500, 3333, 4999] {
            let mut edited = entries.clone();
            edited[at].detail = "201".into();
            let mut removed = entries.clone();
            removed.remove(at);
            let mut no_mac = entries.clone();
            no_mac[at].mac = None;
            let mut bad_mac = entries.clone();
            bad_mac[at].mac = Some(hex::encode([0u8; 32]));
            let mut reordered = entries.clone();
            reordered.swap(at, (at + 1) % 5000);
            for case in [edited, removed, no_mac, bad_mac, reordered] {
                for size in [5000, 4096, 1500] {
                    assert_eq!(
                        verify_pages_of(&root, &case, size, u64::MAX),
                        verify(&root, &case),
                        "problem at {at}, pages of {size}"
                    );
                }
            }
        }
    }

    /// The page walk (canonical bytes built in place, HMAC from
    /// precomputed pads) reaches the same verdicts as the entry walk.
    #[test]
    fn the_page_walk_agrees_with_the_entry_walk() {
        let (root, _) = RootKey::generate().unwrap();
        let hash = [7u8; 32];
        assert_eq!(root.audit_macer().mac(&hash).to_vec(), root.audit_mac(&hash));
        let entries = chain(&root, 5);
        assert_eq!(verify_pages(&root, &entries), verify(&root, &entries));

        let mut edited = entries.clone();
        edited[2].detail = "201".into();
        let mut removed = entries.clone();
        removed.remove(1);
        let mut reordered = entries.clone();
        reordered.swap(3, 4);
        let mut no_mac = entries.clone();
        no_mac[4].mac = None;
        let mut short_hash = entries.clone();
        short_hash[1].hash = "00".into();
        let (other, _) = RootKey::generate().unwrap();
        let forged = chain(&other, 5);
        for case in [edited, removed, reordered, no_mac, short_hash, forged] {
            assert_eq!(verify_pages(&root, &case), verify(&root, &case));
        }
        // The key version of an entry may be absent.
        let mut d = draft(1);
        d.version = None;
        d.key = None;
        let mut buf = Vec::new();
        canonical_into(
            &mut buf,
            9,
            d.time_ms,
            d.client.as_bytes(),
            d.operation.as_bytes(),
            None,
            None,
            d.outcome.as_bytes(),
            d.detail.as_bytes(),
        );
        assert_eq!(buf, canonical(9, &d));
    }

    /// An entry numbered past what a store can hold (only an edited
    /// archive has one) fails both walks, naming it, instead of
    /// overflowing the next expected number; up to it, chains verify.
    #[test]
    fn entries_numbered_past_a_stores_range_fail_both_walks() {
        let (root, _) = RootKey::generate().unwrap();
        let anchor = [9u8; 32];
        let walks = |start: u64, entries: &[AuditEntry]| {
            let mut one = Verifier::starting_at(Some(&root), start, &anchor, "anchor");
            for e in entries {
                one.check(e);
            }
            let mut paged = Verifier::starting_at(Some(&root), start, &anchor, "anchor");
            let mut budget = u64::MAX;
            paged.check_page(&page_of(entries), u64::MAX, &mut budget);
            (one.finish(), paged.finish())
        };
        let up_to_max = chain_after(&root, MAX_SEQ - 3, &anchor, 3);
        let (one, paged) = walks(MAX_SEQ - 3, &up_to_max);
        assert!(one.ok && paged.ok, "{one:?} {paged:?}");
        assert_eq!((one.head_seq, paged.head_seq), (MAX_SEQ, MAX_SEQ));

        let past = chain_after(&root, MAX_SEQ - 1, &anchor, 3);
        let (one, paged) = walks(MAX_SEQ - 1, &past);
        for report in [&one, &paged] {
            assert!(!report.ok);
            assert_eq!((report.entries, report.first_bad_seq), (1, Some(MAX_SEQ + 1)));
            assert!(
                report.problem.as_deref().unwrap().contains("beyond the largest"),
                "{report:?}"
            );
        }
        let (one, paged) = walks(u64::MAX, &chain_after(&root, u64::MAX - 1, &anchor, 1));
        assert!(!one.ok && !paged.ok);
    }

    /// Hashes and MACs are hex values: upper-case hex verifies too.
    #[test]
    fn upper_case_hex_verifies() {
        let (root, _) = RootKey::generate().unwrap();
        let mut entries = chain(&root, 3);
        for e in &mut entries {
            e.hash = e.hash.to_ascii_uppercase();
            e.mac = e.mac.as_ref().map(|m| m.to_ascii_uppercase());
        }
        let report = verify(&root, &entries);
        assert!(report.ok, "{report:?}");
        assert_eq!(report, verify_pages(&root, &entries));
    }

    /// The numbers of the canonical form are their `Display` text, as
    /// written by every earlier release: chains already stored verify.
    #[test]
    fn canonical_numbers_are_their_decimal_text() {
        let numbers = [0, 1, -1, 9, 10, -10, 1_700_000_000_000, i64::MAX, i64::MIN];
        for n in numbers {
            let mut buf = Vec::new();
            canonical_into(&mut buf, 7, n, b"c", b"o", Some(&b"k"[..]), Some(n), b"ok", b"");
            let mut expected = b"rampart-kms-audit-v1".to_vec();
            for field in ["7", &n.to_string(), "c", "o", "k", &n.to_string(), "ok", ""] {
                expected.extend_from_slice(&(field.len() as u32).to_be_bytes());
                expected.extend_from_slice(field.as_bytes());
            }
            assert_eq!(buf, expected, "{n}");
        }
        let mut buf = Vec::new();
        canonical_into(&mut buf, u64::MAX, 0, b"", b"", None, None, b"", b"");
        assert_eq!(&buf[20..24], &20u32.to_be_bytes());
        assert_eq!(&buf[24..44], u64::MAX.to_string().as_bytes());
    }
}
