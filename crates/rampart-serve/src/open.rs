//! Opening a volume for serving: its plaintext as a block device, also in
//! the middle of a reencryption, with the layers kept apart so that the
//! server can re-encrypt it online.

use std::path::Path;
use std::sync::Arc;

use rampart_crypto::SecretBytes;
use rampart_kms_client::binding::BoundToken;
use rampart_luks::{LoadReport, Luks, MetadataIo};
use rampart_volume::reencrypt::SharedDevice;
use rampart_volume::{
    segment_device, BlockDevice, DataAccess, FileDevice, ReencryptingDevice, Reencryption,
    VolumePaths,
};

use crate::error::ServeError;

/// Where the keys of the served volumes come from (tokens, a passphrase:
/// the caller's unlock policy).
pub trait VolumeKeys {
    /// Why no key was found.
    type Error;

    /// The keyslot and volume key of `luks` (whose header is `header`, of
    /// the volume `what`).
    fn unlock(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> Result<(usize, SecretBytes), Self::Error>;

    /// Both volume keys of a volume in the middle of a reencryption.
    fn unlock_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> Result<(SecretBytes, SecretBytes), Self::Error>;

    /// The key-manager binding that unlocked the last volume, if one did.
    fn unlocked_by(&self) -> Option<&BoundToken>;
}

/// Why a volume could not be opened: no key (the key source's error), or
/// the volume itself.
#[derive(Debug)]
pub enum OpenError<E> {
    Key(E),
    Volume(ServeError),
}

impl<E> From<ServeError> for OpenError<E> {
    fn from(error: ServeError) -> Self {
        Self::Volume(error)
    }
}

impl<E> From<rampart_volume::VolumeError> for OpenError<E> {
    fn from(error: rampart_volume::VolumeError) -> Self {
        Self::Volume(error.into())
    }
}

impl<E> From<rampart_luks::Error> for OpenError<E> {
    fn from(error: rampart_luks::Error) -> Self {
        Self::Volume(error.into())
    }
}

/// An unlocked volume's layers.
pub struct OpenedVolume {
    /// The data device, opened once.
    pub raw: SharedDevice,
    /// Its plaintext.
    pub device: Arc<dyn BlockDevice>,
    /// The same device, when the volume is in the middle of a
    /// reencryption.
    pub reencrypting: Option<Arc<ReencryptingDevice>>,
    pub uuid: String,
}

impl std::fmt::Debug for OpenedVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedVolume")
            .field("uuid", &self.uuid)
            .field("len", &self.device.len())
            .field("reencrypting", &self.reencrypting.is_some())
            .finish_non_exhaustive()
    }
}

/// Opens a volume's plaintext as a block device, also in the middle of a
/// reencryption (then through both keys, as dm-crypt maps it, after
/// repairing a hotzone a crash interrupted unless `read_only`), with its
/// layers kept apart for a server that may re-encrypt it online. Each
/// load of the header is shown to `loaded` (its warnings are the caller's
/// to print).
pub fn open_layers<K: VolumeKeys>(
    paths: &VolumePaths,
    keys: &mut K,
    access: DataAccess,
    loaded: &mut dyn FnMut(&LoadReport),
) -> Result<OpenedVolume, OpenError<K::Error>> {
    let (header, luks, report) = paths.load_released()?;
    loaded(&report);
    let uuid = luks.uuid().to_owned();
    let open_raw = || -> Result<SharedDevice, ServeError> {
        let raw = FileDevice::open(&paths.data, access.read_only).map_err(|source| {
            ServeError::IoAt { context: format!("cannot open {}", paths.data.display()), source }
        })?;
        Ok(Arc::new(raw))
    };
    let Some(state) = luks.reencrypt_state()? else {
        let (_, volume_key) =
            keys.unlock(&luks, &header, paths.header_path()).map_err(OpenError::Key)?;
        if !luks.verify_volume_key(&volume_key)? {
            return Err(rampart_luks::Error::NoKey.into());
        }
        let raw = open_raw()?;
        let device =
            segment_device(Arc::clone(&raw), &luks, &volume_key, access.integrity_no_journal)
                .map_err(|source| ServeError::Unusable { path: paths.data.clone(), source })?;
        return Ok(OpenedVolume { raw, device: Arc::new(device), reencrypting: None, uuid });
    };
    let (old_key, new_key) =
        keys.unlock_reencrypting(&luks, &header, paths.header_path()).map_err(OpenError::Key)?;
    drop(header);
    let luks = if state.hotzone.is_some() && !access.read_only {
        Reencryption::open(paths, &old_key, &new_key).and_then(Reencryption::recover_only)?;
        let (_, luks, report) = paths.load_released()?;
        loaded(&report);
        luks
    } else {
        luks
    };
    let raw = open_raw()?;
    let device = Arc::new(ReencryptingDevice::on(Arc::clone(&raw), &luks, &old_key, &new_key)?);
    Ok(OpenedVolume {
        raw,
        device: Arc::clone(&device) as Arc<dyn BlockDevice>,
        reencrypting: Some(device),
        uuid,
    })
}
