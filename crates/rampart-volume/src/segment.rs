//! The plaintext of a LUKS data segment: dm-crypt's mapping, or dm-crypt
//! over dm-integrity where the segment authenticates its sectors.

use std::io;

use rampart_crypto::SecretBytes;
use rampart_luks::Luks;

use crate::integrity::{AuthenticatedDevice, IntegrityMode};
use crate::{sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, SectorCipher, VolumeError};

/// The LUKS2 persistent flag that writes integrity segments without
/// dm-integrity's journal (cryptsetup's `--integrity-no-journal
/// --persistent`).
pub const NO_JOURNAL_FLAG: &str = "no-journal";

/// A data segment's plaintext.
#[derive(Debug)]
pub enum SegmentDevice<D: BlockDevice> {
    /// A length-preserving cipher (XTS, CBC).
    Crypt(CryptDevice<D>),
    /// Authenticated encryption on dm-integrity's layout (boxed: its
    /// journal state is large, and one device lives per volume).
    Authenticated(Box<AuthenticatedDevice<D>>),
}

impl<D: BlockDevice> SegmentDevice<D> {
    /// The device underneath.
    pub fn inner(&self) -> &D {
        match self {
            Self::Crypt(c) => c.inner(),
            Self::Authenticated(a) => a.inner(),
        }
    }

    /// The crypt mapping, unless the segment authenticates.
    pub fn as_crypt(&self) -> Option<&CryptDevice<D>> {
        match self {
            Self::Crypt(c) => Some(c),
            Self::Authenticated(_) => None,
        }
    }
}

/// How an integrity segment is written: without the journal where the
/// caller asks (`--integrity-no-journal`) or the header records it.
#[must_use]
pub fn integrity_mode(luks: &Luks, no_journal: bool) -> IntegrityMode {
    if no_journal || luks.persistent_flags().iter().any(|f| f == NO_JOURNAL_FLAG) {
        IntegrityMode::Direct
    } else {
        IntegrityMode::Journal
    }
}

/// The plaintext of the data segment of `luks` on `data`, under `key`
/// (which the caller has verified); an integrity segment is written
/// without its journal when `no_journal` (see [`integrity_mode`]).
pub fn segment_device<D: BlockDevice>(
    data: D,
    luks: &Luks,
    key: &SecretBytes,
    no_journal: bool,
) -> Result<SegmentDevice<D>, VolumeError> {
    if let Some(segment) = luks.integrity_segment()? {
        let mode = integrity_mode(luks, no_journal);
        let device = AuthenticatedDevice::open(data, &segment, key, mode)?;
        return Ok(SegmentDevice::Authenticated(Box::new(device)));
    }
    let segment = luks.segment()?;
    let sector = u64::from(segment.sector_size);
    let size = match segment.size {
        Some(size) => size,
        None => {
            data.len().checked_sub(segment.offset).ok_or_else(|| {
                rampart_luks::Error::Corrupt(format!(
                    "the data segment starts at byte {} but the device has only {} bytes",
                    segment.offset,
                    data.len()
                ))
            })? / sector
                * sector
        }
    };
    let layout = CryptLayout {
        offset: segment.offset,
        size,
        sector_size: segment.sector_size,
        iv_tweak: segment.iv_tweak,
    };
    let cipher = SectorCipher::new(sector_cipher_kind(segment.cipher), key)?;
    let crypt = CryptDevice::new(data, layout, cipher)
        .map_err(|e| VolumeError::io("cannot map the data", e))?;
    Ok(SegmentDevice::Crypt(crypt))
}

impl<D: BlockDevice> BlockDevice for SegmentDevice<D> {
    fn len(&self) -> u64 {
        match self {
            Self::Crypt(c) => c.len(),
            Self::Authenticated(a) => a.len(),
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.read_at(buf, offset),
            Self::Authenticated(a) => a.read_at(buf, offset),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.write_at(buf, offset),
            Self::Authenticated(a) => a.write_at(buf, offset),
        }
    }

    fn write_at_mut(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.write_at_mut(buf, offset),
            Self::Authenticated(a) => a.write_at_mut(buf, offset),
        }
    }

    fn lend_stored(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        match self {
            Self::Crypt(c) => c.lend_stored(offset, len, f),
            Self::Authenticated(a) => a.lend_stored(offset, len, f),
        }
    }

    fn flush(&self) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.flush(),
            Self::Authenticated(a) => a.flush(),
        }
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.discard(offset, len),
            Self::Authenticated(a) => a.discard(offset, len),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        match self {
            Self::Crypt(c) => c.write_zeroes(offset, len),
            Self::Authenticated(a) => a.write_zeroes(offset, len),
        }
    }

    fn block_size(&self) -> u32 {
        match self {
            Self::Crypt(c) => c.block_size(),
            Self::Authenticated(a) => a.block_size(),
        }
    }
}
