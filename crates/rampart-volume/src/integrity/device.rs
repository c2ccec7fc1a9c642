//! The plaintext view of a LUKS2 segment with integrity: what
//! `/dev/mapper/NAME` presents when cryptsetup opens it (dm-crypt over
//! dm-integrity).

use std::cell::RefCell;
use std::io;

use rampart_crypto::SecretBytes;
use rampart_luks::IntegritySegment;
use rayon::prelude::*;

use super::ranges::RangeLocks;
use super::sectors::SectorAuth;
use super::store::{IntegrityStats, TagStore};
use super::IntegrityMode;
use crate::unaligned::{self, MAX_SECTOR};
use crate::{check_range, BlockDevice, VolumeError};

/// Requests at least this large are split across all cores; smaller ones
/// run on the calling thread (servers already run many at once).
const PARALLEL_MIN_BYTES: usize = 1 << 20;
/// Large requests go in pieces of this size, which stay in a core's cache
/// between the I/O and the cipher.
const PIECE_BYTES: usize = 256 << 10;
/// `write_zeroes` and `wipe` seal this much at a time.
const ZERO_CHUNK: usize = 8 << 20;

thread_local! {
    /// Per-thread buffers for sealed data and tags, kept between requests
    /// so that the I/O path allocates only for a request larger than any
    /// before.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A LUKS2 segment with authenticated encryption over `D` (the whole data
/// device), as a [`BlockDevice`] of plaintext.
///
/// Requests are whole sectors or not: a partial sector is read, patched
/// and rewritten under a lock on its block. Concurrent requests lock the
/// block ranges they touch (reads share them), so a read never sees a
/// block half written.
#[derive(Debug)]
pub struct AuthenticatedDevice<D: BlockDevice> {
    store: TagStore<D>,
    auth: SectorAuth,
    ranges: RangeLocks,
    len: u64,
    sector: usize,
    /// dm-integrity's tag size: each block's tag bytes on disk.
    disk_tag: usize,
}

impl<D: BlockDevice> AuthenticatedDevice<D> {
    /// Opens the segment's dm-integrity device on `data` (replaying its
    /// journal as the kernel would on activation in `mode`) under the
    /// volume key.
    pub fn open(
        data: D,
        segment: &IntegritySegment,
        volume_key: &SecretBytes,
        mode: IntegrityMode,
    ) -> Result<Self, VolumeError> {
        let auth = SectorAuth::new(segment, volume_key)?;
        let sector = segment.sector_size;
        if !(512..=MAX_SECTOR as u32).contains(&sector) || !sector.is_power_of_two() {
            return Err(rampart_luks::Error::Corrupt(format!("sector size {sector}")).into());
        }
        let disk_tag = auth.tag_size();
        let store = TagStore::open(data, segment.offset, mode, sector, disk_tag)?;
        let provided = store.blocks() * u64::from(sector);
        let len = match segment.size {
            None => provided,
            Some(size) if size <= provided && size % u64::from(sector) == 0 => size,
            Some(size) => {
                return Err(rampart_luks::Error::Corrupt(format!(
                    "the segment's {size} bytes are not whole sectors of the {provided} bytes \
                     dm-integrity provides"
                ))
                .into())
            }
        };
        Ok(Self {
            store,
            auth,
            ranges: RangeLocks::default(),
            len,
            sector: sector as usize,
            disk_tag,
        })
    }

    /// The device underneath.
    pub fn inner(&self) -> &D {
        self.store.inner()
    }

    /// What the dm-integrity engine has done so far (commits, copies
    /// home, flushes, retried reads).
    pub fn stats(&self) -> IntegrityStats {
        self.store.stats()
    }

    /// The dm-integrity geometry (where every block and tag is).
    pub fn geometry(&self) -> &rampart_luks::integrity::Geometry {
        self.store.geometry()
    }

    /// Empties the journal as the kernel does when the device is closed:
    /// everything committed, copied home and flushed, every section
    /// rewritten empty. The device stays usable.
    pub fn close(&self) -> io::Result<()> {
        let _all = self.ranges.lock(0, u64::MAX, true);
        self.store.empty_journal()
    }

    /// Writes sealed zeros to every block in place, in large batches on
    /// every core (what cryptsetup's wipe after `luksFormat --integrity`
    /// achieves: every sector then reads back as zeros), then flushes.
    /// `progress` gets the bytes done and the total after each batch.
    pub fn wipe(&self, progress: &mut dyn FnMut(u64, u64)) -> io::Result<()> {
        let _all = self.ranges.lock(0, u64::MAX, true);
        // Journal entries left behind would be replayed over the zeros.
        self.store.empty_journal()?;
        let total = self.len;
        let zeros = vec![0u8; PIECE_BYTES.min(ZERO_CHUNK)];
        let mut done = 0u64;
        while done < total {
            let step = (total - done).min(ZERO_CHUNK as u64) as usize;
            let pieces = step.div_ceil(PIECE_BYTES);
            (0..pieces).into_par_iter().try_for_each(|p| {
                let len = PIECE_BYTES.min(step - p * PIECE_BYTES);
                let at = done + (p * PIECE_BYTES) as u64;
                self.seal_and(&zeros[..len], at, |first, data, tags| {
                    self.store.write_direct(first, data, tags)
                })
            })?;
            done += step as u64;
            progress(done, total);
        }
        self.store.flush()
    }

    fn block_of(&self, offset: u64) -> u64 {
        offset / self.sector as u64
    }

    /// Seals whole sectors of `plain` (at plaintext offset `at`) into this
    /// thread's scratch and hands them to `f` (first block, data, tags).
    fn seal_and(
        &self,
        plain: &[u8],
        at: u64,
        f: impl FnOnce(u64, &[u8], &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (data, tags) = &mut *scratch;
            let blocks = plain.len() / self.sector;
            grow(data, plain.len());
            grow(tags, blocks * self.disk_tag);
            let (data, tags) = (&mut data[..plain.len()], &mut tags[..blocks * self.disk_tag]);
            self.auth.seal(plain, data, tags, self.disk_tag, at / 512)?;
            f(self.block_of(at), data, tags)
        })
    }

    /// Reads and opens whole sectors at plaintext offset `at`.
    fn read_here(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let tags = &mut scratch.1;
            let blocks = buf.len() / self.sector;
            grow(tags, blocks * self.disk_tag);
            let tags = &mut tags[..blocks * self.disk_tag];
            self.store.read(self.block_of(at), buf, tags)?;
            self.auth.open(buf, tags, self.disk_tag, at / 512)
        })
    }

    /// Reads whole sectors, in pieces on every core for a large request.
    fn read_sectors(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self.piece(buf.len()) {
            None => self.read_here(buf, offset),
            Some(piece) => buf
                .par_chunks_mut(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| self.read_here(chunk, offset + (i * piece) as u64)),
        }
    }

    /// Seals and writes whole sectors, in pieces on every core for a
    /// large request.
    fn write_sectors(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let run = |chunk: &[u8], at: u64| {
            self.seal_and(chunk, at, |first, data, tags| self.store.write(first, data, tags))
        };
        match self.piece(buf.len()) {
            None => run(buf, offset),
            Some(piece) => buf
                .par_chunks(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| run(chunk, offset + (i * piece) as u64)),
        }
    }

    fn piece(&self, len: usize) -> Option<usize> {
        if len < PARALLEL_MIN_BYTES || rayon::current_num_threads() < 2 {
            return None;
        }
        Some(PIECE_BYTES.max(self.sector) / self.sector * self.sector)
    }

    /// Replaces `patch.len()` bytes at `within` of the sector at
    /// `sector_offset`, holding its block throughout.
    fn patch_sector(&self, sector_offset: u64, within: usize, patch: &[u8]) -> io::Result<()> {
        let block = self.block_of(sector_offset);
        let _held = self.ranges.lock(block, block + 1, true);
        let mut buf = [0u8; MAX_SECTOR];
        let buf = &mut buf[..self.sector];
        self.read_here(buf, sector_offset)?;
        buf[within..within + patch.len()].copy_from_slice(patch);
        self.write_sectors(buf, sector_offset)
    }
}

