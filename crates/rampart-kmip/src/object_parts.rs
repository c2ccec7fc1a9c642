//! The bodies of the managed objects that are not a plain Key Block
//! (KMIP 1.4 §2.2, KMIP 2.1 §2.2): Certificate, Opaque Object and a Split
//! Key's fields, and the Big Integers of the transparent RSA key formats
//! (KMIP 1.4 §2.1.7). Every field is checked as it is read.

use crate::enums::{CertificateType, KeyFormatType, SplitKeyMethod};
use crate::error::KmipError;
use crate::tag::Tag;
use crate::ttlv::{Bytes, Fields, Item, Value};

/// Largest certificate, opaque object or key material accepted: far above
/// any real one (an 8192-bit RSA private key is under 5 KiB), so a client
/// cannot make the server seal and store arbitrary amounts per object.
pub const MAX_OBJECT_BYTES: usize = 64 * 1024;

/// Most parts a Split Key may be split into (the part identifier and
/// threshold are bounded by it).
pub const MAX_SPLIT_KEY_PARTS: i32 = 255;

fn bounded(bytes: &[u8], what: &str) -> Result<Bytes, KmipError> {
    if bytes.len() > MAX_OBJECT_BYTES {
        return Err(KmipError::InvalidField(format!(
            "{what} is larger than {MAX_OBJECT_BYTES} bytes"
        )));
    }
    Ok(Bytes::from(bytes))
}

/// A Certificate: its type and its encoding (DER for X.509).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    pub certificate_type: CertificateType,
    pub value: Bytes,
}

impl Certificate {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        let value = f.required(Tag::CERTIFICATE_VALUE)?.as_bytes()?;
        if value.is_empty() {
            return Err(KmipError::InvalidField("an empty Certificate Value".into()));
        }
        Ok(Self {
            certificate_type: CertificateType(f.required(Tag::CERTIFICATE_TYPE)?.as_enum()?),
            value: bounded(value, "the Certificate Value")?,
        })
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        Item::structure(
            Tag::CERTIFICATE,
            vec![
                Item::enumeration(Tag::CERTIFICATE_TYPE, self.certificate_type.0),
                Item::bytes(Tag::CERTIFICATE_VALUE, self.value.as_slice()),
            ],
        )
    }
}

/// An Opaque Object: a data type (an extension value, 0x8XXXXXXX, in
/// practice) and bytes the server does not interpret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpaqueObject {
    pub data_type: u32,
    pub value: Bytes,
}

impl OpaqueObject {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        Ok(Self {
            data_type: f.required(Tag::OPAQUE_DATA_TYPE)?.as_enum()?,
            value: bounded(f.required(Tag::OPAQUE_DATA_VALUE)?.as_bytes()?, "the opaque data")?,
        })
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        Item::structure(
            Tag::OPAQUE_OBJECT,
            vec![
                Item::enumeration(Tag::OPAQUE_DATA_TYPE, self.data_type),
                Item::bytes(Tag::OPAQUE_DATA_VALUE, self.value.as_slice()),
            ],
        )
    }
}

/// The fields of a Split Key besides its Key Block (KMIP 1.4 §2.2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitKeyFields {
    pub parts: i32,
    pub key_part_identifier: i32,
    pub threshold: i32,
    pub method: SplitKeyMethod,
    /// Polynomial Sharing Prime Field only: the prime, a Big Integer as
    /// the wire carries it.
    pub prime_field_size: Option<Vec<u8>>,
}

