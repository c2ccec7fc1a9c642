//! Re-encryption of a volume's data under a new volume key, in place, on
//! LUKS2's reencryption metadata (as cryptsetup 2.6 writes it, so that
//! either tool resumes what the other started).
//!
//! The same engine encrypts plaintext in place (mode encrypt, forward, or
//! backward with a data shift: each hotzone read from its old place and
//! written the shift further up, so the source survives a crash) and
//! decrypts (mode decrypt, backward), as the header records it.
//!
//! The data area is processed in hotzones (forward, or backward from the
//! end, as cryptsetup picks them). For each hotzone:
//!
//! 1. its old ciphertext is read;
//! 2. the resilience data goes to the reencrypt keyslot's area (checksum:
//!    a hash per block of old ciphertext; journal: the ciphertext itself)
//!    and the header then records the hotzone as `in-reencryption` — the
//!    commit point, each write synced;
//! 3. the data is decrypted with the old key, encrypted with the new one,
//!    written and synced;
//! 4. the header moves the boundary past the hotzone.
//!
//! After a crash between 2 and 4 the header names the hotzone, and
//! [`Reencryption::run`] first repairs it from the resilience data:
//! checksum — every block whose hash still matches the old ciphertext is
//! re-encrypted, the others already were; journal — the whole hotzone is
//! re-encrypted from the copy. With resilience `none` the header changes
//! only when the run ends or stops, as with cryptsetup: a crash loses the
//! position, and with it the data of the hotzones done since.
//!
//! A volume in the middle of a reencryption is served by
//! [`ReencryptingDevice`]: below the boundary the new key, above it the
//! old one, as dm-crypt maps it. Given that device
//! ([`ReencryptOptions::serving`]), a forward reencryption runs while the
//! volume is in use: each hotzone is read only after the device has closed
//! it to its clients (see [`crate::gate`]), so no write is lost between the
//! read and the write of a hotzone, and there is no read-ahead.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use rampart_crypto::{digest_blocks, HashAlg, SecretBytes};
use rampart_luks::{Luks, MetadataIo, ReencryptState, Resilience};

use crate::gate::{Access, ZoneGate};
use crate::lock::ReencryptionLock;
use crate::{
    check_range, sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, FileDevice,
    SectorCipher, VolumeError, VolumePaths,
};

/// The head of Rampart's record of an in-place shift's hotzone.
const SHIFT_RECORD_MAGIC: &[u8; 8] = b"RPDSHZ01";

/// Default hotzone size with checksum or no resilience (cryptsetup's is up
/// to 1 GiB; a smaller one bounds memory and the work lost to a crash).
pub const DEFAULT_HOTZONE: u64 = 64 << 20;

/// How a run goes.
#[derive(Debug, Default)]
pub struct ReencryptOptions {
    /// The largest hotzone in bytes (rounded down to the sector and
    /// checksum block sizes); `None`: [`DEFAULT_HOTZONE`], or the journal
    /// area's size.
    pub hotzone_size: Option<u64>,
    /// Stop cleanly (the header records the position) after this many
    /// hotzones.
    pub stop_after: Option<u64>,
    /// Testing crash recovery: after this many whole hotzones, write half
    /// of the next one and return [`ReencryptError::SimulatedCrash`],
    /// leaving the header as a crash would.
    pub crash_after: Option<u64>,
    /// The device serving the volume meanwhile (online reencryption): each
    /// hotzone is closed to its clients while it is re-encrypted, and the
    /// device's boundary moves with the run.
    pub serving: Option<Arc<ReencryptingDevice>>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// All data is under the new key and the reencryption metadata is gone.
    Finished,
    /// Stopped with this many bytes done; resume later.
    Stopped { done: u64 },
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReencryptError {
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error("simulated crash in the hotzone at byte {0}")]
    SimulatedCrash(u64),
}

impl From<rampart_luks::Error> for ReencryptError {
    fn from(e: rampart_luks::Error) -> Self {
        Self::Volume(e.into())
    }
}

/// Shared storage under the layers of a reencryption.
pub type SharedDevice = Arc<dyn BlockDevice>;

/// Where the header is read and written.
enum Header {
    /// A volume's files, each header access under cryptsetup's metadata
    /// lock.
    Paths(VolumePaths),
    /// Any metadata device (tests, simulations): no locking.
    Io(Arc<dyn MetadataIo + Send + Sync>),
}

impl Header {
    fn open(&self, write: bool) -> Result<Box<dyn MetadataIo + '_>, VolumeError> {
        match self {
            Self::Paths(paths) => Ok(Box::new(paths.open_header(write)?)),
            Self::Io(io) => Ok(Box::new(&**io)),
        }
    }
}

/// A reencryption in progress on a volume, with both keys verified.
pub struct Reencryption {
    header: Header,
    what: String,
    luks: Luks,
    state: ReencryptState,
    raw: SharedDevice,
    /// `None`: a plaintext side (encryption, decryption).
    old: Option<CryptDevice<SharedDevice>>,
    new: Option<CryptDevice<SharedDevice>>,
    /// The data size (plaintext bytes the layout maps).
    data_len: u64,
    /// Bytes to process in all (with a data shift, the plaintext before
    /// it; else the data size).
    total: u64,
    done: u64,
    _lock: Option<ReencryptionLock>,
}

impl std::fmt::Debug for Reencryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reencryption")
            .field("data", &self.what)
            .field("size", &self.data_len)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

fn io_err(paths: &VolumePaths, what: &str, e: io::Error) -> VolumeError {
    VolumeError::io(format!("{what} {}", paths.data.display()), e)
}

/// The plaintext size of the data area of a reencryption: the fixed size,
/// or the device's bytes after the data offset in whole sectors of both
/// sides.
fn data_size(state: &ReencryptState, device_len: u64) -> Result<u64, VolumeError> {
    let unit = u64::from(state.old.sector_size.max(state.new.sector_size));
    // Moving the data down, the ciphertext above the shift sets the size.
    let start = if state.decrypt_shift() { state.old.offset } else { state.new.offset };
    let available = device_len.checked_sub(start).ok_or_else(|| {
        rampart_luks::Error::Corrupt(format!(
            "the data starts at byte {start} but the device has only {device_len} bytes"
        ))
    })?;
    let size = match state.fixed_size {
        Some(n) if n <= available => n,
        Some(n) => {
            return Err(rampart_luks::Error::Corrupt(format!(
            "the reencryption covers {n} bytes but the device holds {available} after the header"
        ))
            .into())
        }
        None => available / unit * unit,
    };
    if size % unit != 0 {
        return Err(rampart_luks::Error::Corrupt(format!(
            "the data size {size} is not a multiple of the sector size {unit}"
        ))
        .into());
    }
    Ok(size)
}

