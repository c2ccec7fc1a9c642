//! KMIP managed objects as PKCS#11 objects: which class and key type
//! each is, and the value of each attribute (PKCS#11 3.0 §4).
//!
//! A key's label is its `x-pkcs11-label` custom attribute when it has one
//! (PKCS#11 labels need not be unique, KMIP Names must), else its first
//! Name. Its `CKA_ID` is its `x-pkcs11-id` when set, else the Unique
//! Identifier of the public key of its pair (the key's own, its Public
//! Key Link, a certificate's Public Key Link), so a key pair and its
//! certificate share one ID as applications expect. Secret and private
//! keys are always `CKA_SENSITIVE`: their values never leave the key
//! manager through the module, and `CKA_EXTRACTABLE` is the key
//! manager's Extractable attribute (false when it has none).

use cryptoki_sys::*;
use rampart_crypto::key_formats::{named_curve_der, public_key_bits, rsa_public_parts};
use rampart_crypto::signature_formats::{certificate_names, CertificateNames};
use rampart_crypto::{Curve, KeyAlg};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm, LinkType, ObjectType, State};
use rampart_kmip::message::Attribute;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

/// The custom attributes the module keeps PKCS#11's label and ID in.
pub(crate) const LABEL_ATTRIBUTE: &str = "x-pkcs11-label";
pub(crate) const ID_ATTRIBUTE: &str = "x-pkcs11-id";

/// What a KMIP object is, as far as PKCS#11 cares.
#[derive(Debug, Clone)]
pub(crate) struct ObjectInfo {
    pub uid: String,
    pub class: CK_OBJECT_CLASS,
    pub key: Option<KeyKind>,
    pub label: String,
    pub id: Vec<u8>,
    pub usage: i32,
    /// Cryptographic Length: bits of a symmetric key or RSA modulus.
    pub bits: Option<u32>,
    pub extractable: bool,
    pub state: Option<State>,
    /// Public Key Link (of a private key or certificate).
    pub public_link: Option<String>,
    /// The public key (SPKI DER) of a key of a pair, once read.
    pub public: Option<Vec<u8>>,
    /// A certificate's DER and names, once read.
    pub certificate: Option<(Vec<u8>, CertificateNames)>,
    /// False for a session object (destroyed when its session closes).
    pub token: bool,
}

/// The key types the module serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Aes,
    /// An HMAC key (KMIP HMAC-SHA*; PKCS#11 generic secret).
    GenericSecret,
    Rsa,
    Ec(Curve),
    Ed25519,
}

impl KeyKind {
    pub(crate) fn key_type(self) -> CK_KEY_TYPE {
        match self {
            Self::Aes => CKK_AES,
            Self::GenericSecret => CKK_GENERIC_SECRET,
            Self::Rsa => CKK_RSA,
            Self::Ec(_) => CKK_EC,
            Self::Ed25519 => CKK_EC_EDWARDS,
        }
    }
}

/// An attribute's value for `C_GetAttributeValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttributeValue {
    Value(Vec<u8>),
    /// The object has it, but it may not be revealed.
    Sensitive,
    /// Not an attribute of this object.
    Invalid,
}

pub(crate) fn ulong(v: CK_ULONG) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub(crate) fn bool_value(v: bool) -> Vec<u8> {
    vec![if v { CK_TRUE } else { CK_FALSE }]
}

