//! Derive Key (KMIP 1.4 §4.6): a new Symmetric Key or Secret Data from a
//! key or Secret Data whose Cryptographic Usage Mask has Derive Key, by
//! PBKDF2 (the base's material is the password), HASH (a digest of the
//! base's material), HMAC (of the Derivation Data under the base) or
//! ENCRYPT (the Derivation Data encrypted under the base key with the
//! Cryptographic Parameters given, or else the key's, and the
//! Initialization Vector given; the ciphertext's first bytes) or NIST SP
//! 800-108 with HMAC as the PRF, whose fixed input is the Derivation Data
//! (Label || 0x00 || Context) followed by the output length in bits
//! (32-bit), and whose 32-bit counter [i] comes before it in every mode
//! (SP 800-108r1 §4.1-§4.3):
//!
//! - counter: K(i) = PRF(K, [i] || fixed);
//! - feedback: K(0) = the Initialization Vector (empty if absent),
//!   K(i) = PRF(K, K(i-1) || [i] || fixed);
//! - double-pipeline: A(0) = fixed, A(i) = PRF(K, A(i-1)),
//!   K(i) = PRF(K, A(i) || [i] || fixed).
//!
//! The new object links to its base (Derivation Base Object) and the
//! base to it (Derived Key).

use rampart_crypto::{pbkdf2, DigestAlg, HashAlg, Hasher, Mac, MacAlg, SecretBytes};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, DerivationMethod, HashingAlgorithm,
    LinkType, ObjectType, SecretDataType,
};
use rampart_kmip::payload::{CryptoRequest, CryptographicParameters, DeriveKeyRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Bytes;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::ciphers::{key_parameters, run};
use super::crypto::{check_algorithm, mac_alg, MAX_DATA};
use super::errors::{crypto, R};
use super::object::link_value;
use super::session::Session;

/// Most PBKDF2 iterations one request may ask (a bound on the CPU one
/// request takes; RFC 8018 asks for at least 1,000).
const MAX_ITERATIONS: i32 = 10_000_000;

/// Longest derived object, in bytes.
const MAX_DERIVED: usize = 1024;

impl Session<'_> {
    pub(super) async fn derive_key(&mut self, request: &DeriveKeyRequest) -> R<Vec<Item>> {
        if !matches!(request.object_type, ObjectType::SYMMETRIC_KEY | ObjectType::SECRET_DATA) {
            return Err(KmipError::InvalidField(format!(
                "Derive Key makes Symmetric Keys and Secret Data, not {}",
                request.object_type
            )));
        }
        let [base_uid] = request.unique_identifiers.as_slice() else {
            return Err(KmipError::FeatureNotSupported(
                "deriving from more than one object".into(),
            ));
        };
        let (base, material) = self.usable_key(base_uid, usage_mask::DERIVE_KEY, true).await?;
        if base.usage_mask().is_none_or(|m| m & usage_mask::DERIVE_KEY == 0) {
            return Err(KmipError::PermissionDenied(format!(
                "the Cryptographic Usage Mask of {base_uid} does not allow Derive Key"
            )));
        }
        let mut new = self.template(&request.attributes, request.object_type).await?;
        let length = new
            .length
            .ok_or_else(|| KmipError::MissingData("the Cryptographic Length attribute".into()))?;
        let bytes = if request.object_type == ObjectType::SYMMETRIC_KEY {
            let algorithm = CryptographicAlgorithm(new.algorithm.ok_or_else(|| {
                KmipError::MissingData("the Cryptographic Algorithm attribute".into())
            })?);
            check_algorithm(algorithm, length)?
        } else {
            new.secret_type = Some(SecretDataType::SEED.0);
            usize::try_from(length)
                .ok()
                .filter(|bits| *bits > 0 && bits % 8 == 0 && bits / 8 <= MAX_DERIVED)
                .map(|bits| bits / 8)
                .ok_or_else(|| {
                    KmipError::InvalidField(format!(
                        "a Cryptographic Length of 8 to {} bits, in bytes, not {length}",
                        MAX_DERIVED * 8
                    ))
                })?
        };
        let base_alg = CryptographicAlgorithm(
            base.kmip.as_ref().and_then(|k| k.algorithm).unwrap_or(CryptographicAlgorithm::AES.0),
        );
        let hashing = request.parameters.as_ref().and_then(|p| p.hashing_algorithm);
        let data = request.data.as_ref().map(|d| d.as_slice());
        if data.is_some_and(|d| d.len() > MAX_DATA) {
            return Err(KmipError::InvalidField(format!(
                "Derivation Data of more than {MAX_DATA} bytes"
            )));
        }
        let derived = if request.method == DerivationMethod::ENCRYPT {
            let params = request.parameters.clone().unwrap_or_default().or(&key_parameters(&base)?);
            derive_by_encrypt(request, &params, base_alg, &material, data, bytes)?
        } else {
            derive(request, base_alg, hashing, material.expose(), data, bytes)?
        };
        drop(material);
        new.stored
            .push(("Link".to_owned(), link_value(LinkType::DERIVATION_BASE_OBJECT, base_uid)?));
        new.usage_mask.get_or_insert(if request.object_type == ObjectType::SYMMETRIC_KEY {
            usage_mask::ENCRYPT | usage_mask::DECRYPT
        } else {
            usage_mask::DERIVE_KEY
        });
        let uid = self.store_new(request.object_type, new, &derived).await?;
        // The base links to what was derived from it.
        self.add_links(&base, vec![link_value(LinkType::DERIVED_KEY, &uid)?]).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }
}

