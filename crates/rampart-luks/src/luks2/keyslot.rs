//! LUKS2 `luks2` keyslots: opening one with a passphrase, storing a key in
//! a new one, and allocating its binary area; and the header operations on
//! keyslots (unlocking the volume key in cryptsetup's keyslot order,
//! adding and removing a keyslot).

use rampart_crypto::{fill_random, HashAlg, SecretBytes};

use super::digest;
use super::disk_metadata::encode_area;
use super::integrity::SegmentIntegrity;
use super::json::{self, DigestJson, IdRef};
use super::json::{b64_decode, Af, Area, Kdf, Keyslot, Luks2Keyslot, Metadata, RawArea, U64Str};
use super::layout::Layout;
use super::segment;
use super::token;
use super::validate::{hash_alg, kdf_params, SALT_LEN};
use super::Luks2;
use crate::cipher::{crypt_material, DataCipher};
use crate::io::{read_exact, MetadataIo};
use crate::pbkdf::{pbkdf_for_time, PbkdfChoice};
use crate::pbkdf::{KdfParams, PbkdfKind};
use crate::{af, Error, Result};

/// Recovers the key stored in keyslot `id` with `passphrase`. The result is
/// a candidate: the caller checks it against the digest.
pub(crate) fn open(
    io: &dyn MetadataIo,
    id: usize,
    ks: &Luks2Keyslot,
    passphrase: &[u8],
) -> Result<SecretBytes> {
    let what = format!("keyslot {id}");
    let cipher = DataCipher::from_spec(&ks.area.encryption)
        .map_err(|e| Error::UnsupportedCipher(format!("{what}: {}", unsupported_msg(&e))))?;
    let area_key = usize::try_from(ks.area.key_size)
        .ok()
        .filter(|&k| k > 0 && k <= af::MAX_KEY_BYTES)
        .ok_or_else(|| {
            Error::UnsupportedCipher(format!("{what}: area key size {} bytes", ks.area.key_size))
        })?;
    cipher.check_key_bytes(area_key)?;
    let af_hash = hash_alg(&ks.af.hash, &format!("{what} anti-forensic splitter"))?;
    let (params, salt) = kdf_params(&ks.kdf, &what)?;
    let key_len = ks.key_size as usize;
    if key_len == 0 || key_len > af::MAX_KEY_BYTES {
        return Err(Error::UnsupportedCipher(format!(
            "{what}: key size {key_len} bytes is outside 1..={}",
            af::MAX_KEY_BYTES
        )));
    }
    // cryptsetup reads the stripe count but always splits into 4000
    // stripes; keyslots open as they open there.
    let stripes = af::STRIPES;
    let material_len = af::split_sectors_bytes(key_len, stripes)
        .map_err(|e| Error::UnsupportedCipher(format!("{what}: {}", unsupported_msg(&e))))?;
    let derived = params.derive(passphrase, &salt, area_key)?;
    let mut material = SecretBytes::zeroed(material_len);
    read_exact(io, ks.area.offset.0, material.expose_mut(), &format!("{what} area"))?;
    crypt_material(cipher, derived.expose(), material.expose_mut(), false)?;
    af::merge(material.expose(), key_len, stripes, af_hash)
}

/// Why keyslot `id` cannot be opened by any LUKS2 implementation
/// (cryptsetup's keyslot handler fails on it with an error other than a
/// wrong passphrase, which ends its search), if it cannot: an unknown KDF,
/// costs below 1, a salt that is not 32 bytes of base64, a key size of 0.
pub(crate) fn unusable_anywhere(id: usize, ks: &Luks2Keyslot) -> Option<Error> {
    let what = format!("keyslot {id}");
    let costs: &[(&str, i64)] = match &ks.kdf {
        Kdf::Pbkdf2 { iterations, .. } => &[("PBKDF2 iterations", *iterations)],
        Kdf::Argon2i { time, memory, cpus, .. } | Kdf::Argon2id { time, memory, cpus, .. } => {
            &[("Argon2 time cost", *time), ("Argon2 memory", *memory), ("Argon2 threads", *cpus)]
        }
        Kdf::Other => {
            return Some(Error::UnsupportedCipher(format!(
                "{what}: its KDF type is not pbkdf2, argon2i or argon2id"
            )))
        }
    };
    if let Some((name, value)) = costs.iter().find(|(_, v)| *v < 1) {
        return Some(Error::UnsupportedCipher(format!("{what}: {name} {value} is below 1")));
    }
    let salt = match &ks.kdf {
        Kdf::Pbkdf2 { salt, .. } | Kdf::Argon2i { salt, .. } | Kdf::Argon2id { salt, .. } => salt,
        Kdf::Other => return None,
    };
    if b64_decode(salt, "").map_or(true, |s| s.len() != SALT_LEN) {
        return Some(Error::corrupt(format!("{what}: the KDF salt is not 32 bytes of base64")));
    }
    if ks.key_size == 0 || ks.area.key_size < 1 {
        return Some(Error::UnsupportedCipher(format!("{what}: a key size of 0")));
    }
    None
}

