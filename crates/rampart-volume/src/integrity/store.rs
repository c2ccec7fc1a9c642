//! dm-integrity's engine over a [`BlockDevice`]: each block's data and
//! tag at their home locations, and in journal mode the journal in front
//! of them, written, committed, copied home and replayed as Linux 6.1's
//! `drivers/md/dm-integrity.c` does for tags on the data device.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rampart_luks::integrity::{
    journal::{empty_section, sections_in_order},
    replay_plan, Flags, Geometry, JournalSection, Mode, Superblock, SUPERBLOCK_BYTES,
};

use super::journal::{
    entry_ranges, restore_last_bytes, ring_overlap, JournalWriter, SealedSections,
};
use super::IntegrityMode;
use crate::{BlockDevice, VolumeError};

const SECTOR: u64 = 512;
/// The largest journal read: the kernel holds the whole journal in memory
/// too, and cryptsetup's default is far smaller.
const MAX_JOURNAL_BYTES: u64 = 1 << 30;
/// Journal sections are read, and written empty, this many bytes at a time.
const JOURNAL_IO_BYTES: usize = 4 << 20;
/// Uncommitted journal sections held in memory before a commit is forced.
const OPEN_JOURNAL_BYTES: usize = 16 << 20;

/// What the engine has done since it was opened, to measure each part's
/// cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntegrityStats {
    /// Journal commits and the bytes they wrote.
    pub commits: u64,
    pub journal_bytes: u64,
    /// Blocks copied from the journal to their home locations.
    pub blocks_copied_home: u64,
    /// Blocks written in place (direct mode, wipe).
    pub blocks_written_direct: u64,
    /// Flushes of the device underneath.
    pub device_flushes: u64,
    /// Reads made again because the journal copied blocks home meanwhile.
    pub reads_retried: u64,
    /// Blocks the journal replay wrote when the device was opened.
    pub blocks_replayed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    journal_bytes: AtomicU64,
    blocks_copied_home: AtomicU64,
    blocks_written_direct: AtomicU64,
    device_flushes: AtomicU64,
    reads_retried: AtomicU64,
    blocks_replayed: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// The journal of a device in journal mode. Writers fill the open
/// sections under `writer`, held only to copy a block in or out. A commit
/// seals them and writes and flushes them holding `journal_turn`, then
/// copies their entries home holding `home_turn`, taken before it lets
/// the next commit start: commits write the journal in ring order, copy
/// home in the same order, and one commit's copy home runs while the
/// next one's sections fill and are written.
#[derive(Debug)]
struct Journal {
    writer: Mutex<JournalWriter>,
    journal_turn: Mutex<()>,
    home_turn: Mutex<()>,
    unflushed: Mutex<Unflushed>,
}

