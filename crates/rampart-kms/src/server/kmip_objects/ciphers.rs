//! Encrypt and Decrypt (KMIP 1.4 §4.29, §4.30; 2.1 §6.1.17, §6.1.11).
//!
//! The algorithm is the key's; the mode, padding, IV and tag lengths come
//! from the request's Cryptographic Parameters, each field the request
//! leaves out from the key's own Cryptographic Parameters attribute (the
//! specification's "if omitted then the Cryptographic Parameters
//! associated with the Managed Cryptographic Object ... SHALL be used",
//! applied field by field). Served: AES in ECB, CBC (PKCS5 or no
//! padding), CTR, GCM (any IV from 8 bytes, the tag lengths of SP 800-38D),
//! XTS (the IV/Counter/Nonce is the tweak), NIST Key Wrap and Key Wrap
//! with Padding; Triple DES in ECB and CBC; ChaCha20 and
//! ChaCha20-Poly1305 (KMIP 2.x). AES-GCM encryption may be streamed; a
//! streamed AEAD decryption is refused (Feature Not Supported), since each
//! part's plaintext would go back before the tag that covers it is checked.

use rampart_crypto::{
    chacha20, chacha20_poly1305_open, chacha20_poly1305_seal, fill_random, gcm_open,
    gcm_tag_len_allowed, kw_unwrap, kw_wrap, kwp_unwrap, kwp_wrap, pkcs5_pad, pkcs5_unpadded_len,
    BlockAlg, BlockCipher, BlockMode, CryptoError, GcmStream, SecretBytes, Xts,
};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, Operation, PaddingMethod,
};
use rampart_kmip::payload::{CryptoRequest, CryptographicParameters};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::crypto::{key_algorithm, MAX_DATA};
use super::errors::{crypto, R};
use super::object::Obj;
use super::session::Session;
use super::stream_table::{Stream, Work};

/// GCM IVs: 8 bytes at least (shorter ones collide too soon for random
/// generation), at most 128 (what any client needs; the GHASH of a longer
/// one buys nothing).
const GCM_IV_LEN: std::ops::RangeInclusive<usize> = 8..=128;

/// The Cryptographic Parameters attribute of `obj` (the one with the
/// lowest index), or none.
pub(super) fn key_parameters(obj: &Obj) -> R<CryptographicParameters> {
    match obj.stored_values("Cryptographic Parameters").first() {
        Some(item) => CryptographicParameters::parse(item),
        None => Ok(CryptographicParameters::default()),
    }
}

/// A stream's Correlation Value, its first part's ciphertext and the IV
/// the server drew for it.
type Opened = (Vec<u8>, SecretBytes, Option<Vec<u8>>);

/// What an encryption or decryption answers besides the Unique Identifier.
pub(super) struct Output {
    pub(super) data: SecretBytes,
    /// The IV/Counter/Nonce the server drew (returned only then).
    drawn_iv: Option<Vec<u8>>,
    tag: Option<Vec<u8>>,
}

impl Output {
    fn data(data: SecretBytes) -> Self {
        Self { data, drawn_iv: None, tag: None }
    }
}

/// The missing IV of a decryption: the payload lacks a field its
/// parameters require, an error parsing the payload (KMIP 1.4 §11.1:
/// Invalid Message, as the profiles' CS-BC-M-11 to 13 answer).
fn missing(what: &str) -> KmipError {
    KmipError::InvalidMessage(format!("the {what} is missing"))
}

/// The IV a request gave, which must be `len` bytes, or for an
/// encryption without one a random one that the answer returns (KMIP 1.4
/// §4.29).
fn iv_of(given: Option<&[u8]>, len: usize, encrypt: bool) -> R<(Vec<u8>, bool)> {
    match given {
        Some(iv) if iv.len() == len => Ok((iv.to_vec(), false)),
        Some(iv) => Err(KmipError::InvalidField(format!(
            "the IV/Counter/Nonce must be {len} bytes, not {}",
            iv.len()
        ))),
        None if encrypt => {
            let mut iv = vec![0u8; len];
            fill_random(&mut iv).map_err(crypto)?;
            Ok((iv, true))
        }
        None => Err(missing("IV/Counter/Nonce")),
    }
}

fn no_iv(given: Option<&[u8]>, mode: &str) -> R<()> {
    if given.is_some() {
        return Err(KmipError::InvalidField(format!("{mode} takes no IV/Counter/Nonce")));
    }
    Ok(())
}

