//! Typed request payloads of the operations in the KMIP 1.4 Baseline
//! Server, Symmetric Key Lifecycle Server and Basic Cryptographic Server
//! profiles, and the response items that carry objects back.
//!
//! Attributes arrive in two shapes: KMIP 1.x `Attribute` structures (name,
//! index, value) inside a Template-Attribute, and KMIP 2.x `Attributes`
//! structures whose children are the attribute items themselves, tagged by
//! attribute. Both become one [`AttributeSet`] of [`Attribute`]s named as
//! in 1.x, so the server has one model whatever version the client speaks.

use crate::enums::{
    AdjustmentType, BlockCipherMode, CertificateRequestType, CryptographicAlgorithm,
    DerivationMethod, DigitalSignatureAlgorithm, HashingAlgorithm, KeyFormatType, LinkType,
    MaskGenerator, NameType, ObjectType, PaddingMethod, QueryFunction, RevocationReasonCode,
    SecretDataType, SplitKeyMethod, WrappingMethod,
};
use crate::error::KmipError;
use crate::message::{Attribute, ProtocolVersion};
use crate::object_parts::{
    is_transparent_integers, parse_transparent, transparent_item, Certificate, OpaqueObject,
    SplitKeyFields, MAX_SPLIT_KEY_PARTS,
};
use crate::tag::Tag;
use crate::ttlv::{Bytes, Fields, Item, TtlvError, Value};

/// The attributes of a request, in order, and the Templates (KMIP 1.x,
/// by Name) whose attributes the request's own override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributeSet {
    pub attributes: Vec<Attribute>,
    /// The Names of a 1.x Template-Attribute (KMIP 1.4 §2.1.8), in order:
    /// a later Template's single-instance attributes override an earlier's.
    pub templates: Vec<Name>,
}

/// Most Template Names one Template-Attribute may give (each is a look-up).
pub const MAX_TEMPLATE_NAMES: usize = 16;

/// Attribute names of KMIP 1.x and the tags KMIP 2.x uses for them.
const NAMED_TAGS: &[(&str, Tag)] = &[
    ("Unique Identifier", Tag::UNIQUE_IDENTIFIER),
    ("Name", Tag::NAME),
    ("Object Type", Tag::OBJECT_TYPE),
    ("Cryptographic Algorithm", Tag::CRYPTOGRAPHIC_ALGORITHM),
    ("Cryptographic Length", Tag::CRYPTOGRAPHIC_LENGTH),
    ("Cryptographic Parameters", Tag::CRYPTOGRAPHIC_PARAMETERS),
    ("Cryptographic Usage Mask", Tag::CRYPTOGRAPHIC_USAGE_MASK),
    ("Operation Policy Name", Tag::OPERATION_POLICY_NAME),
    ("State", Tag::STATE),
    ("Initial Date", Tag::INITIAL_DATE),
    ("Activation Date", Tag::ACTIVATION_DATE),
    ("Process Start Date", Tag::PROCESS_START_DATE),
    ("Protect Stop Date", Tag::PROTECT_STOP_DATE),
    ("Deactivation Date", Tag::DEACTIVATION_DATE),
    ("Destroy Date", Tag::DESTROY_DATE),
    ("Compromise Occurrence Date", Tag::COMPROMISE_OCCURRENCE_DATE),
    ("Compromise Date", Tag::COMPROMISE_DATE),
    ("Revocation Reason", Tag::REVOCATION_REASON),
    ("Archive Date", Tag::ARCHIVE_DATE),
    ("Object Group", Tag::OBJECT_GROUP),
    ("Fresh", Tag::FRESH),
    ("Link", Tag::LINK),
    ("Application Specific Information", Tag::APPLICATION_SPECIFIC_INFORMATION),
    ("Contact Information", Tag::CONTACT_INFORMATION),
    ("Last Change Date", Tag::LAST_CHANGE_DATE),
    ("Original Creation Date", Tag::ORIGINAL_CREATION_DATE),
    ("Digest", Tag::DIGEST),
    ("Lease Time", Tag::LEASE_TIME),
    ("Usage Limits", Tag::USAGE_LIMITS),
    ("Key Format Type", Tag::KEY_FORMAT_TYPE),
    ("Object Group Member", Tag(0x4200AC)),
    ("Key Value Location", Tag(0x4200B8)),
    ("Key Value Present", Tag(0x4200BB)),
    ("Alternative Name", Tag(0x4200BF)),
    ("Random Number Generator", Tag(0x4200DE)),
    ("Description", Tag(0x4200FC)),
    ("Comment", Tag(0x4200FD)),
    ("Sensitive", Tag(0x420120)),
    ("Always Sensitive", Tag(0x420121)),
    ("Extractable", Tag(0x420122)),
    ("Never Extractable", Tag(0x420123)),
    ("Short Unique Identifier", Tag(0x420136)),
    ("Protection Storage Mask", Tag(0x42015E)),
    ("Protection Level", Tag(0x420145)),
    ("Protection Period", Tag(0x420146)),
    ("Quantum Safe", Tag(0x420147)),
    ("Certificate Type", Tag::CERTIFICATE_TYPE),
    ("Certificate Length", Tag::CERTIFICATE_LENGTH),
    ("X.509 Certificate Identifier", Tag::X509_CERTIFICATE_IDENTIFIER),
    ("X.509 Certificate Subject", Tag::X509_CERTIFICATE_SUBJECT),
    ("X.509 Certificate Issuer", Tag::X509_CERTIFICATE_ISSUER),
    ("Digital Signature Algorithm", Tag::DIGITAL_SIGNATURE_ALGORITHM),
    ("Certificate Subject CN", Tag(0x420108)),
    ("Certificate Subject O", Tag(0x420109)),
    ("Certificate Subject OU", Tag(0x42010A)),
    ("Certificate Subject Email", Tag(0x42010B)),
    ("Certificate Subject C", Tag(0x42010C)),
    ("Certificate Subject ST", Tag(0x42010D)),
    ("Certificate Subject L", Tag(0x42010E)),
    ("Certificate Subject UID", Tag(0x42010F)),
    ("Certificate Subject Serial Number", Tag(0x420110)),
    ("Certificate Subject Title", Tag(0x420111)),
    ("Certificate Subject DC", Tag(0x420112)),
    ("Certificate Subject DN Qualifier", Tag(0x420113)),
    ("Certificate Issuer CN", Tag(0x420114)),
    ("Certificate Issuer O", Tag(0x420115)),
    ("Certificate Issuer OU", Tag(0x420116)),
    ("Certificate Issuer Email", Tag(0x420117)),
    ("Certificate Issuer C", Tag(0x420118)),
    ("Certificate Issuer ST", Tag(0x420119)),
    ("Certificate Issuer L", Tag(0x42011A)),
    ("Certificate Issuer UID", Tag(0x42011B)),
    ("Certificate Issuer Serial Number", Tag(0x42011C)),
    ("Certificate Issuer Title", Tag(0x42011D)),
    ("Certificate Issuer DC", Tag(0x42011E)),
    ("Certificate Issuer DN Qualifier", Tag(0x42011F)),
];

/// The KMIP 1.x attribute name of a KMIP 2.x attribute tag.
#[must_use]
pub fn attribute_name_of(tag: Tag) -> Option<&'static str> {
    NAMED_TAGS.iter().find(|(_, t)| *t == tag).map(|(n, _)| *n)
}

