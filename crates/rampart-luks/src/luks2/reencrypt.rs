//! LUKS2 reencryption metadata (the on-disk format's section 4.9, as
//! cryptsetup 2.6 writes it): the `reencrypt` keyslot and its resilience
//! area, the segments of a volume part re-encrypted (`in-reencryption`,
//! `backup-previous`, `backup-final`), the `online-reencrypt-v2`
//! requirement, and the digest that protects them.
//!
//! Only metadata lives here; the data is moved by rampart-volume's engine,
//! which calls [`super::Luks2::reencrypt_checkpoint`] around each hotzone.
//!
//! Forward reencryption of the whole data area goes through these states,
//! each one header write:
//!
//! * clean, nothing done: `0` old (dynamic), backups;
//! * hot: `0` new `[0, done)`, `1` new flagged `in-reencryption`
//!   `[done, done+len)` (bound to both digests), `2` old (dynamic), backups
//!   — written after the resilience data is in the area and synced;
//! * clean again: `0` new `[0, done+len)`, `1` old (dynamic), backups;
//! * finished: `0` new (dynamic); the old keyslots, digest, backups,
//!   requirement and reencrypt keyslot are gone.

use rampart_crypto::{HashAlg, SecretBytes};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::json::{
    shorten, CryptSegment, IdRef, Keyslot, Metadata, SegmentJson, SizeField, U64Str,
};
use crate::cipher::DataCipher;
use crate::{Error, Result};

/// The requirement cryptsetup 2.6 writes for a reencryption in progress.
pub const REQUIREMENT_V2: &str = "online-reencrypt-v2";

/// What the reencryption does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReencryptMode {
    /// From one volume key to another.
    Reencrypt,
    /// From plaintext.
    Encrypt,
    /// To plaintext.
    Decrypt,
}

impl ReencryptMode {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Reencrypt => "reencrypt",
            Self::Encrypt => "encrypt",
            Self::Decrypt => "decrypt",
        }
    }
}

/// Which end the reencryption starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReencryptDirection {
    Forward,
    Backward,
}

impl ReencryptDirection {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Forward => "forward",
            Self::Backward => "backward",
        }
    }
}

/// How a hotzone interrupted by a crash is repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resilience {
    /// Nothing: the header changes only when the run ends.
    None,
    /// The hotzone's old ciphertext is copied into the area first.
    Journal,
    /// A hash of each `block_size` block of old ciphertext is kept in the
    /// area; after a crash, blocks still matching are re-encrypted.
    Checksum { hash: HashAlg, block_size: u32 },
    /// Data moves by `shift` bytes (encryption with a data shift); other
    /// datashift variants are reported with their area type.
    Datashift { kind: String, shift: u64 },
}

impl Resilience {
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::None => "none",
            Self::Journal => "journal",
            Self::Checksum { .. } => "checksum",
            Self::Datashift { kind, .. } => kind,
        }
    }
}

/// One side of a reencryption: where and how the data is encrypted.
#[derive(Debug, Clone)]
pub struct ReencryptSide {
    pub cipher: DataCipher,
    pub key_bytes: usize,
    pub sector_size: u32,
    /// Data offset on the device, in bytes.
    pub offset: u64,
    /// The segment's IV tweak (512-byte units).
    pub iv_tweak: u64,
}

/// The state of a reencryption recorded in a LUKS2 header.
#[derive(Debug, Clone)]
pub struct ReencryptState {
    pub mode: ReencryptMode,
    pub direction: ReencryptDirection,
    pub resilience: Resilience,
    /// The reencrypt keyslot and its area.
    pub keyslot: usize,
    pub area_offset: u64,
    pub area_size: u64,
    pub old: ReencryptSide,
    pub new: ReencryptSide,
    /// Bytes of the data area (from its start) already under the new key.
    pub done: u64,
    /// All data is under the new key; only the cleanup of the metadata is
    /// left (`done` is then 0: the data size is the device's).
    pub complete: bool,
    /// The hotzone being re-encrypted when the process stopped (bytes from
    /// the data start, length): it needs recovery before anything else.
    pub hotzone: Option<(u64, u64)>,
    /// The data area size when the segments are not dynamic.
    pub fixed_size: Option<u64>,
    /// The keyslots bound to the old key (removed at the end).
    pub old_keyslots: Vec<usize>,
    /// The keyslots bound to the new key.
    pub new_keyslots: Vec<usize>,
}

