//! Headerless volumes: cryptsetup's plain mode (`cryptsetup open --type
//! plain`), where nothing on the device says how it is encrypted. The
//! cipher, key size, offsets and sector size are the opener's to give,
//! and the key is either given (a key file, a one-time random key) or
//! made from a passphrase by cryptsetup's plain hashing. The data goes
//! through the same [`CryptDevice`] and sector ciphers as a LUKS segment.

use rampart_crypto::{CryptoError, PassphraseHash, SecretBytes};
use rampart_luks::DataCipher;

use crate::{sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, SectorCipher};

/// Why a plain mapping cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlainError {
    /// A setting or key the mapping cannot take: the user's to fix.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Crypto(#[from] CryptoError),
}

fn refused(message: impl Into<String>) -> PlainError {
    PlainError::Refused(message.into())
}

/// cryptsetup's plain-mode defaults (`cryptsetup --help`, "Default
/// compiled-in device cipher parameters": plain: aes-cbc-essiv:sha256,
/// Key: 256 bits, Password hashing: ripemd160). The key size is 256 bits
/// for every cipher: plain mode does not double it for XTS as LUKS does.
pub const DEFAULT_CIPHER: &str = "aes-cbc-essiv:sha256";
pub const DEFAULT_KEY_BITS: usize = 256;
pub const DEFAULT_HASH: &str = "ripemd160";

/// A plain-mode cipher specification: one of the data ciphers, with
/// dm-crypt's 32-bit `plain` IV or its 64-bit `plain64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainCipher {
    cipher: DataCipher,
    /// The `plain` IV: the sector number modulo 2^32. Equal to `plain64`
    /// below 2^32 IV numbers; mappings that would reach them are refused.
    iv32: bool,
}

impl PlainCipher {
    /// Parses a specification as cryptsetup does for plain mode: a bare
    /// `aes` and `aes-plain` mean `aes-cbc-plain` (cryptsetup's
    /// `crypt_parse_name_and_mode`), and a `-plain` IV is the 32-bit one.
    pub fn parse(spec: &str) -> Result<Self, PlainError> {
        let full = match spec {
            "aes" | "aes-plain" => "aes-cbc-plain",
            other => other,
        };
        let (luks_spec, iv32) = match full.strip_suffix("-plain") {
            Some(base) => (format!("{base}-plain64"), true),
            None => (full.to_owned(), false),
        };
        let cipher = DataCipher::from_spec(&luks_spec).map_err(|_| {
            refused(format!(
                "--cipher {spec}: not supported (supported: aes-xts-plain64, aes-xts-plain, \
                 aes-cbc-essiv:sha256, aes-cbc-plain64, aes-cbc-plain)"
            ))
        })?;
        Ok(Self { cipher, iv32 })
    }

    /// The specification in dm-crypt's notation.
    #[must_use]
    pub fn spec(self) -> String {
        let spec = self.cipher.spec();
        match (self.iv32, spec.strip_suffix("64")) {
            (true, Some(base)) => base.to_owned(),
            _ => spec.to_owned(),
        }
    }

    /// Checks a `--key-size` in bits against the cipher.
    pub fn check_key_bits(self, bits: usize) -> Result<(), PlainError> {
        self.cipher.check_key_bits(bits).map_err(|_| {
            refused(format!(
                "--key-size {bits} is not valid for {} (use {:?})",
                self.spec(),
                self.cipher.key_bits()
            ))
        })
    }

    /// The larger key the cipher takes (XTS: two AES-256 keys).
    #[must_use]
    pub fn largest_key_bits(self) -> usize {
        self.cipher.default_key_bits()
    }
}

/// Where and how a plain volume's data lies on its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainLayout {
    pub cipher: PlainCipher,
    pub key_bytes: usize,
    /// Where the data starts on the device, in 512-byte sectors
    /// (`--offset`).
    pub offset: u64,
    /// Added to every IV, in 512-byte sectors (`--skip`).
    pub skip: u64,
    /// The encryption sector size in bytes (`--sector-size`).
    pub sector_size: u32,
    /// IVs count sectors of `sector_size`, not 512-byte units
    /// (`--iv-large-sectors`).
    pub iv_large_sectors: bool,
}

