use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use rampart_crypto::{CryptoError, SecretBytes};
use rampart_luks::{DataCipher, LoadReport, Luks, MetadataIo};

use crate::lock::{LockMode, MetadataLock};

use crate::segment::{segment_device, SegmentDevice};
use crate::{FileDevice, SectorCipherKind};

/// Everything that can stop a volume from opening or being used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VolumeError {
    #[error(transparent)]
    Luks(#[from] rampart_luks::Error),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// An operating-system failure that says what failed by itself.
    #[error(transparent)]
    Os(io::Error),
    /// The header was changed by someone else while its key was being
    /// recovered without the lock, and no longer holds that key.
    #[error("the header of {} changed while its key was being recovered, and no longer holds that key; nothing was written", .0.display())]
    HeaderChanged(PathBuf),
}

impl VolumeError {
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }
}

/// Where a volume's bytes live: the data device and, for a detached header,
/// the header file.
#[derive(Debug, Clone)]
pub struct VolumePaths {
    pub data: PathBuf,
    pub header: Option<PathBuf>,
}

impl VolumePaths {
    #[must_use]
    pub fn new(data: &Path, header: Option<&Path>) -> Self {
        Self { data: data.to_owned(), header: header.map(Path::to_owned) }
    }

    /// The file holding the LUKS header.
    #[must_use]
    pub fn header_path(&self) -> &Path {
        self.header.as_deref().unwrap_or(&self.data)
    }

    /// Opens the header file for metadata I/O under cryptsetup's metadata
    /// lock: exclusive when `write`, else shared (see [`crate::lock`]). The
    /// lock lasts as long as the returned [`HeaderFile`]; keep it only for
    /// one metadata operation.
    pub fn open_header(&self, write: bool) -> Result<HeaderFile, VolumeError> {
        let path = self.header_path();
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .open(path)
            .map_err(|e| VolumeError::io(format!("cannot open {}", path.display()), e))?;
        let mode = if write { LockMode::Exclusive } else { LockMode::Shared };
        let lock = MetadataLock::acquire(path, mode, || {
            tracing::info!(
                "waiting for the metadata lock of {} (held by cryptsetup or another rampart)",
                path.display()
            );
        })
        .map_err(|e| {
            VolumeError::io(format!("cannot lock the metadata of {}", path.display()), e)
        })?;
        Ok(HeaderFile { file, _lock: lock })
    }

    /// Loads and verifies the LUKS header under the shared metadata lock,
    /// then releases the lock: later reads (of keyslot areas, after a
    /// prompt) lock for themselves.
    pub fn load_released(&self) -> Result<(ReleasedHeader, Luks, LoadReport), VolumeError> {
        let (header, luks, report) = self.load(false)?;
        let HeaderFile { file, _lock } = header;
        drop(_lock);
        Ok((ReleasedHeader { file, path: self.header_path().to_path_buf() }, luks, report))
    }

    /// Loads the header again for writing, under the exclusive metadata
    /// lock, once `volume_key` was recovered without it: if cryptsetup or
    /// another Rampart changed the header meanwhile, the change goes ahead
    /// on the new header only if it still belongs to the same volume key.
    ///
    /// # Errors
    /// The header cannot be loaded, or no longer holds `volume_key`
    /// ([`VolumeError::HeaderChanged`]).
    pub fn relock(
        &self,
        volume_key: &SecretBytes,
    ) -> Result<(HeaderFile, Luks, LoadReport), VolumeError> {
        let (header, luks, report) = self.load(true)?;
        if !luks.verify_volume_key(volume_key)? {
            return Err(VolumeError::HeaderChanged(self.header_path().to_owned()));
        }
        Ok((header, luks, report))
    }

    /// Loads and verifies the LUKS header under the metadata lock (see
    /// [`VolumePaths::open_header`]).
    pub fn load(&self, write: bool) -> Result<(HeaderFile, Luks, LoadReport), VolumeError> {
        let file = self.open_header(write)?;
        let (luks, report) = Luks::load(&file)?;
        Ok((file, luks, report))
    }
}

/// The open header file of a volume, holding its metadata lock until it is
/// dropped.
#[derive(Debug)]
pub struct HeaderFile {
    file: File,
    _lock: MetadataLock,
}