/// A tag length in bytes from the parameters (the AEAD's full tag by
/// default). An out-of-range length answers General Failure, as the
/// profiles' CS-BC-M-GCM-1 and CS-BC-M-CHACHA20POLY1305-1 do.
fn tag_len(params: &CryptographicParameters, allowed: fn(usize) -> bool) -> R<usize> {
    let asked = params.tag_length.unwrap_or(16);
    usize::try_from(asked)
        .ok()
        .filter(|l| allowed(*l))
        .ok_or_else(|| KmipError::GeneralFailure(format!("invalid Tag Length {asked}")))
}

/// The tag a decryption checks: given, and as long as the Tag Length says.
fn given_tag<'a>(
    request: &'a CryptoRequest,
    params: &CryptographicParameters,
    allowed: fn(usize) -> bool,
) -> R<&'a [u8]> {
    let tag = request.tag.as_deref().ok_or_else(|| missing("Authenticated Encryption Tag"))?;
    let want = match params.tag_length {
        Some(_) => tag_len(params, allowed)?,
        None if allowed(tag.len()) => tag.len(),
        None => return Err(KmipError::GeneralFailure(format!("invalid tag length {}", tag.len()))),
    };
    if tag.len() != want {
        return Err(KmipError::InvalidField(format!(
            "the Authenticated Encryption Tag is {} bytes, the Tag Length {want}",
            tag.len()
        )));
    }
    Ok(tag)
}

fn chacha_tag_len_allowed(len: usize) -> bool {
    // A Poly1305 tag truncated below 12 bytes is too weak to offer.
    (12..=16).contains(&len)
}

/// An authentication failure (wrong tag, key, IV or additional data) or
/// malformed padding: Cryptographic Failure (KMIP 1.4 §11.31).
fn auth(_: CryptoError) -> KmipError {
    KmipError::CryptographicFailure("the data does not decrypt and authenticate".into())
}

