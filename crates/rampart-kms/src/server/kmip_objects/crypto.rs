//! The checks before a key is used, and the algorithms and lengths of the
//! keys Create and Register make (Encrypt and Decrypt are in `ciphers`,
//! MAC in `streams`, Get in `get`), and the Encoding Option of a Get's key
//! wrapping.

use rampart_crypto::{MacAlg, SecretBytes};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm, ObjectType, State as KState};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item};
use rampart_kmip::KmipError;

use super::errors::R;
use super::object::Obj;
use super::session::Session;
use crate::model::{now_ms, KeyState};

/// Largest Encrypt/Decrypt/MAC input.
pub(super) const MAX_DATA: usize = 512 * 1024;

impl Session<'_> {
    // ---- Cryptographic operations ---------------------------------------

    /// The key `uid` if this client may use it now for `bit` (an
    /// encryption or MAC when `protect`), with its material. Loaded with
    /// its stored attributes: its Cryptographic Parameters give a
    /// request's defaults, its Process Start and Protect Stop Dates limit
    /// its use.
    pub(super) async fn usable_key(
        &mut self,
        uid: &str,
        bit: i32,
        protect: bool,
    ) -> R<(Obj, SecretBytes)> {
        let obj = self.load_with_attributes(uid).await?;
        self.check_usable(obj, bit, protect).await
    }

    async fn check_usable(&mut self, obj: Obj, bit: i32, protect: bool) -> R<(Obj, SecretBytes)> {
        let uid = obj.uid();
        self.require_use(&obj)?;
        // Secret Data (a password, a seed) is a derivation base too.
        let derives = bit == usage_mask::DERIVE_KEY && obj.object_type() == ObjectType::SECRET_DATA;
        if obj.object_type() != ObjectType::SYMMETRIC_KEY && !derives {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not a key")));
        }
        if obj.usage_mask().is_some_and(|m| m & bit == 0) {
            return Err(KmipError::PermissionDenied(format!(
                "the Cryptographic Usage Mask of {uid} does not allow this operation"
            )));
        }
        let state = obj.state(now_ms());
        let ok = state == KState::ACTIVE || (!protect && state == KState::DEACTIVATED);
        if !ok || !matches!(obj.version.state, KeyState::Active) {
            return Err(KmipError::IllegalOperation(format!(
                "object {uid} is {state}: it cannot be used for this operation"
            )));
        }
        // KMIP 1.4 §3.25, §3.26: before its Process Start Date a key does
        // not process (decrypt, verify), from its Protect Stop Date it no
        // longer protects (encrypt, MAC). The profiles' CS-BC-M-14 answers
        // Permission Denied in 1.4 and Wrong Key Lifecycle State in 2.1.
        let now = now_ms();
        let (date, refused) = if protect {
            ("Protect Stop Date", obj.stored_date_ms("Protect Stop Date").is_some_and(|d| d <= now))
        } else {
            (
                "Process Start Date",
                obj.stored_date_ms("Process Start Date").is_some_and(|d| d > now),
            )
        };
        if refused {
            let why = format!("object {uid} may not be used for this operation (its {date})");
            return Err(KmipError::WrongKeyLifecycleState(why));
        }
        let material = self.material(&obj).await?;
        Ok((obj, material))
    }
}

/// Encoding Option (KMIP 1.4 §9.1.3.2.32).
pub(super) const TAG_ENCODING_OPTION: Tag = Tag(0x42_00A3);
pub(super) const ENCODING_NONE: u32 = 0x01;
pub(super) const ENCODING_TTLV: u32 = 0x02;

/// The Encoding Option of a Get's Key Wrapping Specification (TTLV
/// Encoding when absent, as the specification says).
pub(super) fn encoding_option(payload: &Item) -> R<u32> {
    let f = Fields::of(payload)?;
    let Some(spec) = f.optional(Tag::KEY_WRAPPING_SPECIFICATION)? else {
        return Ok(ENCODING_TTLV);
    };
    match Fields::of(spec)?.optional(TAG_ENCODING_OPTION)?.map(Item::as_enum).transpose()? {
        None | Some(ENCODING_TTLV) => Ok(ENCODING_TTLV),
        Some(ENCODING_NONE) => Ok(ENCODING_NONE),
        Some(other) => Err(KmipError::FeatureNotSupported(format!("Encoding Option {other}"))),
    }
}