/// The KMIP 2.x tag of a KMIP 1.x attribute name.
#[must_use]
pub fn attribute_tag_of(name: &str) -> Option<Tag> {
    NAMED_TAGS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Whether `name` is a client-defined attribute (`x-`, as vSphere uses,
/// or `y-` for server-defined ones in KMIP 1.x).
#[must_use]
pub fn is_custom_attribute(name: &str) -> bool {
    name.starts_with("x-") || name.starts_with("y-")
}

// KMIP 2.x Vendor Attributes. KMIP 2.0/2.1 replace 1.x's Custom Attribute
// (`x-NAME`) by a Vendor Attribute: a structure of Vendor Identification,
// Attribute Name and Attribute Value, the identifications "x" and "y"
// being reserved for what 1.x called `x-` and `y-` attributes (KMIP 2.1,
// Vendor Attribute). The 2.x tag table gives the structure no tag of its own: inside
// an Attributes structure, a New/Current Attribute and a Get Attributes
// answer it is carried as an `Attribute` item (0x420008), and an Attribute
// Reference to it is a structure of Vendor Identification and Attribute
// Name. That is the encoding of the OASIS KMIP Profiles v2.1 test cases
// SASED-M-2-21 (Register with four `x` attributes) and SASED-M-3-21 (Get
// Attributes by vendor Attribute Reference, answered with the Attribute
// structure) at https://docs.oasis-open.org/kmip/kmip-profiles/v2.1/os/
// test-cases/kmip-v2.1/mandatory/.

/// The 1.x name (`x-NAME`) of a 2.x Vendor Attribute, or an error for a
/// vendor other than `x`/`y` (they have no 1.x form this server keeps).
pub fn vendor_attribute_name(vendor: &str, name: &str) -> Result<String, KmipError> {
    if !matches!(vendor, "x" | "y") {
        return Err(KmipError::FeatureNotSupported(format!(
            "vendor attributes of vendor {vendor:?} (only \"x\" and \"y\", the 1.x custom \
             attributes, are kept)"
        )));
    }
    if name.is_empty() {
        return Err(KmipError::InvalidField("an empty vendor Attribute Name".into()));
    }
    Ok(format!("{vendor}-{name}"))
}

/// The 2.x Vendor Identification and Attribute Name of a 1.x custom
/// attribute name (`x-NAME` gives `("x", "NAME")`).
#[must_use]
pub fn split_custom_attribute(name: &str) -> Option<(&str, &str)> {
    if !is_custom_attribute(name) {
        return None;
    }
    Some((&name[..1], &name[2..]))
}

/// A 2.x Vendor Attribute structure (any tag) as a 1.x [`Attribute`].
pub fn parse_vendor_attribute(item: &Item) -> Result<Attribute, KmipError> {
    let f = Fields::of(item)?;
    let vendor = f.required(Tag::VENDOR_IDENTIFICATION)?.as_text()?;
    let name = f.required(Tag::ATTRIBUTE_NAME)?.as_text()?;
    let value = f.required(Tag::ATTRIBUTE_VALUE)?;
    Ok(Attribute {
        name: vendor_attribute_name(vendor, name)?,
        index: None,
        value: Some(value.clone()),
    })
}

/// The 2.x Vendor Attribute (tagged `Attribute`) of a 1.x custom attribute.
#[must_use]
pub fn vendor_attribute_item(name: &str, value: &Item) -> Option<Item> {
    let (vendor, attribute) = split_custom_attribute(name)?;
    Some(Item::structure(
        Tag::ATTRIBUTE,
        vec![
            Item::text(Tag::VENDOR_IDENTIFICATION, vendor),
            Item::text(Tag::ATTRIBUTE_NAME, attribute),
            Item::new(Tag::ATTRIBUTE_VALUE, value.value.clone()),
        ],
    ))
}

/// The 2.x Attribute Reference of a 1.x attribute name: the attribute's
/// tag (an Enumeration), or for a custom attribute a structure of Vendor
/// Identification and Attribute Name.
#[must_use]
pub fn attribute_reference(name: &str) -> Option<Item> {
    if let Some(tag) = attribute_tag_of(name) {
        return Some(Item::enumeration(Tag::ATTRIBUTE_REFERENCE, tag.0));
    }
    let (vendor, attribute) = split_custom_attribute(name)?;
    Some(Item::structure(
        Tag::ATTRIBUTE_REFERENCE,
        vec![
            Item::text(Tag::VENDOR_IDENTIFICATION, vendor),
            Item::text(Tag::ATTRIBUTE_NAME, attribute),
        ],
    ))
}

/// The 1.x attribute name an Attribute Reference names.
pub fn parse_attribute_reference(item: &Item) -> Result<String, KmipError> {
    match &item.value {
        Value::Enumeration(t) => attribute_name_of(Tag(*t))
            .map(str::to_owned)
            .ok_or_else(|| KmipError::FeatureNotSupported(format!("attribute {}", Tag(*t)))),
        _ => {
            let f = Fields::of(item)?;
            let vendor = f.required(Tag::VENDOR_IDENTIFICATION)?.as_text()?;
            vendor_attribute_name(vendor, f.required(Tag::ATTRIBUTE_NAME)?.as_text()?)
        }
    }
}

/// One child of a 2.x Attributes (or New/Current Attribute) structure as
/// a 1.x [`Attribute`]: a Vendor Attribute, or a standard one by its tag.
fn attribute_2x(child: &Item) -> Result<Attribute, KmipError> {
    if child.tag == Tag::ATTRIBUTE {
        return parse_vendor_attribute(child);
    }
    let name = attribute_name_of(child.tag)
        .ok_or_else(|| KmipError::FeatureNotSupported(format!("attribute {}", child.tag)))?;
    Ok(Attribute {
        name: name.to_owned(),
        index: None,
        value: Some(Item::new(Tag::ATTRIBUTE_VALUE, child.value.clone())),
    })
}

impl AttributeSet {
    /// The attributes of a Template-Attribute (1.x: Template Names and
    /// Attribute items) or an Attributes structure (2.x).
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let mut out = Vec::new();
        // The 2.x shapes: Attributes, and Create Key Pair's Common,
        // Private Key and Public Key Attributes.
        if matches!(
            item.tag,
            Tag::ATTRIBUTES
                | Tag::COMMON_ATTRIBUTES
                | Tag::PRIVATE_KEY_ATTRIBUTES
                | Tag::PUBLIC_KEY_ATTRIBUTES
        ) {
            for child in f.items {
                out.push(attribute_2x(child)?);
            }
            return Ok(Self::of(out));
        }
        let mut templates = Vec::new();
        for n in f.all(Tag::NAME) {
            if templates.len() == MAX_TEMPLATE_NAMES {
                return Err(KmipError::InvalidField(format!(
                    "more than {MAX_TEMPLATE_NAMES} Template Names"
                )));
            }
            templates.push(Name::parse(n)?);
        }
        for a in f.all(Tag::ATTRIBUTE) {
            out.push(Attribute::parse(a)?);
        }
        Ok(Self { attributes: out, templates })
    }

    /// A set of attributes naming no Template.
    #[must_use]
    pub fn of(attributes: Vec<Attribute>) -> Self {
        Self { attributes, templates: Vec::new() }
    }

    /// Whether the set neither gives an attribute nor names a Template.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.attributes.is_empty() && self.templates.is_empty()
    }

    /// The values of every attribute called `name`.
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Item> + 'a {
        self.attributes.iter().filter(move |a| a.name == name).filter_map(|a| a.value.as_ref())
    }

    /// The one value of `name`, if present; more than one is an error.
    pub fn single(&self, name: &str) -> Result<Option<&Item>, KmipError> {
        let mut it =
            self.attributes.iter().filter(|a| a.name == name).filter_map(|a| a.value.as_ref());
        let first = it.next();
        if first.is_some() && it.next().is_some() {
            return Err(KmipError::InvalidField(format!("attribute {name} given more than once")));
        }
        Ok(first)
    }

    pub fn enum_value(&self, name: &str) -> Result<Option<u32>, KmipError> {
        Ok(self.single(name)?.map(Item::as_enum).transpose()?)
    }

    pub fn int_value(&self, name: &str) -> Result<Option<i32>, KmipError> {
        Ok(self.single(name)?.map(Item::as_int).transpose()?)
    }

    pub fn date_value(&self, name: &str) -> Result<Option<i64>, KmipError> {
        Ok(self.single(name)?.map(Item::as_date_time).transpose()?)
    }

    /// Every Name attribute.
    pub fn names(&self) -> Result<Vec<Name>, KmipError> {
        self.values("Name").map(Name::parse).collect()
    }
}

