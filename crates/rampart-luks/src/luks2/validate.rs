//! Structural validation of LUKS2 metadata, run on every header read and
//! before every header write: the checks cryptsetup makes (so Rampart
//! never writes a header cryptsetup would reject) plus the bounds that keep
//! untrusted sizes and costs from driving allocations or arithmetic.
//!
//! Support for the algorithms named (ciphers, hashes) is checked when they
//! are used, so that a header Rampart cannot unlock can still be inspected.

use rampart_crypto::HashAlg;

use super::binary::BIN_SIZE;
use super::json::{
    b64_decode, shorten, Area, Kdf, Keyslot, Luks2Keyslot, Metadata, Section, SegmentJson,
    SizeField,
};
use super::layout::{Layout, MAX_KEYSLOTS_SIZE};
use crate::pbkdf::{KdfParams, PbkdfKind};
use crate::{Error, Result};

/// The salt length of keyslots and digests.
pub(crate) const SALT_LEN: usize = 32;

/// Parses a hash name, or fails naming where it was found.
pub(crate) fn hash_alg(name: &str, what: &str) -> Result<HashAlg> {
    match name {
        "sha1" | "sha256" | "sha512" => HashAlg::from_name(name)
            .ok_or_else(|| Error::UnsupportedCipher(format!("{what}: hash {name}"))),
        other => Err(Error::UnsupportedCipher(format!(
            "{what}: hash \"{}\" (supported: sha1, sha256, sha512)",
            shorten(other)
        ))),
    }
}

/// A keyslot cost as Rampart's KDFs take it, or a clear refusal naming
/// the keyslot and the value.
fn cost(value: i64, name: &str, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        Error::UnsupportedCipher(format!("{what}: {name} {value} is outside 0..={}", u32::MAX))
    })
}

/// The KDF parameters of a keyslot, with its salt, checked when the
/// keyslot is used: costs a header may carry but Rampart will not run
/// (zero, beyond its memory and thread bounds, KDFs it does not implement)
/// are refused here, for this keyslot only.
pub(crate) fn kdf_params(kdf: &Kdf, what: &str) -> Result<(KdfParams, Vec<u8>)> {
    let argon2 = |kind, time: &i64, memory: &i64, cpus: &i64| -> Result<KdfParams> {
        Ok(KdfParams::Argon2 {
            kind,
            time: cost(*time, "Argon2 time cost", what)?,
            memory_kib: cost(*memory, "Argon2 memory (KiB)", what)?,
            parallel: cost(*cpus, "Argon2 parallelism", what)?,
        })
    };
    let (params, salt) = match kdf {
        Kdf::Pbkdf2 { hash, iterations, salt } => (
            KdfParams::Pbkdf2 {
                hash: hash_alg(hash, what)?,
                iterations: cost(*iterations, "PBKDF2 iterations", what)?,
            },
            salt,
        ),
        Kdf::Argon2i { time, memory, cpus, salt } => {
            (argon2(PbkdfKind::Argon2i, time, memory, cpus)?, salt)
        }
        Kdf::Argon2id { time, memory, cpus, salt } => {
            (argon2(PbkdfKind::Argon2id, time, memory, cpus)?, salt)
        }
        Kdf::Other => {
            return Err(Error::UnsupportedCipher(format!(
                "{what}: its KDF type is not one Rampart implements (pbkdf2, argon2i, argon2id)"
            )))
        }
    };
    params.validate_loaded(what)?;
    let salt = b64_decode(salt, &format!("{what} kdf salt"))?;
    if salt.is_empty() {
        return Err(Error::corrupt(format!("{what}: kdf salt is empty")));
    }
    Ok((params, salt))
}

/// What cryptsetup's `luks2` keyslot handler requires at load: a `luks1`
/// anti-forensic splitter and a `raw` area (the KDF's fields are checked
/// by its parser). Sizes, costs and algorithms are checked when the
/// keyslot is used (see `keyslot::usable`).
fn validate_luks2_keyslot(id: usize, ks: &Luks2Keyslot) -> Result<()> {
    let what = format!("keyslot {id}");
    if ks.af.kind != "luks1" {
        return Err(Error::corrupt(format!(
            "{what}: anti-forensic type \"{}\" is unknown",
            shorten(&ks.af.kind)
        )));
    }
    if ks.area.kind != "raw" {
        return Err(Error::corrupt(format!(
            "{what}: area type \"{}\" is unknown",
            shorten(&ks.area.kind)
        )));
    }
    Ok(())
}

