//! Tink's AES-GCM-HKDF streaming AEAD (the `AesGcmHkdfStreamingKey` wire
//! format), as specified in Tink's documentation:
//!
//! ```text
//! ciphertext = header || segment_0 || segment_1 || ... || segment_{n-1}
//! header     = len(header) (1 byte) || salt (key size) || nonce prefix (7)
//! key        = HKDF(hash, ikm = key value, salt, info = associated data)
//! segment_i  = AES-GCM(key, prefix || BE32(i) || last (1 byte), no AAD)
//! ```
//!
//! Every segment is `ciphertext_segment_size` bytes (16 of them the tag)
//! except the first, which is shorter by the header length, and the last,
//! which may be shorter. The last-segment byte makes truncation and
//! extension detectable; the counter makes reordering detectable.

use rampart_crypto::{hkdf, Gcm, HashAlg, SecretBytes, GCM_NONCE_LEN, GCM_TAG_LEN};

use crate::{Error, Result};

/// The nonce prefix length.
pub const NONCE_PREFIX_LEN: usize = 7;
/// The per-segment overhead (the GCM tag).
pub const TAG_LEN: usize = GCM_TAG_LEN;
/// The largest ciphertext segment Rampart reads or writes: it bounds the
/// memory a file header can make a reader allocate.
pub const MAX_SEGMENT_SIZE: u32 = 16 << 20;
/// Tink numbers segments with 32 bits.
pub const MAX_SEGMENTS: u64 = 1 << 32;

/// The parameters of a Tink `AesGcmHkdfStreamingKey` (besides its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamParams {
    /// The HKDF hash: SHA-1, SHA-256 or SHA-512.
    pub hkdf_hash: HashAlg,
    /// The derived AES-GCM key size: 16 or 32.
    pub key_size: usize,
    /// The ciphertext segment size, tag included.
    pub segment_size: u32,
}

impl StreamParams {
    /// Rampart's choice for new files: SHA-256, AES-256, the given segments.
    pub fn new(segment_size: u32) -> Result<Self> {
        let params = Self { hkdf_hash: HashAlg::Sha256, key_size: 32, segment_size };
        params.validate()?;
        Ok(params)
    }

    /// Checks parameters read from a header (or given by a user).
    pub fn validate(&self) -> Result<()> {
        if self.key_size != 16 && self.key_size != 32 {
            return Err(Error::Format(format!(
                "derived key size {} is not 16 or 32",
                self.key_size
            )));
        }
        let min = self.header_len() + TAG_LEN + 1;
        if (self.segment_size as usize) < min || self.segment_size > MAX_SEGMENT_SIZE {
            return Err(Error::Format(format!(
                "segment size {} is outside {min}..={MAX_SEGMENT_SIZE}",
                self.segment_size
            )));
        }
        Ok(())
    }

    /// The stream header's length: 1 + key size + 7 (24 or 40).
    #[must_use]
    pub fn header_len(&self) -> usize {
        1 + self.key_size + NONCE_PREFIX_LEN
    }

    /// Ciphertext bytes of segment `index` when it is full.
    #[must_use]
    pub fn ciphertext_len(&self, index: u64) -> usize {
        let full = self.segment_size as usize;
        if index == 0 {
            full - self.header_len()
        } else {
            full
        }
    }

    /// Plaintext bytes of segment `index` when it is full.
    #[must_use]
    pub fn plaintext_len(&self, index: u64) -> usize {
        self.ciphertext_len(index) - TAG_LEN
    }

    /// Where segment `index` starts, from the start of the stream header.
    #[must_use]
    pub fn ciphertext_offset(&self, index: u64) -> u64 {
        if index == 0 {
            self.header_len() as u64
        } else {
            index * u64::from(self.segment_size)
        }
    }

    /// Where segment `index`'s plaintext starts in the whole plaintext.
    #[must_use]
    pub fn plaintext_offset(&self, index: u64) -> u64 {
        if index == 0 {
            0
        } else {
            self.plaintext_len(0) as u64 + (index - 1) * self.plaintext_len(1) as u64
        }
    }

