//! The NBD crate's integration tests, one module per file beside this one,
//! built as a single test binary: an in-memory client against the
//! handshake and the transmission phase, libnbd against a served Unix
//! socket, and crash trials of a served device.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client;
mod crash_served;
mod handshake;
mod libnbd_client;
mod transmission;
