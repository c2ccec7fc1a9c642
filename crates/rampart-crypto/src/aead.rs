//! AES-GCM with any IV and tag length (NIST SP 800-38D), in one call or
//! streamed, and ChaCha20-Poly1305 (RFC 8439 §2.8) with truncated tags:
//! the general forms a key manager's clients ask for. Rampart's own data
//! path keeps [`crate::Gcm`] (96-bit nonces, full tags).

use crate::ffi::{self, GcmCtx};
use crate::{CryptoError, Result};

/// The tag lengths SP 800-38D §5.2.1.2 allows (4 and 8 bytes only for
/// short messages, which the caller is told of in the name).
#[must_use]
pub fn gcm_tag_len_allowed(len: usize) -> bool {
    matches!(len, 4 | 8 | 12..=16)
}

/// One AES-GCM message, fed in parts. Decryption releases plaintext
/// before the tag is checked, so callers of [`GcmStream::update`] on a
/// decryption must hold it back until [`GcmStream::finish_decrypt`]
/// succeeds.
#[derive(Debug)]
pub struct GcmStream {
    ctx: GcmCtx,
    data_started: bool,
}

impl GcmStream {
    /// `key` is 16, 24 or 32 bytes; `iv` at least 1 byte (12 is the
    /// recommended length, others go through GHASH).
    pub fn new(key: &[u8], iv: &[u8], encrypt: bool) -> Result<Self> {
        Ok(Self { ctx: GcmCtx::new(key, iv, encrypt)?, data_started: false })
    }

    /// Additional authenticated data; all of it comes before any data.
    pub fn aad(&mut self, aad: &[u8]) -> Result<()> {
        if self.data_started {
            return Err(CryptoError::InvalidParameter("GCM additional data after the data"));
        }
        self.ctx.aad(aad)
    }

    /// Encrypts or decrypts the next part in place.
    pub fn update(&mut self, data: &mut [u8]) -> Result<()> {
        self.data_started = true;
        self.ctx.update(data)
    }

    /// Ends an encryption with a tag of `tag_len` bytes (1 to 16).
    pub fn finish_encrypt(self, tag_len: usize) -> Result<Vec<u8>> {
        if tag_len == 0 || tag_len > 16 {
            return Err(CryptoError::InvalidLength {
                what: "GCM tag",
                len: tag_len,
                requirement: "1 to 16 bytes",
            });
        }
        let mut tag = vec![0u8; tag_len];
        self.ctx.finish_encrypt(&mut tag)?;
        Ok(tag)
    }

    /// Ends a decryption: `Ok` only when `tag` (the full tag or a prefix of
    /// it, 1 to 16 bytes) authenticates the message.
    pub fn finish_decrypt(self, tag: &[u8]) -> Result<()> {
        if tag.is_empty() || tag.len() > 16 {
            return Err(CryptoError::AuthenticationFailed);
        }
        self.ctx.finish_decrypt(tag)
    }
}

/// AES-GCM encryption of `data` in place; the tag of `tag_len` bytes.
pub fn gcm_seal(
    key: &[u8],
    iv: &[u8],
    aad: &[u8],
    data: &mut [u8],
    tag_len: usize,
) -> Result<Vec<u8>> {
    let mut gcm = GcmStream::new(key, iv, true)?;
    gcm.aad(aad)?;
    gcm.update(data)?;
    gcm.finish_encrypt(tag_len)
}

/// AES-GCM decryption of `data` in place; on a tag mismatch `data` is
/// zeroed and [`CryptoError::AuthenticationFailed`] returned.
pub fn gcm_open(key: &[u8], iv: &[u8], aad: &[u8], data: &mut [u8], tag: &[u8]) -> Result<()> {
    let mut gcm = GcmStream::new(key, iv, false)?;
    gcm.aad(aad)?;
    gcm.update(data)?;
    let result = gcm.finish_decrypt(tag);
    if result.is_err() {
        // Never leave unauthenticated plaintext behind.
        data.fill(0);
    }
    result
}

fn chacha_key(key: &[u8]) -> Result<&[u8; 32]> {
    key.try_into().map_err(|_| CryptoError::InvalidKeyLength {
        algorithm: "ChaCha20",
        len: key.len(),
        expected: "32",
    })
}

fn chacha_nonce(nonce: &[u8]) -> Result<&[u8; 12]> {
    nonce.try_into().map_err(|_| CryptoError::InvalidLength {
        what: "ChaCha20-Poly1305 nonce",
        len: nonce.len(),
        requirement: "12 bytes",
    })
}

/// ChaCha20-Poly1305 encryption of `data` in place under a 12-byte nonce;
/// the tag, truncated to `tag_len` bytes (1 to 16).
pub fn chacha20_poly1305_seal(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    data: &mut [u8],
    tag_len: usize,
) -> Result<Vec<u8>> {
    if tag_len == 0 || tag_len > 16 {
        return Err(CryptoError::InvalidLength {
            what: "ChaCha20-Poly1305 tag",
            len: tag_len,
            requirement: "1 to 16 bytes",
        });
    }
    let mut tag = vec![0u8; tag_len];
    ffi::chacha20_poly1305_seal(chacha_key(key)?, chacha_nonce(nonce)?, aad, data, &mut tag)?;
    Ok(tag)
}

/// The inverse of [`chacha20_poly1305_seal`]; `tag` is the full tag or a
/// prefix of it.
pub fn chacha20_poly1305_open(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    data: &mut [u8],
    tag: &[u8],
) -> Result<()> {
    if tag.is_empty() || tag.len() > 16 {
        return Err(CryptoError::AuthenticationFailed);
    }
    ffi::chacha20_poly1305_open(chacha_key(key)?, chacha_nonce(nonce)?, aad, data, tag)
}

/// ChaCha20 of `data` in place (encryption and decryption are one
/// operation). `nonce` is 12 bytes (RFC 8439 §2.3: 32-bit block counter)
/// or 8 bytes (the original design's 64-bit nonce and 64-bit counter,
/// whose low counter word and nonce give the same key stream while the
/// counter stays below 2^32); `counter` is the first block's counter.
pub fn chacha20(key: &[u8], nonce: &[u8], counter: u32, data: &mut [u8]) -> Result<()> {
    let key = chacha_key(key)?;
    let mut full = [0u8; 12];
    match nonce.len() {
        12 => full.copy_from_slice(nonce),
        // The 64-bit counter's high word (zero) then the 64-bit nonce.
        8 => full[4..].copy_from_slice(nonce),
        len => {
            return Err(CryptoError::InvalidLength {
                what: "ChaCha20 nonce",
                len,
                requirement: "8 or 12 bytes",
            })
        }
    }
    let blocks = u64::try_from(data.len().div_ceil(64)).unwrap_or(u64::MAX);
    if u64::from(counter).saturating_add(blocks) > 1 << 32 {
        return Err(CryptoError::InvalidLength {
            what: "ChaCha20 data",
            len: data.len(),
            requirement: "within the 2^32 blocks the counter covers",
        });
    }
    ffi::chacha20(key, &full, counter, data);
    Ok(())
}
