use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rampart_luks::{LoadReport, Luks, LuksVersion, MetadataIo};

use crate::VolumeError;

/// Why a header backup was not written or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// The backup cannot be restored (not a header, truncated): the
    /// user's to fix, nothing written.
    #[error("{0}")]
    Refused(String),
    /// The backup's header is larger than the device it would replace.
    #[error("the header backup ({size} bytes) is larger than {}", path.display())]
    BackupTooLarge { size: u64, path: PathBuf },
    /// The header says it is larger than the file or device holding it.
    #[error("the header ({size} bytes) is larger than {} ({available} bytes)", path.display())]
    TooLarge { size: u64, path: PathBuf, available: u64 },
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

/// Writes the header area of `header` (whose header is `luks`, read from
/// `header_path`) to the new file `file`, owner-only and read-only as
/// cryptsetup's `luksHeaderBackup` writes it: its keyslots open the volume
/// with any passphrase they ever held.
///
/// # Errors
/// TooLarge, or `file` exists already or cannot be written.
pub fn backup_header(
    header: &dyn MetadataIo,
    luks: &Luks,
    header_path: &Path,
    file: &Path,
) -> Result<(), BackupError> {
    let size = luks.header_bytes();
    let available = header.len().map_err(|e| VolumeError::io("cannot size the volume", e))?;
    if size > available {
        return Err(BackupError::TooLarge { size, path: header_path.to_owned(), available });
    }
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(file)
        .map_err(|e| VolumeError::io(format!("cannot create {}", file.display()), e))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = 0;
    while offset < size {
        let n = usize::try_from(size - offset).map_or(buffer.len(), |left| left.min(buffer.len()));
        let chunk = &mut buffer[..n];
        header
            .read_at(offset, chunk)
            .map_err(|e| VolumeError::io(format!("cannot read the header at byte {offset}"), e))?;
        MetadataIo::write_at(&out, offset, chunk)
            .map_err(|e| VolumeError::io(format!("cannot write the header at byte {offset}"), e))?;
        offset += n as u64;
    }
    out.sync_all().map_err(|e| VolumeError::io(format!("cannot write {}", file.display()), e))?;
    Ok(())
}

/// A header backup, read and loaded, to restore over a volume's header.
#[derive(Debug)]
pub struct HeaderBackup {
    file: std::fs::File,
    path: PathBuf,
    luks: Luks,
    /// The load's warnings, for the caller to show.
    pub report: LoadReport,
}

impl HeaderBackup {
    /// Reads the backup at `path`.
    ///
    /// # Errors
    /// Refused: it holds no valid header. Volume: it cannot be opened.
    pub fn read(path: &Path) -> Result<Self, BackupError> {
        let file = std::fs::File::open(path)
            .map_err(|e| VolumeError::io(format!("cannot open {}", path.display()), e))?;
        let (luks, report) = Luks::load(&file).map_err(|e| {
            BackupError::Refused(format!("{} is not a valid header backup: {e}", path.display()))
        })?;
        Ok(Self { file, path: path.to_owned(), luks, report })
    }

    /// The UUID of the volume the backup belongs to.
    #[must_use]
    pub fn uuid(&self) -> &str {
        self.luks.uuid()
    }

    /// Restores the backup over `target` (the header at `target_path`,
    /// opened for writing under its lock) with [`restore_header`].
    /// cryptsetup's LUKS1 backups end after the last keyslot's key
    /// material (rounded up to 4096 bytes), short of the data offset: what
    /// the backup holds is restored when it covers every keyslot.
    ///
    /// # Errors
    /// Refused: a truncated backup. BackupTooLarge, or the copy failed.
    pub fn restore(&self, target: &dyn MetadataIo, target_path: &Path) -> Result<(), BackupError> {
        let backup_len = MetadataIo::len(&self.file)
            .map_err(|e| VolumeError::io("cannot size the backup", e))?;
        let size = self.luks.header_bytes().min(backup_len);
        if size < self.luks.metadata_end() {
            return Err(BackupError::Refused(format!(
                "{} is truncated: it has {backup_len} bytes but the header and keyslots need {}",
                self.path.display(),
                self.luks.metadata_end()
            )));
        }
        let target_len = target.len().map_err(|e| VolumeError::io("cannot size the volume", e))?;
        if size > target_len {
            return Err(BackupError::BackupTooLarge { size, path: target_path.to_owned() });
        }
        restore_header(&self.file, &self.luks, target, size)
            .map_err(|e| VolumeError::io("cannot restore the header", e))?;
        Ok(())
    }
}

/// Copies the first `len` bytes of a header backup (`backup`, whose header
/// is `restored`) over the header area of `target`, in the order that
/// keeps one loadable LUKS2 header copy at every moment: the region of the
/// copy `target` does not load from first (its secondary copy and keyslots
/// area when its primary is good, else its primary), synced, then the
/// other, synced. A LUKS1 header, a single record, is copied and synced
/// at once. Key material is copied as it is: a backup whose keyslots
/// differ from the volume's is, as with cryptsetup, not restored
/// atomically.
pub fn restore_header(
    backup: &dyn MetadataIo,
    restored: &Luks,
    target: &dyn MetadataIo,
    len: u64,
) -> io::Result<()> {
    let primary_end = match restored.version() {
        LuksVersion::Luks1 => len,
        LuksVersion::Luks2 => restored
            .to_json()
            .get("metadata_size")
            .and_then(serde_json::Value::as_u64)
            .map_or(len, |size| size.min(len)),
    };
    let primary_is_good = Luks::load(target).is_ok_and(|(_, report)| !report.used_secondary);
    let (first, second) = if primary_is_good {
        ((primary_end, len), (0, primary_end))
    } else {
        ((0, primary_end), (primary_end, len))
    };
    for (start, end) in [first, second] {
        copy_range(backup, target, start, end)?;
        target.sync()?;
    }
    Ok(())
}

/// Copies `[start, end)` of `from` to `to`, 1 MiB at a time (a header area
/// can be as large as the data offset).
fn copy_range(from: &dyn MetadataIo, to: &dyn MetadataIo, start: u64, end: u64) -> io::Result<()> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = start;
    while offset < end {
        let n = usize::try_from(end - offset).map_or(buffer.len(), |left| left.min(buffer.len()));
        let chunk = &mut buffer[..n];
        from.read_at(offset, chunk)?;
        to.write_at(offset, chunk)?;
        offset += n as u64;
    }
    Ok(())
}
