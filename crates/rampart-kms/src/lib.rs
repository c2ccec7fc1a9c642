//! Rampart's key manager: a key management server with a sealed root of
//! trust, mutual-TLS REST API, per-key access policies, a hash-chained
//! audit log, and SQLite (default) or PostgreSQL (active-active) storage;
//! plus the admin client library with failover across servers.
//!
//! What unlocking needs (bundles, the `rampart-kms` token, the unwrap,
//! the client transport) is the `rampart-kms-client` crate, re-exported
//! here as [`bundle`] and [`binding`].
//!
//! * [`init`] creates a deployment: root key (unseal key file, Shamir
//!   shares, or a non-extractable key generated in a PKCS#11 token:
//!   [`hsm`]), CA, server certificate and the admin bundle.
//! * [`server`] serves the API.
//! * [`client::KmsClient`] talks to it with a [`Bundle`].
//!
//! No root key, share, key material or private key is ever logged or
//! shown by `Debug`.
#![forbid(unsafe_code)]
#![recursion_limit = "512"]

pub mod audit;
pub mod error;
pub mod hsm;
pub mod keys;
pub mod model;
pub mod pki;
pub mod shamir;
pub mod store;

pub use bundle::{Bundle, Endpoint};
pub use error::{KmsError, Result};
pub use rampart_kms_client::{binding, bundle, kmip};
pub mod client;
pub mod deployment;
pub mod server;
#[cfg(feature = "testing")]
pub mod testing;