/// Sections whose entries were copied to their home locations with no
/// flush begun since: they are not overwritten before one.
#[derive(Debug, Default)]
struct Unflushed {
    /// (number, first section, sections), numbered from 1 as copied.
    copied: Vec<(u64, u32, u32)>,
    last: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The dm-integrity device of one segment.
#[derive(Debug)]
pub(crate) struct TagStore<D> {
    dev: D,
    geometry: Geometry,
    block_bytes: usize,
    tag_size: usize,
    journal: Option<Journal>,
    /// Incremented as each copy home begins: a read that saw another value
    /// before it read the home locations reads them again.
    copies_home: AtomicU64,
    /// Set by a failed journal or home write: like the kernel's
    /// `dm_integrity_failed`, every later request fails.
    failed: AtomicBool,
    counters: Counters,
}

fn corrupt(message: String) -> VolumeError {
    rampart_luks::Error::Corrupt(message).into()
}

fn unsupported(message: String) -> VolumeError {
    rampart_luks::Error::UnsupportedCipher(message).into()
}

impl<D: BlockDevice> TagStore<D> {
    /// Reads the superblock at byte `offset` of `dev`, checks it against
    /// the segment's block and tag sizes, replays the journal as the
    /// kernel would on activation in `mode`, and is ready for I/O.
    pub(crate) fn open(
        dev: D,
        offset: u64,
        mode: IntegrityMode,
        block_bytes: u32,
        tag_size: usize,
    ) -> Result<Self, VolumeError> {
        let io_err = |what: &str, e| VolumeError::io(format!("dm-integrity {what}"), e);
        if offset % SECTOR != 0 || offset.saturating_add(SUPERBLOCK_BYTES as u64) > dev.len() {
            return Err(corrupt(format!(
                "no room for a dm-integrity superblock at byte {offset} of a {}-byte device",
                dev.len()
            )));
        }
        let mut area = vec![0u8; SUPERBLOCK_BYTES];
        dev.read_at(&mut area, offset).map_err(|e| io_err("superblock read", e))?;
        let sb = Superblock::parse(&area)?;
        check_superblock(&sb, block_bytes, tag_size)?;
        let geometry = Geometry::new(&sb, offset / SECTOR, dev.len() / SECTOR)?;
        let journal_bytes = geometry.journal.sectors() * SECTOR;
        if journal_bytes > MAX_JOURNAL_BYTES {
            return Err(unsupported(format!(
                "a dm-integrity journal of {journal_bytes} bytes (Rampart reads journals of up to \
                 {MAX_JOURNAL_BYTES} bytes)"
            )));
        }
        let store = Self {
            dev,
            geometry,
            block_bytes: block_bytes as usize,
            tag_size,
            journal: None,
            copies_home: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            counters: Counters::default(),
        };
        let (next_section, seq, replayed) =
            store.replay(mode).map_err(|e| io_err("journal replay", e))?;
        let journal = (mode == IntegrityMode::Journal).then(|| {
            let mut w = JournalWriter::new(geometry.journal, next_section, seq, OPEN_JOURNAL_BYTES);
            // A replayed journal is emptied at the close, so that its
            // entries are not applied again at every open.
            w.wrote = replayed;
            Journal {
                writer: Mutex::new(w),
                journal_turn: Mutex::new(()),
                home_turn: Mutex::new(()),
                unflushed: Mutex::default(),
            }
        });
        Ok(Self { journal, ..store })
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Blocks the device provides.
    pub(crate) fn blocks(&self) -> u64 {
        self.geometry.provided_data_sectors >> self.geometry.log2_sectors_per_block
    }

    pub(crate) fn inner(&self) -> &D {
        &self.dev
    }

    pub(crate) fn stats(&self) -> IntegrityStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        IntegrityStats {
            commits: get(&c.commits),
            journal_bytes: get(&c.journal_bytes),
            blocks_copied_home: get(&c.blocks_copied_home),
            blocks_written_direct: get(&c.blocks_written_direct),
            device_flushes: get(&c.device_flushes),
            reads_retried: get(&c.reads_retried),
            blocks_replayed: get(&c.blocks_replayed),
        }
    }

    fn sector_of(&self, block: u64) -> u64 {
        block << self.geometry.log2_sectors_per_block
    }

