use aws_lc_rs::{digest as lc_digest, hmac as lc_hmac};

use crate::{ffi, Result, SecretBytes};

/// The hash functions LUKS and Rampart use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashAlg {
    Sha1,
    Sha256,
    Sha512,
}

impl HashAlg {
    /// Parses the names LUKS headers use (`sha1`, `sha256`, `sha512`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "sha1" => Some(Self::Sha1),
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    #[must_use]
    pub fn output_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    fn digest_alg(self) -> &'static lc_digest::Algorithm {
        match self {
            Self::Sha1 => &lc_digest::SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha256 => &lc_digest::SHA256,
            Self::Sha512 => &lc_digest::SHA512,
        }
    }

    fn hmac_alg(self) -> lc_hmac::Algorithm {
        match self {
            Self::Sha1 => lc_hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha256 => lc_hmac::HMAC_SHA256,
            Self::Sha512 => lc_hmac::HMAC_SHA512,
        }
    }

    pub(crate) fn pbkdf2_alg(self) -> aws_lc_rs::pbkdf2::Algorithm {
        match self {
            Self::Sha1 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA1,
            Self::Sha256 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }
}

/// The digest of `data`. Returned as a secret because digests of keys (ESSIV
/// salts, AF diffusion) are key material.
#[must_use]
pub fn digest(alg: HashAlg, data: &[u8]) -> SecretBytes {
    SecretBytes::from_slice(lc_digest::digest(alg.digest_alg(), data).as_ref())
}

/// The digest of `data` written into `out` (at least the digest length),
/// for hot loops over key material (the LUKS anti-forensic diffusion) where
/// a locked allocation per digest would cost two system calls. The caller
/// wipes `out`. Returns the digest length.
pub fn digest_into(alg: HashAlg, data: &[u8], out: &mut [u8]) -> Result<usize> {
    let len = alg.output_len();
    let Some(target) = out.get_mut(..len) else {
        return Err(crate::CryptoError::InvalidLength {
            what: "digest output buffer",
            len: out.len(),
            requirement: "at least the digest length",
        });
    };
    target.copy_from_slice(lc_digest::digest(alg.digest_alg(), data).as_ref());
    Ok(len)
}

/// HMAC of `msg` under `key`.
#[must_use]
pub fn hmac(alg: HashAlg, key: &[u8], msg: &[u8]) -> SecretBytes {
    let key = lc_hmac::Key::new(alg.hmac_alg(), key);
    SecretBytes::from_slice(lc_hmac::sign(&key, msg).as_ref())
}

/// HKDF (RFC 5869) extract-and-expand into `out` (at most 255 digests long).
pub fn hkdf(alg: HashAlg, ikm: &[u8], salt: &[u8], info: &[u8], out: &mut [u8]) -> Result<()> {
    ffi::hkdf(alg, ikm, salt, info, out)
}
