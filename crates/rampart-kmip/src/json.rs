//! The JSON encoding of TTLV from "KMIP Additional Message Encodings
//! Version 1.0" §4.1, which the KMIP Profiles' JSON Server profile
//! requires: each item is an object with the members `tag`, `type` and
//! `value`, the tag a specification name or `0x42XXXX`, the type omitted for
//! a Structure (whose value is an array of items, or null). Values are
//! written as the encoding's examples write them (names for enumerations
//! and masks, hex for Byte Strings and Big Integers, ISO 8601 for dates,
//! numbers otherwise) and read in every form §4.1.6 allows (numbers or
//! `0x` hex strings, `|`-separated mask names, ...).
//!
//! The reader is for untrusted text: the document's length is checked
//! before parsing, and its nesting depth and item count as it is
//! converted, against the same [`XmlLimits`] as the XML reader. Names,
//! dates and value spellings are those of [`crate::xml`], so both text
//! encodings read and write the same names.

use serde_json::{Map, Number, Value as Json};
use zeroize::Zeroize;

use crate::tag::Tag;
use crate::ttlv::{Item, ItemType, Value};
use crate::xml::{self, TextError, XmlLimits};

/// Reads one JSON-encoded item (a message, in the profiles' use).
pub fn from_json(text: &str, limits: &XmlLimits) -> Result<Item, TextError> {
    if text.len() > limits.max_len {
        return Err(TextError::TooLong { len: text.len(), max: limits.max_len });
    }
    let mut parsed: Json = serde_json::from_str(text)
        .map_err(|_| TextError::Syntax { at: 0, what: "not a JSON document" })?;
    let mut count = 0usize;
    let item = to_item(&parsed, None, 1, limits, &mut count);
    // The text may carry key material as hex: wipe the parsed copy.
    wipe(&mut parsed);
    item
}

/// Writes an item as JSON (one line).
#[must_use]
pub fn to_json(item: &Item) -> String {
    let mut json = to_value(item, None);
    let text = json.to_string();
    wipe(&mut json);
    text
}

fn wipe(json: &mut Json) {
    match json {
        Json::String(s) => s.zeroize(),
        Json::Array(items) => items.iter_mut().for_each(wipe),
        Json::Object(map) => map.values_mut().for_each(wipe),
        _ => {}
    }
}

fn syntax(what: &'static str) -> TextError {
    TextError::Syntax { at: 0, what }
}

fn to_item(
    json: &Json,
    context: Option<&str>,
    depth: usize,
    limits: &XmlLimits,
    count: &mut usize,
) -> Result<Item, TextError> {
    if depth > limits.max_depth {
        return Err(TextError::TooDeep { max: limits.max_depth });
    }
    *count += 1;
    if *count > limits.max_elements {
        return Err(TextError::TooManyElements { max: limits.max_elements });
    }
    let object = json.as_object().ok_or_else(|| syntax("an item is not a JSON object"))?;
    let name = object
        .get("tag")
        .and_then(Json::as_str)
        .ok_or_else(|| syntax("an item has no \"tag\" string"))?;
    let tag = xml::tag_by_name(name).ok_or_else(|| TextError::UnknownTag(name.to_owned()))?;
    let item_type = match object.get("type") {
        None | Some(Json::Null) => ItemType::Structure,
        Some(Json::String(t)) => {
            xml::type_by_name(t).ok_or_else(|| TextError::UnknownType { tag, found: t.clone() })?
        }
        Some(_) => return Err(syntax("an item's \"type\" is not a string")),
    };
    let value = object.get("value").unwrap_or(&Json::Null);
    if item_type == ItemType::Structure {
        let children: &[Json] = match value {
            Json::Null => &[],
            Json::Array(children) => children,
            _ => return Err(syntax("a Structure's value is not an array")),
        };
        // The Attribute Name beside an Attribute Value says how to read it.
        let attribute_name = children.iter().find_map(|c| {
            let c = c.as_object()?;
            let is_name = c.get("tag").and_then(Json::as_str).and_then(xml::tag_by_name)
                == Some(Tag::ATTRIBUTE_NAME);
            is_name.then(|| c.get("value").and_then(Json::as_str)).flatten()
        });
        let items = children
            .iter()
            .map(|c| to_item(c, attribute_name, depth + 1, limits, count))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Item::structure(tag, items));
    }
    Ok(Item::new(tag, primitive(tag, item_type, value, context)?))
}

