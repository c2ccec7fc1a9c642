//! Asymmetric key formats: reading the encodings clients send keys in
//! into one canonical form per kind (PKCS#8 `PrivateKeyInfo` for private
//! keys, `SubjectPublicKeyInfo` for public keys), checking that the key
//! parses, and writing the other forms back: PKCS#1 `RSAPrivateKey` and
//! `RSAPublicKey` (RFC 8017 Appendix A.1), and the integers of an RSA key.
//!
//! RSA keys are accepted from 1024 to 8192 bits; from 2048 bits AWS-LC
//! checks the key's consistency as well as its encoding. EC keys are on
//! P-256, P-384 or P-521 (RFC 5480), Ed25519 keys as RFC 8410 defines.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::{self as sig, KeyPair as _};
use zeroize::Zeroizing;

use crate::asymmetric::{Curve, KeyAlg};
use crate::der::{self, Reader, BIT_STRING, NULL, OCTET_STRING, OID, SEQUENCE};
use crate::{CryptoError, Result, SecretBytes};

/// rsaEncryption (1.2.840.113549.1.1.1).
const OID_RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01];
/// id-ecPublicKey (1.2.840.10045.2.1).
const OID_EC: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
/// id-dsa (1.2.840.10040.4.1).
const OID_DSA: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x38, 0x04, 0x01];
/// id-Ed25519 (1.3.101.112).
const OID_ED25519: &[u8] = &[0x2B, 0x65, 0x70];
/// prime256v1 (1.2.840.10045.3.1.7).
const OID_P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
/// secp384r1 (1.3.132.0.34).
const OID_P384: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x22];
/// secp521r1 (1.3.132.0.35).
const OID_P521: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x23];

/// Smallest and largest RSA modulus accepted, in bits.
pub const RSA_MIN_BITS: u32 = 1024;
pub const RSA_MAX_BITS: u32 = 8192;

fn curve_oid(curve: Curve) -> &'static [u8] {
    match curve {
        Curve::P256 => OID_P256,
        Curve::P384 => OID_P384,
        Curve::P521 => OID_P521,
    }
}

fn curve_from_oid(oid: &[u8]) -> Result<Curve> {
    match oid {
        OID_P256 => Ok(Curve::P256),
        OID_P384 => Ok(Curve::P384),
        OID_P521 => Ok(Curve::P521),
        _ => Err(CryptoError::Unsupported("an elliptic curve other than P-256, P-384, P-521")),
    }
}

fn curve_signing(curve: Curve) -> &'static sig::EcdsaSigningAlgorithm {
    match curve {
        Curve::P256 => &sig::ECDSA_P256_SHA256_ASN1_SIGNING,
        Curve::P384 => &sig::ECDSA_P384_SHA384_ASN1_SIGNING,
        Curve::P521 => &sig::ECDSA_P521_SHA512_ASN1_SIGNING,
    }
}

fn curve_verifying(curve: Curve) -> &'static sig::EcdsaVerificationAlgorithm {
    match curve {
        Curve::P256 => &sig::ECDSA_P256_SHA256_ASN1,
        Curve::P384 => &sig::ECDSA_P384_SHA384_ASN1,
        Curve::P521 => &sig::ECDSA_P521_SHA512_ASN1,
    }
}

/// A parsed key's kind and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyInfo {
    pub kind: KeyAlg,
    /// The modulus size (RSA), the curve size (EC), 256 for Ed25519.
    pub bits: u32,
}

fn malformed(what: &'static str) -> CryptoError {
    CryptoError::InvalidEncoding(what)
}

