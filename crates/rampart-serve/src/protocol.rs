//! The wire format of the control socket (see [`crate::control`]): one
//! JSON request line followed by the raw keys, answered by JSON event
//! lines. Both ends read lines of at most [`MAX_LINE`] bytes and keys of
//! at most [`MAX_KEY`] bytes, so a peer cannot make the other allocate
//! what it likes.

use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

use rampart_crypto::{HashAlg, SecretBytes};
use rampart_luks::{PbkdfChoice, Resilience};
use serde::{Deserialize, Serialize};

use crate::error::ServeError;

/// Where servers put their control sockets.
pub const CONTROL_DIR: &str = "/run/rampart/control";

/// The longest request or answer line.
pub const MAX_LINE: u64 = 4096;
/// The largest volume key a request may carry.
pub const MAX_KEY: usize = 512;

/// The control socket of the volume with this LUKS UUID.
#[must_use]
pub fn socket_path(uuid: &str) -> PathBuf {
    Path::new(CONTROL_DIR).join(format!("{uuid}.sock"))
}

/// The request line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) op: String,
    pub(crate) old_key_bytes: usize,
    pub(crate) new_key_bytes: usize,
    pub(crate) hotzone_size: Option<u64>,
    pub(crate) stop_after: Option<u64>,
    #[serde(default)]
    pub(crate) decrypt_attached: Option<DecryptAttached>,
}

impl Request {
    /// Writes the request line and the keys.
    pub(crate) fn send(
        &self,
        stream: &mut impl Write,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
    ) -> io::Result<()> {
        let mut message = serde_json::to_vec(self).map_err(io::Error::other)?;
        message.push(b'\n');
        stream.write_all(&message)?;
        stream.write_all(old_key.expose())?;
        stream.write_all(new_key.expose())
    }

    /// Reads a request line and its keys: the old and the new volume key.
    pub(crate) fn receive(
        reader: &mut impl BufRead,
    ) -> Result<(Self, SecretBytes, SecretBytes), ServeError> {
        let mut line = Vec::new();
        reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut line)?;
        let request: Self = serde_json::from_slice(&line).map_err(ServeError::MalformedRequest)?;
        let old_key = read_key(reader, request.old_key_bytes)?;
        let new_key = read_key(reader, request.new_key_bytes)?;
        Ok((request, old_key, new_key))
    }

    /// How the run of a `reencrypt` request goes.
    pub(crate) fn run_options(&self) -> RunOptions {
        RunOptions { hotzone_size: self.hotzone_size, stop_after: self.stop_after }
    }
}

/// What a `reencrypt` request asks of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The largest hotzone (default: the reencryption's own).
    pub hotzone_size: Option<u64>,
    /// Stop cleanly after this many hotzones.
    pub stop_after: Option<u64>,
}

/// A volume key of `len` bytes; 0 for the plaintext side of an
/// encryption or a decryption (the header says which side has no key).
fn read_key(reader: &mut impl Read, len: usize) -> Result<SecretBytes, ServeError> {
    if len > MAX_KEY {
        return Err(ServeError::KeyTooLong(len));
    }
    let mut key = SecretBytes::zeroed(len);
    reader.read_exact(key.expose_mut()).map_err(ServeError::RequestEnded)?;
    Ok(key)
}

/// A `decrypt-attached` request: how to start moving the data of a volume
/// with an attached header down over it (see
/// [`rampart_volume::reencrypt::start_decrypt_shift`]).
#[derive(Debug, Serialize, Deserialize)]
pub struct DecryptAttached {
    /// The header file to create: absolute, since the server's working
    /// directory is not the requester's.
    pub header: PathBuf,
    /// `checksum` (with its hash) or `journal`.
    pub resilience: String,
    pub resilience_hash: Option<String>,
    /// The hash of the reencryption digest, and whether its PBKDF2 cost
    /// is the minimum (the requester forced the KDF costs).
    pub digest_hash: String,
    pub quick_digest: bool,
}

fn hash(name: &str) -> Result<HashAlg, ServeError> {
    HashAlg::from_name(name).ok_or_else(|| ServeError::UnknownHash(name.to_owned()))
}

impl DecryptAttached {
    /// The request to export the header to `header` (absolute) with the
    /// moved chunk under `resilience` and a reencryption digest of `pbkdf`:
    /// what [`Self::resilience`] and [`Self::pbkdf`] read back on the server.
    #[must_use]
    pub fn new(header: PathBuf, resilience: &Resilience, pbkdf: &PbkdfChoice) -> Self {
        let (name, resilience_hash) = match resilience {
            Resilience::Checksum { hash, .. } => ("checksum", Some(hash.name().to_owned())),
            other => (other.name(), None),
        };
        Self {
            header,
            resilience: name.to_owned(),
            resilience_hash,
            digest_hash: pbkdf.hash.name().to_owned(),
            quick_digest: pbkdf.forced_iterations.is_some(),
        }
    }

    pub(crate) fn resilience(&self) -> Result<Resilience, ServeError> {
        Ok(match self.resilience.as_str() {
            "checksum" => Resilience::Checksum {
                hash: hash(self.resilience_hash.as_deref().unwrap_or("sha256"))?,
                // The moved chunk's checksum blocks, whatever the sector
                // size, as cryptsetup writes them.
                block_size: 4096,
            },
            "journal" => Resilience::Journal,
            other => return Err(ServeError::ResilienceCannotMove(other.to_owned())),
        })
    }