impl ReencryptState {
    /// Whether this implementation can run (resume, recover) it:
    /// forward re-encryption from one key to another with resilience none,
    /// journal or checksum.
    pub fn check_supported(&self) -> Result<()> {
        if self.mode != ReencryptMode::Reencrypt {
            return Err(Error::UnsupportedCipher(format!(
                "the header records a {} operation; Rampart resumes re-encryption (mode reencrypt) only",
                self.mode.name()
            )));
        }
        if self.direction != ReencryptDirection::Forward {
            return Err(Error::UnsupportedCipher(
                "the header records a backward reencryption; Rampart resumes forward ones only"
                    .into(),
            ));
        }
        if let Resilience::Datashift { kind, .. } = &self.resilience {
            return Err(Error::UnsupportedCipher(format!(
                "resilience mode {kind} (data shift) is not one Rampart resumes"
            )));
        }
        if self.old.offset != self.new.offset {
            return Err(Error::UnsupportedCipher(
                "the old and new data offsets differ (a data shift)".into(),
            ));
        }
        Ok(())
    }
}

/// The `reencrypt` keyslot, with every field cryptsetup may add kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReencryptKeyslot {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) key_size: u32,
    pub(crate) mode: String,
    pub(crate) direction: String,
    pub(crate) area: ReencryptArea,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReencryptArea {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) offset: U64Str,
    pub(crate) size: U64Str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sector_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shift_size: Option<U64Str>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// The id and typed form of the `reencrypt` keyslot, if there is one.
pub(crate) fn reencrypt_keyslot(meta: &Metadata) -> Result<Option<(usize, ReencryptKeyslot)>> {
    for (id, ks) in &meta.keyslots {
        if let Keyslot::Other { kind, raw, .. } = ks {
            if kind == "reencrypt" {
                let typed: ReencryptKeyslot = serde_json::from_value(raw.clone())
                    .map_err(|e| Error::corrupt(format!("reencrypt keyslot {id}: {e}")))?;
                return Ok(Some((*id, typed)));
            }
        }
    }
    Ok(None)
}

/// The new `reencrypt` keyslot JSON, as cryptsetup 2.6 writes it.
pub(crate) fn new_keyslot(area_offset: u64, area_size: u64, resilience: &Resilience) -> Value {
    let mut area = Map::new();
    area.insert("offset".into(), Value::String(area_offset.to_string()));
    area.insert("size".into(), Value::String(area_size.to_string()));
    area.insert("type".into(), Value::String(resilience.name().into()));
    if let Resilience::Checksum { hash, block_size } = resilience {
        area.insert("hash".into(), Value::String(hash.name().into()));
        area.insert("sector_size".into(), Value::from(*block_size));
    }
    let mut ks = Map::new();
    ks.insert("area".into(), Value::Object(area));
    ks.insert("type".into(), Value::String("reencrypt".into()));
    ks.insert("key_size".into(), Value::from(1));
    ks.insert("mode".into(), Value::String("reencrypt".into()));
    ks.insert("direction".into(), Value::String("forward".into()));
    ks.insert("priority".into(), Value::from(0));
    Value::Object(ks)
}

fn has_flag(seg: &SegmentJson, flag: &str) -> bool {
    seg.flags().iter().any(|f| f == flag)
}

/// The id of the segment carrying `flag`.
pub(crate) fn segment_by_flag(meta: &Metadata, flag: &str) -> Option<usize> {
    meta.segments.iter().find(|(_, s)| has_flag(s, flag)).map(|(id, _)| *id)
}

fn crypt_of<'a>(meta: &'a Metadata, id: usize, what: &str) -> Result<&'a CryptSegment> {
    match meta.segments.get(&id) {
        Some(SegmentJson::Crypt(c)) => Ok(c),
        Some(other) => Err(Error::UnsupportedCipher(format!(
            "the {what} segment has type \"{}\" (a plaintext side: encryption or decryption)",
            shorten(other.kind())
        ))),
        None => Err(Error::corrupt(format!("the {what} segment is missing"))),
    }
}

fn side(meta: &Metadata, id: usize, what: &str) -> Result<ReencryptSide> {
    let seg = crypt_of(meta, id, what)?;
    if !matches!(seg.sector_size, 512 | 1024 | 2048 | 4096) {
        return Err(Error::UnsupportedCipher(format!(
            "the {what} segment has sector size {}",
            seg.sector_size
        )));
    }
    let cipher = DataCipher::from_spec(&seg.encryption)?;
    let key_bytes = super::segment::volume_key_size(meta, id)?;
    cipher.check_key_bytes(key_bytes)?;
    Ok(ReencryptSide {
        cipher,
        key_bytes,
        sector_size: seg.sector_size,
        offset: seg.offset.0,
        iv_tweak: seg.iv_tweak.0,
    })
}