/// An AlgorithmIdentifier: the key kind it names.
fn read_algorithm(r: &mut Reader<'_>) -> Result<KeyAlg> {
    let mut alg = r.sequence("AlgorithmIdentifier")?;
    let oid = alg.expect(OID, "AlgorithmIdentifier")?;
    let kind = match oid {
        OID_RSA => {
            // The parameters are NULL (RFC 8017 Appendix A.1); some
            // encoders leave them out.
            if !alg.is_empty() {
                alg.expect(NULL, "RSA parameters")?;
            }
            KeyAlg::Rsa
        }
        OID_EC => KeyAlg::Ec(curve_from_oid(alg.expect(OID, "EC named curve")?)?),
        // RFC 8410 §3: the parameters are absent.
        OID_ED25519 => KeyAlg::Ed25519,
        // The Dss-Parms are read by `read_dsa_params` from the same bytes.
        OID_DSA => {
            if !alg.is_empty() {
                alg.expect(SEQUENCE, "DSA parameters")?;
            }
            KeyAlg::Dsa
        }
        _ => {
            return Err(CryptoError::Unsupported(
                "a key algorithm other than RSA, EC, Ed25519, DSA",
            ))
        }
    };
    alg.finish("AlgorithmIdentifier")?;
    Ok(kind)
}

/// `dsa`: a DSA key's encoded Dss-Parms (empty for the other kinds).
fn put_algorithm(out: &mut Zeroizing<Vec<u8>>, kind: KeyAlg, dsa: &[u8]) {
    let mut alg = Zeroizing::new(Vec::new());
    match kind {
        KeyAlg::Dsa => {
            der::put(&mut alg, OID, OID_DSA);
            alg.extend_from_slice(dsa);
        }
        KeyAlg::Rsa => {
            der::put(&mut alg, OID, OID_RSA);
            der::put(&mut alg, NULL, &[]);
        }
        KeyAlg::Ec(curve) => {
            der::put(&mut alg, OID, OID_EC);
            der::put(&mut alg, OID, curve_oid(curve));
        }
        KeyAlg::Ed25519 => der::put(&mut alg, OID, OID_ED25519),
    }
    der::put(out, SEQUENCE, &alg);
}

/// The integers of an RSA private key (RFC 8017 §3.2, second form), each
/// a big-endian magnitude.
pub struct RsaPrivateParts {
    pub modulus: Vec<u8>,
    pub public_exponent: Vec<u8>,
    pub private_exponent: SecretBytes,
    pub p: SecretBytes,
    pub q: SecretBytes,
    pub prime_exponent_p: SecretBytes,
    pub prime_exponent_q: SecretBytes,
    pub crt_coefficient: SecretBytes,
}

impl std::fmt::Debug for RsaPrivateParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RsaPrivateParts({} bits)", der::bit_length(&self.modulus))
    }
}

/// Reads a PKCS#1 `RSAPrivateKey` (two primes only).
fn read_rsa_private(pkcs1: &[u8]) -> Result<RsaPrivateParts> {
    let mut outer = Reader::new(pkcs1);
    let mut r = outer.sequence("RSAPrivateKey")?;
    outer.finish("RSAPrivateKey")?;
    if r.small("RSAPrivateKey version")? != 0 {
        return Err(CryptoError::Unsupported("multi-prime RSA keys"));
    }
    let mut secret = |what| r.unsigned(what).map(SecretBytes::from_slice);
    let modulus = secret("RSA modulus")?.expose().to_vec();
    let public_exponent = secret("RSA public exponent")?.expose().to_vec();
    let parts = RsaPrivateParts {
        modulus,
        public_exponent,
        private_exponent: secret("RSA private exponent")?,
        p: secret("RSA prime p")?,
        q: secret("RSA prime q")?,
        prime_exponent_p: secret("RSA exponent dP")?,
        prime_exponent_q: secret("RSA exponent dQ")?,
        crt_coefficient: secret("RSA coefficient qInv")?,
    };
    r.finish("RSAPrivateKey")?;
    Ok(parts)
}

fn rsa_bits(modulus: &[u8], public_exponent: &[u8]) -> Result<u32> {
    let bits = der::bit_length(modulus);
    if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
        return Err(CryptoError::Unsupported("an RSA modulus outside 1024 to 8192 bits"));
    }
    if der::bit_length(public_exponent) < 2 || public_exponent.last().is_some_and(|b| b & 1 == 0) {
        return Err(malformed("RSA public exponent"));
    }
    Ok(bits)
}

