//! The LUKS on-disk formats: reading, verifying and writing LUKS2 and LUKS1
//! headers, byte-compatible with cryptsetup 2.6+.
//!
//! [`Luks::load`] reads and validates a header of either version (for
//! LUKS2, both copies, recovering from a damaged one);
//! [`Luks::unlock`] recovers the volume key from a passphrase;
//! [`Luks::format`] writes a new header; keyslots and tokens are added and
//! removed in place with crash-safe ordering.
//!
//! All cryptography comes from `rampart-crypto`. Every secret (passphrase-
//! derived keys, volume keys, anti-forensic material) lives in a
//! [`SecretBytes`] that is wiped on drop; no error or `Debug` output ever
//! contains one.
#![forbid(unsafe_code)]

mod af;
mod cipher;
mod error;
pub mod integrity;
mod io;
mod luks1;
mod luks2;
mod pbkdf;
mod reader;
mod uuid;

pub use cipher::DataCipher;
pub use error::{Error, Result};
pub use io::{MemoryIo, MetadataIo};
pub use luks2::integrity::{
    IntegrityKind, IntegritySegment, KeyLayout, SegmentIntegrity, TagLayout, AEAD_ENCRYPTION,
};
pub use luks2::reencrypt::{
    following_hotzone, in_place_shift_area, MapCrypt, MapPiece, ReencryptDirection, ReencryptMode,
    ReencryptSide, ReencryptState, Resilience, IN_PLACE_SHIFT_BLOCK, REQUIREMENT_V2,
    REQUIREMENT_V3,
};
pub use luks2::EncryptPlan;
pub use pbkdf::{pbkdf_for_time, KdfParams, PbkdfChoice, PbkdfKind, PbkdfRequest};
pub use rampart_crypto::{HashAlg, SecretBytes};

use rampart_crypto::random_secret;
use serde_json::Value;

use crate::luks1::Luks1;
use crate::luks2::Luks2;

/// The LUKS header version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LuksVersion {
    Luks1,
    Luks2,
}

/// Where and how the encrypted data lives.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Bytes from the start of the data device.
    pub offset: u64,
    /// `None`: to the end of the device.
    pub size: Option<u64>,
    pub cipher: DataCipher,
    pub key_bytes: usize,
    /// Encryption sector size in bytes.
    pub sector_size: u32,
    /// The IV/tweak of the first sector, in 512-byte units.
    pub iv_tweak: u64,
}

/// Options of [`Luks::format`] (cryptsetup `luksFormat` options).
#[derive(Debug, Clone)]
pub struct FormatOptions {
    pub version: LuksVersion,
    pub cipher: DataCipher,
    /// Volume key size: 64 for 512-bit AES-XTS.
    pub key_bytes: usize,
    /// LUKS2: a power of two from 512 to 4096. LUKS1: 512.
    pub sector_size: u32,
    pub pbkdf: PbkdfChoice,
    pub label: Option<String>,
    pub subsystem: Option<String>,
    /// LUKS2 size of one header copy (binary header and JSON area): a power
    /// of two from 16 KiB (the default) to 4 MiB.
    pub metadata_size: Option<u64>,
    /// LUKS2 keyslots area size (a multiple of 4096, at most 128 MiB).
    pub keyslots_size: Option<u64>,
    /// The device given to `format` is a header file; the data offset is 0
    /// (in the data device) unless `data_offset` says otherwise.
    pub detached_header: bool,
    /// Data offset in bytes.
    pub data_offset: Option<u64>,
    pub uuid: Option<String>,
    /// LUKS2 authenticated encryption (`cryptsetup luksFormat
    /// --integrity`): `key_bytes` then counts the encryption key and the
    /// integrity key together, HMAC goes with `aes-xts-plain64`, and
    /// `aead` makes the segment `aes-gcm-random` (`cipher` is not used).
    pub integrity: Option<IntegrityKind>,
    /// LUKS2: records the persistent flag `no-journal`, so that cryptsetup
    /// and Rampart write through dm-integrity without its journal (what
    /// `cryptsetup open --integrity-no-journal --persistent` stores).
    pub integrity_no_journal: bool,
}

