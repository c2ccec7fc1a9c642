//! Every failure's PKCS#11 return code, decided here and nowhere else:
//! the module's own checks name a `CKR_*` directly; what the key manager
//! or the network answers is mapped by [`from_client`] and
//! [`from_reason`].

use cryptoki_sys::*;
use rampart_kmip::enums::ResultReason;
use rampart_kms_client::kmip::KmipClientError;

/// A failed call's return code (never `CKR_OK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rv(pub CK_RV);

pub(crate) type Result<T> = std::result::Result<T, Rv>;

/// What a request was doing, which decides what a Cryptographic Failure
/// or an Invalid Field means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Finding objects or reading their attributes.
    Objects,
    /// Making keys.
    Generate,
    Encrypt,
    /// Decrypt and unwrap: a failed check is bad ciphertext.
    Decrypt,
    Sign,
    /// A failed check is a bad signature.
    Verify,
}

/// The return code of a KMIP Result Reason in `context`.
pub(crate) fn from_reason(reason: Option<ResultReason>, context: Context) -> Rv {
    let code = match reason {
        Some(ResultReason::ITEM_NOT_FOUND | ResultReason::OBJECT_NOT_FOUND) => match context {
            Context::Objects => CKR_OBJECT_HANDLE_INVALID,
            _ => CKR_KEY_HANDLE_INVALID,
        },
        Some(
            ResultReason::PERMISSION_DENIED
            | ResultReason::INCOMPATIBLE_CRYPTOGRAPHIC_USAGE_MASK
            | ResultReason::WRONG_KEY_LIFECYCLE_STATE
            | ResultReason::OBJECT_ARCHIVED
            | ResultReason::OBJECT_DESTROYED,
        ) => CKR_KEY_FUNCTION_NOT_PERMITTED,
        Some(ResultReason::AUTHENTICATION_NOT_SUCCESSFUL) => CKR_PIN_LOCKED,
        Some(ResultReason::SENSITIVE | ResultReason::NOT_EXTRACTABLE) => CKR_KEY_UNEXTRACTABLE,
        Some(ResultReason::CRYPTOGRAPHIC_FAILURE) => match context {
            Context::Decrypt => CKR_ENCRYPTED_DATA_INVALID,
            Context::Verify => CKR_SIGNATURE_INVALID,
            _ => CKR_FUNCTION_FAILED,
        },
        Some(ResultReason::FEATURE_NOT_SUPPORTED | ResultReason::OPERATION_NOT_SUPPORTED) => {
            CKR_MECHANISM_INVALID
        }
        Some(ResultReason::INVALID_FIELD | ResultReason::MISSING_DATA) => match context {
            Context::Generate => CKR_TEMPLATE_INCONSISTENT,
            Context::Decrypt => CKR_ENCRYPTED_DATA_INVALID,
            Context::Verify => CKR_SIGNATURE_INVALID,
            Context::Objects => CKR_ATTRIBUTE_VALUE_INVALID,
            Context::Encrypt | Context::Sign => CKR_MECHANISM_PARAM_INVALID,
        },
        Some(ResultReason::KEY_FORMAT_TYPE_NOT_SUPPORTED) => CKR_KEY_NOT_WRAPPABLE,
        Some(ResultReason::RESPONSE_TOO_LARGE) => CKR_DATA_LEN_RANGE,
        _ => CKR_FUNCTION_FAILED,
    };
    Rv(code)
}

/// The return code of a KMIP client failure in `context`: a refused
/// certificate (the identity was revoked) is `CKR_PIN_LOCKED`, an
/// unreachable key manager `CKR_DEVICE_ERROR`.
pub(crate) fn from_client(error: &KmipClientError, context: Context) -> Rv {
    match error {
        KmipClientError::IdentityRefused(_) => Rv(CKR_PIN_LOCKED),
        KmipClientError::Unavailable(_) | KmipClientError::Protocol { .. } => Rv(CKR_DEVICE_ERROR),
        KmipClientError::Config(_) => Rv(CKR_GENERAL_ERROR),
        KmipClientError::Failed { .. } => from_reason(None, context),
        _ => Rv(CKR_FUNCTION_FAILED),
    }
}