/// PKCS#1 `RSAPrivateKey` of the parts.
fn write_rsa_private(parts: &RsaPrivateParts) -> Zeroizing<Vec<u8>> {
    let mut body = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut body, &[0]);
    der::put_unsigned(&mut body, &parts.modulus);
    der::put_unsigned(&mut body, &parts.public_exponent);
    for secret in [
        &parts.private_exponent,
        &parts.p,
        &parts.q,
        &parts.prime_exponent_p,
        &parts.prime_exponent_q,
        &parts.crt_coefficient,
    ] {
        der::put_unsigned(&mut body, secret.expose());
    }
    der::element(SEQUENCE, &body)
}

/// PKCS#8 `PrivateKeyInfo` (version 0) around a private key encoding.
fn wrap_pkcs8(kind: KeyAlg, private: &[u8]) -> SecretBytes {
    let mut body = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut body, &[0]);
    put_algorithm(&mut body, kind, &[]);
    der::put(&mut body, OCTET_STRING, private);
    SecretBytes::new(std::mem::take(&mut *der::element(SEQUENCE, &body)))
}

/// A PKCS#8 key's kind and its inner private key encoding.
fn unwrap_pkcs8(pkcs8: &[u8]) -> Result<(KeyAlg, &[u8])> {
    let mut outer = Reader::new(pkcs8);
    let mut r = outer.sequence("PrivateKeyInfo")?;
    outer.finish("PrivateKeyInfo")?;
    // Version 1 is RFC 5958's OneAsymmetricKey, which may add the public key.
    if r.small("PrivateKeyInfo version")? > 1 {
        return Err(malformed("PrivateKeyInfo version"));
    }
    let kind = read_algorithm(&mut r)?;
    let private = r.expect(OCTET_STRING, "PrivateKeyInfo privateKey")?;
    // [0] attributes and [1] publicKey may follow; they are not kept.
    while !r.is_empty() {
        match r.any()? {
            (0xA0 | 0x81 | 0xA1, _) => {}
            _ => return Err(malformed("PrivateKeyInfo")),
        }
    }
    Ok((kind, private))
}

/// Checks a PKCS#8 private key (encoding, and the key itself where AWS-LC
/// can) and says what it is.
pub fn private_key_info(pkcs8: &[u8]) -> Result<KeyInfo> {
    let (kind, private) = unwrap_pkcs8(pkcs8)?;
    let rejected = |_| malformed("the private key (AWS-LC rejects it)");
    let bits = match kind {
        KeyAlg::Rsa => {
            let parts = read_rsa_private(private)?;
            let bits = rsa_bits(&parts.modulus, &parts.public_exponent)?;
            if bits >= 2048 {
                aws_lc_rs::rsa::KeyPair::from_pkcs8(pkcs8).map_err(rejected)?;
            }
            bits
        }
        KeyAlg::Ec(curve) => {
            sig::EcdsaKeyPair::from_pkcs8(curve_signing(curve), pkcs8).map_err(rejected)?;
            curve.bits()
        }
        KeyAlg::Ed25519 => {
            sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8).map_err(rejected)?;
            256
        }
        KeyAlg::Dsa => check_dsa(&dsa_private_parts(pkcs8)?, true)?,
    };
    Ok(KeyInfo { kind, bits })
}

/// PKCS#8 of a PKCS#1 `RSAPrivateKey` (checked as [`private_key_info`]).
pub fn rsa_private_pkcs8_from_pkcs1(pkcs1: &[u8]) -> Result<SecretBytes> {
    read_rsa_private(pkcs1)?;
    let pkcs8 = wrap_pkcs8(KeyAlg::Rsa, pkcs1);
    private_key_info(pkcs8.expose())?;
    Ok(pkcs8)
}

/// The PKCS#1 `RSAPrivateKey` inside a PKCS#8 RSA key.
pub fn rsa_private_pkcs1(pkcs8: &[u8]) -> Result<SecretBytes> {
    match unwrap_pkcs8(pkcs8)? {
        (KeyAlg::Rsa, private) => {
            read_rsa_private(private)?;
            Ok(SecretBytes::from_slice(private))
        }
        _ => Err(CryptoError::Unsupported("PKCS#1 of a key that is not RSA")),
    }
}

/// The integers of a PKCS#8 RSA key.
pub fn rsa_private_parts(pkcs8: &[u8]) -> Result<RsaPrivateParts> {
    match unwrap_pkcs8(pkcs8)? {
        (KeyAlg::Rsa, private) => read_rsa_private(private),
        _ => Err(CryptoError::Unsupported("RSA integers of a key that is not RSA")),
    }
}

