//! What the tests of every crate share, so each is written once: scratch
//! directories ([`TempDir`]), cheap keyslots ([`fast_pbkdf2`]), the PostgreSQL cluster the key manager's
//! tests run on ([`PgCluster`]), finding the real programs the tests drive
//! ([`tool`]), and the NBD wire format from a client's side ([`nbd`]).
//!
//! Only ever a dev-dependency: nothing here is part of a shipped crate.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::missing_panics_doc)]

pub mod nbd;
mod pbkdf;
mod postgres;
mod tempdir;
mod tools;

pub use pbkdf::fast_pbkdf2;
pub use postgres::{psql, PgCluster};
pub use tempdir::TempDir;
pub use tools::tool;
