//! Coexisting with cryptsetup on a volume in use.
//!
//! Two independent locks, so that neither blocks the other:
//!
//! * **Metadata** ([`MetadataLock`]): cryptsetup's own protocol
//!   (`lib/utils_device_locking.c`), held only for one metadata operation.
//!   Reads of the header take a shared `flock`, writes an exclusive one. On
//!   a regular file the lock is on the file itself; on a block device it is
//!   on `/run/cryptsetup/L_<major>:<minor>`, a file that the last holder
//!   removes, so a holder checks after locking that the path still names
//!   the file it locked. cryptsetup and Rampart therefore serialise their
//!   header writes and never read a half-written header, and since every
//!   write loads the header again under the exclusive lock, a change made
//!   by cryptsetup is never overwritten by a stale copy.
//! * **Data writer** ([`lock_data_writer`]): an open-file-description lock on one
//!   byte at [`WRITER_LOCK_OFFSET`], far past any data, held for as long as
//!   a process may write the volume's data (`serve`, `import`). A second
//!   writer is refused at once. OFD locks do not interact with `flock`, so
//!   cryptsetup's reads and header updates go on while a volume is served.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

/// Where cryptsetup keeps the lock files of block devices
/// (`DEFAULT_LUKS2_LOCK_PATH`).
pub const CRYPTSETUP_LOCK_DIR: &str = "/run/cryptsetup";

/// The byte whose OFD write lock marks "a process writes this volume's
/// data": the last byte an `off_t` lock range can cover, beyond any real
/// device, and away from the bytes QEMU locks (100 and 200 onwards).
pub const WRITER_LOCK_OFFSET: u64 = i64::MAX as u64 - 1;

/// Shared for reading the header, exclusive for changing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// A held cryptsetup-compatible metadata lock; released on drop.
#[derive(Debug)]
pub struct MetadataLock {
    file: File,
    mode: LockMode,
    /// For a block device: the lock file, removed on release when no one
    /// else holds it.
    resource: Option<PathBuf>,
}

impl MetadataLock {
    /// Locks the metadata of the device or file at `path`, waiting while
    /// another process holds a conflicting lock. `on_wait` runs once if the
    /// lock is not free at the first try (to tell the user why nothing
    /// happens).
    pub fn acquire(path: &Path, mode: LockMode, on_wait: impl FnOnce()) -> io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        let (blocking, nonblocking) = match mode {
            LockMode::Shared => (FlockOperation::LockShared, FlockOperation::NonBlockingLockShared),
            LockMode::Exclusive => {
                (FlockOperation::LockExclusive, FlockOperation::NonBlockingLockExclusive)
            }
        };
        let mut on_wait = Some(on_wait);
        let mut lock = |file: &File| -> io::Result<()> {
            match rustix::fs::flock(file, nonblocking) {
                Ok(()) => Ok(()),
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    if let Some(tell) = on_wait.take() {
                        tell();
                    }
                    rustix::fs::flock(file, blocking).map_err(io::Error::from)
                }
                Err(e) => Err(e.into()),
            }
        };
        if meta.file_type().is_block_device() {
            let rdev = meta.rdev();
            let resource = Path::new(CRYPTSETUP_LOCK_DIR).join(format!(
                "L_{}:{}",
                rustix::fs::major(rdev),
                rustix::fs::minor(rdev)
            ));
            loop {
                let file = open_resource(&resource)?;
                lock(&file)?;
                // Another holder may have removed the file between our open
                // and our lock; then we hold a lock nobody else sees.
                if same_file(&file, &resource) {
                    return Ok(Self { file, mode, resource: Some(resource) });
                }
            }
        } else {
            // As cryptsetup: the lock is on the image itself, through a
            // read-write descriptor where permissions allow (NFSv4 needs it).
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(path)
                .or_else(|_| File::open(path))?;
            lock(&file)?;
            Ok(Self { file, mode, resource: None })
        }
    }

    #[must_use]
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

impl Drop for MetadataLock {
    fn drop(&mut self) {
        // The last holder of a block device's lock removes its file, as
        // cryptsetup does; closing the descriptor releases the lock.
        if let Some(resource) = &self.resource {
            if rustix::fs::flock(&self.file, FlockOperation::NonBlockingLockExclusive).is_ok()
                && same_file(&self.file, resource)
            {
                let _ = std::fs::remove_file(resource);
            }
        }
    }
}

fn open_resource(resource: &Path) -> io::Result<File> {
    let dir = Path::new(CRYPTSETUP_LOCK_DIR);
    if !dir.is_dir() {
        // cryptsetup creates it with its compiled-in mode, 0700.
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create the lock directory {CRYPTSETUP_LOCK_DIR}: {e}"),
                ))
            }
        }
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32)
        .open(resource)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open the lock file {}: {e}", resource.display()),
            )
        })
}

fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Takes the data-writer lock on `file` (open for writing): it lives as
/// long as that descriptor. Fails at once with
/// [`io::ErrorKind::ResourceBusy`] when another process writes the volume.
pub fn lock_data_writer(file: &File) -> io::Result<()> {
    if rampart_crypto::try_lock_byte(file, WRITER_LOCK_OFFSET, true)? {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "another process is writing the volume (rampart serve or import)",
        ))
    }
}

/// cryptsetup's reencryption lock: an exclusive `flock` on
/// `/run/cryptsetup/LN_LUKS2-reencryption-<UUID>`, held for a whole
/// reencryption run (or crash recovery), so that two processes, cryptsetup
/// or Rampart, never re-encrypt one volume at once. The holder removes the
/// file on release, as cryptsetup does.
#[derive(Debug)]
pub struct ReencryptionLock {
    file: File,
    path: PathBuf,
}

impl ReencryptionLock {
    /// Takes the lock of volume `uuid` without waiting; fails with
    /// [`io::ErrorKind::ResourceBusy`] while another process holds it.
    pub fn try_acquire(uuid: &str) -> io::Result<Self> {
        if uuid.is_empty() || !uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "invalid volume UUID"));
        }
        let path = Path::new(CRYPTSETUP_LOCK_DIR).join(format!("LN_LUKS2-reencryption-{uuid}"));
        // The file may be removed by a releasing holder between open and
        // lock: retry until the locked file is the one the path names.
        for _ in 0..100 {
            let file = open_resource(&path)?;
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        "a reencryption of this volume is already running (cryptsetup or rampart)",
                    ))
                }
                Err(e) => return Err(e.into()),
            }
            if same_file(&file, &path) {
                return Ok(Self { file, path });
            }
        }
        Err(io::Error::other("cannot take the reencryption lock: its file keeps changing"))
    }
}

impl Drop for ReencryptionLock {
    fn drop(&mut self) {
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
