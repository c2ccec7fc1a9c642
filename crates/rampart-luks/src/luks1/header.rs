//! The LUKS1 partition header (592 bytes, written as a 1024-byte block with
//! zero padding as cryptsetup does) and its consistency checks.

use crate::af;
use crate::reader::Reader;
use crate::{Error, Result};

pub(crate) const MAGIC: [u8; 6] = *b"LUKS\xba\xbe";
/// The size of the header structure.
pub(crate) const PHDR_SIZE: usize = 592;
/// What cryptsetup writes: the structure plus zero padding.
pub(crate) const PHDR_WRITE_SIZE: usize = 1024;
pub(crate) const NUM_KEYS: usize = 8;
pub(crate) const KEY_ENABLED: u32 = 0x00AC_71F3;
pub(crate) const KEY_DISABLED: u32 = 0x0000_DEAD;
pub(crate) const DIGEST_SIZE: usize = 20;
pub(crate) const SALT_SIZE: usize = 32;
const NAME_LEN: usize = 32;
const UUID_LEN: usize = 40;
/// Keyslot areas are aligned to 4096 bytes (8 sectors).
pub(crate) const ALIGN_KEYSLOTS_SECTORS: u32 = 8;

/// One of the eight keyslot descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) active: u32,
    pub(crate) iterations: u32,
    pub(crate) salt: [u8; SALT_SIZE],
    pub(crate) key_material_offset: u32,
    pub(crate) stripes: u32,
}

/// The state of a keyslot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    Enabled,
    Disabled,
    /// Neither magic value: cryptsetup neither opens nor reuses it.
    Invalid,
}

impl Slot {
    pub(crate) fn state(&self) -> SlotState {
        match self.active {
            KEY_ENABLED => SlotState::Enabled,
            KEY_DISABLED => SlotState::Disabled,
            _ => SlotState::Invalid,
        }
    }
}

/// A decoded LUKS1 header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) cipher_name: String,
    pub(crate) cipher_mode: String,
    /// Lowercased, as cryptsetup normalises it.
    pub(crate) hash_spec: String,
    /// In 512-byte sectors; 0 with a detached header.
    pub(crate) payload_offset: u32,
    pub(crate) key_bytes: u32,
    pub(crate) mk_digest: [u8; DIGEST_SIZE],
    pub(crate) mk_digest_salt: [u8; SALT_SIZE],
    pub(crate) mk_digest_iter: u32,
    pub(crate) uuid: String,
    pub(crate) slots: [Slot; NUM_KEYS],
}