    fn check_failed(&self) -> io::Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "the dm-integrity device failed a journal write earlier and takes no more requests",
            ));
        }
        Ok(())
    }

    /// Marks the device failed when `result` is an error.
    fn failing<T>(&self, result: io::Result<T>) -> io::Result<T> {
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        result
    }

    fn flush_device(&self) -> io::Result<()> {
        add(&self.counters.device_flushes, 1);
        self.dev.flush()
    }

    /// Runs of blocks `first..first + count` that are contiguous on the
    /// device (each within one interleave area): (first block, blocks,
    /// data offset, tag offset).
    fn runs(
        &self,
        first: u64,
        count: u64,
        mut f: impl FnMut(u64, u64, u64, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let end = first
            .checked_add(count)
            .filter(|&e| e <= self.blocks())
            .ok_or_else(|| io::Error::other("blocks beyond the integrity device"))?;
        let mut block = first;
        while block < end {
            let loc = self.geometry.locate(self.sector_of(block)).map_err(io::Error::other)?;
            let in_area = (loc.sectors_left_in_area >> self.geometry.log2_sectors_per_block).max(1);
            let n = in_area.min(end - block);
            f(block, n, loc.data_offset, loc.tag_offset)?;
            block += n;
        }
        Ok(())
    }

    /// Reads blocks' stored data and tags from their home locations.
    fn read_home(&self, first: u64, data: &mut [u8], tags: &mut [u8]) -> io::Result<()> {
        let (bb, ts) = (self.block_bytes, self.tag_size);
        let count = (data.len() / bb) as u64;
        self.runs(first, count, |block, n, data_at, tag_at| {
            let i = (block - first) as usize;
            let n = n as usize;
            self.dev.read_at(&mut data[i * bb..(i + n) * bb], data_at)?;
            self.dev.read_at(&mut tags[i * ts..(i + n) * ts], tag_at)
        })
    }

    /// Writes blocks' data and tags to their home locations.
    fn write_home(&self, first: u64, data: &[u8], tags: &[u8]) -> io::Result<()> {
        let (bb, ts) = (self.block_bytes, self.tag_size);
        let count = (data.len() / bb) as u64;
        self.runs(first, count, |block, n, data_at, tag_at| {
            let i = (block - first) as usize;
            let n = n as usize;
            self.dev.write_at(&data[i * bb..(i + n) * bb], data_at)?;
            self.dev.write_at(&tags[i * ts..(i + n) * ts], tag_at)
        })
    }

    /// Reads whole blocks from `first`: their stored data (ciphertext)
    /// into `data` and their tags into `tags`, the journal's newer copies
    /// included.
    pub(crate) fn read(&self, first: u64, data: &mut [u8], tags: &mut [u8]) -> io::Result<()> {
        self.check_failed()?;
        let count = (data.len() / self.block_bytes) as u64;
        let Some(journal) = &self.journal else {
            return self.read_home(first, data, tags);
        };
        let (bb, ts) = (self.block_bytes, self.tag_size);
        loop {
            let (newer, before) = {
                let w = lock(&journal.writer);
                (
                    w.newer_copies((first, first + count), bb),
                    self.copies_home.load(Ordering::Acquire),
                )
            };
            self.read_home(first, data, tags)?;
            if self.copies_home.load(Ordering::Acquire) != before {
                add(&self.counters.reads_retried, 1);
                continue;
            }
            for (block, d, t) in newer {
                let i = (block - first) as usize;
                data[i * bb..(i + 1) * bb].copy_from_slice(&d);
                tags[i * ts..(i + 1) * ts].copy_from_slice(&t);
            }
            return Ok(());
        }
    }

    /// Writes whole blocks from `first`: in journal mode into the
    /// journal (committed when it fills or at the next flush), in direct
    /// mode in place.
    pub(crate) fn write(&self, first: u64, data: &[u8], tags: &[u8]) -> io::Result<()> {
        self.check_failed()?;
        let Some(journal) = &self.journal else {
            let result = self.write_home(first, data, tags);
            add(&self.counters.blocks_written_direct, (data.len() / self.block_bytes) as u64);
            return result;
        };
        let (bb, ts) = (self.block_bytes, self.tag_size);
        let count = (data.len() / bb) as u64;
        if first.checked_add(count).is_none_or(|end| end > self.blocks()) {
            return Err(io::Error::other("blocks beyond the integrity device"));
        }
        let mut blocks = data.chunks_exact(bb).zip(tags.chunks_exact(ts)).zip(first..).peekable();
        loop {
            {
                let mut w = lock(&journal.writer);
                while let Some(&((block_data, tag), block)) = blocks.peek() {
                    if w.is_full() {
                        break;
                    }
                    if !w.put(self.sector_of(block), block, block_data, tag) {
                        return Err(io::Error::other("a journal entry does not fit its section"));
                    }
                    blocks.next();
                }
            }
            if blocks.peek().is_none() {
                return Ok(());
            }
            let result = self.commit_when_full(journal);
            self.failing(result)?;
        }
    }

    /// Writes blocks in place whatever the mode (wipe): the caller holds
    /// every block and has emptied the journal.
    pub(crate) fn write_direct(&self, first: u64, data: &[u8], tags: &[u8]) -> io::Result<()> {
        self.check_failed()?;
        add(&self.counters.blocks_written_direct, (data.len() / self.block_bytes) as u64);
        self.write_home(first, data, tags)
    }

    /// Makes every completed write durable: commits the journal's open
    /// sections (after the commit in progress), or flushes the device.
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.check_failed()?;
        let Some(journal) = &self.journal else { return self.flush_device() };
        let result = match self.commit(journal, lock(&journal.journal_turn)) {
            Ok(true) => Ok(()),
            Ok(false) => self.flush_journal_device(journal),
            Err(e) => Err(e),
        };
        self.failing(result)
    }

    /// Commits the open sections when they are full, in this writer's
    /// turn: another writer may have committed them meanwhile.
    fn commit_when_full(&self, journal: &Journal) -> io::Result<()> {
        let turn = lock(&journal.journal_turn);
        if !lock(&journal.writer).is_full() {
            return Ok(());
        }
        self.commit(journal, turn).map(drop)
    }

    /// Flushes the device, and forgets the copies home that were complete
    /// when it began.
    fn flush_journal_device(&self, journal: &Journal) -> io::Result<()> {
        let covered = lock(&journal.unflushed).last;
        self.flush_device()?;
        lock(&journal.unflushed).copied.retain(|&(number, ..)| number > covered);
        Ok(())
    }

    /// Seals the open sections and commits them in `turn` (the commit
    /// ids, one write per contiguous part, a flush), then copies their
    /// entries home in the home turn, letting the next commit begin.
    /// Whether there was anything to commit.
    fn commit(&self, journal: &Journal, turn: MutexGuard<'_, ()>) -> io::Result<bool> {
        // A failed commit leaves its sections sealed; nothing follows it.
        self.check_failed()?;
        let sealed = lock(&journal.writer).seal().map_err(io::Error::other)?;
        let Some(sealed) = sealed else { return Ok(false) };
        let n = sealed.layout.sections;
        let (start, count) = (sealed.start, sealed.count);
        // Commits take at most half the ring (of two sections or more), so
        // the sections this one overwrites belong to commits before the
        // previous one, which took the home turn (after their copies home)
        // before it let this one begin; on a smaller ring, this one waits
        // for them. Those copies must be durable first.
        if lock(&journal.writer).overlaps_earlier(&sealed) {
            drop(lock(&journal.home_turn));
        }
        let overlaps = lock(&journal.unflushed)
            .copied
            .iter()
            .any(|&(_, first, sections)| ring_overlap((first, sections), (start, count), n));
        if overlaps {
            self.flush_journal_device(journal)?;
        }
        let sb = sealed.layout.section_bytes();
        let to_end = count.min(n - start) as usize;
        let bytes = sealed.bytes();
        self.dev.write_at(&bytes[..to_end * sb], self.geometry.journal_section_offset(start))?;
        if to_end < count as usize {
            self.dev.write_at(&bytes[to_end * sb..], self.geometry.journal_section_offset(0))?;
        }
        self.flush_journal_device(journal)?;
        add(&self.counters.commits, 1);
        add(&self.counters.journal_bytes, bytes.len() as u64);
        let home_turn = lock(&journal.home_turn);
        drop(turn);
        self.copies_home.fetch_add(1, Ordering::AcqRel);
        self.copy_home(&sealed)?;
        {
            let mut unflushed = lock(&journal.unflushed);
            unflushed.last += 1;
            let number = unflushed.last;
            unflushed.copied.push((number, start, count));
        }
        lock(&journal.writer).release(sealed);
        drop(home_turn);
        self.dev.start_flush()?;
        Ok(true)
    }

    /// Copies the sealed sections' entries to their home locations, runs
    /// of consecutive blocks at a time; an entry a later one supersedes is
    /// skipped (`find_newer_committed_node`).
    fn copy_home(&self, sealed: &SealedSections) -> io::Result<()> {
        let l = &sealed.layout;
        let entries = l.section_entries;
        let spb_log2 = self.geometry.log2_sectors_per_block;
        let bb = self.block_bytes;
        let (mut data, mut tags) = (Vec::new(), Vec::new());
        for index in 0..sealed.count {
            let section = sealed.section(index);
            let mut n = 0;
            while n < entries {
                let Some(block) = sealed.latest_block(index, n) else {
                    n += 1;
                    continue;
                };
                let loc = self.geometry.locate(self.sector_of(block)).map_err(io::Error::other)?;
                let in_area = loc.sectors_left_in_area >> spb_log2;
                let mut k = n + 1;
                while k < entries
                    && u64::from(k - n) < in_area
                    && sealed.latest_block(index, k) == Some(block + u64::from(k - n))
                {
                    k += 1;
                }
                // Consecutive entries' data sectors are consecutive too.
                let (_, _, _, first_data) = entry_ranges(l, n);
                let (_, _, _, last_data) = entry_ranges(l, k - 1);
                data.clear();
                data.extend_from_slice(&section[first_data.start..last_data.end]);
                tags.clear();
                for (e, block_data) in (n..k).zip(data.chunks_exact_mut(bb)) {
                    restore_last_bytes(l, section, e, block_data);
                    let (_, _, tag, _) = entry_ranges(l, e);
                    tags.extend_from_slice(&section[tag]);
                }
                self.dev.write_at(&data, loc.data_offset)?;
                self.dev.write_at(&tags, loc.tag_offset)?;
                add(&self.counters.blocks_copied_home, u64::from(k - n));
                n = k;
            }
        }
        Ok(())
    }

    /// Empties the journal as the kernel does when the device is
    /// suspended (`dm_integrity_postsuspend`): everything committed and
    /// copied home, flushed, then every section rewritten empty, from the
    /// next section under its sequence, the sections before it under the
    /// next sequence. The next commit goes where it would have gone.
    pub(crate) fn empty_journal(&self) -> io::Result<()> {
        self.check_failed()?;
        let Some(journal) = &self.journal else { return self.flush_device() };
        let result = (|| {
            self.commit(journal, lock(&journal.journal_turn))?;
            let _turns = (lock(&journal.journal_turn), lock(&journal.home_turn));
            self.flush_journal_device(journal)?;
            let mut w = lock(&journal.writer);
            if !w.wrote {
                return Ok(());
            }
            let n = w.layout.sections;
            let (next, seq) = (w.next_section, w.seq);
            self.write_empty_sections(next, n - next, seq)?;
            if next > 0 {
                self.write_empty_sections(0, next, (seq + 1) % 4)?;
            }
            w.seq = (seq + 1) % 4;
            w.wrote = false;
            Ok(())
        })();
        self.failing(result)
    }

    /// Writes `count` empty sections from `first` (wrapping) under `seq`
    /// (`init_journal`), then flushes: each call is durable before the
    /// next begins, as the kernel's FUA writes are.
    fn write_empty_sections(&self, first: u32, count: u32, seq: u8) -> io::Result<()> {
        let layout = self.geometry.journal;
        let sb = layout.section_bytes();
        let per_write = (JOURNAL_IO_BYTES / sb).max(1);
        let mut buf = Vec::with_capacity(per_write * sb);
        let mut run_start = None;
        for index in sections_in_order(first, count, layout.sections) {
            if index == 0 && !buf.is_empty() || buf.len() >= per_write * sb {
                if let Some(start) = run_start.take() {
                    self.dev.write_at(&buf, self.geometry.journal_section_offset(start))?;
                }
                buf.clear();
            }
            run_start.get_or_insert(index);
            buf.extend_from_slice(&empty_section(index, &layout, seq));
        }
        if let Some(start) = run_start {
            self.dev.write_at(&buf, self.geometry.journal_section_offset(start))?;
        }
        self.flush_device()
    }

    /// Reads the journal and does what the kernel's `replay_journal` does
    /// on activation in `mode`: applies the committed sections in order,
    /// and rewrites the journal empty when it cannot go on from it.
    /// Returns where the next commit goes, under which sequence, and
    /// whether replayed entries are left in the journal.
    fn replay(&self, mode: IntegrityMode) -> io::Result<(u32, u8, bool)> {
        let layout = self.geometry.journal;
        let sb = layout.section_bytes();
        let n = layout.sections;
        let per_read = (JOURNAL_IO_BYTES / sb).max(1) as u32;
        let mut summaries = Vec::with_capacity(n as usize);
        let mut buf = vec![0u8; per_read as usize * sb];
        let mut first = 0u32;
        while first < n {
            let take = per_read.min(n - first);
            let bytes = &mut buf[..take as usize * sb];
            self.dev.read_at(bytes, self.geometry.journal_section_offset(first))?;
            for (i, raw) in bytes.chunks_exact(sb).enumerate() {
                let section = JournalSection::parse(raw, first + i as u32, &layout)
                    .map_err(io::Error::other)?;
                summaries.push(section.summary());
            }
            first += take;
        }
        let mode = match mode {
            IntegrityMode::Journal => Mode::Journal,
            IntegrityMode::Direct => Mode::Direct,
        };
        let plan = replay_plan(&summaries, mode).map_err(io::Error::other)?;
        if let Some((start, count)) = plan.replay {
            let mut raw = vec![0u8; sb];
            for index in sections_in_order(start, count, n) {
                self.dev.read_at(&mut raw, self.geometry.journal_section_offset(index))?;
                let section =
                    JournalSection::parse(&raw, index, &layout).map_err(io::Error::other)?;
                for write in section.replay_writes(&self.geometry) {
                    if write.misaligned {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "dm-integrity journal section {index} holds sector {} that does \
                                 not start a block (the kernel fails the device)",
                                section.entries[write.entry as usize].sector_field
                            ),
                        ));
                    }
                    let block = section
                        .entry_block(&raw, &layout, write.entry)
                        .map_err(io::Error::other)?;
                    let tag = &section.entries[write.entry as usize].tag;
                    let loc = self.geometry.locate(write.sector).map_err(io::Error::other)?;
                    self.dev.write_at(&block, loc.data_offset)?;
                    self.dev.write_at(tag, loc.tag_offset)?;
                    add(&self.counters.blocks_replayed, 1);
                }
            }
            self.flush_device()?;
        }
        if let Some(clear) = plan.clear {
            // `clear_journal`: the section the replay started at first, so
            // that a crash part way leaves no replayable run behind.
            let (s, e) = (clear.first_section, clear.seq);
            self.write_empty_sections(s, 1, e)?;
            if n >= 2 {
                self.write_empty_sections((s + 1) % n, n - 2, e)?;
                self.write_empty_sections(
                    ((u64::from(s) + u64::from(n) - 1) % u64::from(n)) as u32,
                    1,
                    e,
                )?;
            }
        }
        Ok((plan.next_section, plan.next_commit_seq, plan.replay.is_some() && plan.clear.is_none()))
    }
}