impl ObjectInfo {
    /// Reads the attributes a Get Attributes answered for `uid`; `None`
    /// for an object the module does not present (opaque objects, secret
    /// data, keys of other algorithms, destroyed objects).
    pub(crate) fn from_attributes(uid: &str, attributes: &[Attribute]) -> Option<Self> {
        let find = |name: &str| attributes.iter().find(|a| a.name == name)?.value.as_ref();
        let enumeration = |name: &str| match find(name).map(|i| &i.value) {
            Some(Value::Enumeration(v)) => Some(*v),
            _ => None,
        };
        let integer = |name: &str| match find(name).map(|i| &i.value) {
            Some(Value::Integer(v)) => Some(*v),
            _ => None,
        };
        let object_type = ObjectType(enumeration("Object Type")?);
        let algorithm = enumeration("Cryptographic Algorithm").map(CryptographicAlgorithm);
        let bits = integer("Cryptographic Length").and_then(|b| u32::try_from(b).ok());
        let state = enumeration("State").map(State);
        if state == Some(State::DESTROYED) || state == Some(State::DESTROYED_COMPROMISED) {
            return None;
        }
        let key = |alg: Option<CryptographicAlgorithm>| -> Option<KeyKind> {
            Some(match alg? {
                CryptographicAlgorithm::AES => KeyKind::Aes,
                CryptographicAlgorithm::HMAC_SHA1
                | CryptographicAlgorithm::HMAC_SHA224
                | CryptographicAlgorithm::HMAC_SHA256
                | CryptographicAlgorithm::HMAC_SHA384
                | CryptographicAlgorithm::HMAC_SHA512 => KeyKind::GenericSecret,
                CryptographicAlgorithm::RSA => KeyKind::Rsa,
                CryptographicAlgorithm::EC | CryptographicAlgorithm::ECDSA => {
                    KeyKind::Ec(match bits? {
                        256 => Curve::P256,
                        384 => Curve::P384,
                        521 => Curve::P521,
                        _ => return None,
                    })
                }
                CryptographicAlgorithm::ED25519 => KeyKind::Ed25519,
                _ => return None,
            })
        };
        let (class, key) = match object_type {
            ObjectType::SYMMETRIC_KEY => (CKO_SECRET_KEY, Some(key(algorithm)?)),
            ObjectType::PRIVATE_KEY => (CKO_PRIVATE_KEY, Some(key(algorithm)?)),
            ObjectType::PUBLIC_KEY => (CKO_PUBLIC_KEY, Some(key(algorithm)?)),
            ObjectType::CERTIFICATE => (CKO_CERTIFICATE, None),
            _ => return None,
        };
        let mut public_link = None;
        for attribute in attributes.iter().filter(|a| a.name == "Link") {
            let Some(Value::Structure(fields)) = attribute.value.as_ref().map(|i| &i.value) else {
                continue;
            };
            let link_type = fields.iter().find(|i| i.tag == Tag::LINK_TYPE);
            let linked = fields.iter().find(|i| i.tag == Tag::LINKED_OBJECT_IDENTIFIER);
            if let (Some(Value::Enumeration(t)), Some(Value::TextString(id))) =
                (link_type.map(|i| &i.value), linked.map(|i| &i.value))
            {
                if LinkType(*t) == LinkType::PUBLIC_KEY {
                    public_link = Some(id.clone());
                }
            }
        }
        let name = attributes.iter().filter(|a| a.name == "Name").find_map(|a| {
            match a.value.as_ref().map(|i| &i.value) {
                Some(Value::Structure(fields)) => fields
                    .iter()
                    .find(|i| i.tag == Tag::NAME_VALUE)
                    .and_then(|i| i.as_text().ok())
                    .map(str::to_owned),
                _ => None,
            }
        });
        let label = match find(LABEL_ATTRIBUTE).map(|i| &i.value) {
            Some(Value::TextString(label)) => label.clone(),
            _ => name.unwrap_or_default(),
        };
        let id = match find(ID_ATTRIBUTE).map(|i| &i.value) {
            Some(Value::ByteString(id)) => id.as_slice().to_vec(),
            _ => match class {
                CKO_PUBLIC_KEY | CKO_SECRET_KEY => uid.as_bytes().to_vec(),
                _ => public_link.as_deref().unwrap_or(uid).as_bytes().to_vec(),
            },
        };
        let extractable =
            matches!(find("Extractable").map(|i| &i.value), Some(Value::Boolean(true)));
        Some(Self {
            uid: uid.to_owned(),
            class,
            key,
            label,
            id,
            usage: integer("Cryptographic Usage Mask").unwrap_or(0),
            bits,
            extractable,
            state,
            public_link,
            public: None,
            certificate: None,
            token: true,
        })
    }

