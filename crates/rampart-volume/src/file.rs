use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use rampart_crypto::MappedFile;
use rustix::fs::FallocateFlags;

use crate::{check_range, BlockDevice};

/// A regular file or a block device used as raw storage.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    len: u64,
    read_only: bool,
    /// The page cache mapped for reading in place, where the file can be
    /// mapped; reads fall back to `pread` without it.
    mapping: Option<MappedFile>,
}

impl FileDevice {
    /// Opens `path` read-write (or read-only). The size is taken once:
    /// block devices report it by seeking to the end.
    ///
    /// A writable open takes the data-writer lock (see [`crate::lock`]), so
    /// that two processes never write one volume's data at once; readers
    /// take no lock, so a volume can be exported while it is being served,
    /// and cryptsetup's metadata locks are not disturbed.
    pub fn open(path: &Path, read_only: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(!read_only).open(path)?;
        if !read_only {
            crate::lock::lock_data_writer(&file)?;
        }
        Self::from_file(file, read_only)
    }

    pub fn from_file(mut file: File, read_only: bool) -> io::Result<Self> {
        let len = file.seek(SeekFrom::End(0))?;
        let mapping = MappedFile::map(&file, len).ok();
        Ok(Self { file, len, read_only, mapping })
    }

    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    fn check_writable(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "device is read-only"));
        }
        Ok(())
    }
}

impl BlockDevice for FileDevice {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        self.file.read_exact_at(buf, offset)
    }

    fn lend_stored(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        self.mapping.as_ref().is_some_and(|mapping| mapping.lend(offset, len, f).is_some())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable()?;
        check_range(offset, buf.len() as u64, self.len)?;
        self.file.write_all_at(buf, offset)
    }

    fn flush(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file.sync_data()
    }

    fn start_flush(&self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        rampart_crypto::start_writeback(&self.file)
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        check_range(offset, len, self.len)?;
        if len == 0 {
            return Ok(());
        }
        // Punching a hole frees the blocks of a file and discards on a block
        // device; where neither is supported, discard is only advice.
        match rustix::fs::fallocate(
            &self.file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        ) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        check_range(offset, len, self.len)?;
        if len == 0 {
            return Ok(());
        }
        let zeroed = rustix::fs::fallocate(
            &self.file,
            FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        );
        if zeroed.is_ok() {
            return Ok(());
        }
        let zeros = vec![0u8; len.min(1 << 20) as usize];
        let mut done = 0u64;
        while done < len {
            let step = (len - done).min(zeros.len() as u64) as usize;
            self.file.write_all_at(&zeros[..step], offset + done)?;
            done += step as u64;
        }
        Ok(())
    }
}
