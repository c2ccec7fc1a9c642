//! The LUKS header targets: `Luks::load` on an in-memory device holding the
//! input bytes, then the read-only accessors of a header that loads and,
//! when the header's KDF costs are small, `unlock` with the seeds'
//! passphrase (see fuzz/README.md).
//!
//! Inputs with LUKS2 header copies are tried twice: as given, and with
//! their checksums recomputed, so that mutations of the JSON metadata get
//! past the checksum check and reach the JSON parser and validator.

use std::cell::RefCell;
use std::io;
use std::ops::Range;

use rampart_crypto::{digest, HashAlg};
use rampart_luks::{Luks, LuksVersion, MetadataIo};
use serde_json::Value;

/// The passphrase of every keyslot in the seed corpus (see make_seeds.sh).
const PASSPHRASE: &[u8] = b"rampart-fuzz";

/// Unlock only when every KDF the attempt may run is at most this costly.
const MAX_PBKDF2_ITERATIONS: u64 = 1000;
const MAX_ARGON2_MEMORY_KIB: u64 = 64;
const MAX_ARGON2_TIME: u64 = 4;

/// LUKS2 binary header layout (for the checksum fix-up).
const BIN_SIZE: usize = 4096;
const HDR_SIZES: [u64; 9] =
    [0x4000, 0x8000, 0x1_0000, 0x2_0000, 0x4_0000, 0x8_0000, 0x10_0000, 0x20_0000, 0x40_0000];
pub(crate) const MAGIC_1ST: &[u8; 6] = b"LUKS\xba\xbe";
const MAGIC_2ND: &[u8; 6] = b"SKUL\xba\xbe";
const CSUM_ALG: Range<usize> = 72..104;
const CSUM: Range<usize> = 448..512;

/// A fixed-size in-memory device: reads past the end fail with
/// `UnexpectedEof`, writes past the end fail (nothing grows).
struct FuzzIo {
    bytes: RefCell<Vec<u8>>,
}

impl FuzzIo {
    fn new(bytes: Vec<u8>) -> Self {
        Self { bytes: RefCell::new(bytes) }
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Range<usize>> {
        let dev_len = self.bytes.borrow().len();
        usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= dev_len)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::UnexpectedEof, "access past the end of the device")
            })
    }
}

impl MetadataIo for FuzzIo {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        buf.copy_from_slice(&self.bytes.borrow()[r]);
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        self.bytes.borrow_mut()[r].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.borrow().len() as u64)
    }
}

/// Recomputes the checksum of a LUKS2 header copy at `offset` whose magic,
/// version, size and checksum algorithm look right. Returns whether a byte
/// changed.
fn fix_copy(data: &mut [u8], offset: usize, magic: &[u8; 6]) -> bool {
    let Some(bin) = data.get(offset..offset + BIN_SIZE) else {
        return false;
    };
    if &bin[..6] != magic || bin[6..8] != [0, 2] {
        return false;
    }
    let hdr_size = u64::from_be_bytes(bin[8..16].try_into().unwrap());
    if !HDR_SIZES.contains(&hdr_size) {
        return false;
    }
    // As the parser reads the C string: up to the first NUL, or 31 bytes.
    let field = &bin[CSUM_ALG];
    let name_end = field.iter().position(|&b| b == 0).unwrap_or(field.len() - 1);
    let alg = match &field[..name_end] {
        b"sha1" => HashAlg::Sha1,
        b"sha256" => HashAlg::Sha256,
        b"sha512" => HashAlg::Sha512,
        _ => return false,
    };
    let Some(copy) = data.get(offset..offset + hdr_size as usize) else {
        return false;
    };
    let mut hashed = copy.to_vec();
    hashed[CSUM].fill(0);
    let sum = digest(alg, &hashed);
    let stored = &mut data[offset + CSUM.start..offset + CSUM.start + sum.len()];
    if stored == sum.expose() {
        return false;
    }
    stored.copy_from_slice(sum.expose());
    true
}

/// Fixes the checksums of the primary copy and of secondary copies at any
/// LUKS2 offset.
pub(crate) fn fix_checksums(data: &mut [u8]) -> bool {
    let mut changed = fix_copy(data, 0, MAGIC_1ST);
    for off in HDR_SIZES {
        changed |= fix_copy(data, off as usize, MAGIC_2ND);
    }
    changed
}

