//! The cryptographic operations of a session, single- and multi-part.
//!
//! What the key manager does in one request, the module feeds it in one:
//! AES-GCM, the key wraps, RSA, EdDSA and HMAC collect their input (up to
//! [`MAX_DATA`], the key manager's own limit) and send it at the final
//! call; AES-CBC-PAD and AES-CTR stream, sending the whole blocks of each
//! update with the chaining value or counter carried over; the
//! hash-and-sign mechanisms hash here and send the digest. A result is
//! kept until the caller has a buffer large enough for it (the two-call
//! convention), so asking for the length costs no second request.

use cryptoki_sys::*;
use rampart_crypto::signature_formats::{ecdsa_der_to_fixed, ecdsa_fixed_to_der};
use rampart_crypto::{DigestAlg, Hasher};
use rampart_kmip::enums::{
    BlockCipherMode, CryptographicAlgorithm, HashingAlgorithm, MaskGenerator, PaddingMethod,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use zeroize::Zeroizing;

use crate::connection::Remote;
use crate::mechanisms::Mechanism;
use crate::objects::{KeyKind, ObjectInfo};
use crate::remote::{self, CryptInput, Signed};
use crate::rv::{Result, Rv};

/// Most data one operation collects (the key manager's limit on Data).
pub(crate) const MAX_DATA: usize = 512 * 1024;
const BLOCK: usize = 16;

/// The operations active in a session.
#[derive(Debug, Default)]
pub(crate) struct Operations {
    pub encrypt: Option<Crypt>,
    pub decrypt: Option<Crypt>,
    pub sign: Option<Signing>,
    pub verify: Option<Signing>,
    pub digest: Option<Digesting>,
}

/// A result waiting for a buffer large enough: for which input, and what.
#[derive(Default)]
pub(crate) struct Answer {
    input: Zeroizing<Vec<u8>>,
    output: Option<Zeroizing<Vec<u8>>>,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answer")
    }
}

impl Answer {
    /// The kept output, if it is `input`'s.
    pub(crate) fn kept(&self, input: &[u8]) -> Option<&[u8]> {
        match &self.output {
            Some(output) if self.input.as_slice() == input => Some(output),
            _ => None,
        }
    }

    /// Keeps `output` of `input` until [`Answer::clear`].
    pub(crate) fn keep(&mut self, input: &[u8], output: Vec<u8>) {
        self.input = Zeroizing::new(input.to_vec());
        self.output = Some(Zeroizing::new(output));
    }

    pub(crate) fn clear(&mut self) {
        self.output = None;
        self.input = Zeroizing::new(Vec::new());
    }
}

/// An encryption or decryption in progress.
#[derive(Debug)]
pub(crate) struct Crypt {
    key: std::sync::Arc<ObjectInfo>,
    mechanism: Mechanism,
    encrypt: bool,
    /// Input not sent yet.
    pending: Zeroizing<Vec<u8>>,
    /// CBC: the chaining value; CTR: the next counter block.
    chain: [u8; BLOCK],
    pub answer: Answer,
}

impl Crypt {
    pub(crate) fn new(
        key: std::sync::Arc<ObjectInfo>,
        mechanism: Mechanism,
        encrypt: bool,
    ) -> Result<Self> {
        let needed = if encrypt { CKA_ENCRYPT } else { CKA_DECRYPT };
        let kind = key.key.ok_or(Rv(CKR_KEY_TYPE_INCONSISTENT))?;
        let fits = match &mechanism {
            Mechanism::AesGcm { .. }
            | Mechanism::AesCbcPad { .. }
            | Mechanism::AesCtr { .. }
            | Mechanism::AesKeyWrap
            | Mechanism::AesKeyWrapPad => kind == KeyKind::Aes,
            Mechanism::RsaPkcs | Mechanism::RsaOaep { .. } => {
                kind == KeyKind::Rsa
                    && key.class == if encrypt { CKO_PUBLIC_KEY } else { CKO_PRIVATE_KEY }
            }
            _ => return Err(Rv(CKR_MECHANISM_INVALID)),
        };
        if !fits {
            return Err(Rv(CKR_KEY_TYPE_INCONSISTENT));
        }
        if key.attribute(needed) != crate::objects::AttributeValue::Value(vec![CK_TRUE]) {
            return Err(Rv(CKR_KEY_FUNCTION_NOT_PERMITTED));
        }
        let chain = match &mechanism {
            Mechanism::AesCbcPad { iv } => *iv,
            Mechanism::AesCtr { block, .. } => *block,
            _ => [0; BLOCK],
        };
        Ok(Self {
            key,
            mechanism,
            encrypt,
            pending: Zeroizing::new(Vec::new()),
            chain,
            answer: Answer::default(),
        })
    }

