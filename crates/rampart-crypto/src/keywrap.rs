//! AES key wrap, RFC 3394 (KW) and RFC 5649 (KWP), as in NIST SP 800-38F.

use crate::{ffi, CryptoError, Result, SecretBytes};

fn check_kek(kek: &[u8]) -> Result<()> {
    if matches!(kek.len(), 16 | 24 | 32) {
        Ok(())
    } else {
        Err(CryptoError::InvalidKeyLength {
            algorithm: "AES key wrap",
            len: kek.len(),
            expected: "16, 24 or 32",
        })
    }
}

/// Wraps `key` (a multiple of 8 bytes, at least 16) under `kek`.
pub fn kw_wrap(kek: &[u8], key: &[u8]) -> Result<Vec<u8>> {
    check_kek(kek)?;
    if key.len() < 16 || !key.len().is_multiple_of(8) {
        return Err(CryptoError::InvalidLength {
            what: "key to wrap",
            len: key.len(),
            requirement: "a multiple of 8 bytes, at least 16",
        });
    }
    ffi::aes_key_wrap(kek, key, false)
}

/// Unwraps an RFC 3394 blob; a wrong KEK or modified data is
/// [`CryptoError::AuthenticationFailed`].
pub fn kw_unwrap(kek: &[u8], wrapped: &[u8]) -> Result<SecretBytes> {
    check_kek(kek)?;
    if wrapped.len() < 24 || !wrapped.len().is_multiple_of(8) {
        return Err(CryptoError::InvalidLength {
            what: "wrapped key",
            len: wrapped.len(),
            requirement: "a multiple of 8 bytes, at least 24",
        });
    }
    unwrap_into_secret(kek, wrapped, false)
}

/// Wraps `key` of any length from 1 byte under `kek`, with padding.
pub fn kwp_wrap(kek: &[u8], key: &[u8]) -> Result<Vec<u8>> {
    check_kek(kek)?;
    if key.is_empty() || u32::try_from(key.len()).is_err() {
        return Err(CryptoError::InvalidLength {
            what: "key to wrap",
            len: key.len(),
            requirement: "between 1 byte and 4 GiB",
        });
    }
    ffi::aes_key_wrap(kek, key, true)
}

/// Unwraps an RFC 5649 blob.
pub fn kwp_unwrap(kek: &[u8], wrapped: &[u8]) -> Result<SecretBytes> {
    check_kek(kek)?;
    if wrapped.len() < 16 || !wrapped.len().is_multiple_of(8) {
        return Err(CryptoError::InvalidLength {
            what: "wrapped key",
            len: wrapped.len(),
            requirement: "a multiple of 8 bytes, at least 16",
        });
    }
    unwrap_into_secret(kek, wrapped, true)
}

fn unwrap_into_secret(kek: &[u8], wrapped: &[u8], padded: bool) -> Result<SecretBytes> {
    let mut out = SecretBytes::zeroed(wrapped.len());
    let len = ffi::aes_key_unwrap(kek, wrapped, padded, out.expose_mut())?;
    Ok(SecretBytes::from_slice(&out.expose()[..len]))
}