fn crypt_side(
    raw: &SharedDevice,
    side: &rampart_luks::ReencryptSide,
    size: u64,
    key: &SecretBytes,
) -> Result<Option<CryptDevice<SharedDevice>>, VolumeError> {
    let Some(cipher) = side.cipher else {
        return Ok(None);
    };
    let layout = CryptLayout {
        offset: side.offset,
        size,
        sector_size: side.sector_size,
        iv_tweak: side.iv_tweak,
    };
    let cipher = SectorCipher::new(sector_cipher_kind(cipher), key)?;
    CryptDevice::new(Arc::clone(raw), layout, cipher)
        .map(Some)
        .map_err(|e| VolumeError::io("cannot map the data", e))
}

impl Reencryption {
    /// Opens the reencryption recorded in the header of `paths`, with its
    /// old and new volume keys (checked against their digests and the
    /// reencryption digest; an empty key for a plaintext side), under
    /// cryptsetup's reencryption lock and the data-writer lock.
    pub fn open(
        paths: &VolumePaths,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
    ) -> Result<Self, VolumeError> {
        let (_, luks, _) = paths.load_released()?;
        let lock = ReencryptionLock::try_acquire(luks.uuid())
            .map_err(|e| io_err(paths, "cannot lock the reencryption of", e))?;
        // Loaded again under the lock: another process may have moved on.
        let (_, luks, _) = paths.load_released()?;
        let raw =
            FileDevice::open(&paths.data, false).map_err(|e| io_err(paths, "cannot open", e))?;
        Self::with(
            Header::Paths(paths.clone()),
            paths.data.display().to_string(),
            luks,
            Arc::new(raw),
            old_key,
            new_key,
            Some(lock),
        )
    }

    /// Opens the reencryption recorded in the header of `paths` over `raw`,
    /// the data device a server of the volume already holds open (and
    /// holds the data-writer lock on), under cryptsetup's reencryption
    /// lock.
    pub fn open_served(
        paths: &VolumePaths,
        raw: SharedDevice,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
    ) -> Result<Self, VolumeError> {
        let (_, luks, _) = paths.load_released()?;
        let lock = ReencryptionLock::try_acquire(luks.uuid())
            .map_err(|e| io_err(paths, "cannot lock the reencryption of", e))?;
        let (_, luks, _) = paths.load_released()?;
        Self::with(
            Header::Paths(paths.clone()),
            paths.data.display().to_string(),
            luks,
            raw,
            old_key,
            new_key,
            Some(lock),
        )
    }

    /// Opens the reencryption recorded on `header` over the data device
    /// `data` (the same device for an attached header), without any lock:
    /// for storage no other process sees (tests, simulations).
    pub fn open_on(
        data: SharedDevice,
        header: Arc<dyn MetadataIo + Send + Sync>,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
    ) -> Result<Self, VolumeError> {
        let (luks, _) = Luks::load(&*header)?;
        Self::with(Header::Io(header), "the volume".into(), luks, data, old_key, new_key, None)
    }

    fn with(
        header: Header,
        what: String,
        luks: Luks,
        raw: SharedDevice,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        lock: Option<ReencryptionLock>,
    ) -> Result<Self, VolumeError> {
        let state = luks.reencrypt_state()?.ok_or_else(|| {
            rampart_luks::Error::InvalidArgument("the volume is not being re-encrypted".into())
        })?;
        state.check_supported()?;
        luks.reencrypt_verify(old_key, new_key)?;
        let size = data_size(&state, raw.len())?;
        let old = crypt_side(&raw, &state.old, size, old_key)?;
        let new = crypt_side(&raw, &state.new, size, new_key)?;
        if old.is_none() && new.is_none() {
            return Err(rampart_luks::Error::Corrupt(
                "neither side of the reencryption is encrypted".into(),
            )
            .into());
        }
        let total = match (&state.resilience, state.previous_size) {
            (Resilience::Datashift { .. }, Some(p)) => p.min(size),
            _ => size,
        };
        let mut job = Self {
            header,
            what,
            luks,
            state,
            raw,
            old,
            new,
            data_len: size,
            total,
            done: 0,
            _lock: lock,
        };
        job.done = job.total.saturating_sub(job.remaining(job.first_zone(DEFAULT_HOTZONE)));
        Ok(job)
    }

