//! What unlocking a volume through Rampart's key manager needs, and
//! nothing else: the client bundle ([`bundle`]), the `rampart-kms` LUKS2
//! token and the unwrap of its keyslot passphrase ([`binding`]), the
//! header of wrapped ciphertexts ([`wrapped`]), the key-name rule
//! ([`names`]), the mutual-TLS, failover HTTP client of the key
//! servers ([`transport`]) and their KMIP client ([`kmip`]).
//!
//! The key manager (`rampart-kms`: server, stores, admin client) builds
//! on this crate; cryptsetup's token plugin and `rampart unlock` use it
//! to unlock, so both derive the same passphrase by the same code, and
//! the plugin carries no server, database or HSM code.
//!
//! No private key, passphrase or unwrapped secret is ever logged or
//! shown by `Debug`.
#![forbid(unsafe_code)]

pub mod binding;
pub mod bundle;
pub mod error;
pub mod kmip;
pub mod names;
pub mod transport;
pub mod wrapped;

pub use bundle::{Bundle, Endpoint};
pub use error::{ClientError, ConfigError};
pub use names::check_name;
pub use transport::{crypto_provider, kmip_crypto_provider, Body, Method, RetryPolicy, Transport};
pub use wrapped::WrappedHeader;