impl SplitKeyFields {
    pub fn parse(f: &Fields<'_>) -> Result<Self, KmipError> {
        let parts = f.required(Tag::SPLIT_KEY_PARTS)?.as_int()?;
        let key_part_identifier = f.required(Tag::KEY_PART_IDENTIFIER)?.as_int()?;
        let threshold = f.required(Tag::SPLIT_KEY_THRESHOLD)?.as_int()?;
        let method = SplitKeyMethod(f.required(Tag::SPLIT_KEY_METHOD)?.as_enum()?);
        if !(1..=MAX_SPLIT_KEY_PARTS).contains(&parts) {
            return Err(KmipError::InvalidField(format!(
                "Split Key Parts must be 1 to {MAX_SPLIT_KEY_PARTS}"
            )));
        }
        if !(1..=parts).contains(&key_part_identifier) {
            return Err(KmipError::InvalidField(
                "the Key Part Identifier must be 1 to Split Key Parts".into(),
            ));
        }
        if !(1..=parts).contains(&threshold) {
            return Err(KmipError::InvalidField(
                "the Split Key Threshold must be 1 to Split Key Parts".into(),
            ));
        }
        if method.name().is_none() {
            return Err(KmipError::InvalidField(format!("Split Key Method {method}")));
        }
        let prime = f.optional(Tag::PRIME_FIELD_SIZE)?;
        // §2.2.5: Prime Field Size is there exactly when the method is
        // Polynomial Sharing Prime Field.
        let prime_field_size = match (method, prime) {
            (SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, Some(p)) => match &p.value {
                Value::BigInteger(b) if !big_integer_magnitude(b)?.is_empty() => Some(b.clone()),
                _ => return Err(KmipError::InvalidField("Prime Field Size".into())),
            },
            (SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, None) => {
                return Err(KmipError::MissingData(
                    "Prime Field Size (the method is Polynomial Sharing Prime Field)".into(),
                ));
            }
            (_, Some(_)) => {
                return Err(KmipError::InvalidField(
                    "Prime Field Size is only for Polynomial Sharing Prime Field".into(),
                ));
            }
            (_, None) => None,
        };
        Ok(Self { parts, key_part_identifier, threshold, method, prime_field_size })
    }

    #[must_use]
    pub fn items(&self) -> Vec<Item> {
        let mut items = vec![
            Item::int(Tag::SPLIT_KEY_PARTS, self.parts),
            Item::int(Tag::KEY_PART_IDENTIFIER, self.key_part_identifier),
            Item::int(Tag::SPLIT_KEY_THRESHOLD, self.threshold),
            Item::enumeration(Tag::SPLIT_KEY_METHOD, self.method.0),
        ];
        if let Some(p) = &self.prime_field_size {
            items.push(Item::new(Tag::PRIME_FIELD_SIZE, Value::BigInteger(p.clone())));
        }
        items
    }
}

/// The integers of a transparent RSA or DSA key format, in the order
/// KMIP 1.4 §2.1.7.2, §2.1.7.3, §2.1.7.6 and §2.1.7.7 list them, and
/// whether each is required.
fn transparent_tags(format: KeyFormatType) -> Option<&'static [(Tag, bool)]> {
    match format {
        KeyFormatType::TRANSPARENT_RSA_PRIVATE_KEY => Some(&[
            (Tag::MODULUS, true),
            (Tag::PRIVATE_EXPONENT, false),
            (Tag::PUBLIC_EXPONENT, false),
            (Tag::P, false),
            (Tag::Q, false),
            (Tag::PRIME_EXPONENT_P, false),
            (Tag::PRIME_EXPONENT_Q, false),
            (Tag::CRT_COEFFICIENT, false),
        ]),
        KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY => {
            Some(&[(Tag::MODULUS, true), (Tag::PUBLIC_EXPONENT, true)])
        }
        KeyFormatType::TRANSPARENT_DSA_PRIVATE_KEY => {
            Some(&[(Tag::P, true), (Tag::Q, true), (Tag::G, true), (Tag::X, true)])
        }
        KeyFormatType::TRANSPARENT_DSA_PUBLIC_KEY => {
            Some(&[(Tag::P, true), (Tag::Q, true), (Tag::G, true), (Tag::Y, true)])
        }
        _ => None,
    }
}

/// Whether `format` carries its key as transparent integers.
#[must_use]
pub fn is_transparent_integers(format: KeyFormatType) -> bool {
    transparent_tags(format).is_some()
}

/// The integers of a transparent Key Material structure, as magnitudes,
/// by tag. Unknown, repeated, negative or non-Big-Integer fields are refused.
pub fn parse_transparent(
    material: &Item,
    format: KeyFormatType,
) -> Result<Vec<(Tag, Bytes)>, KmipError> {
    let tags = transparent_tags(format).ok_or(KmipError::KeyFormatTypeNotSupported(format.0))?;
    let mut out: Vec<(Tag, Bytes)> = Vec::new();
    for child in material.children()? {
        if !tags.iter().any(|(t, _)| *t == child.tag) || out.iter().any(|(t, _)| *t == child.tag) {
            return Err(KmipError::InvalidField(format!("{} in {format} key material", child.tag)));
        }
        let Value::BigInteger(b) = &child.value else {
            return Err(KmipError::InvalidField(format!("{} is not a Big Integer", child.tag)));
        };
        out.push((child.tag, bounded(&big_integer_magnitude(b)?, "a key integer")?));
    }
    for (tag, required) in tags {
        if *required && !out.iter().any(|(t, _)| t == tag) {
            return Err(KmipError::MissingData(format!("{tag} in {format} key material")));
        }
    }
    Ok(out)
}