/// PKCS#8 of an RSA key's integers (checked as [`private_key_info`]).
pub fn rsa_private_pkcs8_from_parts(parts: &RsaPrivateParts) -> Result<SecretBytes> {
    rsa_private_pkcs8_from_pkcs1(&write_rsa_private(parts))
}

/// The `SubjectPublicKeyInfo` of a PKCS#8 private key's public half.
pub fn public_key_of(pkcs8: &[u8]) -> Result<Vec<u8>> {
    let (kind, private) = unwrap_pkcs8(pkcs8)?;
    let der = |d: std::result::Result<aws_lc_rs::encoding::PublicKeyX509Der<'_>, _>| {
        d.map(|d| d.as_ref().to_vec()).map_err(|_| CryptoError::Backend("public key encoding"))
    };
    let rejected = |_| malformed("the private key (AWS-LC rejects it)");
    match kind {
        KeyAlg::Rsa => {
            let parts = read_rsa_private(private)?;
            rsa_public_spki(&parts.modulus, &parts.public_exponent)
        }
        KeyAlg::Ec(curve) => {
            let pair =
                sig::EcdsaKeyPair::from_pkcs8(curve_signing(curve), pkcs8).map_err(rejected)?;
            der(pair.public_key().as_der())
        }
        KeyAlg::Ed25519 => {
            let pair = sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8).map_err(rejected)?;
            der(pair.public_key().as_der())
        }
        // y = g^x mod p is not computed here: DSA keys are only kept.
        KeyAlg::Dsa => Err(CryptoError::Unsupported("the public half of a DSA private key")),
    }
}

/// A DSA key's integers (FIPS 186-4 §4.1), big-endian magnitudes: the
/// domain parameters and the public `y` or the private `x`.
pub struct DsaParts {
    pub p: Vec<u8>,
    pub q: Vec<u8>,
    pub g: Vec<u8>,
    /// `y` of a public key, `x` of a private one.
    pub key: SecretBytes,
}

impl std::fmt::Debug for DsaParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DsaParts({} bits)", der::bit_length(&self.p))
    }
}

/// Whether magnitude `a` is less than magnitude `b`.
fn less(a: &[u8], b: &[u8]) -> bool {
    let trim =
        |m: &[u8]| m.get(m.iter().take_while(|x| **x == 0).count()..).unwrap_or(&[]).to_vec();
    let (a, b) = (trim(a), trim(b));
    (a.len(), a) < (b.len(), b)
}

/// Checks a DSA key's integers as far as their sizes and ranges go (the
/// primes are not tested: the key is kept, not used); its size in bits.
fn check_dsa(parts: &DsaParts, private: bool) -> Result<u32> {
    let bits = der::bit_length(&parts.p);
    let q_bits = der::bit_length(&parts.q);
    // 512 and 1024 bits are FIPS 186-2's sizes, which stored keys still use.
    if !(512..=3072).contains(&bits) || !matches!(q_bits, 160 | 224 | 256) {
        return Err(CryptoError::Unsupported("DSA keys outside FIPS 186's sizes"));
    }
    let one = [1u8];
    let in_range = |v: &[u8], below: &[u8]| less(&one, v) && less(v, below);
    let key_ok = if private {
        der::bit_length(parts.key.expose()) > 0 && less(parts.key.expose(), &parts.q)
    } else {
        in_range(parts.key.expose(), &parts.p)
    };
    if !in_range(&parts.g, &parts.p) || !key_ok {
        return Err(malformed("DSA key integers"));
    }
    Ok(bits)
}

fn read_dsa_params(r: &mut Reader<'_>) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mut alg = r.sequence("AlgorithmIdentifier")?;
    if alg.expect(OID, "AlgorithmIdentifier")? != OID_DSA {
        return Err(CryptoError::Unsupported("DSA integers of a key that is not DSA"));
    }
    let mut params = alg.sequence("DSA parameters")?;
    alg.finish("AlgorithmIdentifier")?;
    let p = params.unsigned("DSA p")?.to_vec();
    let q = params.unsigned("DSA q")?.to_vec();
    let g = params.unsigned("DSA g")?.to_vec();
    params.finish("DSA parameters")?;
    Ok((p, q, g))
}

