//! Public-key cryptography: RSA, ECDSA (P-256, P-384, P-521) and Ed25519
//! keys held as DER (a private key as PKCS#8, a public key as
//! SubjectPublicKeyInfo), their signatures, and RSA encryption (OAEP and
//! PKCS#1 v1.5).
//!
//! Key generation is `aws-lc-rs`'s (see `keygen`); the operations go
//! through AWS-LC's `EVP_PKEY` interface (`ffi::pkey`), since the
//! parameters a key manager is asked for (a PSS salt length, an OAEP MGF1
//! hash other than its label hash, SHA-224, a digest computed by the
//! client) are more than `aws-lc-rs`'s fixed algorithm constants cover.

use crate::ffi::pkey::{
    CtxParams, Md, Pkey, PkeyType, RsaPad, NID_P256, NID_P384, NID_P521, PSS_SALT_AUTO,
};
use crate::{CryptoError, DigestAlg, Hasher, Result, SecretBytes};

/// The elliptic curves of ECDSA keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    P256,
    P384,
    P521,
}

impl Curve {
    /// The curve's field size in bits (a KMIP Cryptographic Length).
    #[must_use]
    pub fn bits(self) -> u32 {
        match self {
            Self::P256 => 256,
            Self::P384 => 384,
            Self::P521 => 521,
        }
    }

    fn from_nid(nid: i32) -> Option<Self> {
        match nid {
            NID_P256 => Some(Self::P256),
            NID_P384 => Some(Self::P384),
            NID_P521 => Some(Self::P521),
            _ => None,
        }
    }
}

/// What kind of key a DER key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyAlg {
    Rsa,
    Ec(Curve),
    Ed25519,
    /// DSA (FIPS 186-4): kept and converted between formats, never used
    /// to sign here.
    Dsa,
}

/// How a signature is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureScheme {
    /// RSASSA-PKCS1-v1_5 (RFC 8017 §8.2).
    RsaPkcs1v15(DigestAlg),
    /// RSASSA-PSS (RFC 8017 §8.1) with MGF1 over `mgf1`. A salt length of
    /// `None` is the digest's length when signing, and any length when
    /// verifying.
    RsaPss { digest: DigestAlg, mgf1: DigestAlg, salt_len: Option<u32> },
    /// ECDSA with a DER-encoded (X9.62) signature.
    Ecdsa(DigestAlg),
    /// Pure Ed25519 (RFC 8032 §5.1), which hashes the message itself.
    Ed25519,
}

impl SignatureScheme {
    /// The digest the message is hashed with before signing (none for
    /// Ed25519).
    #[must_use]
    pub fn digest(self) -> Option<DigestAlg> {
        match self {
            Self::RsaPkcs1v15(d) | Self::RsaPss { digest: d, .. } | Self::Ecdsa(d) => Some(d),
            Self::Ed25519 => None,
        }
    }

    fn fits(self, alg: KeyAlg) -> bool {
        matches!(
            (self, alg),
            (Self::RsaPkcs1v15(_) | Self::RsaPss { .. }, KeyAlg::Rsa)
                | (Self::Ecdsa(_), KeyAlg::Ec(_))
                | (Self::Ed25519, KeyAlg::Ed25519)
        )
    }

    fn params(self, verify: bool) -> Result<CtxParams<'static>> {
        Ok(match self {
            Self::RsaPkcs1v15(d) => CtxParams {
                rsa_padding: Some(RsaPad::Pkcs1),
                signature_md: Some(md(d)?),
                ..CtxParams::default()
            },
            Self::RsaPss { digest, mgf1, salt_len } => {
                let salt = match salt_len {
                    Some(len) => i32::try_from(len)
                        .map_err(|_| CryptoError::InvalidParameter("PSS salt length"))?,
                    None if verify => PSS_SALT_AUTO,
                    None => i32::try_from(digest.output_len())
                        .map_err(|_| CryptoError::InvalidParameter("PSS salt length"))?,
                };
                CtxParams {
                    rsa_padding: Some(RsaPad::Pss),
                    signature_md: Some(md(digest)?),
                    mgf1_md: Some(md(mgf1)?),
                    pss_salt_len: Some(salt),
                    ..CtxParams::default()
                }
            }
            Self::Ecdsa(d) => CtxParams { signature_md: Some(md(d)?), ..CtxParams::default() },
            Self::Ed25519 => CtxParams::default(),
        })
    }
}

