//! One test binary for the unlock crate's integration tests: a real key
//! server in-process, real LUKS2 headers in memory.
#![allow(clippy::unwrap_used)]

mod common;

mod binding;
mod file_recipient;
mod key_source;
mod reencrypt_keyslots;
