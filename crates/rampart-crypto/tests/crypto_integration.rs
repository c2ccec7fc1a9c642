//! The crypto crate's integration tests (known-answer vectors,
//! differential tests against AWS-LC and pyca/cryptography), one module
//! per file beside this one, built as a single test binary: one link
//! instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used)]

mod asymmetric;
mod differential;
mod kat;
mod kat_ciphers;