/// How RSA encrypts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsaEncryption<'a> {
    /// RSAES-OAEP (RFC 8017 §7.1) with its hash `digest`, MGF1 over
    /// `mgf1` and `label` (most often empty).
    Oaep { digest: DigestAlg, mgf1: DigestAlg, label: &'a [u8] },
    /// RSAES-PKCS1-v1_5 (RFC 8017 §7.2), for the clients that still need
    /// it; decryption failures all look alike.
    Pkcs1v15,
}

impl<'a> RsaEncryption<'a> {
    fn params(self) -> Result<CtxParams<'a>> {
        Ok(match self {
            Self::Oaep { digest, mgf1, label } => CtxParams {
                rsa_padding: Some(RsaPad::Oaep),
                oaep_label: label,
                oaep_md: Some(md(digest)?),
                mgf1_md: Some(md(mgf1)?),
                ..CtxParams::default()
            },
            Self::Pkcs1v15 => {
                CtxParams { rsa_padding: Some(RsaPad::Pkcs1), ..CtxParams::default() }
            }
        })
    }
}

/// The SHA-1 and SHA-2 digests are the ones AWS-LC signs and pads with.
fn md(alg: DigestAlg) -> Result<Md> {
    Ok(match alg {
        DigestAlg::Sha1 => Md::Sha1,
        DigestAlg::Sha224 => Md::Sha224,
        DigestAlg::Sha256 => Md::Sha256,
        DigestAlg::Sha384 => Md::Sha384,
        DigestAlg::Sha512 => Md::Sha512,
        _ => {
            return Err(CryptoError::InvalidParameter(
                "public-key operations use SHA-1, SHA-224, SHA-256, SHA-384 or SHA-512",
            ))
        }
    })
}

fn key_alg(key: &Pkey) -> Result<KeyAlg> {
    match key.key_type() {
        PkeyType::Rsa => Ok(KeyAlg::Rsa),
        PkeyType::Ed25519 => Ok(KeyAlg::Ed25519),
        PkeyType::Ec(nid) => Curve::from_nid(nid)
            .map(KeyAlg::Ec)
            .ok_or(CryptoError::InvalidParameter("EC keys are on P-256, P-384 or P-521")),
        PkeyType::Other => {
            Err(CryptoError::InvalidParameter("keys are RSA, ECDSA (P-256/384/521) or Ed25519"))
        }
    }
}

/// The digest of `message` that RSA and ECDSA sign.
fn digest_of(alg: DigestAlg, message: &[u8]) -> Vec<u8> {
    let mut h = Hasher::new(alg);
    h.update(message);
    h.finish()
}

fn check_digest_len(scheme: SignatureScheme, digest: &[u8]) -> Result<()> {
    match scheme.digest() {
        Some(alg) if alg.output_len() == digest.len() => Ok(()),
        Some(alg) => Err(CryptoError::InvalidLength {
            what: "digest",
            len: digest.len(),
            requirement: match alg.output_len() {
                20 => "20 bytes (SHA-1)",
                28 => "28 bytes (SHA-224)",
                32 => "32 bytes (SHA-256)",
                48 => "48 bytes (SHA-384)",
                _ => "64 bytes (SHA-512)",
            },
        }),
        None => Err(CryptoError::InvalidParameter("Ed25519 signs whole messages, not digests")),
    }
}

/// The context set-up of a raw signature (see [`PrivateKey::sign_raw`]):
/// RSA's PKCS#1 v1.5 padding with no digest, so no DigestInfo is added;
/// ECDSA with no digest, so the input is used as the hash value.
fn raw_params(alg: KeyAlg, input: &[u8], max_rsa_input: usize) -> Result<CtxParams<'static>> {
    match alg {
        // RFC 8017 §9.2 step 3: the padding takes at least 11 bytes.
        KeyAlg::Rsa if input.len() > max_rsa_input => Err(CryptoError::InvalidLength {
            what: "input to a raw PKCS#1 v1.5 signature",
            len: input.len(),
            requirement: "at most the modulus size less 11 bytes",
        }),
        KeyAlg::Rsa => Ok(CtxParams { rsa_padding: Some(RsaPad::Pkcs1), ..CtxParams::default() }),
        // SEC 1 §4.1.3 step 5: a hash value longer than the order is
        // truncated to its bit length, so any length is an input.
        KeyAlg::Ec(_) if input.is_empty() => Err(CryptoError::InvalidLength {
            what: "input to a raw ECDSA signature",
            len: 0,
            requirement: "at least 1 byte",
        }),
        KeyAlg::Ec(_) => Ok(CtxParams::default()),
        KeyAlg::Ed25519 | KeyAlg::Dsa => {
            Err(CryptoError::InvalidParameter("only RSA and ECDSA keys make raw signatures"))
        }
    }
}

