//! Starting the write-back of a file's dirty pages without waiting for it
//! (Linux's `sync_file_range`), which no safe wrapper in the dependency
//! tree offers: a journal copies blocks home, starts their write-back at
//! once, and its next flush finds most of them on disk already, as the
//! kernel's own home writes are submitted as they are made.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Starts writing `file`'s dirty pages to its device. Returns as soon as
/// the writes are queued: nothing is durable until a flush.
pub fn start_writeback(file: &File) -> io::Result<()> {
    // SAFETY: the descriptor is open for the borrow of `file`; offset 0
    // with length 0 means the whole file, and the call reads no memory.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
