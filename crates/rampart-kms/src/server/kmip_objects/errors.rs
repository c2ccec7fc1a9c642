//! How the key manager's errors and the crypto library's become KMIP
//! result reasons.

use rampart_kmip::KmipError;

use crate::error::KmsError;

pub(super) type R<T> = Result<T, KmipError>;

pub(crate) fn kms(error: KmsError) -> KmipError {
    match error {
        KmsError::NotFound(m) => KmipError::ItemNotFound(m),
        KmsError::Forbidden(m) => KmipError::PermissionDenied(m),
        KmsError::Conflict(m) => KmipError::ObjectAlreadyExists(m),
        KmsError::InvalidRequest(m) => KmipError::InvalidField(m),
        e @ (KmsError::KeyRevoked { .. } | KmsError::KeyDestroyed { .. }) => {
            KmipError::IllegalOperation(e.to_string())
        }
        KmsError::Sealed => KmipError::GeneralFailure("the key manager is sealed".into()),
        other => KmipError::GeneralFailure(other.to_string()),
    }
}

pub(super) fn crypto(error: rampart_crypto::CryptoError) -> KmipError {
    KmipError::CryptographicFailure(error.to_string())
}