/// ENCRYPT: the first `bytes` bytes of the Derivation Data encrypted
/// under the base key (AES or Triple DES) with `params` and the request's
/// Initialization Vector, which a mode with one requires (a drawn IV
/// would make the derivation unrepeatable).
fn derive_by_encrypt(
    request: &DeriveKeyRequest,
    params: &CryptographicParameters,
    base_alg: CryptographicAlgorithm,
    key: &SecretBytes,
    data: Option<&[u8]>,
    bytes: usize,
) -> R<SecretBytes> {
    if !matches!(base_alg, CryptographicAlgorithm::AES | CryptographicAlgorithm::TRIPLE_DES) {
        return Err(KmipError::InvalidField(format!(
            "ENCRYPT derives with an AES or Triple DES key, not {base_alg}"
        )));
    }
    if params.cryptographic_algorithm.is_some_and(|a| a != base_alg) {
        return Err(KmipError::InvalidField(format!(
            "the Cryptographic Parameters name another algorithm than the key's {base_alg}"
        )));
    }
    let data = data.ok_or_else(|| {
        KmipError::MissingData("the Derivation Data of ENCRYPT derivation".into())
    })?;
    let mode = params.block_cipher_mode.ok_or_else(|| {
        KmipError::MissingData(
            "the Block Cipher Mode (in Cryptographic Parameters) of ENCRYPT".into(),
        )
    })?;
    if request.iv.is_none() && mode != BlockCipherMode::ECB {
        return Err(KmipError::MissingData(format!(
            "the Initialization Vector of ENCRYPT derivation in {mode}"
        )));
    }
    let encryption = CryptoRequest {
        unique_identifier: None,
        parameters: None,
        data: Bytes::from(data),
        iv_counter_nonce: request.iv.as_ref().map(|iv| iv.as_slice().to_vec()),
        aad: None,
        tag: None,
        correlation_value: None,
        init: false,
        last: false,
    };
    let encrypted = run(&encryption, true, params, base_alg, key)?.data;
    if encrypted.len() < bytes {
        return Err(KmipError::InvalidField(format!(
            "ENCRYPT of {} bytes of Derivation Data gives {} bytes, not {bytes}",
            data.len(),
            encrypted.len()
        )));
    }
    Ok(SecretBytes::from_slice(&encrypted.expose()[..bytes]))
}

