//! Planning a reencryption before anything is written: the rules cryptsetup
//! applies to the new key's cipher, key size and sector size, to
//! `--reduce-device-size`, to the resilience and to its change on resume,
//! checked over typed [`ReencryptSettings`]. A refusal is a [`PlanError`],
//! the request's fault.

use std::path::Path;

use rampart_crypto::{random_secret, HashAlg, SecretBytes};
use rampart_luks::{
    DataCipher, EncryptPlan, FormatOptions, LuksVersion, PbkdfChoice, ReencryptMode,
    ReencryptState, Resilience, Segment,
};

/// A request the rules refuse, in one line naming the option at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

/// The resilience asked for (`--resilience`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResilienceMode {
    /// A hash per block of old ciphertext in the header.
    Checksum,
    /// A copy of the hotzone in the header.
    Journal,
    /// Nothing: an interruption other than a clean stop loses data.
    None,
    /// The data moves (encryption with a data shift only).
    Datashift,
}

impl ResilienceMode {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Checksum => "checksum",
            Self::Journal => "journal",
            Self::None => "none",
            Self::Datashift => "datashift",
        }
    }
}

/// What a reencryption request asks for; `None` leaves the choice to the
/// volume or to cryptsetup's defaults.
#[derive(Debug, Clone, Default)]
pub struct ReencryptSettings {
    /// The new data cipher's spec (`--cipher`).
    pub cipher: Option<String>,
    /// The new volume key's size in bits (`--key-size`).
    pub key_bits: Option<usize>,
    /// The new encryption sector size (`--sector-size`).
    pub sector_size: Option<u32>,
    /// A passphrase for the one new keyslot is given (`--new-key-file`).
    pub new_passphrase: bool,
    pub resilience: Option<ResilienceMode>,
    /// The checksum resilience's hash (`--resilience-hash`).
    pub resilience_hash: Option<HashAlg>,
    /// Bytes given up for the header when encrypting (`--reduce-device-size`).
    pub reduce_device_size: Option<u64>,
    /// Only the reencryption metadata is to be written (`--init-only`).
    pub init_only: bool,
    /// Only a reencryption in progress is to be resumed (`--resume-only`).
    pub resume_only: bool,
}

/// The shape of a new volume key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewKey {
    pub cipher: DataCipher,
    pub key_bits: usize,
    pub sector_size: u32,
}

impl NewKey {
    /// A random key of this shape; an XTS key's two halves differ, as the
    /// kernel requires.
    ///
    /// # Errors
    /// The system's random source failed.
    pub fn generate(&self) -> Result<SecretBytes, rampart_crypto::CryptoError> {
        loop {
            let key = random_secret(self.key_bits / 8)?;
            let half = key.len() / 2;
            if self.cipher != DataCipher::AesXtsPlain64
                || key.expose()[..half] != key.expose()[half..]
            {
                return Ok(key);
            }
        }
    }
}

/// A re-encryption's start under a new key, as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReencryptStartPlan {
    pub key: NewKey,
    pub resilience: Resilience,
}

/// An encryption's start, as planned: the header to format and how the
/// data gets under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptStartPlan {
    pub key: NewKey,
    /// The header is a file of its own.
    pub detached: bool,
    /// Bytes of the data device.
    pub device_len: u64,
    /// The data shift (see [`EncryptPlan::shift`]).
    pub shift: Option<u64>,
    pub resilience: Resilience,
}

impl EncryptStartPlan {
    /// The header's format options, its keyslots under `pbkdf`.
    #[must_use]
    pub fn format_options(&self, pbkdf: PbkdfChoice) -> FormatOptions {
        let detached = self.detached;
        FormatOptions {
            version: LuksVersion::Luks2,
            cipher: self.key.cipher,
            key_bytes: self.key.key_bits / 8,
            sector_size: self.key.sector_size,
            pbkdf,
            label: None,
            subsystem: None,
            metadata_size: (detached && self.shift.is_some()).then_some(16 << 10),
            keyslots_size: self.shift.filter(|_| detached).map(|s| s - (32 << 10)),
            detached_header: detached,
            data_offset: Some(if detached { 0 } else { self.shift.unwrap_or(0) }),
            uuid: None,
            integrity: None,
            integrity_no_journal: false,
        }
    }

