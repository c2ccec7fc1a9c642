use std::cell::RefCell;
use std::io;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::unaligned::{self, MAX_SECTOR};
use crate::{check_range, BlockDevice, SectorCipher};

/// Where a crypt segment's plaintext lives on the device underneath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CryptLayout {
    /// Byte offset of the segment on the device underneath.
    pub offset: u64,
    /// Plaintext bytes in the segment (a multiple of `sector_size`).
    pub size: u64,
    /// Encryption sector size: 512, 1024, 2048 or 4096.
    pub sector_size: u32,
    /// Added to every IV/tweak number (LUKS2 `iv_tweak`).
    pub iv_tweak: u64,
}

/// Requests at least this large are split across all cores.
/// Smaller ones run on the calling thread: servers already run many
/// requests at once, and splitting those costs more than it gains.
const PARALLEL_MIN_BYTES: usize = 1 << 20;
/// Large requests are read or written and transformed in pieces of this
/// size, which stay in a core's L2 cache between the I/O and the cipher.
const CACHED_PIECE: usize = 256 << 10;
/// Unaligned writes lock one of these stripes per sector they patch.
const RMW_STRIPES: usize = 64;

thread_local! {
    /// Per-thread ciphertext buffer for writes, kept between requests so the
    /// write path allocates only when a request is larger than any before.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The plaintext view of one LUKS crypt segment of `inner`.
///
/// The IV/tweak of a sector is its byte offset from the segment start
/// divided by 512, plus `iv_tweak` (dm-crypt's default, also for 4096-byte
/// sectors). Writes that do not cover whole sectors read, patch and rewrite
/// the sectors they touch under a per-sector lock, so that two such writes
/// into one sector never lose each other's bytes.
#[derive(Debug)]
pub struct CryptDevice<D> {
    inner: D,
    layout: CryptLayout,
    ciphers: Mutex<Vec<SectorCipher>>,
    template: Mutex<SectorCipher>,
    stripes: Vec<Mutex<()>>,
    /// IV/tweak numbers count sectors of `sector_size`, not 512-byte units
    /// (dm-crypt's `iv_large_sectors`, a plain-mode option).
    iv_large_sectors: bool,
}

impl<D: BlockDevice> CryptDevice<D> {
    /// Checks the layout against `inner` and takes ownership of the cipher.
    pub fn new(inner: D, layout: CryptLayout, cipher: SectorCipher) -> io::Result<Self> {
        let sector = layout.sector_size;
        if !(512..=4096).contains(&sector) || !sector.is_power_of_two() {
            return Err(invalid(format!("unsupported sector size {sector}")));
        }
        if layout.size % u64::from(sector) != 0 || layout.offset % 512 != 0 {
            return Err(invalid(format!(
                "segment offset {} and size {} must be multiples of 512 and of the sector size {sector}",
                layout.offset, layout.size
            )));
        }
        check_range(layout.offset, layout.size, inner.len()).map_err(|_| {
            invalid(format!(
                "segment ({} bytes at offset {}) does not fit on the device ({} bytes)",
                layout.size,
                layout.offset,
                inner.len()
            ))
        })?;
        Ok(Self {
            inner,
            layout,
            ciphers: Mutex::new(Vec::new()),
            template: Mutex::new(cipher),
            stripes: (0..RMW_STRIPES).map(|_| Mutex::new(())).collect(),
            iv_large_sectors: false,
        })
    }

    /// Counts IV/tweak numbers in sectors of the layout's sector size
    /// instead of 512-byte units, as dm-crypt's `iv_large_sectors` does:
    /// the number is (512-byte position + `iv_tweak`) divided by the
    /// sector size in 512-byte units, so `iv_tweak` must be a whole number
    /// of sectors (dm-crypt refuses any other IV offset).
    pub fn with_iv_large_sectors(mut self) -> io::Result<Self> {
        let units = u64::from(self.layout.sector_size / 512);
        if self.layout.iv_tweak % units != 0 {
            return Err(invalid(format!(
                "an IV offset of {} 512-byte sectors is not a whole number of {}-byte sectors",
                self.layout.iv_tweak, self.layout.sector_size
            )));
        }
        self.iv_large_sectors = true;
        Ok(self)
    }

    #[must_use]
    pub fn layout(&self) -> CryptLayout {
        self.layout
    }

    #[must_use]
    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn sector(&self) -> usize {
        self.layout.sector_size as usize
    }

    /// Runs `f` with a cipher instance from the pool.
    fn with_cipher<T>(
        &self,
        f: impl FnOnce(&mut SectorCipher) -> Result<T, rampart_crypto::CryptoError>,
    ) -> io::Result<T> {
        let pooled = lock(&self.ciphers).pop();
        let mut cipher = match pooled {
            Some(cipher) => cipher,
            None => lock(&self.template).try_clone().map_err(io::Error::other)?,
        };
        let result = f(&mut cipher).map_err(io::Error::other);
        lock(&self.ciphers).push(cipher);
        result
    }

    /// The bytes each core takes of a `len`-byte request (whole sectors),
    /// or `None` when the request is too small to split or there is one
    /// core.
    fn per_core(&self, len: usize) -> Option<usize> {
        let threads = rayon::current_num_threads();
        if len < PARALLEL_MIN_BYTES || threads < 2 {
            return None;
        }
        let sector = self.sector();
        Some(len.div_ceil(threads).div_ceil(sector) * sector)
    }

    /// The plain64 tweak of the sector at plaintext offset `offset`, and the
    /// tweak step per sector (LUKS2 counts tweaks in 512-byte units; with
    /// large-sector IVs, in sectors).
    fn tweaks(&self, offset: u64) -> (u64, u64) {
        let units = u64::from(self.layout.sector_size / 512);
        let first = (offset / 512).wrapping_add(self.layout.iv_tweak);
        if self.iv_large_sectors {
            (first / units, 1)
        } else {
            (first, units)
        }
    }

    /// En- or decrypts whole sectors on the calling thread.
    pub(crate) fn transform_here(
        &self,
        chunk: &mut [u8],
        offset: u64,
        encrypt: bool,
    ) -> io::Result<()> {
        let sector = self.sector();
        let (first, step) = self.tweaks(offset);
        self.with_cipher(|cipher| {
            if encrypt {
                cipher.encrypt(chunk, sector, first, step)
            } else {
                cipher.decrypt(chunk, sector, first, step)
            }
        })
    }

    /// En- or decrypts whole sectors of plaintext offset `offset`, splitting
    /// large buffers across cores.
    fn transform(&self, data: &mut [u8], offset: u64, encrypt: bool) -> io::Result<()> {
        let run =
            |chunk: &mut [u8], chunk_offset: u64| self.transform_here(chunk, chunk_offset, encrypt);
        match self.per_core(data.len()) {
            None => run(data, offset),
            Some(piece) => data
                .par_chunks_mut(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| run(chunk, offset + (i * piece) as u64)),
        }
    }

    /// Decrypts whole sectors of this segment's ciphertext in place;
    /// `offset` is their plaintext offset in the segment (it sets the IVs).
    /// Large buffers are split across cores.
    pub fn decrypt_sectors(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_whole(buf.len(), offset)?;
        self.transform(buf, offset, false)
    }

    /// Encrypts whole sectors of plaintext in place, as they are stored at
    /// plaintext offset `offset` of the segment.
    pub fn encrypt_sectors(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_whole(buf.len(), offset)?;
        self.transform(buf, offset, true)
    }

    /// Re-encrypts whole sectors of ciphertext in place from this
    /// segment's key to `to`'s (both at plaintext offset `offset`), in one
    /// pass per piece while it is in cache, split across cores. With
    /// `checksums`, first writes the hash of each `block`-byte block of the
    /// input ciphertext to `out` (hash size bytes per block, in order).
    pub fn recrypt_sectors<E: BlockDevice>(
        &self,
        to: &CryptDevice<E>,
        buf: &mut [u8],
        offset: u64,
        checksums: Option<(rampart_crypto::HashAlg, usize, &mut [u8])>,
    ) -> io::Result<()> {
        self.recrypt(to, buf, offset, checksums, false)
    }

    /// [`Self::recrypt_sectors`] of the ciphertext stored under this
    /// segment at plaintext offset `offset`, read into `buf` first. Where
    /// the device underneath lends its stored bytes in place (a mapped
    /// page cache), each piece is hashed and decrypted straight from them
    /// into `buf`: the old ciphertext is never copied (an online
    /// reencryption's hotzone costs its clients that much less CPU).
    pub fn read_recrypt_sectors<E: BlockDevice>(
        &self,
        to: &CryptDevice<E>,
        buf: &mut [u8],
        offset: u64,
        checksums: Option<(rampart_crypto::HashAlg, usize, &mut [u8])>,
    ) -> io::Result<()> {
        self.recrypt(to, buf, offset, checksums, true)
    }

    fn recrypt<E: BlockDevice>(
        &self,
        to: &CryptDevice<E>,
        buf: &mut [u8],
        offset: u64,
        checksums: Option<(rampart_crypto::HashAlg, usize, &mut [u8])>,
        stored: bool,
    ) -> io::Result<()> {
        self.check_whole(buf.len(), offset)?;
        to.check_whole(buf.len(), offset)?;
        let unit = self.sector().max(to.sector());
        let (hash, block, out) = match checksums {
            Some((hash, block, out)) => (Some(hash), block, out),
            None => (None, unit, &mut [][..]),
        };
        if block == 0 || block % unit != 0 && unit % block != 0 {
            return Err(invalid(format!("checksum blocks of {block} bytes and sectors of {unit}")));
        }
        let hlen = hash.map_or(0, rampart_crypto::HashAlg::output_len);
        if hash.is_some() && out.len() < buf.len().div_ceil(block) * hlen {
            return Err(invalid("checksum buffer too small".into()));
        }
        // Pieces that stay in the caches, whole blocks and sectors.
        let grain = block.max(unit);
        let piece = (256 << 10).max(grain) / grain * grain;
        let run = |(i, chunk): (usize, &mut [u8]), sums: &mut [u8]| -> io::Result<()> {
            let at = offset + (i * piece) as u64;
            if stored {
                let (first, step) = self.tweaks(at);
                let sector = self.sector();
                let lent = self.with_cipher(|cipher| {
                    let mut done = Ok(());
                    let lent =
                        self.inner.lend_stored(self.layout.offset + at, chunk.len(), &mut |old| {
                            done = match hash {
                                Some(hash) => rampart_crypto::digest_blocks(hash, old, block, sums),
                                None => Ok(()),
                            }
                            .and_then(|()| cipher.decrypt_to(old, chunk, sector, first, step));
                        });
                    done.map(|()| lent)
                })?;
                if lent {
                    return to.transform_here(chunk, at, true);
                }
                self.inner.read_at(chunk, self.layout.offset + at)?;
            }
            if let Some(hash) = hash {
                rampart_crypto::digest_blocks(hash, chunk, block, sums)
                    .map_err(io::Error::other)?;
            }
            self.transform_here(chunk, at, false)?;
            to.transform_here(chunk, at, true)
        };
        let sums_per_piece = piece / block * hlen;
        if hash.is_some() {
            buf.par_chunks_mut(piece)
                .enumerate()
                .zip(out.par_chunks_mut(sums_per_piece))
                .try_for_each(|(c, sums)| run(c, sums))
        } else {
            buf.par_chunks_mut(piece).enumerate().try_for_each(|c| run(c, &mut []))
        }
    }

    fn check_whole(&self, len: usize, offset: u64) -> io::Result<()> {
        let sector = self.layout.sector_size as u64;
        if len as u64 % sector != 0 || offset % sector != 0 {
            return Err(invalid(format!(
                "{len} bytes at offset {offset} are not whole {sector}-byte sectors"
            )));
        }
        check_range(offset, len as u64, self.layout.size)
    }

    /// Reads and decrypts whole sectors. A large request is cut into
    /// pieces that each core reads and decrypts while the piece is still in
    /// its cache: the ciphertext crosses memory once, as an unencrypted
    /// server's read does, instead of once more for an in-place pass over
    /// a buffer larger than the caches.
    ///
    /// Where the device underneath lends its stored bytes in place (a
    /// mapped page cache), they are decrypted straight into `buf`: the
    /// ciphertext is read once, by the cipher, and never copied.
    fn read_sectors(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let run = |chunk: &mut [u8], at: u64| {
            if self.decrypt_lent(chunk, at)? {
                return Ok(());
            }
            self.inner.read_at(chunk, self.layout.offset + at)?;
            self.transform_here(chunk, at, false)
        };
        match self.cached_piece(buf.len()) {
            None => run(buf, offset),
            Some(piece) => buf
                .par_chunks_mut(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| run(chunk, offset + (i * piece) as u64)),
        }
    }

    /// Decrypts the ciphertext of `out`'s sectors at plaintext offset `at`
    /// from the stored bytes the device underneath lends, if it does;
    /// false when it did not (then `out` holds nothing of use).
    fn decrypt_lent(&self, out: &mut [u8], at: u64) -> io::Result<bool> {
        let sector = self.sector();
        let (first, step) = self.tweaks(at);
        self.with_cipher(|cipher| {
            let mut decrypted = Ok(());
            let lent = self.inner.lend_stored(self.layout.offset + at, out.len(), &mut |stored| {
                decrypted = cipher.decrypt_to(stored, out, sector, first, step);
            });
            if lent {
                decrypted.map(|()| true)
            } else {
                Ok(false)
            }
        })
    }

    /// Encrypts whole sectors out of place into a per-thread buffer and
    /// writes them; large requests in cache-sized pieces on every core.
    fn write_sectors(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let run = |chunk: &[u8], at: u64| {
            SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                if scratch.len() < chunk.len() {
                    scratch.resize(chunk.len(), 0);
                }
                let ciphertext = &mut scratch[..chunk.len()];
                let (first, step) = self.tweaks(at);
                let sector = self.sector();
                self.with_cipher(|cipher| {
                    cipher.encrypt_to(chunk, ciphertext, sector, first, step)
                })?;
                self.inner.write_at(ciphertext, self.layout.offset + at)
            })
        };
        match self.cached_piece(buf.len()) {
            None => run(buf, offset),
            Some(piece) => buf
                .par_chunks(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| run(chunk, offset + (i * piece) as u64)),
        }
    }

    /// Encrypts whole sectors in place and writes them, in cache-sized
    /// pieces on every core for a large request.
    fn write_sectors_in_place(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let run = |chunk: &mut [u8], at: u64| {
            self.transform_here(chunk, at, true)?;
            self.inner.write_at(chunk, self.layout.offset + at)
        };
        match self.cached_piece(buf.len()) {
            None => run(buf, offset),
            Some(piece) => buf
                .par_chunks_mut(piece)
                .enumerate()
                .try_for_each(|(i, chunk)| run(chunk, offset + (i * piece) as u64)),
        }
    }

    /// The piece size for I/O plus cipher on a `len`-byte request (whole
    /// sectors that stay in a core's L2 cache), or `None` when the request
    /// is small enough to run on the calling thread in one go.
    fn cached_piece(&self, len: usize) -> Option<usize> {
        if len < PARALLEL_MIN_BYTES || rayon::current_num_threads() < 2 {
            return None;
        }
        let sector = self.sector();
        Some(CACHED_PIECE.max(sector) / sector * sector)
    }

    /// Replaces `patch.len()` bytes at `within` of the sector at `sector_offset`.
    fn patch_sector(&self, sector_offset: u64, within: usize, patch: &[u8]) -> io::Result<()> {
        let sector = self.sector();
        let stripe = (sector_offset / sector as u64) as usize % RMW_STRIPES;
        let _guard = lock(&self.stripes[stripe]);
        let mut block = [0u8; MAX_SECTOR];
        let block = &mut block[..sector];
        self.read_sectors(block, sector_offset)?;
        block[within..within + patch.len()].copy_from_slice(patch);
        self.write_sectors(block, sector_offset)
    }
}