    fn parameters(&self) -> Vec<Item> {
        let mode = |m: BlockCipherMode| Item::enumeration(Tag::BLOCK_CIPHER_MODE, m.0);
        match &self.mechanism {
            Mechanism::AesGcm { tag_bits, .. } => vec![
                mode(BlockCipherMode::GCM),
                Item::int(Tag::TAG_LENGTH, i32::try_from(tag_bits / 8).unwrap_or(16)),
            ],
            Mechanism::AesCbcPad { .. } => vec![mode(BlockCipherMode::CBC)],
            Mechanism::AesCtr { .. } => vec![mode(BlockCipherMode::CTR)],
            Mechanism::AesKeyWrap => vec![mode(BlockCipherMode::NIST_KEY_WRAP)],
            Mechanism::AesKeyWrapPad => vec![mode(BlockCipherMode::AES_KEY_WRAP_PADDING)],
            Mechanism::RsaPkcs => {
                vec![Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS1_V1_5.0)]
            }
            Mechanism::RsaOaep { hash, mgf, label } => {
                let mut items = vec![
                    Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::OAEP.0),
                    Item::enumeration(Tag::HASHING_ALGORITHM, hashing(*hash).0),
                    Item::enumeration(Tag::MASK_GENERATOR, MaskGenerator::MGF1.0),
                    Item::enumeration(Tag::MASK_GENERATOR_HASHING_ALGORITHM, hashing(*mgf).0),
                ];
                if !label.is_empty() {
                    items.push(Item::bytes(Tag::P_SOURCE, label));
                }
                items
            }
            _ => Vec::new(),
        }
    }

    /// Whether input streams (CBC, CTR) rather than being collected.
    fn streams(&self) -> bool {
        matches!(self.mechanism, Mechanism::AesCbcPad { .. } | Mechanism::AesCtr { .. })
    }

    fn collect(&mut self, data: &[u8]) -> Result<()> {
        if self.pending.len() + data.len() > MAX_DATA {
            return Err(Rv(CKR_DATA_LEN_RANGE));
        }
        self.pending.extend_from_slice(data);
        Ok(())
    }

    /// Sends `data` (whole blocks of a streamed mode, with `padding` for
    /// the last part of CBC-PAD) and moves the chaining value on.
    fn send_blocks(&mut self, r: Remote<'_>, data: &[u8], last: bool) -> Result<Vec<u8>> {
        if data.is_empty()
            && !(last && self.encrypt && matches!(self.mechanism, Mechanism::AesCbcPad { .. }))
        {
            return Ok(Vec::new());
        }
        let mut parameters = self.parameters();
        if let Mechanism::AesCbcPad { .. } = self.mechanism {
            let padding = if last { PaddingMethod::PKCS5 } else { PaddingMethod::NONE };
            parameters.push(Item::enumeration(Tag::PADDING_METHOD, padding.0));
        }
        if let Mechanism::AesCtr { counter_bits, .. } = self.mechanism {
            check_counter(&self.chain, counter_bits, data.len())?;
        }
        let chain = self.chain;
        let input = CryptInput { parameters, data, iv: Some(&chain), ..CryptInput::default() };
        let (out, _) = remote::crypt(r, self.encrypt, &self.key.uid, &input)?;
        match self.mechanism {
            Mechanism::AesCbcPad { .. } => {
                let ciphertext = if self.encrypt { &out } else { data };
                if let Some(last_block) =
                    ciphertext.len().checked_sub(BLOCK).map(|i| &ciphertext[i..])
                {
                    self.chain.copy_from_slice(last_block);
                }
            }
            Mechanism::AesCtr { .. } => add_blocks(&mut self.chain, data.len().div_ceil(BLOCK)),
            _ => {}
        }
        Ok(out)
    }

    /// `C_EncryptUpdate`/`C_DecryptUpdate`: the output of `data` (whole
    /// blocks of a streamed mode; nothing of a collected one).
    pub(crate) fn update(&mut self, r: Remote<'_>, data: &[u8]) -> Result<Vec<u8>> {
        if !self.streams() {
            self.collect(data)?;
            return Ok(Vec::new());
        }
        let mut all = Zeroizing::new(std::mem::take(&mut *self.pending));
        all.extend_from_slice(data);
        // CBC decryption keeps its last block back: it may be the padding.
        let keep_back = !self.encrypt && matches!(self.mechanism, Mechanism::AesCbcPad { .. });
        let mut whole = all.len() / BLOCK * BLOCK;
        if keep_back && whole == all.len() && whole > 0 {
            whole -= BLOCK;
        }
        let (now, later) = all.split_at(whole);
        let out = self.send_blocks(r, now, false)?;
        *self.pending = later.to_vec();
        Ok(out)
    }

    /// `C_EncryptFinal`/`C_DecryptFinal`, or the one call of
    /// `C_Encrypt`/`C_Decrypt` (with everything in `data`).
    pub(crate) fn finish(&mut self, r: Remote<'_>, data: &[u8]) -> Result<Vec<u8>> {
        self.collect(data)?;
        let all = Zeroizing::new(std::mem::take(&mut *self.pending));
        match self.mechanism.clone() {
            Mechanism::AesCbcPad { .. } => {
                if !self.encrypt && all.len() % BLOCK != 0 {
                    return Err(Rv(CKR_ENCRYPTED_DATA_LEN_RANGE));
                }
                self.send_blocks(r, &all, true)
            }
            Mechanism::AesCtr { .. } => self.send_blocks(r, &all, true),
            Mechanism::AesGcm { iv, aad, tag_bits } => {
                let tag_len = (tag_bits / 8) as usize;
                let parameters = self.parameters();
                if self.encrypt {
                    let input = CryptInput {
                        parameters,
                        data: &all,
                        iv: Some(&iv),
                        aad: Some(&aad),
                        tag: None,
                    };
                    let (mut out, tag) = remote::crypt(r, true, &self.key.uid, &input)?;
                    out.extend_from_slice(&tag.ok_or(Rv(CKR_DEVICE_ERROR))?);
                    Ok(out)
                } else {
                    let split =
                        all.len().checked_sub(tag_len).ok_or(Rv(CKR_ENCRYPTED_DATA_LEN_RANGE))?;
                    let (ciphertext, tag) = all.split_at(split);
                    let input = CryptInput {
                        parameters,
                        data: ciphertext,
                        iv: Some(&iv),
                        aad: Some(&aad),
                        tag: Some(tag),
                    };
                    remote::crypt(r, false, &self.key.uid, &input).map(|(out, _)| out)
                }
            }
            Mechanism::AesKeyWrap if all.len() % 8 != 0 || (!self.encrypt && all.len() < 24) => {
                Err(Rv(if self.encrypt {
                    CKR_DATA_LEN_RANGE
                } else {
                    CKR_ENCRYPTED_DATA_LEN_RANGE
                }))
            }
            _ => {
                let input = CryptInput {
                    parameters: self.parameters(),
                    data: &all,
                    ..CryptInput::default()
                };
                remote::crypt(r, self.encrypt, &self.key.uid, &input).map(|(out, _)| out)
            }
        }
    }
}

