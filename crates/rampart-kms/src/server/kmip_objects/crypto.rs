//! Get (with key wrapping), Encrypt and Decrypt, and the algorithms and
//! lengths of the keys Create and Register make (MAC is in `streams`).

use rampart_crypto::{
    fill_random, kw_wrap, kwp_wrap, Cbc, CbcIv, Ctr, Gcm, MacAlg, SecretBytes, GCM_NONCE_LEN,
    GCM_TAG_LEN,
};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, KeyFormatType, ObjectType, PaddingMethod,
    SecretDataType, State as KState, WrappingMethod,
};
use rampart_kmip::payload::{CryptoRequest, GetRequest, KeyBlock, ManagedObject};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item};
use rampart_kmip::KmipError;

use super::errors::{crypto, R};
use super::object::Obj;
use super::session::Session;
use crate::model::{now_ms, KeyState};

/// Largest Encrypt/Decrypt/MAC input.
pub(super) const MAX_DATA: usize = 512 * 1024;

impl Session<'_> {
    // ---- Get, attributes -------------------------------------------------

    pub(super) async fn get(&mut self, request: &GetRequest, encoding: u32) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_use(&obj)?;
        if !obj.key.exportable {
            return Err(KmipError::NotExtractable(format!(
                "key {} is not exportable",
                obj.key.name
            )));
        }
        let object_type = obj.object_type();
        let default_format = if object_type == ObjectType::SECRET_DATA {
            KeyFormatType::OPAQUE
        } else {
            KeyFormatType::RAW
        };
        let format = request.key_format_type.unwrap_or(default_format);
        if format != default_format {
            return Err(KmipError::KeyFormatTypeNotSupported(format.0));
        }
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::IllegalOperation(format!("object {uid} is destroyed")));
        }
        let material = self.material(&obj).await?;
        let (algorithm, length) = match object_type {
            ObjectType::SYMMETRIC_KEY => (
                Some(CryptographicAlgorithm(
                    obj.kmip
                        .as_ref()
                        .and_then(|k| k.algorithm)
                        .unwrap_or(CryptographicAlgorithm::AES.0),
                )),
                Some(i32::try_from(material.len() * 8).unwrap_or(i32::MAX)),
            ),
            _ => (None, None),
        };
        let block = KeyBlock {
            format,
            material: material.expose().into(),
            algorithm,
            length,
            wrapping: None,
        };
        if let Some(spec) = &request.wrapping {
            if spec.method != WrappingMethod::ENCRYPT {
                return Err(KmipError::FeatureNotSupported(format!(
                    "Wrapping Method {}",
                    spec.method
                )));
            }
            let mode = spec
                .parameters
                .as_ref()
                .and_then(|p| p.block_cipher_mode)
                .unwrap_or(BlockCipherMode::NIST_KEY_WRAP);
            let wrapper = self.load(&spec.encryption_key).await?;
            self.touched = Some((obj.key.name.clone(), Some(obj.version.version)));
            self.require_use(&wrapper)?;
            if wrapper.object_type() != ObjectType::SYMMETRIC_KEY
                || wrapper.state(now_ms()) != KState::ACTIVE
            {
                return Err(KmipError::IllegalOperation(format!(
                    "wrapping key {} is not an active symmetric key",
                    spec.encryption_key
                )));
            }
            if wrapper.usage_mask().is_some_and(|m| m & usage_mask::WRAP_KEY == 0) {
                return Err(KmipError::PermissionDenied(format!(
                    "key {} may not wrap keys (Cryptographic Usage Mask)",
                    spec.encryption_key
                )));
            }
            let kek = self.material(&wrapper).await?;
            // KMIP 1.4 §2.1.3: with TTLV Encoding (the default) the Key
            // Value structure's TTLV is wrapped and sent as a Byte String;
            // with No Encoding the Key Material alone is wrapped and stays
            // inside the Key Value structure.
            let plain = if encoding == ENCODING_TTLV {
                SecretBytes::new(
                    Item::structure(
                        Tag::KEY_VALUE,
                        vec![Item::bytes(Tag::KEY_MATERIAL, material.expose())],
                    )
                    .encode()?,
                )
            } else {
                SecretBytes::from_slice(material.expose())
            };
            let wrapped = match mode {
                BlockCipherMode::NIST_KEY_WRAP => kw_wrap(kek.expose(), plain.expose()),
                BlockCipherMode::AES_KEY_WRAP_PADDING => kwp_wrap(kek.expose(), plain.expose()),
                other => {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "key wrapping with Block Cipher Mode {other}"
                    )))
                }
            }
            .map_err(crypto)?;
            let mut items = vec![Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0)];
            if encoding == ENCODING_TTLV {
                items.push(Item::bytes(Tag::KEY_VALUE, &wrapped));
            } else {
                items.push(Item::structure(
                    Tag::KEY_VALUE,
                    vec![Item::bytes(Tag::KEY_MATERIAL, &wrapped)],
                ));
            }
            if let Some(a) = algorithm {
                items.push(Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, a.0));
            }
            if let Some(l) = length {
                items.push(Item::int(Tag::CRYPTOGRAPHIC_LENGTH, l));
            }
            items.push(Item::structure(
                Tag::KEY_WRAPPING_DATA,
                vec![
                    Item::enumeration(Tag::WRAPPING_METHOD, WrappingMethod::ENCRYPT.0),
                    Item::structure(
                        Tag::ENCRYPTION_KEY_INFORMATION,
                        vec![
                            Item::text(Tag::UNIQUE_IDENTIFIER, spec.encryption_key.clone()),
                            Item::structure(
                                Tag::CRYPTOGRAPHIC_PARAMETERS,
                                vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, mode.0)],
                            ),
                        ],
                    ),
                    Item::enumeration(TAG_ENCODING_OPTION, encoding),
                ],
            ));
            let block = Item::structure(Tag::KEY_BLOCK, items);
            let object = match object_type {
                ObjectType::SECRET_DATA => Item::structure(
                    Tag::SECRET_DATA,
                    vec![
                        Item::enumeration(
                            Tag::SECRET_DATA_TYPE,
                            obj.kmip
                                .as_ref()
                                .and_then(|k| k.secret_type)
                                .unwrap_or(SecretDataType::PASSWORD.0),
                        ),
                        block,
                    ],
                ),
                _ => Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
            };
            return Ok(vec![
                Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
                Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                object,
            ]);
        }
        let object = match object_type {
            ObjectType::SECRET_DATA => ManagedObject::SecretData {
                data_type: SecretDataType(
                    obj.kmip
                        .as_ref()
                        .and_then(|k| k.secret_type)
                        .unwrap_or(SecretDataType::PASSWORD.0),
                ),
                block,
            },
            _ => ManagedObject::SymmetricKey(block),
        };
        Ok(vec![
            Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            object.to_item(),
        ])
    }

    // ---- Cryptographic operations ---------------------------------------

    pub(super) async fn usable_key(
        &mut self,
        uid: &str,
        bit: i32,
        protect: bool,
    ) -> R<(Obj, SecretBytes)> {
        let obj = self.load(uid).await?;
        self.require_use(&obj)?;
        if obj.object_type() != ObjectType::SYMMETRIC_KEY {
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
        let material = self.material(&obj).await?;
        Ok((obj, material))
    }

    pub(super) async fn encrypt(&mut self, request: &CryptoRequest, encrypt: bool) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        // A public or private key encrypts with RSA (`rsa_crypt`).
        if self.is_asymmetric(&uid).await? {
            return self.rsa_crypt(uid, request, encrypt).await;
        }
        let bit = if encrypt { usage_mask::ENCRYPT } else { usage_mask::DECRYPT };
        let (obj, key) = self.usable_key(&uid, bit, encrypt).await?;
        if obj
            .kmip
            .as_ref()
            .and_then(|k| k.algorithm)
            .is_some_and(|a| a != CryptographicAlgorithm::AES.0)
        {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not an AES key")));
        }
        if request.data.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        let params = request.parameters.clone().unwrap_or_default();
        if params.cryptographic_algorithm.is_some_and(|a| a != CryptographicAlgorithm::AES) {
            return Err(KmipError::FeatureNotSupported(
                "Encrypt and Decrypt with algorithms other than AES".into(),
            ));
        }
        let mode = params.block_cipher_mode.ok_or_else(|| {
            KmipError::MissingData("Cryptographic Parameters with a Block Cipher Mode".into())
        })?;
        let given_iv = request.iv_counter_nonce.clone();
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        let mut data = SecretBytes::from_slice(request.data.as_slice());
        match mode {
            BlockCipherMode::GCM => {
                let tag_len = params.tag_length.unwrap_or(16);
                if usize::try_from(tag_len).ok() != Some(GCM_TAG_LEN) {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "GCM tags of {tag_len} bytes (16 only)"
                    )));
                }
                if params.iv_length.is_some_and(|l| l != 96) {
                    return Err(KmipError::FeatureNotSupported(
                        "GCM IVs other than 96 bits".into(),
                    ));
                }
                let gcm = Gcm::new(key.expose()).map_err(crypto)?;
                let aad = request.aad.clone().unwrap_or_default();
                let nonce = iv_or_random::<GCM_NONCE_LEN>(given_iv.as_deref(), encrypt)?;
                if encrypt {
                    let tag = gcm.seal(&nonce, &aad, data.expose_mut()).map_err(crypto)?;
                    out.push(Item::bytes(Tag::DATA, data.expose()));
                    if given_iv.is_none() {
                        out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &nonce));
                    }
                    out.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag));
                } else {
                    let tag: [u8; GCM_TAG_LEN] = request
                        .tag
                        .as_deref()
                        .and_then(|t| t.try_into().ok())
                        .ok_or_else(|| {
                            KmipError::MissingData("a 16-byte Authenticated Encryption Tag".into())
                        })?;
                    gcm.open(&nonce, &aad, data.expose_mut(), &tag).map_err(|_| {
                        KmipError::CryptographicFailure(
                            "the data or its additional data does not authenticate".into(),
                        )
                    })?;
                    out.push(Item::bytes(Tag::DATA, data.expose()));
                }
            }
            BlockCipherMode::CBC => {
                let padding = params.padding_method.unwrap_or(PaddingMethod::PKCS5);
                if ![PaddingMethod::PKCS5, PaddingMethod::NONE].contains(&padding) {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "CBC with Padding Method {padding}"
                    )));
                }
                let iv = iv_or_random::<16>(given_iv.as_deref(), encrypt)?;
                let mut cbc = Cbc::new(key.expose(), CbcIv::Plain64).map_err(crypto)?;
                if encrypt {
                    let mut buf = data.expose().to_vec();
                    if padding == PaddingMethod::PKCS5 {
                        let pad = 16 - buf.len() % 16;
                        buf.resize(buf.len() + pad, u8::try_from(pad).unwrap_or(16));
                    }
                    let mut buf = SecretBytes::new(buf);
                    cbc.encrypt_with_iv(&iv, buf.expose_mut()).map_err(crypto)?;
                    out.push(Item::bytes(Tag::DATA, buf.expose()));
                    if given_iv.is_none() {
                        out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
                    }
                } else {
                    cbc.decrypt_with_iv(&iv, data.expose_mut()).map_err(crypto)?;
                    let plain = data.expose();
                    let len = if padding == PaddingMethod::PKCS5 {
                        let pad = usize::from(*plain.last().unwrap_or(&0));
                        let good = (1..=16).contains(&pad)
                            && pad <= plain.len()
                            && plain[plain.len() - pad..].iter().all(|&b| usize::from(b) == pad);
                        if !good {
                            return Err(KmipError::CryptographicFailure(
                                "bad PKCS5 padding".into(),
                            ));
                        }
                        plain.len() - pad
                    } else {
                        plain.len()
                    };
                    out.push(Item::bytes(Tag::DATA, &plain[..len]));
                }
            }
            BlockCipherMode::CTR => {
                let iv = iv_or_random::<16>(given_iv.as_deref(), encrypt)?;
                let mut ctr = Ctr::new(key.expose()).map_err(crypto)?;
                ctr.apply(&iv, data.expose_mut()).map_err(crypto)?;
                out.push(Item::bytes(Tag::DATA, data.expose()));
                if encrypt && given_iv.is_none() {
                    out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
                }
            }
            other => {
                return Err(KmipError::FeatureNotSupported(format!(
                    "Block Cipher Mode {other} (GCM, CBC and CTR are served)"
                )))
            }
        }
        Ok(out)
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