fn primitive(
    tag: Tag,
    item_type: ItemType,
    value: &Json,
    context: Option<&str>,
) -> Result<Value, TextError> {
    let bad = || TextError::BadValue { tag, item_type };
    match (item_type, value) {
        (ItemType::TextString, Json::String(s)) => Ok(Value::TextString(s.clone())),
        (ItemType::TextString, _) => Err(bad()),
        (ItemType::Boolean, Json::Bool(b)) => Ok(Value::Boolean(*b)),
        // §4.1.6.8: a hex string of the 8-byte wire value.
        (ItemType::Boolean, Json::String(s)) => {
            let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).ok_or_else(bad)?;
            match u64::from_str_radix(hex, 16) {
                Ok(0) if hex.len() <= 16 => Ok(Value::Boolean(false)),
                Ok(1) if hex.len() <= 16 => Ok(Value::Boolean(true)),
                _ => Err(bad()),
            }
        }
        (ItemType::BigInteger, Json::Number(n)) => {
            let v = n.as_i64().ok_or_else(bad)?;
            Ok(Value::BigInteger(v.to_be_bytes().to_vec()))
        }
        // §4.1.6.6 writes Big Integers as `0x` hex; the XML spelling has
        // no prefix.
        (ItemType::BigInteger, Json::String(s)) => {
            let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
            xml::parse_value(tag, item_type, hex, context)
        }
        (ItemType::Integer, Json::Number(n)) => {
            let v = n.as_i64().and_then(|v| i32::try_from(v).ok()).ok_or_else(bad)?;
            Ok(Value::Integer(v))
        }
        (ItemType::LongInteger, Json::Number(n)) => {
            Ok(Value::LongInteger(n.as_i64().ok_or_else(bad)?))
        }
        (ItemType::Enumeration, Json::Number(n)) => {
            let v = n.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or_else(bad)?;
            Ok(Value::Enumeration(v))
        }
        (ItemType::Interval, Json::Number(n)) => {
            let v = n.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or_else(bad)?;
            Ok(Value::Interval(v))
        }
        (
            ItemType::Integer
            | ItemType::LongInteger
            | ItemType::Enumeration
            | ItemType::Interval
            | ItemType::ByteString
            | ItemType::DateTime
            | ItemType::DateTimeExtended,
            Json::String(s),
        ) => xml::parse_value(tag, item_type, s, context),
        _ => Err(bad()),
    }
}

/// Numbers JSON carries exactly (§4.1.6.5: a double holds 53 bits).
const EXACT: i64 = 1 << 52;