impl Default for FormatOptions {
    /// cryptsetup 2.6's defaults: LUKS2, aes-xts-plain64 with a 512-bit
    /// key, 4096-byte sectors, argon2id.
    fn default() -> Self {
        Self {
            version: LuksVersion::Luks2,
            cipher: DataCipher::AesXtsPlain64,
            key_bytes: 64,
            sector_size: 4096,
            pbkdf: PbkdfChoice::default(),
            label: None,
            subsystem: None,
            metadata_size: None,
            keyslots_size: None,
            detached_header: false,
            data_offset: None,
            uuid: None,
            integrity: None,
            integrity_no_journal: false,
        }
    }
}

impl FormatOptions {
    /// cryptsetup's defaults for `version` (LUKS1: PBKDF2-SHA256 and
    /// 512-byte sectors).
    #[must_use]
    pub fn default_for(version: LuksVersion) -> Self {
        match version {
            LuksVersion::Luks2 => Self::default(),
            LuksVersion::Luks1 => Self {
                version,
                sector_size: 512,
                pbkdf: PbkdfChoice::luks1_default(),
                ..Self::default()
            },
        }
    }
}

/// What [`Luks::load`] had to work around.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// The LUKS2 header was read from the secondary copy.
    pub used_secondary: bool,
    /// One line per problem found, e.g. a damaged header copy.
    pub warnings: Vec<String>,
}

/// Why [`Luks::check_removal`] refused to remove a keyslot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemovalRefused {
    /// The keyslot is not in use.
    NotActive,
    /// It is the last keyslot.
    Last,
}

/// A loaded, verified LUKS header of either version. It holds no key
/// material.
#[derive(Clone)]
pub struct Luks {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    V1(Box<Luks1>),
    V2(Box<Luks2>),
}

impl std::fmt::Debug for Luks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Luks")
            .field("version", &self.version())
            .field("uuid", &self.uuid())
            .field("keyslots", &self.active_keyslots())
            .finish_non_exhaustive()
    }
}

impl Luks {
    /// Reads and validates the header on `io`. A damaged LUKS2 copy is
    /// reported in the [`LoadReport`] and the other copy is used.
    pub fn load(io: &dyn MetadataIo) -> Result<(Luks, LoadReport)> {
        let mut report = LoadReport::default();
        let dev_len = io.len()?;
        let mut start = [0u8; 8];
        let have_start = dev_len >= 8 && io.read_at(0, &mut start).is_ok();
        let magic_ok = have_start && start[..6] == luks1::MAGIC;
        let version = u16::from_be_bytes([start[6], start[7]]);
        let inner = match (magic_ok, version) {
            (true, 1) => Inner::V1(Box::new(Luks1::load(io, dev_len, &mut report)?)),
            (true, 2) => Inner::V2(Box::new(Luks2::load(io, dev_len, &mut report)?)),
            _ if luks2::find_secondary(io, dev_len) => {
                Inner::V2(Box::new(Luks2::load(io, dev_len, &mut report)?))
            }
            (true, v) => {
                return Err(Error::corrupt(format!("unsupported LUKS version {v}")));
            }
            (false, _) if dev_len < 4096 => {
                return Err(Error::NotLuks(format!(
                    "no LUKS header found (the device is only {dev_len} bytes)"
                )));
            }
            (false, _) => return Err(Error::NotLuks("no LUKS header found (bad magic)".into())),
        };
        Ok((Luks { inner }, report))
    }

    /// Writes a new header with a fresh random volume key in keyslot 0 and
    /// returns the key.
    pub fn format(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        passphrase: &[u8],
    ) -> Result<(Luks, SecretBytes)> {
        if opts.key_bytes == 0 || opts.key_bytes > af::MAX_KEY_BYTES {
            return Err(Error::invalid(format!(
                "key size {} bytes is not supported",
                opts.key_bytes
            )));
        }
        let key = loop {
            let key = random_secret(opts.key_bytes)?;
            // AES-XTS refuses keys whose halves are equal; draw again.
            let xts = match &opts.integrity {
                None if opts.cipher == DataCipher::AesXtsPlain64 => key.len(),
                Some(kind @ (IntegrityKind::HmacSha256 | IntegrityKind::HmacSha512)) => {
                    key.len().saturating_sub(kind.key_bytes()?)
                }
                _ => 0,
            };
            let (a, b) = key.expose()[..xts].split_at(xts / 2);
            if xts == 0 || a != b {
                break key;
            }
        };
        let luks = Self::format_with_key(io, opts, &key, passphrase)?;
        Ok((luks, key))
    }