/// A private key (RSA, ECDSA or Ed25519), parsed from PKCS#8.
#[derive(Debug)]
pub struct PrivateKey {
    key: Pkey,
    alg: KeyAlg,
}

impl PrivateKey {
    /// Parses a PKCS#8 PrivateKeyInfo.
    ///
    /// # Errors
    /// `InvalidParameter` if `der` is not a PKCS#8 key of a served type.
    pub fn from_pkcs8(der: &[u8]) -> Result<Self> {
        let key = Pkey::parse_private(der)?;
        let alg = key_alg(&key)?;
        Ok(Self { key, alg })
    }

    #[must_use]
    pub fn alg(&self) -> KeyAlg {
        self.alg
    }

    /// The RSA modulus or EC field size in bits (256 for Ed25519).
    #[must_use]
    pub fn bits(&self) -> u32 {
        self.key.bits()
    }

    /// The PKCS#8 encoding (AWS-LC's, which may differ from the bytes
    /// parsed in optional fields).
    ///
    /// # Errors
    /// A backend failure.
    pub fn to_pkcs8(&self) -> Result<SecretBytes> {
        self.key.private_der()
    }

    /// The public half as SubjectPublicKeyInfo DER.
    ///
    /// # Errors
    /// A backend failure.
    pub fn public_key_der(&self) -> Result<Vec<u8>> {
        self.key.public_der()
    }

    /// The public half.
    ///
    /// # Errors
    /// A backend failure.
    pub fn public_key(&self) -> Result<PublicKey> {
        PublicKey::from_spki(&self.public_key_der()?)
    }

    fn check_scheme(&self, scheme: SignatureScheme) -> Result<()> {
        if scheme.fits(self.alg) {
            Ok(())
        } else {
            Err(CryptoError::InvalidParameter("the signature scheme does not fit the key"))
        }
    }

    /// Signs `message` (hashing it with the scheme's digest first).
    ///
    /// # Errors
    /// `InvalidParameter` for a scheme that does not fit the key; a
    /// backend failure (a PSS salt too long for the key, say).
    pub fn sign(&self, scheme: SignatureScheme, message: &[u8]) -> Result<Vec<u8>> {
        self.check_scheme(scheme)?;
        match scheme.digest() {
            Some(alg) => self.key.sign_digest(&scheme.params(false)?, &digest_of(alg, message)),
            None => self.key.sign_message(message),
        }
    }

    /// Signs a digest the caller computed with the scheme's digest
    /// function (not for Ed25519, which signs whole messages).
    ///
    /// # Errors
    /// As [`PrivateKey::sign`], and `InvalidLength` for a digest of the
    /// wrong length.
    pub fn sign_digest(&self, scheme: SignatureScheme, digest: &[u8]) -> Result<Vec<u8>> {
        self.check_scheme(scheme)?;
        check_digest_len(scheme, digest)?;
        self.key.sign_digest(&scheme.params(false)?, digest)
    }

    /// Signs `input` as given, for callers that encode it themselves
    /// (PKCS#11's `CKM_RSA_PKCS` and `CKM_ECDSA`): with an RSA key,
    /// PKCS#1 v1.5 type-1 padding around `input` (at most the modulus
    /// size less 11 bytes, usually a DigestInfo); with an EC key, ECDSA
    /// taking `input` as the hash value.
    ///
    /// # Errors
    /// `InvalidParameter` for an Ed25519 key; `InvalidLength` for an
    /// input RSA cannot pad or an empty ECDSA input.
    pub fn sign_raw(&self, input: &[u8]) -> Result<Vec<u8>> {
        let params = raw_params(self.alg, input, self.key.max_output()?.saturating_sub(11))?;
        self.key.sign_digest(&params, input)
    }

