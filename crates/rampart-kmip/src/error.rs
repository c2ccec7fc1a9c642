//! The one error type of the KMIP layer and the one place where errors
//! become KMIP Result Reasons ([`KmipError::result_reason`]).
//!
//! No variant carries key material: messages name tags, operations and
//! object identifiers only.

use crate::enums::{Operation, ResultReason};
use crate::tag::Tag;
use crate::ttlv::ItemType;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KmipError {
    // Decoding (the bounded reader).
    #[error("truncated TTLV: {needed} bytes needed, {left} left")]
    Truncated { needed: usize, left: usize },
    #[error("TTLV message of {len} bytes is longer than the {max} accepted")]
    TooLong { len: usize, max: usize },
    #[error("TTLV structures nested deeper than {max}")]
    TooDeep { max: usize },
    #[error("more than {max} TTLV items in one message")]
    TooManyItems { max: usize },
    #[error("{tag}: unknown item type 0x{item_type:02X}")]
    UnknownType { tag: Tag, item_type: u8 },
    #[error("{tag}: length {len} is not valid for a {item_type:?}")]
    BadLength { tag: Tag, item_type: ItemType, len: usize },
    #[error("{tag}: non-zero padding")]
    BadPadding { tag: Tag },
    #[error("{tag}: boolean value {value} is neither 0 nor 1")]
    BadBoolean { tag: Tag, value: u64 },
    #[error("{tag}: text string is not UTF-8")]
    BadUtf8 { tag: Tag },
    #[error("{len} bytes after the end of the TTLV item")]
    TrailingBytes { len: usize },
    #[error("a KMIP message must be a structure, {tag} is not")]
    NotAStructure { tag: Tag },

    // Message structure.
    #[error("{tag}: expected a {expected:?}, found a {found:?}")]
    WrongType { tag: Tag, expected: ItemType, found: ItemType },
    #[error("expected {expected}, found {found}")]
    UnexpectedTag { expected: Tag, found: Tag },
    #[error("{within}: {tag} is missing")]
    Missing { tag: Tag, within: Tag },
    #[error("{within}: {tag} appears more than once")]
    Duplicate { tag: Tag, within: Tag },
    #[error("Batch Count says {declared}, the message has {found} batch items")]
    BatchCountMismatch { declared: i32, found: usize },
    #[error("protocol version {major}.{minor} is not supported")]
    UnsupportedVersion { major: i32, minor: i32 },

    // Operations.
    #[error("operation {0} is not supported")]
    OperationNotSupported(Operation),
    #[error("not supported: {0}")]
    FeatureNotSupported(String),
    #[error("no such object: {0}")]
    ItemNotFound(String),
    #[error("invalid field: {0}")]
    InvalidField(String),
    #[error("missing data: {0}")]
    MissingData(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// Not allowed in the object's state, or otherwise against the rules
    /// of the operation.
    #[error("illegal operation: {0}")]
    IllegalOperation(String),
    #[error("cryptographic failure: {0}")]
    CryptographicFailure(String),
    #[error("key format type {0} is not supported")]
    KeyFormatTypeNotSupported(u32),
    #[error("key compression is not supported")]
    KeyCompressionTypeNotSupported,
    #[error("already exists: {0}")]
    ObjectAlreadyExists(String),
    #[error("attribute index {0} is out of bounds")]
    IndexOutOfBounds(i32),
    #[error("the response ({len} bytes) is larger than the Maximum Response Size {max}")]
    ResponseTooLarge { len: usize, max: usize },
    #[error("not extractable: {0}")]
    NotExtractable(String),
    #[error("authentication failed")]
    AuthenticationNotSuccessful,
    #[error("server failure: {0}")]
    GeneralFailure(String),
}

impl KmipError {
    /// The Result Reason a response carries for this error.
    #[must_use]
    pub fn result_reason(&self) -> ResultReason {
        match self {
            Self::Truncated { .. }
            | Self::TooLong { .. }
            | Self::TooDeep { .. }
            | Self::TooManyItems { .. }
            | Self::UnknownType { .. }
            | Self::BadLength { .. }
            | Self::BadPadding { .. }
            | Self::BadBoolean { .. }
            | Self::BadUtf8 { .. }
            | Self::TrailingBytes { .. }
            | Self::NotAStructure { .. }
            | Self::UnexpectedTag { .. }
            | Self::Duplicate { .. }
            | Self::BatchCountMismatch { .. }
            | Self::UnsupportedVersion { .. } => ResultReason::INVALID_MESSAGE,
            Self::WrongType { .. } | Self::InvalidField(_) => ResultReason::INVALID_FIELD,
            Self::Missing { .. } | Self::MissingData(_) => ResultReason::MISSING_DATA,
            Self::OperationNotSupported(_) => ResultReason::OPERATION_NOT_SUPPORTED,
            Self::FeatureNotSupported(_) => ResultReason::FEATURE_NOT_SUPPORTED,
            Self::ItemNotFound(_) => ResultReason::ITEM_NOT_FOUND,
            Self::PermissionDenied(_) => ResultReason::PERMISSION_DENIED,
            Self::IllegalOperation(_) => ResultReason::ILLEGAL_OPERATION,
            Self::CryptographicFailure(_) => ResultReason::CRYPTOGRAPHIC_FAILURE,
            Self::KeyFormatTypeNotSupported(_) => ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED,
            Self::KeyCompressionTypeNotSupported => {
                ResultReason::KEY_COMPRESSION_TYPE_NOT_SUPPORTED
            }
            Self::ObjectAlreadyExists(_) => ResultReason::OBJECT_ALREADY_EXISTS,
            Self::IndexOutOfBounds(_) => ResultReason::INDEX_OUT_OF_BOUNDS,
            Self::ResponseTooLarge { .. } => ResultReason::RESPONSE_TOO_LARGE,
            Self::NotExtractable(_) => ResultReason::NOT_EXTRACTABLE,
            Self::AuthenticationNotSuccessful => ResultReason::AUTHENTICATION_NOT_SUCCESSFUL,
            Self::GeneralFailure(_) => ResultReason::GENERAL_FAILURE,
        }
    }

    /// Whether the bytes themselves are not valid TTLV (as opposed to a
    /// well-formed message the server cannot honour). After such an error
    /// the server answers once and closes: it cannot know where the next
    /// message starts.
    #[must_use]
    pub fn is_framing(&self) -> bool {
        matches!(self, Self::TooLong { .. } | Self::NotAStructure { .. })
    }
}
