//! Cipher specifications in dm-crypt notation, and the sector encryption
//! of keyslot material with them.

use rampart_crypto::{Cbc, CbcIv, Xts};

use crate::{Error, Result};

/// The data (and keyslot) ciphers Rampart implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataCipher {
    /// `aes-xts-plain64`: 32-byte (AES-128-XTS) or 64-byte (AES-256-XTS) keys.
    AesXtsPlain64,
    /// `aes-cbc-essiv:sha256`: 16- or 32-byte keys.
    AesCbcEssivSha256,
    /// `aes-cbc-plain64`: 16- or 32-byte keys.
    AesCbcPlain64,
}

const SUPPORTED: &str = "aes-xts-plain64, aes-cbc-essiv:sha256 and aes-cbc-plain64";

impl DataCipher {
    /// Parses a dm-crypt cipher specification such as `aes-xts-plain64`.
    pub fn from_spec(cipher: &str) -> Result<Self> {
        match cipher {
            "aes-xts-plain64" => Ok(Self::AesXtsPlain64),
            "aes-cbc-essiv:sha256" => Ok(Self::AesCbcEssivSha256),
            "aes-cbc-plain64" => Ok(Self::AesCbcPlain64),
            other => Err(Error::UnsupportedCipher(describe_unsupported(other))),
        }
    }

    /// Parses the LUKS1 pair of cipher name and mode (`aes`, `xts-plain64`).
    pub fn from_name_and_mode(name: &str, mode: &str) -> Result<Self> {
        Self::from_spec(&format!("{name}-{mode}"))
    }

    /// The dm-crypt specification, e.g. `aes-xts-plain64`.
    #[must_use]
    pub fn spec(self) -> &'static str {
        match self {
            Self::AesXtsPlain64 => "aes-xts-plain64",
            Self::AesCbcEssivSha256 => "aes-cbc-essiv:sha256",
            Self::AesCbcPlain64 => "aes-cbc-plain64",
        }
    }

    /// The LUKS1 cipher name field (`aes`).
    #[must_use]
    pub fn luks1_name(self) -> &'static str {
        "aes"
    }

    /// The LUKS1 cipher mode field, e.g. `xts-plain64`.
    #[must_use]
    pub fn luks1_mode(self) -> &'static str {
        &self.spec()[4..]
    }

    /// The key sizes in bits the cipher takes (`--key-size`).
    #[must_use]
    pub fn key_bits(self) -> [usize; 2] {
        match self {
            Self::AesXtsPlain64 => [256, 512],
            Self::AesCbcEssivSha256 | Self::AesCbcPlain64 => [128, 256],
        }
    }

    /// cryptsetup's default key size in bits: the larger one (XTS: two
    /// AES-256 keys).
    #[must_use]
    pub fn default_key_bits(self) -> usize {
        self.key_bits()[1]
    }

    /// Checks a `--key-size` in bits against the cipher.
    ///
    /// # Errors
    /// A size the cipher does not take, named as the flag.
    pub fn check_key_bits(self, key_bits: usize) -> Result<()> {
        let valid = self.key_bits();
        if valid.contains(&key_bits) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "--key-size {key_bits} is not valid for {} (use {valid:?})",
                self.spec()
            )))
        }
    }

    /// Whether `key_bytes` is a valid key length for this cipher.
    #[must_use]
    pub fn valid_key_bytes(self, key_bytes: usize) -> bool {
        match self {
            Self::AesXtsPlain64 => key_bytes == 32 || key_bytes == 64,
            Self::AesCbcEssivSha256 | Self::AesCbcPlain64 => key_bytes == 16 || key_bytes == 32,
        }
    }

    /// Checks `key_bytes` against the cipher, with a clear error.
    pub fn check_key_bytes(self, key_bytes: usize) -> Result<()> {
        if self.valid_key_bytes(key_bytes) {
            Ok(())
        } else {
            let allowed = match self {
                Self::AesXtsPlain64 => "256 or 512",
                _ => "128 or 256",
            };
            Err(Error::UnsupportedCipher(format!(
                "{} with a {}-bit key (supported: {allowed} bits)",
                self.spec(),
                key_bytes * 8
            )))
        }
    }
}