impl PlainLayout {
    /// The plaintext of `data` under `key`: everything from `offset` to the
    /// device's end, which must be whole sectors, as dm-crypt requires.
    pub fn device<D: BlockDevice>(
        &self,
        data: D,
        key: &SecretBytes,
    ) -> Result<CryptDevice<D>, PlainError> {
        let sector = u64::from(self.sector_size);
        if !(512..=4096).contains(&self.sector_size) || !self.sector_size.is_power_of_two() {
            return Err(refused(format!(
                "--sector-size {}: use 512, 1024, 2048 or 4096",
                self.sector_size
            )));
        }
        let units = sector / 512;
        // dm-crypt refuses a device start or IV offset that is not a whole
        // number of sectors.
        for (flag, value) in [("--offset", self.offset), ("--skip", self.skip)] {
            if value % units != 0 {
                return Err(refused(format!(
                    "{flag} {value} is not a whole number of {sector}-byte sectors"
                )));
            }
        }
        if key.len() != self.key_bytes {
            return Err(refused(format!(
                "the key has {} bytes, the mapping needs {}",
                key.len(),
                self.key_bytes
            )));
        }
        let start =
            self.offset.checked_mul(512).filter(|start| *start <= data.len()).ok_or_else(|| {
                refused(format!(
                    "--offset {} lies beyond the end of the device ({} bytes)",
                    self.offset,
                    data.len()
                ))
            })?;
        let size = data.len() - start;
        if size == 0 || size % sector != 0 {
            return Err(refused(format!(
                "the device has {size} bytes after --offset, not a whole number of \
                 {sector}-byte sectors"
            )));
        }
        if self.cipher.iv32 {
            let last_iv = if self.iv_large_sectors {
                (self.skip + size / 512) / units
            } else {
                self.skip + size / 512
            };
            if last_iv > 1 << 32 {
                return Err(refused(format!(
                    "{}: its 32-bit IV would wrap on this device; use {}64",
                    self.cipher.spec(),
                    self.cipher.spec()
                )));
            }
        }
        let layout =
            CryptLayout { offset: start, size, sector_size: self.sector_size, iv_tweak: self.skip };
        let cipher = SectorCipher::new(sector_cipher_kind(self.cipher.cipher), key)
            .map_err(|e| refused(format!("{} cannot take this key: {e}", self.cipher.spec())))?;
        let device = CryptDevice::new(data, layout, cipher).map_err(|e| refused(e.to_string()))?;
        if self.iv_large_sectors {
            device.with_iv_large_sectors().map_err(|e| refused(e.to_string()))
        } else {
            Ok(device)
        }
    }
}

/// How a passphrase becomes the key: `--hash NAME[:BYTES]` as cryptsetup
/// reads it (lib/crypt_plain.c, `crypt_plain_hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHash {
    /// No hashing (`--hash plain`, and any key file): the passphrase's
    /// first key-size bytes, zero-padded when it is shorter (lib/setup.c,
    /// `process_key`).
    None,
    /// `NAME[:BYTES]`: the hash fills BYTES of the key (all of it without
    /// `:BYTES`), zeros the rest. `plain:BYTES` copies BYTES of the
    /// passphrase, which must have that many.
    Hashed { hash: Option<PassphraseHash>, bytes: Option<usize> },
}

