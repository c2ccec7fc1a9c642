//! Rampart's block layer.
//!
//! A [`BlockDevice`] is anything with a length that can be read, written,
//! flushed and discarded at byte offsets. Layers compose: a [`FileDevice`]
//! holds ciphertext; a [`CryptDevice`] over it presents the plaintext of one
//! LUKS segment; whatever serves data (export, import, NBD) sees only the
//! trait. Every byte of user data takes this one path.
#![forbid(unsafe_code)]

mod cipher;
mod clone;
#[cfg(feature = "crash-simulation")]
pub mod crashsim;
mod crypt;
mod file;
pub mod format;
pub mod gate;
pub mod integrity;
pub mod lock;
mod mem;
mod ordered;
pub mod plain;
pub mod reencrypt;
pub mod reencrypt_plan;
pub mod reencrypt_start;
mod replaceable;
mod restore;
mod segment;
pub mod stream;
mod unaligned;
mod volume;
mod wipe;

pub use cipher::{SectorCipher, SectorCipherKind};
pub use clone::{write_clone, CloneHeader};
pub use crypt::{CryptDevice, CryptLayout};
pub use file::FileDevice;
pub use integrity::{format_integrity, AuthenticatedDevice, IntegrityMode, IntegrityStats};
pub use mem::MemDevice;
pub use ordered::read_in_order;
pub use reencrypt::{Outcome, ReencryptError, ReencryptOptions, ReencryptingDevice, Reencryption};
pub use replaceable::ReplaceableDevice;
pub use restore::{backup_header, restore_header, BackupError, HeaderBackup};
pub use segment::{integrity_mode, segment_device, SegmentDevice, NO_JOURNAL_FLAG};
pub use volume::{
    sector_cipher_kind, DataAccess, HeaderFile, ReleasedHeader, Volume, VolumeError, VolumePaths,
};
pub use wipe::{header_area_end, wipe_data, wipe_header_area, wipe_random};

use std::io;

/// A random-access device addressed in bytes. Methods take `&self` so that
/// one device can serve many requests at once; implementations synchronise
/// internally where they must.
pub trait BlockDevice: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` from `offset`. Reading past the end is an error
    /// (`UnexpectedEof`); callers check bounds first.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Writes all of `buf` at `offset`. Writing past the end is an error.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Like [`BlockDevice::write_at`], but the device may use `buf` as
    /// scratch space (an encrypting layer encrypts it in place instead of
    /// copying); its contents are unspecified afterwards.
    fn write_at_mut(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)
    }

    /// Lends the `len` stored bytes at `offset` to `f` where they lie (a
    /// mapping of the page cache), sparing the copy into a buffer that
    /// [`BlockDevice::read_at`] makes. Returns false when the device cannot
    /// lend them, or could not reliably (a read error or a truncation while
    /// `f` ran): whatever `f` produced must then be discarded and the bytes
    /// read with `read_at`, which reports any error.
    fn lend_stored(&self, _offset: u64, _len: usize, _f: &mut dyn FnMut(&[u8])) -> bool {
        false
    }

    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;

    /// Starts making completed writes durable without waiting: a later
    /// [`BlockDevice::flush`] then has less to wait for. Nothing is
    /// promised until that flush.
    fn start_flush(&self) -> io::Result<()> {
        Ok(())
    }

    /// Tells the device the range's contents are no longer needed; they may
    /// read back as anything afterwards.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Sets the range to zeros as read through this device.
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()>;

    /// The smallest write that needs no read-modify-write.
    fn block_size(&self) -> u32 {
        1
    }
}

/// A shared device is a device: layers can share one underlying device
/// (the two keys of a volume being re-encrypted).
impl<D: BlockDevice + ?Sized> BlockDevice for std::sync::Arc<D> {
    fn len(&self) -> u64 {
        (**self).len()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }

    fn write_at_mut(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).write_at_mut(buf, offset)
    }

    fn lend_stored(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        (**self).lend_stored(offset, len, f)
    }

    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }

    fn start_flush(&self) -> io::Result<()> {
        (**self).start_flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).discard(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).write_zeroes(offset, len)
    }

    fn block_size(&self) -> u32 {
        (**self).block_size()
    }
}

/// Checks that `[offset, offset + len)` lies inside a device of `size`.
pub fn check_range(offset: u64, len: u64, size: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("range {offset}+{len} lies beyond the end of the device ({size} bytes)"),
        )),
    }
}