fn dsa_params_der(parts: &DsaParts) -> Zeroizing<Vec<u8>> {
    let mut params = Zeroizing::new(Vec::new());
    for v in [&parts.p, &parts.q, &parts.g] {
        der::put_unsigned(&mut params, v);
    }
    der::element(SEQUENCE, &params)
}

/// The integers of a DSA `SubjectPublicKeyInfo` (RFC 3279 §2.3.2).
pub fn dsa_public_parts(spki: &[u8]) -> Result<DsaParts> {
    let mut outer = Reader::new(spki);
    let mut r = outer.sequence("SubjectPublicKeyInfo")?;
    outer.finish("SubjectPublicKeyInfo")?;
    let (p, q, g) = read_dsa_params(&mut r)?;
    let bits = r.expect(BIT_STRING, "subjectPublicKey")?;
    r.finish("SubjectPublicKeyInfo")?;
    let Some((0, key)) = bits.split_first() else { return Err(malformed("subjectPublicKey")) };
    let mut y = Reader::new(key);
    let value = y.unsigned("DSA y")?;
    y.finish("DSA public key")?;
    Ok(DsaParts { p, q, g, key: SecretBytes::from_slice(value) })
}

/// The integers of a DSA PKCS#8 private key (RFC 5958, RFC 3279).
pub fn dsa_private_parts(pkcs8: &[u8]) -> Result<DsaParts> {
    let mut outer = Reader::new(pkcs8);
    let mut r = outer.sequence("PrivateKeyInfo")?;
    outer.finish("PrivateKeyInfo")?;
    if r.small("PrivateKeyInfo version")? > 1 {
        return Err(malformed("PrivateKeyInfo version"));
    }
    let (p, q, g) = read_dsa_params(&mut r)?;
    let private = r.expect(OCTET_STRING, "PrivateKeyInfo privateKey")?;
    let mut x = Reader::new(private);
    let value = SecretBytes::from_slice(x.unsigned("DSA x")?);
    x.finish("DSA private key")?;
    Ok(DsaParts { p, q, g, key: value })
}

/// The `SubjectPublicKeyInfo` of a DSA public key's integers (checked).
pub fn dsa_public_spki(parts: &DsaParts) -> Result<Vec<u8>> {
    check_dsa(parts, false)?;
    let mut y = Zeroizing::new(vec![0u8]);
    der::put_unsigned(&mut y, parts.key.expose());
    let mut body = Zeroizing::new(Vec::new());
    put_algorithm(&mut body, KeyAlg::Dsa, &dsa_params_der(parts));
    der::put(&mut body, BIT_STRING, &y);
    Ok(der::element(SEQUENCE, &body).to_vec())
}

/// PKCS#8 of a DSA private key's integers (checked).
pub fn dsa_private_pkcs8(parts: &DsaParts) -> Result<SecretBytes> {
    check_dsa(parts, true)?;
    let mut x = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut x, parts.key.expose());
    let mut body = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut body, &[0]);
    put_algorithm(&mut body, KeyAlg::Dsa, &dsa_params_der(parts));
    der::put(&mut body, OCTET_STRING, &x);
    Ok(SecretBytes::new(std::mem::take(&mut *der::element(SEQUENCE, &body))))
}

/// A `SubjectPublicKeyInfo`'s kind and its key bits (the BIT STRING's
/// contents: an `RSAPublicKey`, an EC point, an Ed25519 key).
fn unwrap_spki(spki: &[u8]) -> Result<(KeyAlg, &[u8])> {
    let mut outer = Reader::new(spki);
    let mut r = outer.sequence("SubjectPublicKeyInfo")?;
    outer.finish("SubjectPublicKeyInfo")?;
    let kind = read_algorithm(&mut r)?;
    let bits = r.expect(BIT_STRING, "subjectPublicKey")?;
    r.finish("SubjectPublicKeyInfo")?;
    match bits.split_first() {
        Some((0, key)) => Ok((kind, key)),
        _ => Err(malformed("subjectPublicKey")),
    }
}

