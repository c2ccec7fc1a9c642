//! The journal being written: the sections of entries not yet committed,
//! held in memory as the kernel holds them, the sections sealed for the
//! commit in progress, and where the next commit goes on disk (section
//! and commit sequence).
//!
//! Sections are committed in ring order, each under the sequence of its
//! lap, so that a section being overwritten always holds the previous
//! lap's sequence and a torn commit is seen as one (`replay_journal`
//! stops at the first section whose sectors disagree).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use rampart_luks::integrity::journal::{empty_section, put_entry};
use rampart_luks::integrity::{commit_section, JournalLayout};

/// The 8-byte commit id that ends every 512-byte journal sector.
const COMMIT_ID_OFFSET: usize = 504;
const SECTOR: usize = 512;
/// An entry's sector field with this high half is unused.
const UNUSED_HIGH: u32 = u32::MAX;

/// Byte ranges in a section of entry `n`: its sector field, its data's
/// last bytes (where a commit puts them), its tag, its data.
pub(crate) fn entry_ranges(
    l: &JournalLayout,
    n: u32,
) -> (Range<usize>, Range<usize>, Range<usize>, Range<usize>) {
    let (meta, offset) = l.entry_position(n);
    let at = meta as usize * SECTOR + offset as usize;
    let spb = 1usize << l.log2_sectors_per_block;
    let last = at + 8..at + 8 + 8 * spb;
    let tag = last.end..last.end + l.tag_size as usize;
    let data = l.data_sector(n) as usize * SECTOR;
    (at..at + 8, last, tag, data..data + spb * SECTOR)
}

/// The sector field of entry `n` of `section`, `None` when the entry is
/// unused.
fn entry_sector(l: &JournalLayout, section: &[u8], n: u32) -> Option<u64> {
    let (field, ..) = entry_ranges(l, n);
    let bytes: [u8; 8] = section.get(field)?.try_into().ok()?;
    let value = u64::from_le_bytes(bytes);
    ((value >> 32) as u32 != UNUSED_HIGH).then_some(value)
}

/// Gives a copy of committed entry `n`'s data (in `data`, one block) its
/// last bytes back: the commit ids took their place in the section
/// (`restore_last_bytes`).
pub(crate) fn restore_last_bytes(l: &JournalLayout, section: &[u8], n: u32, data: &mut [u8]) {
    let (_, last, ..) = entry_ranges(l, n);
    for (s, src) in last.step_by(8).enumerate() {
        let dst = s * SECTOR + COMMIT_ID_OFFSET;
        data[dst..dst + 8].copy_from_slice(&section[src..src + 8]);
    }
}

/// The in-memory part of the journal.
#[derive(Debug)]
pub(crate) struct JournalWriter {
    pub(crate) layout: JournalLayout,
    /// The section the next commit starts at, and its commit sequence.
    pub(crate) next_section: u32,
    pub(crate) seq: u8,
    /// Sections filled before a commit is forced.
    pub(crate) max_open: u32,
    /// `max_open` sections, allocated at the first write.
    open: Vec<u8>,
    pub(crate) open_sections: u32,
    /// Entries used in the last open section.
    next_entry: u32,
    /// Each block with an entry in the open sections: its latest entry
    /// (section among the open ones, entry).
    pending: BTreeMap<u64, (u32, u32)>,
    /// The sections of the commits in progress, oldest first, until their
    /// entries are copied home: reads still find their blocks here.
    sealed: VecDeque<Arc<SealedSections>>,
    /// Buffers of finished commits, for the next sections opened.
    spares: Vec<Vec<u8>>,
    /// Something was committed since the journal was last emptied.
    pub(crate) wrote: bool,
    template: Vec<u8>,
}

/// Committed sections (their commit ids in place) in ring order from
/// `start`, and the latest entry of each block they hold.
#[derive(Debug)]
pub(crate) struct SealedSections {
    pub(crate) layout: JournalLayout,
    pub(crate) start: u32,
    pub(crate) count: u32,
    bytes: Vec<u8>,
    pending: BTreeMap<u64, (u32, u32)>,
}

impl SealedSections {
    /// The bytes of the sections, ready for the journal area.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.count as usize * self.layout.section_bytes()]
    }

    /// Section `index` (from 0, among these).
    pub(crate) fn section(&self, index: u32) -> &[u8] {
        let sb = self.layout.section_bytes();
        &self.bytes[index as usize * sb..][..sb]
    }

    /// The block entry `n` of section `index` holds, when it is that
    /// block's latest entry here (an earlier one is superseded:
    /// `find_newer_committed_node`).
    pub(crate) fn latest_block(&self, index: u32, n: u32) -> Option<u64> {
        let sector = entry_sector(&self.layout, self.section(index), n)?;
        let block = sector >> self.layout.log2_sectors_per_block;
        (self.pending.get(&block) == Some(&(index, n))).then_some(block)
    }
}

impl JournalWriter {
    pub(crate) fn new(
        layout: JournalLayout,
        next_section: u32,
        seq: u8,
        open_bytes: usize,
    ) -> Self {
        let by_size = u32::try_from(open_bytes / layout.section_bytes()).unwrap_or(u32::MAX);
        // Half the journal at most, as the kernel's watermark: the other half
        // holds the previous commit while it is copied home.
        let max_open = (layout.sections / 2).min(by_size).max(1);
        Self {
            layout,
            next_section,
            seq,
            max_open,
            open: Vec::new(),
            open_sections: 0,
            next_entry: 0,
            pending: BTreeMap::new(),
            sealed: VecDeque::new(),
            spares: Vec::new(),
            wrote: false,
            template: empty_section(0, &layout, 0),
        }
    }

