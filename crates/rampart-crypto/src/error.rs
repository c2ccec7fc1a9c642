/// Everything that can go wrong in the crypto engine.
///
/// No variant ever carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    #[error("invalid key length for {algorithm}: {len} bytes (expected {expected})")]
    InvalidKeyLength { algorithm: &'static str, len: usize, expected: &'static str },
    #[error("XTS key halves are identical (rejected as IEEE 1619 requires)")]
    XtsDuplicateKeyHalves,
    #[error("invalid {what} length {len}: must be {requirement}")]
    InvalidLength { what: &'static str, len: usize, requirement: &'static str },
    #[error("invalid sector size {0}: must be a non-zero multiple of 16 bytes")]
    InvalidSectorSize(usize),
    #[error("authentication failed: the data or its tag was modified, or the key is wrong")]
    AuthenticationFailed,
    #[error("invalid parameter: {0}")]
    InvalidParameter(&'static str),
    #[error("malformed key encoding: {0}")]
    InvalidEncoding(&'static str),
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    #[error("AWS-LC operation failed: {0}")]
    Backend(&'static str),
}
