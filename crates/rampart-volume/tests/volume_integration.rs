//! The volume crate's integration tests (the crypt layer against
//! cryptsetup, crash trials of every write path), one module per file
//! beside this one, built as a single test binary: one link (thin LTO)
//! instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod crash_data;
mod crash_encrypt_decrypt;
mod crash_headers;
mod crash_reencrypt;
mod crypt;
mod format;
mod header_backup;
mod integrity;
mod reencrypt_plan;
mod reencrypt_start;
mod stream;
