//! LUKS2 reencryption metadata (the on-disk format's section 4.9, as
//! cryptsetup 2.6 writes it): the `reencrypt` keyslot and its resilience
//! area, the segments of a volume part re-encrypted (`in-reencryption`,
//! `backup-previous`, `backup-final`), the `online-reencrypt-v2`
//! requirement, and the digest that protects them.
//!
//! Only metadata lives here; the data is moved by rampart-volume's engine,
//! which calls [`super::Luks2::reencrypt_checkpoint`] around each hotzone.
//!
//! Encryption (mode `encrypt`: the old side is plaintext, `linear`
//! segments) and decryption (mode `decrypt`: the new side is plaintext)
//! use the same metadata; backward runs go from the end of the data, and
//! an encryption with a data shift (cryptsetup's `--reduce-device-size`)
//! moves each hotzone up by the shift, its first chunk read from the
//! `backup-moved-segment` copy; with a detached header the shift moves
//! nothing (no moved segment) and the run is laid out as any backward one,
//! in hotzones of the shift. `set_layout` builds each layout as
//! cryptsetup 2.6 does for the mode and direction.
//!
//! Forward re-encryption of the whole data area goes through these states,
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

/// The requirement cryptsetup 2.6 writes for a decryption that moves the
/// data down over an exported attached header (its reencryption digest
/// then starts with `v3`).
pub const REQUIREMENT_V3: &str = "online-reencrypt-v3";

/// Whether `req` is a reencryption requirement Rampart implements.
#[must_use]
pub fn is_reencrypt_requirement(req: &str) -> bool {
    req == REQUIREMENT_V2 || req == REQUIREMENT_V3
}

/// The metadata version of a reencryption requirement (2 or 3).
pub(crate) fn requirement_version(meta: &Metadata) -> u8 {
    if meta.mandatory_requirements().iter().any(|r| r == REQUIREMENT_V3) {
        3
    } else {
        2
    }
}

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
    /// Data moves by `shift` bytes (`datashift`: encryption with a data
    /// shift; `datashift-checksum` and `datashift-journal`: decryption
    /// moving the data down over an exported header, the moved first
    /// chunk protected by checksums (`checksum`: hash and block size) or
    /// a journal).
    Datashift { kind: String, shift: u64, checksum: Option<(HashAlg, u32)> },
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
    /// `None`: plaintext (a `linear` segment: the side of an encryption
    /// or a decryption that has no key).
    pub cipher: Option<DataCipher>,
    /// 0 for plaintext.
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
    /// Encryption with a data shift: where the first data chunk was
    /// copied before the header took its place (`backup-moved-segment`:
    /// offset, length).
    pub moved: Option<(u64, u64)>,
    /// The data shift in bytes (datashift resilience), else 0.
    pub shift: u64,
    /// The plaintext size before an encryption with a data shift (the
    /// `backup-previous` segment's fixed size).
    pub previous_size: Option<u64>,
    /// The non-backup segments: (linear, size) in order (`None`: dynamic).
    pub layout: Vec<(bool, Option<u64>)>,
}

impl ReencryptState {
    /// Whether this implementation can run (resume, recover) it, as
    /// cryptsetup 2.6 writes them: re-encryption forward; encryption and
    /// decryption forward or backward with resilience none, journal or
    /// checksum; encryption backward with a data shift (`datashift`).
    pub fn check_supported(&self) -> Result<()> {
        let shifted = matches!(&self.resilience, Resilience::Datashift { .. });
        match (self.mode, self.direction) {
            (ReencryptMode::Reencrypt, ReencryptDirection::Backward) => {
                return Err(Error::UnsupportedCipher(
                    "the header records a backward re-encryption (mode reencrypt); Rampart resumes forward ones, and backward encryption and decryption"
                        .into(),
                ))
            }
            // A detached header with a data shift: the data is encrypted
            // where it is (cryptsetup's `--reduce-device-size --header`).
            (ReencryptMode::Encrypt, ReencryptDirection::Backward)
                if shifted && self.in_place_shift() =>
            {
                return Ok(());
            }
            // An attached header exported, the data moved down by the
            // shift while it is decrypted (cryptsetup 2.6's `--decrypt
            // --header NEWFILE` on an attached header).
            (ReencryptMode::Decrypt, ReencryptDirection::Forward) if shifted => {
                if !self.decrypt_shift() {
                    return Err(Error::UnsupportedCipher(format!(
                        "a decryption with resilience {} but without a moved first segment at the start of the device",
                        self.resilience.name()
                    )));
                }
                return Ok(());
            }
            (ReencryptMode::Encrypt, ReencryptDirection::Backward) if shifted => {
                if self.moved.is_none() || self.previous_size.is_none() {
                    return Err(Error::UnsupportedCipher(
                        "an encryption with a data shift but without a moved first segment".into(),
                    ));
                }
                return Ok(());
            }
            _ => {}
        }
        if let Resilience::Datashift { kind, .. } = &self.resilience {
            return Err(Error::UnsupportedCipher(format!(
                "resilience mode {kind} with mode {} direction {} is not one Rampart resumes",
                self.mode.name(),
                self.direction.name()
            )));
        }
        if self.old.offset != self.new.offset {
            return Err(Error::UnsupportedCipher(
                "the old and new data offsets differ (a data shift)".into(),
            ));
        }
        Ok(())
    }