/// The algorithm of a symmetric key (AES for a key the REST API made).
pub(super) fn key_algorithm(obj: &Obj) -> CryptographicAlgorithm {
    CryptographicAlgorithm(
        obj.kmip.as_ref().and_then(|k| k.algorithm).unwrap_or(CryptographicAlgorithm::AES.0),
    )
}

/// The key material length (bytes) of an `algorithm` key of `bits`, the
/// Cryptographic Length Create and Register accept: AES 128, 192 or 256
/// (and 512, two keys for XTS);
/// Triple DES 168 or 192 (three keys, 24 bytes with their parity bits)
/// and 112 or 128 (two keys, 16 bytes; SP 800-67 §3.1); ChaCha20 and
/// ChaCha20-Poly1305 256 (RFC 8439 §2.3); HMACs 128 to 1024.
pub(super) fn check_algorithm(algorithm: CryptographicAlgorithm, bits: i32) -> R<usize> {
    let bytes = usize::try_from(bits / 8).unwrap_or(0);
    match algorithm {
        // 512 bits: the two AES-256 keys of XTS-AES-256 (IEEE 1619; the AES
        // XTS profiles' keys of 256 or 512 bits), which other modes refuse.
        CryptographicAlgorithm::AES if [128, 192, 256, 512].contains(&bits) => Ok(bytes),
        CryptographicAlgorithm::AES => Err(KmipError::InvalidField(format!(
            "AES keys are 128, 192 or 256 bits (512 for XTS), not {bits}"
        ))),
        CryptographicAlgorithm::TRIPLE_DES => match bits {
            168 | 192 => Ok(24),
            112 | 128 => Ok(16),
            _ => Err(KmipError::InvalidField(format!(
                "Triple DES keys are 168 or 192 bits (three keys), 112 or 128 (two), not {bits}"
            ))),
        },
        CryptographicAlgorithm::CHACHA20 | CryptographicAlgorithm::CHACHA20_POLY1305 => {
            if bits == 256 {
                Ok(32)
            } else {
                Err(KmipError::InvalidField(format!("{algorithm} keys are 256 bits, not {bits}")))
            }
        }
        a if mac_alg(a).is_some() => {
            // RFC 2104 §3: shorter keys are weak, and keys longer than
            // SHA-512's block would only be hashed down.
            if (128..=1024).contains(&bits) && bits % 8 == 0 {
                Ok(bytes)
            } else {
                Err(KmipError::InvalidField(format!(
                    "{a} keys are 128 to 1024 bits in whole bytes, not {bits}"
                )))
            }
        }
        other => Err(KmipError::FeatureNotSupported(format!(
            "Cryptographic Algorithm {other} (AES, Triple DES, ChaCha20, ChaCha20-Poly1305 and \
             HMAC-SHA1/224/256/384/512 keys are served)"
        ))),
    }
}

/// Odd parity in each byte's low bit, as DES keys carry it (FIPS 46-3).
pub(super) fn set_des_parity(key: &mut [u8]) {
    for b in key {
        *b = (*b & 0xFE) | u8::from((*b >> 1).count_ones() % 2 == 0);
    }
}

/// The HMAC a Cryptographic Algorithm names.
pub(super) fn mac_alg(alg: CryptographicAlgorithm) -> Option<MacAlg> {
    Some(match alg {
        CryptographicAlgorithm::HMAC_SHA1 => MacAlg::HmacSha1,
        CryptographicAlgorithm::HMAC_SHA224 => MacAlg::HmacSha224,
        CryptographicAlgorithm::HMAC_SHA256 => MacAlg::HmacSha256,
        CryptographicAlgorithm::HMAC_SHA384 => MacAlg::HmacSha384,
        CryptographicAlgorithm::HMAC_SHA512 => MacAlg::HmacSha512,
        _ => None?,
    })
}

/// The Cryptographic Usage Mask a symmetric key gets when its request
/// gives none: a MAC key generates and verifies MACs; any other encrypts,
/// decrypts and wraps.
pub(super) fn default_usage_mask(algorithm: CryptographicAlgorithm) -> i32 {
    if mac_alg(algorithm).is_none() {
        usage_mask::ENCRYPT | usage_mask::DECRYPT | usage_mask::WRAP_KEY | usage_mask::UNWRAP_KEY
    } else {
        usage_mask::MAC_GENERATE | usage_mask::MAC_VERIFY
    }
}