/// Refuses CTR data that would carry out of the counter's bits (the key
/// manager counts over all 128).
fn check_counter(block: &[u8; BLOCK], counter_bits: u32, len: usize) -> Result<()> {
    if counter_bits >= 128 {
        return Ok(());
    }
    let counter = u128::from_be_bytes(*block) & ((1u128 << counter_bits) - 1);
    let room = (1u128 << counter_bits) - counter;
    if (len.div_ceil(BLOCK) as u128) > room {
        return Err(Rv(CKR_DATA_LEN_RANGE));
    }
    Ok(())
}

fn add_blocks(block: &mut [u8; BLOCK], n: usize) {
    *block = u128::from_be_bytes(*block).wrapping_add(n as u128).to_be_bytes();
}

pub(crate) fn hashing(digest: DigestAlg) -> HashingAlgorithm {
    match digest {
        DigestAlg::Sha1 => HashingAlgorithm::SHA1,
        DigestAlg::Sha224 => HashingAlgorithm::SHA224,
        DigestAlg::Sha384 => HashingAlgorithm::SHA384,
        DigestAlg::Sha512 => HashingAlgorithm::SHA512,
        _ => HashingAlgorithm::SHA256,
    }
}

fn hmac_algorithm(digest: DigestAlg) -> CryptographicAlgorithm {
    match digest {
        DigestAlg::Sha384 => CryptographicAlgorithm::HMAC_SHA384,
        DigestAlg::Sha512 => CryptographicAlgorithm::HMAC_SHA512,
        _ => CryptographicAlgorithm::HMAC_SHA256,
    }
}

