//! The one error type of the KMIP layer and the one place where errors
//! become KMIP Result Reasons ([`KmipError::result_reason`]), and where
//! the reasons KMIP 2.0 added become a 1.x client's ([`KmipError::for_version`]).
//!
//! No variant carries key material: messages name tags, operations and
//! object identifiers only.

use crate::enums::{Operation, ResultReason};
use crate::tag::Tag;
use crate::ttlv::TtlvError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KmipError {
    /// The bytes are not valid TTLV, or a field has the wrong type, is
    /// missing or repeated.
    #[error(transparent)]
    Ttlv(#[from] TtlvError),
    /// An XML- or JSON-encoded message that does not read as TTLV.
    #[error(transparent)]
    Text(#[from] crate::xml::TextError),
    #[error("bad message encoding: {0}")]
    BadEncoding(String),

    // Message structure.
    #[error("expected {expected}, found {found}")]
    UnexpectedTag { expected: Tag, found: Tag },
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
    /// A payload lacks a field its other fields make necessary (KMIP 1.4
    /// §11.1: an error parsing the payload).
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// Not allowed in the object's state, or otherwise against the rules
    /// of the operation.
    #[error("illegal operation: {0}")]
    IllegalOperation(String),
    #[error("cryptographic failure: {0}")]
    CryptographicFailure(String),
    /// KMIP 2.x: the object's Cryptographic Usage Mask does not allow what
    /// was asked (KMIP 1.x answers this with Permission Denied).
    #[error("incompatible cryptographic usage mask: {0}")]
    IncompatibleCryptographicUsageMask(String),
    /// KMIP 2.x: the object is not of a type the operation takes (KMIP
    /// 1.x answers this with Permission Denied or Illegal Operation).
    #[error("invalid object type: {0}")]
    InvalidObjectType(String),
    /// KMIP 2.x: a Certificate Request that is not a signed request of
    /// its Certificate Request Type (KMIP 1.x answers this with Invalid
    /// Field).
    #[error("invalid certificate request: {0}")]
    InvalidCsr(String),
    /// KMIP 2.x: the object's state or dates forbid the operation (KMIP
    /// 1.x answers this with Permission Denied).
    #[error("wrong key lifecycle state: {0}")]
    WrongKeyLifecycleState(String),
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
    /// No object has the Unique Identifier asked (KMIP 2.x; KMIP 1.x
    /// answers this with Item Not Found).
    #[error("no such object: {0}")]
    ObjectNotFound(String),
    /// KMIP 2.x: the attribute is one only the server sets (1.x: Invalid
    /// Field).
    #[error("attribute {0} is set by the server, not by the client")]
    AttributeReadOnly(String),
    /// KMIP 2.x: the attribute takes one value and has it (1.x: Illegal
    /// Operation).
    #[error("attribute {0} takes one value (use Modify Attribute)")]
    AttributeSingleValued(String),
    /// KMIP 2.x: Set Attribute of an attribute that has several values
    /// (1.x has no Set Attribute: Illegal Operation).
    #[error("attribute {0} has several values (use Modify Attribute)")]
    MultiValuedAttribute(String),
    /// KMIP 2.x: the Name is already an object's (1.x: Object Already
    /// Exists).
    /// KMIP 2.x: an adjustment leaves its type's range (1.x: Invalid Field).
    #[error("out of range: {0}")]
    NumericRange(String),
    /// KMIP 2.x: a value of the wrong type for the operation (1.x:
    /// Invalid Field).
    #[error("invalid data type: {0}")]
    InvalidDataType(String),
    #[error("the Name is not unique: {0}")]
    NonUniqueName(String),
    /// KMIP 2.x: the object is destroyed (1.x: Illegal Operation).
    #[error("object destroyed: {0}")]
    ObjectDestroyed(String),
    /// The object is Sensitive and was asked for unwrapped.
    #[error("sensitive: {0}")]
    Sensitive(String),
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
            Self::Ttlv(TtlvError::WrongType { .. }) | Self::InvalidField(_) => {
                ResultReason::INVALID_FIELD
            }
            Self::Ttlv(TtlvError::Missing { .. }) | Self::MissingData(_) => {
                ResultReason::MISSING_DATA
            }
            Self::Ttlv(_)
            | Self::Text(_)
            | Self::BadEncoding(_)
            | Self::UnexpectedTag { .. }
            | Self::BatchCountMismatch { .. }
            | Self::UnsupportedVersion { .. }
            | Self::InvalidMessage(_) => ResultReason::INVALID_MESSAGE,
            Self::OperationNotSupported(_) => ResultReason::OPERATION_NOT_SUPPORTED,
            Self::FeatureNotSupported(_) => ResultReason::FEATURE_NOT_SUPPORTED,
            Self::ItemNotFound(_) => ResultReason::ITEM_NOT_FOUND,
            Self::PermissionDenied(_) => ResultReason::PERMISSION_DENIED,
            Self::IllegalOperation(_) => ResultReason::ILLEGAL_OPERATION,
            Self::CryptographicFailure(_) => ResultReason::CRYPTOGRAPHIC_FAILURE,
            Self::IncompatibleCryptographicUsageMask(_) => {
                ResultReason::INCOMPATIBLE_CRYPTOGRAPHIC_USAGE_MASK
            }
            Self::InvalidObjectType(_) => ResultReason::INVALID_OBJECT_TYPE,
            Self::InvalidCsr(_) => ResultReason::INVALID_CSR,
            Self::WrongKeyLifecycleState(_) => ResultReason::WRONG_KEY_LIFECYCLE_STATE,
            Self::KeyFormatTypeNotSupported(_) => ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED,
            Self::KeyCompressionTypeNotSupported => {
                ResultReason::KEY_COMPRESSION_TYPE_NOT_SUPPORTED
            }
            Self::ObjectAlreadyExists(_) => ResultReason::OBJECT_ALREADY_EXISTS,
            Self::IndexOutOfBounds(_) => ResultReason::INDEX_OUT_OF_BOUNDS,
            Self::ResponseTooLarge { .. } => ResultReason::RESPONSE_TOO_LARGE,
            Self::NotExtractable(_) => ResultReason::NOT_EXTRACTABLE,
            Self::Sensitive(_) => ResultReason::SENSITIVE,
            Self::ObjectNotFound(_) => ResultReason::OBJECT_NOT_FOUND,
            Self::AttributeReadOnly(_) => ResultReason::ATTRIBUTE_READ_ONLY,
            Self::AttributeSingleValued(_) => ResultReason::ATTRIBUTE_SINGLE_VALUED,
            Self::MultiValuedAttribute(_) => ResultReason::MULTI_VALUED_ATTRIBUTE,
            Self::NonUniqueName(_) => ResultReason::NON_UNIQUE_NAME_ATTRIBUTE,
            Self::NumericRange(_) => ResultReason::NUMERIC_RANGE,
            Self::InvalidDataType(_) => ResultReason::INVALID_DATA_TYPE,
            Self::ObjectDestroyed(_) => ResultReason::OBJECT_DESTROYED,
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
        matches!(self, Self::Ttlv(TtlvError::TooLong { .. } | TtlvError::NotAStructure { .. }))
    }
}