    pub(crate) fn section_bytes(&self) -> usize {
        self.layout.section_bytes()
    }

    /// Whether the next entry needs a section that is not open: the caller
    /// commits first when all `max_open` are taken.
    fn needs_section(&self) -> bool {
        self.open_sections == 0 || self.next_entry == self.layout.section_entries
    }

    pub(crate) fn is_full(&self) -> bool {
        self.needs_section() && self.open_sections == self.max_open
    }

    /// Puts a block's ciphertext and tag into the next entry (a section
    /// must be available: `!is_full()`).
    pub(crate) fn put(&mut self, sector: u64, block: u64, data: &[u8], tag: &[u8]) -> bool {
        if self.is_full() {
            return false;
        }
        let sb = self.section_bytes();
        if self.needs_section() {
            if self.open.is_empty() {
                self.open = vec![0u8; sb * self.max_open as usize];
            }
            let at = self.open_sections as usize * sb;
            self.open[at..at + sb].copy_from_slice(&self.template);
            self.open_sections += 1;
            self.next_entry = 0;
        }
        let index = self.open_sections - 1;
        let at = index as usize * sb;
        let section = &mut self.open[at..at + sb];
        if put_entry(section, &self.layout, self.next_entry, sector, data, tag).is_err() {
            return false;
        }
        self.pending.insert(block, (index, self.next_entry));
        self.next_entry += 1;
        true
    }

    /// The newest journal copies of blocks `first..end` (data and tag of
    /// each), oldest first: the sealed sections', then the open ones'.
    pub(crate) fn newer_copies(
        &self,
        (first, end): (u64, u64),
        block_bytes: usize,
    ) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        let l = &self.layout;
        let mut out = Vec::new();
        let mut copy = |section: &[u8], n: u32, block: u64, committed: bool| {
            let (_, _, tag, data) = entry_ranges(l, n);
            let mut d = section[data].to_vec();
            if committed {
                restore_last_bytes(l, section, n, &mut d);
            }
            debug_assert_eq!(d.len(), block_bytes);
            out.push((block, d, section[tag].to_vec()));
        };
        for sealed in &self.sealed {
            for (&block, &(index, n)) in sealed.pending.range(first..end) {
                copy(sealed.section(index), n, block, true);
            }
        }
        let sb = self.section_bytes();
        for (&block, &(index, n)) in self.pending.range(first..end) {
            copy(&self.open[index as usize * sb..][..sb], n, block, false);
        }
        out
    }

    /// Seals the open sections for a commit: gives them their commit ids
    /// (from `next_section` under `seq`, the sequence moving on with each
    /// lap), moves the next commit's place past them, and opens new ones.
    /// Reads find the sealed sections' blocks until [`Self::release`].
    pub(crate) fn seal(&mut self) -> Result<Option<Arc<SealedSections>>, rampart_luks::Error> {
        let count = self.open_sections;
        if count == 0 {
            return Ok(None);
        }
        let n = self.layout.sections;
        let sb = self.section_bytes();
        let start = self.next_section;
        let mut seq = self.seq;
        for (i, section) in self.open[..count as usize * sb].chunks_exact_mut(sb).enumerate() {
            let index = ((u64::from(start) + i as u64) % u64::from(n)) as u32;
            commit_section(section, &self.layout, index, seq, None)?;
            if index == n - 1 {
                seq = (seq + 1) % 4;
            }
        }
        let sealed = Arc::new(SealedSections {
            layout: self.layout,
            start,
            count,
            bytes: std::mem::replace(&mut self.open, self.spares.pop().unwrap_or_default()),
            pending: std::mem::take(&mut self.pending),
        });
        self.next_section = ((u64::from(start) + u64::from(count)) % u64::from(n)) as u32;
        self.seq = seq;
        self.wrote = true;
        self.open_sections = 0;
        self.next_entry = 0;
        self.sealed.push_back(Arc::clone(&sealed));
        Ok(Some(sealed))
    }

    /// Whether sections sealed before `sealed` and not yet copied home
    /// share one with it.
    pub(crate) fn overlaps_earlier(&self, sealed: &Arc<SealedSections>) -> bool {
        let n = self.layout.sections;
        self.sealed
            .iter()
            .take_while(|s| !Arc::ptr_eq(s, sealed))
            .any(|s| ring_overlap((s.start, s.count), (sealed.start, sealed.count), n))
    }

    /// The sealed sections are copied home: reads no longer need them,
    /// and their buffer serves the next sections opened.
    pub(crate) fn release(&mut self, sealed: Arc<SealedSections>) {
        self.sealed.retain(|s| !Arc::ptr_eq(s, &sealed));
        if let Ok(done) = Arc::try_unwrap(sealed) {
            if self.spares.len() < 2 {
                self.spares.push(done.bytes);
            }
        }
    }
}

/// Whether sections `a.0..a.0 + a.1` and `b.0..b.0 + b.1` of a ring of
/// `n` share one.
pub(crate) fn ring_overlap(a: (u32, u32), b: (u32, u32), n: u32) -> bool {
    let n = u64::from(n.max(1));
    let dist = |from: u32, to: u32| (u64::from(to) + n - u64::from(from) % n) % n;
    dist(a.0, b.0) < u64::from(a.1) || dist(b.0, a.0) < u64::from(b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_overlaps() {
        assert!(ring_overlap((0, 2), (1, 1), 4));
        assert!(!ring_overlap((0, 2), (2, 2), 4));
        assert!(ring_overlap((3, 2), (0, 1), 4));
        assert!(!ring_overlap((3, 2), (1, 2), 4));
        assert!(ring_overlap((0, 1), (0, 1), 1));
    }
}