/// The HMAC a Hashing Algorithm names.
fn hmac_of(alg: HashingAlgorithm) -> R<MacAlg> {
    Ok(match alg {
        HashingAlgorithm::SHA1 => MacAlg::HmacSha1,
        HashingAlgorithm::SHA224 => MacAlg::HmacSha224,
        HashingAlgorithm::SHA256 => MacAlg::HmacSha256,
        HashingAlgorithm::SHA384 => MacAlg::HmacSha384,
        HashingAlgorithm::SHA512 => MacAlg::HmacSha512,
        other => {
            return Err(KmipError::FeatureNotSupported(format!("key derivation with {other}")))
        }
    })
}

/// The `bytes` bytes `request`'s method derives from `key`.
fn derive(
    request: &DeriveKeyRequest,
    base_alg: CryptographicAlgorithm,
    hashing: Option<HashingAlgorithm>,
    key: &[u8],
    data: Option<&[u8]>,
    bytes: usize,
) -> R<SecretBytes> {
    let need_hash = || {
        hashing.ok_or_else(|| {
            KmipError::MissingData(format!(
                "the Hashing Algorithm (in Cryptographic Parameters) of {}",
                request.method
            ))
        })
    };
    let too_long = |most: usize| {
        KmipError::InvalidField(format!(
            "{} gives at most {most} bytes, not {bytes}",
            request.method
        ))
    };
    let mut out = SecretBytes::new(vec![0; bytes]);
    match request.method {
        DerivationMethod::PBKDF2 => {
            let prf = match need_hash()? {
                HashingAlgorithm::SHA1 => HashAlg::Sha1,
                HashingAlgorithm::SHA256 => HashAlg::Sha256,
                HashingAlgorithm::SHA512 => HashAlg::Sha512,
                other => {
                    return Err(KmipError::FeatureNotSupported(format!("PBKDF2 with {other}")))
                }
            };
            let salt = request
                .salt
                .as_ref()
                .ok_or_else(|| KmipError::MissingData("the Salt of PBKDF2".into()))?;
            let iterations = request
                .iteration_count
                .ok_or_else(|| KmipError::MissingData("the Iteration Count of PBKDF2".into()))?;
            if !(1..=MAX_ITERATIONS).contains(&iterations) {
                return Err(KmipError::InvalidField(format!(
                    "an Iteration Count of 1 to {MAX_ITERATIONS}, not {iterations}"
                )));
            }
            let iterations = iterations.unsigned_abs();
            pbkdf2(prf, key, salt.as_slice(), iterations, out.expose_mut()).map_err(crypto)?;
        }
        DerivationMethod::HASH => {
            if data.is_some() {
                return Err(KmipError::InvalidField(
                    "HASH derives from the base object's material alone: no Derivation Data".into(),
                ));
            }
            let alg = match need_hash()? {
                HashingAlgorithm::SHA1 => DigestAlg::Sha1,
                HashingAlgorithm::SHA224 => DigestAlg::Sha224,
                HashingAlgorithm::SHA256 => DigestAlg::Sha256,
                HashingAlgorithm::SHA384 => DigestAlg::Sha384,
                HashingAlgorithm::SHA512 => DigestAlg::Sha512,
                HashingAlgorithm::SHA3_256 => DigestAlg::Sha3_256,
                HashingAlgorithm::SHA3_384 => DigestAlg::Sha3_384,
                HashingAlgorithm::SHA3_512 => DigestAlg::Sha3_512,
                other => return Err(KmipError::FeatureNotSupported(format!("HASH with {other}"))),
            };
            if bytes > alg.output_len() {
                return Err(too_long(alg.output_len()));
            }
            let mut hasher = Hasher::new(alg);
            hasher.update(key);
            let digest = SecretBytes::new(hasher.finish());
            out.expose_mut().copy_from_slice(&digest.expose()[..bytes]);
        }
        DerivationMethod::HMAC => {
            // §4.6: the base's own algorithm names the PRF of an HMAC key.
            let alg = match mac_alg(base_alg) {
                Some(alg) => alg,
                None => hmac_of(need_hash()?)?,
            };
            let data = data.ok_or_else(|| {
                KmipError::MissingData("the Derivation Data of HMAC derivation".into())
            })?;
            if bytes > alg.output_len() {
                return Err(too_long(alg.output_len()));
            }
            let mut mac = Mac::new(alg, key);
            mac.update(data);
            let tag = mac.finish();
            out.expose_mut().copy_from_slice(&tag.expose()[..bytes]);
        }
        DerivationMethod::NIST800_108_C => {
            let alg = hmac_of(need_hash()?)?;
            let fixed = data.ok_or_else(|| {
                KmipError::MissingData(
                    "the Derivation Data (Label || 0x00 || Context) of NIST800-108-C".into(),
                )
            })?;
            if request.iv.is_some() {
                return Err(KmipError::InvalidField(
                    "NIST800-108-C takes no Initialization Vector".into(),
                ));
            }
            let bits = u32::try_from(bytes * 8).map_err(|_| too_long(MAX_DERIVED))?;
            for (counter, chunk) in (1u32..).zip(out.expose_mut().chunks_mut(alg.output_len())) {
                let mut mac = Mac::new(alg, key);
                mac.update(&counter.to_be_bytes());
                mac.update(fixed);
                mac.update(&bits.to_be_bytes());
                let block = mac.finish();
                chunk.copy_from_slice(&block.expose()[..chunk.len()]);
            }
        }
        DerivationMethod::NIST800_108_F | DerivationMethod::NIST800_108_DPI => {
            let alg = hmac_of(need_hash()?)?;
            let fixed = data.ok_or_else(|| {
                KmipError::MissingData(format!(
                    "the Derivation Data (Label || 0x00 || Context) of {}",
                    request.method
                ))
            })?;
            let bits = u32::try_from(bytes * 8).map_err(|_| too_long(MAX_DERIVED))?;
            let feedback = request.method == DerivationMethod::NIST800_108_F;
            let iv = request.iv.as_ref().map(|iv| iv.as_slice());
            if !feedback && iv.is_some() {
                return Err(KmipError::InvalidField(
                    "NIST800-108-DPI takes no Initialization Vector".into(),
                ));
            }
            if iv.is_some_and(|iv| iv.len() > alg.output_len()) {
                return Err(KmipError::InvalidField(format!(
                    "an Initialization Vector of at most {} bytes (the PRF's output)",
                    alg.output_len()
                )));
            }
            let prf = |parts: &[&[u8]]| {
                let mut mac = Mac::new(alg, key);
                for part in parts {
                    mac.update(part);
                }
                mac.finish()
            };
            let fixed_input = [fixed, &bits.to_be_bytes()[..]].concat();
            // Feedback: the previous block (first the IV); double-pipeline:
            // A(i), chained from the fixed input.
            let mut previous = SecretBytes::from_slice(if feedback {
                iv.unwrap_or_default()
            } else {
                &fixed_input
            });
            for (counter, chunk) in (1u32..).zip(out.expose_mut().chunks_mut(alg.output_len())) {
                let counter = counter.to_be_bytes();
                let block = if feedback {
                    prf(&[previous.expose(), &counter, &fixed_input])
                } else {
                    previous = prf(&[previous.expose()]);
                    prf(&[previous.expose(), &counter, &fixed_input])
                };
                chunk.copy_from_slice(&block.expose()[..chunk.len()]);
                if feedback {
                    previous = block;
                }
            }
        }
        other => {
            // KMIP 1.4 §11.7: an invalid Derivation Method is Invalid Field.
            return Err(KmipError::InvalidField(format!("Derivation Method {other}")));
        }
    }
    Ok(out)
}
