//! Writing the start of a reencryption, as cryptsetup's `reencrypt`
//! does before the first hotzone: the header of a plaintext image about to
//! be encrypted (with the data it will cover moved out of the way first),
//! the metadata of a decryption in place, and a resumed run's change of
//! resilience. The rules come from [`crate::reencrypt_plan`]; the keys and
//! passphrases from the caller, which has already unlocked the volume.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rampart_crypto::SecretBytes;
use rampart_luks::{
    LoadReport, Luks, LuksVersion, MetadataIo, PbkdfChoice, ReencryptState, Resilience,
};

use crate::reencrypt_plan::{EncryptStartPlan, PlanError, ReencryptSettings};
use crate::{Reencryption, ReleasedHeader, VolumeError, VolumePaths};

/// Why a reencryption could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The request or the volume's state does not allow it: the user's to
    /// fix, and nothing was written.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    /// `--header NEWFILE` names no header yet and the data device holds
    /// none either, so there is no header to export.
    #[error("{} does not exist, so {} must hold its LUKS2 header (to be exported to it)", new_header.display(), data.display())]
    NoAttachedHeader {
        new_header: PathBuf,
        data: PathBuf,
        #[source]
        source: VolumeError,
    },
}

impl From<PlanError> for StartError {
    fn from(error: PlanError) -> Self {
        Self::Refused(error.0)
    }
}

impl From<rampart_luks::Error> for StartError {
    fn from(error: rampart_luks::Error) -> Self {
        Self::Volume(VolumeError::Luks(error))
    }
}

/// The size of the data device.
///
/// # Errors
/// The data device cannot be opened or sized.
pub fn device_len(paths: &VolumePaths) -> Result<u64, VolumeError> {
    let file = File::open(&paths.data)
        .map_err(|e| VolumeError::io(format!("cannot open {}", paths.data.display()), e))?;
    MetadataIo::len(&file).map_err(|e| VolumeError::io("cannot size the data device", e))
}

/// Whether the header of `paths` records a reencryption in progress: an
/// encryption in place (`reencrypt --encrypt`) started before is resumed,
/// not started again.
#[must_use]
pub fn in_progress(paths: &VolumePaths) -> bool {
    paths
        .open_header(false)
        .ok()
        .and_then(|header| Luks::load(&header).ok())
        .is_some_and(|(luks, _)| matches!(luks.reencrypt_state(), Ok(Some(_))))
}

/// Only LUKS2 records a reencryption in its header.
///
/// # Errors
/// Refused: a LUKS1 volume.
pub fn require_luks2(luks: &Luks, header_path: &Path) -> Result<(), StartError> {
    if luks.version() != LuksVersion::Luks2 {
        return Err(StartError::Refused(format!(
            "{} is LUKS1: only LUKS2 volumes can be re-encrypted in place",
            header_path.display()
        )));
    }
    Ok(())
}

/// An encryption in place (`reencrypt --encrypt`) checked and planned,
/// before its passphrase is asked for: nothing is written until
/// [`EncryptStart::write`].
#[derive(Debug)]
pub struct EncryptStart {
    paths: VolumePaths,
    data: File,
    planned: EncryptStartPlan,
    /// The detached header file exists already (and holds no LUKS header).
    header_exists: bool,
}

impl EncryptStart {
    /// Checks that `paths` holds plaintext (no LUKS header on the data, nor
    /// in the detached header file if it exists) and plans the encryption.
    ///
    /// # Errors
    /// Refused: a LUKS header found, a plan the rules refuse. Volume: the
    /// data device cannot be opened or sized.
    pub fn prepare(paths: &VolumePaths, settings: &ReencryptSettings) -> Result<Self, StartError> {
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&paths.data)
            .map_err(|e| VolumeError::io(format!("cannot open {}", paths.data.display()), e))?;
        if Luks::load(&data).is_ok() {
            return Err(StartError::Refused(format!(
                "{} already holds a LUKS header: it is encrypted already (use `rampart reencrypt` without --encrypt to change its key)",
                paths.data.display()
            )));
        }
        let device_len = MetadataIo::len(&data)
            .map_err(|e| VolumeError::io("cannot size the data device", e))?;
        let planned = settings.encrypt_start(&paths.data, device_len, paths.header.is_some())?;
        let mut header_exists = false;
        if planned.moved_chunk().is_none() {
            let header_path = paths.header_path();
            if header_path.exists() {
                let file = File::open(header_path).map_err(|e| {
                    VolumeError::io(format!("cannot open {}", header_path.display()), e)
                })?;
                if Luks::load(&file).is_ok() {
                    return Err(StartError::Refused(format!(
                        "{} already holds a LUKS header: refusing to overwrite it",
                        header_path.display()
                    )));
                }
                header_exists = true;
            }
        }
        Ok(Self { paths: paths.clone(), data, planned, header_exists })
    }

    /// Writes the header, its one keyslot under `passphrase` and `pbkdf`,
    /// recording the encryption to come; returns the new volume key.
    ///
    /// With an attached header the first `shift` bytes, which the header
    /// will overwrite, are copied to the device's last ones and synced
    /// first (cryptsetup's moved segment). A detached header file is
    /// created owner-only, as cryptsetup creates it: its keyslots are key
    /// material.
    ///
    /// # Errors
    /// The data cannot be copied or the header written.
    pub fn write(self, pbkdf: PbkdfChoice, passphrase: &[u8]) -> Result<SecretBytes, StartError> {
        let Self { paths, data, planned, header_exists } = self;
        let opts = planned.format_options(pbkdf);
        let plan = planned.encrypt_plan();
        let (_, key) = match planned.moved_chunk() {
            Some(shift) => {
                let len = usize::try_from(shift)
                    .map_err(|_| StartError::Refused("data shift too large".into()))?;
                let mut buf = SecretBytes::zeroed(len);
                let moved = MetadataIo::read_at(&data, 0, buf.expose_mut())
                    .map_err(|e| VolumeError::io("cannot read the start of the data", e))
                    .and_then(|()| {
                        MetadataIo::write_at(&data, planned.device_len - shift, buf.expose())
                            .and_then(|()| MetadataIo::sync(&data))
                            .map_err(|e| VolumeError::io("cannot copy the start of the data", e))
                    });
                moved?;
                Luks::format_encrypt(&data, &opts, passphrase, &plan)?
            }
            None => {
                let header_path = paths.header_path();
                if !header_exists {
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(header_path)
                        .map_err(|e| {
                        VolumeError::io(
                            format!("cannot create header file {}", header_path.display()),
                            e,
                        )
                    })?;
                }
                let header = paths.open_header(true)?;
                Luks::format_encrypt(&header, &opts, passphrase, &plan)?
            }
        };
        Ok(key)
    }
}