impl Session<'_> {
    pub(super) async fn encrypt(&mut self, request: &CryptoRequest, encrypt: bool) -> R<Vec<Item>> {
        if request.data.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        let bit = if encrypt { usage_mask::ENCRYPT } else { usage_mask::DECRYPT };
        if let Some(id) = &request.correlation_value {
            return self.continue_stream(request, encrypt, bit, id).await;
        }
        let uid = self.uid(request.unique_identifier.as_ref())?;
        // A public or private key encrypts with RSA (`rsa_crypt`).
        if self.is_asymmetric(&uid).await? {
            return self.rsa_crypt(uid, request, encrypt).await;
        }
        let (obj, key) = self.usable_key(&uid, bit, encrypt).await?;
        let algorithm = key_algorithm(&obj);
        let asked = request.parameters.clone().unwrap_or_default();
        if asked.cryptographic_algorithm.is_some_and(|a| a != algorithm) {
            return Err(KmipError::InvalidField(format!(
                "the Cryptographic Parameters name {}, the key is {algorithm}",
                asked.cryptographic_algorithm.unwrap_or(algorithm)
            )));
        }
        let params = asked.or(&key_parameters(&obj)?);
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone())];
        if request.is_streamed() {
            let (id, part, drawn) =
                self.open_stream(request, encrypt, &params, algorithm, &key, uid)?;
            if let Err(refused) = self.allocate_usage(&obj, request.data.len()).await {
                // The stream closes with the refusal.
                drop(self.streams.take(Operation::ENCRYPT, &id));
                return Err(refused);
            }
            out.push(Item::bytes(Tag::DATA, part.expose()));
            if let Some(iv) = drawn {
                out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
            }
            out.push(Item::bytes(Tag::CORRELATION_VALUE, &id));
            return Ok(out);
        }
        let result = run(request, encrypt, &params, algorithm, &key)?;
        if encrypt {
            // Allocated once the encryption has succeeded, so a refused
            // request spends nothing of the key's Usage Limits.
            self.allocate_usage(&obj, request.data.len()).await?;
        }
        out.push(Item::bytes(Tag::DATA, result.data.expose()));
        if let Some(iv) = result.drawn_iv {
            out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
        }
        if let Some(tag) = result.tag {
            out.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag));
        }
        Ok(out)
    }

    /// The first part of a stream: AES-GCM encryption only. The stream's
    /// Correlation Value, the first part's ciphertext and a drawn IV.
    fn open_stream(
        &mut self,
        request: &CryptoRequest,
        encrypt: bool,
        params: &CryptographicParameters,
        algorithm: CryptographicAlgorithm,
        key: &SecretBytes,
        uid: String,
    ) -> R<Opened> {
        let gcm = algorithm == CryptographicAlgorithm::AES
            && params.block_cipher_mode == Some(BlockCipherMode::GCM);
        if !gcm || !encrypt {
            return Err(KmipError::FeatureNotSupported(
                "streamed Encrypt and Decrypt other than AES-GCM encryption (a streamed \
                 authenticated decryption would return plaintext before its tag is checked)"
                    .into(),
            ));
        }
        let tag_len = tag_len(params, gcm_tag_len_allowed)?;
        let (iv, drawn) = gcm_iv(request, params, encrypt)?;
        let mut stream = GcmStream::new(key.expose(), &iv, true).map_err(crypto)?;
        stream.aad(request.aad.as_deref().unwrap_or_default()).map_err(crypto)?;
        let mut part = SecretBytes::from_slice(request.data.as_slice());
        stream.update(part.expose_mut()).map_err(crypto)?;
        let work = Work::Gcm { gcm: Box::new(stream), uid, tag_len };
        let id = self.streams.open(Operation::ENCRYPT, work)?;
        Ok((id, part, drawn.then_some(iv)))
    }

    /// A later part of a stream [`Session::open_stream`] opened.
    async fn continue_stream(
        &mut self,
        request: &CryptoRequest,
        encrypt: bool,
        bit: i32,
        id: &[u8],
    ) -> R<Vec<Item>> {
        let operation = if encrypt { Operation::ENCRYPT } else { Operation::DECRYPT };
        let stream = self.streams.take(operation, id)?;
        let Work::Gcm { mut gcm, uid, tag_len } = stream.work else {
            return Err(KmipError::InvalidField("not an Encrypt stream".into()));
        };
        if request.unique_identifier.as_ref().is_some_and(|u| *u != uid) {
            return Err(KmipError::InvalidField(format!(
                "the stream is under object {uid}, not {}",
                request.unique_identifier.as_deref().unwrap_or_default()
            )));
        }
        if request.aad.is_some() {
            return Err(KmipError::InvalidField(
                "Authenticated Encryption Additional Data comes with the first part".into(),
            ));
        }
        // Access or state may have changed since the stream opened.
        let (obj, _) = self.usable_key(&uid, bit, encrypt).await?;
        self.allocate_usage(&obj, request.data.len()).await?;
        let mut part = SecretBytes::from_slice(request.data.as_slice());
        gcm.update(part.expose_mut()).map_err(crypto)?;
        let mut out = vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone()),
            Item::bytes(Tag::DATA, part.expose()),
        ];
        if request.last {
            let tag = gcm.finish_encrypt(tag_len).map_err(crypto)?;
            out.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag));
        } else {
            let work = Work::Gcm { gcm, uid, tag_len };
            self.streams.put_back(id.to_vec(), Stream { operation, work });
            out.push(Item::bytes(Tag::CORRELATION_VALUE, id));
        }
        Ok(out)
    }
}

/// The GCM IV: given (8 to 128 bytes, matching IV Length when that is
/// set), or drawn at IV Length (12 bytes by default) for an encryption.
fn gcm_iv(
    request: &CryptoRequest,
    params: &CryptographicParameters,
    encrypt: bool,
) -> R<(Vec<u8>, bool)> {
    let bits = params.iv_length;
    let len = match bits {
        Some(b) if b > 0 && b % 8 == 0 => usize::try_from(b / 8).unwrap_or(0),
        Some(b) => return Err(KmipError::InvalidField(format!("IV Length {b} bits"))),
        None => request.iv_counter_nonce.as_ref().map_or(12, Vec::len),
    };
    if !GCM_IV_LEN.contains(&len) {
        return Err(KmipError::InvalidField(format!(
            "GCM IVs are {} to {} bytes, not {len}",
            GCM_IV_LEN.start(),
            GCM_IV_LEN.end()
        )));
    }
    iv_of(request.iv_counter_nonce.as_deref(), len, encrypt)
}

