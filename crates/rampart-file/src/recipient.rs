//! Recipients: who can recover a file's key. Each writes one stanza that
//! wraps the file key, bound to the file's preamble; on decryption each
//! identity tries the stanzas of its type.
//!
//! Passphrases and raw keys live here; the key manager's recipient is
//! plugged in by the binary (it needs a network client).

use rampart_crypto::{argon2, hkdf, Argon2Params, Argon2Variant, Gcm, HashAlg, SecretBytes};

use crate::header::FILE_KEY_LEN;
use crate::{Error, Result};

/// Stanza types.
pub const STANZA_PASSPHRASE: u8 = 1;
pub const STANZA_RAW_KEY: u8 = 2;
pub const STANZA_KMS: u8 = 3;

const SALT_LEN: usize = 16;
const NONCE_LEN: usize = 12;
const WRAPPED_LEN: usize = FILE_KEY_LEN + 16;
/// The most Argon2 work a stanza may ask of a reader (cryptsetup's limits).
const MAX_ARGON2_MEMORY_KIB: u32 = 4 << 20;
const MAX_ARGON2_TIME: u32 = 1 << 16;
const MAX_ARGON2_LANES: u32 = 16;

/// Why an identity did not open a stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnwrapFailure {
    /// One line, no secrets.
    pub message: String,
    /// A runtime failure (a key server unreachable) rather than a refusal
    /// or a wrong key.
    pub runtime: bool,
}

impl UnwrapFailure {
    #[must_use]
    pub fn refused(message: impl Into<String>) -> Self {
        Self { message: message.into(), runtime: false }
    }
}

/// Something a file can be encrypted to.
pub trait Recipient {
    /// The stanza type it writes.
    fn kind(&self) -> u8;
    /// A short description for summaries (`passphrase`, `kms:NAME`).
    fn describe(&self) -> String;
    /// Wraps `file_key` bound to `context`; returns the stanza body.
    fn wrap(&self, file_key: &SecretBytes, context: &[u8]) -> Result<Vec<u8>>;
}

/// Something that can recover a file key from a stanza.
pub trait Identity {
    /// The stanza type it reads.
    fn kind(&self) -> u8;
    fn describe(&self) -> String;
    /// Unwraps a stanza body bound to `context`.
    fn unwrap(
        &self,
        body: &[u8],
        context: &[u8],
    ) -> std::result::Result<SecretBytes, UnwrapFailure>;
}

/// A passphrase: Argon2 stretches it into a key-encryption key.
#[derive(Debug)]
pub struct Passphrase {
    passphrase: SecretBytes,
    params: Argon2Params,
}

impl Passphrase {
    /// `params` is used for new stanzas; reading uses each stanza's own.
    #[must_use]
    pub fn new(passphrase: SecretBytes, params: Argon2Params) -> Self {
        Self { passphrase, params }
    }

    /// A passphrase that only opens files: each stanza brings its own
    /// cost, so none is chosen.
    #[must_use]
    pub fn opening(passphrase: SecretBytes) -> Self {
        let unused = Argon2Params {
            variant: Argon2Variant::Argon2id,
            time: 1,
            memory_kib: 8,
            parallelism: 1,
        };
        Self { passphrase, params: unused }
    }
}

fn variant_code(variant: Argon2Variant) -> Result<u8> {
    match variant {
        Argon2Variant::Argon2i => Ok(1),
        Argon2Variant::Argon2id => Ok(2),
        _ => Err(Error::Format("only Argon2i and Argon2id protect passphrases".into())),
    }
}

fn seal_key(kek: &SecretBytes, context: &[u8], file_key: &SecretBytes) -> Result<Vec<u8>> {
    let mut nonce = [0u8; NONCE_LEN];
    rampart_crypto::fill_random(&mut nonce)?;
    let mut data = file_key.expose().to_vec();
    let tag = Gcm::new(kek.expose())?.seal(&nonce, context, &mut data)?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&data);
    out.extend_from_slice(&tag);
    Ok(out)
}

fn open_key(kek: &SecretBytes, context: &[u8], wrapped: &[u8]) -> Option<SecretBytes> {
    if wrapped.len() != NONCE_LEN + WRAPPED_LEN {
        return None;
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&wrapped[..NONCE_LEN]);
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&wrapped[NONCE_LEN + FILE_KEY_LEN..]);
    let mut key = SecretBytes::from_slice(&wrapped[NONCE_LEN..NONCE_LEN + FILE_KEY_LEN]);
    Gcm::new(kek.expose()).ok()?.open(&nonce, context, key.expose_mut(), &tag).ok()?;
    Some(key)
}

impl Recipient for Passphrase {
    fn kind(&self) -> u8 {
        STANZA_PASSPHRASE
    }