fn read_rsa_public(pkcs1: &[u8]) -> Result<(&[u8], &[u8])> {
    let mut outer = Reader::new(pkcs1);
    let mut r = outer.sequence("RSAPublicKey")?;
    outer.finish("RSAPublicKey")?;
    let n = r.unsigned("RSA modulus")?;
    let e = r.unsigned("RSA public exponent")?;
    r.finish("RSAPublicKey")?;
    Ok((n, e))
}

/// Checks a `SubjectPublicKeyInfo` and says what key it holds.
pub fn public_key_info(spki: &[u8]) -> Result<KeyInfo> {
    let (kind, key) = unwrap_spki(spki)?;
    let rejected = |_| malformed("the public key (AWS-LC rejects it)");
    let bits = match kind {
        KeyAlg::Rsa => {
            let (n, e) = read_rsa_public(key)?;
            let bits = rsa_bits(n, e)?;
            sig::ParsedPublicKey::new(&sig::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY, key)
                .map_err(rejected)?;
            bits
        }
        KeyAlg::Ec(curve) => {
            sig::ParsedPublicKey::new(curve_verifying(curve), key).map_err(rejected)?;
            curve.bits()
        }
        KeyAlg::Ed25519 => {
            sig::ParsedPublicKey::new(&sig::ED25519, key).map_err(rejected)?;
            256
        }
        KeyAlg::Dsa => check_dsa(&dsa_public_parts(spki)?, false)?,
    };
    Ok(KeyInfo { kind, bits })
}

/// The `SubjectPublicKeyInfo` of an RSA modulus and public exponent.
pub fn rsa_public_spki(modulus: &[u8], public_exponent: &[u8]) -> Result<Vec<u8>> {
    rsa_bits(modulus, public_exponent)?;
    let mut pkcs1 = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut pkcs1, modulus);
    der::put_unsigned(&mut pkcs1, public_exponent);
    spki_from_rsa_public(&der::element(SEQUENCE, &pkcs1))
}

/// The `SubjectPublicKeyInfo` of a PKCS#1 `RSAPublicKey` (checked).
pub fn spki_from_rsa_public(pkcs1: &[u8]) -> Result<Vec<u8>> {
    read_rsa_public(pkcs1)?;
    let mut bits = Zeroizing::new(vec![0u8]);
    bits.extend_from_slice(pkcs1);
    let mut body = Zeroizing::new(Vec::new());
    put_algorithm(&mut body, KeyAlg::Rsa, &[]);
    der::put(&mut body, BIT_STRING, &bits);
    let spki = der::element(SEQUENCE, &body).to_vec();
    public_key_info(&spki)?;
    Ok(spki)
}

/// The PKCS#1 `RSAPublicKey` inside an RSA `SubjectPublicKeyInfo`.
pub fn rsa_public_pkcs1(spki: &[u8]) -> Result<Vec<u8>> {
    match unwrap_spki(spki)? {
        (KeyAlg::Rsa, key) => {
            read_rsa_public(key)?;
            Ok(key.to_vec())
        }
        _ => Err(CryptoError::Unsupported("PKCS#1 of a key that is not RSA")),
    }
}

/// The modulus and public exponent of an RSA `SubjectPublicKeyInfo`.
pub fn rsa_public_parts(spki: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    match unwrap_spki(spki)? {
        (KeyAlg::Rsa, key) => {
            let (n, e) = read_rsa_public(key)?;
            Ok((n.to_vec(), e.to_vec()))
        }
        _ => Err(CryptoError::Unsupported("RSA integers of a key that is not RSA")),
    }
}

/// A `SubjectPublicKeyInfo`'s kind and key bits: the uncompressed point
/// of an EC key, the 32 bytes of an Ed25519 key, the `RSAPublicKey` of an
/// RSA key (what PKCS#11's `CKA_EC_POINT` and `CKA_MODULUS` are made of).
pub fn public_key_bits(spki: &[u8]) -> Result<(KeyAlg, Vec<u8>)> {
    let (kind, key) = unwrap_spki(spki)?;
    Ok((kind, key.to_vec()))
}