    /// Data bytes to process in all.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.total
    }

    /// Data bytes processed.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.done
    }

    #[must_use]
    pub fn state(&self) -> &ReencryptState {
        &self.state
    }

    fn data_io(&self, what: &str, e: io::Error) -> VolumeError {
        VolumeError::io(format!("{what} {}", self.what), e)
    }

    /// The first hotzone to process from the recorded state.
    fn first_zone(&self, max: u64) -> Option<(u64, u64)> {
        self.state.next_hotzone(self.data_len, max)
    }

    /// Bytes of the zones from `zone` on.
    fn remaining(&self, mut zone: Option<(u64, u64)>) -> u64 {
        let mut sum = 0u64;
        while let Some(z) = zone {
            sum += z.1;
            zone = rampart_luks::following_hotzone(&self.state, self.data_len, DEFAULT_HOTZONE, z);
        }
        sum
    }

    /// Where the old data of the hotzone at `offset` is read.
    fn source(&self, offset: u64) -> u64 {
        match self.state.moved {
            Some((moved, _)) if offset == 0 => moved,
            _ => self.state.old.offset + offset,
        }
    }

    /// Writes a checkpoint under the exclusive metadata lock.
    fn checkpoint(
        &mut self,
        zone: (u64, u64),
        hot: bool,
        area: Option<&[u8]>,
    ) -> Result<(), VolumeError> {
        let header = self.header.open(true)?;
        self.luks.reencrypt_checkpoint(&*header, self.data_len, zone, hot, area)?;
        Ok(())
    }

    /// Old data to new, in place: decrypted with the old key, encrypted
    /// with the new one (either may be plaintext).
    fn transform(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        match (&self.old, &self.new) {
            (Some(old), Some(new)) => old.recrypt_sectors(new, buf, at, None),
            (None, Some(new)) => new.encrypt_sectors(buf, at),
            (Some(old), None) => old.decrypt_sectors(buf, at),
            (None, None) => Ok(()),
        }
    }

    fn unit(&self) -> u64 {
        u64::from(self.state.old.sector_size.max(self.state.new.sector_size))
    }

    /// The hotzone length: the option or default, bounded by what the
    /// resilience area holds, in whole units.
    fn hotzone_len(&self, wanted: Option<u64>) -> Result<u64, VolumeError> {
        let mut unit = self.unit();
        let limit = match &self.state.resilience {
            Resilience::Checksum { hash, block_size } => {
                unit = unit.max(u64::from(*block_size));
                self.state.area_size / hash.output_len() as u64 * u64::from(*block_size)
            }
            Resilience::Journal => self.state.area_size,
            // The data shift sets the hotzone, as in cryptsetup.
            Resilience::Datashift { shift, .. } => return Ok(*shift),
            _ => u64::MAX,
        };
        let len = wanted.unwrap_or(DEFAULT_HOTZONE).min(limit).min(1 << 30);
        let len = len / unit * unit;
        if len == 0 {
            return Err(rampart_luks::Error::InvalidArgument(format!(
                "the hotzone must hold at least {unit} bytes (the resilience area has {})",
                self.state.area_size
            ))
            .into());
        }
        Ok(len)
    }

    /// Repairs the hotzone a crash interrupted, from its resilience data,
    /// and records it as done.
    fn recover(&mut self, start: u64, len: u64) -> Result<(), VolumeError> {
        check_range(start, len, self.data_len)
            .map_err(|e| self.data_io("the interrupted hotzone lies beyond the data of", e))?;
        let buf_len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| rampart_luks::Error::Corrupt(format!("a hotzone of {len} bytes")))?;
        let offset = self.state.new.offset + start;
        match self.state.resilience.clone() {
            // The moved chunk of a decryption moving the data down is
            // decrypted in place, under its checksums or its journal.
            Resilience::Datashift { checksum: Some((hash, block_size)), .. }
                if self.state.decrypt_shift() && start == 0 =>
            {
                self.recover_checksum(hash, block_size, start, len, buf_len, offset)?;
            }
            Resilience::Datashift { .. } if self.state.decrypt_shift() && start == 0 => {
                self.recover_journal(start, len, buf_len, offset)?;
            }
            Resilience::Checksum { hash, block_size } => {
                self.recover_checksum(hash, block_size, start, len, buf_len, offset)?;
            }
            Resilience::Journal => {
                self.recover_journal(start, len, buf_len, offset)?;
            }
            Resilience::Datashift { .. } if self.state.in_place_shift() => {
                // Encrypted where it lies (a detached header with a data
                // shift): only Rampart's record of the hotzone's plaintext
                // tells which blocks are still plaintext. (cryptsetup's
                // repair would re-encrypt the data one shift below in its
                // place.)
                let Some(sums) = self.read_shift_record(start, len)? else {
                    return Err(rampart_luks::Error::UnsupportedCipher(format!(
                        "the hotzone at byte {start} ({len} bytes) of this in-place encryption was interrupted and the header keeps no record of its plaintext (resilience datashift, started by another tool): it may be partly encrypted and cannot be recovered"
                    ))
                    .into());
                };
                let bs = rampart_luks::IN_PLACE_SHIFT_BLOCK as usize;
                let mut data = SecretBytes::zeroed(buf_len);
                self.raw
                    .read_at(data.expose_mut(), offset)
                    .map_err(|e| self.data_io("cannot read the hotzone of", e))?;
                let mut now = vec![0u8; buf_len.div_ceil(bs) * 32];
                digest_blocks(HashAlg::Sha256, data.expose(), bs, &mut now)?;
                for (i, block) in data.expose_mut().chunks_mut(bs).enumerate() {
                    if now[i * 32..(i + 1) * 32] == sums[i * 32..(i + 1) * 32] {
                        let at = start + (i * bs) as u64;
                        self.transform(block, at)
                            .and_then(|()| self.raw.write_at(block, offset + (i * bs) as u64))
                            .map_err(|e| self.data_io("cannot repair the hotzone of", e))?;
                    }
                }
            }
            Resilience::Datashift { .. } => {
                // The source is intact: the hotzone only overwrites data
                // already moved.
                let mut data = SecretBytes::zeroed(buf_len);
                self.raw
                    .read_at(data.expose_mut(), self.source(start))
                    .and_then(|()| self.transform(data.expose_mut(), start))
                    .and_then(|()| self.raw.write_at(data.expose(), offset))
                    .map_err(|e| self.data_io("cannot repair the hotzone of", e))?;
            }
            other => {
                return Err(rampart_luks::Error::UnsupportedCipher(format!(
                    "a hotzone interrupted with resilience {} cannot be recovered: its data may be partly under each key",
                    other.name()
                ))
                .into())
            }
        }
        self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
        self.checkpoint((start, len), false, None)
    }

    /// Checksum recovery of the hotzone `(start, len)` at device byte
    /// `offset`: every block whose hash still matches the old data is
    /// processed, the others already were.
    fn recover_checksum(
        &self,
        hash: HashAlg,
        block_size: u32,
        start: u64,
        len: u64,
        buf_len: usize,
        offset: u64,
    ) -> Result<(), VolumeError> {
        let bs = block_size as usize;
        let unit = self.unit() as usize;
        if bs % unit != 0 || buf_len % bs != 0 {
            return Err(rampart_luks::Error::UnsupportedCipher(format!(
                "checksum blocks of {bs} bytes do not divide the {unit}-byte sectors and the {len}-byte hotzone"
            ))
            .into());
        }
        let count = buf_len / bs;
        let hlen = hash.output_len();
        if (count * hlen) as u64 > self.state.area_size {
            return Err(rampart_luks::Error::Corrupt(
                "the hotzone's checksums do not fit in the resilience area".into(),
            )
            .into());
        }
        let mut sums = vec![0u8; count * hlen];
        self.header
            .open(false)?
            .read_at(self.state.area_offset, &mut sums)
            .map_err(|e| self.data_io("cannot read the checksums of", e))?;
        let mut data = SecretBytes::zeroed(buf_len);
        self.raw
            .read_at(data.expose_mut(), offset)
            .map_err(|e| self.data_io("cannot read the hotzone of", e))?;
        let mut now = vec![0u8; count * hlen];
        digest_blocks(hash, data.expose(), bs, &mut now)?;
        for (i, block) in data.expose_mut().chunks_mut(bs).enumerate() {
            if now[i * hlen..(i + 1) * hlen] == sums[i * hlen..(i + 1) * hlen] {
                let at = start + (i * bs) as u64;
                self.transform(block, at)
                    .and_then(|()| self.raw.write_at(block, offset + (i * bs) as u64))
                    .map_err(|e| self.data_io("cannot repair the hotzone of", e))?;
            }
        }
        Ok(())
    }

    /// Journal recovery of the hotzone `(start, len)` at device byte
    /// `offset`: the old data copied in the area is processed again.
    fn recover_journal(
        &self,
        start: u64,
        len: u64,
        buf_len: usize,
        offset: u64,
    ) -> Result<(), VolumeError> {
        if len > self.state.area_size {
            return Err(rampart_luks::Error::Corrupt(
                "the hotzone is larger than its journal".into(),
            )
            .into());
        }
        let mut data = SecretBytes::zeroed(buf_len);
        self.header
            .open(false)?
            .read_at(self.state.area_offset, data.expose_mut())
            .map_err(|e| self.data_io("cannot read the journal of", e))?;
        self.transform(data.expose_mut(), start)
            .and_then(|()| self.raw.write_at(data.expose(), offset))
            .map_err(|e| self.data_io("cannot repair the hotzone of", e))?;
        Ok(())
    }

    /// The record of an in-place shift's hotzone `(off, chunk)` (its
    /// plaintext): a head naming the hotzone, then a sha256 hash per
    /// 4096-byte block; `None` for a moved shift, or when the area (one
    /// cryptsetup sized) cannot hold it.
    fn shift_record(&self, chunk: &[u8], off: u64) -> Result<Option<Vec<u8>>, VolumeError> {
        let bs = rampart_luks::IN_PLACE_SHIFT_BLOCK;
        let len = chunk.len() as u64;
        if !self.state.in_place_shift() || len % bs != 0 || bs % self.unit() != 0 {
            return Ok(None);
        }
        let mut record = vec![0u8; 4096 + (len / bs) as usize * 32];
        if record.len() as u64 > self.state.area_size {
            return Ok(None);
        }
        record[..8].copy_from_slice(SHIFT_RECORD_MAGIC);
        record[8..16].copy_from_slice(&off.to_be_bytes());
        record[16..24].copy_from_slice(&len.to_be_bytes());
        digest_blocks(HashAlg::Sha256, chunk, bs as usize, &mut record[4096..])?;
        Ok(Some(record))
    }

    /// The block hashes of the record for the hotzone `(start, len)`, if
    /// the area holds one for exactly that hotzone.
    fn read_shift_record(&self, start: u64, len: u64) -> Result<Option<Vec<u8>>, VolumeError> {
        let bs = rampart_luks::IN_PLACE_SHIFT_BLOCK;
        if len % bs != 0 || bs % self.unit() != 0 {
            return Ok(None);
        }
        let size = 4096 + len / bs * 32;
        if size > self.state.area_size {
            return Ok(None);
        }
        let header = self.header.open(false)?;
        let mut head = [0u8; 24];
        header
            .read_at(self.state.area_offset, &mut head)
            .map_err(|e| self.data_io("cannot read the resilience area of", e))?;
        if &head[..8] != SHIFT_RECORD_MAGIC
            || head[8..16] != start.to_be_bytes()
            || head[16..24] != len.to_be_bytes()
        {
            return Ok(None);
        }
        // size <= the area, itself inside the header.
        let mut sums = vec![0u8; (size - 4096) as usize];
        header
            .read_at(self.state.area_offset + 4096, &mut sums)
            .map_err(|e| self.data_io("cannot read the resilience area of", e))?;
        Ok(Some(sums))
    }

    /// Repairs an interrupted hotzone, if the header records one, and
    /// stops there (what activating such a volume does in cryptsetup).
    pub fn recover_only(mut self) -> Result<(), VolumeError> {
        match self.state.hotzone {
            Some((start, len)) => self.recover(start, len),
            None => Ok(()),
        }
    }

    /// Runs (or resumes) the reencryption: recovery of an interrupted
    /// hotzone first, then hotzone after hotzone (forward or backward, as
    /// the header says) to the end, then the cleanup of the metadata.
    /// `progress` is told the bytes done and the total after each
    /// hotzone; `stop` ends the run cleanly at the next hotzone boundary.
    pub fn run(
        mut self,
        options: &ReencryptOptions,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ReencryptError> {
        let hot_max = self.hotzone_len(options.hotzone_size)?;
        if options.serving.is_some() {
            // Only what a server can map (every layout Rampart runs).
            self.state.check_servable()?;
        }
        let mut zone = match self.state.hotzone {
            Some((start, len)) => {
                match &options.serving {
                    Some(device) => {
                        device.gate.begin_zone(start, len);
                        device.gate.close_zone();
                        let recovered = self
                            .recover(start, len)
                            .and_then(|()| device.remap(&self.luks.data_map()?));
                        match &recovered {
                            Ok(()) => device.gate.end_zone(start + len),
                            Err(_) => device.gate.fail_zone(),
                        }
                        recovered?;
                    }
                    None => self.recover(start, len)?,
                }
                self.done += len;
                rampart_luks::following_hotzone(&self.state, self.data_len, hot_max, (start, len))
            }
            None => self.first_zone(hot_max),
        };
        let with_metadata = !matches!(self.state.resilience, Resilience::None);
        if let Some(device) = options.serving.clone() {
            let outcome = self.run_served(&device, zone, hot_max, options, stop, progress)?;
            return self.finish(outcome);
        }
        // At most 1 GiB (hotzone_len bounds it; a data shift is at most
        // the data offset).
        let buf_len =
            usize::try_from(hot_max.min(self.data_len)).unwrap_or(usize::MAX).min(1 << 30);
        let raw = Arc::clone(&self.raw);
        let state = self.state.clone();
        let size = self.data_len;
        let moved = self.state.moved;
        let old_offset = self.state.old.offset;
        let new_offset = self.state.new.offset;
        let mut last: Option<(u64, u64)> = None;
        // Three stages, each on its own thread and buffer: a reader
        // fetches the hotzone after next, this thread hashes and
        // re-encrypts the next one, and a writer writes (and syncs) this
        // one. The headers stay in order: a hotzone is opened (its
        // resilience data committed) only after the one before was
        // written, synced and recorded done; only the work that writes
        // nothing runs ahead.
        let outcome = std::thread::scope(|scope| -> Result<Outcome, ReencryptError> {
            let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(1);
            let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(3);
            let (write_tx, write_rx) = mpsc::sync_channel::<(Vec<u8>, u64, usize)>(1);
            let (written_tx, written_rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(1);
            if zone.is_some() {
                for _ in 0..3 {
                    let _ = empty_tx.send(vec![0u8; buf_len]);
                }
            }
            let first = zone;
            let reader = Arc::clone(&raw);
            scope.spawn(move || {
                let mut next = first;
                while let Some((off, len)) = next {
                    let Ok(mut buffer) = empty_rx.recv() else { return };
                    let src = match moved {
                        Some((m, _)) if off == 0 => m,
                        _ => old_offset + off,
                    };
                    // len <= hot_max <= buf_len: fits.
                    let read = match buffer.get_mut(..len as usize) {
                        Some(part) => reader.read_at(part, src),
                        None => Err(io::Error::other("a hotzone larger than its buffer")),
                    };
                    let failed = read.is_err();
                    if full_tx.send(read.map(|()| buffer)).is_err() || failed {
                        return;
                    }
                    next = rampart_luks::following_hotzone(&state, size, hot_max, (off, len));
                }
            });
            let writer = Arc::clone(&raw);
            scope.spawn(move || {
                for (buffer, at, len) in write_rx {
                    // len <= buf_len, as read.
                    let written = writer.write_at(&buffer[..len], at).and_then(|()| {
                        if with_metadata {
                            writer.flush()
                        } else {
                            Ok(())
                        }
                    });
                    if written_tx.send(written.map(|()| buffer)).is_err() {
                        return;
                    }
                }
            });
            // The hotzone being written: waits for it and records it done.
            let mut writing: Option<(u64, u64)> = None;
            let settle = |this: &mut Self,
                          writing: &mut Option<(u64, u64)>,
                          last: &mut Option<(u64, u64)>,
                          progress: &mut dyn FnMut(u64, u64)|
             -> Result<(), ReencryptError> {
                let Some(z) = writing.take() else { return Ok(()) };
                let buffer = written_rx
                    .recv()
                    .map_err(|_| io::Error::other("the writer thread stopped"))
                    .and_then(|r| r)
                    .map_err(|e| this.data_io("cannot write the data of", e))?;
                if with_metadata {
                    this.checkpoint(z, false, None)?;
                }
                *last = Some(z);
                this.done += z.1;
                progress(this.done.min(this.total), this.total);
                let _ = empty_tx.send(buffer);
                Ok(())
            };
            let mut zones = 0u64;
            progress(self.done, self.total);
            while let Some((off, len)) = zone {
                if stop.load(Ordering::Relaxed) || options.stop_after.is_some_and(|n| zones >= n) {
                    settle(&mut self, &mut writing, &mut last, progress)?;
                    return self.stop_here(with_metadata, last);
                }
                let mut buffer = full_rx
                    .recv()
                    .map_err(|_| io::Error::other("the reader thread stopped"))
                    .and_then(|r| r)
                    .map_err(|e| self.data_io("cannot read the data of", e))?;
                let chunk = &mut buffer[..len as usize];
                if options.crash_after.is_some_and(|n| zones >= n) {
                    settle(&mut self, &mut writing, &mut last, progress)?;
                    self.zone(chunk, off, true, with_metadata, false, || ())?;
                }
                let record = self.prepare(chunk, off, false)?;
                settle(&mut self, &mut writing, &mut last, progress)?;
                if with_metadata {
                    self.checkpoint((off, len), true, record.as_deref())?;
                }
                write_tx.send((buffer, new_offset + off, len as usize)).map_err(|_| {
                    self.data_io(
                        "cannot write the data of",
                        io::Error::other("the writer thread stopped"),
                    )
                })?;
                writing = Some((off, len));
                zones += 1;
                zone = rampart_luks::following_hotzone(
                    &self.state,
                    self.data_len,
                    hot_max,
                    (off, len),
                );
            }
            settle(&mut self, &mut writing, &mut last, progress)?;
            if let (false, Some(z)) = (with_metadata, last) {
                self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
                self.checkpoint(z, false, None)?;
            }
            Ok(Outcome::Finished)
        })?;
        self.finish(outcome)
    }

    /// The run loop of an online reencryption, encryption or decryption:
    /// each hotzone is closed to the serving device's clients, then read,
    /// processed and written, and the device's map moves past it.
    fn run_served(
        &mut self,
        device: &ReencryptingDevice,
        mut zone: Option<(u64, u64)>,
        hot_max: u64,
        options: &ReencryptOptions,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ReencryptError> {
        let with_metadata = !matches!(self.state.resilience, Resilience::None);
        // At most 1 GiB (hotzone_len bounds it).
        let mut buffer =
            vec![
                0u8;
                usize::try_from(hot_max.min(self.data_len)).unwrap_or(usize::MAX).min(1 << 30)
            ];
        let mut last = None;
        let mut zones = 0u64;
        progress(self.done, self.total);
        while let Some((off, len)) = zone {
            if stop.load(Ordering::Relaxed) || options.stop_after.is_some_and(|n| zones >= n) {
                return self.stop_here(with_metadata, last);
            }
            let chunk = buffer.get_mut(..len as usize).ok_or_else(|| {
                self.data_io(
                    "a hotzone larger than its buffer in",
                    io::ErrorKind::InvalidInput.into(),
                )
            })?;
            let crash = options.crash_after.is_some_and(|n| zones >= n);
            device.gate.begin_zone(off, len);
            let result = self
                .zone(chunk, off, crash, with_metadata, true, || device.gate.close_zone())
                .and_then(|()| {
                    // The clients of the hotzone, let in next, see it as
                    // the header now maps it (or will, without metadata).
                    let map = if with_metadata {
                        self.luks.data_map()?
                    } else {
                        self.luks.reencrypt_data_map_after(self.data_len, (off, len))?
                    };
                    device.remap(&map).map_err(ReencryptError::from)
                });
            match result {
                Ok(()) => device.gate.end_zone(off + len),
                Err(e) => {
                    device.gate.fail_zone();
                    return Err(e);
                }
            }
            last = Some((off, len));
            zones += 1;
            self.done += len;
            progress(self.done.min(self.total), self.total);
            zone = rampart_luks::following_hotzone(&self.state, self.data_len, hot_max, (off, len));
        }
        if let (false, Some(z)) = (with_metadata, last) {
            self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
            self.checkpoint(z, false, None)?;
        }
        Ok(Outcome::Finished)
    }

    /// Stops a run cleanly at a hotzone boundary; `last` is the last
    /// hotzone done.
    fn stop_here(
        &mut self,
        with_metadata: bool,
        last: Option<(u64, u64)>,
    ) -> Result<Outcome, ReencryptError> {
        if let (false, Some(z)) = (with_metadata, last) {
            // The data first, then the header that says so.
            self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
            self.checkpoint(z, false, None)?;
        }
        Ok(Outcome::Stopped { done: self.done })
    }

    /// Ends a run: after the last hotzone, the moved copy of a data shift
    /// and the reencryption metadata go.
    fn finish(&mut self, outcome: Outcome) -> Result<Outcome, ReencryptError> {
        if outcome != Outcome::Finished {
            return Ok(outcome);
        }
        if self.state.decrypt_shift() {
            // Moved down, the data leaves its last `shift` bytes of
            // ciphertext beyond its end: cryptsetup overwrites them with
            // random bytes.
            self.wipe_random(self.data_len, self.raw.len().saturating_sub(self.data_len))?;
        } else if let Some((offset, len)) = self.state.moved {
            // The copy of the first data chunk is plaintext: cryptsetup
            // overwrites it with random bytes before the end.
            self.wipe_random(offset, len)?;
        }
        self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
        let header = self.header.open(true)?;
        self.luks.reencrypt_finish(&*header)?;
        Ok(Outcome::Finished)
    }

    fn wipe_random(&self, offset: u64, len: u64) -> Result<(), VolumeError> {
        let mut at = offset;
        let end = offset.saturating_add(len).min(self.raw.len());
        while at < end {
            let n = (end - at).min(1 << 20);
            // n <= 1 MiB.
            let chunk = rampart_crypto::random_secret(n as usize)?;
            self.raw
                .write_at(chunk.expose(), at)
                .map_err(|e| self.data_io("cannot wipe the moved data of", e))?;
            at += n;
        }
        Ok(())
    }

    /// Processes the hotzone `[off, off+len)` whose old data is `chunk`:
    /// resilience data and header first, then (after `before_write`) the
    /// data, then the header that records it done. With `stored`, `chunk`
    /// is not read yet: the old data is read, or lent in place by the
    /// device (see [`Self::prepare`]).
    fn zone(
        &mut self,
        chunk: &mut [u8],
        off: u64,
        crash: bool,
        with_metadata: bool,
        stored: bool,
        before_write: impl FnOnce(),
    ) -> Result<(), ReencryptError> {
        let len = chunk.len() as u64;
        let zone = (off, len);
        let offset = self.state.new.offset + off;
        let record = self.prepare(chunk, off, stored)?;
        if with_metadata {
            self.checkpoint(zone, true, record.as_deref())?;
        }
        before_write();
        if crash {
            let half = (len / 2 / self.unit() * self.unit()) as usize;
            self.raw
                .write_at(&chunk[..half], offset)
                .and_then(|()| self.raw.flush())
                .map_err(|e| self.data_io("cannot write the data of", e))?;
            return Err(ReencryptError::SimulatedCrash(offset));
        }
        self.raw
            .write_at(chunk, offset)
            .map_err(|e| self.data_io("cannot write the data of", e))?;
        if with_metadata {
            self.raw.flush().map_err(|e| self.data_io("cannot sync", e))?;
            self.checkpoint(zone, false, None)?;
        }
        Ok(())
    }

    /// Takes what the resilience keeps of the hotzone at `off` whose old
    /// data is `chunk` (returned: the area's content for the checkpoint
    /// that opens the hotzone), and processes `chunk` in place. Writes
    /// nothing. With `stored`, `chunk` is not read yet: a re-encryption in
    /// place (checksum or no resilience) hashes and decrypts the old
    /// ciphertext straight from the device's mapped page cache when it
    /// lends it, sparing a copy; anything else reads it first.
    fn prepare(
        &self,
        chunk: &mut [u8],
        off: u64,
        stored: bool,
    ) -> Result<Option<Vec<u8>>, ReencryptError> {
        if stored {
            let in_place = self.source(off) == self.state.old.offset + off;
            match (&self.state.resilience, &self.old, &self.new) {
                (Resilience::Checksum { hash, block_size }, Some(old), Some(new)) if in_place => {
                    let bs = *block_size as usize;
                    let mut sums = vec![0u8; chunk.len().div_ceil(bs) * hash.output_len()];
                    old.read_recrypt_sectors(new, chunk, off, Some((*hash, bs, &mut sums)))
                        .map_err(|e| self.data_io("cannot re-encrypt the data of", e))?;
                    return Ok(Some(sums));
                }
                (Resilience::None, Some(old), Some(new)) if in_place => {
                    old.read_recrypt_sectors(new, chunk, off, None)
                        .map_err(|e| self.data_io("cannot re-encrypt the data of", e))?;
                    return Ok(None);
                }
                _ => self
                    .raw
                    .read_at(chunk, self.source(off))
                    .map_err(|e| self.data_io("cannot read the data of", e))?,
            }
        }
        let record = match self.state.resilience.clone() {
            Resilience::Checksum { hash, block_size } => {
                // Hashes of the old data, committed before any write.
                let bs = block_size as usize;
                let mut sums = vec![0u8; chunk.len().div_ceil(bs) * hash.output_len()];
                match (&self.old, &self.new) {
                    (Some(old), Some(new)) => old
                        .recrypt_sectors(new, chunk, off, Some((hash, bs, &mut sums)))
                        .map_err(|e| self.data_io("cannot re-encrypt the data of", e))?,
                    _ => {
                        digest_blocks(hash, chunk, bs, &mut sums).map_err(VolumeError::from)?;
                        self.transform(chunk, off)
                            .map_err(|e| self.data_io("cannot process the data of", e))?;
                    }
                }
                return Ok(Some(sums));
            }
            // The old data itself.
            Resilience::Journal => Some(chunk.to_vec()),
            Resilience::Datashift { checksum, .. } => {
                if self.state.decrypt_shift() && off == 0 {
                    // The moved chunk is decrypted in place: its
                    // checksums, or the chunk itself (journal), first.
                    Some(match checksum {
                        Some((hash, block_size)) => {
                            let hlen = hash.output_len();
                            let bs = block_size as usize;
                            let mut sums = vec![0u8; chunk.len().div_ceil(bs) * hlen];
                            digest_blocks(hash, chunk, bs, &mut sums).map_err(VolumeError::from)?;
                            sums
                        }
                        None => chunk.to_vec(),
                    })
                } else {
                    self.shift_record(chunk, off)?
                }
            }
            _ => None,
        };
        self.transform(chunk, off).map_err(|e| self.data_io("cannot process the data of", e))?;
        Ok(record)
    }
}

/// Starts decrypting the volume `data`, whose header is attached, by
/// moving the data down over the header, as `cryptsetup reencrypt
/// --decrypt --header NEWFILE` does (cryptsetup 2.6): the header (the
/// first data-offset bytes) is copied to the new file `new_header`
/// (created, mode 0600) and synced, the first data-offset bytes of
/// ciphertext are copied over it at the start of the device and synced,
/// then NEWFILE records the decryption (`online-reencrypt-v3`). A crash
/// before the last write leaves NEWFILE a detached header of the volume as
/// it was. `resilience` protects the moved chunk, decrypted in place last:
/// checksum or journal. Under the volume's metadata, reencryption and
/// data-writer locks.
pub fn start_decrypt_shift(
    data: &std::path::Path,
    new_header: &std::path::Path,
    key: &SecretBytes,
    resilience: Resilience,
    pbkdf: &rampart_luks::PbkdfChoice,
) -> Result<(), VolumeError> {
    let attached = VolumePaths::new(data, None);
    let raw = FileDevice::open(data, false).map_err(|e| io_err(&attached, "cannot open", e))?;
    start_decrypt_shift_on(&raw, data, new_header, key, resilience, pbkdf)
}

/// [`start_decrypt_shift`] through `raw`, the device at `data` that the
/// caller opened (a server, which holds its data-writer lock and keeps
/// every client request out while this runs: the first data-offset bytes
/// of ciphertext must not change between their copy and the header write
/// that moves them).
pub fn start_decrypt_shift_on(
    raw: &dyn BlockDevice,
    data: &std::path::Path,
    new_header: &std::path::Path,
    key: &SecretBytes,
    resilience: Resilience,
    pbkdf: &rampart_luks::PbkdfChoice,
) -> Result<(), VolumeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let attached = VolumePaths::new(data, None);
    let (_header_lock, luks, _) = attached.load(true)?;
    if luks.reencrypt_state()?.is_some() {
        return Err(rampart_luks::Error::InvalidArgument(
            "the volume is already being re-encrypted".into(),
        )
        .into());
    }
    if !luks.verify_volume_key(key)? {
        return Err(rampart_luks::Error::NoKey.into());
    }
    let segment = luks.segment()?;
    let shift = segment.offset;
    let sector = u64::from(segment.sector_size);
    let _lock = ReencryptionLock::try_acquire(luks.uuid())
        .map_err(|e| io_err(&attached, "cannot lock the reencryption of", e))?;
    let device_len = raw.len();
    let data_size = device_len.saturating_sub(shift) / sector * sector;
    let unit = sector.max(4096);
    if shift == 0 || shift % unit != 0 || data_size <= shift {
        return Err(rampart_luks::Error::InvalidArgument(format!(
            "moving the data down by its offset ({shift} bytes) needs an offset that is a non-zero multiple of {unit} bytes and more data than that (the device holds {data_size} bytes of data)"
        ))
        .into());
    }
    let resilience = match resilience {
        Resilience::Checksum { hash, block_size } => Resilience::Datashift {
            kind: "datashift-checksum".into(),
            shift,
            checksum: Some((hash, block_size)),
        },
        Resilience::Journal => {
            Resilience::Datashift { kind: "datashift-journal".into(), shift, checksum: None }
        }
        other => {
            return Err(rampart_luks::Error::InvalidArgument(format!(
                "resilience {} cannot protect a decryption that moves the data (checksum or journal), as in cryptsetup",
                other.name()
            ))
            .into())
        }
    };
    let copy =
        |what: &str, from: u64, len: u64, to: &mut dyn FnMut(&[u8], u64) -> io::Result<()>| {
            let mut buf = vec![0u8; 1 << 20];
            let mut at = 0u64;
            while at < len {
                // At most 1 MiB.
                let n = (len - at).min(1 << 20) as usize;
                raw.read_at(&mut buf[..n], from + at)
                    .and_then(|()| to(&buf[..n], at))
                    .map_err(|e| io_err(&attached, what, e))?;
                at += n as u64;
            }
            Ok::<(), VolumeError>(())
        };
    // A trial run on a copy in memory first, so that a request the
    // metadata cannot take (a journal too small for the moved chunk) is
    // refused before anything moves.
    let mut image = vec![0u8; usize::try_from(shift).unwrap_or(usize::MAX).min(1 << 30)];
    if image.len() as u64 != shift {
        return Err(rampart_luks::Error::InvalidArgument(format!(
            "a data offset of {shift} bytes is larger than any LUKS2 header"
        ))
        .into());
    }
    raw.read_at(&mut image, 0).map_err(|e| io_err(&attached, "cannot read the header of", e))?;
    let trial = rampart_luks::MemoryIo::from_vec(image);
    let (mut copy_luks, _) = Luks::load(&trial)?;
    let quick = rampart_luks::PbkdfChoice { forced_iterations: Some(1000), ..pbkdf.clone() };
    copy_luks.reencrypt_init_decrypt_shift(&trial, key, resilience.clone(), device_len, &quick)?;
    drop(trial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(new_header)
        .map_err(|e| {
            VolumeError::io(format!("cannot create header file {}", new_header.display()), e)
        })?;
    copy("cannot export the header of", 0, shift, &mut |chunk, _| file.write_all(chunk))?;
    file.sync_all()
        .map_err(|e| VolumeError::io(format!("cannot sync {}", new_header.display()), e))?;
    drop(file);
    if let Some(dir) = new_header.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(dir) = std::fs::File::open(dir) {
            dir.sync_all().map_err(|e| {
                VolumeError::io(format!("cannot sync the directory of {}", new_header.display()), e)
            })?;
        }
    }
    copy("cannot move the data of", shift, shift, &mut |chunk, at| raw.write_at(chunk, at))?;
    raw.flush().map_err(|e| io_err(&attached, "cannot sync", e))?;
    let paths = VolumePaths::new(data, Some(new_header));
    let (header, mut exported, _) = paths.load(true)?;
    exported.reencrypt_init_decrypt_shift(&header, key, resilience, device_len, pbkdf)?;
    Ok(())
}

/// The plaintext of a volume in the middle of a reencryption, encryption
/// or decryption, as dm-crypt maps it: the header's data segments in
/// order, each piece through the old key, the new key or as plaintext
/// (`linear`), at its own place on the device (a data shift moves pieces).
/// Serving it, the reencryption swaps in the map of each hotzone it
/// finishes while the gate keeps the hotzone closed to requests, so each
/// request sees one map for its whole range.
pub struct ReencryptingDevice {
    raw: SharedDevice,
    old_key: SecretBytes,
    new_key: SecretBytes,
    len: u64,
    block: u32,
    map: std::sync::Mutex<Arc<Vec<Piece>>>,
    gate: ZoneGate,
}

/// `[start, end)` of the plaintext and where it lies.
struct Piece {
    start: u64,
    end: u64,
    target: Target,
}

enum Target {
    /// Plaintext at this device offset (of the piece's start).
    Plain(u64),
    Crypt(CryptDevice<SharedDevice>),
}

impl std::fmt::Debug for ReencryptingDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReencryptingDevice")
            .field("len", &self.len)
            .field("boundary", &self.gate.boundary())
            .finish_non_exhaustive()
    }
}