    /// Writes a new header holding `volume_key` in keyslot 0: both LUKS2
    /// copies (or the LUKS1 header), the keyslots area filled with random
    /// bytes as cryptsetup does, and the keyslot.
    pub fn format_with_key(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        volume_key: &SecretBytes,
        passphrase: &[u8],
    ) -> Result<Luks> {
        if volume_key.len() != opts.key_bytes {
            return Err(Error::invalid(format!(
                "the volume key is {} bytes but the options say {}",
                volume_key.len(),
                opts.key_bytes
            )));
        }
        let inner =
            match opts.version {
                LuksVersion::Luks1 if opts.integrity.is_some() => return Err(Error::invalid(
                    "authenticated encryption (integrity) needs LUKS2; LUKS1 has no place for it",
                )),
                LuksVersion::Luks1 => {
                    Inner::V1(Box::new(Luks1::format(io, opts, volume_key, passphrase)?))
                }
                LuksVersion::Luks2 => {
                    Inner::V2(Box::new(Luks2::format(io, opts, volume_key, passphrase)?))
                }
            };
        Ok(Luks { inner })
    }

    #[must_use]
    pub fn version(&self) -> LuksVersion {
        match self.inner {
            Inner::V1(_) => LuksVersion::Luks1,
            Inner::V2(_) => LuksVersion::Luks2,
        }
    }

    #[must_use]
    pub fn uuid(&self) -> &str {
        match &self.inner {
            Inner::V1(h) => h.uuid(),
            Inner::V2(h) => h.uuid(),
        }
    }

    /// Sets the volume UUID (`cryptsetup luksUUID --uuid`): a canonical
    /// 36-character UUID, written in one crash-safe header update.
    pub fn set_uuid(&mut self, io: &dyn MetadataIo, uuid: &str) -> Result<()> {
        let uuid = crate::uuid::parse(uuid)?;
        match &mut self.inner {
            Inner::V1(h) => h.set_uuid(io, uuid),
            Inner::V2(h) => h.set_uuid(io, uuid),
        }
    }

    /// The LUKS2 label (LUKS1 has none).
    #[must_use]
    pub fn label(&self) -> Option<&str> {
        match &self.inner {
            Inner::V1(_) => None,
            Inner::V2(h) => h.label(),
        }
    }

    /// The LUKS2 subsystem label (LUKS1 has none).
    #[must_use]
    pub fn subsystem(&self) -> Option<&str> {
        match &self.inner {
            Inner::V1(_) => None,
            Inner::V2(h) => h.subsystem(),
        }
    }

    /// The data segment. LUKS2 headers with several segments (a
    /// reencryption in progress), integrity protection or an unsupported
    /// cipher are refused.
    pub fn segment(&self) -> Result<Segment> {
        match &self.inner {
            Inner::V1(h) => h.segment(),
            Inner::V2(h) => h.segment(),
        }
    }

    /// The LUKS2 data segment with integrity protection (dm-integrity
    /// under dm-crypt), or `None` when the segment has none (or the
    /// header is LUKS1).
    pub fn integrity_segment(&self) -> Result<Option<IntegritySegment>> {
        match &self.inner {
            Inner::V1(_) => Ok(None),
            Inner::V2(h) => h.integrity_segment(),
        }
    }

    /// Bytes reserved for the header and keyslots: the earliest possible
    /// data offset.
    #[must_use]
    pub fn metadata_end(&self) -> u64 {
        match &self.inner {
            Inner::V1(h) => h.metadata_end(),
            Inner::V2(h) => h.metadata_end(),
        }
    }