/// Refuses what Rampart does not implement and what the kernel refuses
/// for tags that dm-crypt supplies.
fn check_superblock(sb: &Superblock, block_bytes: u32, tag_size: usize) -> Result<(), VolumeError> {
    if sb.flags.contains(Flags::JOURNAL_MAC) {
        return Err(unsupported(
            "a dm-integrity journal MAC where the LUKS2 segment names none".to_owned(),
        ));
    }
    if sb.flags.contains(Flags::DIRTY_BITMAP) {
        return Err(unsupported(
            "dm-integrity bitmap mode with tags from dm-crypt (the kernel refuses it too)"
                .to_owned(),
        ));
    }
    if sb.flags.contains(Flags::RECALCULATING) {
        return Err(unsupported(
            "a dm-integrity device whose tags are being recalculated (internal hashes only)"
                .to_owned(),
        ));
    }
    if sb.flags.0 & !Flags::KNOWN != 0 {
        return Err(unsupported(format!("dm-integrity superblock flags {:#x}", sb.flags.0)));
    }
    if sb.block_bytes() != block_bytes {
        return Err(corrupt(format!(
            "the dm-integrity superblock has {}-byte blocks, the segment {block_bytes}-byte sectors",
            sb.block_bytes()
        )));
    }
    if usize::from(sb.tag_size) != tag_size {
        return Err(corrupt(format!(
            "the dm-integrity superblock has {}-byte tags, the segment's integrity {tag_size}",
            sb.tag_size
        )));
    }
    Ok(())
}