impl ReencryptingDevice {
    /// Maps the volume at `paths` whose header records a reencryption with
    /// no interrupted hotzone (see [`Reencryption::recover_only`]).
    pub fn open(
        paths: &VolumePaths,
        luks: &Luks,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        read_only: bool,
    ) -> Result<Self, VolumeError> {
        let raw = FileDevice::open(&paths.data, read_only)
            .map_err(|e| io_err(paths, "cannot open", e))?;
        Self::on(Arc::new(raw), luks, old_key, new_key)
    }

    /// Maps the reencryption recorded in `luks` over `raw` (an empty key
    /// for a plaintext side).
    pub fn on(
        raw: SharedDevice,
        luks: &Luks,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
    ) -> Result<Self, VolumeError> {
        let state = luks.reencrypt_state()?.ok_or_else(|| {
            rampart_luks::Error::InvalidArgument("the volume is not being re-encrypted".into())
        })?;
        state.check_servable()?;
        luks.reencrypt_verify(old_key, new_key)?;
        if let Some((start, _)) = state.hotzone {
            return Err(rampart_luks::Error::InvalidArgument(format!(
                "a reencryption hotzone at byte {start} was interrupted: run `rampart reencrypt --resume-only` to recover it first"
            ))
            .into());
        }
        let size = data_size(&state, raw.len())?;
        let len = match (&state.resilience, state.previous_size) {
            (Resilience::Datashift { .. }, Some(p)) => p.min(size),
            _ => size,
        };
        let block = state.old.sector_size.max(state.new.sector_size);
        let boundary = if state.complete { size } else { state.done.min(size) };
        Self::with_map(raw, luks.data_map()?, old_key, new_key, len, block, boundary)
    }