fn keyslots_of_digest(meta: &Metadata, digest: usize) -> Vec<usize> {
    meta.digests
        .get(&digest)
        .map(|d| d.keyslots().iter().map(|k| k.0).collect())
        .unwrap_or_default()
}

/// The reencryption recorded in `meta`, if any.
pub(crate) fn state(meta: &Metadata) -> Result<Option<ReencryptState>> {
    let reqs = meta.mandatory_requirements();
    let Some((keyslot, ks)) = reencrypt_keyslot(meta)? else {
        return Ok(None);
    };
    if !reqs.iter().any(|r| r == REQUIREMENT_V2) {
        return Err(Error::UnsupportedCipher(format!(
            "the reencryption metadata carries the requirement {:?}, not {REQUIREMENT_V2} (run cryptsetup repair first)",
            reqs
        )));
    }
    let mode = match ks.mode.as_str() {
        "reencrypt" => ReencryptMode::Reencrypt,
        "encrypt" => ReencryptMode::Encrypt,
        "decrypt" => ReencryptMode::Decrypt,
        other => {
            return Err(Error::corrupt(format!("reencrypt keyslot: mode \"{}\"", shorten(other))))
        }
    };
    let direction = match ks.direction.as_str() {
        "forward" => ReencryptDirection::Forward,
        "backward" => ReencryptDirection::Backward,
        other => {
            return Err(Error::corrupt(format!(
                "reencrypt keyslot: direction \"{}\"",
                shorten(other)
            )))
        }
    };
    let resilience = match ks.area.kind.as_str() {
        "none" => Resilience::None,
        "journal" => Resilience::Journal,
        "checksum" => {
            let hash_name = ks.area.hash.clone().unwrap_or_default();
            let hash = HashAlg::from_name(&hash_name).ok_or_else(|| {
                Error::UnsupportedCipher(format!(
                    "reencrypt keyslot: checksum hash \"{}\"",
                    shorten(&hash_name)
                ))
            })?;
            let block_size = ks.area.sector_size.unwrap_or(0);
            if block_size < 512 || !block_size.is_power_of_two() || block_size > (1 << 20) {
                return Err(Error::corrupt(format!(
                    "reencrypt keyslot: checksum sector size {block_size}"
                )));
            }
            Resilience::Checksum { hash, block_size }
        }
        kind @ ("datashift" | "datashift-journal" | "datashift-checksum") => {
            Resilience::Datashift {
                kind: kind.to_owned(),
                shift: ks.area.shift_size.map_or(0, |s| s.0),
            }
        }
        other => {
            return Err(Error::corrupt(format!(
                "reencrypt keyslot: area type \"{}\"",
                shorten(other)
            )))
        }
    };
    let prev = segment_by_flag(meta, "backup-previous")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-previous segment"))?;
    let fin = segment_by_flag(meta, "backup-final")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-final segment"))?;
    let old = side(meta, prev, "backup-previous")?;
    let new = side(meta, fin, "backup-final")?;
    let digest_old = meta.digest_of_segment(prev).map(|(id, _)| id);
    let digest_new = meta.digest_of_segment(fin).map(|(id, _)| id);
    let fixed_size = match meta.segments.get(&fin).map(SegmentJson::size) {
        Some(SizeField::Bytes(n)) => Some(n),
        _ => None,
    };
    let regular: Vec<(usize, &SegmentJson)> = meta
        .segments
        .iter()
        .filter(|(_, s)| !s.flags().iter().any(|f| f.starts_with("backup-")))
        .map(|(id, s)| (*id, s))
        .collect();
    let hot = regular.iter().find(|(_, s)| has_flag(s, "in-reencryption"));
    let mut hotzone = None;
    let mut complete = false;
    let done = if let Some((_, seg)) = hot {
        let start = seg
            .offset()
            .checked_sub(new.offset)
            .ok_or_else(|| Error::corrupt("the segment in reencryption starts before the data"))?;
        let len = match seg.size() {
            SizeField::Bytes(n) => n,
            SizeField::Dynamic => {
                return Err(Error::corrupt("the segment in reencryption has no fixed size"))
            }
        };
        hotzone = Some((start, len));
        start
    } else {
        match regular.as_slice() {
            [(id, _)] => {
                // One segment: all old (nothing done) or all new (done,
                // only the cleanup is left).
                let d = meta.digest_of_segment(*id).map(|(d, _)| d);
                complete = d.is_some() && d == digest_new && digest_new != digest_old;
                0
            }
            [(_, first), _] => match first.size() {
                SizeField::Bytes(n) => n,
                SizeField::Dynamic => {
                    return Err(Error::corrupt("the first of two segments has a dynamic size"))
                }
            },
            _ => return Err(Error::corrupt("reencryption: unexpected segment layout")),
        }
    };
    let area = ks.area.clone();
    Ok(Some(ReencryptState {
        mode,
        direction,
        resilience,
        keyslot,
        area_offset: area.offset.0,
        area_size: area.size.0,
        old,
        new,
        done,
        complete,
        hotzone,
        fixed_size,
        old_keyslots: digest_old.map(|d| keyslots_of_digest(meta, d)).unwrap_or_default(),
        new_keyslots: digest_new.map(|d| keyslots_of_digest(meta, d)).unwrap_or_default(),
    }))
}