/// The Name attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub value: String,
    pub name_type: NameType,
}

impl Name {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        // Some clients send a bare Text String where 1.x wants a structure.
        if let Value::TextString(s) = &item.value {
            return Ok(Self { value: s.clone(), name_type: NameType::UNINTERPRETED_TEXT_STRING });
        }
        let f = Fields::of(item)?;
        Ok(Self {
            value: f.required(Tag::NAME_VALUE)?.as_text()?.to_owned(),
            name_type: f
                .optional(Tag::NAME_TYPE)?
                .map(Item::as_enum)
                .transpose()?
                .map_or(NameType::UNINTERPRETED_TEXT_STRING, NameType),
        })
    }

    #[must_use]
    pub fn to_value(&self, tag: Tag) -> Item {
        Item::structure(
            tag,
            vec![
                Item::text(Tag::NAME_VALUE, self.value.clone()),
                Item::enumeration(Tag::NAME_TYPE, self.name_type.0),
            ],
        )
    }
}

/// The Link attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub link_type: LinkType,
    pub linked_object: String,
}

impl Link {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        Ok(Self {
            link_type: LinkType(f.required(Tag::LINK_TYPE)?.as_enum()?),
            linked_object: f.required(Tag::LINKED_OBJECT_IDENTIFIER)?.as_text()?.to_owned(),
        })
    }

    #[must_use]
    pub fn to_value(&self, tag: Tag) -> Item {
        Item::structure(
            tag,
            vec![
                Item::enumeration(Tag::LINK_TYPE, self.link_type.0),
                Item::text(Tag::LINKED_OBJECT_IDENTIFIER, self.linked_object.clone()),
            ],
        )
    }
}

/// Cryptographic Parameters (the fields the profiles use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CryptographicParameters {
    pub block_cipher_mode: Option<BlockCipherMode>,
    pub padding_method: Option<PaddingMethod>,
    pub hashing_algorithm: Option<HashingAlgorithm>,
    pub cryptographic_algorithm: Option<CryptographicAlgorithm>,
    pub random_iv: Option<bool>,
    pub iv_length: Option<i32>,
    pub tag_length: Option<i32>,
    /// KMIP 2.x Initial Counter Value (ChaCha20's first block counter).
    pub initial_counter_value: Option<i32>,
    // Public-key operations (signatures, RSA padding).
    pub digital_signature_algorithm: Option<DigitalSignatureAlgorithm>,
    pub salt_length: Option<i32>,
    pub mask_generator: Option<MaskGenerator>,
    pub mask_generator_hashing_algorithm: Option<HashingAlgorithm>,
    pub p_source: Option<Vec<u8>>,
    pub trailer_field: Option<i32>,
}

/// Initial Counter Value (a field of KMIP 2.1 §4.16 Cryptographic Parameters).
const TAG_INITIAL_COUNTER_VALUE: Tag = Tag(0x42_00D1);

impl CryptographicParameters {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let e = |tag| f.optional(tag)?.map(Item::as_enum).transpose();
        let i = |tag| f.optional(tag)?.map(Item::as_int).transpose();
        Ok(Self {
            block_cipher_mode: e(Tag::BLOCK_CIPHER_MODE)?.map(BlockCipherMode),
            padding_method: e(Tag::PADDING_METHOD)?.map(PaddingMethod),
            hashing_algorithm: e(Tag::HASHING_ALGORITHM)?.map(HashingAlgorithm),
            cryptographic_algorithm: e(Tag::CRYPTOGRAPHIC_ALGORITHM)?.map(CryptographicAlgorithm),
            random_iv: f.optional(Tag::RANDOM_IV)?.map(Item::as_bool).transpose()?,
            iv_length: i(Tag::IV_LENGTH)?,
            tag_length: i(Tag::TAG_LENGTH)?,
            initial_counter_value: i(TAG_INITIAL_COUNTER_VALUE)?,
            digital_signature_algorithm: e(Tag::DIGITAL_SIGNATURE_ALGORITHM)?
                .map(DigitalSignatureAlgorithm),
            salt_length: i(Tag::SALT_LENGTH)?,
            mask_generator: e(Tag::MASK_GENERATOR)?.map(MaskGenerator),
            mask_generator_hashing_algorithm: e(Tag::MASK_GENERATOR_HASHING_ALGORITHM)?
                .map(HashingAlgorithm),
            p_source: f
                .optional(Tag::P_SOURCE)?
                .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                .transpose()?,
            trailer_field: i(Tag::TRAILER_FIELD)?,
        })
    }

    /// These parameters, each field not given taken from `defaults` (a
    /// key's Cryptographic Parameters attribute: KMIP 1.4 §4.29, §4.30).
    #[must_use]
    pub fn or(self, defaults: &Self) -> Self {
        Self {
            block_cipher_mode: self.block_cipher_mode.or(defaults.block_cipher_mode),
            padding_method: self.padding_method.or(defaults.padding_method),
            hashing_algorithm: self.hashing_algorithm.or(defaults.hashing_algorithm),
            cryptographic_algorithm: self
                .cryptographic_algorithm
                .or(defaults.cryptographic_algorithm),
            random_iv: self.random_iv.or(defaults.random_iv),
            iv_length: self.iv_length.or(defaults.iv_length),
            tag_length: self.tag_length.or(defaults.tag_length),
            initial_counter_value: self.initial_counter_value.or(defaults.initial_counter_value),
            digital_signature_algorithm: self
                .digital_signature_algorithm
                .or(defaults.digital_signature_algorithm),
            salt_length: self.salt_length.or(defaults.salt_length),
            mask_generator: self.mask_generator.or(defaults.mask_generator),
            mask_generator_hashing_algorithm: self
                .mask_generator_hashing_algorithm
                .or(defaults.mask_generator_hashing_algorithm),
            p_source: self.p_source.or_else(|| defaults.p_source.clone()),
            trailer_field: self.trailer_field.or(defaults.trailer_field),
        }
    }
}

/// A Key Block: key material as a Byte String (Raw, Opaque, PKCS#1,
/// PKCS#8, X.509), a Transparent Symmetric Key's Key, or the integers of
/// a transparent RSA key; unwrapped or wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBlock {
    pub format: KeyFormatType,
    /// The key's bytes (empty for a transparent RSA key).
    pub material: Bytes,
    /// A transparent RSA key's integers (magnitudes) by tag; else empty.
    pub integers: Vec<(Tag, Bytes)>,
    pub algorithm: Option<CryptographicAlgorithm>,
    pub length: Option<i32>,
    /// Present when the material is wrapped.
    pub wrapping: Option<KeyWrappingData>,
}

