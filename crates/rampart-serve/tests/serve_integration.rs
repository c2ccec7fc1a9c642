//! The library-level tests of rampart-serve, one binary.
#![allow(clippy::unwrap_used)]

mod control;
mod heartbeat;