    /// What the header records of the encryption.
    #[must_use]
    pub fn encrypt_plan(&self) -> EncryptPlan {
        EncryptPlan {
            resilience: self.resilience.clone(),
            device_len: self.device_len,
            shift: self.shift,
        }
    }

    /// The data shift when the data moves up under an attached header:
    /// the first `shift` bytes go to the device's last ones first.
    #[must_use]
    pub fn moved_chunk(&self) -> Option<u64> {
        self.shift.filter(|_| !self.detached)
    }
}

/// The checksum block: the device's block size (4096 on files and most
/// disks) when the data is made of such blocks, as cryptsetup picks it;
/// at least a sector.
#[must_use]
pub fn checksum_block(data_len: u64, sector: u32) -> u32 {
    if data_len % 4096 == 0 {
        4096u32.max(sector)
    } else {
        sector
    }
}

fn usage<T>(message: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError(message.into()))
}

impl ReencryptSettings {
    /// The resilience asked for, checksums over `block_size` blocks
    /// (default: checksum with sha256).
    ///
    /// # Errors
    /// A hash without checksum resilience, or datashift (which only an
    /// encryption with a data shift has).
    pub fn resilience(&self, block_size: u32) -> Result<Resilience, PlanError> {
        let mode = self.resilience.unwrap_or(ResilienceMode::Checksum);
        if self.resilience_hash.is_some() && mode != ResilienceMode::Checksum {
            return usage("--resilience-hash goes with --resilience checksum");
        }
        Ok(match mode {
            ResilienceMode::Checksum => Resilience::Checksum {
                hash: self.resilience_hash.unwrap_or(HashAlg::Sha256),
                block_size,
            },
            ResilienceMode::Journal => Resilience::Journal,
            ResilienceMode::None => Resilience::None,
            ResilienceMode::Datashift => {
                return usage(
                    "unknown --resilience 'datashift' (expected checksum, journal or none)",
                )
            }
        })
    }

    /// The options that shape a new key are given.
    #[must_use]
    pub fn shapes_new_key(&self) -> bool {
        self.cipher.is_some()
            || self.key_bits.is_some()
            || self.sector_size.is_some()
            || self.new_passphrase
    }

    /// Resuming takes none of the options of a start.
    ///
    /// # Errors
    /// Any of them given for `data`, being re-encrypted as `state` says.
    pub fn check_resume(&self, data: &Path, state: &ReencryptState) -> Result<(), PlanError> {
        if self.init_only {
            return usage(format!("the reencryption of {} is already initialised", data.display()));
        }
        if self.shapes_new_key() || self.reduce_device_size.is_some() {
            return usage(format!(
                "{} is already being re-encrypted ({} resilience); resume it without --cipher, --key-size, --sector-size, --new-key-file or --reduce-device-size",
                data.display(),
                state.resilience.name()
            ));
        }
        Ok(())
    }

    /// A start (of a reencryption, or of an encryption in place when
    /// `encrypting`) is refused when only a resume was asked for.
    ///
    /// # Errors
    /// `--resume-only` given for `data`, which nothing is being done to.
    pub fn check_start(&self, data: &Path, encrypting: bool) -> Result<(), PlanError> {
        if self.resume_only {
            let what = if encrypting { "encrypted" } else { "re-encrypted" };
            return usage(format!("{} is not being {what}: nothing to resume", data.display()));
        }
        Ok(())
    }

    /// Decryption leaves no key behind, so the options that shape a new
    /// one are mistakes, refused before anything is written.
    ///
    /// # Errors
    /// Any of them given.
    pub fn check_decrypt(&self) -> Result<(), PlanError> {
        if self.shapes_new_key() {
            return usage(
                "--decrypt takes no --cipher, --key-size, --sector-size or --new-key-file",
            );
        }
        Ok(())
    }

    /// Another resilience than `state`'s is asked for on resume.
    #[must_use]
    pub fn changes_resilience(&self, state: &ReencryptState) -> bool {
        self.resilience.is_some_and(|r| r.name() != state.resilience.name())
            || self.resilience_hash.is_some_and(|h| match &state.resilience {
                Resilience::Checksum { hash, .. } => h != *hash,
                _ => true,
            })
    }