impl KeyBlock {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let format = KeyFormatType(f.required(Tag::KEY_FORMAT_TYPE)?.as_enum()?);
        if f.optional(Tag::KEY_COMPRESSION_TYPE)?.is_some() {
            return Err(KmipError::KeyCompressionTypeNotSupported);
        }
        let value = f.required(Tag::KEY_VALUE)?;
        let mut integers = Vec::new();
        let material = match &value.value {
            // A wrapped key's Key Value is a Byte String.
            Value::ByteString(b) => b.clone(),
            Value::Structure(_) => {
                let v = Fields::of(value)?;
                let m = v.required(Tag::KEY_MATERIAL)?;
                match &m.value {
                    Value::ByteString(b) => b.clone(),
                    Value::Structure(_) if is_transparent_integers(format) => {
                        integers = parse_transparent(m, format)?;
                        Bytes::default()
                    }
                    // Transparent Symmetric Key: a structure holding Key.
                    Value::Structure(_) => {
                        Bytes::from(Fields::of(m)?.required(Tag::KEY)?.as_bytes()?)
                    }
                    _ => {
                        return Err(KmipError::InvalidField("Key Material".into()));
                    }
                }
            }
            _ => return Err(KmipError::InvalidField("Key Value".into())),
        };
        Ok(Self {
            format,
            material,
            integers,
            algorithm: f
                .optional(Tag::CRYPTOGRAPHIC_ALGORITHM)?
                .map(Item::as_enum)
                .transpose()?
                .map(CryptographicAlgorithm),
            length: f.optional(Tag::CRYPTOGRAPHIC_LENGTH)?.map(Item::as_int).transpose()?,
            wrapping: f
                .optional(Tag::KEY_WRAPPING_DATA)?
                .map(KeyWrappingData::parse)
                .transpose()?,
        })
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        let mut items = vec![Item::enumeration(Tag::KEY_FORMAT_TYPE, self.format.0)];
        if self.wrapping.is_some() {
            items.push(Item::bytes(Tag::KEY_VALUE, self.material.as_slice()));
        } else if !self.integers.is_empty() {
            items.push(Item::structure(Tag::KEY_VALUE, vec![transparent_item(&self.integers)]));
        } else if self.format == KeyFormatType::TRANSPARENT_SYMMETRIC_KEY {
            let key = Item::bytes(Tag::KEY, self.material.as_slice());
            let material = Item::structure(Tag::KEY_MATERIAL, vec![key]);
            items.push(Item::structure(Tag::KEY_VALUE, vec![material]));
        } else {
            items.push(Item::structure(
                Tag::KEY_VALUE,
                vec![Item::bytes(Tag::KEY_MATERIAL, self.material.as_slice())],
            ));
        }
        if let Some(a) = self.algorithm {
            items.push(Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, a.0));
        }
        if let Some(l) = self.length {
            items.push(Item::int(Tag::CRYPTOGRAPHIC_LENGTH, l));
        }
        if let Some(w) = &self.wrapping {
            items.push(w.to_item());
        }
        Item::structure(Tag::KEY_BLOCK, items)
    }
}

/// Key Wrapping Data: how a wrapped Key Block was wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWrappingData {
    pub method: WrappingMethod,
    pub encryption_key: Option<String>,
    pub parameters: Option<CryptographicParameters>,
    pub iv_counter_nonce: Option<Vec<u8>>,
}

impl KeyWrappingData {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let (encryption_key, parameters) = encryption_key_information(&f)?;
        Ok(Self {
            method: WrappingMethod(f.required(Tag::WRAPPING_METHOD)?.as_enum()?),
            encryption_key,
            parameters,
            iv_counter_nonce: f
                .optional(Tag::IV_COUNTER_NONCE)?
                .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                .transpose()?,
        })
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        let mut items = vec![Item::enumeration(Tag::WRAPPING_METHOD, self.method.0)];
        if let Some(uid) = &self.encryption_key {
            let mut info = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone())];
            if let Some(p) = &self.parameters {
                let mut params = Vec::new();
                if let Some(m) = p.block_cipher_mode {
                    params.push(Item::enumeration(Tag::BLOCK_CIPHER_MODE, m.0));
                }
                info.push(Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, params));
            }
            items.push(Item::structure(Tag::ENCRYPTION_KEY_INFORMATION, info));
        }
        if let Some(iv) = &self.iv_counter_nonce {
            items.push(Item::bytes(Tag::IV_COUNTER_NONCE, iv));
        }
        Item::structure(Tag::KEY_WRAPPING_DATA, items)
    }
}

fn encryption_key_information(
    f: &Fields<'_>,
) -> Result<(Option<String>, Option<CryptographicParameters>), KmipError> {
    if f.optional(Tag::MAC_SIGNATURE_KEY_INFORMATION)?.is_some() {
        return Err(KmipError::FeatureNotSupported("MAC/signature key wrapping".into()));
    }
    let Some(info) = f.optional(Tag::ENCRYPTION_KEY_INFORMATION)? else {
        return Ok((None, None));
    };
    let i = Fields::of(info)?;
    Ok((
        Some(i.required(Tag::UNIQUE_IDENTIFIER)?.as_text()?.to_owned()),
        i.optional(Tag::CRYPTOGRAPHIC_PARAMETERS)?
            .map(CryptographicParameters::parse)
            .transpose()?,
    ))
}

/// Key Wrapping Specification of a Get request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWrappingSpecification {
    pub method: WrappingMethod,
    pub encryption_key: String,
    pub parameters: Option<CryptographicParameters>,
}

impl KeyWrappingSpecification {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let method = WrappingMethod(f.required(Tag::WRAPPING_METHOD)?.as_enum()?);
        let (key, parameters) = encryption_key_information(&f)?;
        Ok(Self {
            method,
            encryption_key: key.ok_or(TtlvError::Missing {
                tag: Tag::ENCRYPTION_KEY_INFORMATION,
                within: Tag::KEY_WRAPPING_SPECIFICATION,
            })?,
            parameters,
        })
    }
}

/// A managed object as Register sends and Get returns it (KMIP 1.4
/// §2.2; PGP Keys are not supported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagedObject {
    /// A KMIP 1.x Template (§2.2.6): the attributes it gives the objects
    /// a request names it for.
    Template(Vec<Attribute>),
    SymmetricKey(KeyBlock),
    SecretData {
        data_type: SecretDataType,
        block: KeyBlock,
    },
    PrivateKey(KeyBlock),
    PublicKey(KeyBlock),
    SplitKey {
        fields: SplitKeyFields,
        block: KeyBlock,
    },
    Certificate(Certificate),
    OpaqueObject(OpaqueObject),
}

impl ManagedObject {
    #[must_use]
    pub fn object_type(&self) -> ObjectType {
        match self {
            Self::SymmetricKey(_) => ObjectType::SYMMETRIC_KEY,
            Self::SecretData { .. } => ObjectType::SECRET_DATA,
            Self::PrivateKey(_) => ObjectType::PRIVATE_KEY,
            Self::PublicKey(_) => ObjectType::PUBLIC_KEY,
            Self::SplitKey { .. } => ObjectType::SPLIT_KEY,
            Self::Certificate(_) => ObjectType::CERTIFICATE,
            Self::OpaqueObject(_) => ObjectType::OPAQUE_OBJECT,
            Self::Template(_) => ObjectType::TEMPLATE,
        }
    }

