//! A crypt segment's `"integrity"` object (LUKS2 on-disk format, section
//! 3.3: `type`, `journal_encryption`, `journal_integrity` and the optional
//! `key_size`), and what cryptsetup 2.6 and dm-crypt make of it: how the
//! volume key splits into the encryption key and the integrity key, and
//! how each sector's tag is laid out.
//!
//! The facts, from cryptsetup's `lib/integrity/integrity.c`
//! (`INTEGRITY_key_size`, `INTEGRITY_tag_size`) and Linux 6.1's
//! `drivers/md/dm-crypt.c` (`crypt_copy_authenckey`,
//! `crypt_convert_block_aead`):
//!
//! * `hmac(sha256)` / `hmac(sha512)` with `aes-xts-plain64`: the volume
//!   key is the XTS key followed by the HMAC key (32 or 64 bytes), so a
//!   512-bit XTS key makes a 96- or 128-byte volume key. dm-crypt runs
//!   `authenc(hmac(sha…),xts(aes))`: the tag is the HMAC of the associated
//!   data (the sector number, 64-bit little-endian in 512-byte units, then
//!   the 16-byte IV) and the ciphertext of the sector.
//! * `aead` with `aes-gcm-random`: the volume key is the GCM key alone;
//!   each sector gets a random 12-byte IV, stored after its 16-byte GCM
//!   tag (28 bytes a sector); the associated data is the sector number
//!   and the IV.
//! * A tag shorter than dm-integrity's tag size is zero-padded.
//!
//! cryptsetup writes `"none"` for both journal fields: the dm-integrity
//! journal of a LUKS2 volume is neither encrypted nor MACed (the data in
//! it is dm-crypt's ciphertext and tags).

use std::ops::Range;

use serde_json::Value;

use super::json::shorten;
use crate::{Error, Result};

/// The segment encryption of `aead` volumes: AES-GCM with a random IV
/// stored in each sector's tag.
pub const AEAD_ENCRYPTION: &str = "aes-gcm-random";

/// The integrity algorithm of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntegrityKind {
    /// `hmac(sha256)`: 32-byte key and tag.
    HmacSha256,
    /// `hmac(sha512)`: 64-byte key and tag.
    HmacSha512,
    /// `aead`: the cipher authenticates (AES-GCM).
    Aead,
    /// Anything else cryptsetup may write (`hmac(sha1)`, `cmac(aes)`,
    /// `poly1305`, `none`), kept as written.
    Other(String),
}