fn unsupported_msg(e: &Error) -> String {
    match e {
        Error::UnsupportedCipher(msg) => msg.clone(),
        other => other.to_string(),
    }
}

/// The area size cryptsetup allocates for a key: the split material rounded
/// up to 4096 bytes.
pub(crate) fn area_size_for(key_bytes: usize) -> Result<u64> {
    let material = af::split_sectors_bytes(key_bytes, af::STRIPES)?;
    Ok((material as u64).div_ceil(4096) * 4096)
}

/// The first gap in the keyslots area that holds an area for a key of
/// `key_bytes` (cryptsetup's first-fit allocation).
pub(crate) fn find_area(meta: &Metadata, layout: &Layout, key_bytes: usize) -> Result<Area> {
    let size = area_size_for(key_bytes)?;
    let mut used: Vec<Area> = meta.keyslots.values().map(Keyslot::area).collect();
    used.sort_by_key(|a| a.offset);
    let mut offset = layout.keyslots_offset();
    for area in used {
        if offset.checked_add(size).is_some_and(|end| end <= area.offset) {
            break;
        }
        // Validated areas lie inside the keyslots area: no overflow.
        offset = offset.max(area.offset + area.size);
    }
    match offset.checked_add(size) {
        Some(end) if end <= layout.metadata_end() => Ok(Area { offset, size }),
        _ => Err(Error::NoSpace(format!(
            "the keyslots area ({} bytes) has no free {size}-byte area for another keyslot",
            layout.keyslots_size
        ))),
    }
}

/// The lowest keyslot id not in use.
pub(crate) fn free_id(meta: &Metadata) -> Option<usize> {
    (0..=super::json::MAX_ID).find(|id| !meta.keyslots.contains_key(id))
}

/// The JSON of a new keyslot holding a `key_bytes` key in `area`, encrypted
/// with `cipher` under a key derived with `params`.
pub(crate) fn new_keyslot(
    key_bytes: usize,
    (cipher, area_key_bytes): (DataCipher, usize),
    area: Area,
    params: &KdfParams,
    af_hash: HashAlg,
) -> Result<Luks2Keyslot> {
    let mut salt = [0u8; SALT_LEN];
    fill_random(&mut salt)?;
    let salt = super::json::b64_encode(&salt);
    let kdf = match *params {
        KdfParams::Pbkdf2 { hash, iterations } => {
            Kdf::Pbkdf2 { hash: hash.name().into(), iterations: iterations.into(), salt }
        }
        KdfParams::Argon2 { kind: PbkdfKind::Argon2i, time, memory_kib, parallel } => {
            Kdf::Argon2i {
                time: time.into(),
                memory: memory_kib.into(),
                cpus: parallel.into(),
                salt,
            }
        }
        KdfParams::Argon2 { time, memory_kib, parallel, .. } => Kdf::Argon2id {
            time: time.into(),
            memory: memory_kib.into(),
            cpus: parallel.into(),
            salt,
        },
    };
    let key_size = u32::try_from(key_bytes).map_err(|_| Error::invalid("key too large"))?;
    let area_key_size =
        i64::try_from(area_key_bytes).map_err(|_| Error::invalid("key too large"))?;
    Ok(Luks2Keyslot {
        kind: "luks2".into(),
        key_size,
        af: Af {
            kind: "luks1".into(),
            stripes: i64::from(af::STRIPES),
            hash: af_hash.name().into(),
            extra: serde_json::Map::new(),
        },
        area: RawArea {
            kind: "raw".into(),
            offset: U64Str(area.offset),
            size: U64Str(area.size),
            encryption: cipher.spec().into(),
            key_size: area_key_size,
            extra: serde_json::Map::new(),
        },
        kdf,
        priority: None,
        extra: serde_json::Map::new(),
    })
}