    /// The Key Block, for the object types that have one.
    #[must_use]
    pub fn key_block(&self) -> Option<&KeyBlock> {
        match self {
            Self::SymmetricKey(b)
            | Self::PrivateKey(b)
            | Self::PublicKey(b)
            | Self::SecretData { block: b, .. }
            | Self::SplitKey { block: b, .. } => Some(b),
            Self::Certificate(_) | Self::OpaqueObject(_) | Self::Template(_) => None,
        }
    }

    /// The object of `object_type` among a payload's fields.
    pub fn parse(object_type: ObjectType, f: &Fields<'_>) -> Result<Self, KmipError> {
        let block = |tag| -> Result<KeyBlock, KmipError> {
            KeyBlock::parse(Fields::of(f.required(tag)?)?.required(Tag::KEY_BLOCK)?)
        };
        match object_type {
            ObjectType::SYMMETRIC_KEY => Ok(Self::SymmetricKey(block(Tag::SYMMETRIC_KEY)?)),
            ObjectType::SECRET_DATA => {
                let o = Fields::of(f.required(Tag::SECRET_DATA)?)?;
                Ok(Self::SecretData {
                    data_type: SecretDataType(o.required(Tag::SECRET_DATA_TYPE)?.as_enum()?),
                    block: KeyBlock::parse(o.required(Tag::KEY_BLOCK)?)?,
                })
            }
            ObjectType::PRIVATE_KEY => Ok(Self::PrivateKey(block(Tag::PRIVATE_KEY)?)),
            ObjectType::PUBLIC_KEY => Ok(Self::PublicKey(block(Tag::PUBLIC_KEY)?)),
            ObjectType::SPLIT_KEY => {
                let o = Fields::of(f.required(Tag::SPLIT_KEY)?)?;
                Ok(Self::SplitKey {
                    fields: SplitKeyFields::parse(&o)?,
                    block: KeyBlock::parse(o.required(Tag::KEY_BLOCK)?)?,
                })
            }
            ObjectType::CERTIFICATE => {
                Ok(Self::Certificate(Certificate::parse(f.required(Tag::CERTIFICATE)?)?))
            }
            ObjectType::OPAQUE_OBJECT => {
                Ok(Self::OpaqueObject(OpaqueObject::parse(f.required(Tag::OPAQUE_OBJECT)?)?))
            }
            ObjectType::TEMPLATE => {
                let t = Fields::of(f.required(Tag::TEMPLATE)?)?;
                let attributes =
                    t.all(Tag::ATTRIBUTE).map(Attribute::parse).collect::<Result<Vec<_>, _>>()?;
                // §2.2.6: at least one Attribute.
                if attributes.is_empty() {
                    return Err(
                        TtlvError::Missing { tag: Tag::ATTRIBUTE, within: Tag::TEMPLATE }.into()
                    );
                }
                Ok(Self::Template(attributes))
            }
            other => Err(KmipError::FeatureNotSupported(format!("object type {other}"))),
        }
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        match self {
            Self::SymmetricKey(b) => Item::structure(Tag::SYMMETRIC_KEY, vec![b.to_item()]),
            Self::PrivateKey(b) => Item::structure(Tag::PRIVATE_KEY, vec![b.to_item()]),
            Self::PublicKey(b) => Item::structure(Tag::PUBLIC_KEY, vec![b.to_item()]),
            Self::SecretData { data_type, block } => Item::structure(
                Tag::SECRET_DATA,
                vec![Item::enumeration(Tag::SECRET_DATA_TYPE, data_type.0), block.to_item()],
            ),
            Self::SplitKey { fields, block } => {
                let mut items = fields.items();
                items.push(block.to_item());
                Item::structure(Tag::SPLIT_KEY, items)
            }
            Self::Certificate(c) => c.to_item(),
            Self::OpaqueObject(o) => o.to_item(),
            Self::Template(attributes) => {
                Item::structure(Tag::TEMPLATE, attributes.iter().map(Attribute::to_item).collect())
            }
        }
    }
}

fn uid(f: &Fields<'_>) -> Result<Option<String>, KmipError> {
    Ok(f.optional(Tag::UNIQUE_IDENTIFIER)?.map(|i| i.as_text().map(str::to_owned)).transpose()?)
}

fn template(f: &Fields<'_>) -> Result<AttributeSet, KmipError> {
    match (f.optional(Tag::TEMPLATE_ATTRIBUTE)?, f.optional(Tag::ATTRIBUTES)?) {
        (Some(t), None) | (None, Some(t)) => AttributeSet::parse(t),
        (None, None) => Ok(AttributeSet::default()),
        (Some(_), Some(_)) => {
            Err(KmipError::InvalidField("both Template-Attribute and Attributes".into()))
        }
    }
}

fn bytes_field(f: &Fields<'_>, tag: Tag) -> Result<Option<Bytes>, KmipError> {
    Ok(f.optional(tag)?.map(|i| i.as_bytes().map(Bytes::from)).transpose()?)
}

/// Create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    pub object_type: ObjectType,
    pub attributes: AttributeSet,
}

impl CreateRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        Ok(Self {
            object_type: ObjectType(f.required(Tag::OBJECT_TYPE)?.as_enum()?),
            attributes: template(&f)?,
        })
    }
}

/// Derive Key (KMIP 1.4 §4.6, 2.1 §6.1.13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeriveKeyRequest {
    pub object_type: ObjectType,
    /// The objects to derive from (at least one; never the ID Placeholder).
    pub unique_identifiers: Vec<String>,
    pub method: DerivationMethod,
    pub parameters: Option<CryptographicParameters>,
    pub iv: Option<Bytes>,
    pub data: Option<Bytes>,
    pub salt: Option<Bytes>,
    pub iteration_count: Option<i32>,
    pub attributes: AttributeSet,
}

impl DeriveKeyRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let unique_identifiers = f
            .all(Tag::UNIQUE_IDENTIFIER)
            .map(|i| i.as_text().map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()?;
        if unique_identifiers.is_empty() {
            return Err(KmipError::MissingData("the Unique Identifier to derive from".into()));
        }
        let p = Fields::of(f.required(Tag::DERIVATION_PARAMETERS)?)?;
        Ok(Self {
            object_type: ObjectType(f.required(Tag::OBJECT_TYPE)?.as_enum()?),
            unique_identifiers,
            method: DerivationMethod(f.required(Tag::DERIVATION_METHOD)?.as_enum()?),
            parameters: p
                .optional(Tag::CRYPTOGRAPHIC_PARAMETERS)?
                .map(CryptographicParameters::parse)
                .transpose()?,
            iv: bytes_field(&p, Tag::INITIALIZATION_VECTOR)?,
            data: bytes_field(&p, Tag::DERIVATION_DATA)?,
            salt: bytes_field(&p, Tag::SALT)?,
            iteration_count: p.optional(Tag::ITERATION_COUNT)?.map(Item::as_int).transpose()?,
            attributes: template(&f)?,
        })
    }
}

/// Create Split Key (KMIP 1.4 §4.38, 2.1 §6.1.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSplitKeyRequest {
    pub object_type: ObjectType,
    /// The key to split; `None`: the server makes one to split.
    pub unique_identifier: Option<String>,
    pub parts: i32,
    pub threshold: i32,
    pub method: SplitKeyMethod,
    /// Polynomial Sharing Prime Field: the prime, as the wire's Big Integer.
    pub prime_field_size: Option<Vec<u8>>,
    pub attributes: AttributeSet,
}