    /// An encryption with datashift resilience but no moved segment, the
    /// old and new data at the same offset: cryptsetup's layout for
    /// `--reduce-device-size` with a detached header. Hotzones are the
    /// shift long, processed in place backward as any backward run.
    #[must_use]
    pub fn in_place_shift(&self) -> bool {
        matches!(self.resilience, Resilience::Datashift { .. })
            && self.moved.is_none()
            && self.old.offset == self.new.offset
    }

    /// A decryption moving the data down by the shift over an exported
    /// attached header (`datashift-checksum` or `datashift-journal`): the
    /// first `shift` bytes of ciphertext copied to the start of the device
    /// (the moved segment), the rest decrypted forward, each hotzone read
    /// `shift` bytes above where it is written, the moved chunk last, in
    /// place under its checksums or journal.
    #[must_use]
    pub fn decrypt_shift(&self) -> bool {
        matches!(&self.resilience, Resilience::Datashift { kind, .. }
            if kind == "datashift-checksum" || kind == "datashift-journal")
            && self.mode == ReencryptMode::Decrypt
            && self.direction == ReencryptDirection::Forward
            && self.moved.is_some_and(|(offset, len)| offset == 0 && len == self.shift)
            && self.shift > 0
            && self.old.offset == self.shift
            && self.new.offset == 0
    }

    /// Whether a volume in this state can be served as it stands (dm-crypt
    /// serves every layout cryptsetup writes, its segments mapped in
    /// order): whenever Rampart can run it.
    pub fn check_servable(&self) -> Result<()> {
        self.check_supported()
    }

    /// The next hotzone (data offset, length) of a run resumed from a
    /// clean state, at most `max` bytes, as cryptsetup 2.6 picks it; `None`
    /// when all data is done. `size` is the data size.
    #[must_use]
    pub fn next_hotzone(&self, size: u64, max: u64) -> Option<(u64, u64)> {
        if self.complete {
            return None;
        }
        if let Some((start, len)) = self.hotzone {
            return Some((start, len));
        }
        let segs = self.layout.len();
        if self.decrypt_shift() {
            // Nothing decrypted but the moved chunk: all data above it
            // is done (one dynamic plaintext segment), else it resumes
            // after the plaintext done so far.
            let &(first_linear, _) = self.layout.first()?;
            if first_linear {
                return None;
            }
            if self.layout.iter().any(|&(l, s)| l && s.is_none()) {
                return Some((0, self.shift.min(size)));
            }
            let next = self.shift + self.done;
            return Some(if next >= size {
                (0, self.shift.min(size))
            } else {
                (next, self.shift.min(size - next))
            });
        }
        match (self.direction, &self.resilience) {
            (ReencryptDirection::Backward, Resilience::Datashift { .. })
                if !self.in_place_shift() =>
            {
                let linear: u64 =
                    self.layout.iter().filter(|(l, _)| *l).map(|(_, s)| s.unwrap_or(0)).sum();
                if linear == 0 {
                    return None;
                }
                if segs == 1 {
                    return Some((0, self.shift.min(linear)));
                }
                let tmp = linear.checked_sub(self.shift)?;
                if tmp > 0 && tmp < self.shift {
                    Some((self.shift, tmp))
                } else {
                    Some((tmp, self.shift))
                }
            }
            (ReencryptDirection::Backward, _) => {
                let end = if segs >= 2 { self.layout[0].1.unwrap_or(0) } else { size };
                if end == 0 {
                    return None;
                }
                let len = max.min(end);
                Some((end - len, len))
            }
            (ReencryptDirection::Forward, _) => {
                let start = self.done;
                (start < size).then(|| (start, max.min(size - start)))
            }
        }
    }
}