fn strip_prefix(e: &Error) -> String {
    match e {
        Error::Corrupt(msg) | Error::InvalidArgument(msg) => msg.clone(),
        other => other.to_string(),
    }
}

fn check_areas(meta: &Metadata, layout: &Layout) -> Result<()> {
    let start = layout.keyslots_offset();
    let end = layout.metadata_end();
    let mut seen: Vec<(usize, Area)> = Vec::new();
    for (id, ks) in &meta.keyslots {
        let area = ks.area();
        let what = format!("keyslot {id}");
        if area.size == 0 {
            return Err(Error::corrupt(format!("{what}: area size is 0")));
        }
        let area_end = area.offset.checked_add(area.size).ok_or_else(|| {
            Error::corrupt(format!("{what}: area offset + size overflows 64 bits"))
        })?;
        if area.offset < start || area_end > end {
            return Err(Error::corrupt(format!(
                "{what}: area [{}, {area_end}) lies outside the keyslots area [{start}, {end})",
                area.offset
            )));
        }
        for (other, o) in &seen {
            if area.offset < o.offset + o.size && o.offset < area_end {
                return Err(Error::corrupt(format!(
                    "{what}: area overlaps the area of keyslot {other}"
                )));
            }
        }
        seen.push((*id, area));
    }
    Ok(())
}

fn check_digests(meta: &Metadata) -> Result<()> {
    for (id, digest) in &meta.digests {
        let what = format!("digest {id}");
        // Looked up by canonical name, as cryptsetup looks them up.
        for k in digest.keyslots() {
            if !meta.keyslots.contains_key(&k.0) || !meta.reachable(Section::Keyslots, k.0) {
                return Err(Error::corrupt(format!("{what} refers to missing keyslot {}", k.0)));
            }
        }
        for s in digest.segments() {
            if !meta.segments.contains_key(&s.0) || !meta.reachable(Section::Segments, s.0) {
                return Err(Error::corrupt(format!("{what} refers to missing segment {}", s.0)));
            }
        }
    }
    for (id, ks) in &meta.keyslots {
        if let Keyslot::Luks2(_) = ks {
            let count =
                meta.digests.values().filter(|d| d.keyslots().iter().any(|k| k.0 == *id)).count();
            if count != 1 {
                return Err(Error::corrupt(format!(
                    "keyslot {id} is assigned to {count} digests (exactly 1 required)"
                )));
            }
        }
    }
    Ok(())
}

fn is_backup(segment: &SegmentJson) -> bool {
    segment.flags().iter().any(|f| f.starts_with("backup-"))
}

fn check_segments(meta: &Metadata) -> Result<u64> {
    if meta.segments.is_empty() {
        return Err(Error::corrupt("the segments section is empty"));
    }
    let mut regular: Vec<(usize, u64, Option<u64>)> = Vec::new();
    let mut min_offset: Option<u64> = None;
    let mut first_backup: Option<usize> = None;
    for (index, (id, segment)) in meta.segments.iter().enumerate() {
        let what = format!("segment {id}");
        if *id != index {
            return Err(Error::corrupt(format!("segment ids have a gap before segment {id}")));
        }
        let offset = segment.offset();
        if offset % 512 != 0 {
            return Err(Error::corrupt(format!(
                "{what}: offset {offset} is not a multiple of 512"
            )));
        }
        let size = match segment.size() {
            SizeField::Dynamic => None,
            SizeField::Bytes(size) => {
                if size % 512 != 0 {
                    return Err(Error::corrupt(format!(
                        "{what}: size {size} is not a multiple of 512"
                    )));
                }
                Some(size)
            }
        };
        if let SegmentJson::Crypt(crypt) = segment {
            let sector = crypt.sector_size;
            if sector == 0 || sector % 512 != 0 {
                return Err(Error::corrupt(format!(
                    "{what}: sector size {sector} is not a multiple of 512"
                )));
            }
            if size.is_some_and(|s| s % u64::from(sector) != 0) {
                return Err(Error::corrupt(format!(
                    "{what}: size is not a multiple of its {sector}-byte sectors"
                )));
            }
            if meta.digest_of_segment(*id).is_none() {
                return Err(Error::corrupt(format!("{what} has no digest")));
            }
        }
        // As cryptsetup: the smallest offset of the regular segments, 0
        // (a detached header) when any of them starts at 0.
        if is_backup(segment) {
            first_backup.get_or_insert(*id);
        } else if let Some(backup) = first_backup {
            return Err(Error::corrupt(format!(
                "{what}: a regular segment follows backup segment {backup}"
            )));
        }
        if !is_backup(segment) {
            min_offset = Some(min_offset.map_or(offset, |m| m.min(offset)));
            regular.push((*id, offset, size));
        }
    }
    for (i, (id, offset, size)) in regular.iter().enumerate() {
        if size.is_none() && i + 1 != regular.len() {
            return Err(Error::corrupt(format!(
                "segment {id}: only the last segment may have a dynamic size"
            )));
        }
        for (other, o_offset, o_size) in &regular {
            if other == id {
                continue;
            }
            let inside =
                *offset >= *o_offset && o_size.is_none_or(|s| *offset < o_offset.saturating_add(s));
            if inside {
                return Err(Error::corrupt(format!("segment {id} overlaps segment {other}")));
            }
        }
    }
    if first_backup == Some(0) {
        return Err(Error::corrupt("segment 0 is a backup segment: there is no regular segment"));
    }
    Ok(min_offset.unwrap_or(0))
}

