//! Rampart's file header: what precedes the Tink stream (see
//! `docs/src/file-format.md`).
//!
//! ```text
//! magic "RAMPFILE" | version 1 | hkdf hash | key size | BE32 segment size
//! | file id (16) | BE32 header length | stanza count | stanzas | HMAC-SHA256
//! stanza = type (1) | BE16 body length | body
//! ```
//!
//! The MAC key is HKDF-SHA256(file key, salt = file id, info =
//! "rampart-file/v1 header mac"); the MAC covers every byte before it. The
//! whole header, MAC included, is the Tink stream's associated data.

use rampart_crypto::{hkdf, hmac, HashAlg, SecretBytes};

use crate::stream::StreamParams;
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"RAMPFILE";
pub const VERSION: u8 = 1;
/// The file key (the Tink key value) length.
pub const FILE_KEY_LEN: usize = 32;
pub const FILE_ID_LEN: usize = 16;
const MAC_LEN: usize = 32;
/// magic, version, hash, key size, segment size, file id.
pub const PREAMBLE_LEN: usize = 8 + 1 + 1 + 1 + 4 + FILE_ID_LEN;
/// The preamble, the header length and the stanza count.
pub const FIXED_LEN: usize = PREAMBLE_LEN + 4 + 1;
/// Bounds what a header can make a reader allocate.
pub const MAX_HEADER_LEN: usize = 64 << 10;
pub const MAX_STANZAS: usize = 64;

/// A recipient stanza: a type and a body that wraps the file key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stanza {
    pub kind: u8,
    pub body: Vec<u8>,
}

/// A parsed (or built) Rampart file header.
#[derive(Debug, Clone)]
pub struct Header {
    pub params: StreamParams,
    pub file_id: [u8; FILE_ID_LEN],
    pub stanzas: Vec<Stanza>,
    /// The encoded header, MAC included.
    bytes: Vec<u8>,
}

fn hash_code(hash: HashAlg) -> Result<u8> {
    match hash {
        HashAlg::Sha1 => Ok(1),
        HashAlg::Sha256 => Ok(2),
        HashAlg::Sha512 => Ok(3),
        _ => Err(Error::Format("unsupported HKDF hash".into())),
    }
}

fn hash_from_code(code: u8) -> Result<HashAlg> {
    match code {
        1 => Ok(HashAlg::Sha1),
        2 => Ok(HashAlg::Sha256),
        3 => Ok(HashAlg::Sha512),
        other => Err(Error::Format(format!("unknown HKDF hash code {other}"))),
    }
}

fn encode_preamble(params: &StreamParams, file_id: &[u8; FILE_ID_LEN]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(PREAMBLE_LEN);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(hash_code(params.hkdf_hash)?);
    out.push(params.key_size as u8);
    out.extend_from_slice(&params.segment_size.to_be_bytes());
    out.extend_from_slice(file_id);
    Ok(out)
}

/// What every stanza's wrap is bound to: the preamble (format, parameters
/// and the random file id), so a stanza moved to another file, or a file
/// whose parameters were edited, does not unwrap.
#[must_use]
pub fn wrap_context(preamble: &[u8]) -> Vec<u8> {
    let mut text = b"rampart-file/v1 ".to_vec();
    for byte in preamble {
        text.extend_from_slice(format!("{byte:02x}").as_bytes());
    }
    text
}

fn mac_key(file_key: &SecretBytes, file_id: &[u8]) -> Result<SecretBytes> {
    let mut key = SecretBytes::zeroed(32);
    hkdf(
        HashAlg::Sha256,
        file_key.expose(),
        file_id,
        b"rampart-file/v1 header mac",
        key.expose_mut(),
    )?;
    Ok(key)
}

impl Header {
    /// The preamble of a new file, for wrapping the file key before the
    /// header is assembled.
    pub fn new_preamble(params: &StreamParams) -> Result<([u8; FILE_ID_LEN], Vec<u8>)> {
        let mut file_id = [0u8; FILE_ID_LEN];
        rampart_crypto::fill_random(&mut file_id)?;
        Ok((file_id, encode_preamble(params, &file_id)?))
    }

