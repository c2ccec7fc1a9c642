use aws_lc_rs::key_wrap::{AesKek, KeyWrap, KeyWrapPadded, AES_128, AES_256};

use crate::{CryptoError, Result, SecretBytes};

fn kek(key: &[u8]) -> Result<AesKek> {
    let cipher = match key.len() {
        16 => &AES_128,
        32 => &AES_256,
        len => {
            return Err(CryptoError::InvalidKeyLength {
                algorithm: "AES key wrap",
                len,
                expected: "16 or 32",
            })
        }
    };
    AesKek::new(cipher, key).map_err(|_| CryptoError::Backend("AES KEK"))
}

/// AES key wrap (RFC 3394, NIST SP 800-38F KW). `key` must be a multiple of
/// 8 bytes and at least 16.
pub fn kw_wrap(kek_bytes: &[u8], key: &[u8]) -> Result<Vec<u8>> {
    if key.len() < 16 || key.len() % 8 != 0 {
        return Err(CryptoError::InvalidLength {
            what: "key to wrap",
            len: key.len(),
            requirement: "a multiple of 8 bytes, at least 16",
        });
    }
    let mut out = vec![0u8; key.len() + 8];
    let len = kek(kek_bytes)?
        .wrap(key, &mut out)
        .map_err(|_| CryptoError::Backend("AES key wrap"))?
        .len();
    out.truncate(len);
    Ok(out)
}

/// The inverse of [`kw_wrap`]; fails with `AuthenticationFailed` when the
/// integrity check value does not match.
pub fn kw_unwrap(kek_bytes: &[u8], wrapped: &[u8]) -> Result<SecretBytes> {
    if wrapped.len() < 24 || wrapped.len() % 8 != 0 {
        return Err(CryptoError::InvalidLength {
            what: "wrapped key",
            len: wrapped.len(),
            requirement: "a multiple of 8 bytes, at least 24",
        });
    }
    let mut out = SecretBytes::zeroed(wrapped.len());
    let len = kek(kek_bytes)?
        .unwrap(wrapped, out.expose_mut())
        .map_err(|_| CryptoError::AuthenticationFailed)?
        .len();
    Ok(SecretBytes::from_slice(&out.expose()[..len]))
}

/// AES key wrap with padding (RFC 5649, NIST SP 800-38F KWP): any key length
/// from 1 byte.
pub fn kwp_wrap(kek_bytes: &[u8], key: &[u8]) -> Result<Vec<u8>> {
    if key.is_empty() {
        return Err(CryptoError::InvalidLength {
            what: "key to wrap",
            len: 0,
            requirement: "at least 1 byte",
        });
    }
    let mut out = vec![0u8; key.len().div_ceil(8) * 8 + 8];
    let len = kek(kek_bytes)?
        .wrap_with_padding(key, &mut out)
        .map_err(|_| CryptoError::Backend("AES key wrap with padding"))?
        .len();
    out.truncate(len);
    Ok(out)
}

/// The inverse of [`kwp_wrap`].
pub fn kwp_unwrap(kek_bytes: &[u8], wrapped: &[u8]) -> Result<SecretBytes> {
    if wrapped.len() < 16 || wrapped.len() % 8 != 0 {
        return Err(CryptoError::InvalidLength {
            what: "wrapped key",
            len: wrapped.len(),
            requirement: "a multiple of 8 bytes, at least 16",
        });
    }
    let mut out = SecretBytes::zeroed(wrapped.len());
    let len = kek(kek_bytes)?
        .unwrap_with_padding(wrapped, out.expose_mut())
        .map_err(|_| CryptoError::AuthenticationFailed)?
        .len();
    Ok(SecretBytes::from_slice(&out.expose()[..len]))
}