impl CreateSplitKeyRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let parts = f.required(Tag::SPLIT_KEY_PARTS)?.as_int()?;
        let threshold = f.required(Tag::SPLIT_KEY_THRESHOLD)?.as_int()?;
        if !(1..=MAX_SPLIT_KEY_PARTS).contains(&parts) || !(1..=parts).contains(&threshold) {
            return Err(KmipError::InvalidField(format!(
                "Split Key Parts of 1 to {MAX_SPLIT_KEY_PARTS} and a Split Key Threshold of 1 \
                 to the parts, not {parts} and {threshold}"
            )));
        }
        let prime_field_size = match f.optional(Tag::PRIME_FIELD_SIZE)? {
            None => None,
            Some(p) => match &p.value {
                Value::BigInteger(b) => Some(b.clone()),
                _ => return Err(KmipError::InvalidField("Prime Field Size".into())),
            },
        };
        Ok(Self {
            object_type: ObjectType(f.required(Tag::OBJECT_TYPE)?.as_enum()?),
            unique_identifier: uid(&f)?,
            parts,
            threshold,
            method: SplitKeyMethod(f.required(Tag::SPLIT_KEY_METHOD)?.as_enum()?),
            prime_field_size,
            attributes: template(&f)?,
        })
    }
}

/// Join Split Key (KMIP 1.4 §4.39, 2.1 §6.1.27).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSplitKeyRequest {
    pub object_type: ObjectType,
    /// The parts to join (at least one, at most [`MAX_SPLIT_KEY_PARTS`]).
    pub unique_identifiers: Vec<String>,
    pub secret_data_type: Option<SecretDataType>,
    pub attributes: AttributeSet,
}

impl JoinSplitKeyRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let mut unique_identifiers = Vec::new();
        for i in f.all(Tag::UNIQUE_IDENTIFIER) {
            if unique_identifiers.len() == usize::try_from(MAX_SPLIT_KEY_PARTS).unwrap_or(0) {
                return Err(KmipError::InvalidField(format!(
                    "more than {MAX_SPLIT_KEY_PARTS} split key parts"
                )));
            }
            unique_identifiers.push(i.as_text()?.to_owned());
        }
        if unique_identifiers.is_empty() {
            return Err(KmipError::MissingData("the Unique Identifiers of the parts".into()));
        }
        Ok(Self {
            object_type: ObjectType(f.required(Tag::OBJECT_TYPE)?.as_enum()?),
            unique_identifiers,
            secret_data_type: f
                .optional(Tag::SECRET_DATA_TYPE)?
                .map(Item::as_enum)
                .transpose()?
                .map(SecretDataType),
            attributes: template(&f)?,
        })
    }
}

/// Adjustment Type (KMIP 2.1 §11.1).
const TAG_ADJUSTMENT_TYPE: Tag = Tag(0x42_0158);
/// Adjustment Value (KMIP 2.1 §6.1.3).
const TAG_ADJUSTMENT_VALUE: Tag = Tag(0x42_0162);

/// Adjust Attribute (KMIP 2.1 §6.1.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdjustAttributeRequest {
    pub unique_identifier: Option<String>,
    /// The attribute adjusted, by its 1.x name.
    pub attribute: String,
    pub adjustment: AdjustmentType,
    /// The amount (absent: one unit of the attribute's type).
    pub value: Option<Item>,
}

impl AdjustAttributeRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        Ok(Self {
            unique_identifier: uid(&f)?,
            attribute: parse_attribute_reference(f.required(Tag::ATTRIBUTE_REFERENCE)?)?,
            adjustment: AdjustmentType(f.required(TAG_ADJUSTMENT_TYPE)?.as_enum()?),
            value: f.optional(TAG_ADJUSTMENT_VALUE)?.cloned(),
        })
    }
}

/// Register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterRequest {
    pub attributes: AttributeSet,
    pub object: ManagedObject,
}

impl RegisterRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let object_type = ObjectType(f.required(Tag::OBJECT_TYPE)?.as_enum()?);
        Ok(Self { attributes: template(&f)?, object: ManagedObject::parse(object_type, &f)? })
    }
}

/// Create Key Pair (KMIP 1.4 §4.2, 2.1 §6.1.4): the attributes common to
/// both keys and those of each, as 1.x Template-Attributes or 2.x
/// Attributes structures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateKeyPairRequest {
    pub common: AttributeSet,
    pub private: AttributeSet,
    pub public: AttributeSet,
}

impl CreateKeyPairRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        pair_sets(&Fields::of(payload)?)
    }
}

/// The common, private-key and public-key attributes of Create Key Pair
/// and Re-key Key Pair, each as a 1.x Template-Attribute or a 2.x
/// Attributes structure (never both).
fn pair_sets(f: &Fields<'_>) -> Result<CreateKeyPairRequest, KmipError> {
    let set = |one: Tag, two: Tag| -> Result<AttributeSet, KmipError> {
        match (f.optional(one)?, f.optional(two)?) {
            (Some(t), None) | (None, Some(t)) => AttributeSet::parse(t),
            (None, None) => Ok(AttributeSet::default()),
            (Some(_), Some(_)) => Err(KmipError::InvalidField(format!("both {one} and {two}"))),
        }
    };
    Ok(CreateKeyPairRequest {
        common: set(Tag::COMMON_TEMPLATE_ATTRIBUTE, Tag::COMMON_ATTRIBUTES)?,
        private: set(Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE, Tag::PRIVATE_KEY_ATTRIBUTES)?,
        public: set(Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE, Tag::PUBLIC_KEY_ATTRIBUTES)?,
    })
}

/// Re-key Key Pair (KMIP 1.4 §4.5, 2.1 §6.1.47): the private key of the
/// pair to replace (`None`: the ID Placeholder), the Offset, and the
/// attributes the new pair takes instead of the old one's, as Create Key
/// Pair gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReKeyKeyPairRequest {
    pub private_key_unique_identifier: Option<String>,
    /// Seconds between the new pair's Initial Date and Activation Date.
    pub offset: Option<u32>,
    pub attributes: CreateKeyPairRequest,
}

impl ReKeyKeyPairRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        Ok(Self {
            private_key_unique_identifier: f
                .optional(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER)?
                .map(|i| i.as_text().map(str::to_owned))
                .transpose()?,
            offset: f.optional(Tag::OFFSET)?.map(Item::as_interval).transpose()?,
            attributes: pair_sets(&f)?,
        })
    }
}

/// Largest Certificate Request taken (a PKCS#10 request of an RSA-4096
/// key with many extensions is a few kilobytes).
pub const MAX_CERTIFICATE_REQUEST: usize = 16 * 1024;

/// Certify and Re-certify (KMIP 1.4 §4.7, §4.8; 2.1 §6.1.6, §6.1.45):
/// the public key (Certify) or certificate (Re-certify) named, the
/// certificate request and its type, the Offset (Re-certify) and the new
/// certificate's attributes. KMIP 1.x carries the request as Certificate
/// Request, 2.x as Certificate Request Value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertifyRequest {
    /// `None`: the ID Placeholder.
    pub unique_identifier: Option<String>,
    pub request: Option<(CertificateRequestType, Bytes)>,
    /// Seconds between the new certificate's Initial Date and Activation
    /// Date.
    pub offset: Option<u32>,
    pub attributes: AttributeSet,
}