impl KeyHash {
    /// Parses `--hash`: `plain`, a hash name, or either with `:BYTES`.
    pub fn parse(spec: &str) -> Result<Self, PlainError> {
        if spec == "plain" {
            return Ok(Self::None);
        }
        let (name, bytes) = match spec.split_once(':') {
            Some((name, bytes)) => {
                let bytes = bytes.parse::<usize>().map_err(|_| {
                    refused(format!("--hash {spec}: the length after ':' is not a number"))
                })?;
                (name, Some(bytes))
            }
            None => (spec, None),
        };
        let hash = if name == "plain" {
            None
        } else {
            Some(PassphraseHash::from_name(name).ok_or_else(|| {
                refused(format!(
                    "--hash {name}: not supported (supported: plain, {})",
                    PassphraseHash::names().join(", ")
                ))
            })?)
        };
        Ok(Self::Hashed { hash, bytes })
    }

    /// The `key_bytes`-byte key of `passphrase`.
    pub fn key(self, passphrase: &[u8], key_bytes: usize) -> Result<SecretBytes, PlainError> {
        let mut key = SecretBytes::zeroed(key_bytes);
        let (hash, filled) = match self {
            Self::None => {
                let n = passphrase.len().min(key_bytes);
                key.expose_mut()[..n].copy_from_slice(&passphrase[..n]);
                return Ok(key);
            }
            Self::Hashed { hash, bytes } => (hash, bytes.unwrap_or(key_bytes)),
        };
        if filled > key_bytes {
            return Err(refused(format!(
                "--hash: {filled} hashed bytes do not fit a {key_bytes}-byte key"
            )));
        }
        let out = &mut key.expose_mut()[..filled];
        match hash {
            None => {
                let from = passphrase.get(..filled).ok_or_else(|| {
                    refused(format!("--hash plain:{filled}: the passphrase is shorter"))
                })?;
                out.copy_from_slice(from);
            }
            Some(hash) => hash_rounds(hash, passphrase, out)?,
        }
        Ok(key)
    }
}

