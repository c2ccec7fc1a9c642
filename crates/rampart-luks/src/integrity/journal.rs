//! dm-integrity journal sections, unencrypted (as LUKS2 writes them:
//! cryptsetup's `journal_encryption` is `"none"`), and what a replay of
//! them applies, as Linux 6.1's `replay_journal` and `do_journal_write`
//! decide.
//!
//! A section is 8 metadata sectors of entries, then one block of data per
//! entry. Every 512-byte sector of a section ends with an 8-byte commit
//! id: `COMMIT_IDS[seq] ^ (section << 32 ^ sector)`, `seq` the commit
//! sequence (0 to 3) the section was written under; a sector of data
//! therefore loses its last 8 bytes to the commit id, and its entry keeps
//! them (`last_bytes`). Entry `n` sits in metadata sector `n % 8`, at
//! `n / 8` entry sizes from its start: the logical sector (little-endian
//! 64 bits; high half `0xffffffff` unused, `0xfffffffe` being written), the
//! last bytes of each sector of the block, the tag. With a journal MAC,
//! bytes 496..504 of each metadata sector hold 8 bytes of the section's
//! MAC.

use super::geometry::{Geometry, JournalLayout, JOURNAL_BLOCK_SECTORS, JOURNAL_MAC_PER_SECTOR};
use super::superblock::{Flags, Superblock};
use crate::reader::Reader;
use crate::{Error, Result};

/// `N_COMMIT_IDS`.
pub const N_COMMIT_IDS: u8 = 4;
/// The kernel's commit ids (`create_journal`), one per sequence number.
pub const COMMIT_IDS: [u64; N_COMMIT_IDS as usize] =
    [0x1111_1111_1111_1111, 0x2222_2222_2222_2222, 0x3333_3333_3333_3333, 0x4444_4444_4444_4444];
/// Where a metadata sector's MAC bytes are (`struct journal_sector`).
const MAC_OFFSET: usize = 496;
/// The commit id at the end of each sector.
const COMMIT_ID_OFFSET: usize = 504;
const SECTOR: usize = 512;

/// The commit id of sector `sector` of section `section` written under
/// sequence `seq` (`dm_integrity_commit_id`).
#[must_use]
pub fn commit_id(section: u32, sector: u32, seq: u8) -> u64 {
    COMMIT_IDS[usize::from(seq % N_COMMIT_IDS)] ^ ((u64::from(section) << 32) ^ u64::from(sector))
}

fn prev_seq(seq: u8) -> u8 {
    (seq + N_COMMIT_IDS - 1) % N_COMMIT_IDS
}

fn next_seq(seq: u8) -> u8 {
    (seq + 1) % N_COMMIT_IDS
}

/// What an entry's sector field says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// High half `0xffffffff`: no data.
    Unused,
    /// High half `0xfffffffe`: being written when the section was; a
    /// replay finds it beyond the device and skips it.
    InProgress,
    /// The logical sector of the block this entry's data belongs at.
    Sector(u64),
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// The sector field as stored.
    pub sector_field: u64,
    /// The original last 8 bytes of each 512-byte sector of the block.
    pub last_bytes: Vec<[u8; 8]>,
    /// The block's tag.
    pub tag: Vec<u8>,
}

impl JournalEntry {
    #[must_use]
    pub fn state(&self) -> EntryState {
        match (self.sector_field >> 32) as u32 {
            0xffff_ffff => EntryState::Unused,
            0xffff_fffe => EntryState::InProgress,
            _ => EntryState::Sector(self.sector_field),
        }
    }

    /// Whether the kernel counts the entry as holding data (anything but
    /// unused, `journal_entry_is_unused`).
    #[must_use]
    pub fn is_used(&self) -> bool {
        self.state() != EntryState::Unused
    }
}

/// A parsed journal section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSection {
    pub index: u32,
    /// Each sector's commit sequence; `None` for a commit id of no
    /// sequence (the kernel then clears the whole journal unreplayed).
    pub commit_seqs: Vec<Option<u8>>,
    pub entries: Vec<JournalEntry>,
    /// With a journal MAC: the 8 MAC bytes of each metadata sector, in
    /// order.
    pub mac: Option<[u8; (JOURNAL_BLOCK_SECTORS * JOURNAL_MAC_PER_SECTOR) as usize]>,
}