fn check_tokens(meta: &Metadata) -> Result<()> {
    for (id, token) in &meta.tokens {
        super::token::check_token(token, meta, &format!("token {id}"))
            .map_err(|e| Error::corrupt(strip_prefix(&e)))?;
    }
    Ok(())
}

/// cryptsetup's name test for online reencryption requirement flags.
fn is_reencrypt_flag(flag: &str) -> bool {
    flag == "online-reencrypt"
        || flag
            .strip_prefix("online-reencrypt-v")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
}

/// At most one online-reencryption requirement, and it comes with exactly
/// one `reencrypt` keyslot (and the keyslot with the requirement).
fn check_reencryption(meta: &Metadata) -> Result<()> {
    let flags = meta.mandatory_requirements().into_iter().filter(|f| is_reencrypt_flag(f)).count();
    if flags > 1 {
        return Err(Error::corrupt("config requirements list several online-reencrypt flags"));
    }
    let slots = meta.keyslots.values().filter(|k| k.kind() == "reencrypt").count();
    if slots > 1 {
        return Err(Error::corrupt("the header has several reencrypt keyslots"));
    }
    if (flags == 1) != (slots == 1) {
        return Err(Error::corrupt(
            "an online-reencrypt requirement and a reencrypt keyslot must come together",
        ));
    }
    Ok(())
}

/// Validates metadata read from (or about to be written to) a header copy
/// of `hdr_size` bytes.
pub(crate) fn validate(meta: &Metadata, hdr_size: u64) -> Result<Layout> {
    let json_size = meta.config.json_size.0;
    if json_size.checked_add(BIN_SIZE as u64) != Some(hdr_size) {
        return Err(Error::corrupt(format!(
            "config json_size {json_size} does not match the binary header size {hdr_size}"
        )));
    }
    let keyslots_size = meta.config.keyslots_size.0;
    if keyslots_size % 4096 != 0 || keyslots_size > MAX_KEYSLOTS_SIZE {
        return Err(Error::corrupt(format!(
            "config keyslots_size {keyslots_size} is not a multiple of 4096 up to {MAX_KEYSLOTS_SIZE}"
        )));
    }
    let layout = Layout { hdr_size, keyslots_size };
    check_reencryption(meta)?;
    for (id, ks) in &meta.keyslots {
        match ks {
            Keyslot::Luks2(ks) => validate_luks2_keyslot(*id, ks)?,
            Keyslot::Other { .. } => {}
        }
    }
    check_areas(meta, &layout)?;
    check_digests(meta)?;
    let min_offset = check_segments(meta)?;
    if min_offset != 0 && min_offset < layout.metadata_end() {
        return Err(Error::corrupt(format!(
            "data offset {min_offset} lies inside the header and keyslots area (ends at {})",
            layout.metadata_end()
        )));
    }
    check_tokens(meta)?;
    Ok(layout)
}