/// A signature, MAC or their verification in progress.
#[derive(Debug)]
pub(crate) struct Signing {
    key: std::sync::Arc<ObjectInfo>,
    mechanism: Mechanism,
    hasher: Option<HasherState>,
    pending: Zeroizing<Vec<u8>>,
    /// Whether an update was made (single-part-only mechanisms refuse).
    updated: bool,
    pub answer: Answer,
}

struct HasherState(Hasher, DigestAlg);

impl std::fmt::Debug for HasherState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HasherState").field(&self.1).finish()
    }
}

impl Signing {
    pub(crate) fn new(
        key: std::sync::Arc<ObjectInfo>,
        mechanism: Mechanism,
        sign: bool,
    ) -> Result<Self> {
        let kind = key.key.ok_or(Rv(CKR_KEY_TYPE_INCONSISTENT))?;
        let class = if sign { CKO_PRIVATE_KEY } else { CKO_PUBLIC_KEY };
        let fits = match &mechanism {
            Mechanism::Hmac(_) => kind == KeyKind::GenericSecret || kind == KeyKind::Aes,
            Mechanism::RsaPkcs
            | Mechanism::RsaPss { .. }
            | Mechanism::HashRsaPkcs(_)
            | Mechanism::HashRsaPss { .. } => kind == KeyKind::Rsa && key.class == class,
            Mechanism::Ecdsa | Mechanism::HashEcdsa(_) => {
                matches!(kind, KeyKind::Ec(_)) && key.class == class
            }
            Mechanism::EdDsa => kind == KeyKind::Ed25519 && key.class == class,
            _ => return Err(Rv(CKR_MECHANISM_INVALID)),
        };
        if !fits {
            return Err(Rv(CKR_KEY_TYPE_INCONSISTENT));
        }
        let needed = if sign { CKA_SIGN } else { CKA_VERIFY };
        if key.attribute(needed) != crate::objects::AttributeValue::Value(vec![CK_TRUE]) {
            return Err(Rv(CKR_KEY_FUNCTION_NOT_PERMITTED));
        }
        let hasher = match &mechanism {
            Mechanism::HashRsaPkcs(d)
            | Mechanism::HashEcdsa(d)
            | Mechanism::HashRsaPss { hash: d, .. } => Some(HasherState(Hasher::new(*d), *d)),
            _ => None,
        };
        Ok(Self {
            key,
            mechanism,
            hasher,
            pending: Zeroizing::new(Vec::new()),
            updated: false,
            answer: Answer::default(),
        })
    }

    /// Whether the mechanism takes its input in one part only.
    fn single_part_only(&self) -> bool {
        matches!(self.mechanism, Mechanism::RsaPkcs | Mechanism::RsaPss { .. } | Mechanism::Ecdsa)
    }