/// One single-part encryption or decryption.
pub(super) fn run(
    request: &CryptoRequest,
    encrypt: bool,
    params: &CryptographicParameters,
    algorithm: CryptographicAlgorithm,
    key: &SecretBytes,
) -> R<Output> {
    let data = request.data.as_slice();
    let given_iv = request.iv_counter_nonce.as_deref();
    let aad = request.aad.as_deref().unwrap_or_default();
    let mode = params.block_cipher_mode;
    match algorithm {
        CryptographicAlgorithm::AES | CryptographicAlgorithm::TRIPLE_DES => {
            let mode = mode.ok_or_else(|| {
                KmipError::MissingData(
                    "a Block Cipher Mode (in the request's or the key's Cryptographic \
                     Parameters)"
                        .into(),
                )
            })?;
            let alg = if algorithm == CryptographicAlgorithm::AES {
                BlockAlg::Aes
            } else {
                BlockAlg::TripleDes
            };
            match mode {
                BlockCipherMode::ECB => {
                    no_iv(given_iv, "ECB")?;
                    block(alg, BlockMode::Ecb, params, key, &[], data, encrypt).map(Output::data)
                }
                BlockCipherMode::CBC => {
                    let (iv, drawn) = iv_of(given_iv, alg.iv_len(), encrypt)?;
                    let data = block(alg, BlockMode::Cbc, params, key, &iv, data, encrypt)?;
                    Ok(Output { data, drawn_iv: drawn.then_some(iv), tag: None })
                }
                _ if alg == BlockAlg::TripleDes => Err(KmipError::InvalidField(format!(
                    "Block Cipher Mode {mode} with a Triple DES key (ECB and CBC are served)"
                ))),
                BlockCipherMode::CTR => {
                    let (iv, drawn) = iv_of(given_iv, 16, encrypt)?;
                    let counter: [u8; 16] = iv.as_slice().try_into().unwrap_or([0; 16]);
                    let mut out = SecretBytes::from_slice(data);
                    rampart_crypto::Ctr::new(key.expose())
                        .and_then(|mut c| c.apply(&counter, out.expose_mut()))
                        .map_err(crypto)?;
                    Ok(Output { data: out, drawn_iv: drawn.then_some(iv), tag: None })
                }
                BlockCipherMode::GCM => gcm(request, encrypt, params, key, aad),
                BlockCipherMode::XTS => {
                    // The IV/Counter/Nonce is the 128-bit tweak (IEEE 1619
                    // §5.1); no tweak is drawn, since it names the data unit.
                    let tweak: [u8; 16] = given_iv
                        .ok_or_else(|| missing("IV/Counter/Nonce (the XTS tweak)"))?
                        .try_into()
                        .map_err(|_| {
                            KmipError::InvalidField("the XTS tweak must be 16 bytes".into())
                        })?;
                    let mut xts = Xts::new(key.expose()).map_err(|e| {
                        KmipError::InvalidField(format!("the key cannot be used for XTS: {e}"))
                    })?;
                    let mut out = SecretBytes::from_slice(data);
                    let done = if encrypt {
                        xts.encrypt_unit(&tweak, out.expose_mut())
                    } else {
                        xts.decrypt_unit(&tweak, out.expose_mut())
                    };
                    done.map_err(|e| KmipError::InvalidField(format!("XTS data: {e}")))?;
                    Ok(Output::data(out))
                }
                BlockCipherMode::NIST_KEY_WRAP | BlockCipherMode::AES_KEY_WRAP_PADDING => {
                    no_iv(given_iv, "AES key wrap")?;
                    let padded = mode == BlockCipherMode::AES_KEY_WRAP_PADDING;
                    let out = if encrypt {
                        let wrap = if padded { kwp_wrap } else { kw_wrap };
                        SecretBytes::new(
                            wrap(key.expose(), data)
                                .map_err(|e| KmipError::InvalidField(e.to_string()))?,
                        )
                    } else {
                        let unwrap = if padded { kwp_unwrap } else { kw_unwrap };
                        unwrap(key.expose(), data).map_err(auth)?
                    };
                    Ok(Output::data(out))
                }
                other => Err(KmipError::FeatureNotSupported(format!(
                    "Block Cipher Mode {other} (ECB, CBC, CTR, GCM, XTS and the AES key \
                     wraps are served)"
                ))),
            }
        }
        CryptographicAlgorithm::CHACHA20 => {
            if let Some(m) = mode {
                return Err(KmipError::InvalidField(format!(
                    "Block Cipher Mode {m} with a ChaCha20 key (a stream cipher)"
                )));
            }
            let len = given_iv.map_or(12, <[u8]>::len);
            if len != 8 && len != 12 {
                return Err(KmipError::InvalidField(format!(
                    "ChaCha20 nonces are 8 or 12 bytes, not {len}"
                )));
            }
            let (nonce, drawn) = iv_of(given_iv, len, encrypt)?;
            let counter = params.initial_counter_value.unwrap_or(0);
            let counter = u32::try_from(counter)
                .map_err(|_| KmipError::InvalidField(format!("Initial Counter Value {counter}")))?;
            let mut out = SecretBytes::from_slice(data);
            chacha20(key.expose(), &nonce, counter, out.expose_mut())
                .map_err(|e| KmipError::InvalidField(e.to_string()))?;
            Ok(Output { data: out, drawn_iv: drawn.then_some(nonce), tag: None })
        }
        CryptographicAlgorithm::CHACHA20_POLY1305 => {
            if mode.is_some_and(|m| m != BlockCipherMode::AEAD) {
                return Err(KmipError::InvalidField(format!(
                    "Block Cipher Mode {} with a ChaCha20-Poly1305 key (AEAD only)",
                    mode.unwrap_or(BlockCipherMode::AEAD)
                )));
            }
            let (nonce, drawn) = iv_of(given_iv, 12, encrypt)?;
            let mut out = SecretBytes::from_slice(data);
            if encrypt {
                let len = tag_len(params, chacha_tag_len_allowed)?;
                let tag = chacha20_poly1305_seal(key.expose(), &nonce, aad, out.expose_mut(), len)
                    .map_err(crypto)?;
                Ok(Output { data: out, drawn_iv: drawn.then_some(nonce), tag: Some(tag) })
            } else {
                let tag = given_tag(request, params, chacha_tag_len_allowed)?;
                chacha20_poly1305_open(key.expose(), &nonce, aad, out.expose_mut(), tag)
                    .map_err(auth)?;
                Ok(Output::data(out))
            }
        }
        other => Err(KmipError::IllegalOperation(format!(
            "a {other} key does not encrypt (AES, Triple DES, ChaCha20 and \
             ChaCha20-Poly1305 keys do)"
        ))),
    }
}

