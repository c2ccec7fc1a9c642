//! A new volume as `format` writes it (cryptsetup's `luksFormat`): the
//! request's defaults and checks, its missing files created, and room for
//! data behind the header it wrote.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use rampart_luks::{
    DataCipher, FormatOptions, IntegrityKind, Luks, LuksVersion, PbkdfRequest, AEAD_ENCRYPTION,
};

use crate::{VolumeError, VolumePaths};

/// Why a volume could not be formatted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The request cannot be met (a cipher or key size not supported, a
    /// missing file without a size): the user's to fix, nothing written.
    #[error("{0}")]
    Refused(String),
    /// The data device ends inside the header just written.
    #[error("{} ({data_len} bytes) has no room for data after the {header_end}-byte header; give a larger --size", data.display())]
    NoRoomForData { data: PathBuf, data_len: u64, header_end: u64 },
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

/// What `format` was asked, each setting optional where cryptsetup has a
/// default.
#[derive(Debug, Clone)]
pub struct FormatRequest<'a> {
    pub version: LuksVersion,
    /// The cipher spec (`aes-xts-plain64`).
    pub cipher: &'a str,
    /// Default: the cipher's default key size.
    pub key_bits: Option<usize>,
    /// Default: 4096 for LUKS2, 512 for LUKS1.
    pub sector_size: Option<u32>,
    pub pbkdf: PbkdfRequest,
    pub label: Option<String>,
    pub subsystem: Option<String>,
    pub metadata_size: Option<u64>,
    pub keyslots_size: Option<u64>,
    /// The data offset in 512-byte sectors.
    pub data_offset_sectors: Option<u64>,
    pub uuid: Option<String>,
    /// Authenticated encryption (`--integrity`): HMAC with
    /// `aes-xts-plain64`, or `aead` with `aes-gcm-random`.
    pub integrity: Option<IntegrityKind>,
    /// Record that the volume is written without dm-integrity's journal.
    pub integrity_no_journal: bool,
}

impl FormatRequest<'_> {
    /// The header's options for the volume at `paths`, defaults filled in.
    ///
    /// # Errors
    /// Refused: a cipher or key size not supported. Volume: KDF settings
    /// the version does not take.
    pub fn options(&self, paths: &VolumePaths) -> Result<FormatOptions, FormatError> {
        let (cipher, key_bytes) = self.cipher_and_key_bytes()?;
        let sector_size = self.sector_size.unwrap_or(match self.version {
            LuksVersion::Luks2 => 4096,
            LuksVersion::Luks1 => 512,
        });
        let pbkdf = self.pbkdf.choice(self.version).map_err(VolumeError::Luks)?;
        Ok(FormatOptions {
            version: self.version,
            cipher,
            key_bytes,
            sector_size,
            pbkdf,
            label: self.label.clone(),
            subsystem: self.subsystem.clone(),
            metadata_size: self.metadata_size,
            keyslots_size: self.keyslots_size,
            detached_header: paths.header.is_some(),
            data_offset: self.data_offset_sectors.map(|sectors| sectors.saturating_mul(512)),
            uuid: self.uuid.clone(),
            integrity: self.integrity.clone(),
            integrity_no_journal: self.integrity_no_journal,
        })
    }

    /// The cipher and the volume key's size: `--key-size` is the
    /// encryption key's, and an HMAC's key follows it in the volume key
    /// (as cryptsetup counts them).
    fn cipher_and_key_bytes(&self) -> Result<(DataCipher, usize), FormatError> {
        match &self.integrity {
            Some(IntegrityKind::Aead) => {
                if self.cipher != AEAD_ENCRYPTION {
                    return Err(FormatError::Refused(format!(
                        "integrity aead needs --cipher {AEAD_ENCRYPTION} (AES-GCM authenticates \
                         each sector); {} does not authenticate",
                        self.cipher
                    )));
                }
                let key_bits = self.key_bits.unwrap_or(256);
                if key_bits != 128 && key_bits != 256 {
                    return Err(FormatError::Refused(format!(
                        "{AEAD_ENCRYPTION} with a {key_bits}-bit key (supported: 128 or 256 bits)"
                    )));
                }
                // The keyslots' own cipher; the segment is AES-GCM.
                Ok((DataCipher::AesXtsPlain64, key_bits / 8))
            }
            integrity => {
                let cipher = DataCipher::from_spec(self.cipher).map_err(refused)?;
                let key_bits = self.key_bits.unwrap_or(cipher.default_key_bits());
                cipher.check_key_bits(key_bits).map_err(refused)?;
                let mac_bytes = match integrity {
                    Some(kind) => {
                        if cipher != DataCipher::AesXtsPlain64 {
                            return Err(FormatError::Refused(format!(
                                "integrity {} goes with aes-xts-plain64, not {}",
                                kind.spec(),
                                cipher.spec()
                            )));
                        }
                        kind.key_bytes().map_err(refused)?
                    }
                    None => 0,
                };
                Ok((cipher, key_bits / 8 + mac_bytes))
            }
        }
    }
}

/// A cipher refusal in the words of the check, without the error's kind.
fn refused(error: rampart_luks::Error) -> FormatError {
    FormatError::Refused(match error {
        rampart_luks::Error::InvalidArgument(message) => message,
        other => other.to_string(),
    })
}

/// Creates the files of a new volume that do not exist yet: the data file
/// with `size` bytes (sparse), and a detached header file owner-only, as
/// cryptsetup creates it, since its keyslots are key material.
///
/// # Errors
/// Refused: the data file is missing and no size was given. Volume: a file
/// cannot be created, sized or synced.
pub fn create_files(paths: &VolumePaths, size: Option<u64>) -> Result<(), FormatError> {
    let data = &paths.data;
    if !data.exists() {
        let size = size.ok_or_else(|| {
            FormatError::Refused(format!(
                "{} does not exist; give --size to create it",
                data.display()
            ))
        })?;
        let io = |what: &str, e| VolumeError::io(format!("cannot {what} {}", data.display()), e);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(data)
            .map_err(|e| io("create", e))?;
        file.set_len(size).map_err(|e| io("size", e))?;
        file.sync_all().map_err(|e| io("sync", e))?;
    }
    if let Some(header) = &paths.header {
        if !header.exists() {
            OpenOptions::new().write(true).create_new(true).mode(0o600).open(header).map_err(
                |e| VolumeError::io(format!("cannot create header file {}", header.display()), e),
            )?;
        }
    }
    Ok(())
}

/// Checks that the data device holds data after the header `luks` just
/// written to it (a detached header leaves the whole device to data).
///
/// # Errors
/// NoRoomForData, or the data device cannot be examined.
pub fn check_data_room(paths: &VolumePaths, luks: &Luks) -> Result<(), FormatError> {
    let data_len = std::fs::metadata(&paths.data)
        .map_err(|e| VolumeError::io(format!("cannot stat {}", paths.data.display()), e))?
        .len();
    if paths.header.is_none() && data_len <= luks.metadata_end() {
        return Err(FormatError::NoRoomForData {
            data: paths.data.clone(),
            data_len,
            header_end: luks.metadata_end(),
        });
    }
    Ok(())
}
