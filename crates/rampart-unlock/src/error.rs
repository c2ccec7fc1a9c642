//! Why a key was not found or a binding not changed, and whether that is
//! the user's to fix (a refusal, a wrong passphrase) or a runtime failure.

use rampart_kms::client::{ClientError, ConfigError};

/// An unlock or binding failure. Messages never carry key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The user's to fix: a refusal, a wrong argument, a missing token.
    #[error("{0}")]
    Usage(String),
    /// A runtime failure, its message complete.
    #[error("{0}")]
    Failed(String),
    /// The volume's header.
    #[error(transparent)]
    Luks(#[from] rampart_luks::Error),
    /// A call to the key manager.
    #[error(transparent)]
    KeyManager(#[from] ClientError),
    /// The client bundle cannot be read.
    #[error(transparent)]
    Bundle(ConfigError),
    /// Reporting progress failed (a reader that went away).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// What was being done when `source` happened.
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// `self`, said to have happened while doing `context`.
    #[must_use]
    pub fn context(self, context: impl Into<String>) -> Self {
        Self::Context { context: context.into(), source: Box::new(self) }
    }

    /// Whether the user can fix this (exit status 2 for the command).
    #[must_use]
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Usage(_) => true,
            Self::Failed(_) | Self::Io(_) => false,
            Self::Luks(e) => luks_is_usage(e),
            Self::KeyManager(e) => client_is_usage(e),
            Self::Bundle(e) => matches!(e, ConfigError::Invalid(_) | ConfigError::Config(_)),
            Self::Context { source, .. } => source.is_usage(),
        }
    }

    /// The whole cause chain on one line, `outer: inner: ...`, as the
    /// command reports it: a usage error is its own message alone.
    #[must_use]
    pub fn chain(&self) -> String {
        match self {
            Self::Context { context, source } => format!("{context}: {}", source.chain()),
            Self::Usage(_) | Self::Failed(_) => self.to_string(),
            other if other.is_usage() => other.to_string(),
            other => {
                let mut text = other.to_string();
                let mut cause = std::error::Error::source(other);
                while let Some(next) = cause {
                    text.push_str(": ");
                    text.push_str(&next.to_string());
                    cause = next.source();
                }
                text
            }
        }
    }
}

/// A wrong passphrase or an argument the volume cannot take (a keyslot out
/// of range or in use) is the user's to fix.
#[must_use]
pub fn luks_is_usage(error: &rampart_luks::Error) -> bool {
    matches!(error, rampart_luks::Error::NoKey | rampart_luks::Error::InvalidArgument(_))
}

/// The key manager's refusals (a 4xx answer, a refused TLS handshake, a
/// malformed argument) are the user's to fix; a server down is not.
#[must_use]
pub fn client_is_usage(error: &ClientError) -> bool {
    match error {
        ClientError::Api { status, .. } => (400..500).contains(status),
        ClientError::Tls { .. } => true,
        ClientError::Config(e) => e.status() == 400,
        _ => false,
    }
}

/// One error for several failed tokens: a usage error when every failure
/// was one (refusals, revoked keys, wrong volume), else a runtime error (a
/// server down).
#[must_use]
pub fn combine_failures(failures: Vec<Error>) -> Error {
    let usage = !failures.is_empty() && failures.iter().all(Error::is_usage);
    let text: Vec<String> = failures.iter().map(Error::chain).collect();
    let text = if text.is_empty() { "no usable token".to_owned() } else { text.join("; ") };
    if usage {
        Error::Usage(text)
    } else {
        Error::Failed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_combine_into_one_line_with_the_right_exit_class() {
        let usage = combine_failures(vec![
            Error::Usage("a".into()),
            Error::Usage("b".into()).context("token 1"),
        ]);
        assert!(usage.is_usage());
        assert_eq!(usage.chain(), "a; token 1: b");
        let runtime = combine_failures(vec![
            Error::Usage("a".into()),
            Error::Failed("no key server answered".into()),
        ]);
        assert!(!runtime.is_usage());
        assert!(combine_failures(Vec::new()).to_string().contains("no usable token"));
    }
}
