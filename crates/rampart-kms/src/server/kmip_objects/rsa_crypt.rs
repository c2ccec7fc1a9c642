//! RSA Encrypt (with a Public Key) and Decrypt (with a Private Key),
//! KMIP 1.4 §4.29, §4.30: Padding Method OAEP (its Hashing Algorithm,
//! SHA-1 when none is named as RFC 8017 §7.1 defaults, and MGF1 over the
//! Mask Generator Hashing Algorithm) or PKCS1 v1.5.

use rampart_crypto::{CryptoError, DigestAlg, RsaEncryption};
use rampart_kmip::enums::{CryptographicAlgorithm, ObjectType, PaddingMethod};
use rampart_kmip::payload::{CryptoRequest, CryptographicParameters};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::asym_key::{effective_parameters, mgf1_digest, pk_digest, AsymKey, Use};
use super::crypto::MAX_DATA;
use super::errors::R;
use super::session::Session;

fn padding(p: &CryptographicParameters) -> R<RsaEncryption<'_>> {
    if p.cryptographic_algorithm.is_some_and(|a| a != CryptographicAlgorithm::RSA) {
        return Err(KmipError::InvalidField(format!(
            "Cryptographic Algorithm {} with an RSA key",
            p.cryptographic_algorithm.map_or_else(String::new, |a| a.to_string())
        )));
    }
    match p.padding_method {
        Some(PaddingMethod::OAEP) => {
            let digest = p.hashing_algorithm.map_or(Ok(DigestAlg::Sha1), pk_digest)?;
            let label = p.p_source.as_deref().unwrap_or_default();
            Ok(RsaEncryption::Oaep { digest, mgf1: mgf1_digest(p, digest)?, label })
        }
        Some(PaddingMethod::PKCS1_V1_5) => Ok(RsaEncryption::Pkcs1v15),
        Some(other) => Err(KmipError::FeatureNotSupported(format!(
            "RSA encryption with Padding Method {other} (OAEP and PKCS1 v1.5 are served)"
        ))),
        None => Err(KmipError::MissingData(
            "Cryptographic Parameters with a Padding Method (in the request or the key's \
             attribute)"
                .into(),
        )),
    }
}

impl Session<'_> {
    /// Whether `uid` names a public or private key, whose Encrypt or
    /// Decrypt is RSA's rather than the symmetric path's.
    pub(super) async fn is_asymmetric(&mut self, uid: &str) -> R<bool> {
        let obj = self.load(uid).await?;
        Ok(matches!(obj.object_type(), ObjectType::PUBLIC_KEY | ObjectType::PRIVATE_KEY))
    }

    /// RSA Encrypt (`encrypt`) or Decrypt of `request` under key `uid`.
    pub(super) async fn rsa_crypt(
        &mut self,
        uid: String,
        request: &CryptoRequest,
        encrypt: bool,
    ) -> R<Vec<Item>> {
        if request.data.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        let usage = if encrypt { Use::Encrypt } else { Use::Decrypt };
        let (obj, key) = self.asymmetric_key(&uid, usage).await?;
        let params = effective_parameters(&obj, request.parameters.as_ref())?;
        let padding = padding(&params)?;
        let data = request.data.as_slice();
        let item = match &*key {
            AsymKey::Public(key) => {
                Item::bytes(Tag::DATA, &key.encrypt(padding, data).map_err(rsa_error)?)
            }
            AsymKey::Private(key) => {
                Item::bytes(Tag::DATA, key.decrypt(padding, data).map_err(rsa_error)?.expose())
            }
        };
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid), item])
    }
}

fn rsa_error(e: CryptoError) -> KmipError {
    match e {
        CryptoError::InvalidLength { len, .. } => KmipError::InvalidField(format!(
            "Data ({len} bytes) is too long for the key and padding"
        )),
        CryptoError::InvalidParameter(m) => KmipError::InvalidField(m.into()),
        // One answer for every bad ciphertext, as RFC 8017 §7.1.2 asks.
        _ => KmipError::CryptographicFailure("the data does not decrypt under the key".into()),
    }
}
