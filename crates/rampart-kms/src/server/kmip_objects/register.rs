//! Register of every managed object type this server keeps (KMIP 1.4
//! §4.3, 2.1 §6.1.41). The material is checked and stored sealed in one
//! form per type, so that the rest of the server can rely on it: a
//! symmetric key's or Secret Data's bytes, a private key as PKCS#8, a
//! public key as SubjectPublicKeyInfo, a certificate as its DER, an
//! opaque object's and a split key part's bytes. A private or public
//! key keeps the Key Format Type it came in, which Get answers in by
//! default (§4.11).

use rampart_crypto::{kw_unwrap, kwp_unwrap, SecretBytes};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, KeyFormatType, ObjectType,
    State as KState, WrappingMethod,
};
use rampart_kmip::object_parts::{Certificate, MAX_OBJECT_BYTES};
use rampart_kmip::payload::{KeyBlock, ManagedObject, RegisterRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::certificate::certificate_attributes;
use super::crypto::{check_algorithm, key_algorithm};
use super::errors::R;
use super::key_formats::{check_claims, private_key_in, public_key_in};
use super::lifecycle::{NewObject, MAX_SECRET};
use super::object::{encode_value, SPLIT_KEY_ROW};
use super::server_attributes::default_format;
use super::session::Session;
use super::templates::template_body;
use crate::model::now_ms;

impl Session<'_> {
    pub(super) async fn register(&mut self, request: RegisterRequest) -> R<Vec<Item>> {
        let object_type = request.object.object_type();
        let mut new = self.template(&request.attributes, object_type).await?;
        let mut request = request;
        if let Some(block) = request.object.key_block().filter(|b| b.wrapping.is_some()) {
            let plain = self.unwrapped(block).await?;
            match &mut request.object {
                ManagedObject::SymmetricKey(b) | ManagedObject::PrivateKey(b) => *b = plain,
                _ => {
                    return Err(KmipError::FeatureNotSupported(
                        "registering wrapped key material other than a symmetric or private key"
                            .into(),
                    ))
                }
            }
        }
        let material = match &request.object {
            ManagedObject::SymmetricKey(block) => symmetric_key(block, &mut new)?,
            ManagedObject::SecretData { data_type, block } => {
                let material = SecretBytes::from_slice(block.material.as_slice());
                if material.is_empty() || material.len() > MAX_SECRET {
                    return Err(KmipError::InvalidField(format!(
                        "Secret Data must be 1 to {MAX_SECRET} bytes"
                    )));
                }
                new.secret_type = Some(data_type.0);
                new.algorithm = None;
                new.length = None;
                material
            }
            ManagedObject::PrivateKey(block) => {
                let (pkcs8, info) = private_key_in(block)?;
                let (algorithm, length) = check_claims(
                    info,
                    block.algorithm.map(|a| a.0).or(new.algorithm),
                    block.length.or(new.length),
                )?;
                (new.algorithm, new.length) = (Some(algorithm), Some(length));
                new.secret_type = Some(block.format.0);
                pkcs8
            }
            ManagedObject::PublicKey(block) => {
                let (spki, info) = public_key_in(block)?;
                let (algorithm, length) = check_claims(
                    info,
                    block.algorithm.map(|a| a.0).or(new.algorithm),
                    block.length.or(new.length),
                )?;
                (new.algorithm, new.length) = (Some(algorithm), Some(length));
                new.secret_type = Some(block.format.0);
                SecretBytes::new(spki)
            }
            ManagedObject::SplitKey { fields, block } => {
                // The part is stored as its bytes; the key it is part of
                // is described by the Key Block's algorithm and length.
                if block.format != KeyFormatType::RAW {
                    return Err(KmipError::KeyFormatTypeNotSupported(block.format.0));
                }
                let part = block.material.as_slice();
                if part.is_empty() || part.len() > MAX_OBJECT_BYTES {
                    return Err(KmipError::InvalidField(format!(
                        "a split key part must be 1 to {MAX_OBJECT_BYTES} bytes"
                    )));
                }
                new.algorithm = block.algorithm.map(|a| a.0).or(new.algorithm);
                new.length = block.length.or(new.length);
                let fields = Item::structure(Tag::SPLIT_KEY, fields.items());
                new.stored.push((SPLIT_KEY_ROW.to_owned(), encode_value(SPLIT_KEY_ROW, &fields)?));
                SecretBytes::from_slice(part)
            }
            ManagedObject::Certificate(cert) => certificate_object(cert, &mut new)?,
            ManagedObject::Template(attributes) => template_body(attributes, &new)?,
            ManagedObject::OpaqueObject(opaque) => {
                if new.algorithm.is_some() || new.length.is_some() {
                    return Err(KmipError::InvalidField(
                        "an Opaque Object has no Cryptographic Algorithm or Length".into(),
                    ));
                }
                new.secret_type = Some(opaque.data_type);
                SecretBytes::from_slice(opaque.value.as_slice())
            }
        };
        // Registered, not drawn here: the Digest is of the form it came in.
        new.registered_format =
            Some(request.object.key_block().map_or(default_format(object_type), |b| b.format));
        if object_type == ObjectType::OPAQUE_OBJECT && material.is_empty() {
            return Err(KmipError::InvalidField("an empty Opaque Data Value".into()));
        }
        let uid = self.store_new(object_type, new, &material).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }
}