impl Header {
    /// Decodes the header structure (`bytes` holds at least 592 bytes).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "LUKS1 header");
        let magic: [u8; 6] = r.array("magic")?;
        if magic != MAGIC {
            return Err(Error::NotLuks("bad LUKS1 magic".into()));
        }
        let version = r.u16_be("version")?;
        if version != 1 {
            return Err(Error::corrupt(format!("LUKS1 header: version {version} is not 1")));
        }
        let what = "LUKS1 header";
        let cipher_name = r.c_string(NAME_LEN, "cipher name")?.ascii("cipher name", what)?;
        let cipher_mode = r.c_string(NAME_LEN, "cipher mode")?.ascii("cipher mode", what)?;
        let hash_spec =
            r.c_string(NAME_LEN, "hash spec")?.ascii("hash spec", what)?.to_ascii_lowercase();
        let payload_offset = r.u32_be("payload offset")?;
        let key_bytes = r.u32_be("key bytes")?;
        let mk_digest = r.array("mk digest")?;
        let mk_digest_salt = r.array("mk digest salt")?;
        let mk_digest_iter = r.u32_be("mk digest iterations")?;
        let uuid = r.c_string(UUID_LEN, "uuid")?.ascii("uuid", what)?;
        let mut slots = [Slot {
            active: KEY_DISABLED,
            iterations: 0,
            salt: [0; SALT_SIZE],
            key_material_offset: 0,
            stripes: 0,
        }; NUM_KEYS];
        for slot in &mut slots {
            slot.active = r.u32_be("keyslot state")?;
            slot.iterations = r.u32_be("keyslot iterations")?;
            slot.salt = r.array("keyslot salt")?;
            slot.key_material_offset = r.u32_be("key material offset")?;
            slot.stripes = r.u32_be("keyslot stripes")?;
        }
        Ok(Self {
            cipher_name,
            cipher_mode,
            hash_spec,
            payload_offset,
            key_bytes,
            mk_digest,
            mk_digest_salt,
            mk_digest_iter,
            uuid,
            slots,
        })
    }

    /// Encodes the header as cryptsetup writes it (1024 bytes).
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(PHDR_WRITE_SIZE);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&1u16.to_be_bytes());
        for (text, len, name) in [
            (&self.cipher_name, NAME_LEN, "cipher name"),
            (&self.cipher_mode, NAME_LEN, "cipher mode"),
            (&self.hash_spec, NAME_LEN, "hash spec"),
        ] {
            push_c_string(&mut out, text, len, name)?;
        }
        out.extend_from_slice(&self.payload_offset.to_be_bytes());
        out.extend_from_slice(&self.key_bytes.to_be_bytes());
        out.extend_from_slice(&self.mk_digest);
        out.extend_from_slice(&self.mk_digest_salt);
        out.extend_from_slice(&self.mk_digest_iter.to_be_bytes());
        push_c_string(&mut out, &self.uuid, UUID_LEN, "uuid")?;
        for slot in &self.slots {
            out.extend_from_slice(&slot.active.to_be_bytes());
            out.extend_from_slice(&slot.iterations.to_be_bytes());
            out.extend_from_slice(&slot.salt);
            out.extend_from_slice(&slot.key_material_offset.to_be_bytes());
            out.extend_from_slice(&slot.stripes.to_be_bytes());
        }
        debug_assert_eq!(out.len(), PHDR_SIZE);
        out.resize(PHDR_WRITE_SIZE, 0);
        Ok(out)
    }

    /// The bytes of key material of one keyslot.
    pub(crate) fn material_bytes(&self) -> Result<u64> {
        Ok(af::split_sectors_bytes(self.key_bytes as usize, af::STRIPES)? as u64)
    }

    /// The end of the last keyslot area in bytes (the header size as
    /// cryptsetup computes it for backups and device size checks).
    pub(crate) fn keyslots_end(&self) -> Result<u64> {
        let material = self.material_bytes()?;
        let end = self
            .slots
            .iter()
            .map(|s| u64::from(s.key_material_offset) * 512 + material)
            .max()
            .unwrap_or(0);
        Ok(end)
    }

    /// The checks cryptsetup makes when it reads a LUKS1 header, plus
    /// bounds on sizes and costs.
    pub(crate) fn validate(&self) -> Result<()> {
        let key_bytes = self.key_bytes as usize;
        if key_bytes == 0 || key_bytes > af::MAX_KEY_BYTES {
            return Err(Error::corrupt(format!(
                "LUKS1 key size {key_bytes} bytes is outside 1..={}",
                af::MAX_KEY_BYTES
            )));
        }
        if self.mk_digest_iter == 0 {
            return Err(Error::corrupt("LUKS1 volume key digest iterations is 0"));
        }
        let material = self.material_bytes()?;
        let payload = u64::from(self.payload_offset) * 512;
        for (i, slot) in self.slots.iter().enumerate() {
            if slot.stripes != af::STRIPES {
                return Err(Error::corrupt(format!(
                    "LUKS1 keyslot {i}: {} stripes (LUKS1 requires {})",
                    slot.stripes,
                    af::STRIPES
                )));
            }
            let start = u64::from(slot.key_material_offset) * 512;
            if start < PHDR_SIZE as u64 {
                return Err(Error::corrupt(format!(
                    "LUKS1 keyslot {i}: key material at {start} overlaps the header"
                )));
            }
            if payload != 0 && start + material > payload {
                return Err(Error::corrupt(format!(
                    "LUKS1 keyslot {i}: key material [{start}, {}) reaches into the data at {payload}",
                    start + material
                )));
            }
            if slot.state() == SlotState::Enabled && slot.iterations == 0 {
                return Err(Error::corrupt(format!("LUKS1 keyslot {i}: iterations is 0")));
            }
        }
        let mut order: Vec<usize> = (0..NUM_KEYS).collect();
        order.sort_by_key(|&i| self.slots[i].key_material_offset);
        for pair in order.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let a_end = u64::from(self.slots[a].key_material_offset) * 512 + material;
            if u64::from(self.slots[b].key_material_offset) * 512 < a_end {
                return Err(Error::corrupt(format!(
                    "LUKS1 keyslots {a} and {b} have overlapping key material"
                )));
            }
        }
        Ok(())
    }
}

fn push_c_string(out: &mut Vec<u8>, text: &str, len: usize, name: &str) -> Result<()> {
    if text.len() >= len || text.contains('\0') {
        return Err(Error::invalid(format!("LUKS1 {name} \"{text}\" is too long")));
    }
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + (len - text.len()), 0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        let mut slots = [Slot {
            active: KEY_DISABLED,
            iterations: 0,
            salt: [0; SALT_SIZE],
            key_material_offset: 0,
            stripes: af::STRIPES,
        }; NUM_KEYS];
        let mut offset = 8u32;
        for slot in &mut slots {
            slot.key_material_offset = offset;
            offset = (offset + 500).div_ceil(8) * 8;
        }
        slots[0].active = KEY_ENABLED;
        slots[0].iterations = 1000;
        Header {
            cipher_name: "aes".into(),
            cipher_mode: "xts-plain64".into(),
            hash_spec: "sha256".into(),
            payload_offset: 4096,
            key_bytes: 64,
            mk_digest: [1; DIGEST_SIZE],
            mk_digest_salt: [2; SALT_SIZE],
            mk_digest_iter: 1000,
            uuid: "0b1c6f2e-7d39-4b5e-9d2c-3c1f0e2a4b6d".into(),
            slots,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        h.validate().unwrap();
        let bytes = h.encode().unwrap();
        assert_eq!(bytes.len(), PHDR_WRITE_SIZE);
        assert_eq!(Header::decode(&bytes).unwrap(), h);
        // The table of offsets in the LUKS2 specification (512-bit key).
        let offsets: Vec<u32> = h.slots.iter().map(|s| s.key_material_offset).collect();
        assert_eq!(offsets, [8, 512, 1016, 1520, 2024, 2528, 3032, 3536]);
        assert_eq!(h.keyslots_end().unwrap(), (3536 + 500) * 512);
    }

    #[test]
    fn inconsistent_headers_are_rejected() {
        let mut h = sample();
        h.slots[3].stripes = 3999;
        assert!(h.validate().unwrap_err().to_string().contains("stripes"));
        let mut h = sample();
        h.slots[7].key_material_offset = 4000;
        assert!(h.validate().unwrap_err().to_string().contains("data"));
        let mut h = sample();
        h.slots[2].key_material_offset = 600;
        assert!(h.validate().unwrap_err().to_string().contains("overlapping"));
        let mut h = sample();
        h.key_bytes = 0;
        assert!(h.validate().is_err());
    }
}
