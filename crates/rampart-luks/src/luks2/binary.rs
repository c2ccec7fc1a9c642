//! The LUKS2 binary header (one 4096-byte sector), its checksum over the
//! header and JSON area, and the two copies at fixed offsets.

use rampart_crypto::{digest, HashAlg};

use crate::io::{read_exact, MetadataIo};
use crate::reader::Reader;
use crate::{Error, Result};

/// Size of the binary header sector.
pub(crate) const BIN_SIZE: usize = 4096;
pub(crate) const MAGIC_1ST: [u8; 6] = *b"LUKS\xba\xbe";
pub(crate) const MAGIC_2ND: [u8; 6] = *b"SKUL\xba\xbe";
pub(crate) const LABEL_LEN: usize = 48;
const CSUM_ALG_LEN: usize = 32;
pub(crate) const SALT_LEN: usize = 64;
const UUID_LEN: usize = 40;
const CSUM_LEN: usize = 64;
/// Offset of the checksum field within the binary header.
const CSUM_OFFSET: usize = 448;

/// The allowed per-copy header sizes (binary header plus JSON area), which
/// are also the possible offsets of the secondary copy.
pub(crate) const HDR_SIZES: [u64; 9] =
    [0x4000, 0x8000, 0x1_0000, 0x2_0000, 0x4_0000, 0x8_0000, 0x10_0000, 0x20_0000, 0x40_0000];

/// Which of the two header copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copy {
    Primary,
    Secondary,
}

impl Copy {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Secondary => "secondary",
        }
    }

    pub(crate) fn other(self) -> Self {
        match self {
            Self::Primary => Self::Secondary,
            Self::Secondary => Self::Primary,
        }
    }

    /// The copy's index in a (primary, secondary) pair.
    pub(crate) fn index(self) -> usize {
        match self {
            Self::Primary => 0,
            Self::Secondary => 1,
        }
    }

    /// Where the copy starts in a header of `hdr_size` bytes per copy.
    pub(crate) fn offset(self, hdr_size: u64) -> u64 {
        match self {
            Self::Primary => 0,
            Self::Secondary => hdr_size,
        }
    }

    fn magic(self) -> [u8; 6] {
        match self {
            Self::Primary => MAGIC_1ST,
            Self::Secondary => MAGIC_2ND,
        }
    }
}

/// The decoded fields of a binary header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryHeader {
    pub(crate) hdr_size: u64,
    pub(crate) seqid: u64,
    /// Label bytes before the terminator (at most 47).
    pub(crate) label: Vec<u8>,
    pub(crate) csum_alg: HashAlg,
    pub(crate) salt: [u8; SALT_LEN],
    pub(crate) uuid: String,
    /// Subsystem bytes before the terminator (at most 47).
    pub(crate) subsystem: Vec<u8>,
}

