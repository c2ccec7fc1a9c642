//! The streamed operations (Hash, MAC, MAC Verify, AES-GCM Encrypt) one
//! connection has open: a digest, HMAC or GCM context each, keyed by a
//! random Correlation Value, at most [`MAX_STREAMS`] at once.

use std::collections::HashMap;

use rampart_crypto::{fill_random, GcmStream, Hasher, Mac};
use rampart_kmip::enums::Operation;
use rampart_kmip::KmipError;

use super::errors::{crypto, R};

/// Streams one connection may have open at once.
pub(crate) const MAX_STREAMS: usize = 16;

/// Correlation Values are random, so one connection cannot guess another
/// stream's (they are per connection anyway).
const CORRELATION_LEN: usize = 16;

pub(super) enum Work {
    Hash(Box<Hasher>),
    // Boxed: an HMAC context is far larger than the map entry should be.
    Mac {
        mac: Box<Mac>,
        uid: String,
    },
    /// An AES-GCM encryption and the tag length it ends with.
    Gcm {
        gcm: Box<GcmStream>,
        uid: String,
        tag_len: usize,
    },
}

pub(super) struct Stream {
    pub(super) operation: Operation,
    pub(super) work: Work,
}

/// The streamed operations open on one connection.
#[derive(Default)]
pub(crate) struct Streams {
    open: HashMap<Vec<u8>, Stream>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Streams({} open)", self.open.len())
    }
}

impl Streams {
    pub(super) fn open(&mut self, operation: Operation, work: Work) -> R<Vec<u8>> {
        if self.open.len() >= MAX_STREAMS {
            return Err(KmipError::IllegalOperation(format!(
                "this connection already has {MAX_STREAMS} open streams: finish one first"
            )));
        }
        let mut id = vec![0u8; CORRELATION_LEN];
        fill_random(&mut id).map_err(crypto)?;
        self.open.insert(id.clone(), Stream { operation, work });
        Ok(id)
    }

    /// Puts back a stream [`Streams::take`] removed, under its own
    /// Correlation Value (it was counted when it opened).
    pub(super) fn put_back(&mut self, id: Vec<u8>, stream: Stream) {
        self.open.insert(id, stream);
    }

    pub(super) fn take(&mut self, operation: Operation, id: &[u8]) -> R<Stream> {
        // KMIP 1.4 §11.30-§11.38: no outstanding operation with the
        // Correlation Value is Item Not Found.
        let stream = self.open.remove(id).ok_or_else(|| {
            KmipError::ItemNotFound("the Correlation Value names no open stream".into())
        })?;
        if stream.operation != operation {
            let other = stream.operation;
            self.open.insert(id.to_vec(), stream);
            return Err(KmipError::InvalidField(format!(
                "the Correlation Value names a {other} stream, not {operation}"
            )));
        }
        Ok(stream)
    }
}
