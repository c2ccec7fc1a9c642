//! The private or public key a Sign, Signature Verify, RSA Encrypt or RSA
//! Decrypt uses: its type, usage mask, state and dates checked with the
//! Result Reasons of the request's protocol version, and its material
//! (PKCS#8 for a private key, SubjectPublicKeyInfo for a public one) parsed;
//! and the Cryptographic Parameters the operation runs with, the request's
//! over the key's own attribute.

use std::sync::Arc;

use rampart_crypto::{DigestAlg, PrivateKey, PublicKey};
use rampart_kmip::enums::{
    usage_mask, CryptographicAlgorithm, HashingAlgorithm, ObjectType, State as KState,
};
use rampart_kmip::payload::CryptographicParameters;
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::object::{seconds, Obj};
use super::session::Session;
use crate::model::{now_ms, KeyState};
pub(super) use crate::server::key_cache::AsymKey;

/// What a public-key operation does with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    Sign,
    Verify,
    Encrypt,
    Decrypt,
}

impl Use {
    fn mask_bit(self) -> i32 {
        match self {
            Self::Sign => usage_mask::SIGN,
            Self::Verify => usage_mask::VERIFY,
            Self::Encrypt => usage_mask::ENCRYPT,
            Self::Decrypt => usage_mask::DECRYPT,
        }
    }

    /// Whether the use applies protection (KMIP 1.4 §3.22: a Deactivated
    /// object only processes, and §3.26: nothing is protected after the
    /// Protect Stop Date) rather than processes (§3.25: nothing is
    /// processed before the Process Start Date).
    fn protects(self) -> bool {
        matches!(self, Self::Sign | Self::Encrypt)
    }

    fn object_type(self) -> ObjectType {
        match self {
            Self::Sign | Self::Decrypt => ObjectType::PRIVATE_KEY,
            Self::Verify | Self::Encrypt => ObjectType::PUBLIC_KEY,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Self::Sign => "sign",
            Self::Verify => "verify signatures",
            Self::Encrypt => "encrypt",
            Self::Decrypt => "decrypt",
        }
    }
}

impl Session<'_> {
    /// The key `uid` for `usage`, checked. A key that cannot be used so is
    /// refused as KMIP 1.4 §11.31–11.33 say (Permission Denied: "object
    /// specified is not able to be used for" the operation), or from KMIP
    /// 2.0 with the finer reasons of 2.1 §6.1.55.1: Invalid Object Type,
    /// Incompatible Cryptographic Usage Mask, Wrong Key Lifecycle State.
    pub(super) async fn asymmetric_key(&mut self, uid: &str, usage: Use) -> R<(Obj, Arc<AsymKey>)> {
        let obj = self.load_with_attributes(uid).await?;
        self.require_use(&obj)?;
        let expected = usage.object_type();
        if obj.object_type() != expected {
            let why = format!(
                "object {uid} is a {}: only a {expected} may {}",
                obj.object_type(),
                usage.verb()
            );
            return Err(KmipError::InvalidObjectType(why));
        }
        if obj.usage_mask().is_some_and(|m| m & usage.mask_bit() == 0) {
            let why = format!(
                "the Cryptographic Usage Mask of {uid} does not allow it to {}",
                usage.verb()
            );
            return Err(KmipError::IncompatibleCryptographicUsageMask(why));
        }
        if let Some(why) = lifecycle_refusal(&obj, usage, now_ms()) {
            let why = format!("object {uid} {why}");
            return Err(KmipError::WrongKeyLifecycleState(why));
        }
        if obj.kmip.as_ref().and_then(|k| k.algorithm) == Some(CryptographicAlgorithm::DSA.0) {
            return Err(KmipError::FeatureNotSupported(format!(
                "object {uid} is a DSA key: DSA keys are kept, not used"
            )));
        }
        let sealed = &*self.sealed_material(&obj).await?;
        let root = self.state.require_root().map_err(kms)?;
        let (name, version) = (&obj.key.name, obj.version.version);
        let key = self.state.key_cache.get_or_parse(name, version, sealed, || {
            let material = root.open_material(name, version, sealed).map_err(kms)?;
            let bad = |_| {
                KmipError::GeneralFailure(format!(
                    "object {uid}'s stored key material does not parse"
                ))
            };
            Ok::<_, KmipError>(if expected == ObjectType::PRIVATE_KEY {
                AsymKey::Private(PrivateKey::from_pkcs8(material.expose()).map_err(bad)?)
            } else {
                AsymKey::Public(PublicKey::from_spki(material.expose()).map_err(bad)?)
            })
        })?;
        Ok((obj, key))
    }
}