/// What a replay needs to know of a section (see [`replay_plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SectionSummary {
    /// The sequences some sector of the section was written under.
    pub seqs: [bool; N_COMMIT_IDS as usize],
    /// The sequence every sector was written under, if they agree.
    pub uniform: Option<u8>,
    /// Some sector's commit id is of no sequence.
    pub unknown_commit_id: bool,
    /// Some entry is not unused.
    pub has_entries: bool,
}

fn check_layout(layout: &JournalLayout) -> Result<()> {
    let space = COMMIT_ID_OFFSET as u32 - if layout.mac { JOURNAL_MAC_PER_SECTOR } else { 0 };
    let ok = layout.log2_sectors_per_block <= 3
        && layout.entry_size >= 8 + (8 << layout.log2_sectors_per_block) + layout.tag_size
        && layout.entries_per_sector.checked_mul(layout.entry_size).is_some_and(|b| b <= space)
        && layout.section_entries == layout.entries_per_sector * JOURNAL_BLOCK_SECTORS
        && layout.section_sectors
            == (layout.section_entries << layout.log2_sectors_per_block) + JOURNAL_BLOCK_SECTORS;
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("inconsistent dm-integrity journal layout"))
    }
}

impl JournalSection {
    /// Parses section `index` from exactly one section's bytes.
    pub fn parse(bytes: &[u8], index: u32, layout: &JournalLayout) -> Result<Self> {
        check_layout(layout)?;
        if bytes.len() != layout.section_bytes() {
            return Err(Error::invalid(format!(
                "a dm-integrity journal section is {} bytes, not {}",
                layout.section_bytes(),
                bytes.len()
            )));
        }
        let commit_seqs = bytes
            .chunks_exact(SECTOR)
            .enumerate()
            .map(|(j, s)| {
                let id = u64::from_le_bytes(s[COMMIT_ID_OFFSET..].try_into().unwrap_or_default());
                // j < section_sectors, a u32.
                (0..N_COMMIT_IDS).find(|&k| commit_id(index, j as u32, k) == id)
            })
            .collect();
        let spb = 1usize << layout.log2_sectors_per_block;
        let mut entries = Vec::with_capacity(layout.section_entries as usize);
        for n in 0..layout.section_entries {
            let (sector, offset) = layout.entry_position(n);
            let at = sector as usize * SECTOR + offset as usize;
            let mut r =
                Reader::new(bytes.get(at..).unwrap_or_default(), "dm-integrity journal entry");
            let sector_field = r.u64_le("sector")?;
            let last_bytes = (0..spb).map(|_| r.array::<8>("last bytes")).collect::<Result<_>>()?;
            let tag = r.take(layout.tag_size as usize, "tag")?.to_vec();
            entries.push(JournalEntry { sector_field, last_bytes, tag });
        }
        let mac = layout.mac.then(|| {
            let mut mac = [0u8; 64];
            for (s, out) in mac.chunks_exact_mut(JOURNAL_MAC_PER_SECTOR as usize).enumerate() {
                let at = s * SECTOR + MAC_OFFSET;
                out.copy_from_slice(&bytes[at..at + out.len()]);
            }
            mac
        });
        Ok(Self { index, commit_seqs, entries, mac })
    }

    /// The section's summary for [`replay_plan`].
    #[must_use]
    pub fn summary(&self) -> SectionSummary {
        let mut s = SectionSummary::default();
        for seq in &self.commit_seqs {
            match seq {
                Some(k) => s.seqs[usize::from(*k)] = true,
                None => s.unknown_commit_id = true,
            }
        }
        let first = self.commit_seqs.first().copied().flatten();
        s.uniform = first.filter(|_| self.commit_seqs.iter().all(|k| *k == first));
        s.has_entries = self.entries.iter().any(JournalEntry::is_used);
        s
    }

