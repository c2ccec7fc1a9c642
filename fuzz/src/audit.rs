//! The key manager's audit archives (`rampart kms audit verify --file`)
//! and the two ways its chain is checked: entry by entry (archives) and a
//! page at a time (the server's walk of the store).

use rampart_crypto::SecretBytes;
use rampart_kms::audit::{
    seal_entry, verify_export, ChainPage, ExportHeader, ExportedEntry, Verifier, EXPORT_FORMAT,
    MAX_EXPORT_LINE, MAX_SEQ,
};
use rampart_kms::keys::RootKey;
use rampart_kms::model::{AuditDraft, AuditEntry};

fn root_key() -> RootKey {
    // 32 bytes: `RootKey::new` accepts exactly that.
    RootKey::new(&SecretBytes::new(vec![0x5a; 32])).expect("a 32-byte root key")
}

/// An exported segment: verified as given, offline and with the root key
/// of the seeds (`make_protocol_seeds.py`); then with every line that
/// parses as an entry *resealed* (its link, hash and MAC recomputed in
/// order from the header's anchor), so that mutated fields get past the
/// hash checks. A resealed file whose entries number on from its anchor
/// up to its header's last entry must verify, with and without the root
/// key; one that does not must fail. Each file's entries are also checked
/// a page at a time as the server's walk does (`Verifier::check_page`),
/// which must find the same entries good and the same first bad one as
/// the entry-by-entry check.
pub fn kms_audit_archive(data: &[u8]) {
    let root = root_key();
    let _ = verify_export(data, None, None);
    let as_given = verify_export(data, Some(&root), None).expect("reading from memory");
    let Some(parsed) = Parsed::from(data) else {
        assert!(!as_given.ok, "an archive without a header line verified");
        return;
    };
    parsed.compare_walks(&root);
    let resealed = parsed.resealed(&root);
    let bytes = resealed.to_bytes();
    let report = verify_export(&bytes[..], Some(&root), None).expect("reading from memory");
    let offline = verify_export(&bytes[..], None, None).expect("reading from memory");
    assert_eq!(report.ok, offline.ok, "a resealed archive verifies differently without the MACs");
    let expected = resealed.well_formed();
    assert_eq!(
        report.ok, expected,
        "a resealed archive (well formed: {expected}) verified as {report:?}"
    );
    resealed.compare_walks(&root);
}

/// An archive split into its header and the entries that parse.
struct Parsed {
    header: ExportHeader,
    anchor: [u8; 32],
    /// Every line after the header: an entry, or `None` where it did not
    /// parse.
    lines: Vec<Option<ExportedEntry>>,
}

impl Parsed {
    fn from(data: &[u8]) -> Option<Self> {
        let mut lines = data.split_inclusive(|&b| b == b'\n');
        let header_line = lines.next().filter(|l| l.len() <= MAX_EXPORT_LINE)?;
        let header: ExportHeader = serde_json::from_slice(header_line).ok()?;
        let anchor = hex::decode(&header.anchor_hash).ok()?.try_into().ok()?;
        let lines = lines
            .map(|line| {
                (line.len() <= MAX_EXPORT_LINE)
                    .then(|| serde_json::from_slice::<ExportedEntry>(line).ok())
                    .flatten()
            })
            .collect();
        Some(Self { header, anchor, lines })
    }

    fn resealed(&self, root: &RootKey) -> Self {
        let mut prev = self.anchor.to_vec();
        let lines = self
            .lines
            .iter()
            .map(|line| {
                line.clone().map(|mut entry| {
                    let row = seal_entry(&prev, entry.seq, &draft_of(&entry), Some(root));
                    entry.prev_hash = hex::encode(&prev);
                    entry.hash = hex::encode(&row.hash);
                    entry.mac = row.mac.map(hex::encode);
                    prev = row.hash;
                    entry
                })
            })
            .collect();
        Self { header: self.header.clone(), anchor: self.anchor, lines }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(&self.header).expect("a header serializes");
        for line in &self.lines {
            out.push(b'\n');
            match line {
                Some(entry) => {
                    out.extend(serde_json::to_vec(entry).expect("an entry serializes"));
                }
                None => out.extend_from_slice(b"not an entry"),
            }
        }
        out.push(b'\n');
        out
    }

    /// Whether a resealed archive must verify: a version 1 header whose
    /// range starts right after its anchor, every line an entry, and the
    /// entries numbered on from the anchor to exactly the header's last.
    fn well_formed(&self) -> bool {
        let h = &self.header;
        let numbered = self.lines.iter().enumerate().all(|(i, line)| {
            line.as_ref().is_some_and(|e| Some(e.seq) == h.anchor_seq.checked_add(i as u64 + 1))
        });
        let last = h.anchor_seq.checked_add(self.lines.len() as u64);
        h.format == EXPORT_FORMAT
            && h.version == 1
            && Some(h.first_seq) == h.anchor_seq.checked_add(1)
            && numbered
            && last == Some(h.last_seq)
            && self.lines.iter().flatten().all(|e| e.seq <= MAX_SEQ)
    }

    /// The entries up to the first line that is not one, checked one by
    /// one and as a page: the same entries pass, the same one fails.
    fn compare_walks(&self, root: &RootKey) {
        let entries: Vec<AuditEntry> =
            self.lines.iter().map_while(|l| l.clone()).map(|e| e.into_entry().0).collect();
        let start = self.header.anchor_seq;
        let mut one_by_one = Verifier::starting_at(Some(root), start, &self.anchor, "anchor");
        for entry in &entries {
            if !one_by_one.check(entry) {
                break;
            }
        }
        let mut page = ChainPage::with_capacity(entries.len());
        entries.iter().for_each(|e| page.push_entry(e));
        let mut paged = Verifier::starting_at(Some(root), start, &self.anchor, "anchor");
        let mut budget = u64::MAX;
        paged.check_page(&page, u64::MAX, &mut budget);
        let (a, b) = (one_by_one.finish(), paged.finish());
        assert_eq!(
            (a.ok, a.entries, a.unauthenticated, a.first_bad_seq, &a.head_hash),
            (b.ok, b.entries, b.unauthenticated, b.first_bad_seq, &b.head_hash),
            "the walk by pages and the walk by entries disagree: {a:?} against {b:?}"
        );
    }
}

fn draft_of(entry: &ExportedEntry) -> AuditDraft {
    AuditDraft {
        time_ms: entry.time_ms,
        client: entry.client.clone(),
        operation: entry.operation.clone(),
        key: entry.key.clone(),
        version: entry.version,
        outcome: entry.outcome.clone(),
        detail: entry.detail.clone(),
    }
}
