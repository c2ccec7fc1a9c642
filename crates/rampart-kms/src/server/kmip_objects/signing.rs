//! Sign and Signature Verify (KMIP 1.4 §4.31, §4.32; 2.1 §6.1.55,
//! §6.1.56): RSA PKCS#1 v1.5 and PSS, ECDSA and Ed25519 signatures by a
//! Private Key, checked with a Public Key, over Data or over the client's
//! own digest of it (Digested Data), or raw over Digested Data the client
//! encoded itself. A signature that does not check is a
//! successful Signature Verify answering Invalid, not an error.

use rampart_crypto::{CryptoError, Curve, DigestAlg, KeyAlg, SignatureScheme};
use rampart_kmip::enums::{
    CryptographicAlgorithm, DigitalSignatureAlgorithm as Dsa, PaddingMethod, ValidityIndicator,
};
use rampart_kmip::payload::{CryptographicParameters, SignRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::asym_key::{effective_parameters, mgf1_digest, pk_digest, AsymKey, Use};
use super::crypto::MAX_DATA;
use super::errors::R;
use super::session::Session;

/// What is signed: the message, or a digest the client computed.
enum Input<'a> {
    Message(&'a [u8]),
    Digest(&'a [u8]),
}

fn input(request: &SignRequest) -> R<Input<'_>> {
    match (&request.data, &request.digested_data) {
        (Some(_), Some(_)) => {
            Err(KmipError::InvalidField("both Data and Digested Data: give one".into()))
        }
        (Some(d), None) if d.len() > MAX_DATA => {
            Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")))
        }
        (Some(d), None) => Ok(Input::Message(d.as_slice())),
        (None, Some(d)) if d.len() > MAX_DATA => {
            Err(KmipError::InvalidField(format!("Digested Data is larger than {MAX_DATA} bytes")))
        }
        (None, Some(d)) => Ok(Input::Digest(d.as_slice())),
        (None, None) => Err(KmipError::MissingData("Data or Digested Data".into())),
    }
}

/// What a Sign or Signature Verify does: a scheme over the message or
/// the client's digest of it, or a raw signature (see [`raw`]).
#[derive(Debug, PartialEq, Eq)]
enum Work<'a> {
    Message(SignatureScheme, &'a [u8]),
    Digest(SignatureScheme, &'a [u8]),
    Raw(&'a [u8]),
}

fn work<'a>(p: &CryptographicParameters, alg: KeyAlg, input: Input<'a>) -> R<Work<'a>> {
    match input {
        Input::Digest(d) if raw(p, alg) => {
            named_algorithm_fits(p, alg)?;
            Ok(Work::Raw(d))
        }
        Input::Digest(d) => match scheme(p, alg)? {
            SignatureScheme::Ed25519 => Err(KmipError::FeatureNotSupported(
                "Ed25519 signs and verifies Data, not Digested Data".into(),
            )),
            scheme => Ok(Work::Digest(scheme, d)),
        },
        Input::Message(m) => Ok(Work::Message(scheme(p, alg)?, m)),
    }
}

/// Whether Digested Data is signed as given: with no Hashing Algorithm
/// or Digital Signature Algorithm to encode it by, an RSA key pads it
/// with PKCS#1 v1.5 (the client made the DigestInfo, or whatever its
/// protocol signs: PKCS#11's `CKM_RSA_PKCS`) and an EC key takes it as
/// the ECDSA hash value, of any length (`CKM_ECDSA`).
fn raw(p: &CryptographicParameters, alg: KeyAlg) -> bool {
    p.hashing_algorithm.is_none()
        && p.digital_signature_algorithm.is_none()
        && match alg {
            KeyAlg::Rsa => matches!(p.padding_method, None | Some(PaddingMethod::PKCS1_V1_5)),
            KeyAlg::Ec(_) => p.padding_method.is_none(),
            KeyAlg::Ed25519 | KeyAlg::Dsa => false,
        }
}

/// An error unless the parameters' Cryptographic Algorithm, if any, is
/// the key's.
fn named_algorithm_fits(p: &CryptographicParameters, alg: KeyAlg) -> R<()> {
    let Some(named) = p.cryptographic_algorithm else { return Ok(()) };
    let fits = match alg {
        KeyAlg::Rsa => named == CryptographicAlgorithm::RSA,
        KeyAlg::Ec(_) => {
            named == CryptographicAlgorithm::ECDSA || named == CryptographicAlgorithm::EC
        }
        KeyAlg::Ed25519 => named == CryptographicAlgorithm::ED25519,
        KeyAlg::Dsa => false,
    };
    if fits {
        Ok(())
    } else {
        Err(KmipError::InvalidField(format!(
            "Cryptographic Algorithm {named} does not fit the key ({alg:?})"
        )))
    }
}

/// The signature scheme the parameters name for a key of type `alg`:
/// a Digital Signature Algorithm, else the Cryptographic Algorithm,
/// Padding Method and Hashing Algorithm (KMIP 1.4 §4.31: "digital
/// signature algorithm or cryptographic algorithm and hash algorithm").
fn scheme(p: &CryptographicParameters, alg: KeyAlg) -> R<SignatureScheme> {
    if alg == KeyAlg::Dsa {
        return Err(KmipError::FeatureNotSupported(
            "DSA signatures (DSA keys are kept only)".into(),
        ));
    }
    named_algorithm_fits(p, alg)?;
    let hash = p.hashing_algorithm.map(pk_digest).transpose()?;
    let scheme = match p.digital_signature_algorithm {
        Some(dsa) => from_dsa(dsa, hash)?,
        None => match alg {
            KeyAlg::Rsa => {
                let hash = hash.ok_or_else(|| {
                    KmipError::MissingData(
                        "Cryptographic Parameters with a Hashing Algorithm or a Digital \
                         Signature Algorithm (in the request or the key's attribute)"
                            .into(),
                    )
                })?;
                match p.padding_method {
                    Some(PaddingMethod::PSS) => pss(p, hash)?,
                    None | Some(PaddingMethod::PKCS1_V1_5) => SignatureScheme::RsaPkcs1v15(hash),
                    Some(other) => {
                        return Err(KmipError::InvalidField(format!(
                            "Padding Method {other} for an RSA signature (PSS or PKCS1 v1.5)"
                        )))
                    }
                }
            }
            // FIPS 186-5 §6.4 pairs each curve with the hash of its size
            // when the client names none.
            KeyAlg::Ec(curve) => SignatureScheme::Ecdsa(hash.unwrap_or(match curve {
                Curve::P256 => DigestAlg::Sha256,
                Curve::P384 => DigestAlg::Sha384,
                Curve::P521 => DigestAlg::Sha512,
            })),
            KeyAlg::Ed25519 => SignatureScheme::Ed25519,
            KeyAlg::Dsa => {
                return Err(KmipError::FeatureNotSupported("DSA signatures".into()));
            }
        },
    };
    let scheme = match scheme {
        SignatureScheme::RsaPss { digest, .. } => pss(p, digest)?,
        other => other,
    };
    let fits = matches!(
        (scheme, alg),
        (SignatureScheme::RsaPkcs1v15(_) | SignatureScheme::RsaPss { .. }, KeyAlg::Rsa)
            | (SignatureScheme::Ecdsa(_), KeyAlg::Ec(_))
            | (SignatureScheme::Ed25519, KeyAlg::Ed25519)
    );
    if !fits {
        return Err(KmipError::InvalidField(format!(
            "Digital Signature Algorithm {} does not fit the key ({alg:?})",
            p.digital_signature_algorithm.map_or_else(String::new, |d| d.to_string())
        )));
    }
    Ok(scheme)
}

/// RSASSA-PSS with the parameters' salt length, mask generator and
/// trailer field.
fn pss(p: &CryptographicParameters, digest: DigestAlg) -> R<SignatureScheme> {
    let salt_len = p
        .salt_length
        .map(|s| {
            u32::try_from(s)
                .map_err(|_| KmipError::InvalidField(format!("Salt Length {s} is negative")))
        })
        .transpose()?;
    // RFC 8017 §9.1: trailerField 1 is the 0xBC byte, the only one PSS uses.
    if p.trailer_field.is_some_and(|t| t != 1) {
        return Err(KmipError::FeatureNotSupported("PSS Trailer Fields other than 1".into()));
    }
    Ok(SignatureScheme::RsaPss { digest, mgf1: mgf1_digest(p, digest)?, salt_len })
}

fn from_dsa(dsa: Dsa, hash: Option<DigestAlg>) -> R<SignatureScheme> {
    Ok(match dsa {
        Dsa::SHA1_WITH_RSA => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha1),
        Dsa::SHA224_WITH_RSA => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha224),
        Dsa::SHA256_WITH_RSA => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha256),
        Dsa::SHA384_WITH_RSA => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha384),
        Dsa::SHA512_WITH_RSA => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha512),
        // RSASSA-PSS names no hash: the Hashing Algorithm gives it.
        Dsa::RSASSA_PSS => SignatureScheme::RsaPss {
            digest: hash.ok_or_else(|| {
                KmipError::MissingData("a Hashing Algorithm for RSASSA-PSS".into())
            })?,
            mgf1: DigestAlg::Sha1,
            salt_len: None,
        },
        Dsa::ECDSA_WITH_SHA1 => SignatureScheme::Ecdsa(DigestAlg::Sha1),
        Dsa::ECDSA_WITH_SHA224 => SignatureScheme::Ecdsa(DigestAlg::Sha224),
        Dsa::ECDSA_WITH_SHA256 => SignatureScheme::Ecdsa(DigestAlg::Sha256),
        Dsa::ECDSA_WITH_SHA384 => SignatureScheme::Ecdsa(DigestAlg::Sha384),
        Dsa::ECDSA_WITH_SHA512 => SignatureScheme::Ecdsa(DigestAlg::Sha512),
        other => {
            return Err(KmipError::FeatureNotSupported(format!(
                "Digital Signature Algorithm {other} (RSA PKCS#1 v1.5 and PSS with SHA-1/2, \
                 and ECDSA, are served)"
            )))
        }
    })
}