/// Fills `out` with digests of the passphrase: round `n` hashes `n` bytes
/// `A` followed by the passphrase, and each round's digest (cut short in
/// the last) follows the previous one (crypt_plain.c, `hash`, after
/// hashalot).
fn hash_rounds(hash: PassphraseHash, passphrase: &[u8], out: &mut [u8]) -> Result<(), PlainError> {
    let digest_len = hash.output_len();
    let mut digest = SecretBytes::zeroed(digest_len);
    let mut input = SecretBytes::zeroed(out.len().div_ceil(digest_len) + passphrase.len());
    for (round, chunk) in out.chunks_mut(digest_len).enumerate() {
        let message = &mut input.expose_mut()[..round + passphrase.len()];
        message[..round].fill(b'A');
        message[round..].copy_from_slice(passphrase);
        hash.digest_into(message, digest.expose_mut())?;
        chunk.copy_from_slice(&digest.expose()[..chunk.len()]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDevice;

    #[test]
    fn ciphers_take_cryptsetup_plain_spellings() {
        for (spec, back) in [
            ("aes", "aes-cbc-plain"),
            ("aes-plain", "aes-cbc-plain"),
            ("aes-cbc-plain", "aes-cbc-plain"),
            ("aes-cbc-plain64", "aes-cbc-plain64"),
            ("aes-xts-plain", "aes-xts-plain"),
            ("aes-xts-plain64", "aes-xts-plain64"),
            ("aes-cbc-essiv:sha256", "aes-cbc-essiv:sha256"),
        ] {
            assert_eq!(PlainCipher::parse(spec).unwrap().spec(), back);
        }
        for bad in ["serpent-xts-plain64", "aes-gcm-random", "aes-cbc-essiv:sha1", ""] {
            let err = PlainCipher::parse(bad).unwrap_err().to_string();
            assert!(err.contains("not supported"), "{err}");
        }
    }

    #[test]
    fn hashed_keys_follow_cryptsetup_rounds_and_padding() {
        let pass = b"correct horse";
        // One round: the digest itself, cut to the key.
        let key = KeyHash::parse("sha256").unwrap().key(pass, 16).unwrap();
        let mut want = [0u8; 32];
        PassphraseHash::Sha256.digest_into(pass, &mut want).unwrap();
        assert_eq!(key.expose(), &want[..16]);
        // Two rounds: then the digest of "A" and the passphrase.
        let key = KeyHash::parse("ripemd160").unwrap().key(pass, 32).unwrap();
        let mut first = [0u8; 20];
        let mut second = [0u8; 20];
        PassphraseHash::Ripemd160.digest_into(pass, &mut first).unwrap();
        PassphraseHash::Ripemd160.digest_into(b"Acorrect horse", &mut second).unwrap();
        assert_eq!(&key.expose()[..20], &first);
        assert_eq!(&key.expose()[20..], &second[..12]);
        // NAME:BYTES hashes that many and zeros the rest.
        let key = KeyHash::parse("sha256:16").unwrap().key(pass, 32).unwrap();
        assert_eq!(&key.expose()[..16], &want[..16]);
        assert_eq!(&key.expose()[16..], &[0u8; 16]);
        assert!(KeyHash::parse("sha256:33").unwrap().key(pass, 32).is_err());
        // plain: copied, zero-padded; plain:BYTES needs that many.
        let key = KeyHash::parse("plain").unwrap().key(pass, 16).unwrap();
        assert_eq!(&key.expose()[..13], pass);
        assert_eq!(&key.expose()[13..], &[0u8; 3]);
        assert!(KeyHash::parse("plain:16").unwrap().key(pass, 32).is_err());
        let key = KeyHash::parse("plain:8").unwrap().key(pass, 16).unwrap();
        assert_eq!(&key.expose()[..8], &pass[..8]);
        for bad in ["whirlpool", "sha256:x", "sha256:"] {
            assert!(KeyHash::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn layouts_refuse_what_dm_crypt_refuses() {
        let key = SecretBytes::new((0..32).collect());
        let layout = PlainLayout {
            cipher: PlainCipher::parse("aes-xts-plain64").unwrap(),
            key_bytes: 32,
            offset: 8,
            skip: 0,
            sector_size: 4096,
            iv_large_sectors: false,
        };
        let device = layout.device(MemDevice::new(1 << 20), &key).unwrap();
        assert_eq!(device.len(), (1 << 20) - 4096);
        for (offset, skip, sector) in [(1, 0, 4096), (0, 4, 4096), (0, 0, 3000), (4096, 0, 512)] {
            let bad = PlainLayout { offset, skip, sector_size: sector, ..layout };
            assert!(bad.device(MemDevice::new(1 << 20), &key).is_err(), "{offset} {skip}");
        }
        assert!(layout.device(MemDevice::new(1 << 20), &SecretBytes::zeroed(64)).is_err());
    }

    #[test]
    fn large_sector_ivs_count_sectors() {
        let key = SecretBytes::new((0..32).collect());
        let plain = PlainLayout {
            cipher: PlainCipher::parse("aes-xts-plain64").unwrap(),
            key_bytes: 32,
            offset: 0,
            skip: 8,
            sector_size: 4096,
            iv_large_sectors: true,
        };
        let data = vec![0x42u8; 8192];
        let large = plain.device(MemDevice::new(8192), &key).unwrap();
        large.write_at(&data, 0).unwrap();
        // Sector 1 at skip 8 (one 4096-byte sector) has IV (8 + 8) / 8 = 2.
        let mut want = data[4096..].to_vec();
        let mut xts = rampart_crypto::Xts::new(key.expose()).unwrap();
        xts.encrypt_sectors(&mut want, 4096, 2, 1).unwrap();
        assert_eq!(&large.inner().snapshot()[4096..], &want[..]);
        // Without large sectors it is 8 + 8 = 16.
        let small = PlainLayout { iv_large_sectors: false, ..plain };
        let small = small.device(MemDevice::new(8192), &key).unwrap();
        small.write_at(&data, 0).unwrap();
        let mut want = data[4096..].to_vec();
        xts.encrypt_sectors(&mut want, 4096, 16, 8).unwrap();
        assert_eq!(&small.inner().snapshot()[4096..], &want[..]);
    }
}