fn grow(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

impl<D: BlockDevice> BlockDevice for AuthenticatedDevice<D> {
    fn len(&self) -> u64 {
        self.len
    }

    fn block_size(&self) -> u32 {
        self.sector as u32
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        if buf.is_empty() {
            return Ok(());
        }
        let sector = self.sector;
        let first = self.block_of(offset);
        let end = (offset + buf.len() as u64).div_ceil(sector as u64);
        let _held = self.ranges.lock(first, end, false);
        unaligned::read(
            buf,
            offset,
            sector,
            |block, at| self.read_here(block, at),
            |whole, at| self.read_sectors(whole, at),
        )
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let sector = self.sector;
        unaligned::write(
            buf,
            offset,
            sector,
            |at, within, bytes| self.patch_sector(at, within, bytes),
            |whole, at| {
                let first = self.block_of(at);
                let _held = self.ranges.lock(first, first + (whole.len() / sector) as u64, true);
                self.write_sectors(whole, at)
            },
        )
    }

    fn flush(&self) -> io::Result<()> {
        self.store.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        // dm-crypt refuses discards over integrity unless activated with
        // `--allow-discards`, and then dm-integrity fills tags with a
        // filler that dm-crypt cannot verify: nothing is let go.
        check_range(offset, len, self.len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        // Zeros must read back as zeros through the tags, so they are
        // sealed like any other data.
        let zeros = vec![0u8; len.min(ZERO_CHUNK as u64) as usize];
        let mut done = 0;
        while done < len {
            let step = (len - done).min(ZERO_CHUNK as u64);
            self.write_at(&zeros[..step as usize], offset + done)?;
            done += step;
        }
        Ok(())
    }
}

impl<D: BlockDevice> Drop for AuthenticatedDevice<D> {
    fn drop(&mut self) {
        // A clean close leaves the journal empty, as the kernel's does; a
        // failure here leaves a journal that the next open replays.
        let _ = self.store.empty_journal();
    }
}