fn signing_error(e: CryptoError) -> KmipError {
    match e {
        CryptoError::InvalidLength { what, len, requirement } => {
            KmipError::InvalidField(format!("the {what} is {len} bytes: it must be {requirement}"))
        }
        CryptoError::InvalidParameter(m) => KmipError::InvalidField(m.into()),
        other => KmipError::CryptographicFailure(other.to_string()),
    }
}

impl Session<'_> {
    pub(crate) async fn sign(&mut self, request: &SignRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let data = input(request)?;
        let (obj, key) = self.asymmetric_key(&uid, Use::Sign).await?;
        let AsymKey::Private(key) = &*key else {
            return Err(KmipError::GeneralFailure("a private key was loaded as public".into()));
        };
        let params = effective_parameters(&obj, request.parameters.as_ref())?;
        let signature = match work(&params, key.alg(), data)? {
            Work::Message(scheme, m) => key.sign(scheme, m),
            Work::Digest(scheme, d) => key.sign_digest(scheme, d),
            Work::Raw(d) => key.sign_raw(d),
        }
        .map_err(signing_error)?;
        Ok(vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::bytes(Tag::SIGNATURE_DATA, &signature),
        ])
    }

    pub(crate) async fn signature_verify(&mut self, request: &SignRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let data = input(request)?;
        let signature = request
            .signature
            .as_deref()
            .ok_or_else(|| KmipError::MissingData("Signature Data".into()))?;
        if signature.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!(
                "Signature Data is larger than {MAX_DATA} bytes"
            )));
        }
        let (obj, key) = self.asymmetric_key(&uid, Use::Verify).await?;
        let AsymKey::Public(key) = &*key else {
            return Err(KmipError::GeneralFailure("a public key was loaded as private".into()));
        };
        let params = effective_parameters(&obj, request.parameters.as_ref())?;
        let valid = match work(&params, key.alg(), data)? {
            Work::Message(scheme, m) => key.verify(scheme, m, signature),
            Work::Digest(scheme, d) => key.verify_digest(scheme, d, signature),
            Work::Raw(d) => key.verify_raw(d, signature),
        }
        .map_err(signing_error)?;
        let validity = if valid { ValidityIndicator::VALID } else { ValidityIndicator::INVALID };
        Ok(vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::enumeration(Tag::VALIDITY_INDICATOR, validity.0),
        ])
    }
}