    /// Whether the object is private (visible only after C_Login).
    pub(crate) fn is_private(&self) -> bool {
        matches!(self.class, CKO_SECRET_KEY | CKO_PRIVATE_KEY)
    }

    /// Where its public key is read from: its own material (a public
    /// key), its Public Key Link (a private key); `None` otherwise.
    pub(crate) fn public_key_source(&self) -> Option<&str> {
        match self.class {
            CKO_PUBLIC_KEY => Some(&self.uid),
            CKO_PRIVATE_KEY => self.public_link.as_deref(),
            _ => None,
        }
    }

    /// Sets a certificate's DER (and the names read from it).
    pub(crate) fn set_certificate(&mut self, der: Vec<u8>) {
        if let Ok(names) = certificate_names(&der) {
            self.certificate = Some((der, names));
        }
    }

    fn can(&self, bit: i32) -> bool {
        self.usage & bit != 0
    }

    /// The size of the key's signatures or RSA blocks, in bytes.
    pub(crate) fn output_len(&self) -> Option<usize> {
        match self.key? {
            KeyKind::Rsa => self.bits.map(|b| (b as usize).div_ceil(8)),
            KeyKind::Ec(curve) => {
                Some(2 * rampart_crypto::signature_formats::ecdsa_scalar_len(curve))
            }
            KeyKind::Ed25519 => Some(64),
            _ => None,
        }
    }

