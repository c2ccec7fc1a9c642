//! `librampart-pkcs11.so`: a PKCS#11 3.0 module whose tokens are Rampart
//! key managers. Applications that speak PKCS#11 (OpenSC's `pkcs11-tool`,
//! GnuTLS, p11-kit, Java's SunPKCS11, OpenSSL's pkcs11 engine, OpenSSH)
//! use managed keys through it without knowing where the keys live.
//!
//! One slot per configured key manager ([`config`]); its token's objects
//! are the symmetric keys, key pairs and certificates the client bundle's
//! identity may see. Every operation with a secret or private key runs on
//! the key manager over KMIP, through its policy and audit, under that
//! identity: the module never holds such a key. Digests and
//! `C_GenerateRandom` run locally.
//!
//! Layout: [`config`] reads the configuration; `calls` is what each
//! `C_*` function does, over Rust values; `token` keeps slots,
//! sessions and object handles; `objects` turns KMIP objects into PKCS#11
//! attributes; `mechanisms` parses mechanisms and their parameters;
//! `operations` runs them; `remote` is every KMIP request the module
//! sends, over a slot's `connection`s; `rv` maps every failure to its return code in one place. This
//! is safe Rust; the C ABI (the only `unsafe` of the crate) is `ffi.rs`.

mod calls;
pub mod config;
mod connection;
mod ffi;
mod mechanisms;
mod objects;
mod operations;
mod remote;
mod rv;
mod token;

/// The environment variable naming the configuration file.
pub const CONFIG_ENV: &str = "RAMPART_PKCS11_CONFIG";
/// The configuration file read when [`CONFIG_ENV`] is not set.
pub const DEFAULT_CONFIG: &str = "/etc/rampart/pkcs11.conf";