/// The DER of the curve's OBJECT IDENTIFIER (an `ECParameters`
/// namedCurve, RFC 5480 §2.1.1; id-Ed25519 for Ed25519, RFC 8410), as
/// PKCS#11's `CKA_EC_PARAMS` holds it; `None` for RSA and DSA.
#[must_use]
pub fn named_curve_der(kind: KeyAlg) -> Option<Vec<u8>> {
    let oid = match kind {
        KeyAlg::Ec(curve) => curve_oid(curve),
        KeyAlg::Ed25519 => OID_ED25519,
        KeyAlg::Rsa | KeyAlg::Dsa => return None,
    };
    Some(std::mem::take(&mut *der::element(OID, oid)))
}

/// The key kind an `ECParameters` names: a namedCurve OID of P-256,
/// P-384, P-521 or Ed25519 (id-Ed25519, or the 1.3.6.1.4.1.11591.15.1
/// that OpenSC and GnuPG use), or the PrintableString "edwards25519" of
/// PKCS#11 3.0 §2.3.5.
pub fn named_curve_from_der(der: &[u8]) -> Result<KeyAlg> {
    /// 1.3.6.1.4.1.11591.15.1 (GnuPG's Ed25519).
    const OID_ED25519_GNUPG: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0xDA, 0x47, 0x0F, 0x01];
    const PRINTABLE_STRING: u8 = 0x13;
    let mut r = Reader::new(der);
    let (tag, content) = r.any()?;
    r.finish("ECParameters")?;
    match (tag, content) {
        (OID, OID_ED25519 | OID_ED25519_GNUPG) | (PRINTABLE_STRING, b"edwards25519") => {
            Ok(KeyAlg::Ed25519)
        }
        (OID, oid) => curve_from_oid(oid).map(KeyAlg::Ec),
        _ => Err(CryptoError::Unsupported("EC parameters other than a named curve")),
    }
}

/// PKCS#8 of an EC private key from its scalar (SEC 1 `ECPrivateKey`
/// without the optional public key, which AWS-LC computes), checked as
/// [`private_key_info`].
pub fn ec_private_pkcs8(curve: Curve, scalar: &[u8]) -> Result<SecretBytes> {
    let len = crate::signature_formats::ecdsa_scalar_len(curve);
    let skip = scalar.iter().take_while(|b| **b == 0).count();
    let trimmed = &scalar[skip..];
    if trimmed.is_empty() || trimmed.len() > len {
        return Err(malformed("an EC private scalar of the curve's size"));
    }
    let mut d = Zeroizing::new(vec![0u8; len]);
    d[len - trimmed.len()..].copy_from_slice(trimmed);
    let mut body = Zeroizing::new(Vec::new());
    der::put_unsigned(&mut body, &[1]);
    der::put(&mut body, OCTET_STRING, &d);
    let pkcs8 = wrap_pkcs8(KeyAlg::Ec(curve), &der::element(SEQUENCE, &body));
    private_key_info(pkcs8.expose())?;
    Ok(pkcs8)
}

/// PKCS#8 of an Ed25519 private key from its 32-byte seed (RFC 8410 §7).
pub fn ed25519_private_pkcs8(seed: &[u8]) -> Result<SecretBytes> {
    if seed.len() != 32 {
        return Err(malformed("an Ed25519 private key of 32 bytes"));
    }
    let pkcs8 = wrap_pkcs8(KeyAlg::Ed25519, &der::element(OCTET_STRING, seed));
    private_key_info(pkcs8.expose())?;
    Ok(pkcs8)
}