    /// The block of entry `n` as it goes to the data device: its sectors
    /// in the section with their last 8 bytes given back
    /// (`restore_last_bytes`). `bytes` is the section the entry was
    /// parsed from.
    pub fn entry_block(&self, bytes: &[u8], layout: &JournalLayout, n: u32) -> Result<Vec<u8>> {
        let entry = self
            .entries
            .get(n as usize)
            .ok_or_else(|| Error::invalid(format!("no journal entry {n}")))?;
        let start = layout.data_sector(n) as usize * SECTOR;
        let len = SECTOR << layout.log2_sectors_per_block;
        let mut block = bytes
            .get(start..start + len)
            .ok_or_else(|| Error::invalid("journal section shorter than its layout"))?
            .to_vec();
        for (sector, last) in block.chunks_exact_mut(SECTOR).zip(&entry.last_bytes) {
            sector[COMMIT_ID_OFFSET..].copy_from_slice(last);
        }
        Ok(block)
    }

    /// What the kernel hashes for the section's MAC (`section_mac`): with
    /// `SB_FLAG_FIXED_HMAC` the salt and the section number (64-bit
    /// little-endian), then every entry's sector field. The MAC's first
    /// 64 bytes (zero-padded) are the section's [`JournalSection::mac`].
    #[must_use]
    pub fn mac_input(&self, sb: &Superblock) -> Vec<u8> {
        let mut input = Vec::with_capacity(24 + 8 * self.entries.len());
        if sb.flags.contains(Flags::FIXED_HMAC) {
            input.extend_from_slice(&sb.salt);
            input.extend_from_slice(&u64::from(self.index).to_le_bytes());
        }
        for e in &self.entries {
            input.extend_from_slice(&e.sector_field.to_le_bytes());
        }
        input
    }

    /// The writes a replay of this section makes (`do_journal_write`
    /// with `from_replay`), in order: for each used entry, the block it
    /// goes to; a sector that is not the first of a block is rounded down
    /// (the kernel also reports an I/O error, which fails the device), and
    /// an entry beyond the device (in-progress entries among them) is
    /// skipped.
    #[must_use]
    pub fn replay_writes(&self, geometry: &Geometry) -> Vec<ReplayWrite> {
        let spb = 1u64 << geometry.log2_sectors_per_block;
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_used())
            .filter_map(|(n, e)| {
                let misaligned = e.sector_field & (spb - 1) != 0;
                let sector = e.sector_field & !(spb - 1);
                (sector < geometry.provided_data_sectors).then_some(ReplayWrite {
                    entry: n as u32,
                    sector,
                    misaligned,
                })
            })
            .collect()
    }
}

/// One block a replay writes: entry `entry`'s block and tag to logical
/// `sector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayWrite {
    pub entry: u32,
    pub sector: u64,
    /// The entry's sector was not the first of a block: the kernel writes
    /// the block it falls in and fails the device.
    pub misaligned: bool,
}

/// The mode the device is activated in (the table's mode letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `J`: every write goes through the journal.
    Journal,
    /// `B`: writes go straight to the device; a bitmap marks dirty blocks.
    Bitmap,
    /// `D`: no journal, no bitmap.
    Direct,
}

/// What activating the device does with the journal it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPlan {
    /// Sections whose entries are written to the device, in order from
    /// `(first, count)`, wrapping at the last section; `None` when the
    /// journal holds nothing to replay.
    pub replay: Option<(u32, u32)>,
    /// The journal is then rewritten empty (`init_journal`) under this
    /// commit sequence, starting with this section; `None` when the
    /// device goes on writing the journal as it is.
    pub clear: Option<ClearJournal>,
    /// The section the next commit goes to, and its commit sequence.
    pub next_section: u32,
    pub next_commit_seq: u8,
}

/// A journal rewritten empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClearJournal {
    pub first_section: u32,
    pub seq: u8,
    /// Why: some commit id was of no sequence, or every sequence was in
    /// use, or not every section was consistent (a torn commit), or the
    /// mode does not go on from the journal.
    pub reason: ClearReason,
}

/// Why the journal is cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearReason {
    UnknownCommitId,
    AllSequencesUsed,
    Inconsistent,
    NotJournalMode,
}