#[cfg(test)]
mod tests {
    use rampart_kmip::enums::HashingAlgorithm;

    use super::*;

    fn params(f: impl FnOnce(&mut CryptographicParameters)) -> CryptographicParameters {
        let mut p = CryptographicParameters::default();
        f(&mut p);
        p
    }

    #[test]
    fn rsa_pss_takes_its_mgf1_hash_from_the_hashing_algorithm_unless_named() {
        let p = params(|p| {
            p.padding_method = Some(PaddingMethod::PSS);
            p.hashing_algorithm = Some(HashingAlgorithm::SHA256);
            p.salt_length = Some(222);
        });
        assert_eq!(
            scheme(&p, KeyAlg::Rsa).unwrap(),
            SignatureScheme::RsaPss {
                digest: DigestAlg::Sha256,
                mgf1: DigestAlg::Sha256,
                salt_len: Some(222)
            }
        );
        let p = params(|p| {
            p.digital_signature_algorithm = Some(Dsa::RSASSA_PSS);
            p.hashing_algorithm = Some(HashingAlgorithm::SHA384);
            p.mask_generator_hashing_algorithm = Some(HashingAlgorithm::SHA1);
        });
        assert_eq!(
            scheme(&p, KeyAlg::Rsa).unwrap(),
            SignatureScheme::RsaPss {
                digest: DigestAlg::Sha384,
                mgf1: DigestAlg::Sha1,
                salt_len: None
            }
        );
    }