fn gcm(
    request: &CryptoRequest,
    encrypt: bool,
    params: &CryptographicParameters,
    key: &SecretBytes,
    aad: &[u8],
) -> R<Output> {
    let (iv, drawn) = gcm_iv(request, params, encrypt)?;
    let mut out = SecretBytes::from_slice(request.data.as_slice());
    if encrypt {
        let len = tag_len(params, gcm_tag_len_allowed)?;
        let tag = rampart_crypto::gcm_seal(key.expose(), &iv, aad, out.expose_mut(), len)
            .map_err(crypto)?;
        Ok(Output { data: out, drawn_iv: drawn.then_some(iv), tag: Some(tag) })
    } else {
        let tag = given_tag(request, params, gcm_tag_len_allowed)?;
        gcm_open(key.expose(), &iv, aad, out.expose_mut(), tag).map_err(auth)?;
        Ok(Output::data(out))
    }
}

/// ECB or CBC with PKCS5 or no padding (the default: none for ECB, PKCS5
/// for CBC, as this server has always padded CBC).
fn block(
    alg: BlockAlg,
    mode: BlockMode,
    params: &CryptographicParameters,
    key: &SecretBytes,
    iv: &[u8],
    data: &[u8],
    encrypt: bool,
) -> R<SecretBytes> {
    let default = if mode == BlockMode::Ecb { PaddingMethod::NONE } else { PaddingMethod::PKCS5 };
    let padding = params.padding_method.unwrap_or(default);
    if ![PaddingMethod::PKCS5, PaddingMethod::NONE].contains(&padding) {
        return Err(KmipError::FeatureNotSupported(format!(
            "Padding Method {padding} (PKCS5 and None are served)"
        )));
    }
    let block_len = alg.block_len();
    let mut cipher = BlockCipher::new(alg, mode, key.expose(), encrypt)
        .map_err(|e| KmipError::InvalidField(format!("the key cannot be used: {e}")))?;
    if encrypt {
        let mut buf = if padding == PaddingMethod::PKCS5 {
            pkcs5_pad(data, block_len)
        } else if data.len() % block_len == 0 {
            SecretBytes::from_slice(data)
        } else {
            return Err(KmipError::InvalidField(format!(
                "without padding the Data must be a multiple of {block_len} bytes"
            )));
        };
        cipher.apply(iv, buf.expose_mut()).map_err(crypto)?;
        Ok(buf)
    } else {
        if !data.len() % block_len == 0 {
            return Err(KmipError::CryptographicFailure(format!(
                "the ciphertext is not a multiple of {block_len} bytes"
            )));
        }
        let mut buf = SecretBytes::from_slice(data);
        cipher.apply(iv, buf.expose_mut()).map_err(crypto)?;
        if padding == PaddingMethod::NONE {
            return Ok(buf);
        }
        let len = pkcs5_unpadded_len(buf.expose(), block_len).map_err(auth)?;
        Ok(SecretBytes::from_slice(&buf.expose()[..len]))
    }
}
