use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_192_GCM, AES_256_GCM};

use crate::{cpu, CryptoError, Result};

pub const GCM_NONCE_LEN: usize = 12;
pub const GCM_TAG_LEN: usize = 16;

/// AES-GCM AEAD with 96-bit nonces and 128-bit tags. `Sync`: one key can be
/// shared by many threads. Nonce uniqueness is the caller's duty.
pub struct Gcm {
    key: LessSafeKey,
    key_bits: usize,
}

impl std::fmt::Debug for Gcm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gcm(AES-{}, key redacted)", self.key_bits)
    }
}

impl Gcm {
    /// `key` is 16, 24 or 32 bytes.
    pub fn new(key: &[u8]) -> Result<Self> {
        let algorithm = match key.len() {
            16 => &AES_128_GCM,
            24 => &AES_192_GCM,
            32 => &AES_256_GCM,
            len => {
                return Err(CryptoError::InvalidKeyLength {
                    algorithm: "AES-GCM",
                    len,
                    expected: "16, 24 or 32",
                })
            }
        };
        let unbound =
            UnboundKey::new(algorithm, key).map_err(|_| CryptoError::Backend("GCM key"))?;
        Ok(Self { key: LessSafeKey::new(unbound), key_bits: key.len() * 8 })
    }

    #[must_use]
    pub fn key_bits(&self) -> usize {
        self.key_bits
    }

    #[must_use]
    pub fn implementation(&self) -> &'static str {
        let features = cpu::features();
        if features.vaes && features.vpclmulqdq && features.avx512f {
            "aws-lc aes-gcm (vaes vpclmulqdq avx-512)"
        } else if features.aes_ni && features.pclmulqdq {
            "aws-lc aes-gcm (aes-ni pclmulqdq)"
        } else {
            "aws-lc aes-gcm (software)"
        }
    }

    /// Encrypts `data` in place and returns the tag.
    pub fn seal(
        &self,
        nonce: &[u8; GCM_NONCE_LEN],
        aad: &[u8],
        data: &mut [u8],
    ) -> Result<[u8; GCM_TAG_LEN]> {
        let tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), data)
            .map_err(|_| CryptoError::InvalidLength {
                what: "GCM plaintext",
                len: data.len(),
                requirement: "at most 2^36 - 32 bytes",
            })?;
        let mut out = [0u8; GCM_TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Verifies `tag` and decrypts `data` in place. On a mismatch `data` is
    /// left unusable and [`CryptoError::AuthenticationFailed`] is returned.
    pub fn open(
        &self,
        nonce: &[u8; GCM_NONCE_LEN],
        aad: &[u8],
        data: &mut [u8],
        tag: &[u8; GCM_TAG_LEN],
    ) -> Result<()> {
        let opened = self
            .key
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                tag,
                data,
            )
            .is_ok();
        if !opened {
            // Never leave unauthenticated plaintext behind.
            data.fill(0);
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }
}