/// Decodes and sanity-checks a binary header read at `offset` as `copy`,
/// before its checksum is verified (so no untrusted size is used yet).
pub(crate) fn decode(bytes: &[u8], copy: Copy, offset: u64) -> Result<BinaryHeader> {
    let what = copy.name();
    let mut r = Reader::new(bytes, "LUKS2 binary header");
    let magic: [u8; 6] = r.array("magic")?;
    if magic != copy.magic() {
        return Err(Error::corrupt(format!("{what} header: bad magic")));
    }
    let version = r.u16_be("version")?;
    if version != 2 {
        return Err(Error::corrupt(format!("{what} header: version {version} is not 2")));
    }
    let hdr_size = r.u64_be("hdr_size")?;
    let seqid = r.u64_be("seqid")?;
    let label = r.c_string(LABEL_LEN, "label")?.bytes.to_vec();
    let csum_alg_field = r.c_string(CSUM_ALG_LEN, "checksum algorithm")?;
    let salt: [u8; SALT_LEN] = r.array("salt")?;
    // cryptsetup does not check the UUID's form at load.
    let uuid = r.c_string(UUID_LEN, "uuid")?.lossy();
    let subsystem = r.c_string(LABEL_LEN, "subsystem")?.bytes.to_vec();
    let hdr_offset = r.u64_be("hdr_offset")?;
    if hdr_offset != offset {
        return Err(Error::corrupt(format!(
            "{what} header: it records offset {hdr_offset} but was found at {offset}"
        )));
    }
    if !HDR_SIZES.contains(&hdr_size) {
        return Err(Error::corrupt(format!(
            "{what} header: size {hdr_size} is not a LUKS2 header size (16 KiB to 4 MiB)"
        )));
    }
    if copy == Copy::Secondary && hdr_size != offset {
        return Err(Error::corrupt(format!(
            "{what} header: size {hdr_size} does not match its offset {offset}"
        )));
    }
    let csum_name = csum_alg_field.lossy();
    let csum_alg = match csum_name.as_str() {
        "sha1" | "sha256" | "sha512" => HashAlg::from_name(&csum_name),
        _ => None,
    }
    .ok_or_else(|| {
        Error::corrupt(format!(
            "{what} header: checksum algorithm \"{}\" is not supported",
            super::json::shorten(&csum_name)
        ))
    })?;
    debug_assert!(r.position() <= CSUM_OFFSET);
    Ok(BinaryHeader { hdr_size, seqid, label, csum_alg, salt, uuid, subsystem })
}

/// The checksum of a binary header (with its checksum field zeroed) and the
/// JSON area.
fn checksum(alg: HashAlg, bin: &[u8], json_area: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(bin.len() + json_area.len());
    data.extend_from_slice(bin);
    data[CSUM_OFFSET..CSUM_OFFSET + CSUM_LEN].fill(0);
    data.extend_from_slice(json_area);
    digest(alg, &data).expose().to_vec()
}

/// Encodes a binary header for `copy` and computes its checksum.
pub(crate) fn encode(header: &BinaryHeader, copy: Copy, json_area: &[u8]) -> Result<Vec<u8>> {
    let mut out = vec![0u8; BIN_SIZE];
    let offset = match copy {
        Copy::Primary => 0,
        Copy::Secondary => header.hdr_size,
    };
    let put = |out: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
    };
    if header.label.len() >= LABEL_LEN || header.subsystem.len() >= LABEL_LEN {
        return Err(Error::invalid("label and subsystem are limited to 47 bytes"));
    }
    if header.uuid.len() >= UUID_LEN {
        return Err(Error::invalid("uuid is limited to 39 bytes"));
    }
    put(&mut out, 0, &copy.magic());
    put(&mut out, 6, &2u16.to_be_bytes());
    put(&mut out, 8, &header.hdr_size.to_be_bytes());
    put(&mut out, 16, &header.seqid.to_be_bytes());
    put(&mut out, 24, &header.label);
    put(&mut out, 72, header.csum_alg.name().as_bytes());
    put(&mut out, 104, &header.salt);
    put(&mut out, 168, header.uuid.as_bytes());
    put(&mut out, 208, &header.subsystem);
    put(&mut out, 256, &offset.to_be_bytes());
    let sum = checksum(header.csum_alg, &out, json_area);
    put(&mut out, CSUM_OFFSET, &sum);
    Ok(out)
}

/// One header copy read from the device, its checksum verified.
#[derive(Debug)]
pub(crate) struct RawCopy {
    pub(crate) header: BinaryHeader,
    /// The JSON text, without the terminating NUL and the zero padding.
    pub(crate) json: Vec<u8>,
}

