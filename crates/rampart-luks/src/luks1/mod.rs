//! LUKS1: loading, formatting, keyslot management and dumps.

mod header;
mod keyslot;

use std::fmt::Write as _;

use rampart_crypto::SecretBytes;
use serde_json::{json, Value};

use self::header::{
    Header, Slot, SlotState, ALIGN_KEYSLOTS_SECTORS, KEY_DISABLED, NUM_KEYS, PHDR_SIZE, SALT_SIZE,
};
use crate::io::{read_exact, write_random, write_zeros, MetadataIo};
use crate::pbkdf::{pbkdf2_iterations_for, pbkdf_for_time, KdfParams, PbkdfChoice, PbkdfKind};
use crate::{af, Error, FormatOptions, LoadReport, Result, Segment};

pub(crate) use self::header::MAGIC;

/// Data is aligned to 1 MiB (2048 sectors) by default.
const DATA_ALIGNMENT_SECTORS: u64 = 2048;
/// Time target of the volume key digest (cryptsetup's `LUKS_MKD_ITERATIONS_MS`).
const DIGEST_ITER_MS: u32 = 125;

/// A loaded, validated LUKS1 header.
#[derive(Debug, Clone)]
pub(crate) struct Luks1 {
    header: Header,
}

impl Luks1 {
    pub(crate) fn load(io: &dyn MetadataIo, dev_len: u64, report: &mut LoadReport) -> Result<Self> {
        if dev_len < PHDR_SIZE as u64 {
            return Err(Error::DeviceTooSmall {
                what: "a LUKS1 header",
                required: PHDR_SIZE as u64,
                actual: dev_len,
            });
        }
        let mut bytes = vec![0u8; PHDR_SIZE];
        read_exact(io, 0, &mut bytes, "LUKS1 header")?;
        let header = Header::decode(&bytes)?;
        header.validate()?;
        let end = header.keyslots_end()?;
        if dev_len < end {
            return Err(Error::DeviceTooSmall {
                what: "the LUKS1 header and keyslots",
                required: end,
                actual: dev_len,
            });
        }
        for (i, slot) in header.slots.iter().enumerate() {
            if slot.state() == SlotState::Invalid {
                report.warnings.push(format!(
                    "LUKS1 keyslot {i} is in an invalid state (0x{:08x}); it is ignored",
                    slot.active
                ));
            }
        }
        Ok(Self { header })
    }

    pub(crate) fn uuid(&self) -> &str {
        &self.header.uuid
    }

    pub(crate) fn segment(&self) -> Result<Segment> {
        let cipher = keyslot::cipher(&self.header)?;
        Ok(Segment {
            offset: u64::from(self.header.payload_offset) * 512,
            size: None,
            cipher,
            key_bytes: self.header.key_bytes as usize,
            sector_size: 512,
            iv_tweak: 0,
        })
    }

    pub(crate) fn metadata_end(&self) -> u64 {
        // Validated at load: the material size is computable.
        self.header.keyslots_end().unwrap_or(0)
    }

    pub(crate) fn header_bytes(&self) -> u64 {
        match self.header.payload_offset {
            0 => self.metadata_end(),
            sectors => u64::from(sectors) * 512,
        }
    }

    pub(crate) fn active_keyslots(&self) -> Vec<usize> {
        (0..NUM_KEYS).filter(|&i| self.header.slots[i].state() == SlotState::Enabled).collect()
    }

    pub(crate) fn verify_volume_key(&self, key: &SecretBytes) -> Result<bool> {
        keyslot::verify_key(&self.header, key.expose())
    }

    pub(crate) fn unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(usize, SecretBytes)> {
        keyslot::cipher(&self.header)?;
        keyslot::hash(&self.header)?;
        let candidates: Vec<usize> = match slot {
            Some(s) if s >= NUM_KEYS || self.header.slots[s].state() != SlotState::Enabled => {
                return Err(Error::invalid(format!("keyslot {s} is not active")));
            }
            Some(s) => vec![s],
            None => self.active_keyslots(),
        };
        for index in candidates {
            let candidate = keyslot::open(io, &self.header, index, passphrase)?;
            if keyslot::verify_key(&self.header, candidate.expose())? {
                return Ok((index, candidate));
            }
        }
        Err(Error::NoKey)
    }