    /// Maps the data segments of `luks`, in or out of a reencryption, over
    /// `raw`, for `len` plaintext bytes (a volume just decrypted, served
    /// on with the size it had).
    pub fn mapped(
        raw: SharedDevice,
        luks: &Luks,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        len: u64,
    ) -> Result<Self, VolumeError> {
        let map = luks.data_map()?;
        let block = map.iter().filter_map(|p| p.crypt.map(|c| c.sector_size)).max().unwrap_or(512);
        Self::with_map(raw, map, old_key, new_key, len, block, len)
    }

    fn with_map(
        raw: SharedDevice,
        map: Vec<rampart_luks::MapPiece>,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        len: u64,
        block: u32,
        boundary: u64,
    ) -> Result<Self, VolumeError> {
        let device = Self {
            raw,
            old_key: SecretBytes::new(old_key.expose().to_vec()),
            new_key: SecretBytes::new(new_key.expose().to_vec()),
            len,
            block,
            map: std::sync::Mutex::new(Arc::new(Vec::new())),
            gate: ZoneGate::new(boundary),
        };
        device.remap(&map)?;
        Ok(device)
    }

    /// Replaces the map (the data segments as the header now has them).
    /// Called with the changed range closed by the gate.
    pub(crate) fn remap(&self, map: &[rampart_luks::MapPiece]) -> Result<(), VolumeError> {
        let mut pieces = Vec::with_capacity(map.len());
        let mut start = 0u64;
        for piece in map {
            if start >= self.len {
                break;
            }
            let end = match piece.len {
                Some(n) => start.checked_add(n).ok_or_else(|| {
                    rampart_luks::Error::Corrupt("data segments beyond any device".into())
                })?,
                None => self.len,
            }
            .min(self.len);
            let target = match piece.crypt {
                None => Target::Plain(piece.device_offset),
                Some(c) => {
                    let key = if c.new_key { &self.new_key } else { &self.old_key };
                    let layout = CryptLayout {
                        offset: piece.device_offset,
                        size: end - start,
                        sector_size: c.sector_size,
                        iv_tweak: c.iv_tweak,
                    };
                    let cipher = SectorCipher::new(sector_cipher_kind(c.cipher), key)?;
                    Target::Crypt(
                        CryptDevice::new(Arc::clone(&self.raw), layout, cipher)
                            .map_err(|e| VolumeError::io("cannot map the data", e))?,
                    )
                }
            };
            if let Target::Plain(offset) = target {
                if offset.checked_add(end - start).is_none_or(|e| e > self.raw.len()) {
                    return Err(rampart_luks::Error::Corrupt(
                        "a plaintext segment beyond the end of the device".into(),
                    )
                    .into());
                }
            }
            pieces.push(Piece { start, end, target });
            start = end;
        }
        if start < self.len {
            return Err(rampart_luks::Error::Corrupt(format!(
                "the data segments map {start} of {} bytes",
                self.len
            ))
            .into());
        }
        *self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(pieces);
        Ok(())
    }

