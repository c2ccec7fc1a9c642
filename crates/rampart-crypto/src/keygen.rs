//! Key pair generation: `aws-lc-rs`'s generators, each pair handed back as
//! DER, the private half as PKCS#8 in a zeroizing buffer and the public
//! half as SubjectPublicKeyInfo.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{
    EcdsaKeyPair, Ed25519KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING,
    ECDSA_P521_SHA512_ASN1_SIGNING,
};

use crate::asymmetric::{Curve, KeyAlg, PrivateKey};
use crate::{CryptoError, Result, SecretBytes};

/// A new key pair, as DER.
pub struct KeyPairDer {
    /// PKCS#8 PrivateKeyInfo.
    pub private_pkcs8: SecretBytes,
    /// SubjectPublicKeyInfo.
    pub public_spki: Vec<u8>,
}

impl std::fmt::Debug for KeyPairDer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPairDer")
            .field("private_pkcs8", &self.private_pkcs8)
            .field("public_spki_len", &self.public_spki.len())
            .finish()
    }
}

fn pair(pkcs8: &[u8]) -> Result<KeyPairDer> {
    let private_pkcs8 = SecretBytes::from_slice(pkcs8);
    let public_spki = PrivateKey::from_pkcs8(private_pkcs8.expose())?.public_key_der()?;
    Ok(KeyPairDer { private_pkcs8, public_spki })
}

/// An RSA key pair of 2048, 3072 or 4096 bits (public exponent 65537).
///
/// # Errors
/// `InvalidKeyLength` for another size; a backend failure.
pub fn generate_rsa(bits: u32) -> Result<KeyPairDer> {
    let size = match bits {
        2048 => KeySize::Rsa2048,
        3072 => KeySize::Rsa3072,
        4096 => KeySize::Rsa4096,
        _ => {
            return Err(CryptoError::InvalidKeyLength {
                algorithm: "RSA",
                len: usize::try_from(bits / 8).unwrap_or(usize::MAX),
                expected: "256, 384 or 512 (2048, 3072 or 4096 bits)",
            })
        }
    };
    let key = RsaKeyPair::generate(size).map_err(|_| CryptoError::Backend("RSA key generation"))?;
    let der = key.as_der().map_err(|_| CryptoError::Backend("RSA PKCS#8 encoding"))?;
    pair(der.as_ref())
}

/// An ECDSA key pair on `curve`.
///
/// # Errors
/// A backend failure.
pub fn generate_ec(curve: Curve) -> Result<KeyPairDer> {
    // The signing algorithm only picks the curve: the key signs with any
    // digest through `PrivateKey`.
    let alg = match curve {
        Curve::P256 => &ECDSA_P256_SHA256_ASN1_SIGNING,
        Curve::P384 => &ECDSA_P384_SHA384_ASN1_SIGNING,
        Curve::P521 => &ECDSA_P521_SHA512_ASN1_SIGNING,
    };
    let key = EcdsaKeyPair::generate(alg).map_err(|_| CryptoError::Backend("EC key generation"))?;
    let der = key.to_pkcs8v1().map_err(|_| CryptoError::Backend("EC PKCS#8 encoding"))?;
    pair(der.as_ref())
}

/// An Ed25519 key pair.
///
/// # Errors
/// A backend failure.
pub fn generate_ed25519() -> Result<KeyPairDer> {
    let key =
        Ed25519KeyPair::generate().map_err(|_| CryptoError::Backend("Ed25519 key generation"))?;
    let der = key.to_pkcs8v1().map_err(|_| CryptoError::Backend("Ed25519 PKCS#8 encoding"))?;
    pair(der.as_ref())
}

/// A key pair of `alg`; `bits` is an RSA key's size (ignored otherwise).
///
/// # Errors
/// As [`generate_rsa`], [`generate_ec`] and [`generate_ed25519`];
/// `Unsupported` for DSA, which keys are only kept.
pub fn generate_key_pair(alg: KeyAlg, bits: u32) -> Result<KeyPairDer> {
    match alg {
        KeyAlg::Rsa => generate_rsa(bits),
        KeyAlg::Ec(curve) => generate_ec(curve),
        KeyAlg::Ed25519 => generate_ed25519(),
        KeyAlg::Dsa => Err(CryptoError::Unsupported("DSA key generation")),
    }
}