impl Session<'_> {
    /// A Key Block registered wrapped (KMIP 1.4 §2.1.5), unwrapped: its
    /// Key Material wrapped with No Encoding (the material alone) by an
    /// active AES key whose usage allows unwrapping, with the AES key
    /// wraps (RFC 3394, 5649), as Get wraps it. The unwrapping key is
    /// used under the requester's policy, like any other use of a key.
    async fn unwrapped(&mut self, block: &KeyBlock) -> R<KeyBlock> {
        let Some(wrapping) = &block.wrapping else { return Ok(block.clone()) };
        if wrapping.method != WrappingMethod::ENCRYPT {
            return Err(KmipError::FeatureNotSupported(format!(
                "Wrapping Method {}",
                wrapping.method
            )));
        }
        let uid = wrapping.encryption_key.as_deref().ok_or_else(|| {
            KmipError::MissingData("the Encryption Key Information of the Key Wrapping Data".into())
        })?;
        let mode = wrapping
            .parameters
            .as_ref()
            .and_then(|p| p.block_cipher_mode)
            .unwrap_or(BlockCipherMode::NIST_KEY_WRAP);
        let unwrapper = self.load(uid).await?;
        self.require_use(&unwrapper)?;
        if unwrapper.object_type() != ObjectType::SYMMETRIC_KEY
            || unwrapper.state(now_ms()) != KState::ACTIVE
            || key_algorithm(&unwrapper) != CryptographicAlgorithm::AES
        {
            return Err(KmipError::IllegalOperation(format!(
                "unwrapping key {uid} is not an active AES key"
            )));
        }
        if unwrapper.usage_mask().is_some_and(|m| m & usage_mask::UNWRAP_KEY == 0) {
            return Err(KmipError::PermissionDenied(format!(
                "key {uid} may not unwrap keys (Cryptographic Usage Mask)"
            )));
        }
        let kek = self.material(&unwrapper).await?;
        let wrapped = block.material.as_slice();
        let plain = match mode {
            BlockCipherMode::NIST_KEY_WRAP => kw_unwrap(kek.expose(), wrapped),
            BlockCipherMode::AES_KEY_WRAP_PADDING => kwp_unwrap(kek.expose(), wrapped),
            other => {
                return Err(KmipError::FeatureNotSupported(format!(
                    "key unwrapping with Block Cipher Mode {other}"
                )))
            }
        }
        .map_err(|_| KmipError::CryptographicFailure("the wrapped key does not unwrap".into()))?;
        Ok(KeyBlock { material: plain.expose().into(), wrapping: None, ..block.clone() })
    }
}

/// A certificate's DER, its type checked against the template's and the
/// attributes derived from it put into `new` (KMIP Register, and the
/// REST API's `POST /v1/certificates`).
pub(crate) fn certificate_object(cert: &Certificate, new: &mut NewObject) -> R<SecretBytes> {
    if new.certificate_type.is_some_and(|t| t != cert.certificate_type.0) {
        return Err(KmipError::InvalidField(
            "the Certificate Type attribute is not the certificate's".into(),
        ));
    }
    let der = cert.value.as_slice();
    let derived = certificate_attributes(cert.certificate_type, der)?;
    if new.algorithm.is_some() || new.length.is_some() {
        return Err(KmipError::InvalidField(
            "a certificate's Cryptographic Algorithm and Length are its public key's".into(),
        ));
    }
    new.algorithm = derived.algorithm;
    new.length = derived.length;
    new.secret_type = Some(cert.certificate_type.0);
    for (name, value) in derived.attributes {
        new.stored.push((name.to_owned(), encode_value(name, &value)?));
    }
    Ok(SecretBytes::from_slice(der))
}

/// A symmetric key's bytes, its algorithm and length checked.
fn symmetric_key(block: &KeyBlock, new: &mut NewObject) -> R<SecretBytes> {
    if ![KeyFormatType::RAW, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY].contains(&block.format) {
        return Err(KmipError::KeyFormatTypeNotSupported(block.format.0));
    }
    let material = SecretBytes::from_slice(block.material.as_slice());
    let algorithm = block
        .algorithm
        .map(|a| a.0)
        .or(new.algorithm)
        .map(CryptographicAlgorithm)
        .ok_or_else(|| KmipError::MissingData("the key's Cryptographic Algorithm".into()))?;
    // Triple DES keys are 168 (or 112) bits in 24 (or 16) bytes.
    let bits = block
        .length
        .or(new.length)
        .unwrap_or_else(|| i32::try_from(material.len() * 8).unwrap_or(i32::MAX));
    if check_algorithm(algorithm, bits)? != material.len() {
        return Err(KmipError::InvalidField(format!(
            "the Cryptographic Length {bits} does not match the {}-byte key",
            material.len()
        )));
    }
    new.algorithm = Some(algorithm.0);
    new.length = Some(bits);
    Ok(material)
}
