//! Rampart's file encryption.
//!
//! A file is a small versioned header ([`header`]: magic, parameters,
//! recipient stanzas each wrapping the file key, a MAC) followed by a body
//! in Tink's AES-GCM-HKDF streaming AEAD format ([`stream`]) keyed by the
//! file key, with the header as associated data. The body therefore
//! decrypts with Google Tink given the file key, and header edits,
//! truncation, extension, reordering and segment swaps are all detected.
//! The format is specified in `docs/src/file-format.md`.
//!
//! [`openssl`] reads `openssl enc` files, for migration.
#![forbid(unsafe_code)]

pub mod header;
pub mod openssl;
pub mod output;
mod pipeline;
pub mod recipient;
pub mod stream;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

use rampart_crypto::SecretBytes;

pub use header::{Header, Stanza};
pub use recipient::{Identity, Passphrase, RawKey, Recipient, UnwrapFailure};
pub use stream::{SegmentCipher, StreamHeader, StreamParams};

/// The default ciphertext segment size (1 MiB), as Tink's recommended
/// templates use.
pub const DEFAULT_SEGMENT_SIZE: u32 = 1 << 20;

/// The smallest ciphertext segment a new file may have.
pub const MIN_SEGMENT_SIZE: u32 = 4096;

/// The segment size of a new file asked for as `requested` bytes, when it
/// lies from [`MIN_SEGMENT_SIZE`] to [`stream::MAX_SEGMENT_SIZE`].
#[must_use]
pub fn new_segment_size(requested: u64) -> Option<u32> {
    u32::try_from(requested)
        .ok()
        .filter(|s| (MIN_SEGMENT_SIZE..=stream::MAX_SEGMENT_SIZE).contains(s))
}

/// Everything that can go wrong. Messages are one line and hold no secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("not a Rampart encrypted file (no RAMPFILE magic)")]
    NotRampartFile,
    #[error("unsupported Rampart file format version {0} (this build reads version 1)")]
    UnsupportedVersion(u8),
    #[error("malformed file: {0}")]
    Format(String),
    #[error("the file header was modified (its MAC does not match)")]
    HeaderModified,
    #[error("the file is truncated")]
    Truncated,
    #[error("{}", segment_message(*index, *last))]
    SegmentAuthentication { index: u64, last: bool },
    #[error("no given key opens this file: {reasons}")]
    NoKey { reasons: String, runtime: bool },
    #[error("{0}")]
    OpensslFormat(String),
    #[error("bad decrypt: wrong passphrase, cipher or key derivation options, or a damaged file (openssl enc files are not authenticated)")]
    OpensslBadDecrypt,
    #[error(transparent)]
    Crypto(#[from] rampart_crypto::CryptoError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn segment_message(index: u64, last: bool) -> String {
    if last {
        format!(
            "segment {index} (the last) failed authentication: the file was truncated, extended or modified"
        )
    } else {
        format!(
            "segment {index} failed authentication: the file was modified, reordered, mixed with another file or truncated"
        )
    }
}

impl Error {
    /// Whether the user (or an attacker) is to blame, rather than the
    /// machine: exit status 2 rather than 1 in the binary.
    #[must_use]
    pub fn is_data_error(&self) -> bool {
        match self {
            Self::Io(_) => false,
            Self::NoKey { runtime, .. } => !runtime,
            _ => true,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// What an encryption or decryption did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub plaintext_bytes: u64,
    pub ciphertext_bytes: u64,
    pub segments: u64,
}

impl Summary {
    /// Plaintext MiB per second over `seconds` (0 for no time at all).
    #[must_use]
    pub fn mib_per_second(&self, seconds: f64) -> f64 {
        if seconds > 0.0 {
            self.plaintext_bytes as f64 / seconds / 1_048_576.0
        } else {
            0.0
        }
    }
}

/// Progress: called with the plaintext bytes just handled.
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// Encrypts `input` to `output` for `recipients`, streaming with constant
/// memory and sealing segments on every core. The recipients wrap the file
/// key before anything is written (a refusal writes nothing).
pub fn encrypt(
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
    recipients: &[&dyn Recipient],
    segment_size: u32,
    progress: Progress<'_>,
) -> Result<Summary> {
    let params = StreamParams::new(segment_size)?;
    let file_key = rampart_crypto::random_secret(header::FILE_KEY_LEN)?;
    let (file_id, preamble) = Header::new_preamble(&params)?;
    let context = header::wrap_context(&preamble);
    let mut stanzas = Vec::with_capacity(recipients.len());
    for recipient in recipients {
        stanzas.push(Stanza { kind: recipient.kind(), body: recipient.wrap(&file_key, &context)? });
    }
    let header = Header::build(params, file_id, stanzas, &file_key)?;
    let stream_header = StreamHeader::random(&params)?;
    let cipher = SegmentCipher::new(&params, &file_key, &stream_header, header.as_bytes())?;
    output.write_all(header.as_bytes())?;
    output.write_all(stream_header.as_bytes())?;
    let mut summary = pipeline::encrypt(&cipher, input, output, progress)?;
    summary.ciphertext_bytes += (header.as_bytes().len() + stream_header.as_bytes().len()) as u64;
    Ok(summary)
}

/// A file whose key has been recovered, positioned at its first segment.
#[derive(Debug)]
pub struct Opened {
    pub header: Header,
    cipher: SegmentCipher,
    /// The Rampart header's length (where the Tink stream starts).
    pub stream_start: u64,
    /// Which identity opened it.
    pub opened_by: String,
}

fn read_exact_or_truncated(input: &mut dyn Read, buf: &mut [u8]) -> Result<()> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::Truncated
        } else {
            Error::Io(e)
        }
    })
}

