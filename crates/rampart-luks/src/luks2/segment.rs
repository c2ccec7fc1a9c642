//! LUKS2 data segments: the one `crypt` segment Rampart maps, and the
//! header's description of it.

use super::integrity::{IntegritySegment, SegmentIntegrity};
use super::json::{shorten, CryptSegment, IdRef, Metadata, SegmentJson, SizeField, U64Str};
use super::Luks2;
use crate::cipher::DataCipher;
use crate::{Error, Result, Segment};

/// The single crypt segment of a normal (not reencrypting) LUKS2 device.
pub(crate) fn data_segment(meta: &Metadata) -> Result<(usize, &CryptSegment)> {
    if meta.segments.len() != 1 {
        return Err(Error::UnsupportedCipher(format!(
            "the header has {} data segments (a reencryption in progress?); only a single segment is supported",
            meta.segments.len()
        )));
    }
    match meta.segments.iter().next() {
        Some((id, SegmentJson::Crypt(seg))) => Ok((*id, seg)),
        Some((id, other)) => Err(Error::UnsupportedCipher(format!(
            "segment {id} has type \"{}\"; only crypt segments are supported",
            shorten(other.kind())
        ))),
        None => Err(Error::corrupt("the header has no data segment")),
    }
}

/// cryptsetup's default segment: the one flagged `backup-final`, else 0.
pub(crate) fn default_segment(meta: &Metadata) -> usize {
    meta.segments
        .iter()
        .find(|(_, s)| s.flags().iter().any(|f| f == "backup-final"))
        .map_or(0, |(id, _)| *id)
}

/// The public description of the data segment, refusing what Rampart does
/// not implement.
pub(crate) fn describe(meta: &Metadata) -> Result<Segment> {
    let (id, seg) = data_segment(meta)?;
    if seg.integrity.is_some() {
        return Err(Error::UnsupportedCipher(format!(
            "segment {id} uses authenticated encryption (dm-integrity); only length-preserving ciphers are supported"
        )));
    }
    if let Some(flag) = seg.flags.iter().flatten().find(|f| f.as_str() == "in-reencryption") {
        return Err(Error::UnsupportedCipher(format!(
            "segment {id} is flagged {flag}; reencryption is not supported"
        )));
    }
    if !matches!(seg.sector_size, 512 | 1024 | 2048 | 4096) {
        return Err(Error::UnsupportedCipher(format!(
            "segment {id}: sector size {} (Rampart maps 512, 1024, 2048 and 4096)",
            seg.sector_size
        )));
    }
    let cipher = DataCipher::from_spec(&seg.encryption)?;
    let key_bytes = volume_key_size(meta, id)?;
    cipher.check_key_bytes(key_bytes)?;
    Ok(Segment {
        offset: seg.offset.0,
        size: match seg.size {
            SizeField::Dynamic => None,
            SizeField::Bytes(n) => Some(n),
        },
        cipher,
        key_bytes,
        sector_size: seg.sector_size,
        iv_tweak: seg.iv_tweak.0,
    })
}

/// The data segment with integrity, or `None` for one without.
pub(crate) fn describe_integrity(meta: &Metadata) -> Result<Option<IntegritySegment>> {
    let (id, seg) = data_segment(meta)?;
    let Some(value) = &seg.integrity else { return Ok(None) };
    let what = format!("segment {id}");
    Ok(Some(IntegritySegment {
        offset: seg.offset.0,
        size: match seg.size {
            SizeField::Dynamic => None,
            SizeField::Bytes(n) => Some(n),
        },
        encryption: seg.encryption.clone(),
        sector_size: seg.sector_size,
        iv_tweak: seg.iv_tweak.0,
        volume_key_bytes: volume_key_size(meta, id)?,
        integrity: SegmentIntegrity::from_json(value, &what)?,
    }))
}

/// The volume key size of a segment: the key size of the keyslots bound to
/// its digest.
pub(crate) fn volume_key_size(meta: &Metadata, segment: usize) -> Result<usize> {
    let (digest_id, digest) = meta
        .digest_of_segment(segment)
        .ok_or_else(|| Error::corrupt(format!("segment {segment} has no digest")))?;
    let mut size = None;
    for slot in digest.keyslots() {
        if let Some(super::json::Keyslot::Luks2(ks)) = meta.keyslots.get(&slot.0) {
            let this = ks.key_size as usize;
            if size.is_some_and(|s| s != this) {
                return Err(Error::corrupt(format!(
                    "keyslots of digest {digest_id} disagree on the volume key size"
                )));
            }
            size = Some(this);
        }
    }
    size.ok_or_else(|| {
        Error::corrupt(format!("the volume key size is unknown: digest {digest_id} has no keyslot"))
    })
}

/// A new crypt segment encrypted with `encryption` (`aes-xts-plain64`).
pub(crate) fn new_crypt(offset: u64, encryption: &str, sector_size: u32) -> SegmentJson {
    SegmentJson::Crypt(Box::new(CryptSegment {
        kind: "crypt".into(),
        offset: U64Str(offset),
        size: SizeField::Dynamic,
        iv_tweak: U64Str(0),
        encryption: encryption.into(),
        sector_size,
        integrity: None,
        flags: None,
        extra: serde_json::Map::new(),
    }))
}

/// A new crypt segment with `integrity`, as `cryptsetup luksFormat
/// --integrity` writes it: dm-integrity's superblock at `offset`.
pub(crate) fn new_authenticated(
    offset: u64,
    encryption: &str,
    integrity: &SegmentIntegrity,
    sector_size: u32,
) -> SegmentJson {
    let mut segment = new_crypt(offset, encryption, sector_size);
    if let SegmentJson::Crypt(crypt) = &mut segment {
        crypt.integrity = Some(integrity.to_json());
    }
    segment
}

/// The segment reference list for segment `id`.
pub(crate) fn refs(id: usize) -> Vec<IdRef> {
    vec![IdRef(id)]
}

impl Luks2 {
    pub(crate) fn segment(&self) -> Result<Segment> {
        self.check_requirements()?;
        describe(&self.meta)
    }

    pub(crate) fn integrity_segment(&self) -> Result<Option<IntegritySegment>> {
        self.check_requirements()?;
        describe_integrity(&self.meta)
    }
}
