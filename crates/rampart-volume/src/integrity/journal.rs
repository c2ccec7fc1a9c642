//! The journal being written: the sections of entries not yet committed,
//! held in memory as the kernel holds them, and where the next commit
//! goes on disk (section and commit sequence).
//!
//! Sections are committed in ring order, each under the sequence of its
//! lap, so that a section being overwritten always holds the previous
//! lap's sequence and a torn commit is seen as one (`replay_journal`
//! stops at the first section whose sectors disagree).

use std::collections::BTreeMap;
use std::ops::Range;

use rampart_luks::integrity::journal::{empty_section, put_entry};
use rampart_luks::integrity::JournalLayout;

/// The 8-byte commit id that ends every 512-byte journal sector.
const COMMIT_ID_OFFSET: usize = 504;
const SECTOR: usize = 512;
/// An entry's sector field with this high half is unused.
const UNUSED_HIGH: u32 = u32::MAX;

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
    pub(crate) open: Vec<u8>,
    pub(crate) open_sections: u32,
    /// Entries used in the last open section.
    pub(crate) next_entry: u32,
    /// Each block with an entry in the open sections: its latest entry
    /// (section among the open ones, entry).
    pub(crate) pending: BTreeMap<u64, (u32, u32)>,
    /// Sections whose entries were copied to their home locations since
    /// the last flush: they are not overwritten before one.
    pub(crate) unflushed: Option<(u32, u32)>,
    /// Something was committed since the journal was last emptied.
    pub(crate) wrote: bool,
    template: Vec<u8>,
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
            unflushed: None,
            wrote: false,
            template: empty_section(0, &layout, 0),
        }
    }

    pub(crate) fn section_bytes(&self) -> usize {
        self.layout.section_bytes()
    }

    /// Whether the next entry needs a section that is not open: the caller
    /// commits first when all `max_open` are taken.
    pub(crate) fn needs_section(&self) -> bool {
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

    /// The open sections' bytes.
    pub(crate) fn open_bytes(&mut self) -> &mut [u8] {
        let len = self.open_sections as usize * self.section_bytes();
        &mut self.open[..len]
    }

    /// Byte ranges in a section of entry `n`: its sector field, its last
    /// bytes, its tag, its data.
    pub(crate) fn entry_ranges(
        &self,
        n: u32,
    ) -> (Range<usize>, Range<usize>, Range<usize>, Range<usize>) {
        let l = &self.layout;
        let (meta, offset) = l.entry_position(n);
        let at = meta as usize * SECTOR + offset as usize;
        let spb = 1usize << l.log2_sectors_per_block;
        let last = at + 8..at + 8 + 8 * spb;
        let tag = last.end..last.end + l.tag_size as usize;
        let data = l.data_sector(n) as usize * SECTOR;
        (at..at + 8, last, tag, data..data + spb * SECTOR)
    }

    /// The sector field of entry `n` of open section `index`, `None` when
    /// the entry is unused.
    pub(crate) fn entry_sector(&self, index: u32, n: u32) -> Option<u64> {
        let at = index as usize * self.section_bytes();
        let (field, ..) = self.entry_ranges(n);
        let bytes: [u8; 8] = self.open.get(at + field.start..at + field.end)?.try_into().ok()?;
        let value = u64::from_le_bytes(bytes);
        ((value >> 32) as u32 != UNUSED_HIGH).then_some(value)
    }

    /// Copies entry `n` of open section `index` (uncommitted: its data
    /// sectors still end with their own bytes) into `data` and `tag`.
    pub(crate) fn copy_entry(&self, index: u32, n: u32, data: &mut [u8], tag: &mut [u8]) {
        let at = index as usize * self.section_bytes();
        let (_, _, tag_range, data_range) = self.entry_ranges(n);
        data.copy_from_slice(&self.open[at + data_range.start..at + data_range.end]);
        tag.copy_from_slice(&self.open[at + tag_range.start..at + tag_range.end]);
    }

    /// Gives committed entry `n` of open section `index` its data's last
    /// bytes back (the commit ids took their place, `restore_last_bytes`).
    pub(crate) fn restore_last_bytes(&mut self, index: u32, n: u32) {
        let at = index as usize * self.section_bytes();
        let (_, last, _, data) = self.entry_ranges(n);
        for (s, src) in last.step_by(8).enumerate() {
            let dst = at + data.start + s * SECTOR + COMMIT_ID_OFFSET;
            self.open.copy_within(at + src..at + src + 8, dst);
        }
    }

    /// The open sections are committed and copied home: the next ones
    /// start empty.
    pub(crate) fn reset_open(&mut self) {
        self.open_sections = 0;
        self.next_entry = 0;
        self.pending.clear();
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
