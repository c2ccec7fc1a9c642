//! The audit chain: entry `n`'s hash is
//! `SHA-256(hash(n-1) || canonical bytes of entry n)`, with 32 zero bytes
//! before the first entry. The canonical bytes are a fixed tag followed by
//! every field (sequence number included) as a big-endian u32 length and
//! its bytes, so a changed field, a removed entry (a gap, and a broken
//! link) and a reordering (sequence numbers are bound) all break the chain.
//! Entries written while unsealed also carry an HMAC of their hash under a
//! key derived from the root key, so rewriting the chain from an edited
//! entry onwards needs the root key.

use rampart_crypto::{digest, HashAlg};
use serde::{Deserialize, Serialize};

use crate::keys::RootKey;
use crate::model::{AuditDraft, AuditEntry};

/// The hash before the first entry.
pub const GENESIS: [u8; 32] = [0u8; 32];

/// The canonical bytes of an entry with sequence number `seq`.
#[must_use]
pub fn canonical(seq: u64, draft: &AuditDraft) -> Vec<u8> {
    let mut out = b"rampart-kms-audit-v1".to_vec();
    let seq_text = seq.to_string();
    let time_text = draft.time_ms.to_string();
    let version = draft.version.map(|v| v.to_string()).unwrap_or_default();
    let fields: [&[u8]; 8] = [
        seq_text.as_bytes(),
        time_text.as_bytes(),
        draft.client.as_bytes(),
        draft.operation.as_bytes(),
        draft.key.as_deref().unwrap_or("").as_bytes(),
        version.as_bytes(),
        draft.outcome.as_bytes(),
        draft.detail.as_bytes(),
    ];
    for field in fields {
        out.extend_from_slice(&u32::try_from(field.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(field);
    }
    out
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

/// The outcome of `audit verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub ok: bool,
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

/// Incremental verification over entries in stored order.
#[derive(Debug)]
pub struct Verifier<'a> {
    root: Option<&'a RootKey>,
    prev: Vec<u8>,
    expected_seq: u64,
    report: VerifyReport,
}

impl<'a> Verifier<'a> {
    #[must_use]
    pub fn new(root: Option<&'a RootKey>) -> Self {
        Self {
            root,
            prev: GENESIS.to_vec(),
            expected_seq: 1,
            report: VerifyReport {
                ok: true,
                entries: 0,
                unauthenticated: 0,
                head_seq: 0,
                head_hash: hex::encode(GENESIS),
                first_bad_seq: None,
                problem: None,
            },
        }
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
        if hex::encode(hash) != entry.hash {
            return Some(format!("entry {} does not match its hash: it was edited, or an entry before it was removed", entry.seq));
        }
        match (&entry.mac, self.root) {
            (Some(mac), Some(root)) => {
                if hex::encode(root.audit_mac(&hash)) != *mac {
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

    #[must_use]
    pub fn finish(self) -> VerifyReport {
        self.report
    }
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
        let mut prev = GENESIS.to_vec();
        let mut out = Vec::new();
        for i in 1..=n {
            let d = draft(i);
            let row = seal_entry(&prev, u64::from(i), &d, Some(root));
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
}