impl CertifyRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        if f.optional(Tag::CERTIFICATE_REQUEST_UNIQUE_IDENTIFIER)?.is_some() {
            return Err(KmipError::FeatureNotSupported(
                "a Certificate Request Unique Identifier (send the request itself)".into(),
            ));
        }
        let value = match (
            f.optional(Tag::CERTIFICATE_REQUEST)?,
            f.optional(Tag::CERTIFICATE_REQUEST_VALUE)?,
        ) {
            (Some(v), None) | (None, Some(v)) => Some(v.as_bytes()?),
            (None, None) => None,
            (Some(_), Some(_)) => {
                return Err(KmipError::InvalidField(
                    "both Certificate Request and Certificate Request Value".into(),
                ))
            }
        };
        let kind = f
            .optional(Tag::CERTIFICATE_REQUEST_TYPE)?
            .map(|i| i.as_enum().map(CertificateRequestType))
            .transpose()?;
        let request = match (kind, value) {
            (Some(kind), Some(value)) => {
                if value.is_empty() || value.len() > MAX_CERTIFICATE_REQUEST {
                    return Err(KmipError::InvalidField(format!(
                        "a Certificate Request must be 1 to {MAX_CERTIFICATE_REQUEST} bytes"
                    )));
                }
                Some((kind, Bytes::from(value)))
            }
            (None, None) => None,
            // KMIP 1.4 §11.1: a field the others make necessary is missing.
            (None, Some(_)) => {
                return Err(KmipError::InvalidMessage(
                    "a Certificate Request without its Certificate Request Type".into(),
                ))
            }
            (Some(_), None) => {
                return Err(KmipError::InvalidMessage(
                    "a Certificate Request Type without a Certificate Request".into(),
                ))
            }
        };
        Ok(Self {
            unique_identifier: uid(&f)?,
            request,
            offset: f.optional(Tag::OFFSET)?.map(Item::as_interval).transpose()?,
            attributes: template(&f)?,
        })
    }
}

/// Get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetRequest {
    /// `None`: the ID Placeholder.
    pub unique_identifier: Option<String>,
    pub key_format_type: Option<KeyFormatType>,
    pub wrapping: Option<KeyWrappingSpecification>,
}

impl GetRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        if f.optional(Tag::KEY_COMPRESSION_TYPE)?.is_some() {
            return Err(KmipError::KeyCompressionTypeNotSupported);
        }
        Ok(Self {
            unique_identifier: uid(&f)?,
            key_format_type: f
                .optional(Tag::KEY_FORMAT_TYPE)?
                .map(Item::as_enum)
                .transpose()?
                .map(KeyFormatType),
            wrapping: f
                .optional(Tag::KEY_WRAPPING_SPECIFICATION)?
                .map(KeyWrappingSpecification::parse)
                .transpose()?,
        })
    }
}

/// Operations that name one object and nothing else (Activate, Destroy,
/// Get Attribute List), or that name attributes (Get Attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRequest {
    pub unique_identifier: Option<String>,
    /// Attribute Names (Get Attributes; 1.x) or Attribute References (2.x).
    pub attribute_names: Vec<String>,
}

impl ObjectRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let mut attribute_names = Vec::new();
        for n in f.all(Tag::ATTRIBUTE_NAME) {
            attribute_names.push(n.as_text()?.to_owned());
        }
        for r in f.all(Tag::ATTRIBUTE_REFERENCE) {
            attribute_names.push(parse_attribute_reference(r)?);
        }
        Ok(Self { unique_identifier: uid(&f)?, attribute_names })
    }
}

/// Add Attribute, Modify Attribute, Delete Attribute (1.x shapes, and the
/// 2.x New Attribute / Current Attribute / Attribute Reference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeChangeRequest {
    pub unique_identifier: Option<String>,
    pub attribute: Attribute,
    /// 2.x Modify: the value being replaced.
    pub current: Option<Item>,
}

impl AttributeChangeRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let unique_identifier = uid(&f)?;
        if let Some(a) = f.optional(Tag::ATTRIBUTE)? {
            return Ok(Self { unique_identifier, attribute: Attribute::parse(a)?, current: None });
        }
        // Delete Attribute in 1.x: Attribute Name and Attribute Index.
        if let Some(n) = f.optional(Tag::ATTRIBUTE_NAME)? {
            return Ok(Self {
                unique_identifier,
                attribute: Attribute {
                    name: n.as_text()?.to_owned(),
                    index: f.optional(Tag::ATTRIBUTE_INDEX)?.map(Item::as_int).transpose()?,
                    value: None,
                },
                current: None,
            });
        }
        let from_2x = |item: &Item| -> Result<Attribute, KmipError> {
            let child =
                item.children()?.first().ok_or(KmipError::MissingData("attribute value".into()))?;
            attribute_2x(child)
        };
        let current = f.optional(Tag::CURRENT_ATTRIBUTE)?.map(from_2x).transpose()?;
        if let Some(new) = f.optional(Tag::NEW_ATTRIBUTE)? {
            return Ok(Self {
                unique_identifier,
                attribute: from_2x(new)?,
                current: current.and_then(|c| c.value),
            });
        }
        if let Some(c) = current {
            return Ok(Self { unique_identifier, attribute: c, current: None });
        }
        // 2.x Delete Attribute by Attribute Reference: the first value.
        if let Some(r) = f.optional(Tag::ATTRIBUTE_REFERENCE)? {
            return Ok(Self {
                unique_identifier,
                attribute: Attribute {
                    name: parse_attribute_reference(r)?,
                    index: None,
                    value: None,
                },
                current: None,
            });
        }
        Err(TtlvError::Missing { tag: Tag::ATTRIBUTE, within: payload.tag }.into())
    }
}

/// Locate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocateRequest {
    pub maximum_items: Option<i32>,
    pub offset_items: Option<i32>,
    /// Storage Status Mask (KMIP 1.4 §9.1.3.3.2, 2.1 §11.x): which of
    /// on-line (1), archived (2) and destroyed (4) objects are searched.
    pub storage_status_mask: Option<i32>,
    pub attributes: AttributeSet,
}

impl LocateRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let attributes = match f.optional(Tag::ATTRIBUTES)? {
            Some(a) => AttributeSet::parse(a)?,
            None => AttributeSet::of(
                f.all(Tag::ATTRIBUTE).map(Attribute::parse).collect::<Result<_, _>>()?,
            ),
        };
        let int = |tag| f.optional(tag)?.map(Item::as_int).transpose();
        Ok(Self {
            maximum_items: int(Tag::MAXIMUM_ITEMS)?,
            offset_items: int(Tag::OFFSET_ITEMS)?,
            storage_status_mask: int(Tag(0x42008E))?,
            attributes,
        })
    }
}

/// Revoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeRequest {
    pub unique_identifier: Option<String>,
    pub reason: RevocationReasonCode,
    pub message: Option<String>,
    pub compromise_occurrence_date: Option<i64>,
}

impl RevokeRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let r = Fields::of(f.required(Tag::REVOCATION_REASON)?)?;
        Ok(Self {
            unique_identifier: uid(&f)?,
            reason: RevocationReasonCode(r.required(Tag::REVOCATION_REASON_CODE)?.as_enum()?),
            message: r
                .optional(Tag::REVOCATION_MESSAGE)?
                .map(|i| i.as_text().map(str::to_owned))
                .transpose()?,
            compromise_occurrence_date: f
                .optional(Tag::COMPROMISE_OCCURRENCE_DATE)?
                .map(Item::as_date_time)
                .transpose()?,
        })
    }
}

/// Re-key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReKeyRequest {
    pub unique_identifier: Option<String>,
    /// Seconds between the new key's Initialization Date and Activation Date.
    pub offset: Option<u32>,
    pub attributes: AttributeSet,
}