/// Reads and parses the header (bounded), without opening it.
pub fn read_header(input: &mut dyn Read) -> Result<Header> {
    let mut fixed = [0u8; header::FIXED_LEN];
    match read_exact_or_truncated(input, &mut fixed[..8]) {
        Err(Error::Truncated) => return Err(Error::NotRampartFile),
        other => other?,
    }
    if &fixed[..8] != header::MAGIC {
        return Err(Error::NotRampartFile);
    }
    read_exact_or_truncated(input, &mut fixed[8..])?;
    let total = Header::total_len(&fixed)?;
    let mut bytes = fixed.to_vec();
    bytes.resize(total, 0);
    read_exact_or_truncated(input, &mut bytes[header::FIXED_LEN..])?;
    Header::parse(&bytes)
}

/// Recovers the file key with the first identity that opens a stanza and
/// checks the header MAC with it. Returns the key and who opened it.
pub fn unlock(header: &Header, identities: &[&dyn Identity]) -> Result<(SecretBytes, String)> {
    let context = header.wrap_context();
    let mut reasons = Vec::new();
    let mut runtime = false;
    for (number, stanza) in header.stanzas.iter().enumerate() {
        for identity in identities.iter().filter(|i| i.kind() == stanza.kind) {
            match identity.unwrap(&stanza.body, &context) {
                Ok(key) if key.len() == header::FILE_KEY_LEN => {
                    header.verify(&key)?;
                    return Ok((key, identity.describe()));
                }
                Ok(_) => {
                    reasons.push(format!("stanza {number}: the unwrapped key has the wrong length"))
                }
                Err(failure) => {
                    runtime |= failure.runtime;
                    reasons.push(format!(
                        "stanza {number} ({}): {}",
                        identity.describe(),
                        failure.message
                    ));
                }
            }
        }
    }
    if reasons.is_empty() {
        let kinds: Vec<&str> = header.stanzas.iter().map(|s| stanza_name(s.kind)).collect();
        reasons.push(format!(
            "the file has no stanza for the keys given (its recipients: {})",
            kinds.join(", ")
        ));
    }
    Err(Error::NoKey { reasons: reasons.join("; "), runtime })
}

/// Reads the header, recovers the file key ([`unlock`]) and reads the
/// stream header: `input` is then at the first segment.
pub fn open(input: &mut dyn Read, identities: &[&dyn Identity]) -> Result<Opened> {
    let header = read_header(input)?;
    let (file_key, opened_by) = unlock(&header, identities)?;
    let mut stream_bytes = vec![0u8; header.params.header_len()];
    read_exact_or_truncated(input, &mut stream_bytes)?;
    let stream_header = StreamHeader::parse(&header.params, &stream_bytes)?;
    let cipher = SegmentCipher::new(&header.params, &file_key, &stream_header, header.as_bytes())?;
    let stream_start = header.as_bytes().len() as u64;
    Ok(Opened { header, cipher, stream_start, opened_by })
}

