//! The LUKS crate's integration tests (the header corpus, cryptsetup
//! interoperability, crash safety), one module per file beside this one,
//! built as a single test binary: one link (thin LTO) instead of one per
//! file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod api;
mod corpus;
mod corpus_cryptsetup;
mod crash;
mod interop;
mod keyslot_change;
mod new_keyslot_settings;