    /// Recovers the volume key with `passphrase`, trying every active
    /// keyslot (in priority order) or just `slot`.
    pub fn unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(usize, SecretBytes)> {
        match &self.inner {
            Inner::V1(h) => h.unlock(io, passphrase, slot),
            Inner::V2(h) => h.unlock(io, passphrase, slot),
        }
    }

    /// Whether `key` is this volume's key (checked against the digest).
    pub fn verify_volume_key(&self, key: &SecretBytes) -> Result<bool> {
        match &self.inner {
            Inner::V1(h) => h.verify_volume_key(key),
            Inner::V2(h) => h.verify_volume_key(key),
        }
    }

    /// Stores `volume_key` under `passphrase` in a free keyslot (or `slot`).
    /// The key material is written and synced before the header refers to it.
    pub fn add_keyslot(
        &mut self,
        io: &dyn MetadataIo,
        volume_key: &SecretBytes,
        passphrase: &[u8],
        pbkdf: &PbkdfChoice,
        slot: Option<usize>,
    ) -> Result<usize> {
        match &mut self.inner {
            Inner::V1(h) => h.add_keyslot(io, volume_key, passphrase, pbkdf, slot),
            Inner::V2(h) => h.add_keyslot(io, volume_key, passphrase, pbkdf, slot),
        }
    }

    /// Overwrites the keyslot's key material with random bytes, then removes
    /// it from the header.
    pub fn remove_keyslot(&mut self, io: &dyn MetadataIo, slot: usize) -> Result<()> {
        match &mut self.inner {
            Inner::V1(h) => h.remove_keyslot(io, slot),
            Inner::V2(h) => h.remove_keyslot(io, slot),
        }
    }

    /// Whether keyslot `slot` may be removed: it must be in use, and it may
    /// be the last one only with `allow_last`, since without it the data
    /// can never be decrypted again.
    ///
    /// # Errors
    /// Why not.
    pub fn check_removal(
        &self,
        slot: usize,
        allow_last: bool,
    ) -> std::result::Result<(), RemovalRefused> {
        let active = self.active_keyslots();
        if !active.contains(&slot) {
            return Err(RemovalRefused::NotActive);
        }
        if active.len() == 1 && !allow_last {
            return Err(RemovalRefused::Last);
        }
        Ok(())
    }

    /// Moves keyslot `old_slot`'s volume key to `passphrase` (cryptsetup's
    /// `luksChangeKey`); returns the new keyslot. The new keyslot is
    /// complete on disk before the old one goes, so a crash in between
    /// leaves both passphrases working, never neither; with every keyslot
    /// in use the change can only be made in place, as cryptsetup does,
    /// and `in_place` is called first.
    ///
    /// # Errors
    /// As [`Self::add_keyslot`] and [`Self::remove_keyslot`].
    pub fn change_keyslot(
        &mut self,
        io: &dyn MetadataIo,
        volume_key: &SecretBytes,
        old_slot: usize,
        passphrase: &[u8],
        pbkdf: &PbkdfChoice,
        in_place: impl FnOnce(),
    ) -> Result<usize> {
        match self.add_keyslot(io, volume_key, passphrase, pbkdf, None) {
            Ok(new_slot) => {
                self.remove_keyslot(io, old_slot)?;
                Ok(new_slot)
            }
            Err(Error::NoSpace(_)) => {
                in_place();
                self.remove_keyslot(io, old_slot)?;
                self.add_keyslot(io, volume_key, passphrase, pbkdf, Some(old_slot))
            }
            Err(other) => Err(other),
        }
    }

    /// The ids of the keyslots in use.
    #[must_use]
    pub fn active_keyslots(&self) -> Vec<usize> {
        match &self.inner {
            Inner::V1(h) => h.active_keyslots(),
            Inner::V2(h) => h.active_keyslots(),
        }
    }

    /// The LUKS2 tokens, as stored (LUKS1: none).
    #[must_use]
    pub fn tokens(&self) -> Vec<(usize, Value)> {
        match &self.inner {
            Inner::V1(_) => Vec::new(),
            Inner::V2(h) => h.tokens(),
        }
    }