/// The Key Material structure of transparent integers.
#[must_use]
pub fn transparent_item(integers: &[(Tag, Bytes)]) -> Item {
    Item::structure(
        Tag::KEY_MATERIAL,
        integers
            .iter()
            .map(|(tag, m)| Item::new(*tag, Value::BigInteger(big_integer(m.as_slice()))))
            .collect(),
    )
}

/// The magnitude of a non-negative Big Integer (two's complement,
/// big-endian): its bytes without leading zeros.
pub fn big_integer_magnitude(wire: &[u8]) -> Result<Vec<u8>, KmipError> {
    if wire.first().is_some_and(|b| b & 0x80 != 0) {
        return Err(KmipError::InvalidField("a negative Big Integer".into()));
    }
    let skip = wire.iter().take_while(|b| **b == 0).count();
    Ok(wire.get(skip..).unwrap_or(&[]).to_vec())
}

/// A non-negative magnitude as a Big Integer: sign byte when needed, then
/// zero-padded on the left to a multiple of 8 bytes (KMIP 1.4 §9.1.1.4).
#[must_use]
pub fn big_integer(magnitude: &[u8]) -> Vec<u8> {
    let skip = magnitude.iter().take_while(|b| **b == 0).count();
    let trimmed = magnitude.get(skip..).unwrap_or(&[]);
    let mut len = trimmed.len() + usize::from(trimmed.first().is_some_and(|b| b & 0x80 != 0));
    len = len.max(1).div_ceil(8) * 8;
    let mut out = vec![0u8; len - trimmed.len()];
    out.extend_from_slice(trimmed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_integers_are_padded_and_signed_as_the_wire_wants() {
        assert_eq!(big_integer(&[0x01]), vec![0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(big_integer(&[0x80; 8]).len(), 16);
        assert_eq!(big_integer(&[]), vec![0; 8]);
        assert_eq!(big_integer_magnitude(&big_integer(&[0x80, 1])).unwrap(), vec![0x80, 1]);
        assert!(big_integer_magnitude(&[0xFF; 8]).is_err());
    }

    #[test]
    fn split_key_fields_are_checked_against_each_other() {
        let fields = |parts, id, threshold, method: SplitKeyMethod, prime: Option<Vec<u8>>| {
            let mut items = vec![
                Item::int(Tag::SPLIT_KEY_PARTS, parts),
                Item::int(Tag::KEY_PART_IDENTIFIER, id),
                Item::int(Tag::SPLIT_KEY_THRESHOLD, threshold),
                Item::enumeration(Tag::SPLIT_KEY_METHOD, method.0),
            ];
            if let Some(p) = prime {
                items.push(Item::new(Tag::PRIME_FIELD_SIZE, Value::BigInteger(p)));
            }
            let s = Item::structure(Tag::SPLIT_KEY, items);
            SplitKeyFields::parse(&Fields::of(&s).unwrap())
        };
        let prime = Some(big_integer(&[0x01, 0x01]));
        assert!(fields(3, 2, 2, SplitKeyMethod::XOR, None).is_ok());
        assert!(fields(3, 4, 2, SplitKeyMethod::XOR, None).is_err());
        assert!(fields(3, 1, 0, SplitKeyMethod::XOR, None).is_err());
        assert!(fields(0, 1, 1, SplitKeyMethod::XOR, None).is_err());
        assert!(fields(3, 1, 2, SplitKeyMethod::XOR, prime.clone()).is_err());
        assert!(fields(3, 1, 2, SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, None).is_err());
        let ok = fields(3, 1, 2, SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, prime).unwrap();
        assert!(ok.items().iter().any(|i| i.tag == Tag::PRIME_FIELD_SIZE));
        assert!(fields(3, 1, 2, SplitKeyMethod(9), None).is_err());
    }
}