/// A crypt segment of one side covering `[start, start+len)` of the data
/// area (`None`: to the end).
fn side_segment(
    backup: &SegmentJson,
    start: u64,
    len: Option<u64>,
    in_reencryption: bool,
) -> Result<SegmentJson> {
    let SegmentJson::Crypt(b) = backup else {
        return Err(Error::UnsupportedCipher("a plaintext backup segment".into()));
    };
    Ok(SegmentJson::Crypt(Box::new(CryptSegment {
        kind: "crypt".into(),
        offset: U64Str(b.offset.0 + start),
        size: len.map_or(SizeField::Dynamic, SizeField::Bytes),
        iv_tweak: U64Str(b.iv_tweak.0 + start / 512),
        encryption: b.encryption.clone(),
        sector_size: b.sector_size,
        integrity: None,
        flags: in_reencryption.then(|| vec!["in-reencryption".to_owned()]),
        extra: Map::new(),
    })))
}

/// Replaces the segments of `meta` with the layout of forward reencryption
/// having `done` bytes under the new key and, when `hot` is given, the
/// hotzone `[done, done+hot)` in progress; the backup segments follow, and
/// every digest's segment list is rebuilt as cryptsetup assigns them.
pub(crate) fn set_segments(
    meta: &mut Metadata,
    size: u64,
    done: u64,
    hot: Option<u64>,
) -> Result<()> {
    let prev_id = segment_by_flag(meta, "backup-previous")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-previous segment"))?;
    let fin_id = segment_by_flag(meta, "backup-final")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-final segment"))?;
    let digest_old = meta
        .digest_of_segment(prev_id)
        .map(|(id, _)| id)
        .ok_or_else(|| Error::corrupt("the backup-previous segment has no digest"))?;
    let digest_new = meta
        .digest_of_segment(fin_id)
        .map(|(id, _)| id)
        .ok_or_else(|| Error::corrupt("the backup-final segment has no digest"))?;
    // Both ids were just found in `meta.segments`: indexing cannot fail.
    let prev = meta.segments[&prev_id].clone();
    let fin = meta.segments[&fin_id].clone();
    let fixed = matches!(fin.size(), SizeField::Bytes(_));
    let tail_len = |from: u64| if fixed { Some(size - from) } else { None };

    // (segment, digests bound to it)
    let mut list: Vec<(SegmentJson, Vec<usize>)> = Vec::new();
    match hot {
        Some(len) => {
            if done > 0 {
                list.push((side_segment(&fin, 0, Some(done), false)?, vec![digest_new]));
            }
            list.push((side_segment(&fin, done, Some(len), true)?, vec![digest_new, digest_old]));
            if done + len < size {
                list.push((
                    side_segment(&prev, done + len, tail_len(done + len), false)?,
                    vec![digest_old],
                ));
            }
        }
        None if done == 0 => {
            list.push((side_segment(&prev, 0, tail_len(0), false)?, vec![digest_old]));
        }
        None if done >= size => {
            list.push((side_segment(&fin, 0, None, false)?, vec![digest_new]));
        }
        None => {
            list.push((side_segment(&fin, 0, Some(done), false)?, vec![digest_new]));
            list.push((side_segment(&prev, done, tail_len(done), false)?, vec![digest_old]));
        }
    }
    list.push((prev, vec![digest_old]));
    list.push((fin, vec![digest_new]));
    // Any other backup (a moved segment) keeps its place at the end.
    let others: Vec<SegmentJson> = meta
        .segments
        .iter()
        .filter(|(id, s)| {
            **id != prev_id && **id != fin_id && s.flags().iter().any(|f| f.starts_with("backup-"))
        })
        .map(|(_, s)| s.clone())
        .collect();
    for digest in meta.digests.values_mut() {
        digest.set_segments(Vec::new());
    }
    meta.segments.clear();
    let mut id = 0;
    for (seg, digests) in list {
        for d in digests {
            if let Some(digest) = meta.digests.get_mut(&d) {
                let mut segs = digest.segments().to_vec();
                segs.push(IdRef(id));
                digest.set_segments(segs);
            }
        }
        meta.segments.insert(id, seg);
        id += 1;
    }
    for seg in others {
        meta.segments.insert(id, seg);
        id += 1;
    }
    Ok(())
}

