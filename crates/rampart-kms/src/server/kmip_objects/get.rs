//! Get (KMIP 1.4 §4.11, 2.1 §6.1.22): the object in the Key Format Type
//! asked for, or by default the one it was registered in (created keys:
//! Raw for symmetric keys, PKCS#8 and X.509 for a key pair's halves), and
//! optionally wrapped by a symmetric key (§2.1.3). A conversion that does
//! not apply to the object answers Key Format Type Not Supported.

use rampart_crypto::{kw_wrap, kwp_wrap, SecretBytes};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CertificateType, CryptographicAlgorithm, KeyFormatType,
    ObjectType, SecretDataType, State as KState, WrappingMethod,
};
use rampart_kmip::object_parts::{Certificate, OpaqueObject};
use rampart_kmip::payload::{GetRequest, KeyBlock, KeyWrappingSpecification, ManagedObject};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Bytes, Fields, Item, Value};
use rampart_kmip::KmipError;

use super::crypto::{key_algorithm, ENCODING_TTLV, TAG_ENCODING_OPTION};
use super::errors::{crypto, R};
use super::key_formats::{private_key_out, public_key_out, Exported};
use super::object::Obj;
use super::session::Session;
use super::templates::template_attributes;
use crate::model::now_ms;

impl Session<'_> {
    pub(super) async fn get(&mut self, request: &GetRequest, encoding: u32) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load(&uid).await?;
        self.require_use(&obj)?;
        if !obj.key.exportable {
            return Err(KmipError::NotExtractable(format!(
                "key {} is not exportable",
                obj.key.name
            )));
        }
        let object_type = obj.object_type();
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
        }
        let wrapping = request.wrapping.is_some();
        let registered = self.check_serve(&obj, wrapping, false).await?;
        let format = response_format(&obj, request.key_format_type, registered, wrapping)?;
        if object_type == ObjectType::SPLIT_KEY {
            obj = self.load_with_attributes(&uid).await?;
        }
        let material = self.material(&obj).await?;
        let kmip = obj.kmip.as_ref();
        let subtype = kmip.and_then(|k| k.secret_type);
        let block = |exported: Exported, algorithm: Option<u32>, length: Option<i32>| KeyBlock {
            format,
            material: exported.material,
            integers: exported.integers,
            algorithm: algorithm.map(CryptographicAlgorithm),
            length,
            wrapping: None,
        };
        let bytes =
            |b: &SecretBytes| Exported { material: Bytes::from(b.expose()), integers: vec![] };
        let (algorithm, length) = (kmip.and_then(|k| k.algorithm), kmip.and_then(|k| k.length));
        let object = match object_type {
            ObjectType::SYMMETRIC_KEY => {
                // Triple DES keys are 168 bits in 24 bytes: the length the
                // object was made with.
                let bits =
                    length.unwrap_or_else(|| i32::try_from(material.len() * 8).unwrap_or(i32::MAX));
                let algorithm = algorithm.or(Some(CryptographicAlgorithm::AES.0));
                ManagedObject::SymmetricKey(block(bytes(&material), algorithm, Some(bits)))
            }
            ObjectType::SECRET_DATA => ManagedObject::SecretData {
                data_type: SecretDataType(subtype.unwrap_or(SecretDataType::PASSWORD.0)),
                block: block(bytes(&material), None, None),
            },
            ObjectType::PRIVATE_KEY => ManagedObject::PrivateKey(block(
                private_key_out(&material, format)?,
                algorithm,
                length,
            )),
            ObjectType::PUBLIC_KEY => ManagedObject::PublicKey(block(
                public_key_out(material.expose(), format)?,
                algorithm,
                length,
            )),
            ObjectType::SPLIT_KEY => {
                let fields = obj.split_key_fields()?;
                ManagedObject::SplitKey {
                    fields,
                    block: block(bytes(&material), algorithm, length),
                }
            }
            ObjectType::CERTIFICATE => ManagedObject::Certificate(Certificate {
                certificate_type: CertificateType(subtype.unwrap_or(CertificateType::X509.0)),
                value: Bytes::from(material.expose()),
            }),
            ObjectType::OPAQUE_OBJECT => ManagedObject::OpaqueObject(OpaqueObject {
                data_type: subtype.unwrap_or_default(),
                value: Bytes::from(material.expose()),
            }),
            ObjectType::TEMPLATE => ManagedObject::Template(template_attributes(&material)?),
            other => return Err(KmipError::FeatureNotSupported(format!("Get of a {other}"))),
        };
        drop(material);
        let mut item = object.to_item();
        if let Some(spec) = &request.wrapping {
            let block = object.key_block().ok_or_else(|| {
                KmipError::InvalidField(format!("a {object_type} has no Key Block to wrap"))
            })?;
            let wrapped = self.wrap_block(&obj, block, spec, encoding).await?;
            if let Value::Structure(children) = &mut item.value {
                for child in children.iter_mut().filter(|c| c.tag == Tag::KEY_BLOCK) {
                    *child = wrapped.clone();
                }
            }
        }
        self.check_serve(&obj, wrapping, true).await?;
        Ok(vec![
            Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            item,
        ])
    }

    /// `block` wrapped by the Key Wrapping Specification's key (KMIP 1.4
    /// §2.1.3): with TTLV Encoding (the default) the Key Value structure's
    /// TTLV is wrapped and sent as a Byte String; with No Encoding the Key
    /// Material alone is wrapped and stays inside the Key Value structure.
    async fn wrap_block(
        &mut self,
        obj: &Obj,
        block: &KeyBlock,
        spec: &KeyWrappingSpecification,
        encoding: u32,
    ) -> R<Item> {
        if spec.method != WrappingMethod::ENCRYPT {
            return Err(KmipError::FeatureNotSupported(format!("Wrapping Method {}", spec.method)));
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
        // The key wraps are AES's (RFC 3394, 5649): a Triple DES or
        // ChaCha20 key is not able to be used for wrapping (KMIP 1.4
        // §11.12: Permission Denied), whatever its length.
        if key_algorithm(&wrapper) != CryptographicAlgorithm::AES {
            return Err(KmipError::PermissionDenied(format!(
                "key {} is not an AES key: the key wraps need one",
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
        let plain = if encoding == ENCODING_TTLV {
            let key_value = match Fields::of(&block.to_item())?.required(Tag::KEY_VALUE) {
                Ok(v) => v.clone(),
                Err(e) => return Err(e.into()),
            };
            SecretBytes::new(key_value.encode()?)
        } else if block.integers.is_empty() {
            SecretBytes::from_slice(block.material.as_slice())
        } else {
            return Err(KmipError::FeatureNotSupported(
                "wrapping a transparent key with No Encoding".into(),
            ));
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
        let mut items = vec![Item::enumeration(Tag::KEY_FORMAT_TYPE, block.format.0)];
        if encoding == ENCODING_TTLV {
            items.push(Item::bytes(Tag::KEY_VALUE, &wrapped));
        } else {
            items.push(Item::structure(
                Tag::KEY_VALUE,
                vec![Item::bytes(Tag::KEY_MATERIAL, &wrapped)],
            ));
        }
        if let Some(a) = block.algorithm {
            items.push(Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, a.0));
        }
        if let Some(l) = block.length {
            items.push(Item::int(Tag::CRYPTOGRAPHIC_LENGTH, l));
        }
        let mut wrapping = vec![
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
        ];
        // Absent means TTLV Encoding (KMIP 1.4 §2.1.5), as the profiles'
        // AX-M-2 answers.
        if encoding != ENCODING_TTLV {
            wrapping.push(Item::enumeration(TAG_ENCODING_OPTION, encoding));
        }
        items.push(Item::structure(Tag::KEY_WRAPPING_DATA, wrapping));
        Ok(Item::structure(Tag::KEY_BLOCK, items))
    }
}

/// The Key Format Type a Get answers in: the one asked for if the object
/// can be given in it, else the one it was registered in (KMIP 1.4
/// §4.11): a symmetric key's or secret data's as its Digest names it
/// (`registered`), a private or public key's as its object keeps it. A
/// wrapped symmetric key or secret data is served in its default format
/// only.
fn response_format(
    obj: &Obj,
    requested: Option<KeyFormatType>,
    registered: Option<KeyFormatType>,
    wrapping: bool,
) -> R<KeyFormatType> {
    let registered_key = obj.kmip.as_ref().and_then(|k| k.secret_type).map(KeyFormatType);
    let (default, allowed): (KeyFormatType, &[KeyFormatType]) = match obj.object_type() {
        // A symmetric key also as a Transparent Symmetric Key (its Key
        // Material a structure holding Key), secret data as Raw or Opaque
        // (the same bytes).
        ObjectType::SYMMETRIC_KEY if wrapping => (KeyFormatType::RAW, &[KeyFormatType::RAW]),
        ObjectType::SYMMETRIC_KEY => {
            (KeyFormatType::RAW, &[KeyFormatType::RAW, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY])
        }
        ObjectType::SECRET_DATA if wrapping => (KeyFormatType::OPAQUE, &[KeyFormatType::OPAQUE]),
        ObjectType::SECRET_DATA => {
            (KeyFormatType::OPAQUE, &[KeyFormatType::OPAQUE, KeyFormatType::RAW])
        }
        ObjectType::SPLIT_KEY => (KeyFormatType::RAW, &[KeyFormatType::RAW]),
        // Which of these apply to the key's algorithm is checked as it
        // is converted (PKCS#1 and each transparent form are one algorithm's).
        ObjectType::PRIVATE_KEY => (
            registered_key.unwrap_or(KeyFormatType::PKCS8),
            &[
                KeyFormatType::PKCS1,
                KeyFormatType::PKCS8,
                KeyFormatType::TRANSPARENT_RSA_PRIVATE_KEY,
                KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY,
            ],
        ),
        ObjectType::PUBLIC_KEY => (
            registered_key.unwrap_or(KeyFormatType::X509),
            &[
                KeyFormatType::PKCS1,
                KeyFormatType::X509,
                KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY,
                KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY,
            ],
        ),
        // A certificate is X.509; an opaque object has no key format.
        ObjectType::CERTIFICATE => (KeyFormatType::X509, &[KeyFormatType::X509]),
        _ => (KeyFormatType::OPAQUE, &[]),
    };
    let default = match obj.object_type() {
        ObjectType::SYMMETRIC_KEY | ObjectType::SECRET_DATA => {
            registered.filter(|f| allowed.contains(f)).unwrap_or(default)
        }
        _ => default,
    };
    match requested {
        None => Ok(default),
        Some(f) if allowed.contains(&f) => Ok(f),
        Some(f) => Err(KmipError::KeyFormatTypeNotSupported(f.0)),
    }
}