    #[test]
    fn digested_data_with_nothing_to_encode_it_by_is_signed_raw() {
        let d = Input::Digest(b"abc");
        assert_eq!(work(&params(|_| {}), KeyAlg::Rsa, d).unwrap(), Work::Raw(b"abc"));
        let pkcs1 = params(|p| p.padding_method = Some(PaddingMethod::PKCS1_V1_5));
        assert_eq!(work(&pkcs1, KeyAlg::Rsa, Input::Digest(b"abc")).unwrap(), Work::Raw(b"abc"));
        let ec = KeyAlg::Ec(Curve::P256);
        assert_eq!(work(&params(|_| {}), ec, Input::Digest(b"abc")).unwrap(), Work::Raw(b"abc"));
        // A named hash encodes it; Data is always hashed; PSS is never raw.
        let sha256 = params(|p| p.hashing_algorithm = Some(HashingAlgorithm::SHA256));
        assert_eq!(
            work(&sha256, ec, Input::Digest(b"abc")).unwrap(),
            Work::Digest(SignatureScheme::Ecdsa(DigestAlg::Sha256), b"abc")
        );
        assert_eq!(
            work(&params(|_| {}), ec, Input::Message(b"abc")).unwrap(),
            Work::Message(SignatureScheme::Ecdsa(DigestAlg::Sha256), b"abc")
        );
        let pss = params(|p| p.padding_method = Some(PaddingMethod::PSS));
        assert!(matches!(
            work(&pss, KeyAlg::Rsa, Input::Digest(b"abc")),
            Err(KmipError::MissingData(_))
        ));
        let named = params(|p| p.cryptographic_algorithm = Some(CryptographicAlgorithm::RSA));
        assert!(matches!(work(&named, ec, Input::Digest(b"abc")), Err(KmipError::InvalidField(_))));
        assert!(matches!(
            work(&params(|_| {}), KeyAlg::Ed25519, Input::Digest(b"abc")),
            Err(KmipError::FeatureNotSupported(_))
        ));
    }

    #[test]
    fn schemes_that_do_not_fit_the_key_are_invalid_fields() {
        let p = params(|p| p.digital_signature_algorithm = Some(Dsa::ECDSA_WITH_SHA256));
        assert!(matches!(scheme(&p, KeyAlg::Rsa), Err(KmipError::InvalidField(_))));
        let p = params(|p| p.cryptographic_algorithm = Some(CryptographicAlgorithm::RSA));
        assert!(matches!(scheme(&p, KeyAlg::Ec(Curve::P256)), Err(KmipError::InvalidField(_))));
        let p = params(|p| p.digital_signature_algorithm = Some(Dsa::MD5_WITH_RSA));
        assert!(matches!(scheme(&p, KeyAlg::Rsa), Err(KmipError::FeatureNotSupported(_))));
        // RSA needs a hash; ECDSA defaults to its curve's.
        assert!(matches!(scheme(&params(|_| {}), KeyAlg::Rsa), Err(KmipError::MissingData(_))));
        assert_eq!(
            scheme(&params(|_| {}), KeyAlg::Ec(Curve::P384)).unwrap(),
            SignatureScheme::Ecdsa(DigestAlg::Sha384)
        );
        let p = params(|p| {
            p.padding_method = Some(PaddingMethod::PSS);
            p.hashing_algorithm = Some(HashingAlgorithm::SHA256);
            p.salt_length = Some(-1);
        });
        assert!(matches!(scheme(&p, KeyAlg::Rsa), Err(KmipError::InvalidField(_))));
    }
}