/// Why `obj`'s state or dates forbid `usage` now, if they do.
fn lifecycle_refusal(obj: &Obj, usage: Use, now: i64) -> Option<String> {
    let state = obj.state(now);
    let allowed = state == KState::ACTIVE || (!usage.protects() && state == KState::DEACTIVATED);
    if !allowed || !matches!(obj.version.state, KeyState::Active) {
        return Some(format!("is {state}: it cannot {} now", usage.verb()));
    }
    let date = |name: &str| obj.stored_values(name).first().and_then(|i| i.as_date_time().ok());
    let now_s = seconds(now);
    if usage.protects() {
        if let Some(stop) = date("Protect Stop Date").filter(|stop| *stop < now_s) {
            return Some(format!(
                "is past its Protect Stop Date ({stop}): it cannot {}",
                usage.verb()
            ));
        }
    } else if let Some(start) = date("Process Start Date").filter(|start| *start > now_s) {
        return Some(format!(
            "is before its Process Start Date ({start}): it cannot {}",
            usage.verb()
        ));
    }
    None
}

/// The Cryptographic Parameters an operation runs with: each field the
/// request gives, else the key's Cryptographic Parameters attribute's
/// (KMIP 1.4 §4.31: the parameters "MAY be omitted from the request as
/// they can be specified as associated attributes").
pub(super) fn effective_parameters(
    obj: &Obj,
    request: Option<&CryptographicParameters>,
) -> R<CryptographicParameters> {
    let key = match obj.stored_values("Cryptographic Parameters").first() {
        Some(item) => CryptographicParameters::parse(item)?,
        None => CryptographicParameters::default(),
    };
    let Some(r) = request else { return Ok(key) };
    let mut p = r.clone();
    p.block_cipher_mode = p.block_cipher_mode.or(key.block_cipher_mode);
    p.padding_method = p.padding_method.or(key.padding_method);
    p.hashing_algorithm = p.hashing_algorithm.or(key.hashing_algorithm);
    p.cryptographic_algorithm = p.cryptographic_algorithm.or(key.cryptographic_algorithm);
    p.digital_signature_algorithm =
        p.digital_signature_algorithm.or(key.digital_signature_algorithm);
    p.salt_length = p.salt_length.or(key.salt_length);
    p.mask_generator = p.mask_generator.or(key.mask_generator);
    p.mask_generator_hashing_algorithm =
        p.mask_generator_hashing_algorithm.or(key.mask_generator_hashing_algorithm);
    p.p_source = p.p_source.or(key.p_source);
    p.trailer_field = p.trailer_field.or(key.trailer_field);
    Ok(p)
}

/// The digest a Hashing Algorithm names, of those public-key operations
/// take (SHA-1 and SHA-2).
pub(super) fn pk_digest(alg: HashingAlgorithm) -> R<DigestAlg> {
    Ok(match alg {
        HashingAlgorithm::SHA1 => DigestAlg::Sha1,
        HashingAlgorithm::SHA224 => DigestAlg::Sha224,
        HashingAlgorithm::SHA256 => DigestAlg::Sha256,
        HashingAlgorithm::SHA384 => DigestAlg::Sha384,
        HashingAlgorithm::SHA512 => DigestAlg::Sha512,
        other => {
            return Err(KmipError::FeatureNotSupported(format!(
                "Hashing Algorithm {other} in public-key operations (SHA-1, SHA-224, SHA-256, \
                 SHA-384 and SHA-512 are served)"
            )))
        }
    })
}

/// The MGF1 hash of PSS or OAEP: the Mask Generator Hashing Algorithm,
/// else the operation's own hash. (KMIP 1.4 §3.6's table says SHA-1 when
/// omitted, but the profiles' test vectors, and the clients that made
/// them, use the operation's hash.)
pub(super) fn mgf1_digest(p: &CryptographicParameters, hash: DigestAlg) -> R<DigestAlg> {
    if p.mask_generator.is_some_and(|m| m != rampart_kmip::enums::MaskGenerator::MGF1) {
        return Err(KmipError::FeatureNotSupported("Mask Generators other than MGF1".into()));
    }
    p.mask_generator_hashing_algorithm.map_or(Ok(hash), pk_digest)
}