    fn describe(&self) -> String {
        "passphrase".into()
    }

    fn wrap(&self, file_key: &SecretBytes, context: &[u8]) -> Result<Vec<u8>> {
        let mut salt = [0u8; SALT_LEN];
        rampart_crypto::fill_random(&mut salt)?;
        let mut kek = SecretBytes::zeroed(32);
        argon2(&self.params, self.passphrase.expose(), &salt, kek.expose_mut())?;
        let mut body = vec![variant_code(self.params.variant)?];
        body.extend_from_slice(&self.params.time.to_be_bytes());
        body.extend_from_slice(&self.params.memory_kib.to_be_bytes());
        body.extend_from_slice(&self.params.parallelism.to_be_bytes());
        body.extend_from_slice(&salt);
        body.extend_from_slice(&seal_key(&kek, context, file_key)?);
        Ok(body)
    }
}

/// The Argon2 parameters of a passphrase stanza, checked against the
/// limits a reader accepts.
pub fn passphrase_stanza_params(body: &[u8]) -> std::result::Result<Argon2Params, String> {
    if body.len() != 13 + SALT_LEN + NONCE_LEN + WRAPPED_LEN {
        return Err("the passphrase stanza has the wrong length".into());
    }
    let word = |at: usize| u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    let variant = match body[0] {
        1 => Argon2Variant::Argon2i,
        2 => Argon2Variant::Argon2id,
        other => return Err(format!("unknown Argon2 variant {other}")),
    };
    let params = Argon2Params { variant, time: word(1), memory_kib: word(5), parallelism: word(9) };
    if params.time == 0
        || params.time > MAX_ARGON2_TIME
        || params.memory_kib < 8 * params.parallelism
        || params.memory_kib > MAX_ARGON2_MEMORY_KIB
        || params.parallelism == 0
        || params.parallelism > MAX_ARGON2_LANES
    {
        return Err(format!(
            "Argon2 cost (time {}, memory {} KiB, lanes {}) is outside the accepted limits",
            params.time, params.memory_kib, params.parallelism
        ));
    }
    Ok(params)
}

impl Identity for Passphrase {
    fn kind(&self) -> u8 {
        STANZA_PASSPHRASE
    }

    fn describe(&self) -> String {
        "passphrase".into()
    }

    fn unwrap(
        &self,
        body: &[u8],
        context: &[u8],
    ) -> std::result::Result<SecretBytes, UnwrapFailure> {
        let params = passphrase_stanza_params(body).map_err(UnwrapFailure::refused)?;
        let salt = &body[13..13 + SALT_LEN];
        let mut kek = SecretBytes::zeroed(32);
        argon2(&params, self.passphrase.expose(), salt, kek.expose_mut())
            .map_err(|e| UnwrapFailure::refused(format!("Argon2 failed: {e}")))?;
        open_key(&kek, context, &body[13 + SALT_LEN..])
            .ok_or_else(|| UnwrapFailure::refused("wrong passphrase"))
    }
}

/// A raw 256-bit key (for automation).
#[derive(Debug)]
pub struct RawKey {
    key: SecretBytes,
}

impl RawKey {
    /// `key` must be exactly 32 bytes.
    pub fn new(key: SecretBytes) -> Result<Self> {
        if key.len() != 32 {
            return Err(Error::Format(format!(
                "a raw key is 32 bytes (256 bits), not {}",
                key.len()
            )));
        }
        Ok(Self { key })
    }

    fn kek(&self, context: &[u8]) -> Result<SecretBytes> {
        let mut kek = SecretBytes::zeroed(32);
        hkdf(
            HashAlg::Sha256,
            self.key.expose(),
            context,
            b"rampart-file/v1 raw key",
            kek.expose_mut(),
        )?;
        Ok(kek)
    }
}

impl Recipient for RawKey {
    fn kind(&self) -> u8 {
        STANZA_RAW_KEY
    }

    fn describe(&self) -> String {
        "raw-key".into()
    }

    fn wrap(&self, file_key: &SecretBytes, context: &[u8]) -> Result<Vec<u8>> {
        seal_key(&self.kek(context)?, context, file_key)
    }
}

impl Identity for RawKey {
    fn kind(&self) -> u8 {
        STANZA_RAW_KEY
    }

    fn describe(&self) -> String {
        "raw key".into()
    }

    fn unwrap(
        &self,
        body: &[u8],
        context: &[u8],
    ) -> std::result::Result<SecretBytes, UnwrapFailure> {
        let kek = self.kek(context).map_err(|e| UnwrapFailure::refused(e.to_string()))?;
        open_key(&kek, context, body).ok_or_else(|| UnwrapFailure::refused("wrong raw key"))
    }
}
