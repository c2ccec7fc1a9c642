//! Asymmetric keys between the Key Formats KMIP carries them in and the
//! one form each is stored in: a private key as PKCS#8, a public key as
//! SubjectPublicKeyInfo (what KMIP calls X.509), whatever format the
//! client registered. Register converts in; Get converts out to the
//! format asked for, or by default to the registered one (KMIP 1.4 §4.11).

use rampart_crypto::key_formats::{self as kf, KeyInfo, RsaPrivateParts};
use rampart_crypto::KeyAlg;
use rampart_crypto::{CryptoError, SecretBytes};
use rampart_kmip::enums::{CryptographicAlgorithm, KeyFormatType, ObjectType};
use rampart_kmip::object_parts::transparent_item;
use rampart_kmip::payload::KeyBlock;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Bytes;
use rampart_kmip::KmipError;

use super::errors::R;
use super::server_attributes::default_format;

/// A key as a Key Block carries it: bytes, or transparent integers.
pub(super) struct Exported {
    pub(super) material: Bytes,
    pub(super) integers: Vec<(Tag, Bytes)>,
}

fn refused(format: KeyFormatType) -> impl Fn(CryptoError) -> KmipError {
    move |e| match e {
        CryptoError::Unsupported(what) => {
            KmipError::FeatureNotSupported(format!("{format} keys: {what}"))
        }
        other => KmipError::InvalidField(format!("the {format} key material: {other}")),
    }
}

/// The KMIP algorithm of a key kind, and the ones a client may name it by.
pub(super) fn algorithm_of(
    kind: KeyAlg,
) -> (CryptographicAlgorithm, &'static [CryptographicAlgorithm]) {
    match kind {
        KeyAlg::Rsa => (CryptographicAlgorithm::RSA, &[CryptographicAlgorithm::RSA]),
        KeyAlg::Ec(_) => (
            CryptographicAlgorithm::EC,
            &[CryptographicAlgorithm::EC, CryptographicAlgorithm::ECDSA],
        ),
        KeyAlg::Ed25519 => (CryptographicAlgorithm::ED25519, &[CryptographicAlgorithm::ED25519]),
        KeyAlg::Dsa => (CryptographicAlgorithm::DSA, &[CryptographicAlgorithm::DSA]),
    }
}

/// Checks the algorithm and length a client gave (in the Key Block or the
/// template) against the key itself, and returns the ones to keep.
pub(super) fn check_claims(
    info: KeyInfo,
    claimed_algorithm: Option<u32>,
    claimed_length: Option<i32>,
) -> R<(u32, i32)> {
    let (algorithm, accepted) = algorithm_of(info.kind);
    let bits = i32::try_from(info.bits).unwrap_or(i32::MAX);
    let algorithm = match claimed_algorithm {
        None => algorithm,
        Some(a) if accepted.contains(&CryptographicAlgorithm(a)) => CryptographicAlgorithm(a),
        Some(a) => {
            return Err(KmipError::InvalidField(format!(
                "the Cryptographic Algorithm {} does not match the {algorithm} key",
                CryptographicAlgorithm(a)
            )));
        }
    };
    if let Some(l) = claimed_length.filter(|l| *l != bits) {
        return Err(KmipError::InvalidField(format!(
            "the Cryptographic Length {l} does not match the {bits}-bit key"
        )));
    }
    Ok((algorithm.0, bits))
}

fn integer(integers: &[(Tag, Bytes)], tag: Tag) -> Option<&[u8]> {
    integers.iter().find(|(t, _)| *t == tag).map(|(_, b)| b.as_slice())
}