impl IntegrityKind {
    /// From the `type` string.
    #[must_use]
    pub fn from_spec(spec: &str) -> Self {
        match spec {
            "hmac(sha256)" => Self::HmacSha256,
            "hmac(sha512)" => Self::HmacSha512,
            "aead" => Self::Aead,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The `type` string (dm-crypt's notation).
    #[must_use]
    pub fn spec(&self) -> &str {
        match self {
            Self::HmacSha256 => "hmac(sha256)",
            Self::HmacSha512 => "hmac(sha512)",
            Self::Aead => "aead",
            Self::Other(s) => s,
        }
    }

    /// From `rampart format --integrity`'s names (cryptsetup's
    /// `--integrity hmac-sha256|hmac-sha512|aead`).
    pub fn from_option(name: &str) -> Result<Self> {
        match name {
            "hmac-sha256" => Ok(Self::HmacSha256),
            "hmac-sha512" => Ok(Self::HmacSha512),
            "aead" => Ok(Self::Aead),
            other => Err(Error::invalid(format!(
                "integrity \"{}\": use hmac-sha256, hmac-sha512 or aead",
                shorten(other)
            ))),
        }
    }

    /// The integrity key's default size in bytes, appended to the
    /// encryption key in the volume key (`INTEGRITY_key_size`); 0 for
    /// `aead`.
    pub fn key_bytes(&self) -> Result<usize> {
        match self {
            Self::HmacSha256 => Ok(32),
            Self::HmacSha512 => Ok(64),
            Self::Aead => Ok(0),
            Self::Other(s) => Err(unsupported(s)),
        }
    }

    /// The authentication tag's size in bytes (`INTEGRITY_tag_size`).
    pub fn auth_tag_bytes(&self) -> Result<usize> {
        match self {
            Self::HmacSha256 => Ok(32),
            Self::HmacSha512 => Ok(64),
            Self::Aead => Ok(16),
            Self::Other(s) => Err(unsupported(s)),
        }
    }
}

fn unsupported(spec: &str) -> Error {
    Error::UnsupportedCipher(format!(
        "integrity \"{}\" (Rampart implements hmac(sha256), hmac(sha512) and aead)",
        shorten(spec)
    ))
}

/// A segment's `"integrity"` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentIntegrity {
    pub kind: IntegrityKind,
    /// `"none"` as cryptsetup writes it.
    pub journal_encryption: String,
    /// `"none"` as cryptsetup writes it.
    pub journal_integrity: String,
    /// The integrity key size, when the header names a non-default one.
    pub key_size: Option<usize>,
}

impl SegmentIntegrity {
    /// The object cryptsetup 2.6 writes for `--integrity`.
    #[must_use]
    pub fn new(kind: IntegrityKind) -> Self {
        Self {
            kind,
            journal_encryption: "none".into(),
            journal_integrity: "none".into(),
            key_size: None,
        }
    }

    /// Parses the object (the JSON reader has checked that the three
    /// strings are there).
    pub fn from_json(v: &Value, what: &str) -> Result<Self> {
        let text = |field: &str| {
            v.get(field).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                Error::corrupt(format!("{what}: \"integrity\" needs a \"{field}\" string"))
            })
        };
        let key_size = match v.get("key_size") {
            None => None,
            Some(n) => Some(
                n.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n > 0 && n <= 4096)
                    .ok_or_else(|| {
                        Error::corrupt(format!(
                            "{what}: integrity \"key_size\" is not a key size in bytes"
                        ))
                    })?,
            ),
        };
        Ok(Self {
            kind: IntegrityKind::from_spec(&text("type")?),
            journal_encryption: text("journal_encryption")?,
            journal_integrity: text("journal_integrity")?,
            key_size,
        })
    }

    /// The JSON object, in cryptsetup's member order.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), self.kind.spec().into());
        m.insert("journal_encryption".into(), self.journal_encryption.clone().into());
        m.insert("journal_integrity".into(), self.journal_integrity.clone().into());
        if let Some(n) = self.key_size {
            m.insert("key_size".into(), n.into());
        }
        Value::Object(m)
    }

    /// Refuses journal encryption or a journal MAC, which cryptsetup
    /// never sets up for LUKS2 and Rampart does not implement.
    pub fn check_journal(&self) -> Result<()> {
        for (field, value) in [
            ("journal_encryption", &self.journal_encryption),
            ("journal_integrity", &self.journal_integrity),
        ] {
            if value != "none" {
                return Err(Error::UnsupportedCipher(format!(
                    "integrity {field} \"{}\" (only \"none\", as cryptsetup writes)",
                    shorten(value)
                )));
            }
        }
        Ok(())
    }

    /// The integrity key size in bytes: `key_size`, else the default.
    pub fn key_bytes(&self) -> Result<usize> {
        match self.key_size {
            Some(n) => Ok(n),
            None => self.kind.key_bytes(),
        }
    }

    /// How a volume key of `volume_key_bytes` splits: the encryption key
    /// first, then the integrity key (dm-crypt's `crypt_copy_authenckey`).
    pub fn key_layout(&self, volume_key_bytes: usize) -> Result<KeyLayout> {
        let mac = self.key_bytes()?;
        let enc = volume_key_bytes.checked_sub(mac).filter(|&n| n > 0).ok_or_else(|| {
            Error::corrupt(format!(
                "a {volume_key_bytes}-byte volume key has no room for a {mac}-byte integrity key"
            ))
        })?;
        Ok(KeyLayout { encryption: 0..enc, integrity: (mac > 0).then_some(enc..volume_key_bytes) })
    }

    /// Checks that a volume key of `volume_key_bytes` fits `encryption`
    /// with this integrity: AES-XTS takes 256 or 512 bits, AES-GCM 128 or
    /// 256, followed by the integrity key.
    pub fn check_volume_key(&self, encryption: &str, volume_key_bytes: usize) -> Result<()> {
        self.tag_layout(encryption)?;
        let enc = self.key_layout(volume_key_bytes)?.encryption.len();
        let allowed: [usize; 2] = if encryption == AEAD_ENCRYPTION { [16, 32] } else { [32, 64] };
        if allowed.contains(&enc) {
            return Ok(());
        }
        Err(Error::UnsupportedCipher(format!(
            "{encryption} with a {}-bit key (supported: {} or {} bits, plus {} bits for {})",
            enc * 8,
            allowed[0] * 8,
            allowed[1] * 8,
            self.key_bytes()? * 8,
            self.kind.spec()
        )))
    }

    /// The per-sector tag dm-integrity stores for this segment with the
    /// segment's `encryption` (`INTEGRITY_tag_size`, and dm-crypt's order:
    /// the authentication tag, then a stored IV).
    pub fn tag_layout(&self, encryption: &str) -> Result<TagLayout> {
        let auth = self.kind.auth_tag_bytes()?;
        let iv = match (encryption, &self.kind) {
            ("aes-xts-plain64", IntegrityKind::HmacSha256 | IntegrityKind::HmacSha512) => 0,
            ("aes-gcm-random", IntegrityKind::Aead) => 12,
            (other, kind) => {
                return Err(Error::UnsupportedCipher(format!(
                    "encryption \"{}\" with integrity \"{}\" (Rampart implements aes-xts-plain64 \
                     with hmac(sha256) or hmac(sha512), and aes-gcm-random with aead)",
                    shorten(other),
                    shorten(kind.spec())
                )))
            }
        };
        Ok(TagLayout { auth: 0..auth, iv: auth..auth + iv })
    }
}