fn describe_unsupported(spec: &str) -> String {
    let lower = spec.to_ascii_lowercase();
    let why = if lower.starts_with("capi:") {
        "kernel crypto API notation is not supported"
    } else if lower.starts_with("cipher_null") {
        "cipher_null (no encryption) is refused"
    } else if !lower.starts_with("aes-") {
        "only AES is supported"
    } else if lower.contains("gcm") || lower.contains("ccm") || lower.contains("random") {
        "authenticated encryption (AEAD) segments are not supported"
    } else {
        "this AES mode or IV generator is not supported"
    };
    format!("{spec}: {why} (supported: {SUPPORTED})")
}

/// Encrypts or decrypts keyslot material: 512-byte sectors whose IV/tweak
/// counts from 0 at the start of the material, as LUKS specifies.
pub(crate) fn crypt_material(
    cipher: DataCipher,
    key: &[u8],
    material: &mut [u8],
    encrypt: bool,
) -> Result<()> {
    cipher.check_key_bytes(key.len())?;
    match cipher {
        DataCipher::AesXtsPlain64 => {
            let mut xts = Xts::new(key)?;
            if encrypt {
                xts.encrypt_sectors(material, 512, 0, 1)?;
            } else {
                xts.decrypt_sectors(material, 512, 0, 1)?;
            }
        }
        DataCipher::AesCbcEssivSha256 | DataCipher::AesCbcPlain64 => {
            let iv = if cipher == DataCipher::AesCbcEssivSha256 {
                CbcIv::EssivSha256
            } else {
                CbcIv::Plain64
            };
            let mut cbc = Cbc::new(key, iv)?;
            if encrypt {
                cbc.encrypt_sectors(material, 512, 0, 1)?;
            } else {
                cbc.decrypt_sectors(material, 512, 0, 1)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        for c in
            [DataCipher::AesXtsPlain64, DataCipher::AesCbcEssivSha256, DataCipher::AesCbcPlain64]
        {
            assert_eq!(DataCipher::from_spec(c.spec()).unwrap(), c);
            assert_eq!(DataCipher::from_name_and_mode(c.luks1_name(), c.luks1_mode()).unwrap(), c);
        }
    }

    #[test]
    fn unsupported_ciphers_say_why() {
        for (spec, why) in [
            ("serpent-xts-plain64", "only AES"),
            ("twofish-xts-plain64", "only AES"),
            ("aes-gcm-random", "AEAD"),
            ("aes-xts-plain", "mode or IV"),
            ("capi:xts(aes)-plain64", "kernel crypto API"),
            ("cipher_null-ecb", "cipher_null"),
        ] {
            let err = DataCipher::from_spec(spec).unwrap_err();
            assert!(matches!(err, Error::UnsupportedCipher(_)));
            let msg = err.to_string();
            assert!(msg.contains(spec) && msg.contains(why), "{msg}");
        }
    }

    #[test]
    fn key_sizes() {
        assert!(DataCipher::AesXtsPlain64.check_key_bytes(64).is_ok());
        assert!(DataCipher::AesXtsPlain64.check_key_bytes(32).is_ok());
        assert!(DataCipher::AesXtsPlain64.check_key_bytes(16).is_err());
        assert!(DataCipher::AesCbcEssivSha256.check_key_bytes(16).is_ok());
        assert!(DataCipher::AesCbcPlain64.check_key_bytes(64).is_err());
    }

    #[test]
    fn material_round_trips() {
        let key: Vec<u8> = (0..64u8).collect();
        let mut data = vec![0x5au8; 1024];
        crypt_material(DataCipher::AesXtsPlain64, &key, &mut data, true).unwrap();
        assert_ne!(data, vec![0x5au8; 1024]);
        crypt_material(DataCipher::AesXtsPlain64, &key, &mut data, false).unwrap();
        assert_eq!(data, vec![0x5au8; 1024]);
        let mut data = vec![1u8; 512];
        crypt_material(DataCipher::AesCbcEssivSha256, &key[..32], &mut data, true).unwrap();
        crypt_material(DataCipher::AesCbcEssivSha256, &key[..32], &mut data, false).unwrap();
        assert_eq!(data, vec![1u8; 512]);
    }
}
