//! Positioned I/O on the device (or detached header file) that holds the
//! LUKS metadata.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Positioned reads and writes on the metadata device.
///
/// Implementations must not move a shared cursor in a way that affects
/// other users: every call names its own offset.
pub trait MetadataIo {
    /// Fills `buf` from `offset` (read-exact semantics: a short device is an
    /// [`io::ErrorKind::UnexpectedEof`] error).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;
    /// The size of the device in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the device is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl MetadataIo for File {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_exact_at(buf, offset)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        let meta = self.metadata()?;
        if meta.file_type().is_block_device() {
            // A block device reports length 0 in its metadata; its size is
            // where a seek to the end lands. Positioned I/O ignores the cursor.
            let mut handle = self;
            handle.seek(SeekFrom::End(0))
        } else {
            Ok(meta.len())
        }
    }
}

impl<T: MetadataIo + ?Sized> MetadataIo for &T {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        (**self).write_at(offset, buf)
    }

    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }

    fn len(&self) -> io::Result<u64> {
        (**self).len()
    }
}

/// An in-memory device, for tests and for building headers in a buffer.
/// Writes past the end grow it, as they would grow a regular file.
#[derive(Debug, Default)]
pub struct MemoryIo {
    bytes: Mutex<Vec<u8>>,
}

impl MemoryIo {
    /// A zero-filled device of `len` bytes.
    #[must_use]
    pub fn new(len: usize) -> Self {
        Self::from_vec(vec![0; len])
    }

    /// A device holding `bytes`.
    #[must_use]
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        Self { bytes: Mutex::new(bytes) }
    }

    /// A copy of the current contents.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        self.lock().clone()
    }

    /// The contents, consuming the device.
    #[must_use]
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        // A panic while holding the lock cannot leave the Vec invalid.
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn range(offset: u64, len: usize) -> io::Result<(usize, usize)> {
    let start = usize::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let end = start
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset overflow"))?;
    Ok((start, end))
}

impl MetadataIo for MemoryIo {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let (start, end) = range(offset, buf.len())?;
        let bytes = self.lock();
        let src = bytes.get(start..end).ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the device")
        })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let (start, end) = range(offset, buf.len())?;
        let mut bytes = self.lock();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[start..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len() as u64)
    }
}

/// Like [`MetadataIo::read_at`], mapping end-of-file to a typed error.
pub(crate) fn read_exact(
    io: &dyn MetadataIo,
    offset: u64,
    buf: &mut [u8],
    what: &str,
) -> crate::Result<()> {
    io.read_at(offset, buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            crate::Error::corrupt(format!(
                "{what} at offset {offset} ({} bytes) is beyond the end of the device",
                buf.len()
            ))
        } else {
            crate::Error::Io(e)
        }
    })
}

/// Writes `len` random bytes at `offset`, a megabyte at a time.
pub(crate) fn write_random(io: &dyn MetadataIo, offset: u64, len: u64) -> crate::Result<()> {
    write_chunks(io, offset, len, true)
}

/// Writes `len` zero bytes at `offset`, a megabyte at a time.
pub(crate) fn write_zeros(io: &dyn MetadataIo, offset: u64, len: u64) -> crate::Result<()> {
    write_chunks(io, offset, len, false)
}

fn write_chunks(io: &dyn MetadataIo, offset: u64, len: u64, random: bool) -> crate::Result<()> {
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0u64;
    while done < len {
        let n = usize::try_from(len - done).map_or(CHUNK, |left| left.min(CHUNK));
        if random {
            rampart_crypto::fill_random(&mut buf[..n])?;
        }
        let at =
            offset.checked_add(done).ok_or_else(|| crate::Error::corrupt("offset overflow"))?;
        io.write_at(at, &buf[..n])?;
        done += n as u64;
    }
    Ok(())
}