    fn slot_iterations(&self, pbkdf: &PbkdfChoice) -> Result<u32> {
        if pbkdf.kind != PbkdfKind::Pbkdf2 {
            return Err(Error::invalid(format!(
                "LUKS1 keyslots use PBKDF2 only, not {}",
                pbkdf.kind.name()
            )));
        }
        let choice = PbkdfChoice { hash: keyslot::hash(&self.header)?, ..pbkdf.clone() };
        match pbkdf_for_time(&choice, self.header.key_bytes as usize)? {
            KdfParams::Pbkdf2 { iterations, .. } => Ok(iterations),
            KdfParams::Argon2 { .. } => Err(Error::invalid("LUKS1 keyslots use PBKDF2 only")),
        }
    }

    pub(crate) fn add_keyslot(
        &mut self,
        io: &dyn MetadataIo,
        volume_key: &SecretBytes,
        passphrase: &[u8],
        pbkdf: &PbkdfChoice,
        slot: Option<usize>,
    ) -> Result<usize> {
        if !self.verify_volume_key(volume_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
        let iterations = self.slot_iterations(pbkdf)?;
        let index = match slot {
            Some(s) if s >= NUM_KEYS => {
                return Err(Error::invalid(format!("LUKS1 keyslot {s} is out of range (0..=7)")))
            }
            Some(s) if self.header.slots[s].state() != SlotState::Disabled => {
                return Err(Error::invalid(format!("keyslot {s} is already in use")))
            }
            Some(s) => s,
            None => (0..NUM_KEYS)
                .find(|&i| self.header.slots[i].state() == SlotState::Disabled)
                .ok_or_else(|| Error::NoSpace("all 8 LUKS1 keyslots are in use".into()))?,
        };
        let new_slot = keyslot::store(io, &self.header, index, volume_key, passphrase, iterations)?;
        let mut header = self.header.clone();
        header.slots[index] = new_slot;
        write_header(io, &header)?;
        self.header = header;
        Ok(index)
    }

    pub(crate) fn remove_keyslot(&mut self, io: &dyn MetadataIo, slot: usize) -> Result<()> {
        if slot >= NUM_KEYS || self.header.slots[slot].state() != SlotState::Enabled {
            return Err(Error::invalid(format!("keyslot {slot} is not active")));
        }
        let offset = u64::from(self.header.slots[slot].key_material_offset) * 512;
        write_random(io, offset, self.header.material_bytes()?)?;
        io.sync()?;
        let mut header = self.header.clone();
        let s = &mut header.slots[slot];
        s.active = KEY_DISABLED;
        s.iterations = 0;
        s.salt = [0; SALT_SIZE];
        write_header(io, &header)?;
        self.header = header;
        Ok(())
    }

    /// Writes the header with a new UUID.
    pub(crate) fn set_uuid(&mut self, io: &dyn MetadataIo, uuid: String) -> Result<()> {
        let previous = std::mem::replace(&mut self.header.uuid, uuid);
        let written = self.write(io);
        if written.is_err() {
            self.header.uuid = previous;
        }
        written
    }

    pub(crate) fn write(&self, io: &dyn MetadataIo) -> Result<()> {
        write_header(io, &self.header)
    }

    /// Formats a new LUKS1 header holding `volume_key` in keyslot 0, laid
    /// out as cryptsetup does.
    pub(crate) fn format(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        volume_key: &SecretBytes,
        passphrase: &[u8],
    ) -> Result<Self> {
        if opts.sector_size != 512 {
            return Err(Error::invalid("LUKS1 uses 512-byte sectors only"));
        }
        if opts.label.is_some() || opts.subsystem.is_some() {
            return Err(Error::invalid("labels and subsystems are LUKS2 features"));
        }
        if opts.metadata_size.is_some() || opts.keyslots_size.is_some() {
            return Err(Error::invalid("metadata and keyslots sizes are LUKS2 options"));
        }
        if opts.pbkdf.kind != PbkdfKind::Pbkdf2 {
            return Err(Error::invalid(format!(
                "LUKS1 keyslots use PBKDF2 only, not {}",
                opts.pbkdf.kind.name()
            )));
        }
        let key_bytes = volume_key.len();
        opts.cipher.check_key_bytes(key_bytes)?;
        let hash = opts.pbkdf.hash;
        let material_sectors = af::split_sectors_bytes(key_bytes, af::STRIPES)? as u64 / 512;
        let mut slots = [Slot {
            active: KEY_DISABLED,
            iterations: 0,
            salt: [0; SALT_SIZE],
            key_material_offset: 0,
            stripes: af::STRIPES,
        }; NUM_KEYS];
        let align = u64::from(ALIGN_KEYSLOTS_SECTORS);
        let mut sector = align;
        for slot in &mut slots {
            // At most 8 * 1000 sectors: fits in u32.
            slot.key_material_offset = u32::try_from(sector).unwrap_or(u32::MAX);
            sector = (sector + material_sectors).div_ceil(align) * align;
        }
        let header_sectors = sector;
        let payload = match opts.data_offset {
            Some(off) => {
                if off % 512 != 0 {
                    return Err(Error::invalid(format!(
                        "data offset {off} is not a multiple of 512"
                    )));
                }
                if off == 0 && !opts.detached_header {
                    return Err(Error::invalid("a data offset of 0 requires a detached header"));
                }
                let sectors = off / 512;
                if sectors != 0 && sectors < header_sectors {
                    return Err(Error::invalid(format!(
                        "data offset {off} is inside the LUKS1 header and keyslots ({} bytes)",
                        header_sectors * 512
                    )));
                }
                sectors
            }
            None if opts.detached_header => 0,
            None => header_sectors.div_ceil(DATA_ALIGNMENT_SECTORS) * DATA_ALIGNMENT_SECTORS,
        };
        let payload_offset = u32::try_from(payload)
            .map_err(|_| Error::invalid("the data offset is too large for LUKS1"))?;
        let dev_len = io.len()?;
        if !opts.detached_header && dev_len < payload * 512 {
            return Err(Error::DeviceTooSmall {
                what: "the LUKS1 header, keyslots and data offset",
                required: payload * 512,
                actual: dev_len,
            });
        }
        let uuid = match &opts.uuid {
            Some(u) => crate::uuid::parse(u)?,
            None => crate::uuid::generate()?,
        };
        let digest_iterations = match opts.pbkdf.forced_iterations {
            Some(_) => crate::pbkdf::MIN_PBKDF2_ITERATIONS,
            None => pbkdf2_iterations_for(hash, key_bytes, DIGEST_ITER_MS)?,
        };
        let (mk_digest_salt, mk_digest) =
            keyslot::new_digest(hash, volume_key.expose(), digest_iterations)?;
        let mut header = Header {
            cipher_name: opts.cipher.luks1_name().into(),
            cipher_mode: opts.cipher.luks1_mode().into(),
            hash_spec: hash.name().into(),
            payload_offset,
            key_bytes: u32::try_from(key_bytes).map_err(|_| Error::invalid("key too large"))?,
            mk_digest,
            mk_digest_salt,
            mk_digest_iter: digest_iterations,
            uuid,
            slots,
        };
        header.validate()?;
        let mut luks = Self { header: header.clone() };
        let iterations = luks.slot_iterations(&opts.pbkdf)?;

        // Zero the header region (just the first 4 KiB with a detached
        // header) and fill every keyslot area with random bytes.
        let zero_len = if payload == 0 { 4096 } else { payload * 512 };
        write_zeros(io, 0, zero_len)?;
        let material = header.material_bytes()?;
        for slot in &header.slots {
            write_random(io, u64::from(slot.key_material_offset) * 512, material)?;
        }
        header.slots[0] = keyslot::store(io, &header, 0, volume_key, passphrase, iterations)?;
        write_header(io, &header)?;
        luks.header = header;
        Ok(luks)
    }

    pub(crate) fn dump_text(&self) -> String {
        let h = &self.header;
        let mut out = String::new();
        let _ = writeln!(out, "LUKS header information\n");
        let _ = writeln!(out, "Version:       \t1");
        let _ = writeln!(out, "Cipher name:   \t{}", h.cipher_name);
        let _ = writeln!(out, "Cipher mode:   \t{}", h.cipher_mode);
        let _ = writeln!(out, "Hash spec:     \t{}", h.hash_spec);
        let _ = writeln!(out, "Payload offset:\t{}", h.payload_offset);
        let _ = writeln!(out, "MK bits:       \t{}", u64::from(h.key_bytes) * 8);
        let digest: String = h.mk_digest.iter().map(|b| format!("{b:02x} ")).collect();
        let _ = writeln!(out, "MK digest:     \t{digest}");
        let _ = writeln!(out, "MK salt:       \t{}", hex(&h.mk_digest_salt, "               \t"));
        let _ = writeln!(out, "MK iterations: \t{}", h.mk_digest_iter);
        let _ = writeln!(out, "UUID:          \t{}\n", h.uuid);
        for (i, slot) in h.slots.iter().enumerate() {
            match slot.state() {
                SlotState::Enabled => {
                    let _ = writeln!(out, "Key Slot {i}: ENABLED");
                    let _ = writeln!(out, "\tIterations:         \t{}", slot.iterations);
                    let _ = writeln!(
                        out,
                        "\tSalt:               \t{}",
                        hex(&slot.salt, "\t                      \t")
                    );
                    let _ = writeln!(out, "\tKey material offset:\t{}", slot.key_material_offset);
                    let _ = writeln!(out, "\tAF stripes:            \t{}", slot.stripes);
                }
                SlotState::Disabled => {
                    let _ = writeln!(out, "Key Slot {i}: DISABLED");
                }
                SlotState::Invalid => {
                    let _ = writeln!(out, "Key Slot {i}: INVALID");
                }
            }
        }
        out
    }

    pub(crate) fn to_json(&self) -> Value {
        let h = &self.header;
        let keyslots: Vec<Value> = self
            .active_keyslots()
            .into_iter()
            .map(|i| {
                let s = &h.slots[i];
                json!({
                    "id": i,
                    "type": "luks1",
                    "key_bits": u64::from(h.key_bytes) * 8,
                    "cipher": format!("{}-{}", h.cipher_name, h.cipher_mode),
                    "kdf": {"type": "pbkdf2", "hash": h.hash_spec, "iterations": s.iterations},
                    "af_stripes": s.stripes,
                    "af_hash": h.hash_spec,
                    "area_offset": u64::from(s.key_material_offset) * 512,
                    "area_size": h.material_bytes().unwrap_or(0),
                })
            })
            .collect();
        json!({
            "version": 1,
            "uuid": h.uuid,
            "label": Value::Null,
            "data_offset": u64::from(h.payload_offset) * 512,
            "sector_size": 512,
            "cipher": format!("{}-{}", h.cipher_name, h.cipher_mode),
            "key_bits": u64::from(h.key_bytes) * 8,
            "hash": h.hash_spec,
            "mk_digest_iterations": h.mk_digest_iter,
            "keyslots": keyslots,
            "tokens": [],
        })
    }
}

fn hex(bytes: &[u8], indent: &str) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        for b in chunk {
            let _ = write!(out, "{b:02x} ");
        }
    }
    out
}

/// Writes the header (one 1024-byte block inside the first sector) and
/// syncs.
fn write_header(io: &dyn MetadataIo, header: &Header) -> Result<()> {
    header.validate()?;
    io.write_at(0, &header.encode()?)?;
    io.sync()?;
    Ok(())
}