/// A crypt segment with integrity, as the header describes it (what
/// [`crate::Luks::segment`] refuses until the I/O layer maps it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegritySegment {
    /// Bytes from the start of the data device: where the dm-integrity
    /// superblock is.
    pub offset: u64,
    /// `None`: to the end of the device.
    pub size: Option<u64>,
    /// The segment's `encryption` (`aes-xts-plain64`, `aes-gcm-random`).
    pub encryption: String,
    pub sector_size: u32,
    pub iv_tweak: u64,
    /// The volume key size (keyslots' `key_size`): encryption and
    /// integrity keys together.
    pub volume_key_bytes: usize,
    pub integrity: SegmentIntegrity,
}

/// Where each key lies in the volume key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    pub encryption: Range<usize>,
    /// `None` for `aead`.
    pub integrity: Option<Range<usize>>,
}

/// Where the parts of a sector's tag lie in dm-integrity's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagLayout {
    pub auth: Range<usize>,
    /// Empty unless the IV is random.
    pub iv: Range<usize>,
}

impl TagLayout {
    /// dm-integrity's tag size: the superblock's `integrity_tag_size`.
    #[must_use]
    pub fn tag_size(&self) -> usize {
        self.iv.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_round_trip() {
        let v: Value = serde_json::from_str(
            r#"{"type":"hmac(sha256)","journal_encryption":"none","journal_integrity":"none"}"#,
        )
        .unwrap();
        let i = SegmentIntegrity::from_json(&v, "segment 0").unwrap();
        assert_eq!(i, SegmentIntegrity::new(IntegrityKind::HmacSha256));
        assert_eq!(
            serde_json::to_string(&i.to_json()).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        assert!(i.check_journal().is_ok());
        let mut odd = v.clone();
        odd["journal_integrity"] = "hmac(sha256)".into();
        assert!(SegmentIntegrity::from_json(&odd, "s").unwrap().check_journal().is_err());
        odd["key_size"] = (-1).into();
        assert!(SegmentIntegrity::from_json(&odd, "s").is_err());
        assert!(SegmentIntegrity::from_json(&serde_json::json!({"type": "aead"}), "s").is_err());
    }

    #[test]
    fn keys_and_tags() {
        let hmac = SegmentIntegrity::new(IntegrityKind::HmacSha256);
        assert_eq!(
            hmac.key_layout(96).unwrap(),
            KeyLayout { encryption: 0..64, integrity: Some(64..96) }
        );
        assert_eq!(hmac.tag_layout("aes-xts-plain64").unwrap().tag_size(), 32);
        let sha512 = SegmentIntegrity::new(IntegrityKind::HmacSha512);
        assert_eq!(sha512.key_layout(128).unwrap().integrity, Some(64..128));
        assert_eq!(sha512.tag_layout("aes-xts-plain64").unwrap().tag_size(), 64);
        let aead = SegmentIntegrity::new(IntegrityKind::Aead);
        assert_eq!(aead.key_layout(32).unwrap(), KeyLayout { encryption: 0..32, integrity: None });
        assert_eq!(
            aead.tag_layout("aes-gcm-random").unwrap(),
            TagLayout { auth: 0..16, iv: 16..28 }
        );
        assert!(aead.tag_layout("aes-xts-plain64").is_err());
        assert!(hmac.key_layout(32).is_err());
        assert!(SegmentIntegrity::new(IntegrityKind::from_spec("poly1305")).key_bytes().is_err());
        assert_eq!(IntegrityKind::from_option("hmac-sha512").unwrap(), IntegrityKind::HmacSha512);
    }
}