/// `replay_journal`: which sections a replay applies and in what order,
/// and what the journal looks like afterwards, from every section's
/// summary in section order (an empty slice is refused).
pub fn replay_plan(sections: &[SectionSummary], mode: Mode) -> Result<ReplayPlan> {
    let n = u32::try_from(sections.len())
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::invalid("a dm-integrity journal has 1 to 2^32 - 1 sections"))?;
    let clear = |last_used: u8, first_section: u32, reason| {
        let seq = prev_seq(prev_seq(last_used));
        ClearJournal { first_section, seq, reason }
    };
    let cleared = |replay, c: ClearJournal| ReplayPlan {
        replay,
        clear: Some(c),
        next_section: 0,
        next_commit_seq: next_seq(c.seq),
    };
    if sections.iter().any(|s| s.unknown_commit_id) {
        return Ok(cleared(None, clear(0, 0, ClearReason::UnknownCommitId)));
    }
    let mut used = [false; N_COMMIT_IDS as usize];
    let mut last_section = [0u32; N_COMMIT_IDS as usize];
    for (i, s) in (0..n).zip(sections) {
        for k in 0..N_COMMIT_IDS as usize {
            if s.seqs[k] {
                used[k] = true;
                last_section[k] = i;
            }
        }
    }
    let mut empty = !sections.iter().any(|s| s.has_entries);
    let top = N_COMMIT_IDS - 1;
    let unused = if !used[usize::from(top)] {
        let mut u = top;
        while u > 0 && !used[usize::from(u - 1)] {
            u -= 1;
        }
        u
    } else {
        match (0..N_COMMIT_IDS).find(|&k| !used[usize::from(k)]) {
            Some(u) => u,
            None => return Ok(cleared(None, clear(0, 0, ClearReason::AllSequencesUsed))),
        }
    };
    let last_used = prev_seq(unused);
    let mut want = prev_seq(last_used);
    if !used[usize::from(want)] && used[usize::from(prev_seq(want))] {
        empty = true;
    }
    let mut start = last_section[usize::from(last_used)] + 1;
    if start >= n {
        want = next_seq(want);
        start -= n;
    }
    let mut i = start;
    let mut count = 0u32;
    while count < n {
        if sections[i as usize].uniform != Some(want) {
            break;
        }
        count += 1;
        i += 1;
        if i >= n {
            want = next_seq(want);
            i -= n;
        }
    }
    let replay = (!empty).then_some((start, count));
    if count == n && (mode == Mode::Journal || empty) {
        Ok(ReplayPlan { replay, clear: None, next_section: start, next_commit_seq: want })
    } else {
        let reason =
            if count == n { ClearReason::NotJournalMode } else { ClearReason::Inconsistent };
        Ok(cleared(replay, clear(last_used, start, reason)))
    }
}

/// Sections `first..first + count`, wrapping at `sections`.
pub fn sections_in_order(first: u32, count: u32, sections: u32) -> impl Iterator<Item = u32> {
    (0..count).map(move |k| ((u64::from(first) + u64::from(k)) % u64::from(sections.max(1))) as u32)
}

/// Puts a block into entry `n` of a section being filled (`bytes`, one
/// section): the entry's sector, the last 8 bytes of each 512-byte sector
/// of the block, the tag, and the block in the entry's data sectors (its
/// last 8 bytes a sector are overwritten when the section is committed,
/// [`commit_section`]). `tag` is the tag size given by the layout.
pub fn put_entry(
    bytes: &mut [u8],
    layout: &JournalLayout,
    n: u32,
    sector: u64,
    block: &[u8],
    tag: &[u8],
) -> Result<()> {
    check_layout(layout)?;
    let block_len = SECTOR << layout.log2_sectors_per_block;
    if bytes.len() != layout.section_bytes()
        || n >= layout.section_entries
        || block.len() != block_len
        || tag.len() != layout.tag_size as usize
    {
        return Err(Error::invalid("journal entry does not fit its section"));
    }
    let (meta, offset) = layout.entry_position(n);
    let mut at = meta as usize * SECTOR + offset as usize;
    bytes[at..at + 8].copy_from_slice(&sector.to_le_bytes());
    at += 8;
    for s in block.chunks_exact(SECTOR) {
        bytes[at..at + 8].copy_from_slice(&s[COMMIT_ID_OFFSET..]);
        at += 8;
    }
    bytes[at..at + tag.len()].copy_from_slice(tag);
    let data = layout.data_sector(n) as usize * SECTOR;
    bytes[data..data + block_len].copy_from_slice(block);
    Ok(())
}