    pub(crate) fn update(&mut self, data: &[u8]) -> Result<()> {
        if self.single_part_only() {
            return Err(Rv(CKR_FUNCTION_NOT_SUPPORTED));
        }
        self.updated = true;
        match &mut self.hasher {
            Some(HasherState(h, _)) => h.update(data),
            None => {
                if self.pending.len() + data.len() > MAX_DATA {
                    return Err(Rv(CKR_DATA_LEN_RANGE));
                }
                self.pending.extend_from_slice(data);
            }
        }
        Ok(())
    }

    /// The Cryptographic Parameters and what is signed, from everything
    /// given (`data` is the last part).
    fn request(&mut self, data: &[u8]) -> Result<(Vec<Item>, Zeroizing<Vec<u8>>, bool)> {
        let hash_item = |d: DigestAlg| Item::enumeration(Tag::HASHING_ALGORITHM, hashing(d).0);
        let pss = |hash: DigestAlg, mgf: DigestAlg, salt: u32| {
            vec![
                Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PSS.0),
                hash_item(hash),
                Item::enumeration(Tag::MASK_GENERATOR, MaskGenerator::MGF1.0),
                Item::enumeration(Tag::MASK_GENERATOR_HASHING_ALGORITHM, hashing(mgf).0),
                Item::int(Tag::SALT_LENGTH, i32::try_from(salt).unwrap_or(i32::MAX)),
            ]
        };
        let digest = match self.hasher.take() {
            Some(HasherState(mut h, d)) => {
                h.update(data);
                Some((d, Zeroizing::new(h.finish())))
            }
            None => None,
        };
        let mut whole = Zeroizing::new(std::mem::take(&mut *self.pending));
        whole.extend_from_slice(data);
        Ok(match (&self.mechanism, digest) {
            (Mechanism::HashRsaPkcs(_), Some((d, digest))) => (
                vec![
                    Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS1_V1_5.0),
                    hash_item(d),
                ],
                digest,
                true,
            ),
            (Mechanism::HashRsaPss { mgf, salt, .. }, Some((d, digest))) => {
                (pss(d, *mgf, *salt), digest, true)
            }
            (Mechanism::HashEcdsa(_), Some((d, digest))) => (vec![hash_item(d)], digest, true),
            // Both sign what they are given (the server's raw signature):
            // CKM_RSA_PKCS pads up to k − 11 bytes, usually a DigestInfo the
            // caller made; CKM_ECDSA takes any length as the hash value.
            (Mechanism::RsaPkcs, _) => {
                let modulus = self.key.output_len().ok_or(Rv(CKR_KEY_TYPE_INCONSISTENT))?;
                if whole.len() > modulus.saturating_sub(11) {
                    return Err(Rv(CKR_DATA_LEN_RANGE));
                }
                (
                    vec![Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS1_V1_5.0)],
                    whole,
                    true,
                )
            }
            (Mechanism::RsaPss { hash, mgf, salt }, _) => {
                if whole.len() != hash.output_len() {
                    return Err(Rv(CKR_DATA_LEN_RANGE));
                }
                (pss(*hash, *mgf, *salt), whole, true)
            }
            (Mechanism::Ecdsa, _) if whole.is_empty() => return Err(Rv(CKR_DATA_LEN_RANGE)),
            (Mechanism::Ecdsa, _) => (Vec::new(), whole, true),
            (Mechanism::EdDsa, _) => (Vec::new(), whole, false),
            _ => return Err(Rv(CKR_GENERAL_ERROR)),
        })
    }

    /// `C_Sign`/`C_SignFinal` (with `data`, the last part): the signature.
    pub(crate) fn sign(&mut self, r: Remote<'_>, data: &[u8]) -> Result<Vec<u8>> {
        if let Mechanism::Hmac(d) = self.mechanism {
            let mut whole = Zeroizing::new(std::mem::take(&mut *self.pending));
            whole.extend_from_slice(data);
            return remote::mac(r, &self.key.uid, hmac_algorithm(d), &whole);
        }
        let (parameters, signed, digested) = self.request(data)?;
        let signed = if digested { Signed::Digest(&signed) } else { Signed::Data(&signed) };
        let signature = remote::sign(r, &self.key.uid, parameters, signed)?;
        match self.key.key {
            Some(KeyKind::Ec(curve)) => {
                ecdsa_der_to_fixed(&signature, curve).map_err(|_| Rv(CKR_DEVICE_ERROR))
            }
            _ => Ok(signature),
        }
    }

    /// `C_Verify`/`C_VerifyFinal`: `CKR_SIGNATURE_INVALID` unless
    /// `signature` checks.
    pub(crate) fn verify(&mut self, r: Remote<'_>, data: &[u8], signature: &[u8]) -> Result<()> {
        let valid = if let Mechanism::Hmac(d) = self.mechanism {
            let mut whole = Zeroizing::new(std::mem::take(&mut *self.pending));
            whole.extend_from_slice(data);
            remote::mac_verify(r, &self.key.uid, hmac_algorithm(d), &whole, signature)?
        } else {
            let expected = self.key.output_len().ok_or(Rv(CKR_KEY_TYPE_INCONSISTENT))?;
            if signature.len() != expected {
                return Err(Rv(CKR_SIGNATURE_LEN_RANGE));
            }
            let (parameters, signed, digested) = self.request(data)?;
            let signed = if digested { Signed::Digest(&signed) } else { Signed::Data(&signed) };
            let signature = match self.key.key {
                Some(KeyKind::Ec(_)) => {
                    ecdsa_fixed_to_der(signature).map_err(|_| Rv(CKR_SIGNATURE_INVALID))?
                }
                _ => signature.to_vec(),
            };
            remote::verify(r, &self.key.uid, parameters, signed, &signature)?
        };
        if valid {
            Ok(())
        } else {
            Err(Rv(CKR_SIGNATURE_INVALID))
        }
    }

    /// The length of the signature or MAC.
    pub(crate) fn output_len(&self) -> Option<usize> {
        match self.mechanism {
            Mechanism::Hmac(d) => Some(d.output_len()),
            _ => self.key.output_len(),
        }
    }

    pub(crate) fn was_updated(&self) -> bool {
        self.updated
    }
}