/// A registered private key's PKCS#8 and what it is.
pub(super) fn private_key_in(block: &KeyBlock) -> R<(SecretBytes, KeyInfo)> {
    let format = block.format;
    let material = block.material.as_slice();
    let pkcs8 = match format {
        KeyFormatType::PKCS8 => SecretBytes::from_slice(material),
        KeyFormatType::PKCS1 => {
            kf::rsa_private_pkcs8_from_pkcs1(material).map_err(refused(format))?
        }
        KeyFormatType::TRANSPARENT_RSA_PRIVATE_KEY => {
            let get = |tag| {
                integer(&block.integers, tag).map(SecretBytes::from_slice).ok_or_else(|| {
                    // KMIP lets a transparent key omit all but the modulus;
                    // the server keeps keys whole (PKCS#1 needs every one).
                    KmipError::FeatureNotSupported(format!(
                        "a {format} without its {tag}: every integer is needed"
                    ))
                })
            };
            let parts = RsaPrivateParts {
                modulus: get(Tag::MODULUS)?.expose().to_vec(),
                public_exponent: get(Tag::PUBLIC_EXPONENT)?.expose().to_vec(),
                private_exponent: get(Tag::PRIVATE_EXPONENT)?,
                p: get(Tag::P)?,
                q: get(Tag::Q)?,
                prime_exponent_p: get(Tag::PRIME_EXPONENT_P)?,
                prime_exponent_q: get(Tag::PRIME_EXPONENT_Q)?,
                crt_coefficient: get(Tag::CRT_COEFFICIENT)?,
            };
            kf::rsa_private_pkcs8_from_parts(&parts).map_err(refused(format))?
        }
        KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY => {
            kf::dsa_private_pkcs8(&dsa_parts(&block.integers, Tag::X)).map_err(refused(format))?
        }
        other => return Err(KmipError::KeyFormatTypeNotSupported(other.0)),
    };
    let info = kf::private_key_info(pkcs8.expose()).map_err(refused(format))?;
    Ok((pkcs8, info))
}

/// A registered public key's SubjectPublicKeyInfo and what it is.
pub(super) fn public_key_in(block: &KeyBlock) -> R<(Vec<u8>, KeyInfo)> {
    let format = block.format;
    let material = block.material.as_slice();
    let spki = match format {
        KeyFormatType::X509 => material.to_vec(),
        KeyFormatType::PKCS1 => kf::spki_from_rsa_public(material).map_err(refused(format))?,
        KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY => {
            let n = integer(&block.integers, Tag::MODULUS).unwrap_or(&[]);
            let e = integer(&block.integers, Tag::PUBLIC_EXPONENT).unwrap_or(&[]);
            kf::rsa_public_spki(n, e).map_err(refused(format))?
        }
        KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY => {
            kf::dsa_public_spki(&dsa_parts(&block.integers, Tag::Y)).map_err(refused(format))?
        }
        other => return Err(KmipError::KeyFormatTypeNotSupported(other.0)),
    };
    let info = kf::public_key_info(&spki).map_err(refused(format))?;
    Ok((spki, info))
}

fn rsa_only(info: KeyInfo, format: KeyFormatType) -> R<()> {
    only(KeyAlg::Rsa, info, format)
}

fn only(kind: KeyAlg, info: KeyInfo, format: KeyFormatType) -> R<()> {
    if info.kind == kind {
        Ok(())
    } else {
        Err(KmipError::KeyFormatTypeNotSupported(format.0))
    }
}

/// A transparent DSA key's integers (parsed as required by
/// `object_parts`), `key` naming its Y or X.
fn dsa_parts(integers: &[(Tag, Bytes)], key: Tag) -> kf::DsaParts {
    let get = |tag| integer(integers, tag).unwrap_or_default();
    kf::DsaParts {
        p: get(Tag::P).to_vec(),
        q: get(Tag::Q).to_vec(),
        g: get(Tag::G).to_vec(),
        key: SecretBytes::from_slice(get(key)),
    }
}

/// A DSA key's integers as a transparent Key Material holds them.
fn dsa_integers(parts: &kf::DsaParts, key: Tag) -> Vec<(Tag, Bytes)> {
    vec![
        (Tag::P, Bytes::from(parts.p.as_slice())),
        (Tag::Q, Bytes::from(parts.q.as_slice())),
        (Tag::G, Bytes::from(parts.g.as_slice())),
        (key, Bytes::from(parts.key.expose())),
    ]
}