/// Marks entry `n` of a section unused (`journal_entry_set_unused`: only
/// the high half of its sector field changes).
pub fn put_unused(bytes: &mut [u8], layout: &JournalLayout, n: u32) -> Result<()> {
    if bytes.len() != layout.section_bytes() || n >= layout.section_entries {
        return Err(Error::invalid("journal entry does not fit its section"));
    }
    let (meta, offset) = layout.entry_position(n);
    let at = meta as usize * SECTOR + offset as usize + 4;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    Ok(())
}

/// Commits section `index` under sequence `seq`: every sector's commit id
/// (`integrity_commit`), and with a journal MAC its 64 MAC bytes, 8 in
/// each metadata sector (`rw_section_mac`).
pub fn commit_section(
    bytes: &mut [u8],
    layout: &JournalLayout,
    index: u32,
    seq: u8,
    mac: Option<&[u8; 64]>,
) -> Result<()> {
    if bytes.len() != layout.section_bytes() || layout.mac != mac.is_some() {
        return Err(Error::invalid("journal section does not fit its layout"));
    }
    for (j, sector) in bytes.chunks_exact_mut(SECTOR).enumerate() {
        // j < section_sectors, a u32.
        sector[COMMIT_ID_OFFSET..].copy_from_slice(&commit_id(index, j as u32, seq).to_le_bytes());
    }
    if let Some(mac) = mac {
        for (s, part) in mac.chunks_exact(JOURNAL_MAC_PER_SECTOR as usize).enumerate() {
            let at = s * SECTOR + MAC_OFFSET;
            bytes[at..at + part.len()].copy_from_slice(part);
        }
    }
    Ok(())
}

