//! The one error type of the key manager, and the one place where errors
//! become HTTP status codes ([`KmsError::status`]).
//!
//! No variant ever carries key material, shares or private keys: messages
//! are built from names, versions and fixed descriptions only.

/// Everything that can go wrong in the key manager.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KmsError {
    /// The request is malformed or a field is out of bounds.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The request body is larger than the server accepts.
    #[error("request body too large (at most {0} bytes)")]
    PayloadTooLarge(usize),
    /// The client identity made more requests than its rate limit allows;
    /// it may retry after `retry_after` seconds.
    #[error("rate limit exceeded: retry in {retry_after} s")]
    RateLimited { retry_after: u64 },
    /// No such endpoint.
    #[error("no such endpoint: {0}")]
    NoRoute(String),
    /// The endpoint exists but not with this method; `allow` lists the
    /// methods it takes (the `Allow` header).
    #[error("method not allowed for {target} (allowed: {allow})")]
    MethodNotAllowed { target: String, allow: &'static str },
    /// The client certificate is valid for the deployment CA but belongs to
    /// no registered client.
    #[error("unknown client certificate")]
    UnknownClient,
    /// The client's certificate was revoked by an admin.
    #[error("client {name} was revoked: {reason}")]
    ClientRevoked { name: String, reason: String },
    /// The client is known but not allowed to do this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    Conflict(String),
    /// The key (or the version asked for) is revoked.
    #[error("key {name} version {version} is revoked")]
    KeyRevoked { name: String, version: u32 },
    /// The key material was destroyed (crypto-shredded).
    #[error("key {name} version {version} is destroyed")]
    KeyDestroyed { name: String, version: u32 },
    /// The ciphertext was modified, the context differs, or it belongs to
    /// another key.
    #[error("unwrap failed: the ciphertext or its context does not authenticate")]
    UnwrapFailed,
    /// The server holds no root key yet.
    #[error("the key manager is sealed")]
    Sealed,
    /// Unseal shares or an unseal key that do not reconstruct the root key.
    #[error("unseal failed: {0}")]
    UnsealFailed(String),
    /// The store (database) failed or is unreachable.
    #[error("store unavailable: {0}")]
    Store(String),
    /// Stored data that does not parse: a damaged or foreign database.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// Certificates and TLS configuration.
    #[error("certificate error: {0}")]
    Certificate(String),
    /// Deployment files (data directory, bundles, unseal key files).
    #[error("{0}")]
    Config(String),
    /// A cryptographic operation failed unexpectedly.
    #[error("crypto failure: {0}")]
    Crypto(String),
}

impl KmsError {
    /// The HTTP status the API answers with for this error.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidRequest(_) | Self::UnwrapFailed => 400,
            Self::UnknownClient => 401,
            Self::ClientRevoked { .. } => 403,
            Self::Forbidden(_) | Self::KeyRevoked { .. } | Self::UnsealFailed(_) => 403,
            Self::NotFound(_) | Self::NoRoute(_) => 404,
            Self::MethodNotAllowed { .. } => 405,
            Self::Conflict(_) => 409,
            Self::KeyDestroyed { .. } => 410,
            Self::PayloadTooLarge(_) => 413,
            Self::RateLimited { .. } => 429,
            Self::Sealed | Self::Store(_) => 503,
            Self::Corrupt(_) | Self::Certificate(_) | Self::Config(_) | Self::Crypto(_) => 500,
        }
    }

    /// A stable machine-readable code for the API's error bodies.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::RateLimited { .. } => "rate_limited",
            Self::NoRoute(_) => "no_route",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::UnknownClient => "unknown_client",
            Self::ClientRevoked { .. } => "client_revoked",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::KeyRevoked { .. } => "key_revoked",
            Self::KeyDestroyed { .. } => "key_destroyed",
            Self::UnwrapFailed => "unwrap_failed",
            Self::Sealed => "sealed",
            Self::UnsealFailed(_) => "unseal_failed",
            Self::Store(_) => "store_unavailable",
            Self::Corrupt(_) => "corrupt_store",
            Self::Certificate(_) => "certificate",
            Self::Config(_) => "config",
            Self::Crypto(_) => "crypto",
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidRequest(message.into())
    }
}

impl From<rampart_crypto::CryptoError> for KmsError {
    fn from(error: rampart_crypto::CryptoError) -> Self {
        // CryptoError never carries key material.
        Self::Crypto(error.to_string())
    }
}

impl From<rusqlite::Error> for KmsError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Store(format!("sqlite: {error}"))
    }
}

impl From<tokio_postgres::Error> for KmsError {
    fn from(error: tokio_postgres::Error) -> Self {
        match error.as_db_error() {
            Some(db) => Self::Store(format!("postgresql: {} ({})", db.message(), db.code().code())),
            None => Self::Store(format!("postgresql: {error}")),
        }
    }
}

impl From<rcgen::Error> for KmsError {
    fn from(error: rcgen::Error) -> Self {
        Self::Certificate(error.to_string())
    }
}

impl From<rampart_kms_client::ConfigError> for KmsError {
    /// The client crate's errors are the key manager's own, found on the
    /// client side: each becomes the variant of the same text.
    fn from(error: rampart_kms_client::ConfigError) -> Self {
        use rampart_kms_client::ConfigError;
        match error {
            ConfigError::Invalid(message) => Self::InvalidRequest(message),
            ConfigError::Certificate(message) => Self::Certificate(message),
            ConfigError::Config(message) => Self::Config(message),
            ConfigError::Crypto(message) => Self::Crypto(message),
            // Already formatted (a KmsError of the admin client's).
            other => Self::Config(other.to_string()),
        }
    }
}

impl From<KmsError> for rampart_kms_client::ClientError {
    /// A check of the admin client (a name, an argument, a key pair),
    /// failing before the request: its text and status are kept.
    fn from(error: KmsError) -> Self {
        use rampart_kms_client::ConfigError;
        Self::Config(match error {
            KmsError::InvalidRequest(message) => ConfigError::Invalid(message),
            KmsError::Certificate(message) => ConfigError::Certificate(message),
            KmsError::Config(message) => ConfigError::Config(message),
            KmsError::Crypto(message) => ConfigError::Crypto(message),
            other => ConfigError::Other { status: other.status(), message: other.to_string() },
        })
    }
}

/// The result type of the key manager.
pub type Result<T, E = KmsError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_a_status() {
        let cases = [
            (KmsError::invalid("x"), 400),
            (KmsError::UnknownClient, 401),
            (KmsError::Forbidden("x".into()), 403),
            (KmsError::KeyDestroyed { name: "k".into(), version: 1 }, 410),
            (KmsError::Sealed, 503),
            (KmsError::Store("down".into()), 503),
            (KmsError::Corrupt("x".into()), 500),
        ];
        for (error, status) in cases {
            assert_eq!(error.status(), status, "{error}");
        }
    }

    #[test]
    fn client_errors_keep_their_text_and_status_both_ways() {
        use rampart_kms_client::{ClientError, ConfigError};
        for error in [
            KmsError::invalid("x"),
            KmsError::Certificate("bundle: y".into()),
            KmsError::Config("z".into()),
            KmsError::Crypto("w".into()),
            KmsError::Store("cannot write the export: v".into()),
        ] {
            let client = ClientError::from(error.clone());
            assert_eq!(client.to_string(), error.to_string());
            let ClientError::Config(config) = client else { panic!("{error}") };
            assert_eq!(config.status(), error.status(), "{error}");
            if !matches!(config, ConfigError::Other { .. }) {
                assert_eq!(KmsError::from(config), error);
            }
        }
    }
}
