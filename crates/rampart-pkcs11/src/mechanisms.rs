//! The mechanisms the module offers (`C_GetMechanismList`,
//! `C_GetMechanismInfo`) and their parsed parameters.

use cryptoki_sys::*;
use rampart_crypto::DigestAlg;

/// A mechanism with its parameters, as `ffi` read them from the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mechanism {
    AesKeyGen,
    GenericSecretKeyGen,
    RsaKeyPairGen,
    EcKeyPairGen,
    EdwardsKeyPairGen,
    AesGcm {
        iv: Vec<u8>,
        aad: Vec<u8>,
        tag_bits: u32,
    },
    AesCbcPad {
        iv: [u8; 16],
    },
    AesCtr {
        counter_bits: u32,
        block: [u8; 16],
    },
    /// RFC 3394 (`CKM_AES_KEY_WRAP`, no IV or the default one).
    AesKeyWrap,
    /// RFC 5649 (`CKM_AES_KEY_WRAP_KWP`).
    AesKeyWrapPad,
    Hmac(DigestAlg),
    RsaPkcs,
    RsaPss {
        hash: DigestAlg,
        mgf: DigestAlg,
        salt: u32,
    },
    RsaOaep {
        hash: DigestAlg,
        mgf: DigestAlg,
        label: Vec<u8>,
    },
    HashRsaPkcs(DigestAlg),
    HashRsaPss {
        hash: DigestAlg,
        mgf: DigestAlg,
        salt: u32,
    },
    Ecdsa,
    HashEcdsa(DigestAlg),
    EdDsa,
    Digest(DigestAlg),
}

/// Every mechanism offered: type, smallest and largest key (bits for
/// RSA and EC, bytes for symmetric keys), flags.
pub(crate) const MECHANISMS: &[(CK_MECHANISM_TYPE, CK_ULONG, CK_ULONG, CK_FLAGS)] = &[
    (CKM_AES_KEY_GEN, 16, 32, CKF_GENERATE),
    (CKM_GENERIC_SECRET_KEY_GEN, 16, 64, CKF_GENERATE),
    (CKM_RSA_PKCS_KEY_PAIR_GEN, 2048, 4096, CKF_GENERATE_KEY_PAIR),
    (CKM_EC_KEY_PAIR_GEN, 256, 521, CKF_GENERATE_KEY_PAIR | EC_FLAGS),
    (CKM_EC_EDWARDS_KEY_PAIR_GEN, 255, 255, CKF_GENERATE_KEY_PAIR | EC_FLAGS),
    (CKM_AES_GCM, 16, 32, CKF_ENCRYPT | CKF_DECRYPT),
    (CKM_AES_CBC_PAD, 16, 32, CKF_ENCRYPT | CKF_DECRYPT),
    (CKM_AES_CTR, 16, 32, CKF_ENCRYPT | CKF_DECRYPT),
    (CKM_AES_KEY_WRAP, 16, 32, CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP | CKF_UNWRAP),
    (CKM_AES_KEY_WRAP_KWP, 16, 32, CKF_ENCRYPT | CKF_DECRYPT | CKF_WRAP | CKF_UNWRAP),
    (CKM_SHA256_HMAC, 16, 64, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA384_HMAC, 16, 64, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA512_HMAC, 16, 64, CKF_SIGN | CKF_VERIFY),
    (CKM_RSA_PKCS, 2048, 4096, CKF_SIGN | CKF_VERIFY | CKF_ENCRYPT | CKF_DECRYPT),
    (CKM_RSA_PKCS_PSS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_RSA_PKCS_OAEP, 2048, 4096, CKF_ENCRYPT | CKF_DECRYPT),
    (CKM_SHA256_RSA_PKCS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA384_RSA_PKCS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA512_RSA_PKCS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA256_RSA_PKCS_PSS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA384_RSA_PKCS_PSS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_SHA512_RSA_PKCS_PSS, 2048, 4096, CKF_SIGN | CKF_VERIFY),
    (CKM_ECDSA, 256, 521, CKF_SIGN | CKF_VERIFY | EC_FLAGS),
    (CKM_ECDSA_SHA256, 256, 521, CKF_SIGN | CKF_VERIFY | EC_FLAGS),
    (CKM_ECDSA_SHA384, 256, 521, CKF_SIGN | CKF_VERIFY | EC_FLAGS),
    (CKM_ECDSA_SHA512, 256, 521, CKF_SIGN | CKF_VERIFY | EC_FLAGS),
    (CKM_EDDSA, 255, 255, CKF_SIGN | CKF_VERIFY | EC_FLAGS),
    (CKM_SHA_1, 0, 0, CKF_DIGEST),
    (CKM_SHA224, 0, 0, CKF_DIGEST),
    (CKM_SHA256, 0, 0, CKF_DIGEST),
    (CKM_SHA384, 0, 0, CKF_DIGEST),
    (CKM_SHA512, 0, 0, CKF_DIGEST),
];

/// Named curves, uncompressed points (PKCS#11 3.0 §2.3.1 flags).
const EC_FLAGS: CK_FLAGS = CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS;

/// The digest of a `CKM_SHA*` or `CKG_MGF1_SHA*` code.
pub(crate) fn digest_of_mechanism(mechanism: CK_MECHANISM_TYPE) -> Option<DigestAlg> {
    Some(match mechanism {
        CKM_SHA_1 => DigestAlg::Sha1,
        CKM_SHA224 => DigestAlg::Sha224,
        CKM_SHA256 => DigestAlg::Sha256,
        CKM_SHA384 => DigestAlg::Sha384,
        CKM_SHA512 => DigestAlg::Sha512,
        _ => return None,
    })
}

pub(crate) fn digest_of_mgf(mgf: CK_RSA_PKCS_MGF_TYPE) -> Option<DigestAlg> {
    Some(match mgf {
        CKG_MGF1_SHA1 => DigestAlg::Sha1,
        CKG_MGF1_SHA224 => DigestAlg::Sha224,
        CKG_MGF1_SHA256 => DigestAlg::Sha256,
        CKG_MGF1_SHA384 => DigestAlg::Sha384,
        CKG_MGF1_SHA512 => DigestAlg::Sha512,
        _ => return None,
    })
}

/// The flags of a mechanism, or `None` when it is not offered.
pub(crate) fn info(mechanism: CK_MECHANISM_TYPE) -> Option<(CK_ULONG, CK_ULONG, CK_FLAGS)> {
    MECHANISMS.iter().find(|m| m.0 == mechanism).map(|m| (m.1, m.2, m.3))
}