/// A section as the kernel's `init_journal` writes it: all entries unused,
/// every sector's commit id of sequence `seq`, everything else zero.
#[must_use]
pub fn empty_section(index: u32, layout: &JournalLayout, seq: u8) -> Vec<u8> {
    let mut bytes = vec![0u8; layout.section_bytes()];
    for (j, sector) in bytes.chunks_exact_mut(SECTOR).enumerate() {
        // j < section_sectors, a u32.
        sector[COMMIT_ID_OFFSET..].copy_from_slice(&commit_id(index, j as u32, seq).to_le_bytes());
    }
    for n in 0..layout.section_entries {
        let (sector, offset) = layout.entry_position(n);
        let at = sector as usize * SECTOR + offset as usize;
        bytes[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> JournalLayout {
        JournalLayout::of(&Superblock::new(4, 0, 15, 3, Flags(Flags::FIXED_PADDING), [0; 16]))
    }

    fn summary(seq: u8, entries: bool) -> SectionSummary {
        let mut s =
            SectionSummary { uniform: Some(seq), has_entries: entries, ..Default::default() };
        s.seqs[usize::from(seq)] = true;
        s
    }

    #[test]
    fn empty_sections_parse() {
        let l = layout();
        let bytes = empty_section(2, &l, 1);
        let mut again = vec![0; l.section_bytes()];
        for n in 0..l.section_entries {
            put_unused(&mut again, &l, n).unwrap();
        }
        commit_section(&mut again, &l, 2, 1, None).unwrap();
        assert_eq!(again, bytes);
        let s = JournalSection::parse(&bytes, 2, &l).unwrap();
        assert_eq!(s.summary(), summary(1, false));
        assert!(s.entries.iter().all(|e| e.state() == EntryState::Unused));
        // Read as another section, the commit ids are of no sequence.
        assert!(JournalSection::parse(&bytes, 1, &l).unwrap().summary().unknown_commit_id);
        assert!(JournalSection::parse(&bytes[1..], 2, &l).is_err());
    }

    #[test]
    fn entries_and_their_blocks() {
        let l = layout();
        let mut bytes = empty_section(0, &l, 0);
        // Entry 9: metadata sector 1, second slot; its data at sector 17.
        let at = 512 + l.entry_size as usize;
        bytes[at..at + 8].copy_from_slice(&77u64.to_le_bytes());
        bytes[at + 8..at + 16].copy_from_slice(b"lastbyte");
        bytes[at + 16..at + 20].copy_from_slice(b"tag!");
        bytes[17 * 512..17 * 512 + 504].fill(0x5a);
        let s = JournalSection::parse(&bytes, 0, &l).unwrap();
        assert_eq!(s.entries[9].state(), EntryState::Sector(77));
        assert_eq!(s.entries[9].tag, b"tag!");
        let block = s.entry_block(&bytes, &l, 9).unwrap();
        assert_eq!(&block[..504], &[0x5a; 504][..]);
        assert_eq!(&block[504..], b"lastbyte");
        assert!(s.summary().has_entries);
    }

    /// A journal section the kernel wrote (`integritysetup format`
    /// with HMAC-SHA256 tags, written and copied before the close; see
    /// `kernel_integrity_format` and fuzz/make_integrity_seeds.py):
    /// written again entry by entry, it is the same bytes.
    #[test]
    fn kernel_sections_are_written_back_byte_for_byte() {
        let seed =
            include_bytes!("../../../../fuzz/corpus/integrity_metadata/int-hmac-crash-sections0-1");
        let sb = Superblock::parse(&seed[..4096]).unwrap();
        let layout = JournalLayout::of(&sb);
        assert_eq!(u32::from_le_bytes(seed[4096..4100].try_into().unwrap()), 0);
        let mut used = 0;
        for (index, raw) in seed[4100..].chunks_exact(layout.section_bytes()).enumerate() {
            let index = index as u32;
            let section = JournalSection::parse(raw, index, &layout).unwrap();
            let summary = section.summary();
            let seq = summary.uniform.unwrap();
            let mut again = raw.to_vec();
            for (n, entry) in section.entries.iter().enumerate() {
                let n = n as u32;
                if let EntryState::Sector(sector) = entry.state() {
                    used += 1;
                    let block = section.entry_block(raw, &layout, n).unwrap();
                    put_entry(&mut again, &layout, n, sector, &block, &entry.tag).unwrap();
                } else {
                    put_unused(&mut again, &layout, n).unwrap();
                }
            }
            commit_section(&mut again, &layout, index, seq, None).unwrap();
            assert!(again == raw, "section {index} written back differs");
            assert!(commit_section(&mut again, &layout, index, seq, Some(&[0; 64])).is_err());
        }
        assert!(used > 0, "the seed's sections hold no entries");
    }

    #[test]
    fn replay_follows_the_commit_sequence() {
        // A clean journal written once around: sections 0..3 under seq 0.
        let plan =
            replay_plan(&[summary(0, true), summary(0, true), summary(0, false)], Mode::Journal)
                .unwrap();
        assert_eq!(plan.replay, Some((0, 3)));
        assert_eq!(plan.clear, None);
        assert_eq!((plan.next_section, plan.next_commit_seq), (0, 1));
        // Section 1 rewritten under seq 1: replay from section 2 (seq 0),
        // wrap to 0 and 1 (seq 1).
        let plan =
            replay_plan(&[summary(1, true), summary(1, true), summary(0, true)], Mode::Journal)
                .unwrap();
        assert_eq!(plan.replay, Some((2, 3)));
        assert_eq!((plan.next_section, plan.next_commit_seq), (2, 1));
        // A torn commit: section 0 under seq 1, section 1 half written.
        let mut torn = summary(1, true);
        torn.seqs[0] = true;
        torn.uniform = None;
        let plan = replay_plan(&[summary(1, true), torn, summary(0, true)], Mode::Journal).unwrap();
        assert_eq!(plan.replay, Some((2, 2)));
        assert_eq!(plan.clear.map(|c| c.reason), Some(ClearReason::Inconsistent));
        // Not journal mode: replayed, then cleared.
        let plan = replay_plan(&[summary(0, true)], Mode::Bitmap).unwrap();
        assert_eq!(plan.replay, Some((0, 1)));
        assert!(plan.clear.is_some());
        // An unknown commit id: cleared unreplayed.
        let mut bad = summary(0, true);
        bad.unknown_commit_id = true;
        let plan = replay_plan(&[bad], Mode::Journal).unwrap();
        assert_eq!(
            (plan.replay, plan.clear.map(|c| (c.seq, c.reason))),
            (None, Some((2, ClearReason::UnknownCommitId)))
        );
        assert!(replay_plan(&[], Mode::Journal).is_err());
        assert_eq!(sections_in_order(2, 3, 3).collect::<Vec<_>>(), [2, 0, 1]);
    }
}
