//! A device whose layers can be replaced while it serves: a server swaps
//! a volume's single-key layer for a [`crate::ReencryptingDevice`] when an
//! online reencryption begins, without closing its exports.

use std::io;
use std::sync::{Arc, PoisonError, RwLock};

use crate::BlockDevice;

/// Forwards every request to the current device. [`Self::replace`] waits
/// for the requests in progress, so none runs on the old device after it
/// returns.
pub struct ReplaceableDevice {
    current: RwLock<Arc<dyn BlockDevice>>,
}

impl std::fmt::Debug for ReplaceableDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaceableDevice").field("len", &self.len()).finish_non_exhaustive()
    }
}

impl ReplaceableDevice {
    #[must_use]
    pub fn new(device: Arc<dyn BlockDevice>) -> Self {
        Self { current: RwLock::new(device) }
    }

    /// Puts `device` in place of the current one (they must present the
    /// same bytes) and returns the old one.
    pub fn replace(&self, device: Arc<dyn BlockDevice>) -> Arc<dyn BlockDevice> {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *current, device)
    }

    /// Runs `change` with no request in progress and none let in until it
    /// returns, and puts the device it returns in place of the current
    /// one; on an error the current device stays. For changes to the
    /// stored bytes that no request may see half done.
    pub fn replace_with<E>(
        &self,
        change: impl FnOnce(&Arc<dyn BlockDevice>) -> Result<Arc<dyn BlockDevice>, E>,
    ) -> Result<(), E> {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        *current = change(&current)?;
        Ok(())
    }

    // A panic in a request leaves the pointer itself intact: keep serving.
    fn with<T>(&self, f: impl FnOnce(&dyn BlockDevice) -> T) -> T {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        f(&**current)
    }
}

impl BlockDevice for ReplaceableDevice {
    fn len(&self) -> u64 {
        self.with(|d| d.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|d| d.read_at(buf, offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with(|d| d.write_at(buf, offset))
    }

    fn write_at_mut(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|d| d.write_at_mut(buf, offset))
    }

    fn flush(&self) -> io::Result<()> {
        self.with(|d| d.flush())
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.with(|d| d.discard(offset, len))
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.with(|d| d.write_zeroes(offset, len))
    }

    fn block_size(&self) -> u32 {
        self.with(|d| d.block_size())
    }
}