    fn current(&self) -> Arc<Vec<Piece>> {
        Arc::clone(&self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// How far the boundary of the run has moved (bytes processed, from
    /// the start or the end of the data as the run goes).
    #[must_use]
    pub fn boundary(&self) -> u64 {
        self.gate.boundary()
    }

    /// Runs `op(target, offset in the piece, offset in the request, len)`
    /// on each piece of `[offset, offset+len)`, inside the gate.
    fn each(
        &self,
        offset: u64,
        len: u64,
        access: Access,
        mut op: impl FnMut(&Target, u64, usize, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        let _passage = self.gate.enter(offset, len, access)?;
        let map = self.current();
        let end = offset + len;
        let first = map.partition_point(|p| p.end <= offset);
        for piece in &map[first..] {
            if piece.start >= end {
                break;
            }
            let from = offset.max(piece.start);
            let to = end.min(piece.end);
            // Both within the request, itself at most a buffer's length.
            op(&piece.target, from - piece.start, (from - offset) as usize, (to - from) as usize)?;
        }
        Ok(())
    }
}

impl BlockDevice for ReencryptingDevice {
    fn len(&self) -> u64 {
        self.len
    }

    fn block_size(&self) -> u32 {
        self.block
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.each(offset, buf.len() as u64, Access::Read, |target, at, from, n| {
            let part = &mut buf[from..from + n];
            match target {
                Target::Plain(base) => self.raw.read_at(part, base + at),
                Target::Crypt(dev) => dev.read_at(part, at),
            }
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.each(offset, buf.len() as u64, Access::Write, |target, at, from, n| {
            let part = &buf[from..from + n];
            match target {
                Target::Plain(base) => self.raw.write_at(part, base + at),
                Target::Crypt(dev) => dev.write_at(part, at),
            }
        })
    }

    fn flush(&self) -> io::Result<()> {
        // Every piece sits on the one data device.
        self.raw.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.each(offset, len, Access::Write, |target, at, _, n| match target {
            Target::Plain(base) => self.raw.discard(base + at, n as u64),
            Target::Crypt(dev) => dev.discard(at, n as u64),
        })
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.each(offset, len, Access::Write, |target, at, _, n| match target {
            Target::Plain(base) => self.raw.write_zeroes(base + at, n as u64),
            Target::Crypt(dev) => dev.write_zeroes(at, n as u64),
        })
    }
}
