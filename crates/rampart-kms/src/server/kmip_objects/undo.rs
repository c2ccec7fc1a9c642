//! Batch Error Continuation Undo (KMIP 1.4 §6.13, 2.1 §8.10): when an item
//! of such a batch fails, the items before it are undone. The session keeps
//! what undoing needs while the batch runs: each key's KMIP state as the
//! batch first found it (taken when an item first loads the key, before
//! anything changes it), and the keys the batch made. Undoing puts the
//! first back and removes the second, key by key, newest first.
//!
//! What can be put back is everything a key's rows hold: an object made
//! or registered (removed; a certificate Certify issued too), an
//! activation, attribute changes (the Certificate Link Certify and
//! Re-certify set), the new versions of Re-key, Re-key Key Pair and
//! Re-certify, a revocation, a destruction (the sealed material is kept
//! in the log until the batch ends and written back), the Digest and
//! Fresh a Get sets, a Usage Limits allocation. A Log entry is in the
//! append-only audit chain and a part of a stream changes connection
//! state, so a batch under Undo holding one of those, or Interop, is
//! refused whole before anything runs.

use rampart_kmip::enums::Operation;
use rampart_kmip::message::RequestBatchItem;
use rampart_kmip::payload::{CryptoRequest, StreamRequest};

use super::errors::{kms, R};
use crate::store::{KmipKeyState, Store};

/// What undoing a batch restores: per key, in the order the batch first
/// touched them, its state before (`None`: the batch made it).
#[derive(Debug, Default)]
pub(crate) struct UndoLog {
    keys: Vec<(String, Option<KmipKeyState>)>,
}

impl UndoLog {
    fn knows(&self, name: &str) -> bool {
        self.keys.iter().any(|(k, _)| k == name)
    }

    /// Before the batch first changes key `name`: its state, for undoing.
    pub(super) async fn remember(&mut self, store: &dyn Store, name: &str) -> R<()> {
        if self.knows(name) {
            return Ok(());
        }
        if let Some(earlier) = store.kmip_key_state(name.to_owned()).await.map_err(kms)? {
            self.keys.push((name.to_owned(), Some(earlier)));
        }
        Ok(())
    }

    /// The batch made key `name`: undoing removes it.
    pub(super) fn made(&mut self, name: &str) {
        self.keys.push((name.to_owned(), None));
    }

    /// Puts back every key the batch changed and removes every key it
    /// made, newest first.
    pub(super) async fn undo(self, store: &dyn Store) -> R<()> {
        for (name, earlier) in self.keys.into_iter().rev() {
            store.kmip_restore(name, earlier).await.map_err(kms)?;
        }
        Ok(())
    }
}

/// Whether `item` may run in a batch under Undo: whether what it changes
/// is what [`Session::undo`] puts back.
pub(crate) fn undoable(item: &RequestBatchItem) -> bool {
    match item.operation {
        Operation::LOG | Operation::INTEROP => false,
        Operation::MAC | Operation::MAC_VERIFY | Operation::HASH => {
            // A part of a stream opens, feeds or closes connection state.
            StreamRequest::parse(&item.payload).map_or(true, |r| !r.is_streamed())
        }
        Operation::ENCRYPT | Operation::DECRYPT => {
            CryptoRequest::parse(&item.payload).map_or(true, |r| !r.is_streamed())
        }
        _ => true,
    }
}