    /// Adds a LUKS2 token: a JSON object with a `type` string and a
    /// `keyslots` array of existing keyslot ids (as strings).
    pub fn add_token(
        &mut self,
        io: &dyn MetadataIo,
        token: Value,
        id: Option<usize>,
    ) -> Result<usize> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 headers have no tokens")),
            Inner::V2(h) => h.add_token(io, token, id),
        }
    }

    /// Replaces LUKS2 token `id` in a single crash-safe header write.
    pub fn replace_token(&mut self, io: &dyn MetadataIo, id: usize, token: Value) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 headers have no tokens")),
            Inner::V2(h) => h.replace_token(io, id, token),
        }
    }

    /// Removes a LUKS2 token.
    pub fn remove_token(&mut self, io: &dyn MetadataIo, id: usize) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 headers have no tokens")),
            Inner::V2(h) => h.remove_token(io, id),
        }
    }

    /// Rewrites the header. LUKS2: with the next seqid, the copy not loaded
    /// from first (the secondary when both were valid), each synced, so one
    /// valid copy always exists. LUKS1: one header write and a sync.
    pub fn write(&mut self, io: &dyn MetadataIo) -> Result<()> {
        match &mut self.inner {
            Inner::V1(h) => h.write(io),
            Inner::V2(h) => h.write(io),
        }
    }

    /// The size of the header region to back up: the data offset, or for a
    /// detached header the header copies and keyslots area.
    #[must_use]
    pub fn header_bytes(&self) -> u64 {
        match &self.inner {
            Inner::V1(h) => h.header_bytes(),
            Inner::V2(h) => h.header_bytes(),
        }
    }

    /// A `cryptsetup luksDump`-like description.
    #[must_use]
    pub fn dump_text(&self) -> String {
        match &self.inner {
            Inner::V1(h) => h.dump_text(),
            Inner::V2(h) => h.dump_text(),
        }
    }

    /// The parsed metadata as JSON: `version`, `uuid`, `label`,
    /// `data_offset`, `sector_size`, `cipher`, `key_bits`, `keyslots`,
    /// `tokens` (and a few more).
    #[must_use]
    pub fn to_json(&self) -> Value {
        match &self.inner {
            Inner::V1(h) => h.to_json(),
            Inner::V2(h) => h.to_json(),
        }
    }

    /// The LUKS2 persistent activation flags (`allow-discards`,
    /// `no-journal`, ...), as recorded; none for LUKS1.
    #[must_use]
    pub fn persistent_flags(&self) -> Vec<String> {
        match &self.inner {
            Inner::V1(_) => Vec::new(),
            Inner::V2(h) => h.meta.config.flags.clone().unwrap_or_default(),
        }
    }

    /// The reencryption recorded in a LUKS2 header, if one is in progress.
    pub fn reencrypt_state(&self) -> Result<Option<ReencryptState>> {
        match &self.inner {
            Inner::V1(_) => Ok(None),
            Inner::V2(h) => h.reencrypt_state(),
        }
    }

    /// Recovers the old and the new volume key of a reencryption in
    /// progress with one passphrase (tried on the keyslots of each key, or
    /// on `slot` where it belongs to that key).
    pub fn reencrypt_unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(SecretBytes, SecretBytes)> {
        match &self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 volumes cannot be re-encrypted in place")),
            Inner::V2(h) => h.reencrypt_unlock(io, passphrase, slot),
        }
    }

    /// Recovers the old and the new volume key of a reencryption in
    /// progress from the secrets of given keyslots, each key from a keyslot
    /// of its own side (key-manager bindings: one secret per keyslot).
    pub fn reencrypt_unlock_slots(
        &self,
        io: &dyn MetadataIo,
        candidates: &[(usize, &[u8])],
    ) -> Result<(SecretBytes, SecretBytes)> {
        match &self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 volumes cannot be re-encrypted in place")),
            Inner::V2(h) => h.reencrypt_unlock_slots(io, candidates),
        }
    }

    /// The `n` lowest free keyslot ids: those new keyslots get, in order
    /// (`add_keyslot` without a slot, `reencrypt_init`).
    #[must_use]
    pub fn free_keyslots(&self, n: usize) -> Vec<usize> {
        let used = self.active_keyslots();
        (0..32).filter(|id| !used.contains(id)).take(n).collect()
    }

    /// Checks the two keys and the reencryption digest that protects the
    /// reencryption metadata (as cryptsetup does before resuming).
    pub fn reencrypt_verify(&self, old: &SecretBytes, new: &SecretBytes) -> Result<()> {
        match &self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 volumes cannot be re-encrypted in place")),
            Inner::V2(h) => h.reencrypt_verify(old, new),
        }
    }

    /// Starts re-encrypting the data under `new_key` (LUKS2, cryptsetup's
    /// format): one new keyslot per passphrase, then one crash-safe header
    /// write with the reencryption metadata. Returns the new keyslots.
    #[allow(clippy::too_many_arguments)]
    pub fn reencrypt_init(
        &mut self,
        io: &dyn MetadataIo,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        cipher: DataCipher,
        sector_size: u32,
        resilience: Resilience,
        pbkdf: &PbkdfChoice,
        passphrases: &[&[u8]],
    ) -> Result<Vec<usize>> {
        self.reencrypt_init_with_tokens(
            io,
            old_key,
            new_key,
            cipher,
            sector_size,
            resilience,
            pbkdf,
            passphrases,
            &[],
            &[],
        )
    }

    /// [`Self::reencrypt_init`], adding `tokens` in the same header write
    /// and giving the new keyslots their own KDFs (`keyslot_pbkdfs`, by
    /// index into `passphrases`; `pbkdf` for the rest):
    /// each names new keyslots only (they get the lowest free ids, in the
    /// order of `passphrases`: see [`Self::free_keyslots`]), so a
    /// key-manager binding of the new key exists as soon as the
    /// reencryption does.
    #[allow(clippy::too_many_arguments)]
    pub fn reencrypt_init_with_tokens(
        &mut self,
        io: &dyn MetadataIo,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        cipher: DataCipher,
        sector_size: u32,
        resilience: Resilience,
        pbkdf: &PbkdfChoice,
        passphrases: &[&[u8]],
        tokens: &[Value],
        keyslot_pbkdfs: &[&PbkdfChoice],
    ) -> Result<Vec<usize>> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid(
                "LUKS1 volumes cannot be re-encrypted in place (convert to LUKS2 first)",
            )),
            Inner::V2(h) => h.reencrypt_init(
                io,
                old_key,
                &luks2::ReencryptPlan {
                    new_key,
                    cipher,
                    sector_size,
                    resilience,
                    pbkdf,
                    passphrases,
                    tokens,
                    keyslot_pbkdfs,
                },
            ),
        }
    }

    /// Writes a LUKS2 header for plaintext data about to be encrypted in
    /// place under a fresh volume key (cryptsetup's `reencrypt --encrypt`):
    /// keyslot 0 for `passphrase`, the reencryption metadata of `plan`.
    /// Returns the header and the new volume key.
    pub fn format_encrypt(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        passphrase: &[u8],
        plan: &EncryptPlan,
    ) -> Result<(Luks, SecretBytes)> {
        if opts.version != LuksVersion::Luks2 {
            return Err(Error::invalid("only LUKS2 records an encryption in progress"));
        }
        let key = loop {
            let key = random_secret(opts.key_bytes)?;
            let half = key.len() / 2;
            if opts.cipher != DataCipher::AesXtsPlain64
                || key.expose()[..half] != key.expose()[half..]
            {
                break key;
            }
        };
        let h = Luks2::format_encrypt(io, opts, &key, passphrase, plan)?;
        Ok((Luks { inner: Inner::V2(Box::new(h)) }, key))
    }

    /// Starts decrypting a LUKS2 volume's data to plaintext in place
    /// (cryptsetup's `reencrypt --decrypt` on a detached header): one
    /// crash-safe header write.
    pub fn reencrypt_init_decrypt(
        &mut self,
        io: &dyn MetadataIo,
        key: &SecretBytes,
        resilience: Resilience,
        pbkdf: &PbkdfChoice,
    ) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 volumes cannot be decrypted in place")),
            Inner::V2(h) => h.reencrypt_init_decrypt(
                io,
                key,
                resilience,
                pbkdf.hash,
                pbkdf.forced_iterations.is_some(),
            ),
        }
    }

    /// Starts decrypting a LUKS2 volume whose header was attached, the
    /// data moved down over it (cryptsetup 2.6's `reencrypt --decrypt
    /// --header NEWFILE` on an attached header): `self` and `io` are
    /// NEWFILE, a copy of the attached header, and the first data-offset
    /// bytes of ciphertext are already copied to the start of the data
    /// device. One crash-safe header write.
    pub fn reencrypt_init_decrypt_shift(
        &mut self,
        io: &dyn MetadataIo,
        key: &SecretBytes,
        resilience: Resilience,
        device_len: u64,
        pbkdf: &PbkdfChoice,
    ) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("LUKS1 volumes cannot be decrypted in place")),
            Inner::V2(h) => h.reencrypt_init_decrypt_shift(
                io,
                key,
                resilience,
                device_len,
                pbkdf.hash,
                pbkdf.forced_iterations.is_some(),
            ),
        }
    }

    /// The plaintext map of the data segments, in order (dm's table of
    /// the volume): one piece outside a reencryption, several within.
    pub fn data_map(&self) -> Result<Vec<MapPiece>> {
        match &self.inner {
            Inner::V1(_) => Err(Error::invalid("a LUKS1 volume has one data segment")),
            Inner::V2(h) => luks2::reencrypt::data_map(&h.meta),
        }
    }

    /// The plaintext map once the hotzone `zone` (data offset, length) of
    /// the reencryption in progress is done, over `size` data bytes,
    /// without writing anything.
    pub fn reencrypt_data_map_after(&self, size: u64, zone: (u64, u64)) -> Result<Vec<MapPiece>> {
        match &self.inner {
            Inner::V1(_) => Err(Error::invalid("not a LUKS2 volume")),
            Inner::V2(h) => luks2::reencrypt::data_map_after(&h.meta, size, zone),
        }
    }

    /// Changes the resilience mode of a reencryption in progress (clean
    /// state), as cryptsetup 2.6 allows on resume: checksum, journal or
    /// none, never to or from a data shift.
    pub fn reencrypt_set_resilience(
        &mut self,
        io: &dyn MetadataIo,
        old: &SecretBytes,
        new: &SecretBytes,
        resilience: &Resilience,
        pbkdf: &PbkdfChoice,
    ) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("not a LUKS2 volume")),
            Inner::V2(h) => h.reencrypt_set_resilience(
                io,
                old,
                new,
                resilience,
                pbkdf.hash,
                pbkdf.forced_iterations.is_some(),
            ),
        }
    }

    /// Records reencryption progress crash-safely: `area_data` into the
    /// resilience area (synced), then the header with the hotzone `zone`
    /// (data offset, length) in progress (`hot`) or done, in the layout
    /// cryptsetup 2.6 writes for the mode and direction. `size` is the
    /// data area size in bytes.
    pub fn reencrypt_checkpoint(
        &mut self,
        io: &dyn MetadataIo,
        size: u64,
        zone: (u64, u64),
        hot: bool,
        area_data: Option<&[u8]>,
    ) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("not a LUKS2 volume")),
            Inner::V2(h) => h.reencrypt_checkpoint(io, size, zone, hot, area_data),
        }
    }

    /// Ends a completed reencryption: drops the old key's keyslots and
    /// digest, the backup segments, the reencrypt keyslot and the
    /// requirement in one header write, then overwrites the freed areas.
    pub fn reencrypt_finish(&mut self, io: &dyn MetadataIo) -> Result<()> {
        match &mut self.inner {
            Inner::V1(_) => Err(Error::invalid("not a LUKS2 volume")),
            Inner::V2(h) => h.reencrypt_finish(io),
        }
    }
}