    /// Refuses a change of resilience on resume where a data shift is
    /// involved: it keeps its resilience to the end.
    ///
    /// # Errors
    /// `state` or the request has a data shift.
    pub fn check_resilience_change(
        &self,
        data: &Path,
        state: &ReencryptState,
    ) -> Result<(), PlanError> {
        if matches!(state.resilience, Resilience::Datashift { .. })
            || self.resilience == Some(ResilienceMode::Datashift)
        {
            return usage(format!(
                "{} is being {} with resilience {}: a data shift keeps its resilience to the end, as in cryptsetup",
                data.display(),
                match state.mode {
                    ReencryptMode::Encrypt => "encrypted",
                    ReencryptMode::Decrypt => "decrypted",
                    _ => "re-encrypted",
                },
                state.resilience.name()
            ));
        }
        Ok(())
    }

    /// The resilience that replaces `state`'s on resume (cryptsetup 2.6
    /// allows a change among checksum, journal and none, see
    /// [`Self::check_resilience_change`]), for a data device of
    /// `device_len` bytes.
    ///
    /// # Errors
    /// A resilience refused as at a start.
    pub fn changed_resilience(
        &self,
        state: &ReencryptState,
        device_len: u64,
    ) -> Result<Resilience, PlanError> {
        let unit = state.old.sector_size.max(state.new.sector_size);
        self.resilience(checksum_block(device_len.saturating_sub(state.new.offset), unit))
    }

    /// The new key's cipher, size and sector size: those asked for, else
    /// `current`'s (a re-encryption keeps what it may), else cryptsetup's
    /// defaults (aes-xts-plain64, 512 bits, 4096-byte sectors).
    ///
    /// # Errors
    /// An unknown cipher, a key size the cipher does not take, a sector
    /// size that is not a power of two from 512 to 4096.
    pub fn new_key(&self, current: Option<&Segment>) -> Result<NewKey, PlanError> {
        let cipher = match (&self.cipher, current) {
            (Some(spec), _) => DataCipher::from_spec(spec).map_err(|e| PlanError(e.to_string()))?,
            (None, Some(segment)) => segment.cipher,
            (None, None) => DataCipher::AesXtsPlain64,
        };
        let key_bits = self.key_bits.unwrap_or(match current {
            Some(segment) if segment.cipher == cipher => segment.key_bytes * 8,
            _ => cipher.default_key_bits(),
        });
        if let Err(rampart_luks::Error::InvalidArgument(message)) = cipher.check_key_bits(key_bits)
        {
            return usage(message);
        }
        let sector_size = self.sector_size.unwrap_or(current.map_or(4096, |s| s.sector_size));
        if !matches!(sector_size, 512 | 1024 | 2048 | 4096) {
            return usage(format!("--sector-size {sector_size} must be 512, 1024, 2048 or 4096"));
        }
        Ok(NewKey { cipher, key_bits, sector_size })
    }

    /// A re-encryption under `key` (from [`Self::new_key`]) of the volume
    /// whose data segment is `segment`, on a data device of `device_len`
    /// bytes.
    ///
    /// # Errors
    /// A data area that is not made of whole sectors, a resilience refused.
    pub fn reencrypt_start(
        &self,
        segment: &Segment,
        key: NewKey,
        device_len: u64,
    ) -> Result<ReencryptStartPlan, PlanError> {
        let data_len = device_len.saturating_sub(segment.offset);
        let unit = key.sector_size.max(segment.sector_size);
        if segment.size.is_none() && data_len % u64::from(unit) != 0 {
            return usage(format!(
                "the data area ({data_len} bytes) is not a multiple of the {unit}-byte sector size"
            ));
        }
        // cryptsetup hashes blocks of the device's block size (4096 on
        // files and most disks), at least a sector.
        let block = if data_len % 4096 == 0 { 4096 } else { unit };
        let resilience = self.resilience(block.max(unit))?;
        Ok(ReencryptStartPlan { key, resilience })
    }

    /// The resilience of a decryption in place (its options checked by
    /// [`Self::check_decrypt`]) of the volume whose data segment is
    /// `segment`, on a data device of `device_len` bytes.
    ///
    /// # Errors
    /// A resilience refused.
    pub fn decrypt_resilience(
        &self,
        segment: &Segment,
        device_len: u64,
    ) -> Result<Resilience, PlanError> {
        let data_len = device_len.saturating_sub(segment.offset);
        self.resilience(checksum_block(data_len, segment.sector_size))
    }