impl ReKeyRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        Ok(Self {
            unique_identifier: uid(&f)?,
            offset: f.optional(Tag::OFFSET)?.map(Item::as_interval).transpose()?,
            attributes: template(&f)?,
        })
    }
}

/// Encrypt and Decrypt: single-part, or one part of a stream (KMIP 1.4
/// §4.29, §4.30: the first part carries Init Indicator and the additional
/// data, later ones the Correlation Value, the last Final Indicator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CryptoRequest {
    pub unique_identifier: Option<String>,
    pub parameters: Option<CryptographicParameters>,
    /// Empty when a part of a stream carries none.
    pub data: Bytes,
    pub iv_counter_nonce: Option<Vec<u8>>,
    pub aad: Option<Vec<u8>>,
    /// Decrypt with an authenticated mode: the tag to check.
    pub tag: Option<Vec<u8>>,
    pub correlation_value: Option<Vec<u8>>,
    pub init: bool,
    pub last: bool,
}

impl CryptoRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let vec = |tag| -> Result<Option<Vec<u8>>, KmipError> {
            Ok(f.optional(tag)?.map(|i| i.as_bytes().map(<[u8]>::to_vec)).transpose()?)
        };
        let flag = |tag| -> Result<bool, KmipError> {
            Ok(f.optional(tag)?.map(Item::as_bool).transpose()?.unwrap_or(false))
        };
        let correlation_value = vec(Tag::CORRELATION_VALUE)?;
        let init = flag(Tag::INIT_INDICATOR)?;
        let last = flag(Tag::FINAL_INDICATOR)?;
        let streamed = correlation_value.is_some() || init;
        // Data is required of a single-part operation only.
        let data = match bytes_field(&f, Tag::DATA)? {
            Some(d) => d,
            None if streamed => Bytes::from(&[][..]),
            None => return Err(TtlvError::Missing { tag: Tag::DATA, within: payload.tag }.into()),
        };
        Ok(Self {
            unique_identifier: uid(&f)?,
            parameters: f
                .optional(Tag::CRYPTOGRAPHIC_PARAMETERS)?
                .map(CryptographicParameters::parse)
                .transpose()?,
            data,
            iv_counter_nonce: vec(Tag::IV_COUNTER_NONCE)?,
            aad: vec(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA)?,
            tag: vec(Tag::AUTHENTICATED_ENCRYPTION_TAG)?,
            correlation_value,
            init,
            last,
        })
    }

    /// Whether this request is one part of a stream rather than a whole
    /// single-part operation.
    #[must_use]
    pub fn is_streamed(&self) -> bool {
        self.correlation_value.is_some() || (self.init && !self.last)
    }
}

/// Hash, MAC and MAC Verify: single-part, or one part of a stream (KMIP
/// 1.4 §4.33, §4.34, §4.37, and the same operations of KMIP 2.1 §6.1), where
/// the first part carries Init Indicator, later ones the Correlation Value
/// the server returned, and the last Final Indicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    pub unique_identifier: Option<String>,
    pub parameters: Option<CryptographicParameters>,
    pub data: Option<Bytes>,
    /// MAC Verify: the MAC to check.
    pub mac_data: Option<Vec<u8>>,
    pub correlation_value: Option<Vec<u8>>,
    pub init: bool,
    pub last: bool,
}

impl StreamRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        let flag = |tag| -> Result<bool, KmipError> {
            Ok(f.optional(tag)?.map(Item::as_bool).transpose()?.unwrap_or(false))
        };
        Ok(Self {
            unique_identifier: uid(&f)?,
            parameters: f
                .optional(Tag::CRYPTOGRAPHIC_PARAMETERS)?
                .map(CryptographicParameters::parse)
                .transpose()?,
            data: bytes_field(&f, Tag::DATA)?,
            mac_data: f
                .optional(Tag::MAC_DATA)?
                .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                .transpose()?,
            correlation_value: f
                .optional(Tag::CORRELATION_VALUE)?
                .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                .transpose()?,
            init: flag(Tag::INIT_INDICATOR)?,
            last: flag(Tag::FINAL_INDICATOR)?,
        })
    }

    /// Whether this request is one part of a stream rather than a whole
    /// single-part operation.
    #[must_use]
    pub fn is_streamed(&self) -> bool {
        self.correlation_value.is_some() || (self.init && !self.last)
    }
}

/// Sign and Signature Verify (KMIP 1.4 §4.31, §4.32; 2.1 §6.1.55,
/// §6.1.56), single-part: the data to sign or whose signature to check,
/// or its digest (Digested Data, KMIP 1.4 onwards), and for Verify the
/// signature. A streamed request (Init Indicator, Final Indicator or
/// Correlation Value) is refused here, since no profile case streams a
/// signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignRequest {
    pub unique_identifier: Option<String>,
    pub parameters: Option<CryptographicParameters>,
    pub data: Option<Bytes>,
    pub digested_data: Option<Bytes>,
    /// Signature Verify: the signature to check.
    pub signature: Option<Vec<u8>>,
}

impl SignRequest {
    pub fn parse(payload: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(payload)?;
        for streaming in [Tag::CORRELATION_VALUE, Tag::INIT_INDICATOR, Tag::FINAL_INDICATOR] {
            if f.optional(streaming)?.is_some() {
                return Err(KmipError::FeatureNotSupported("streamed signatures".into()));
            }
        }
        Ok(Self {
            unique_identifier: uid(&f)?,
            parameters: f
                .optional(Tag::CRYPTOGRAPHIC_PARAMETERS)?
                .map(CryptographicParameters::parse)
                .transpose()?,
            data: bytes_field(&f, Tag::DATA)?,
            digested_data: bytes_field(&f, Tag::DIGESTED_DATA)?,
            signature: f
                .optional(Tag::SIGNATURE_DATA)?
                .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                .transpose()?,
        })
    }
}

/// RNG Retrieve (KMIP 1.4 §4.35): the number of bytes asked for.
pub fn parse_rng_retrieve(payload: &Item) -> Result<i32, KmipError> {
    let f = Fields::of(payload)?;
    Ok(f.required(Tag::DATA_LENGTH)?.as_int()?)
}

/// RNG Seed (KMIP 1.4 §4.36): the seed data offered.
pub fn parse_rng_seed(payload: &Item) -> Result<Bytes, KmipError> {
    let f = Fields::of(payload)?;
    Ok(bytes_field(&f, Tag::DATA)?
        .ok_or(TtlvError::Missing { tag: Tag::DATA, within: payload.tag })?)
}

/// Query.
pub fn parse_query(payload: &Item) -> Result<Vec<QueryFunction>, KmipError> {
    Ok(Fields::of(payload)?
        .all(Tag::QUERY_FUNCTION)
        .map(|i| i.as_enum().map(QueryFunction))
        .collect::<Result<_, _>>()?)
}

/// Discover Versions: the client's versions, in its order of preference.
pub fn parse_discover_versions(payload: &Item) -> Result<Vec<ProtocolVersion>, KmipError> {
    Fields::of(payload)?.all(Tag::PROTOCOL_VERSION).map(ProtocolVersion::parse).collect()
}

/// The Discover Versions answer (KMIP 1.4 §4.26): the server's versions
/// the client also listed, in the server's order of preference; all of the
/// server's when the client listed none.
#[must_use]
pub fn negotiate_versions(
    client: &[ProtocolVersion],
    server: &[ProtocolVersion],
) -> Vec<ProtocolVersion> {
    if client.is_empty() {
        return server.to_vec();
    }
    server.iter().copied().filter(|v| client.contains(v)).collect()
}