    /// Decrypts an RSA ciphertext.
    ///
    /// # Errors
    /// `InvalidParameter` for a key that is not RSA; `AuthenticationFailed`
    /// for a ciphertext that does not decrypt under the padding.
    pub fn decrypt(&self, padding: RsaEncryption<'_>, ciphertext: &[u8]) -> Result<SecretBytes> {
        if self.alg != KeyAlg::Rsa {
            return Err(CryptoError::InvalidParameter("only RSA keys encrypt"));
        }
        self.key.decrypt(&padding.params()?, ciphertext)
    }
}

/// A public key (RSA, ECDSA or Ed25519), parsed from SubjectPublicKeyInfo.
#[derive(Debug)]
pub struct PublicKey {
    key: Pkey,
    alg: KeyAlg,
}

impl PublicKey {
    /// Parses a SubjectPublicKeyInfo.
    ///
    /// # Errors
    /// `InvalidParameter` if `der` is not a public key of a served type.
    pub fn from_spki(der: &[u8]) -> Result<Self> {
        let key = Pkey::parse_public(der)?;
        let alg = key_alg(&key)?;
        Ok(Self { key, alg })
    }

    #[must_use]
    pub fn alg(&self) -> KeyAlg {
        self.alg
    }

    /// The RSA modulus or EC field size in bits (256 for Ed25519).
    #[must_use]
    pub fn bits(&self) -> u32 {
        self.key.bits()
    }

    /// The SubjectPublicKeyInfo DER (AWS-LC's encoding).
    ///
    /// # Errors
    /// A backend failure.
    pub fn to_spki(&self) -> Result<Vec<u8>> {
        self.key.public_der()
    }

    fn check_scheme(&self, scheme: SignatureScheme) -> Result<()> {
        if scheme.fits(self.alg) {
            Ok(())
        } else {
            Err(CryptoError::InvalidParameter("the signature scheme does not fit the key"))
        }
    }

    /// Whether `signature` is the key's signature of `message`.
    ///
    /// # Errors
    /// `InvalidParameter` for a scheme that does not fit the key; a
    /// signature that does not verify is `Ok(false)`.
    pub fn verify(
        &self,
        scheme: SignatureScheme,
        message: &[u8],
        signature: &[u8],
    ) -> Result<bool> {
        self.check_scheme(scheme)?;
        match scheme.digest() {
            Some(alg) => {
                self.key.verify_digest(&scheme.params(true)?, &digest_of(alg, message), signature)
            }
            None => self.key.verify_message(message, signature),
        }
    }

    /// Whether `signature` is the key's signature of a digest the caller
    /// computed.
    ///
    /// # Errors
    /// As [`PublicKey::verify`], and `InvalidLength` for a digest of the
    /// wrong length.
    pub fn verify_digest(
        &self,
        scheme: SignatureScheme,
        digest: &[u8],
        signature: &[u8],
    ) -> Result<bool> {
        self.check_scheme(scheme)?;
        check_digest_len(scheme, digest)?;
        self.key.verify_digest(&scheme.params(true)?, digest, signature)
    }

    /// Whether `signature` is the key's raw signature of `input` (see
    /// [`PrivateKey::sign_raw`]).
    ///
    /// # Errors
    /// As [`PrivateKey::sign_raw`]; a signature that does not verify is
    /// `Ok(false)`.
    pub fn verify_raw(&self, input: &[u8], signature: &[u8]) -> Result<bool> {
        let params = raw_params(self.alg, input, self.key.max_output()?.saturating_sub(11))?;
        self.key.verify_digest(&params, input, signature)
    }

    /// Encrypts `plaintext` under an RSA key.
    ///
    /// # Errors
    /// `InvalidParameter` for a key that is not RSA; `InvalidLength` for a
    /// plaintext too long for the key and padding.
    pub fn encrypt(&self, padding: RsaEncryption<'_>, plaintext: &[u8]) -> Result<Vec<u8>> {
        if self.alg != KeyAlg::Rsa {
            return Err(CryptoError::InvalidParameter("only RSA keys encrypt"));
        }
        self.key.encrypt(&padding.params()?, plaintext)
    }
}