/// One piece of a volume's plaintext as its segments map it (a line of
/// dm's table): the segments in order, each the next piece of the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapPiece {
    /// Plaintext bytes; `None`: to the end of the data.
    pub len: Option<u64>,
    /// Where the piece starts on the data device.
    pub device_offset: u64,
    /// `None`: stored as plaintext (a `linear` segment).
    pub crypt: Option<MapCrypt>,
}

/// How an encrypted piece is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapCrypt {
    pub cipher: DataCipher,
    pub sector_size: u32,
    /// The IV of the piece's first sector, in 512-byte units.
    pub iv_tweak: u64,
    /// Under the new key of a reencryption (else the old one); always
    /// true outside a reencryption.
    pub new_key: bool,
}

/// The plaintext map of `meta`'s regular segments.
pub(crate) fn data_map(meta: &Metadata) -> Result<Vec<MapPiece>> {
    let st = state(meta)?;
    let digest_new = segment_by_flag(meta, "backup-final")
        .and_then(|id| meta.digest_of_segment(id))
        .map(|(d, _)| d);
    let mut out = Vec::new();
    for (id, seg) in &meta.segments {
        if seg.flags().iter().any(|f| f.starts_with("backup-")) {
            continue;
        }
        let len = match seg.size() {
            SizeField::Bytes(n) => Some(n),
            SizeField::Dynamic => None,
        };
        let crypt = match seg {
            SegmentJson::Crypt(c) => Some(MapCrypt {
                cipher: DataCipher::from_spec(&c.encryption)?,
                sector_size: c.sector_size,
                iv_tweak: c.iv_tweak.0,
                new_key: match st.as_ref().map(|s| s.mode) {
                    None | Some(ReencryptMode::Encrypt) => true,
                    Some(ReencryptMode::Decrypt) => false,
                    Some(ReencryptMode::Reencrypt) => {
                        meta.digest_of_segment(*id).map(|(d, _)| d) == digest_new
                    }
                },
            }),
            SegmentJson::Other { kind, .. } if kind == "linear" => None,
            other => {
                return Err(Error::UnsupportedCipher(format!(
                    "a data segment of type \"{}\"",
                    shorten(other.kind())
                )))
            }
        };
        out.push(MapPiece { len, device_offset: seg.offset(), crypt });
    }
    Ok(out)
}

/// The plaintext map once the hotzone `zone` is done, without writing it
/// (a run with resilience `none` records its position only at the end).
pub(crate) fn data_map_after(
    meta: &Metadata,
    size: u64,
    zone: (u64, u64),
) -> Result<Vec<MapPiece>> {
    let mut meta = meta.clone();
    set_layout(&mut meta, size, zone, false)?;
    data_map(&meta)
}

/// Checksum block of the record Rampart keeps for an in-place shift./// Checksum block of the record Rampart keeps for an in-place shift.
pub const IN_PLACE_SHIFT_BLOCK: u64 = 4096;

/// The resilience area Rampart gives an in-place shift it initialises:
/// a 4096-byte record head and a sha256 hash of each 4096-byte block of a
/// hotzone's plaintext, written before the hotzone is marked. cryptsetup's
/// `datashift` area holds nothing (and cryptsetup ignores it); Rampart
/// uses the record to repair a hotzone a crash interrupted.
#[must_use]
pub fn in_place_shift_area(shift: u64) -> u64 {
    4096 + (shift / IN_PLACE_SHIFT_BLOCK * 32).div_ceil(4096) * 4096
}