/// A decryption of a volume whose header is attached, to be exported to a
/// new header file while the data moves down over it (`reencrypt --decrypt
/// --header NEWFILE`, as cryptsetup 2.6; see
/// [`crate::reencrypt::start_decrypt_shift`]), checked and loaded before
/// its key is asked for.
#[derive(Debug)]
pub struct DecryptAttachedStart {
    /// The attached header, its lock released for the unlock.
    pub header: ReleasedHeader,
    pub luks: Luks,
    /// The load's warnings, for the caller to show.
    pub report: LoadReport,
    attached: VolumePaths,
}

impl DecryptAttachedStart {
    /// Loads the header attached to `paths.data` (`new_header` does not
    /// exist yet) and checks that a decryption in place may start.
    ///
    /// # Errors
    /// Refused: options a decryption does not take, a LUKS1 volume, a
    /// reencryption in progress. NoAttachedHeader: the data device holds
    /// no header to export.
    pub fn prepare(
        paths: &VolumePaths,
        settings: &ReencryptSettings,
        new_header: &Path,
    ) -> Result<Self, StartError> {
        settings.check_decrypt()?;
        let attached = VolumePaths::new(&paths.data, None);
        let (header, luks, report) =
            attached.load_released().map_err(|source| StartError::NoAttachedHeader {
                new_header: new_header.to_owned(),
                data: paths.data.clone(),
                source,
            })?;
        if luks.version() != LuksVersion::Luks2 {
            return Err(StartError::Refused(format!(
                "{} is LUKS1: only LUKS2 volumes can be decrypted in place",
                paths.data.display()
            )));
        }
        if luks.reencrypt_state()?.is_some() {
            return Err(StartError::Refused(format!(
                "{} is being re-encrypted with its header attached: resume it with `rampart reencrypt --resume-only` without --header first",
                paths.data.display()
            )));
        }
        Ok(Self { header, luks, report, attached })
    }

    /// Where the header is read from to unlock (the data device).
    #[must_use]
    pub fn header_path(&self) -> &Path {
        self.attached.header_path()
    }
}

/// Records a decryption in place (`reencrypt --decrypt` with a detached
/// header; mode decrypt, backward, as cryptsetup) of the volume `luks`
/// whose key is `key`, under the header's exclusive lock.
///
/// # Errors
/// Refused: an attached header (whose decryption moves the data, see
/// [`crate::reencrypt::start_decrypt_shift`]), options a decryption does
/// not take. Volume: the header cannot be written, or changed meanwhile.
pub fn start_decrypt(
    paths: &VolumePaths,
    settings: &ReencryptSettings,
    luks: &Luks,
    key: &SecretBytes,
    pbkdf: &PbkdfChoice,
) -> Result<(), StartError> {
    if paths.header.is_none() {
        return Err(StartError::Refused(format!(
            "{} has its header attached: give --header NEWFILE (a file that does not exist yet), as cryptsetup 2.6 asks: the header is exported to it and the data moved down over it while it is decrypted",
            paths.data.display()
        )));
    }
    settings.check_decrypt()?;
    let segment = luks.segment()?;
    let resilience = settings.decrypt_resilience(&segment, device_len(paths)?)?;
    let (header, mut luks, _) = paths.relock(key)?;
    luks.reencrypt_init_decrypt(&header, key, resilience, pbkdf)?;
    Ok(())
}

/// Changes the resilience of the reencryption in progress `state` on
/// resume (cryptsetup 2.6 allows it among checksum, journal and none): an
/// interrupted hotzone is recovered under the old mode first, then the
/// keyslot area's mode changes. Returns the new resilience.
///
/// # Errors
/// Refused: a change the rules refuse. Volume: recovery or the header
/// write failed.
pub fn change_resilience(
    paths: &VolumePaths,
    settings: &ReencryptSettings,
    state: &ReencryptState,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    pbkdf: &PbkdfChoice,
) -> Result<Resilience, StartError> {
    settings.check_resilience_change(&paths.data, state)?;
    if state.hotzone.is_some() {
        Reencryption::open(paths, old_key, new_key).and_then(Reencryption::recover_only)?;
    }
    let resilience = settings.changed_resilience(state, device_len(paths)?)?;
    let (header, mut luks, _) = paths.load(true)?;
    luks.reencrypt_set_resilience(&header, old_key, new_key, &resilience, pbkdf)?;
    Ok(resilience)
}