    /// The resilience of a decryption that moves the data down over the
    /// exported header (its options checked by [`Self::check_decrypt`]):
    /// cryptsetup protects the moved chunk with 4096-byte checksum blocks
    /// whatever the sector size, the data offset being a multiple of 4096.
    ///
    /// # Errors
    /// A resilience refused.
    pub fn moved_decrypt_resilience(&self) -> Result<Resilience, PlanError> {
        self.resilience(4096)
    }

    /// An encryption of the plaintext `data`, `device_len` bytes, with a
    /// detached header or room made for an attached one
    /// (`reduce_device_size`).
    ///
    /// # Errors
    /// A new key refused, no room for the header, a reduction out of its
    /// range or too large for the device, data that is not made of whole
    /// sectors, a resilience other than datashift with a data shift.
    pub fn encrypt_start(
        &self,
        data: &Path,
        device_len: u64,
        detached: bool,
    ) -> Result<EncryptStartPlan, PlanError> {
        let key = self.new_key(None)?;
        let sector_size = key.sector_size;
        let shift = match (self.reduce_device_size, detached) {
            (Some(reduce), true) => Some(detached_shift(data, reduce, sector_size, device_len)?),
            (Some(reduce), false) => Some(attached_shift(data, reduce, sector_size, device_len)?),
            (None, false) => {
                return usage(
                    "--encrypt needs room for the header: --reduce-device-size SIZE (the data moves up) or --header FILE (a detached header)",
                )
            }
            (None, true) => None,
        };
        let data_len = if detached { device_len } else { device_len - shift.map_or(0, |s| s * 2) };
        if data_len % u64::from(sector_size) != 0 {
            return usage(format!(
                "the data ({data_len} bytes) is not a multiple of the {sector_size}-byte sector size"
            ));
        }
        let resilience = if shift.is_some() {
            if self.resilience.is_some_and(|r| r != ResilienceMode::Datashift) {
                return usage(
                    "encryption with --reduce-device-size has resilience datashift, as in cryptsetup",
                );
            }
            Resilience::None
        } else {
            self.resilience(checksum_block(data_len, sector_size))?
        };
        Ok(EncryptStartPlan { key, detached, device_len, shift, resilience })
    }
}

/// cryptsetup's `--reduce-device-size` with `--header`: the header file
/// takes `reduce` bytes (16 KiB metadata twice, the rest keyslots), the
/// data stays in place and is encrypted backward in hotzones of `reduce`
/// bytes (resilience datashift, the shift `reduce`).
fn detached_shift(
    data: &Path,
    reduce: u64,
    sector_size: u32,
    device_len: u64,
) -> Result<u64, PlanError> {
    let unit = u64::from(sector_size).max(4096);
    if reduce == 0 || reduce % unit != 0 {
        return usage(format!(
            "--reduce-device-size {reduce} with --header must be a non-zero multiple of {unit} bytes (4096 and the sector size)"
        ));
    }
    let (low, high) = (1u64 << 20, (128u64 << 20) + (32 << 10));
    if !(low..=high).contains(&reduce) {
        return usage(format!(
            "--reduce-device-size {reduce} with --header must be from 1 MiB to 128 MiB + 32 KiB (the header file: two 16 KiB metadata copies and a keyslots area of at most 128 MiB)"
        ));
    }
    if device_len < reduce {
        return usage(format!(
            "{} has {device_len} bytes: encrypting it with --reduce-device-size {reduce} needs at least {reduce}",
            data.display()
        ));
    }
    Ok(reduce)
}

/// cryptsetup's `--reduce-device-size` with an attached header: the data
/// moves up by half of it, the header taking the first half.
fn attached_shift(
    data: &Path,
    reduce: u64,
    sector_size: u32,
    device_len: u64,
) -> Result<u64, PlanError> {
    let unit = u64::from(sector_size) * 2;
    if reduce == 0 || reduce % unit != 0 {
        return usage(format!(
            "--reduce-device-size {reduce} must be a non-zero multiple of twice the {sector_size}-byte sector size ({unit} bytes)"
        ));
    }
    if reduce > 1 << 30 {
        return usage(format!(
            "--reduce-device-size {reduce} is larger than 1 GiB, cryptsetup's limit"
        ));
    }
    let shift = reduce / 2;
    let minimum = 3 * shift;
    if device_len < minimum {
        return usage(format!(
            "{} has {device_len} bytes: encrypting it with --reduce-device-size {reduce} needs at least {minimum}",
            data.display()
        ));
    }
    Ok(shift)
}