/// The hotzone after `(offset, len)` in a run, as cryptsetup 2.6 moves
/// (`reencrypt_context_update`); `None` when that one was the last.
#[must_use]
pub fn following_hotzone(
    state: &ReencryptState,
    size: u64,
    max: u64,
    (offset, len): (u64, u64),
) -> Option<(u64, u64)> {
    if state.decrypt_shift() {
        // Forward from the end of the moved chunk; the moved chunk last.
        if offset == 0 {
            return None;
        }
        let next = offset + len;
        return Some(if next >= size {
            (0, state.shift.min(size))
        } else {
            (next, state.shift.min(size - next))
        });
    }
    match (state.direction, &state.resilience) {
        (ReencryptDirection::Backward, Resilience::Datashift { .. }) if !state.in_place_shift() => {
            if offset == 0 {
                return None;
            }
            let shift = state.shift;
            let off = offset.saturating_sub(shift);
            if off == 0 {
                Some((0, shift))
            } else if off < shift {
                Some((shift, off))
            } else {
                Some((off, shift))
            }
        }
        (ReencryptDirection::Backward, _) => {
            if offset == 0 {
                return None;
            }
            let n = max.min(offset);
            Some((offset - n, n))
        }
        (ReencryptDirection::Forward, _) => {
            let start = offset + len;
            (start < size).then(|| (start, max.min(size - start)))
        }
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
pub(crate) fn new_keyslot(
    area_offset: u64,
    area_size: u64,
    resilience: &Resilience,
    mode: ReencryptMode,
    direction: ReencryptDirection,
) -> Value {
    let mut area = Map::new();
    area.insert("offset".into(), Value::String(area_offset.to_string()));
    area.insert("size".into(), Value::String(area_size.to_string()));
    area.insert("type".into(), Value::String(resilience.name().into()));
    if let Resilience::Checksum { hash, block_size } = resilience {
        area.insert("hash".into(), Value::String(hash.name().into()));
        area.insert("sector_size".into(), Value::from(*block_size));
    }
    if let Resilience::Datashift { shift, checksum, .. } = resilience {
        if let Some((hash, block_size)) = checksum {
            area.insert("hash".into(), Value::String(hash.name().into()));
            area.insert("sector_size".into(), Value::from(*block_size));
        }
        area.insert("shift_size".into(), Value::String(shift.to_string()));
    }
    let mut ks = Map::new();
    ks.insert("area".into(), Value::Object(area));
    ks.insert("type".into(), Value::String("reencrypt".into()));
    ks.insert("key_size".into(), Value::from(1));
    ks.insert("mode".into(), Value::String(mode.name().into()));
    ks.insert("direction".into(), Value::String(direction.name().into()));
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
    if let Some(SegmentJson::Other { kind, offset, .. }) = meta.segments.get(&id) {
        if kind == "linear" {
            return Ok(ReencryptSide {
                cipher: None,
                key_bytes: 0,
                sector_size: 512,
                offset: *offset,
                iv_tweak: 0,
            });
        }
    }
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
        cipher: Some(cipher),
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

/// The hash and block size of a checksum resilience area (`checksum` or
/// `datashift-checksum`), refused when unknown or out of range.
fn checksum_parameters(area: &ReencryptArea) -> Result<(HashAlg, u32)> {
    let hash_name = area.hash.clone().unwrap_or_default();
    let hash = HashAlg::from_name(&hash_name).ok_or_else(|| {
        Error::UnsupportedCipher(format!(
            "reencrypt keyslot: checksum hash \"{}\"",
            shorten(&hash_name)
        ))
    })?;
    let block_size = area.sector_size.unwrap_or(0);
    if block_size < 512 || !block_size.is_power_of_two() || block_size > (1 << 20) {
        return Err(Error::corrupt(format!(
            "reencrypt keyslot: checksum sector size {block_size}"
        )));
    }
    Ok((hash, block_size))
}

/// The reencryption recorded in `meta`, if any.
pub(crate) fn state(meta: &Metadata) -> Result<Option<ReencryptState>> {
    let reqs = meta.mandatory_requirements();
    let Some((keyslot, ks)) = reencrypt_keyslot(meta)? else {
        return Ok(None);
    };
    if !reqs.iter().any(|r| is_reencrypt_requirement(r)) {
        return Err(Error::UnsupportedCipher(format!(
            "the reencryption metadata carries the requirement {:?}, not {REQUIREMENT_V2} or {REQUIREMENT_V3} (run cryptsetup repair first)",
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
            let (hash, block_size) = checksum_parameters(&ks.area)?;
            Resilience::Checksum { hash, block_size }
        }
        kind @ ("datashift" | "datashift-journal" | "datashift-checksum") => {
            let checksum = if kind == "datashift-checksum" {
                Some(checksum_parameters(&ks.area)?)
            } else {
                None
            };
            Resilience::Datashift {
                kind: kind.to_owned(),
                shift: ks.area.shift_size.map_or(0, |s| s.0),
                checksum,
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
    let shifted = matches!(resilience, Resilience::Datashift { .. });
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
            [(id, seg)] => {
                // One segment: all old (nothing done) or all new (done,
                // only the cleanup is left).
                complete = match mode {
                    ReencryptMode::Reencrypt => {
                        let d = meta.digest_of_segment(*id).map(|(d, _)| d);
                        d.is_some() && d == digest_new && digest_new != digest_old
                    }
                    ReencryptMode::Encrypt => matches!(seg, SegmentJson::Crypt(_)),
                    ReencryptMode::Decrypt => seg.kind() == "linear",
                };
                0
            }
            [(_, first), _] if !shifted => match first.size() {
                SizeField::Bytes(n) => n,
                SizeField::Dynamic => {
                    return Err(Error::corrupt("the first of two segments has a dynamic size"))
                }
            },
            _ if shifted => 0,
            _ => return Err(Error::corrupt("reencryption: unexpected segment layout")),
        }
    };
    let layout = regular
        .iter()
        .map(|(_, s)| {
            let size = match s.size() {
                SizeField::Bytes(n) => Some(n),
                SizeField::Dynamic => None,
            };
            (s.kind() == "linear", size)
        })
        .collect();
    let moved = segment_by_flag(meta, "backup-moved-segment").and_then(|id| {
        let seg = meta.segments.get(&id)?;
        match seg.size() {
            SizeField::Bytes(n) => Some((seg.offset(), n)),
            SizeField::Dynamic => None,
        }
    });
    let previous_size = match meta.segments.get(&prev).map(SegmentJson::size) {
        Some(SizeField::Bytes(n)) => Some(n),
        _ => None,
    };
    let shift = match &resilience {
        Resilience::Datashift { shift, .. } => *shift,
        _ => 0,
    };
    let area = ks.area.clone();
    let mut st = ReencryptState {
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
        moved,
        shift,
        previous_size,
        layout,
    };
    if st.decrypt_shift() && st.hotzone.is_none() && !st.complete {
        // The plaintext written so far above the moved chunk.
        st.done = st.layout.iter().filter(|(l, _)| *l).filter_map(|(_, s)| *s).sum();
    }
    Ok(Some(st))
}

/// A segment of one side (a copy of its backup segment) covering
/// `[start, start+len)` of the data area (`None`: to the end).
fn side_segment(
    backup: &SegmentJson,
    start: u64,
    len: Option<u64>,
    in_reencryption: bool,
) -> Result<SegmentJson> {
    match backup {
        SegmentJson::Crypt(b) => Ok(SegmentJson::Crypt(Box::new(CryptSegment {
            kind: "crypt".into(),
            offset: U64Str(b.offset.0 + start),
            size: len.map_or(SizeField::Dynamic, SizeField::Bytes),
            iv_tweak: U64Str(b.iv_tweak.0 + start / 512),
            encryption: b.encryption.clone(),
            sector_size: b.sector_size,
            integrity: None,
            flags: in_reencryption.then(|| vec!["in-reencryption".to_owned()]),
            extra: Map::new(),
        }))),
        SegmentJson::Other { kind, offset, .. } if kind == "linear" => {
            let flags = in_reencryption.then(|| vec!["in-reencryption".to_owned()]);
            Ok(linear_segment(offset + start, len, flags))
        }
        other => Err(Error::UnsupportedCipher(format!(
            "a backup segment of type \"{}\"",
            shorten(other.kind())
        ))),
    }
}

/// A `linear` segment as cryptsetup writes it.
pub(crate) fn linear_segment(
    offset: u64,
    size: Option<u64>,
    flags: Option<Vec<String>>,
) -> SegmentJson {
    let mut raw = Map::new();
    raw.insert("type".into(), Value::String("linear".into()));
    raw.insert("offset".into(), Value::String(offset.to_string()));
    raw.insert(
        "size".into(),
        Value::String(size.map_or_else(|| "dynamic".to_owned(), |n| n.to_string())),
    );
    if let Some(flags) = flags {
        raw.insert("flags".into(), Value::from(flags));
    }
    SegmentJson::Other {
        kind: "linear".into(),
        offset,
        size: size.map_or(SizeField::Dynamic, SizeField::Bytes),
        raw: Value::Object(raw),
    }
}

/// Which key a segment of a reencryption layout is under.
#[derive(Clone, Copy)]
enum Role {
    Old,
    New,
    /// The hotzone (bound to both keys in mode reencrypt).
    Hot,
}

fn with_size(seg: &SegmentJson, size: Option<u64>) -> SegmentJson {
    let field = size.map_or(SizeField::Dynamic, SizeField::Bytes);
    match seg {
        SegmentJson::Crypt(c) => {
            let mut c = c.clone();
            c.size = field;
            SegmentJson::Crypt(c)
        }
        SegmentJson::Other { kind, offset, raw, .. } => {
            let mut raw = raw.clone();
            if let Some(obj) = raw.as_object_mut() {
                obj.insert(
                    "size".into(),
                    Value::String(size.map_or_else(|| "dynamic".to_owned(), |n| n.to_string())),
                );
            }
            SegmentJson::Other { kind: kind.clone(), offset: *offset, size: field, raw }
        }
    }
}

fn without_reencryption_flag(seg: &SegmentJson) -> SegmentJson {
    match seg {
        SegmentJson::Crypt(c) => {
            let mut c = c.clone();
            c.flags = None;
            SegmentJson::Crypt(c)
        }
        SegmentJson::Other { kind, offset, size, raw } => {
            let mut raw = raw.clone();
            if let Some(obj) = raw.as_object_mut() {
                obj.remove("flags");
            }
            SegmentJson::Other { kind: kind.clone(), offset: *offset, size: *size, raw }
        }
    }
}

/// Replaces the segments of `meta` with the layout of a reencryption
/// working on the hotzone `zone` (data offset, length): with `hot`, the
/// layout while it is in progress, else the one after it is done, each as
/// cryptsetup 2.6 builds it for the mode and direction (forward, backward,
/// backward with a data shift). The backup segments follow, and every
/// digest's segment list is rebuilt as cryptsetup assigns them.
pub(crate) fn set_layout(
    meta: &mut Metadata,
    size: u64,
    zone: (u64, u64),
    hot: bool,
) -> Result<()> {
    let st = state(meta)?.ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
    let prev_id = segment_by_flag(meta, "backup-previous")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-previous segment"))?;
    let fin_id = segment_by_flag(meta, "backup-final")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-final segment"))?;
    // Both ids were just found in `meta.segments`: indexing cannot fail.
    let prev = meta.segments[&prev_id].clone();
    let fin = meta.segments[&fin_id].clone();
    let fixed = matches!(fin.size(), SizeField::Bytes(_));
    let (off, len) = zone;
    if off.checked_add(len).is_none() {
        return Err(Error::invalid("a hotzone beyond any device"));
    }
    let tail_len = |from: u64| if fixed { Some(size.saturating_sub(from)) } else { None };
    let regular: Vec<SegmentJson> = meta
        .segments
        .values()
        .filter(|s| !s.flags().iter().any(|f| f.starts_with("backup-")))
        .cloned()
        .collect();

    let mut list: Vec<(SegmentJson, Role)> = Vec::new();
    if st.decrypt_shift() {
        decrypt_shift_layout(meta, &st, &prev, &fin, size, zone, hot, &mut list)?;
        return replace_segments(meta, st.mode, list);
    }
    // cryptsetup builds the moved-data layouts only when there is a moved
    // segment; an in-place shift (detached header) is laid out as any
    // backward run.
    let moved = !st.in_place_shift();
    match (st.direction, &st.resilience, hot) {
        (ReencryptDirection::Backward, Resilience::Datashift { .. }, true) if moved => {
            let last_linear = regular
                .iter()
                .rposition(|s| s.kind() == "linear")
                .ok_or_else(|| Error::corrupt("data shift: no plaintext segment left"))?;
            for seg in &regular[..last_linear] {
                list.push((seg.clone(), Role::Old));
            }
            if let SizeField::Bytes(n) = regular[last_linear].size() {
                if n > len {
                    list.push((with_size(&regular[last_linear], Some(n - len)), Role::Old));
                }
            }
            list.push((side_segment(&fin, off, Some(len), true)?, Role::Hot));
            if let Some(c) = regular.iter().find(|s| matches!(s, SegmentJson::Crypt(_))) {
                list.push((c.clone(), Role::New));
            }
        }
        (ReencryptDirection::Backward, Resilience::Datashift { .. }, false) if moved => {
            let r = regular
                .iter()
                .position(|s| has_flag(s, "in-reencryption"))
                .ok_or_else(|| Error::corrupt("data shift: no segment in reencryption"))?;
            for seg in &regular[..r] {
                list.push((seg.clone(), Role::Old));
            }
            let merged = match regular.get(r + 1) {
                Some(SegmentJson::Crypt(next)) => {
                    let next_len = match next.size {
                        SizeField::Bytes(n) => n,
                        SizeField::Dynamic => 0,
                    };
                    let mut c = next.clone();
                    c.offset = U64Str(st.new.offset + off);
                    c.iv_tweak = U64Str(off / 512);
                    c.size = SizeField::Bytes(next_len + len);
                    SegmentJson::Crypt(c)
                }
                _ => without_reencryption_flag(&regular[r]),
            };
            let size = match merged.size() {
                SizeField::Bytes(n) if r > 0 => Some(n),
                _ => None,
            };
            list.push((with_size(&merged, size), Role::New));
        }
        (ReencryptDirection::Backward, _, true) => {
            if off > 0 {
                list.push((side_segment(&prev, 0, Some(off), false)?, Role::Old));
            }
            list.push((side_segment(&fin, off, Some(len), true)?, Role::Hot));
            if off + len < size {
                list.push((side_segment(&fin, off + len, tail_len(off + len), false)?, Role::New));
            }
        }
        (ReencryptDirection::Backward, _, false) => {
            if off > 0 {
                list.push((side_segment(&prev, 0, Some(off), false)?, Role::Old));
            }
            let tail = if off > 0 { tail_len(off) } else { None };
            list.push((side_segment(&fin, off, tail, false)?, Role::New));
        }
        (ReencryptDirection::Forward, _, true) => {
            if off > 0 {
                list.push((side_segment(&fin, 0, Some(off), false)?, Role::New));
            }
            list.push((side_segment(&fin, off, Some(len), true)?, Role::Hot));
            if off + len < size {
                list.push((side_segment(&prev, off + len, tail_len(off + len), false)?, Role::Old));
            }
        }
        (ReencryptDirection::Forward, _, false) => {
            let done = off + len;
            if done >= size {
                list.push((side_segment(&fin, 0, None, false)?, Role::New));
            } else {
                list.push((side_segment(&fin, 0, Some(done), false)?, Role::New));
                list.push((side_segment(&prev, done, tail_len(done), false)?, Role::Old));
            }
        }
    }
    replace_segments(meta, st.mode, list)
}

/// The layout of a decryption moving the data down (see
/// [`ReencryptState::decrypt_shift`]) working on `zone`, as cryptsetup 2.6
/// builds it: the moved chunk (ciphertext at the start of the device)
/// until it is the hotzone, the plaintext done above it, the hotzone, and
/// the ciphertext left, read `shift` bytes above its data offset.
#[allow(clippy::too_many_arguments)]
fn decrypt_shift_layout(
    meta: &Metadata,
    st: &ReencryptState,
    prev: &SegmentJson,
    fin: &SegmentJson,
    size: u64,
    (off, len): (u64, u64),
    hot: bool,
    list: &mut Vec<(SegmentJson, Role)>,
) -> Result<()> {
    let shift = st.shift;
    if off == 0 {
        // The moved chunk, decrypted in place.
        if hot {
            list.push((side_segment(fin, 0, Some(len), true)?, Role::Hot));
            list.push((side_segment(fin, len, None, false)?, Role::New));
        } else {
            list.push((side_segment(fin, 0, None, false)?, Role::New));
        }
        return Ok(());
    }
    if off < shift || len == 0 || off.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::invalid(format!(
            "a hotzone of {len} bytes at {off} in a decryption with a data shift of {shift} bytes over {size} bytes"
        )));
    }
    let moved_id = segment_by_flag(meta, "backup-moved-segment")
        .ok_or_else(|| Error::corrupt("data shift: no backup-moved-segment"))?;
    // `moved_id` was just found in `meta.segments`; the copy loses its
    // backup flag.
    list.push((without_reencryption_flag(&meta.segments[&moved_id]), Role::Old));
    let end = off + len;
    if hot {
        if off > shift {
            list.push((side_segment(fin, shift, Some(off - shift), false)?, Role::New));
        }
        list.push((side_segment(fin, off, Some(len), true)?, Role::Hot));
    } else {
        let done = if end >= size { None } else { Some(end - shift) };
        list.push((side_segment(fin, shift, done, false)?, Role::New));
    }
    if end < size {
        list.push((side_segment(prev, end, None, false)?, Role::Old));
    }
    Ok(())
}

/// The layout of a finished reencryption: the final segment alone (the
/// backups go with the rest of the metadata in the same write).
pub(crate) fn set_final(meta: &mut Metadata) -> Result<()> {
    let st = state(meta)?.ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
    let fin_id = segment_by_flag(meta, "backup-final")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-final segment"))?;
    let fin = meta.segments[&fin_id].clone();
    let seg = side_segment(&fin, 0, None, false)?;
    replace_segments(meta, st.mode, vec![(seg, Role::New)])
}

/// Writes `list` as segments 0.., then the backups, and binds each to its
/// digests: in mode reencrypt the old segments to the old key, the new
/// ones to the new key and the hotzone to both; in modes encrypt and
/// decrypt every crypt segment to the one key there is.
fn replace_segments(
    meta: &mut Metadata,
    mode: ReencryptMode,
    list: Vec<(SegmentJson, Role)>,
) -> Result<()> {
    let prev_id = segment_by_flag(meta, "backup-previous")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-previous segment"))?;
    let fin_id = segment_by_flag(meta, "backup-final")
        .ok_or_else(|| Error::corrupt("reencryption: no backup-final segment"))?;
    let digest_old = meta.digest_of_segment(prev_id).map(|(id, _)| id);
    let digest_new = meta.digest_of_segment(fin_id).map(|(id, _)| id);
    if mode != ReencryptMode::Encrypt && digest_old.is_none() {
        return Err(Error::corrupt("the backup-previous segment has no digest"));
    }
    if mode != ReencryptMode::Decrypt && digest_new.is_none() {
        return Err(Error::corrupt("the backup-final segment has no digest"));
    }
    let digests_of = |seg: &SegmentJson, role: Role| -> Vec<usize> {
        let crypt = matches!(seg, SegmentJson::Crypt(_));
        match mode {
            ReencryptMode::Reencrypt => match role {
                Role::Old => digest_old.into_iter().collect(),
                Role::New => digest_new.into_iter().collect(),
                Role::Hot => digest_new.into_iter().chain(digest_old).collect(),
            },
            ReencryptMode::Encrypt if crypt => digest_new.into_iter().collect(),
            ReencryptMode::Decrypt if crypt => digest_old.into_iter().collect(),
            _ => Vec::new(),
        }
    };
    let mut all: Vec<(SegmentJson, Vec<usize>)> = list
        .into_iter()
        .map(|(s, r)| {
            let d = digests_of(&s, r);
            (s, d)
        })
        .collect();
    // The backups keep their order: previous, final, then any other
    // (a moved segment).
    let prev = meta.segments[&prev_id].clone();
    let fin = meta.segments[&fin_id].clone();
    let d_prev = digests_of(&prev, Role::Old);
    let d_fin = digests_of(&fin, Role::New);
    let mut backups: Vec<(usize, SegmentJson, Vec<usize>)> = meta
        .segments
        .iter()
        .filter(|(_, s)| s.flags().iter().any(|f| f.starts_with("backup-")))
        .map(|(id, s)| {
            let d = if *id == prev_id {
                d_prev.clone()
            } else if *id == fin_id {
                d_fin.clone()
            } else {
                digests_of(s, Role::Old)
            };
            (*id, s.clone(), d)
        })
        .collect();
    // cryptsetup keeps the moved segment before the previous and final
    // ones (it was added first); others keep their relative order.
    // In a decryption it goes after them once the run has started.
    let moved_first = mode != ReencryptMode::Decrypt;
    backups.sort_by_key(|(id, s, _)| {
        (has_flag(s, "backup-moved-segment") != moved_first, *id != prev_id, *id)
    });
    all.extend(backups.into_iter().map(|(_, s, d)| (s, d)));
    for digest in meta.digests.values_mut() {
        digest.set_segments(Vec::new());
    }
    meta.segments.clear();
    for (id, (seg, digests)) in all.into_iter().enumerate() {
        for d in digests {
            if let Some(digest) = meta.digests.get_mut(&d) {
                let mut segs = digest.segments().to_vec();
                segs.push(IdRef(id));
                digest.set_segments(segs);
            }
        }
        meta.segments.insert(id, seg);
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
    out.push(b'v');
    out.push(b'0' + requirement_version(meta));
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