/// The IV, nonce or counter a request gave (exactly `N` bytes), or for
/// an encryption without one a random one (KMIP 1.4 §4.29: the server
/// generates it and returns it).
pub(super) fn iv_or_random<const N: usize>(given: Option<&[u8]>, encrypt: bool) -> R<[u8; N]> {
    match given {
        Some(iv) => iv.try_into().map_err(|_| {
            KmipError::InvalidField(format!(
                "the IV/Counter/Nonce must be {N} bytes, not {}",
                iv.len()
            ))
        }),
        None if encrypt => {
            let mut iv = [0u8; N];
            fill_random(&mut iv).map_err(crypto)?;
            Ok(iv)
        }
        None => Err(KmipError::MissingData("the IV/Counter/Nonce".into())),
    }
}

pub(super) fn check_algorithm(algorithm: CryptographicAlgorithm, bits: i32) -> R<()> {
    match algorithm {
        CryptographicAlgorithm::AES if [128, 192, 256].contains(&bits) => Ok(()),
        CryptographicAlgorithm::AES => {
            Err(KmipError::InvalidField(format!("AES keys are 128, 192 or 256 bits, not {bits}")))
        }
        a if mac_alg(a).is_some() => {
            // RFC 2104 §3: shorter keys are weak, and keys longer than
            // SHA-512's block would only be hashed down.
            if (128..=1024).contains(&bits) && bits % 8 == 0 {
                Ok(())
            } else {
                Err(KmipError::InvalidField(format!(
                    "{a} keys are 128 to 1024 bits in whole bytes, not {bits}"
                )))
            }
        }
        other => Err(KmipError::FeatureNotSupported(format!(
            "Cryptographic Algorithm {other} (AES and HMAC-SHA1/224/256/384/512 keys are served)"
        ))),
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