/// A digest in progress (computed here).
pub(crate) struct Digesting {
    hasher: Option<Hasher>,
    alg: DigestAlg,
}

impl std::fmt::Debug for Digesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digesting").field("alg", &self.alg).finish_non_exhaustive()
    }
}

impl Digesting {
    pub(crate) fn new(alg: DigestAlg) -> Self {
        Self { hasher: Some(Hasher::new(alg)), alg }
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        if let Some(h) = &mut self.hasher {
            h.update(data);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.alg.output_len()
    }

    /// The digest (once: the hasher is spent).
    pub(crate) fn finish(&mut self, data: &[u8]) -> Vec<u8> {
        match self.hasher.take() {
            Some(mut h) => {
                h.update(data);
                h.finish()
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ctr_counter_refuses_to_carry_out_of_its_bits() {
        let mut block = [0u8; 16];
        block[15] = 0xFE;
        assert!(check_counter(&block, 8, 32).is_ok(), "0xFE and 0xFF are left");
        assert_eq!(check_counter(&block, 8, 33), Err(Rv(CKR_DATA_LEN_RANGE)));
        assert!(check_counter(&block, 128, 1 << 20).is_ok());
        add_blocks(&mut block, 3);
        assert_eq!(block[14..], [1, 1]);
    }

    #[test]
    fn a_kept_answer_is_only_for_its_input() {
        let mut answer = Answer::default();
        assert_eq!(answer.kept(b"in"), None);
        answer.keep(b"in", vec![1, 2]);
        assert_eq!(answer.kept(b"in"), Some(&[1u8, 2][..]));
        assert_eq!(answer.kept(b"other"), None);
        answer.clear();
        assert_eq!(answer.kept(b"in"), None);
    }
}