/// The bytes the reencryption digest covers (the format's figure 6):
/// `v2`, the old and the new volume key, the reencrypt keyslot's
/// parameters and the backup segments, integers big-endian.
pub(crate) fn verification_data(
    meta: &Metadata,
    old_key: Option<&SecretBytes>,
    new_key: Option<&SecretBytes>,
) -> Result<SecretBytes> {
    let (_, ks) = reencrypt_keyslot(meta)?.ok_or_else(|| Error::corrupt("no reencrypt keyslot"))?;
    let mut out = Vec::new();
    out.extend_from_slice(b"v2");
    for key in [old_key, new_key].into_iter().flatten() {
        out.extend_from_slice(key.expose());
    }
    let str_field = |out: &mut Vec<u8>, s: &str| -> Result<()> {
        if s.is_empty() || s.len() > 64 {
            return Err(Error::corrupt(
                "reencryption metadata: a string field is empty or too long",
            ));
        }
        out.extend_from_slice(s.as_bytes());
        Ok(())
    };
    str_field(&mut out, &ks.mode)?;
    str_field(&mut out, &ks.direction)?;
    str_field(&mut out, &ks.area.kind)?;
    out.extend_from_slice(&ks.area.offset.0.to_be_bytes());
    out.extend_from_slice(&ks.area.size.0.to_be_bytes());
    let hash_and_sector = |out: &mut Vec<u8>| -> Result<()> {
        let hash = ks.area.hash.as_deref().unwrap_or("");
        str_field(out, hash)?;
        let ss =
            ks.area.sector_size.ok_or_else(|| Error::corrupt("checksum area: no sector_size"))?;
        out.extend_from_slice(&ss.to_be_bytes());
        Ok(())
    };
    let shift = |out: &mut Vec<u8>| -> Result<()> {
        let s =
            ks.area.shift_size.ok_or_else(|| Error::corrupt("datashift area: no shift_size"))?;
        out.extend_from_slice(&s.0.to_be_bytes());
        Ok(())
    };
    match ks.area.kind.as_str() {
        "datashift-checksum" => {
            hash_and_sector(&mut out)?;
            shift(&mut out)?;
        }
        "datashift" | "datashift-journal" => shift(&mut out)?,
        "checksum" => hash_and_sector(&mut out)?,
        _ => {}
    }
    for flag in ["backup-previous", "backup-final", "backup-moved-segment"] {
        let Some(id) = segment_by_flag(meta, flag) else {
            if flag == "backup-moved-segment" {
                continue;
            }
            return Err(Error::corrupt(format!("reencryption: no {flag} segment")));
        };
        // `id` was just found in `meta.segments`.
        let seg = &meta.segments[&id];
        str_field(&mut out, seg.kind())?;
        out.extend_from_slice(&seg.offset().to_be_bytes());
        match seg.size() {
            SizeField::Dynamic => out.extend_from_slice(b"dynamic"),
            SizeField::Bytes(n) => out.extend_from_slice(&n.to_be_bytes()),
        }
        match seg {
            SegmentJson::Crypt(c) => {
                out.extend_from_slice(&c.iv_tweak.0.to_be_bytes());
                str_field(&mut out, &c.encryption)?;
                out.extend_from_slice(&c.sector_size.to_be_bytes());
            }
            SegmentJson::Other { kind, .. } if kind == "linear" => {}
            SegmentJson::Other { kind, .. } => {
                return Err(Error::UnsupportedCipher(format!(
                    "a {flag} segment of type \"{}\"",
                    shorten(kind)
                )))
            }
        }
    }
    Ok(SecretBytes::new(out))
}
