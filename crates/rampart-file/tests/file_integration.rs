//! The file-encryption crate's integration tests (header mutations,
//! interoperability with Google Tink), one module per file beside this
//! one, built as a single test binary: one link instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used)]

mod file_header_mutations;
mod file_options;
mod file_tink_interop;