    /// The segment holding plaintext byte `offset`.
    #[must_use]
    pub fn segment_of(&self, offset: u64) -> u64 {
        let first = self.plaintext_len(0) as u64;
        if offset < first {
            0
        } else {
            1 + (offset - first) / self.plaintext_len(1) as u64
        }
    }

    /// The stream's total length for `plaintext` bytes.
    #[must_use]
    pub fn stream_len(&self, plaintext: u64) -> u64 {
        let segments = self.segment_count(plaintext);
        plaintext + self.header_len() as u64 + segments * TAG_LEN as u64
    }

    /// How many segments `plaintext` bytes take (at least one: an empty
    /// plaintext is one empty last segment).
    #[must_use]
    pub fn segment_count(&self, plaintext: u64) -> u64 {
        let first = self.plaintext_len(0) as u64;
        if plaintext <= first {
            1
        } else {
            1 + (plaintext - first).div_ceil(self.plaintext_len(1) as u64)
        }
    }

    /// The layout of a stream of `stream_len` bytes (header included):
    /// the number of segments and the plaintext length. A length no writer
    /// produces (a last segment shorter than its tag) is a truncation.
    pub fn layout(&self, stream_len: u64) -> Result<(u64, u64)> {
        let header = self.header_len() as u64;
        let tag = TAG_LEN as u64;
        if stream_len < header + tag {
            return Err(Error::Truncated);
        }
        let size = u64::from(self.segment_size);
        let segments = stream_len.div_ceil(size);
        let last_start = self.ciphertext_offset(segments - 1);
        if stream_len - last_start < tag {
            return Err(Error::Truncated);
        }
        if segments > MAX_SEGMENTS {
            return Err(Error::Format("more than 2^32 segments".into()));
        }
        Ok((segments, stream_len - header - segments * tag))
    }
}

/// The stream header: salt and nonce prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHeader {
    bytes: Vec<u8>,
}

impl StreamHeader {
    /// A fresh header with a random salt and nonce prefix.
    pub fn random(params: &StreamParams) -> Result<Self> {
        let mut bytes = vec![0u8; params.header_len()];
        bytes[0] = params.header_len() as u8;
        rampart_crypto::fill_random(&mut bytes[1..])?;
        Ok(Self { bytes })
    }

    /// Parses the first `header_len` bytes of a stream.
    pub fn parse(params: &StreamParams, bytes: &[u8]) -> Result<Self> {
        if bytes.len() != params.header_len() {
            return Err(Error::Truncated);
        }
        if usize::from(bytes[0]) != params.header_len() {
            return Err(Error::Format(format!(
                "the stream header says it is {} bytes, not {}",
                bytes[0],
                params.header_len()
            )));
        }
        Ok(Self { bytes: bytes.to_vec() })
    }

    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The segment cipher of one stream: the derived key and the nonce prefix.
/// `Sync`, so segments are sealed and opened on every core.
#[derive(Debug)]
pub struct SegmentCipher {
    gcm: Gcm,
    prefix: [u8; NONCE_PREFIX_LEN],
    params: StreamParams,
}

impl SegmentCipher {
    /// Derives the segment key from the key value `ikm` (at least
    /// `key_size` bytes), the header's salt and the associated data.
    pub fn new(
        params: &StreamParams,
        ikm: &SecretBytes,
        header: &StreamHeader,
        associated_data: &[u8],
    ) -> Result<Self> {
        if ikm.len() < params.key_size {
            return Err(Error::Format("the key value is shorter than the derived key".into()));
        }
        let salt = &header.bytes[1..1 + params.key_size];
        let mut key = SecretBytes::zeroed(params.key_size);
        hkdf(params.hkdf_hash, ikm.expose(), salt, associated_data, key.expose_mut())?;
        let mut prefix = [0u8; NONCE_PREFIX_LEN];
        prefix.copy_from_slice(&header.bytes[1 + params.key_size..]);
        Ok(Self { gcm: Gcm::new(key.expose())?, prefix, params: *params })
    }