impl<D: BlockDevice> BlockDevice for CryptDevice<D> {
    fn len(&self) -> u64 {
        self.layout.size
    }

    fn block_size(&self) -> u32 {
        self.layout.sector_size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.layout.size)?;
        let read = |b: &mut [u8], at: u64| self.read_sectors(b, at);
        unaligned::read(buf, offset, self.sector(), read, read)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.layout.size)?;
        unaligned::write(
            buf,
            offset,
            self.sector(),
            |at, within, bytes| self.patch_sector(at, within, bytes),
            |whole, at| self.write_sectors(whole, at),
        )
    }

    fn write_at_mut(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.layout.size)?;
        let sector = self.sector();
        let (head, middle) = unaligned::split(offset, buf.len(), self.sector());
        // Partial sectors first, from the plaintext, then the whole sectors
        // are encrypted where they lie.
        if head > 0 {
            let within = (offset % sector as u64) as usize;
            self.patch_sector(offset - within as u64, within, &buf[..head])?;
        }
        let middle_offset = offset + head as u64;
        let tail_start = head + middle;
        if tail_start < buf.len() {
            self.patch_sector(middle_offset + middle as u64, 0, &buf[tail_start..])?;
        }
        if middle > 0 {
            self.write_sectors_in_place(&mut buf[head..tail_start], middle_offset)?;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.layout.size)?;
        // Only whole sectors can be let go; a partial sector keeps its data.
        let sector = self.sector() as u64;
        let start = offset.div_ceil(sector) * sector;
        let end = (offset + len) / sector * sector;
        if end > start {
            self.inner.discard(self.layout.offset + start, end - start)?;
        }
        Ok(())
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.layout.size)?;
        // Zeros must read back as zeros through the cipher, so they are
        // encrypted like any other data.
        const CHUNK: u64 = 4 << 20;
        let zeros = vec![0u8; len.min(CHUNK) as usize];
        let mut done = 0;
        while done < len {
            let step = (len - done).min(CHUNK);
            self.write_at(&zeros[..step as usize], offset + done)?;
            done += step;
        }
        Ok(())
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Locks a mutex; a panic in another holder leaves no broken invariant
/// here (the data is a cipher pool or unit), so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
