use std::io;
use std::sync::RwLock;

use crate::{check_range, BlockDevice};

/// A device in memory: for tests, and as scratch space.
#[derive(Debug)]
pub struct MemDevice {
    bytes: RwLock<Vec<u8>>,
    len: u64,
}

impl MemDevice {
    #[must_use]
    pub fn new(len: usize) -> Self {
        Self { bytes: RwLock::new(vec![0; len]), len: len as u64 }
    }

    /// A copy of the current contents.
    #[must_use]
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl BlockDevice for MemDevice {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let bytes = self.bytes.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = offset as usize;
        buf.copy_from_slice(&bytes[start..start + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let mut bytes = self.bytes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = offset as usize;
        bytes[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        let mut bytes = self.bytes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        bytes[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
}