impl std::ops::Deref for HeaderFile {
    type Target = File;

    fn deref(&self) -> &File {
        &self.file
    }
}

impl MetadataIo for HeaderFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        MetadataIo::read_at(&self.file, offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        MetadataIo::write_at(&self.file, offset, buf)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn len(&self) -> io::Result<u64> {
        MetadataIo::len(&self.file)
    }
}

/// A volume's header file read the way cryptsetup reads keyslot areas:
/// each read takes the shared metadata lock for itself only, so that a
/// passphrase prompt or a key-server call between reads never holds off
/// cryptsetup (or another Rampart) wanting to write the header. Writes are
/// refused: writing needs [`VolumePaths::load`] with `write`.
#[derive(Debug)]
pub struct ReleasedHeader {
    file: File,
    path: PathBuf,
}

impl MetadataIo for ReleasedHeader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let _lock = MetadataLock::acquire(&self.path, LockMode::Shared, || {
            tracing::info!("waiting for the metadata lock of {}", self.path.display());
        })?;
        MetadataIo::read_at(&self.file, offset, buf)
    }

    fn write_at(&self, _offset: u64, _buf: &[u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "the header was opened for reading"))
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        MetadataIo::len(&self.file)
    }
}

/// How a volume's data is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataAccess {
    pub read_only: bool,
    /// A segment with integrity is written without dm-integrity's journal
    /// (`--integrity-no-journal`), also where the header does not say so.
    pub integrity_no_journal: bool,
}

/// An unlocked LUKS volume: its metadata and the plaintext block device of
/// its data segment.
#[derive(Debug)]
pub struct Volume {
    luks: Luks,
    device: SegmentDevice<FileDevice>,
    slot: Option<usize>,
}

impl Volume {
    /// Loads the header, unlocks a keyslot with `passphrase` (any slot, or
    /// just `slot`) and opens the data segment.
    pub fn open(
        paths: &VolumePaths,
        passphrase: &[u8],
        slot: Option<usize>,
        read_only: bool,
    ) -> Result<(Self, LoadReport), VolumeError> {
        let (header, luks, report) = paths.load(false)?;
        let (slot, key) = luks.unlock(&header, passphrase, slot)?;
        let access = DataAccess { read_only, integrity_no_journal: false };
        let mut volume = Self::with_key(paths, luks, &key, access)?;
        volume.slot = Some(slot);
        Ok((volume, report))
    }

    /// Opens the data segment with a known volume key (verified against the
    /// header's digest first).
    pub fn with_key(
        paths: &VolumePaths,
        luks: Luks,
        key: &SecretBytes,
        access: DataAccess,
    ) -> Result<Self, VolumeError> {
        if !luks.verify_volume_key(key)? {
            return Err(rampart_luks::Error::NoKey.into());
        }
        let data = FileDevice::open(&paths.data, access.read_only)
            .map_err(|e| VolumeError::io(format!("cannot open {}", paths.data.display()), e))?;
        let device =
            segment_device(data, &luks, key, access.integrity_no_journal).map_err(|e| match e {
                VolumeError::Io { source, .. } => {
                    VolumeError::io(format!("cannot use {}", paths.data.display()), source)
                }
                other => other,
            })?;
        Ok(Self { luks, device, slot: None })
    }

    #[must_use]
    pub fn luks(&self) -> &Luks {
        &self.luks
    }

    /// The keyslot that unlocked the volume, when a passphrase did.
    #[must_use]
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// The plaintext block device.
    #[must_use]
    pub fn device(&self) -> &SegmentDevice<FileDevice> {
        &self.device
    }

    /// Gives up the metadata and keeps the plaintext block device.
    #[must_use]
    pub fn into_device(self) -> SegmentDevice<FileDevice> {
        self.device
    }
}

#[must_use]
pub fn sector_cipher_kind(cipher: DataCipher) -> SectorCipherKind {
    match cipher {
        DataCipher::AesXtsPlain64 => SectorCipherKind::AesXtsPlain64,
        DataCipher::AesCbcEssivSha256 => SectorCipherKind::AesCbcEssivSha256,
        DataCipher::AesCbcPlain64 => SectorCipherKind::AesCbcPlain64,
    }
}