/// A stored private key (PKCS#8) in `format`.
pub(super) fn private_key_out(pkcs8: &SecretBytes, format: KeyFormatType) -> R<Exported> {
    let failed = |e: CryptoError| KmipError::GeneralFailure(format!("a stored private key: {e}"));
    let info = kf::private_key_info(pkcs8.expose()).map_err(failed)?;
    let bytes = |b: &[u8]| Exported { material: Bytes::from(b), integers: Vec::new() };
    match format {
        KeyFormatType::PKCS8 => Ok(bytes(pkcs8.expose())),
        KeyFormatType::PKCS1 => {
            rsa_only(info, format)?;
            Ok(bytes(kf::rsa_private_pkcs1(pkcs8.expose()).map_err(failed)?.expose()))
        }
        KeyFormatType::TRANSPARENT_RSA_PRIVATE_KEY => {
            rsa_only(info, format)?;
            let p = kf::rsa_private_parts(pkcs8.expose()).map_err(failed)?;
            let integers = vec![
                (Tag::MODULUS, Bytes::from(p.modulus.as_slice())),
                (Tag::PRIVATE_EXPONENT, Bytes::from(p.private_exponent.expose())),
                (Tag::PUBLIC_EXPONENT, Bytes::from(p.public_exponent.as_slice())),
                (Tag::P, Bytes::from(p.p.expose())),
                (Tag::Q, Bytes::from(p.q.expose())),
                (Tag::PRIME_EXPONENT_P, Bytes::from(p.prime_exponent_p.expose())),
                (Tag::PRIME_EXPONENT_Q, Bytes::from(p.prime_exponent_q.expose())),
                (Tag::CRT_COEFFICIENT, Bytes::from(p.crt_coefficient.expose())),
            ];
            Ok(Exported { material: Bytes::default(), integers })
        }
        KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY => {
            only(KeyAlg::Dsa, info, format)?;
            let parts = kf::dsa_private_parts(pkcs8.expose()).map_err(failed)?;
            Ok(Exported { material: Bytes::default(), integers: dsa_integers(&parts, Tag::X) })
        }
        other => Err(KmipError::KeyFormatTypeNotSupported(other.0)),
    }
}

/// A stored public key (SubjectPublicKeyInfo) in `format`.
pub(super) fn public_key_out(spki: &[u8], format: KeyFormatType) -> R<Exported> {
    let failed = |e: CryptoError| KmipError::GeneralFailure(format!("a stored public key: {e}"));
    let info = kf::public_key_info(spki).map_err(failed)?;
    let bytes = |b: &[u8]| Exported { material: Bytes::from(b), integers: Vec::new() };
    match format {
        KeyFormatType::X509 => Ok(bytes(spki)),
        KeyFormatType::PKCS1 => {
            rsa_only(info, format)?;
            Ok(bytes(&kf::rsa_public_pkcs1(spki).map_err(failed)?))
        }
        KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY => {
            rsa_only(info, format)?;
            let (n, e) = kf::rsa_public_parts(spki).map_err(failed)?;
            let integers =
                vec![(Tag::MODULUS, Bytes::new(n)), (Tag::PUBLIC_EXPONENT, Bytes::new(e))];
            Ok(Exported { material: Bytes::default(), integers })
        }
        KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY => {
            only(KeyAlg::Dsa, info, format)?;
            let parts = kf::dsa_public_parts(spki).map_err(failed)?;
            Ok(Exported { material: Bytes::default(), integers: dsa_integers(&parts, Tag::Y) })
        }
        other => Err(KmipError::KeyFormatTypeNotSupported(other.0)),
    }
}

/// The bytes a Digest of `stored` (the object's stored form) in `format`
/// is computed on (KMIP 1.4 §3.17): the Key Material when it is a Byte
/// String, else the TTLV encoding of the Key Material structure.
pub(super) fn digest_input(
    object_type: ObjectType,
    format: KeyFormatType,
    stored: &SecretBytes,
) -> R<SecretBytes> {
    let exported = match object_type {
        ObjectType::PRIVATE_KEY => private_key_out(stored, format)?,
        ObjectType::PUBLIC_KEY => public_key_out(stored.expose(), format)?,
        _ => return Ok(SecretBytes::from_slice(stored.expose())),
    };
    if exported.integers.is_empty() {
        Ok(SecretBytes::from_slice(exported.material.as_slice()))
    } else {
        Ok(SecretBytes::new(transparent_item(&exported.integers).encode()?))
    }
}

/// The Key Format Type a generated key's Digest names: PKCS#1 for an RSA
/// key (the form KMIP's profiles use for the keys a server makes), the
/// stored form otherwise.
pub(super) fn generated_format(object_type: ObjectType, algorithm: Option<u32>) -> KeyFormatType {
    let rsa = algorithm == Some(CryptographicAlgorithm::RSA.0);
    match object_type {
        ObjectType::PRIVATE_KEY | ObjectType::PUBLIC_KEY if rsa => KeyFormatType::PKCS1,
        other => default_format(other),
    }
}