    /// The value of attribute `kind`.
    pub(crate) fn attribute(&self, kind: CK_ATTRIBUTE_TYPE) -> AttributeValue {
        use AttributeValue::{Invalid, Sensitive, Value as V};
        let is_key = self.key.is_some();
        let secret_or_private = self.is_private();
        match kind {
            CKA_CLASS => V(ulong(self.class)),
            CKA_TOKEN => V(bool_value(self.token)),
            CKA_PRIVATE => V(bool_value(self.is_private())),
            CKA_MODIFIABLE | CKA_COPYABLE => V(bool_value(false)),
            CKA_DESTROYABLE => V(bool_value(true)),
            CKA_LABEL => V(self.label.as_bytes().to_vec()),
            CKA_ID => V(self.id.clone()),
            CKA_START_DATE | CKA_END_DATE => V(Vec::new()),
            CKA_KEY_TYPE if is_key => V(ulong(self.key.map_or(0, KeyKind::key_type))),
            CKA_LOCAL if is_key => V(bool_value(false)),
            CKA_DERIVE if is_key => V(bool_value(self.can(usage_mask::DERIVE_KEY))),
            CKA_KEY_GEN_MECHANISM if is_key => V(ulong(CK_UNAVAILABLE_INFORMATION)),
            CKA_SENSITIVE | CKA_ALWAYS_SENSITIVE if secret_or_private => V(bool_value(true)),
            CKA_EXTRACTABLE if secret_or_private => V(bool_value(self.extractable)),
            CKA_NEVER_EXTRACTABLE if secret_or_private => V(bool_value(!self.extractable)),
            CKA_WRAP_WITH_TRUSTED | CKA_ALWAYS_AUTHENTICATE if secret_or_private => {
                V(bool_value(false))
            }
            CKA_TRUSTED if self.class != CKO_PRIVATE_KEY => V(bool_value(false)),
            CKA_ENCRYPT if matches!(self.class, CKO_SECRET_KEY | CKO_PUBLIC_KEY) => {
                V(bool_value(self.can(usage_mask::ENCRYPT)))
            }
            CKA_DECRYPT if secret_or_private => V(bool_value(self.can(usage_mask::DECRYPT))),
            CKA_SIGN if secret_or_private => {
                V(bool_value(self.can(usage_mask::SIGN) || self.can(usage_mask::MAC_GENERATE)))
            }
            CKA_VERIFY if matches!(self.class, CKO_SECRET_KEY | CKO_PUBLIC_KEY) => {
                V(bool_value(self.can(usage_mask::VERIFY) || self.can(usage_mask::MAC_VERIFY)))
            }
            CKA_SIGN_RECOVER if self.class == CKO_PRIVATE_KEY => V(bool_value(false)),
            CKA_VERIFY_RECOVER if self.class == CKO_PUBLIC_KEY => V(bool_value(false)),
            CKA_WRAP if matches!(self.class, CKO_SECRET_KEY | CKO_PUBLIC_KEY) => {
                V(bool_value(self.can(usage_mask::WRAP_KEY)))
            }
            CKA_UNWRAP if secret_or_private => V(bool_value(self.can(usage_mask::UNWRAP_KEY))),
            CKA_VALUE_LEN if self.class == CKO_SECRET_KEY => {
                V(ulong(CK_ULONG::from(self.bits.unwrap_or(0) / 8)))
            }
            CKA_VALUE if secret_or_private => Sensitive,
            CKA_PRIVATE_EXPONENT | CKA_PRIME_1 | CKA_PRIME_2 | CKA_EXPONENT_1 | CKA_EXPONENT_2
            | CKA_COEFFICIENT
                if self.class == CKO_PRIVATE_KEY && self.key == Some(KeyKind::Rsa) =>
            {
                Sensitive
            }
            CKA_SUBJECT if matches!(self.class, CKO_PUBLIC_KEY | CKO_PRIVATE_KEY) => V(Vec::new()),
            CKA_PUBLIC_KEY_INFO if matches!(self.class, CKO_PUBLIC_KEY | CKO_PRIVATE_KEY) => {
                self.public.clone().map_or(V(Vec::new()), V)
            }
            CKA_MODULUS | CKA_PUBLIC_EXPONENT | CKA_MODULUS_BITS
                if self.key == Some(KeyKind::Rsa) && self.class != CKO_SECRET_KEY =>
            {
                if kind == CKA_MODULUS_BITS {
                    return V(ulong(CK_ULONG::from(self.bits.unwrap_or(0))));
                }
                let Some((n, e)) = self.public.as_deref().and_then(|s| rsa_public_parts(s).ok())
                else {
                    return Invalid;
                };
                V(if kind == CKA_MODULUS { n } else { e })
            }
            CKA_EC_PARAMS if matches!(self.key, Some(KeyKind::Ec(_) | KeyKind::Ed25519)) => {
                let alg = match self.key {
                    Some(KeyKind::Ec(curve)) => KeyAlg::Ec(curve),
                    _ => KeyAlg::Ed25519,
                };
                named_curve_der(alg).map_or(Invalid, V)
            }
            CKA_EC_POINT
                if matches!(self.key, Some(KeyKind::Ec(_) | KeyKind::Ed25519))
                    && self.class != CKO_SECRET_KEY =>
            {
                match self.public.as_deref().and_then(|spki| public_key_bits(spki).ok()) {
                    // PKCS#11 3.0 §2.3.3: the DER of an OCTET STRING.
                    Some((_, point)) => V(octet_string(&point)),
                    None => Invalid,
                }
            }
            CKA_CERTIFICATE_TYPE if self.class == CKO_CERTIFICATE => V(ulong(CKC_X_509)),
            CKA_CERTIFICATE_CATEGORY | CKA_JAVA_MIDP_SECURITY_DOMAIN
                if self.class == CKO_CERTIFICATE =>
            {
                V(ulong(0))
            }
            CKA_URL | CKA_HASH_OF_SUBJECT_PUBLIC_KEY | CKA_HASH_OF_ISSUER_PUBLIC_KEY
                if self.class == CKO_CERTIFICATE =>
            {
                V(Vec::new())
            }
            CKA_VALUE | CKA_SUBJECT | CKA_ISSUER | CKA_SERIAL_NUMBER
                if self.class == CKO_CERTIFICATE =>
            {
                let Some((der, names)) = &self.certificate else { return Invalid };
                V(match kind {
                    CKA_VALUE => der.clone(),
                    CKA_SUBJECT => names.subject.clone(),
                    CKA_ISSUER => names.issuer.clone(),
                    _ => names.serial_number.clone(),
                })
            }
            _ => Invalid,
        }
    }