/// Whether a PBKDF2 iteration count (a JSON number) is small enough.
fn few_iterations(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n <= MAX_PBKDF2_ITERATIONS)
}

/// Whether every keyslot KDF (as `to_json` reports it) is cheap.
fn cheap_keyslots(json: &Value) -> bool {
    let Some(slots) = json.get("keyslots").and_then(Value::as_array) else {
        return false;
    };
    slots.iter().all(|ks| {
        let Some(kdf) = ks.get("kdf") else {
            // Keyslots of other types (no KDF) are never opened.
            return true;
        };
        match kdf.get("type").and_then(Value::as_str) {
            Some("pbkdf2") => kdf.get("iterations").is_some_and(few_iterations),
            Some("argon2i" | "argon2id") => {
                let small =
                    |field, max| kdf.get(field).and_then(Value::as_u64).is_some_and(|n| n <= max);
                small("memory_kib", MAX_ARGON2_MEMORY_KIB) && small("time", MAX_ARGON2_TIME)
            }
            _ => false,
        }
    })
}

/// Whether every LUKS2 `pbkdf2` digest of the loaded copy is cheap. The
/// iteration counts are not in `to_json`, so they are read from the JSON
/// area of the copy the header was loaded from.
fn cheap_luks2_digests(io: &FuzzIo, json: &Value, used_secondary: bool) -> bool {
    let Some(hdr_size) = json.get("metadata_size").and_then(Value::as_u64) else {
        return false;
    };
    let Ok(hdr_size) = usize::try_from(hdr_size) else {
        return false;
    };
    let start = if used_secondary { hdr_size } else { 0 } + BIN_SIZE;
    let bytes = io.bytes.borrow();
    let Some(area) = bytes.get(start..start - BIN_SIZE + hdr_size) else {
        return false;
    };
    let text = &area[..area.iter().position(|&b| b == 0).unwrap_or(area.len())];
    let Ok(meta) = serde_json::from_slice::<Value>(text) else {
        return false;
    };
    let Some(digests) = meta.get("digests").and_then(Value::as_object) else {
        return false;
    };
    digests.values().all(|d| match d.get("type").and_then(Value::as_str) {
        Some("pbkdf2") => d.get("iterations").is_some_and(few_iterations),
        // Other digest types are refused before any derivation.
        _ => true,
    })
}

fn cheap_to_unlock(luks: &Luks, io: &FuzzIo, json: &Value, used_secondary: bool) -> bool {
    cheap_keyslots(json)
        && match luks.version() {
            LuksVersion::Luks1 => json.get("mk_digest_iterations").is_some_and(few_iterations),
            LuksVersion::Luks2 => cheap_luks2_digests(io, json, used_secondary),
        }
}

pub(crate) fn exercise(data: Vec<u8>) {
    let dev_len = data.len() as u64;
    let io = FuzzIo::new(data);
    let Ok((luks, report)) = Luks::load(&io) else {
        return;
    };
    let _ = (luks.version(), luks.uuid(), luks.label(), luks.subsystem());
    let _ = format!("{luks:?} {report:?}");
    let _ = luks.segment();
    let _ = luks.dump_text();
    let json = luks.to_json();
    let _ = json.to_string();
    let _ = luks.tokens();
    let slots = luks.active_keyslots();
    let _ = luks.header_bytes();
    let end = luks.metadata_end();
    assert!(
        end <= dev_len,
        "loaded a header whose metadata ends at {end}, past the device ({dev_len})"
    );

    if cheap_to_unlock(&luks, &io, &json, report.used_secondary) {
        if let Ok((slot, key)) = luks.unlock(&io, PASSPHRASE, None) {
            assert!(slots.contains(&slot), "unlocked inactive keyslot {slot}");
            assert!(
                matches!(luks.verify_volume_key(&key), Ok(true)),
                "the key unlock returned does not verify"
            );
        }
        // A keyslot id that never exists must be an error, not a panic.
        assert!(luks.unlock(&io, PASSPHRASE, Some(32)).is_err());
    }
}