    #[must_use]
    pub fn params(&self) -> &StreamParams {
        &self.params
    }

    fn nonce(&self, index: u64, last: bool) -> Result<[u8; GCM_NONCE_LEN]> {
        let counter =
            u32::try_from(index).map_err(|_| Error::Format("more than 2^32 segments".into()))?;
        let mut nonce = [0u8; GCM_NONCE_LEN];
        nonce[..NONCE_PREFIX_LEN].copy_from_slice(&self.prefix);
        nonce[NONCE_PREFIX_LEN..11].copy_from_slice(&counter.to_be_bytes());
        nonce[11] = u8::from(last);
        Ok(nonce)
    }

    /// Seals segment `index` in place: `segment` is the plaintext followed
    /// by 16 bytes of room for the tag.
    pub fn seal(&self, index: u64, last: bool, segment: &mut [u8]) -> Result<()> {
        let split = segment.len().checked_sub(TAG_LEN).ok_or(Error::Truncated)?;
        let (data, tag) = segment.split_at_mut(split);
        let sealed = self.gcm.seal(&self.nonce(index, last)?, &[], data)?;
        tag.copy_from_slice(&sealed);
        Ok(())
    }

    /// Opens segment `index` in place; the plaintext is the first
    /// `segment.len() - 16` bytes. A failure wipes them.
    pub fn open(&self, index: u64, last: bool, segment: &mut [u8]) -> Result<()> {
        let split = segment.len().checked_sub(TAG_LEN).ok_or(Error::Truncated)?;
        let (data, tag) = segment.split_at_mut(split);
        let mut expected = [0u8; TAG_LEN];
        expected.copy_from_slice(tag);
        self.gcm
            .open(&self.nonce(index, last)?, &[], data, &expected)
            .map_err(|_| Error::SegmentAuthentication { index, last })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn layout_matches_tink_sizes() {
        let p = StreamParams::new(4096).unwrap();
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.plaintext_len(0), 4096 - 40 - 16);
        assert_eq!(p.plaintext_len(1), 4080);
        assert_eq!(p.segment_count(0), 1);
        assert_eq!(p.stream_len(0), 56);
        assert_eq!(p.stream_len(4040), 4096);
        assert_eq!(p.stream_len(4041), 4096 + 17);
        for len in [0u64, 1, 4039, 4040, 4041, 4040 + 4080, 4040 + 4081, 1 << 20] {
            let (segments, plain) = p.layout(p.stream_len(len)).unwrap();
            assert_eq!((segments, plain), (p.segment_count(len), len), "{len}");
            let last = p.segment_of(len.saturating_sub(1));
            assert_eq!(last + 1, segments, "{len}");
        }
        assert!(matches!(p.layout(55), Err(Error::Truncated)));
        assert!(matches!(p.layout(4096 + 15), Err(Error::Truncated)));
        assert!(StreamParams::new(56).is_err());
        assert!(StreamParams::new(MAX_SEGMENT_SIZE + 1).is_err());
    }

    #[test]
    fn segments_are_bound_to_index_and_finality() {
        let p = StreamParams::new(4096).unwrap();
        let key = SecretBytes::from_slice(&[7u8; 32]);
        let header = StreamHeader::random(&p).unwrap();
        let cipher = SegmentCipher::new(&p, &key, &header, b"ad").unwrap();
        let mut seg = vec![1u8; 100];
        cipher.seal(3, false, &mut seg).unwrap();
        for (index, last) in [(3, true), (4, false)] {
            let mut copy = seg.clone();
            assert!(cipher.open(index, last, &mut copy).is_err());
            assert!(copy[..84].iter().all(|b| *b == 0), "wiped");
        }
        let other = SegmentCipher::new(&p, &key, &header, b"other ad").unwrap();
        assert!(other.open(3, false, &mut seg.clone()).is_err());
        cipher.open(3, false, &mut seg).unwrap();
        assert!(seg[..84].iter().all(|b| *b == 1));
    }
}
