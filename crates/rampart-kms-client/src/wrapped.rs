//! The header of the key manager's wrapped-data ciphertexts,
//! `rampart:v1:NAME:VERSION:BASE64URL(nonce || ciphertext || tag)`: the
//! client reads the key name from it (the unwrap request's path), the
//! server the key version and the sealed bytes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rampart_crypto::{GCM_NONCE_LEN, GCM_TAG_LEN};

use crate::error::ConfigError;
use crate::names::{check_name, MAX_NAME};

/// Largest plaintext `wrap` accepts.
pub const MAX_WRAP_PLAINTEXT: usize = 64 * 1024;

/// A parsed wrapped-data ciphertext (its header fields; the sealed bytes
/// stay inside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedHeader {
    pub name: String,
    pub version: u32,
    sealed: Vec<u8>,
}

impl WrappedHeader {
    /// Parses `rampart:v1:NAME:VERSION:BASE64URL`.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let limit = 64 + MAX_NAME + (MAX_WRAP_PLAINTEXT + 64) * 4 / 3;
        if text.len() > limit {
            return Err(ConfigError::invalid("ciphertext is too long"));
        }
        let mut parts = text.trim().splitn(5, ':');
        let (Some("rampart"), Some(format), Some(name), Some(version), Some(body)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ConfigError::invalid("ciphertext is not rampart:v1:NAME:VERSION:DATA"));
        };
        if format != "v1" {
            return Err(ConfigError::invalid(format!("unsupported ciphertext format '{format}'")));
        }
        check_name("key name in the ciphertext", name)?;
        let version: u32 = version.parse().ok().filter(|v| *v > 0).ok_or_else(|| {
            ConfigError::invalid("ciphertext key version is not a positive number")
        })?;
        let sealed = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| ConfigError::invalid("ciphertext data is not base64url"))?;
        if sealed.len() < GCM_NONCE_LEN + GCM_TAG_LEN {
            return Err(ConfigError::invalid("ciphertext is too short"));
        }
        Ok(Self { name: name.to_owned(), version, sealed })
    }

    /// The sealed bytes: `nonce || ciphertext || tag`.
    #[must_use]
    pub fn sealed(&self) -> &[u8] {
        &self.sealed
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn headers_parse_and_bad_ones_are_refused() {
        let body = URL_SAFE_NO_PAD.encode([7u8; GCM_NONCE_LEN + GCM_TAG_LEN + 3]);
        let header = WrappedHeader::parse(&format!(" rampart:v1:vol:3:{body}\n")).unwrap();
        assert_eq!((header.name.as_str(), header.version), ("vol", 3));
        assert_eq!(header.sealed(), &[7u8; GCM_NONCE_LEN + GCM_TAG_LEN + 3][..]);
        let short = URL_SAFE_NO_PAD.encode([7u8; GCM_NONCE_LEN + GCM_TAG_LEN - 1]);
        for bad in [
            String::new(),
            "rampart:v2:vol:1:AAAA".into(),
            "rampart:v1:vol:0:AAAA".into(),
            "rampart:v1:vol:1:!!".into(),
            format!("rampart:v1:-vol:1:{body}"),
            format!("rampart:v1:vol:1:{short}"),
            format!("other:v1:vol:1:{body}"),
            "x".repeat(200_000),
        ] {
            let error = WrappedHeader::parse(&bad).unwrap_err();
            assert_eq!(error.status(), 400, "{bad}");
        }
    }
}
