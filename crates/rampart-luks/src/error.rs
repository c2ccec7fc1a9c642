//! The one error type of the crate.
//!
//! Every message is a single line that says what is wrong and, where it
//! helps, what to do. No variant ever carries key material, passphrases or
//! anything derived from them.

use rampart_crypto::CryptoError;

/// Everything that can go wrong while reading, verifying or writing a LUKS
/// header.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No keyslot opened with the passphrase (or the requested keyslot did
    /// not).
    #[error("no key available with this passphrase")]
    NoKey,

    /// The volume (or one of its keyslots) uses a cipher, integrity mode or
    /// segment type that Rampart does not implement.
    #[error("unsupported cipher: {0}")]
    UnsupportedCipher(String),

    /// The LUKS2 header lists a mandatory requirement Rampart does not
    /// implement; the header is read-only and the volume cannot be opened.
    #[error(
        "unsupported LUKS2 requirement \"{0}\": the header can be inspected but not unlocked or modified"
    )]
    UnknownRequirement(String),

    /// A reencryption is in progress: only the reencryption itself (and
    /// serving the volume through both keys) may touch it.
    #[error(
        "a reencryption is in progress on this volume: finish it with `rampart reencrypt --resume-only` (`rampart serve` serves it meanwhile)"
    )]
    ReencryptionInProgress,

    /// The device has no LUKS header at all.
    #[error("not a LUKS device: {0}")]
    NotLuks(String),

    /// The header is present but damaged or inconsistent.
    #[error("corrupt LUKS header: {0}")]
    Corrupt(String),

    /// The device (or header file) is smaller than its header says it is.
    #[error("device too small: {what} needs {required} bytes but the device has {actual}")]
    DeviceTooSmall { what: &'static str, required: u64, actual: u64 },

    /// No free keyslot, keyslot area space or JSON space for the change.
    #[error("no space: {0}")]
    NoSpace(String),

    /// A caller-supplied argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Reading or writing the device failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// The crypto engine refused an operation.
    #[error("crypto error: {0}")]
    Crypto(#[from] CryptoError),
}

/// The result type of the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        Self::Corrupt(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidArgument(msg.into())
    }
}
