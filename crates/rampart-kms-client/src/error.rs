//! The errors of the client crate: [`ConfigError`] for what is wrong on
//! this side (a bundle, a certificate, an argument), [`ClientError`] for
//! a call to the key servers.
//!
//! Neither ever carries key material: messages are built from paths,
//! names and fixed descriptions only. Their texts are the key manager's
//! (`rampart_kms::KmsError` converts to and from them).

/// A failure found before (or without) any request: an unusable bundle
/// or certificate, a malformed name or ciphertext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A malformed argument (a key name, a ciphertext): the server would
    /// refuse it as an invalid request.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// Certificates and TLS configuration.
    #[error("certificate error: {0}")]
    Certificate(String),
    /// Files (bundles) and settings (endpoints).
    #[error("{0}")]
    Config(String),
    /// A cryptographic operation failed unexpectedly.
    #[error("crypto failure: {0}")]
    Crypto(String),
    /// A failure of a layer above this crate (the key manager's admin
    /// client), its message complete, with the HTTP status the key
    /// manager gives that failure.
    #[error("{message}")]
    Other { status: u16, message: String },
}

impl ConfigError {
    /// The HTTP status the key manager would answer this error with: 400
    /// for an invalid argument, that of the failure for
    /// [`ConfigError::Other`], 500 otherwise.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::Invalid(_) => 400,
            Self::Other { status, .. } => *status,
            Self::Certificate(_) | Self::Config(_) | Self::Crypto(_) => 500,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}

impl From<rampart_crypto::CryptoError> for ConfigError {
    fn from(error: rampart_crypto::CryptoError) -> Self {
        // CryptoError never carries key material.
        Self::Crypto(error.to_string())
    }
}

/// Errors of a call to the key servers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The bundle or its certificates are unusable, or an argument is
    /// malformed.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The server answered with an error.
    #[error("{message} (HTTP {status}, {code})")]
    Api { status: u16, code: String, message: String },
    /// The TLS handshake was refused (by either side).
    #[error("TLS refused by {endpoint}: {message}")]
    Tls { endpoint: String, message: String },
    /// No endpoint could be reached (or all answered 5xx) in every round.
    #[error("no key server answered: {0}")]
    Unavailable(String),
    /// The server sent something this client does not understand.
    #[error("bad response from {endpoint}: {message}")]
    Protocol { endpoint: String, message: String },
}

impl ClientError {
    /// The HTTP status for API errors.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API error code (`forbidden`, `key_revoked`...).
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_read_as_the_key_managers() {
        assert_eq!(ConfigError::invalid("x").to_string(), "invalid request: x");
        assert_eq!(ConfigError::invalid("x").status(), 400);
        assert_eq!(
            ConfigError::Certificate("bundle: y".into()).to_string(),
            "certificate error: bundle: y"
        );
        assert_eq!(ConfigError::Config("z".into()).to_string(), "z");
        assert_eq!(ConfigError::Config("z".into()).status(), 500);
        let other = ConfigError::Other { status: 503, message: "store unavailable: w".into() };
        assert_eq!((other.status(), other.to_string().as_str()), (503, "store unavailable: w"));
        let error = ClientError::from(ConfigError::invalid("x"));
        assert_eq!(error.to_string(), "invalid request: x");
        assert_eq!(error.status(), None);
    }
}