/// How a new keyslot's area is encrypted for a volume key of
/// `volume_key_bytes` (cryptsetup's `crypt_keyslot_get_encryption`): with
/// the data segment's cipher and the volume key's size, except where the
/// segment authenticates (its tags cannot protect a keyslot), which takes
/// cryptsetup's default, AES-256-XTS.
pub(crate) fn area_encryption(
    meta: &Metadata,
    volume_key_bytes: usize,
) -> Result<(DataCipher, usize)> {
    let (id, seg) = segment::data_segment(meta)?;
    match &seg.integrity {
        None => {
            let cipher = DataCipher::from_spec(&seg.encryption)?;
            cipher.check_key_bytes(volume_key_bytes)?;
            Ok((cipher, volume_key_bytes))
        }
        Some(value) => {
            let integrity = SegmentIntegrity::from_json(value, &format!("segment {id}"))?;
            integrity.check_volume_key(&seg.encryption, volume_key_bytes)?;
            Ok((DataCipher::AesXtsPlain64, 64))
        }
    }
}

/// Splits, encrypts and writes `key` into the area of keyslot `ks`, then
/// syncs. The header is not touched.
pub(crate) fn store(
    io: &dyn MetadataIo,
    ks: &Luks2Keyslot,
    key: &SecretBytes,
    passphrase: &[u8],
) -> Result<()> {
    let cipher = DataCipher::from_spec(&ks.area.encryption)?;
    let af_hash = hash_alg(&ks.af.hash, "new keyslot")?;
    let (params, salt) = kdf_params(&ks.kdf, "new keyslot")?;
    let area_key = usize::try_from(ks.area.key_size)
        .map_err(|_| Error::invalid("new keyslot: invalid area key size"))?;
    let stripes = af::STRIPES;
    let derived = params.derive(passphrase, &salt, area_key)?;
    let mut material = af::split(key.expose(), stripes, af_hash)?;
    crypt_material(cipher, derived.expose(), material.expose_mut(), true)?;
    io.write_at(ks.area.offset.0, material.expose())?;
    io.sync()?;
    Ok(())
}

/// Overwrites `area` with random bytes and syncs.
pub(crate) fn wipe_area(io: &dyn MetadataIo, area: Area) -> Result<()> {
    crate::io::write_random(io, area.offset, area.size)?;
    io.sync()?;
    Ok(())
}

/// The largest free gap of the keyslots area (cryptsetup's
/// `LUKS2_find_area_max_gap`, where the reencrypt keyslot's resilience area
/// goes), rounded to 4096 bytes.
pub(crate) fn find_max_gap(meta: &Metadata, layout: &Layout) -> Result<Area> {
    let mut used: Vec<Area> = meta.keyslots.values().map(Keyslot::area).collect();
    used.sort_by_key(|a| a.offset);
    let mut best = Area { offset: 0, size: 0 };
    let mut offset = layout.keyslots_offset();
    let end = layout.metadata_end();
    for area in used.iter().copied().chain(std::iter::once(Area { offset: end, size: 0 })) {
        let start = offset.div_ceil(4096) * 4096;
        if area.offset > start && area.offset - start > best.size {
            best = Area { offset: start, size: (area.offset - start) / 4096 * 4096 };
        }
        offset = offset.max(area.offset.saturating_add(area.size));
    }
    if best.size == 0 {
        return Err(Error::NoSpace(
            "the keyslots area has no free space for the reencryption resilience area".into(),
        ));
    }
    Ok(best)
}

impl Luks2 {
    pub(crate) fn active_keyslots(&self) -> Vec<usize> {
        self.meta.keyslots.keys().copied().collect()
    }