    /// Assembles and MACs a header.
    pub fn build(
        params: StreamParams,
        file_id: [u8; FILE_ID_LEN],
        stanzas: Vec<Stanza>,
        file_key: &SecretBytes,
    ) -> Result<Self> {
        if stanzas.is_empty() || stanzas.len() > MAX_STANZAS {
            return Err(Error::Format(format!("a file needs 1 to {MAX_STANZAS} recipients")));
        }
        let mut bytes = encode_preamble(&params, &file_id)?;
        let mut len = FIXED_LEN + MAC_LEN;
        for stanza in &stanzas {
            len += 3 + stanza.body.len();
        }
        if len > MAX_HEADER_LEN || stanzas.iter().any(|s| s.body.len() > usize::from(u16::MAX)) {
            return Err(Error::Format("the recipient stanzas are too large".into()));
        }
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.push(stanzas.len() as u8);
        for stanza in &stanzas {
            bytes.push(stanza.kind);
            bytes.extend_from_slice(&(stanza.body.len() as u16).to_be_bytes());
            bytes.extend_from_slice(&stanza.body);
        }
        let mac = hmac(HashAlg::Sha256, mac_key(file_key, &file_id)?.expose(), &bytes);
        bytes.extend_from_slice(mac.expose());
        debug_assert_eq!(bytes.len(), len);
        Ok(Self { params, file_id, stanzas, bytes })
    }

    /// Reads the fixed part of a header: returns the total header length
    /// so that the caller reads exactly the rest.
    pub fn total_len(fixed: &[u8; FIXED_LEN]) -> Result<usize> {
        if &fixed[..8] != MAGIC {
            return Err(Error::NotRampartFile);
        }
        if fixed[8] != VERSION {
            return Err(Error::UnsupportedVersion(fixed[8]));
        }
        let len = u32::from_be_bytes([
            fixed[PREAMBLE_LEN],
            fixed[PREAMBLE_LEN + 1],
            fixed[PREAMBLE_LEN + 2],
            fixed[PREAMBLE_LEN + 3],
        ]) as usize;
        if !(FIXED_LEN + MAC_LEN..=MAX_HEADER_LEN).contains(&len) {
            return Err(Error::Format(format!("header length {len} is out of range")));
        }
        Ok(len)
    }

    /// Parses a whole header (`bytes` = exactly [`Header::total_len`]
    /// bytes). The MAC is checked later, by [`Header::verify`], once a
    /// recipient has produced the file key.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let fixed: &[u8; FIXED_LEN] =
            bytes.get(..FIXED_LEN).and_then(|b| b.try_into().ok()).ok_or(Error::Truncated)?;
        if Self::total_len(fixed)? != bytes.len() {
            return Err(Error::Format("the header length does not match".into()));
        }
        let params = StreamParams {
            hkdf_hash: hash_from_code(bytes[9])?,
            key_size: usize::from(bytes[10]),
            segment_size: u32::from_be_bytes([bytes[11], bytes[12], bytes[13], bytes[14]]),
        };
        params.validate()?;
        let mut file_id = [0u8; FILE_ID_LEN];
        file_id.copy_from_slice(&bytes[15..15 + FILE_ID_LEN]);
        let count = usize::from(bytes[FIXED_LEN - 1]);
        if count == 0 {
            return Err(Error::Format("the header has no recipient stanza".into()));
        }
        let body_end = bytes.len() - MAC_LEN;
        let mut at = FIXED_LEN;
        let mut stanzas = Vec::with_capacity(count.min(MAX_STANZAS));
        for _ in 0..count {
            let head = bytes.get(at..at + 3).filter(|_| at + 3 <= body_end);
            let Some(head) = head else {
                return Err(Error::Format("a recipient stanza runs past the header".into()));
            };
            let len = usize::from(u16::from_be_bytes([head[1], head[2]]));
            let end = at + 3 + len;
            if end > body_end {
                return Err(Error::Format("a recipient stanza runs past the header".into()));
            }
            stanzas.push(Stanza { kind: head[0], body: bytes[at + 3..end].to_vec() });
            at = end;
        }
        if at != body_end {
            return Err(Error::Format("bytes left over after the recipient stanzas".into()));
        }
        Ok(Self { params, file_id, stanzas, bytes: bytes.to_vec() })
    }

    /// The bytes every stanza's wrap is bound to (see [`wrap_context`]).
    #[must_use]
    pub fn wrap_context(&self) -> Vec<u8> {
        wrap_context(&self.bytes[..PREAMBLE_LEN])
    }

    /// Checks the header MAC with a recovered file key.
    pub fn verify(&self, file_key: &SecretBytes) -> Result<()> {
        let split = self.bytes.len() - MAC_LEN;
        let expected =
            hmac(HashAlg::Sha256, mac_key(file_key, &self.file_id)?.expose(), &self.bytes[..split]);
        if expected != SecretBytes::from_slice(&self.bytes[split..]) {
            return Err(Error::HeaderModified);
        }
        Ok(())
    }

    /// The encoded header (the Tink stream's associated data).
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}