    pub(crate) fn pbkdf(&self) -> Result<PbkdfChoice, ServeError> {
        Ok(PbkdfChoice {
            hash: hash(&self.digest_hash)?,
            // Only whether the cost is forced matters to the digest.
            forced_iterations: self.quick_digest.then_some(1000),
            ..PbkdfChoice::default()
        })
    }
}

/// One line of a server's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Progress {
        done: u64,
        total: u64,
    },
    Finished {
        total: u64,
    },
    Stopped {
        done: u64,
        total: u64,
    },
    /// A `decrypt-attached` request's step is done: the volume is served
    /// through the new header, its decryption recorded there.
    Initialised,
    Error {
        message: String,
    },
}

impl Event {
    /// Writes the event as one line.
    pub(crate) fn send(&self, stream: &mut impl Write) -> io::Result<()> {
        let mut line = serde_json::to_vec(self).map_err(io::Error::other)?;
        line.push(b'\n');
        stream.write_all(&line)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn attached(resilience: &str, hash: Option<&str>, digest: &str) -> DecryptAttached {
        DecryptAttached {
            header: PathBuf::from("/tmp/header"),
            resilience: resilience.into(),
            resilience_hash: hash.map(str::to_owned),
            digest_hash: digest.into(),
            quick_digest: true,
        }
    }

    #[test]
    fn requests_round_trip_with_their_keys() {
        let request = Request {
            op: "reencrypt".into(),
            old_key_bytes: 3,
            new_key_bytes: 2,
            hotzone_size: Some(1 << 20),
            stop_after: None,
            decrypt_attached: None,
        };
        let mut wire = Vec::new();
        request
            .send(&mut wire, &SecretBytes::from_slice(b"old"), &SecretBytes::from_slice(b"nw"))
            .unwrap();
        let (back, old, new) = Request::receive(&mut wire.as_slice()).unwrap();
        assert_eq!(back.op, "reencrypt");
        assert_eq!(
            back.run_options(),
            RunOptions { hotzone_size: Some(1 << 20), stop_after: None }
        );
        assert_eq!((old.expose(), new.expose()), (&b"old"[..], &b"nw"[..]));
    }

    #[test]
    fn keys_longer_than_the_bound_or_cut_short_are_refused() {
        let line = |old: usize| {
            format!(
                "{{\"op\":\"reencrypt\",\"old_key_bytes\":{old},\"new_key_bytes\":0,\
                 \"hotzone_size\":null,\"stop_after\":null}}\n"
            )
        };
        let too_long = line(MAX_KEY + 1);
        let error = Request::receive(&mut too_long.as_bytes()).unwrap_err();
        assert_eq!(error.to_string(), format!("a volume key of {} bytes", MAX_KEY + 1));
        let mut short = line(MAX_KEY).into_bytes();
        short.extend_from_slice(&[7; 10]);
        let error = Request::receive(&mut short.as_slice()).unwrap_err();
        assert!(matches!(error, ServeError::RequestEnded(_)), "{error}");
        let mut exact = line(MAX_KEY).into_bytes();
        exact.extend_from_slice(&[7; MAX_KEY]);
        let (_, old, new) = Request::receive(&mut exact.as_slice()).unwrap();
        assert_eq!((old.len(), new.len()), (MAX_KEY, 0));
    }

    #[test]
    fn malformed_and_oversize_lines_are_refused() {
        let error = Request::receive(&mut &b"{not json\n"[..]).unwrap_err();
        assert!(crate::error::chain(&error).starts_with("a malformed request: "), "{error}");
        // A line that does not end within the bound is cut there, which
        // leaves no complete JSON.
        let mut long = b"{\"op\":\"".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_LINE as usize * 4));
        long.extend_from_slice(b"\"}\n");
        let error = Request::receive(&mut long.as_slice()).unwrap_err();
        assert!(matches!(error, ServeError::MalformedRequest(_)), "{error}");
    }

    #[test]
    fn a_decryption_start_names_a_resilience_that_can_move_data() {
        let checksum = attached("checksum", None, "sha256").resilience().unwrap();
        assert_eq!(checksum, Resilience::Checksum { hash: HashAlg::Sha256, block_size: 4096 });
        assert_eq!(attached("journal", None, "sha256").resilience().unwrap(), Resilience::Journal);
        assert_eq!(
            attached("none", None, "sha256").resilience().unwrap_err().to_string(),
            "resilience none cannot protect a decryption that moves the data (checksum or journal), as in cryptsetup"
        );
        assert_eq!(
            attached("checksum", Some("md4"), "sha256").resilience().unwrap_err().to_string(),
            "unknown hash 'md4'"
        );
        let pbkdf = attached("journal", None, "sha512").pbkdf().unwrap();
        assert_eq!((pbkdf.hash, pbkdf.forced_iterations), (HashAlg::Sha512, Some(1000)));
        assert!(attached("journal", None, "crc").pbkdf().is_err());
    }

    #[test]
    fn events_are_tagged_lines() {
        let mut wire = Vec::new();
        Event::Progress { done: 1, total: 2 }.send(&mut wire).unwrap();
        assert_eq!(wire, b"{\"event\":\"progress\",\"done\":1,\"total\":2}\n");
    }
}