/// Reads and verifies the copy at `offset`. The JSON text is checked to be
/// NUL-terminated with only zeros after it, but not yet parsed.
pub(crate) fn read_copy(
    io: &dyn MetadataIo,
    device_len: u64,
    offset: u64,
    copy: Copy,
) -> Result<RawCopy> {
    let what = copy.name();
    let bin_end = offset.saturating_add(BIN_SIZE as u64);
    if bin_end > device_len {
        return Err(Error::corrupt(format!(
            "{what} header at offset {offset} is beyond the end of the device ({device_len} bytes)"
        )));
    }
    let mut bin = vec![0u8; BIN_SIZE];
    read_exact(io, offset, &mut bin, &format!("{what} binary header"))?;
    let header = decode(&bin, copy, offset)?;
    let area_len = header.hdr_size - BIN_SIZE as u64; // hdr_size is one of HDR_SIZES
    if bin_end.saturating_add(area_len) > device_len {
        return Err(Error::corrupt(format!(
            "{what} header is truncated: its JSON area ends at {} but the device has {device_len} bytes",
            bin_end + area_len
        )));
    }
    // Bounded: at most 4 MiB - 4 KiB.
    let area_len = usize::try_from(area_len).map_err(|_| Error::corrupt("JSON area too large"))?;
    let mut area = vec![0u8; area_len];
    read_exact(io, bin_end, &mut area, &format!("{what} JSON area"))?;
    let expected = checksum(header.csum_alg, &bin, &area);
    let stored = &bin[CSUM_OFFSET..CSUM_OFFSET + expected.len()];
    if stored != expected.as_slice() {
        return Err(Error::corrupt(format!("{what} header: checksum mismatch")));
    }
    let Some(end) = area.iter().position(|&b| b == 0) else {
        return Err(Error::corrupt(format!("{what} header: JSON area is not NUL-terminated")));
    };
    if area[end..].iter().any(|&b| b != 0) {
        return Err(Error::corrupt(format!("{what} header: non-zero bytes after the JSON text")));
    }
    if area.first() != Some(&b'{') {
        return Err(Error::corrupt(format!("{what} header: JSON metadata is not an object")));
    }
    area.truncate(end);
    Ok(RawCopy { header, json: area })
}

/// The JSON area for `json` text: the text, a NUL, zero padding.
pub(crate) fn json_area(json: &[u8], hdr_size: u64) -> Result<Vec<u8>> {
    let area_len = hdr_size
        .checked_sub(BIN_SIZE as u64)
        .and_then(|len| usize::try_from(len).ok())
        .ok_or_else(|| Error::corrupt(format!("header size {hdr_size} is invalid")))?;
    if json.len() >= area_len {
        return Err(Error::NoSpace(format!(
            "the JSON metadata ({} bytes) does not fit in the {area_len}-byte JSON area",
            json.len()
        )));
    }
    let mut area = vec![0u8; area_len];
    area[..json.len()].copy_from_slice(json);
    Ok(area)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BinaryHeader {
        BinaryHeader {
            hdr_size: 0x4000,
            seqid: 7,
            label: b"lbl".to_vec(),
            csum_alg: HashAlg::Sha256,
            salt: [9; SALT_LEN],
            uuid: "0b1c6f2e-7d39-4b5e-9d2c-3c1f0e2a4b6d".into(),
            subsystem: vec![],
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let h = sample();
        let area = json_area(b"{}", h.hdr_size).unwrap();
        for (copy, offset) in [(Copy::Primary, 0), (Copy::Secondary, 0x4000)] {
            let bin = encode(&h, copy, &area).unwrap();
            assert_eq!(bin.len(), BIN_SIZE);
            assert_eq!(decode(&bin, copy, offset).unwrap(), h);
            // The checksum covers the JSON area.
            assert_eq!(&bin[CSUM_OFFSET..CSUM_OFFSET + 32], checksum(HashAlg::Sha256, &bin, &area));
            assert!(decode(&bin, copy.other(), offset).is_err());
        }
    }

    #[test]
    fn misplaced_headers_are_rejected() {
        let h = sample();
        let area = json_area(b"{}", h.hdr_size).unwrap();
        let bin = encode(&h, Copy::Primary, &area).unwrap();
        let err = decode(&bin, Copy::Primary, 512).unwrap_err().to_string();
        assert!(err.contains("records offset 0"), "{err}");
        let mut bad = sample();
        bad.hdr_size = 12345;
        let bin = encode(&bad, Copy::Primary, &area).unwrap();
        assert!(decode(&bin, Copy::Primary, 0)
            .unwrap_err()
            .to_string()
            .contains("not a LUKS2 header size"));
    }
}