    /// Whether every attribute of `template` has the value given.
    pub(crate) fn matches(&self, template: &[(CK_ATTRIBUTE_TYPE, Vec<u8>)]) -> bool {
        template.iter().all(|(kind, wanted)| match self.attribute(*kind) {
            AttributeValue::Value(value) => value == *wanted,
            _ => false,
        })
    }
}

/// `bytes` as the DER of an OCTET STRING.
pub(crate) fn octet_string(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0x04];
    let len = bytes.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let be = len.to_be_bytes();
        let skip = be.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (be.len() - skip) as u8);
        out.extend_from_slice(&be[skip..]);
    }
    out.extend_from_slice(bytes);
    out
}

/// A custom attribute's Attribute item (KMIP 1.4 §3.1: `x-` names are
/// the client's).
pub(crate) fn custom_attribute(name: &str, value: Value) -> Item {
    Attribute::new(name, value).to_item()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(name: &str, value: Value) -> Attribute {
        Attribute {
            name: name.into(),
            index: None,
            value: Some(Item::new(Tag::ATTRIBUTE_VALUE, value)),
        }
    }

    #[test]
    fn a_private_key_shares_the_id_of_its_public_key_and_hides_its_value() {
        let attributes = [
            attribute("Object Type", Value::Enumeration(ObjectType::PRIVATE_KEY.0)),
            attribute("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::EC.0)),
            attribute("Cryptographic Length", Value::Integer(256)),
            attribute("Cryptographic Usage Mask", Value::Integer(usage_mask::SIGN)),
            attribute(
                "Link",
                Value::Structure(vec![
                    Item::enumeration(Tag::LINK_TYPE, LinkType::PUBLIC_KEY.0),
                    Item::text(Tag::LINKED_OBJECT_IDENTIFIER, "pub-1"),
                ]),
            ),
            attribute(LABEL_ATTRIBUTE, Value::TextString("signer".into())),
        ];
        let info = ObjectInfo::from_attributes("priv-1", &attributes).expect("a private key");
        assert_eq!(info.class, CKO_PRIVATE_KEY);
        assert_eq!(info.key, Some(KeyKind::Ec(Curve::P256)));
        assert_eq!(info.id, b"pub-1");
        assert_eq!(info.label, "signer");
        assert_eq!(info.attribute(CKA_SIGN), AttributeValue::Value(bool_value(true)));
        assert_eq!(info.attribute(CKA_DECRYPT), AttributeValue::Value(bool_value(false)));
        assert_eq!(info.attribute(CKA_VALUE), AttributeValue::Sensitive);
        assert_eq!(info.attribute(CKA_EXTRACTABLE), AttributeValue::Value(bool_value(false)));
        assert_eq!(info.attribute(CKA_CERTIFICATE_TYPE), AttributeValue::Invalid);
        assert_eq!(info.output_len(), Some(64));
    }

    #[test]
    fn objects_the_module_does_not_present_are_left_out() {
        let opaque = [attribute("Object Type", Value::Enumeration(ObjectType::OPAQUE_OBJECT.0))];
        assert!(ObjectInfo::from_attributes("o", &opaque).is_none());
        let destroyed = [
            attribute("Object Type", Value::Enumeration(ObjectType::SYMMETRIC_KEY.0)),
            attribute("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::AES.0)),
            attribute("State", Value::Enumeration(State::DESTROYED.0)),
        ];
        assert!(ObjectInfo::from_attributes("d", &destroyed).is_none());
    }

    #[test]
    fn a_long_octet_string_has_a_long_form_length() {
        assert_eq!(octet_string(&[7; 3]), [4, 3, 7, 7, 7]);
        let long = octet_string(&[0; 200]);
        assert_eq!(long[..3], [4, 0x81, 200]);
    }
}