/// The `SubjectPublicKeyInfo` of an EC point (uncompressed) or Ed25519
/// key, checked as [`public_key_info`] (the inverse of
/// [`public_key_bits`] for those kinds).
pub fn ec_public_spki(kind: KeyAlg, key: &[u8]) -> Result<Vec<u8>> {
    if !matches!(kind, KeyAlg::Ec(_) | KeyAlg::Ed25519) {
        return Err(CryptoError::Unsupported("an EC or Ed25519 key"));
    }
    let mut body = Zeroizing::new(Vec::new());
    put_algorithm(&mut body, kind, &[]);
    let mut bits = Zeroizing::new(Vec::with_capacity(key.len() + 1));
    bits.push(0);
    bits.extend_from_slice(key);
    der::put(&mut body, BIT_STRING, &bits);
    let spki = std::mem::take(&mut *der::element(SEQUENCE, &body));
    public_key_info(&spki)?;
    Ok(spki)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keygen::{generate_key_pair, KeyPairDer};

    #[test]
    fn rsa_keys_convert_between_pkcs1_pkcs8_and_their_integers() {
        let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } =
            generate_key_pair(KeyAlg::Rsa, 2048).unwrap();
        let info = private_key_info(pkcs8.expose()).unwrap();
        assert_eq!(info, KeyInfo { kind: KeyAlg::Rsa, bits: 2048 });
        let pkcs1 = rsa_private_pkcs1(pkcs8.expose()).unwrap();
        let back = rsa_private_pkcs8_from_pkcs1(pkcs1.expose()).unwrap();
        assert_eq!(rsa_private_pkcs1(back.expose()).unwrap().expose(), pkcs1.expose());
        let parts = rsa_private_parts(pkcs8.expose()).unwrap();
        let rebuilt = rsa_private_pkcs8_from_parts(&parts).unwrap();
        assert_eq!(rsa_private_pkcs1(rebuilt.expose()).unwrap().expose(), pkcs1.expose());
        assert_eq!(public_key_of(pkcs8.expose()).unwrap(), spki);
        let public_pkcs1 = rsa_public_pkcs1(&spki).unwrap();
        assert_eq!(spki_from_rsa_public(&public_pkcs1).unwrap(), spki);
        let (n, e) = rsa_public_parts(&spki).unwrap();
        assert_eq!(rsa_public_spki(&n, &e).unwrap(), spki);
        assert_eq!(public_key_info(&spki).unwrap().bits, 2048);
    }

    #[test]
    fn ec_and_ed25519_keys_parse_with_their_public_halves() {
        for curve in [Curve::P256, Curve::P384, Curve::P521] {
            let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } =
                generate_key_pair(KeyAlg::Ec(curve), 0).unwrap();
            let info = private_key_info(pkcs8.expose()).unwrap();
            assert_eq!(info, KeyInfo { kind: KeyAlg::Ec(curve), bits: curve.bits() });
            assert_eq!(public_key_info(&spki).unwrap(), info);
            assert!(rsa_private_pkcs1(pkcs8.expose()).is_err());
        }
        let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } =
            generate_key_pair(KeyAlg::Ed25519, 0).unwrap();
        assert_eq!(private_key_info(pkcs8.expose()).unwrap().kind, KeyAlg::Ed25519);
        assert_eq!(public_key_info(&spki).unwrap().kind, KeyAlg::Ed25519);
    }

    #[test]
    fn damaged_keys_are_refused() {
        let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } =
            generate_key_pair(KeyAlg::Rsa, 2048).unwrap();
        let bytes = pkcs8.expose();
        for cut in [0, 1, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(private_key_info(&bytes[..cut]).is_err());
        }
        let mut flipped = bytes.to_vec();
        // A bit of the private exponent: the encoding holds, the key does not.
        let at = flipped.len() - 300;
        flipped[at] ^= 0x01;
        assert!(private_key_info(&flipped).is_err());
        let mut trailing = spki.clone();
        trailing.push(0);
        assert!(public_key_info(&trailing).is_err());
        assert!(rsa_private_pkcs8_from_pkcs1(&spki).is_err());
    }

    #[test]
    fn keys_made_from_their_pkcs11_parts_match_keys_made_whole() {
        for kind in [KeyAlg::Ec(Curve::P256), KeyAlg::Ed25519] {
            let pair = crate::generate_key_pair(kind, 0).expect("a key pair");
            let spki = pair.public_spki;
            let (_, point) = public_key_bits(&spki).expect("its bits");
            assert_eq!(ec_public_spki(kind, &point).expect("rebuilt"), spki);
        }
        assert!(ec_private_pkcs8(Curve::P256, &[0; 33]).is_err());
        assert!(ed25519_private_pkcs8(&[1; 31]).is_err());
        let ed = ed25519_private_pkcs8(&[7; 32]).expect("a key");
        assert_eq!(private_key_info(ed.expose()).expect("checks").kind, KeyAlg::Ed25519);
    }
}