fn to_value(item: &Item, context: Option<&str>) -> Json {
    let mut object = Map::new();
    object.insert("tag".into(), Json::String(xml::element_name(item.tag)));
    let value = match &item.value {
        Value::Structure(children) => {
            let attribute_name = children
                .iter()
                .find(|c| c.tag == Tag::ATTRIBUTE_NAME)
                .and_then(|c| c.as_text().ok());
            Json::Array(children.iter().map(|c| to_value(c, attribute_name)).collect())
        }
        other => {
            object.insert("type".into(), Json::String(xml::type_name(other.item_type()).into()));
            match other {
                Value::Integer(v) => {
                    let text = xml::value_text(item, context).unwrap_or_default();
                    if text.parse::<i32>().is_ok() {
                        Json::Number(Number::from(*v))
                    } else {
                        // A mask by its bit names, `|`-separated (§4.1.6.4).
                        Json::String(text.split(' ').collect::<Vec<_>>().join("|"))
                    }
                }
                Value::LongInteger(v) if (-EXACT..EXACT).contains(v) => {
                    Json::Number(Number::from(*v))
                }
                Value::LongInteger(v) => Json::String(format!("0x{v:016x}")),
                Value::BigInteger(bytes) => Json::String(format!("0x{}", xml::hex::encode(bytes))),
                Value::Boolean(v) => Json::Bool(*v),
                Value::Interval(v) => Json::Number(Number::from(*v)),
                _ => Json::String(xml::value_text(item, context).unwrap_or_default()),
            }
        }
    };
    object.insert("value".into(), value);
    Json::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttlv::Bytes;

    fn limits() -> XmlLimits {
        XmlLimits::default()
    }

    #[test]
    fn reads_every_value_form_the_encoding_allows() {
        let text = r#"{"tag":"RequestMessage","value":[
            {"tag":"BatchCount","type":"Integer","value":"0x0000000A"},
            {"tag":"0x420057","type":"Enumeration","value":2},
            {"tag":"ObjectType","type":"Enumeration","value":"0x00000002"},
            {"tag":"ObjectType","type":"Enumeration","value":"SymmetricKey"},
            {"tag":"BatchOrderOption","type":"Boolean","value":"0x0000000000000001"},
            {"tag":"BatchOrderOption","type":"Boolean","value":false},
            {"tag":"CryptographicUsageMask","type":"Integer","value":"CertificateSign|0x0000000c"},
            {"tag":"UsageLimitsCount","type":"LongInteger","value":"0x1000000000000000"},
            {"tag":"ArchiveDate","type":"DateTime","value":"2001-01-01T10:00:00+10:00"},
            {"tag":"ArchiveDate","type":"DateTime","value":"0x000000003a505520"},
            {"tag":"Offset","type":"Interval","value":27},
            {"tag":"MACSignature","type":"ByteString","value":"C50F77"},
            {"tag":"ProtocolVersion"}
        ]}"#;
        let item = from_json(text, &limits()).unwrap();
        let Value::Structure(c) = &item.value else { panic!("not a structure") };
        assert_eq!(c[0].value, Value::Integer(10));
        for item in &c[1..=3] {
            assert_eq!(item.value, Value::Enumeration(2));
        }
        assert_eq!(c[4].value, Value::Boolean(true));
        assert_eq!(c[5].value, Value::Boolean(false));
        assert_eq!(c[6].value, Value::Integer(0x100c));
        assert_eq!(c[7].value, Value::LongInteger(1 << 60));
        // 2001-01-01T00:00:00Z; the hex is the encoding's own example
        // (2001-01-01T10:00:00Z).
        assert_eq!(c[8].value, Value::DateTime(978_307_200));
        assert_eq!(c[9].value, Value::DateTime(0x3a50_5520));
        assert_eq!(c[10].value, Value::Interval(27));
        assert_eq!(c[11].value, Value::ByteString(Bytes::new(vec![0xC5, 0x0F, 0x77])));
        assert_eq!(c[12].value, Value::Structure(Vec::new()));
    }

    #[test]
    fn round_trips_what_it_writes() {
        let item = Item::structure(
            Tag::ATTRIBUTE,
            vec![
                Item::text(Tag::ATTRIBUTE_NAME, "Cryptographic Usage Mask"),
                Item::new(Tag::ATTRIBUTE_VALUE, Value::Integer(12)),
            ],
        );
        let text = to_json(&item);
        assert!(text.contains(r#""value":"Encrypt|Decrypt""#), "{text}");
        assert_eq!(from_json(&text, &limits()).unwrap(), item);
        let big = Item::new(Tag::ATTRIBUTE_VALUE, Value::LongInteger(-(1 << 60)));
        assert_eq!(from_json(&to_json(&big), &limits()).unwrap(), big);
    }

    #[test]
    fn refuses_bad_documents_with_a_reason() {
        let cases = [
            ("[1]", "an item is not a JSON object"),
            (r#"{"type":"Integer","value":1}"#, "no \"tag\""),
            (r#"{"tag":"NoSuchTag","value":[]}"#, "unknown tag name"),
            (r#"{"tag":"BatchCount","type":"Integer","value":4294967296}"#, "not a valid Integer"),
            (r#"{"tag":"BatchCount","type":"Float","value":1}"#, "unknown item type"),
            (r#"{"tag":"BatchCount","type":"Integer","value":true}"#, "not a valid Integer"),
            (
                r#"{"tag":"BatchOrderOption","type":"Boolean","value":"0x02"}"#,
                "not a valid Boolean",
            ),
            (r#"{"tag":"RequestMessage","value":{}}"#, "not an array"),
            ("{", "not a JSON document"),
        ];
        for (text, why) in cases {
            let err = from_json(text, &limits()).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn bounds_length_depth_and_count() {
        let small = XmlLimits { max_len: 64, max_depth: 3, max_elements: 4 };
        let long = format!(
            r#"{{"tag":"AttributeName","type":"TextString","value":"{}"}}"#,
            "a".repeat(64)
        );
        assert!(matches!(from_json(&long, &small), Err(TextError::TooLong { .. })));
        let deep =
            r#"{"tag":"A","value":[{"tag":"A","value":[{"tag":"A","value":[{"tag":"A"}]}]}]}"#
                .replace('A', "RequestMessage");
        let roomy = XmlLimits { max_len: 1 << 10, ..small };
        assert!(matches!(from_json(&deep, &roomy), Err(TextError::TooDeep { max: 3 })));
        let wide = format!(
            r#"{{"tag":"RequestMessage","value":[{}]}}"#,
            [r#"{"tag":"BatchCount","type":"Integer","value":1}"#; 5].join(",")
        );
        assert!(matches!(from_json(&wide, &roomy), Err(TextError::TooManyElements { max: 4 })));
    }
}