/// The name of a stanza type, for messages.
#[must_use]
pub fn stanza_name(kind: u8) -> &'static str {
    match kind {
        recipient::STANZA_PASSPHRASE => "passphrase",
        recipient::STANZA_RAW_KEY => "raw key",
        recipient::STANZA_KMS => "key manager",
        _ => "unknown",
    }
}

impl Opened {
    /// Decrypts the rest of the stream (read from where [`open`] left
    /// `input`) to `output`. Only authenticated segments are written: on a
    /// failure the output holds a prefix of whole, authentic segments.
    pub fn decrypt(
        &self,
        input: &mut (dyn Read + Send),
        output: &mut (dyn Write + Send),
        progress: Progress<'_>,
    ) -> Result<Summary> {
        let window = pipeline::Window { first: 0, to_stream_end: true, skip: 0, limit: u64::MAX };
        pipeline::decrypt(&self.cipher, input, output, &window, progress)
    }

    /// The plaintext length of a file of `file_len` bytes.
    pub fn plaintext_len(&self, file_len: u64) -> Result<u64> {
        let stream_len = file_len.checked_sub(self.stream_start).ok_or(Error::Truncated)?;
        Ok(self.header.params.layout(stream_len)?.1)
    }

    /// Decrypts `length` bytes of plaintext from `offset`, reading only the
    /// segments that hold them. Returns the bytes written.
    pub fn decrypt_range(
        &self,
        file: &mut File,
        offset: u64,
        length: u64,
        output: &mut (dyn Write + Send),
        progress: Progress<'_>,
    ) -> Result<Summary> {
        let params = self.header.params;
        let file_len = file.metadata()?.len();
        let stream_len = file_len.checked_sub(self.stream_start).ok_or(Error::Truncated)?;
        let (segments, plaintext) = params.layout(stream_len)?;
        if offset > plaintext {
            return Err(Error::Format(format!(
                "offset {offset} is past the end of the plaintext ({plaintext} bytes)"
            )));
        }
        let length = length.min(plaintext - offset);
        if length == 0 {
            return Ok(Summary::default());
        }
        let first = params.segment_of(offset);
        let end = params.segment_of(offset + length - 1) + 1;
        let to_stream_end = end == segments;
        let start = self.stream_start + params.ciphertext_offset(first);
        let stop = if to_stream_end {
            file_len
        } else {
            self.stream_start + params.ciphertext_offset(end)
        };
        file.seek(SeekFrom::Start(start))?;
        let mut limited = Read::take(&mut *file, stop - start);
        let window = pipeline::Window {
            first,
            to_stream_end,
            skip: offset - params.plaintext_offset(first),
            limit: length,
        };
        pipeline::decrypt(&self.cipher, &mut limited, output, &window, progress)
    }

    /// The recovered stream's parameters.
    #[must_use]
    pub fn params(&self) -> &StreamParams {
        self.cipher.params()
    }
}

/// Encrypts a bare Tink AES-GCM-HKDF stream (no Rampart header): what
/// Tink's `StreamingAead` produces for key value `ikm` and `associated_data`.
pub fn encrypt_stream(
    params: &StreamParams,
    ikm: &SecretBytes,
    associated_data: &[u8],
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
) -> Result<Summary> {
    params.validate()?;
    let stream_header = StreamHeader::random(params)?;
    let cipher = SegmentCipher::new(params, ikm, &stream_header, associated_data)?;
    output.write_all(stream_header.as_bytes())?;
    let mut summary = pipeline::encrypt(&cipher, input, output, &|_| {})?;
    summary.ciphertext_bytes += stream_header.as_bytes().len() as u64;
    Ok(summary)
}

/// Decrypts a bare Tink AES-GCM-HKDF stream (as Tink's `StreamingAead`
/// writes it) with key value `ikm` and `associated_data`.
pub fn decrypt_stream(
    params: &StreamParams,
    ikm: &SecretBytes,
    associated_data: &[u8],
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
) -> Result<Summary> {
    params.validate()?;
    let mut stream_bytes = vec![0u8; params.header_len()];
    read_exact_or_truncated(input, &mut stream_bytes)?;
    let stream_header = StreamHeader::parse(params, &stream_bytes)?;
    let cipher = SegmentCipher::new(params, ikm, &stream_header, associated_data)?;
    let window = pipeline::Window { first: 0, to_stream_end: true, skip: 0, limit: u64::MAX };
    pipeline::decrypt(&cipher, input, output, &window, &|_| {})
}
