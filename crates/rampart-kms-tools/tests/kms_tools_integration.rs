//! The key-manager tools' integration tests, one module per file beside
//! this one, built as a single test binary.
// A failed set-up step in a test should panic.
#![allow(clippy::unwrap_used)]

mod populate;