    pub(crate) fn unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(usize, SecretBytes)> {
        // Testing a passphrase needs no requirement: mapping and writing
        // refuse headers with requirements Rampart does not implement.
        let (digest_id, digest) = self.segment_digest()?;
        let bound: Vec<usize> = digest.keyslots().iter().map(|k| k.0).collect();
        let candidates: Vec<usize> = match slot {
            Some(s) => {
                if !self.meta.keyslots.contains_key(&s) {
                    return Err(Error::invalid(format!("keyslot {s} is not active")));
                }
                if bound.contains(&s) {
                    vec![s]
                } else {
                    Vec::new()
                }
            }
            None => {
                // cryptsetup: 2 preferred, 1 normal, 0 ignored unless asked
                // for; any other value makes the keyslot unusable.
                let priority = |s: &usize| match &self.meta.keyslots.get(s) {
                    Some(Keyslot::Luks2(ks)) => match ks.priority.unwrap_or(1) {
                        p @ 0..=2 => p,
                        _ => 0,
                    },
                    _ => 0,
                };
                let mut list: Vec<usize> =
                    bound.iter().copied().filter(|s| priority(s) > 0).collect();
                list.sort_by_key(|s| (std::cmp::Reverse(priority(s)), *s));
                list
            }
        };
        // As cryptsetup: a wrong passphrase moves on to the next keyslot,
        // and so does a keyslot whose algorithms Rampart lacks (cryptsetup
        // might run them); a keyslot no implementation can use ends the
        // search with its error, as it ends cryptsetup's.
        let mut first_error = None;
        for id in candidates {
            let Some(Keyslot::Luks2(ks)) = self.meta.keyslots.get(&id) else {
                continue;
            };
            if let Some(e) = unusable_anywhere(id, ks) {
                return Err(first_error.unwrap_or(e));
            }
            let candidate = match open(io, id, ks, passphrase) {
                Ok(key) => key,
                Err(e @ Error::Io(_)) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            if digest::verify(digest, digest_id, candidate.expose())? {
                return Ok((id, candidate));
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Err(Error::NoKey),
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
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(volume_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
        let (digest_id, _) = self.segment_digest()?;
        let encryption = area_encryption(&self.meta, volume_key.len())?;
        let id = match slot {
            Some(s) if s > json::MAX_ID => {
                return Err(Error::invalid(format!(
                    "keyslot {s} is out of range (0..={})",
                    json::MAX_ID
                )))
            }
            Some(s) if self.meta.keyslots.contains_key(&s) => {
                return Err(Error::invalid(format!("keyslot {s} is already in use")))
            }
            Some(s) => s,
            None => free_id(&self.meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?,
        };
        let area = find_area(&self.meta, &self.layout, volume_key.len())?;
        let params = pbkdf_for_time(pbkdf, volume_key.len())?;
        let ks = new_keyslot(volume_key.len(), encryption, area, &params, pbkdf.hash)?;
        let mut meta = self.meta.clone();
        meta.keyslots.insert(id, Keyslot::Luks2(Box::new(ks.clone())));
        if let Some(DigestJson::Pbkdf2(d)) = meta.digests.get_mut(&digest_id) {
            // Appended, as cryptsetup does.
            d.keyslots.push(IdRef(id));
        }
        // Check the new header before touching the device.
        encode_area(&meta, self.bin.hdr_size)?;
        store(io, &ks, volume_key, passphrase)?;
        self.update(io, |m| {
            *m = meta;
            Ok(())
        })?;
        Ok(id)
    }

    pub(crate) fn remove_keyslot(&mut self, io: &dyn MetadataIo, slot: usize) -> Result<()> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        let Some(ks) = self.meta.keyslots.get(&slot) else {
            return Err(Error::invalid(format!("keyslot {slot} is not active")));
        };
        let area = ks.area();
        let mut meta = self.meta.clone();
        meta.keyslots.remove(&slot);
        for digest in meta.digests.values_mut() {
            digest.remove_keyslot(slot);
        }
        meta.digests.retain(|_, d| !d.keyslots().is_empty() || !d.segments().is_empty());
        token::unassign_keyslot(&mut meta, slot);
        encode_area(&meta, self.bin.hdr_size)?;
        wipe_area(io, area)?;
        self.update(io, |m| {
            *m = meta;
            Ok(())
        })
    }
}
