//! The XML encoding of TTLV that the OASIS KMIP Profiles (v1.4 and v2.1,
//! "XML Encoding") and their published test cases use: one element per
//! item, named after its tag (the specification name without spaces, or
//! `0x42XXXX`), with a `type` attribute (absent for a Structure) and a
//! `value` attribute. Enumerations are written by value name or as
//! `0x` and eight hex digits, masks in Integers as bit names separated by
//! spaces or `|`, Byte Strings and Big Integers in hex, Date-Times in
//! ISO 8601.
//!
//! The reader is for untrusted text as the binary one is: the document's
//! length, nesting depth and element count are checked against
//! [`XmlLimits`] as it is read, and nothing panics on bad input. It reads
//! the XML this encoding needs (elements, attributes, comments, the XML
//! declaration, character references) and refuses the rest (document
//! types, CDATA, text content), so no entity can expand.
//!
//! Value names are looked up without case, spaces or punctuation
//! (`SymmetricKey`, `Symmetric Key` and `SYMMETRIC_KEY` are one name), as
//! the published test cases spell some of them either way.

mod names;

use crate::tag::Tag;
use crate::ttlv::{Bytes, Item, ItemType, Value};

/// A failure to read or convert a text encoding of TTLV (TTLV-XML here,
/// TTLV-JSON in [`crate::json`]). Errors name tags, types and byte
/// offsets, never a value (a Byte String may be key material).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TextError {
    #[error("a document of {len} bytes is longer than the {max} accepted")]
    TooLong { len: usize, max: usize },
    #[error("items nested deeper than {max}")]
    TooDeep { max: usize },
    #[error("more than {max} items in one document")]
    TooManyElements { max: usize },
    #[error("syntax error at byte {at}: {what}")]
    Syntax { at: usize, what: &'static str },
    #[error("unknown tag name {0:?}")]
    UnknownTag(String),
    #[error("{tag}: unknown item type {found:?}")]
    UnknownType { tag: Tag, found: String },
    #[error("{tag}: the value is not a valid {item_type:?}")]
    BadValue { tag: Tag, item_type: ItemType },
    #[error("{tag}: a {item_type:?} has child elements")]
    ChildrenInPrimitive { tag: Tag, item_type: ItemType },
}

/// Bounds for reading untrusted XML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XmlLimits {
    /// Bytes of the whole document.
    pub max_len: usize,
    /// Elements inside elements: a top-level element is depth 1.
    pub max_depth: usize,
    /// Elements in the whole document.
    pub max_elements: usize,
}

impl Default for XmlLimits {
    fn default() -> Self {
        Self { max_len: 8 << 20, max_depth: 32, max_elements: 200_000 }
    }
}

/// One XML element: its name, attributes (in document order) and child
/// elements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub children: Vec<Element>,
}

impl Element {
    /// The value of the attribute `name`, if present.
    #[must_use]
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Sets (or adds) the attribute `name`.
    pub fn set_attribute(&mut self, name: &str, value: String) {
        match self.attributes.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((name.to_owned(), value)),
        }
    }
}

/// Reads a document into its top-level elements (a KMIP test case file is
/// a `<KMIP>` element around request and response messages; a single
/// message is one element).
pub fn parse_document(text: &str, limits: &XmlLimits) -> Result<Vec<Element>, TextError> {
    if text.len() > limits.max_len {
        return Err(TextError::TooLong { len: text.len(), max: limits.max_len });
    }
    let b = text.as_bytes();
    let syntax = |at: usize, what: &'static str| TextError::Syntax { at, what };
    let mut i = 0usize;
    let mut stack: Vec<Element> = Vec::new();
    let mut top: Vec<Element> = Vec::new();
    let mut count = 0usize;
    // Byte order mark.
    if text.starts_with('\u{FEFF}') {
        i = 3;
    }
    loop {
        let start = i;
        while i < b.len() && b[i] != b'<' {
            i += 1;
        }
        if !text[start..i].trim().is_empty() {
            return Err(syntax(start, "text content is not part of TTLV-XML"));
        }
        if i == b.len() {
            break;
        }
        let rest = &text[i..];
        if rest.starts_with("<?") {
            let end = rest.find("?>").ok_or(syntax(i, "unterminated processing instruction"))?;
            i += end + 2;
        } else if let Some(comment) = rest.strip_prefix("<!--") {
            let end = comment.find("-->").ok_or(syntax(i, "unterminated comment"))?;
            i += 4 + end + 3;
        } else if rest.starts_with("<!") {
            return Err(syntax(i, "document types and CDATA are not accepted"));
        } else if rest.starts_with("</") {
            i += 2;
            let name = read_name(text, &mut i).ok_or(syntax(i, "bad end tag name"))?;
            skip_space(b, &mut i);
            if b.get(i) != Some(&b'>') {
                return Err(syntax(i, "end tag not closed"));
            }
            i += 1;
            let element = stack.pop().ok_or(syntax(i, "end tag without a start tag"))?;
            if element.name != name {
                return Err(syntax(i, "end tag does not match its start tag"));
            }
            attach(&mut stack, &mut top, element);
        } else {
            i += 1;
            let name = read_name(text, &mut i).ok_or(syntax(i, "bad element name"))?.to_owned();
            count += 1;
            if count > limits.max_elements {
                return Err(TextError::TooManyElements { max: limits.max_elements });
            }
            if stack.len() + 1 > limits.max_depth {
                return Err(TextError::TooDeep { max: limits.max_depth });
            }
            let mut element = Element { name, ..Element::default() };
            let closed = loop {
                let before = i;
                skip_space(b, &mut i);
                match b.get(i) {
                    None => return Err(syntax(i, "unterminated start tag")),
                    Some(b'>') => {
                        i += 1;
                        break false;
                    }
                    Some(b'/') => {
                        if b.get(i + 1) != Some(&b'>') {
                            return Err(syntax(i, "bad empty-element tag"));
                        }
                        i += 2;
                        break true;
                    }
                    Some(_) if i == before => {
                        return Err(syntax(i, "attributes must be separated by spaces"));
                    }
                    Some(_) => {}
                }
                let attr = read_name(text, &mut i).ok_or(syntax(i, "bad attribute name"))?;
                skip_space(b, &mut i);
                if b.get(i) != Some(&b'=') {
                    return Err(syntax(i, "attribute without '='"));
                }
                i += 1;
                skip_space(b, &mut i);
                let quote = match b.get(i) {
                    Some(&q @ (b'"' | b'\'')) => q,
                    _ => return Err(syntax(i, "attribute value not quoted")),
                };
                i += 1;
                let vstart = i;
                while i < b.len() && b[i] != quote {
                    if b[i] == b'<' {
                        return Err(syntax(i, "'<' in an attribute value"));
                    }
                    i += 1;
                }
                if i == b.len() {
                    return Err(syntax(vstart, "unterminated attribute value"));
                }
                let value = decode_references(&text[vstart..i])
                    .ok_or(syntax(vstart, "bad character reference"))?;
                i += 1;
                if element.attribute(attr).is_some() {
                    return Err(syntax(vstart, "duplicate attribute"));
                }
                element.attributes.push((attr.to_owned(), value));
            };
            if closed {
                attach(&mut stack, &mut top, element);
            } else {
                stack.push(element);
            }
        }
    }
    if !stack.is_empty() {
        return Err(syntax(b.len(), "unclosed element"));
    }
    Ok(top)
}

fn attach(stack: &mut [Element], top: &mut Vec<Element>, element: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(element),
        None => top.push(element),
    }
}

fn skip_space(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn read_name<'a>(text: &'a str, i: &mut usize) -> Option<&'a str> {
    let start = *i;
    for (offset, c) in text[start..].char_indices() {
        let ok = c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
        if !ok {
            *i = start + offset;
            return (offset > 0).then(|| &text[start..*i]);
        }
    }
    None
}

fn decode_references(raw: &str) -> Option<String> {
    if !raw.contains('&') {
        return Some(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semi = after.find(';')?;
        let entity = &after[..semi];
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).ok()?
                } else {
                    entity.strip_prefix('#')?.parse::<u32>().ok()?
                };
                char::from_u32(code)?
            }
        };
        out.push(c);
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Some(out)
}

fn escape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 => out.push_str(&format!("&#x{:X};", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Names compare without case, spaces or punctuation.
fn same_name(a: &str, b: &str) -> bool {
    let mut x = a.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase());
    let mut y = b.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase());
    loop {
        match (x.next(), y.next()) {
            (None, None) => return true,
            (Some(p), Some(q)) if p == q => {}
            _ => return false,
        }
    }
}

/// Whether `written` names the enumeration value `name`: in any spelling,
/// or with a leading number moved to the end as the published test cases
/// write names that start with a digit (`3DES` as `DES3`).
fn names_value(name: &str, written: &str) -> bool {
    if same_name(name, written) {
        return true;
    }
    let digits = name.len() - name.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    digits > 0 && same_name(&format!("{}{}", &name[digits..], &name[..digits]), written)
}

/// The tag an element name stands for: a specification name (in any
/// spelling [`normalized`] accepts) or `0x` and six hex digits.
#[must_use]
pub fn tag_by_name(name: &str) -> Option<Tag> {
    if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
        return (hex.len() == 6).then(|| u32::from_str_radix(hex, 16).ok().map(Tag)).flatten();
    }
    names::TAGS.iter().find(|(n, _)| same_name(n, name)).map(|&(_, v)| Tag(v))
}

/// The specification name of a tag, for every tag of KMIP 1.0–2.1.
#[must_use]
pub fn tag_name(tag: Tag) -> Option<&'static str> {
    names::TAGS.iter().find(|&&(_, v)| v == tag.0).map(|&(n, _)| n)
}

/// The element name of a tag: its specification name in the XML
/// encoding's spelling (`SymmetricKey`), or `0x42XXXX` for an unknown tag.
#[must_use]
pub fn element_name(tag: Tag) -> String {
    tag_name(tag).map_or_else(|| format!("0x{:06X}", tag.0), camel)
}

/// `Pre-Active` -> `PreActive`, `IV/Counter/Nonce` -> `IVCounterNonce`.
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(if upper { c.to_ascii_uppercase() } else { c });
            upper = false;
        } else {
            upper = true;
        }
    }
    out
}

/// Which named values an item's Enumeration or Integer takes: the table
/// named after its tag, or after the Attribute Name beside it (KMIP 1.x
/// Attribute Values).
#[derive(Clone, Copy)]
enum Names {
    Enumeration(&'static [(&'static str, u32)]),
    Mask(&'static [(&'static str, u32)]),
    Tags,
    None,
}

fn names_for(tag: Tag, context: Option<&str>) -> Names {
    let name = if tag == Tag::ATTRIBUTE_VALUE { context } else { tag_name(tag) };
    let Some(name) = name else { return Names::None };
    // The one enumeration-typed tag whose values are not an enumeration
    // of its own name, and the one whose values are tags.
    let name = if same_name(name, "Mask Generator Hashing Algorithm") {
        "Hashing Algorithm"
    } else {
        name
    };
    if same_name(name, "Attribute Reference") {
        return Names::Tags;
    }
    if let Some((_, values)) = names::ENUMERATIONS.iter().find(|(n, _)| same_name(n, name)) {
        return Names::Enumeration(values);
    }
    if let Some((_, values)) = names::MASKS.iter().find(|(n, _)| same_name(n, name)) {
        return Names::Mask(values);
    }
    Names::None
}

/// The value of enumeration `enumeration` named `name` (any spelling).
#[must_use]
pub fn enumeration_value(enumeration: &str, name: &str) -> Option<u32> {
    let (_, values) = names::ENUMERATIONS.iter().find(|(n, _)| same_name(n, enumeration))?;
    values.iter().find(|(n, _)| names_value(n, name)).map(|&(_, v)| v)
}

/// The names of every enumeration value `value` (aliases included), in the
/// order the table lists them, for `enumeration`.
#[must_use]
pub fn enumeration_names(enumeration: &str, value: u32) -> Vec<&'static str> {
    names::ENUMERATIONS
        .iter()
        .find(|(n, _)| same_name(n, enumeration))
        .map(|(_, values)| values.iter().filter(|&&(_, v)| v == value).map(|&(n, _)| n).collect())
        .unwrap_or_default()
}

/// Converts an element (and its children) to a TTLV item.
pub fn to_item(element: &Element) -> Result<Item, TextError> {
    to_item_in(element, None, 1)
}

// Depth is bounded by the reader's limits; this guard keeps a hand-built
// element tree from exhausting the stack.
const MAX_CONVERT_DEPTH: usize = 64;

fn to_item_in(element: &Element, context: Option<&str>, depth: usize) -> Result<Item, TextError> {
    let tag =
        tag_by_name(&element.name).ok_or_else(|| TextError::UnknownTag(element.name.clone()))?;
    if depth > MAX_CONVERT_DEPTH {
        return Err(TextError::Syntax { at: 0, what: "elements nested too deep to convert" });
    }
    let item_type = match element.attribute("type") {
        None => ItemType::Structure,
        Some(t) => {
            type_by_name(t).ok_or_else(|| TextError::UnknownType { tag, found: t.to_owned() })?
        }
    };
    if item_type != ItemType::Structure {
        if !element.children.is_empty() {
            return Err(TextError::ChildrenInPrimitive { tag, item_type });
        }
        let text = element.attribute("value").unwrap_or("");
        return Ok(Item::new(tag, parse_value(tag, item_type, text, context)?));
    }
    // The Attribute Name beside an Attribute Value says how to read it.
    let attribute_name = element
        .children
        .iter()
        .find(|c| tag_by_name(&c.name) == Some(Tag::ATTRIBUTE_NAME))
        .and_then(|c| c.attribute("value"));
    let children = element
        .children
        .iter()
        .map(|c| to_item_in(c, attribute_name, depth + 1))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Item::structure(tag, children))
}

/// The item type named `name` (`TextString`, `Enumeration`, ...).
#[must_use]
pub fn type_by_name(name: &str) -> Option<ItemType> {
    Some(match name {
        "Structure" => ItemType::Structure,
        "Integer" => ItemType::Integer,
        "LongInteger" => ItemType::LongInteger,
        "BigInteger" => ItemType::BigInteger,
        "Enumeration" => ItemType::Enumeration,
        "Boolean" => ItemType::Boolean,
        "TextString" => ItemType::TextString,
        "ByteString" => ItemType::ByteString,
        "DateTime" => ItemType::DateTime,
        "Interval" => ItemType::Interval,
        "DateTimeExtended" => ItemType::DateTimeExtended,
        _ => return None,
    })
}

/// The name the encoding gives an item type.
#[must_use]
pub fn type_name(item_type: ItemType) -> &'static str {
    match item_type {
        ItemType::Structure => "Structure",
        ItemType::Integer => "Integer",
        ItemType::LongInteger => "LongInteger",
        ItemType::BigInteger => "BigInteger",
        ItemType::Enumeration => "Enumeration",
        ItemType::Boolean => "Boolean",
        ItemType::TextString => "TextString",
        ItemType::ByteString => "ByteString",
        ItemType::DateTime => "DateTime",
        ItemType::Interval => "Interval",
        ItemType::DateTimeExtended => "DateTimeExtended",
    }
}

fn hex_u64(text: &str, digits: usize) -> Option<u64> {
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
    (hex.len() <= digits && !hex.is_empty()).then(|| u64::from_str_radix(hex, 16).ok()).flatten()
}

/// Parses the `value` text of a primitive item of `item_type`; `context`
/// is the Attribute Name beside an Attribute Value, if any.
pub fn parse_value(
    tag: Tag,
    item_type: ItemType,
    text: &str,
    context: Option<&str>,
) -> Result<Value, TextError> {
    let bad = || TextError::BadValue { tag, item_type };
    let text_trimmed = text.trim();
    Ok(match item_type {
        ItemType::Structure => return Err(bad()),
        ItemType::Integer => {
            if let Ok(v) = text_trimmed.parse::<i32>() {
                Value::Integer(v)
            } else if let Some(v) = hex_u64(text_trimmed, 8) {
                Value::Integer(v as u32 as i32)
            } else {
                let Names::Mask(bits) = names_for(tag, context) else { return Err(bad()) };
                let mut mask = 0u32;
                for part in text_trimmed.split(|c: char| c == '|' || c.is_whitespace()) {
                    if part.is_empty() {
                        continue;
                    }
                    mask |= match hex_u64(part, 8) {
                        Some(v) => v as u32,
                        None => bits.iter().find(|(n, _)| same_name(n, part)).ok_or_else(bad)?.1,
                    };
                }
                Value::Integer(mask as i32)
            }
        }
        ItemType::LongInteger => match text_trimmed.parse::<i64>() {
            Ok(v) => Value::LongInteger(v),
            Err(_) => Value::LongInteger(hex_u64(text_trimmed, 16).ok_or_else(bad)? as i64),
        },
        ItemType::BigInteger => {
            let bytes = hex::decode(text_trimmed).ok_or_else(bad)?;
            if bytes.is_empty() {
                return Err(bad());
            }
            // Sign-extend to a multiple of 8 bytes, as the wire needs.
            let fill = if bytes[0] & 0x80 != 0 { 0xFF } else { 0x00 };
            let pad = (8 - bytes.len() % 8) % 8;
            let mut out = vec![fill; pad];
            out.extend_from_slice(&bytes);
            Value::BigInteger(out)
        }
        ItemType::Enumeration => {
            if let Some(v) = hex_u64(text_trimmed, 8) {
                Value::Enumeration(v as u32)
            } else {
                match names_for(tag, context) {
                    Names::Enumeration(values) => Value::Enumeration(
                        values
                            .iter()
                            .find(|(n, _)| names_value(n, text_trimmed))
                            .ok_or_else(bad)?
                            .1,
                    ),
                    Names::Tags => Value::Enumeration(tag_by_name(text_trimmed).ok_or_else(bad)?.0),
                    Names::Mask(_) | Names::None => return Err(bad()),
                }
            }
        }
        ItemType::Boolean => match text_trimmed {
            "true" | "1" => Value::Boolean(true),
            "false" | "0" => Value::Boolean(false),
            _ => return Err(bad()),
        },
        ItemType::TextString => Value::TextString(text.to_owned()),
        ItemType::ByteString => {
            Value::ByteString(Bytes::new(hex::decode(text_trimmed).ok_or_else(bad)?))
        }
        ItemType::DateTime => match hex_u64(text_trimmed, 16) {
            Some(v) => Value::DateTime(v as i64),
            None => Value::DateTime(parse_date_time(text_trimmed).ok_or_else(bad)?.0),
        },
        ItemType::DateTimeExtended => match hex_u64(text_trimmed, 16) {
            Some(v) => Value::DateTimeExtended(v as i64),
            None => {
                let (seconds, micros) = parse_date_time(text_trimmed).ok_or_else(bad)?;
                Value::DateTimeExtended(
                    seconds
                        .checked_mul(1_000_000)
                        .and_then(|s| s.checked_add(micros))
                        .ok_or_else(bad)?,
                )
            }
        },
        ItemType::Interval => match text_trimmed.parse::<u32>() {
            Ok(v) => Value::Interval(v),
            Err(_) => Value::Interval(hex_u64(text_trimmed, 8).ok_or_else(bad)? as u32),
        },
    })
}

/// The `type` and `value` texts of a primitive item (None for a
/// Structure), in the spelling [`parse_value`] reads back; `context` as
/// there.
#[must_use]
pub fn value_text(item: &Item, context: Option<&str>) -> Option<String> {
    Some(match &item.value {
        Value::Structure(_) => return None,
        Value::Integer(v) => match names_for(item.tag, context) {
            Names::Mask(bits) if *v != 0 => {
                let mut left = *v as u32;
                let mut parts = Vec::new();
                for &(n, bit) in bits {
                    if bit != 0 && left & bit == bit {
                        parts.push(camel(n));
                        left &= !bit;
                    }
                }
                if left != 0 {
                    parts.push(format!("0x{left:08X}"));
                }
                parts.join(" ")
            }
            _ => v.to_string(),
        },
        Value::LongInteger(v) => v.to_string(),
        Value::BigInteger(b) => hex::encode(b),
        Value::Enumeration(v) => match names_for(item.tag, context) {
            Names::Enumeration(values) => values
                .iter()
                .find(|&&(_, x)| x == *v)
                .map_or_else(|| format!("0x{v:08X}"), |&(n, _)| camel(n)),
            Names::Tags => element_name(Tag(*v)),
            _ => format!("0x{v:08X}"),
        },
        Value::Boolean(v) => v.to_string(),
        Value::TextString(s) => s.clone(),
        Value::ByteString(b) => hex::encode(b.as_slice()),
        Value::DateTime(s) => format_date_time(*s, None),
        Value::DateTimeExtended(us) => {
            format_date_time(us.div_euclid(1_000_000), Some(us.rem_euclid(1_000_000)))
        }
        Value::Interval(v) => v.to_string(),
    })
}

/// Writes an item as TTLV-XML, indented by two spaces a level.
#[must_use]
pub fn to_xml(item: &Item) -> String {
    let mut out = String::new();
    write_item(item, None, 0, &mut out);
    out
}

fn write_item(item: &Item, context: Option<&str>, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    let name = element_name(item.tag);
    match &item.value {
        Value::Structure(children) => {
            if children.is_empty() {
                out.push_str(&format!("{indent}<{name}/>\n"));
                return;
            }
            out.push_str(&format!("{indent}<{name}>\n"));
            let attribute_name = children
                .iter()
                .find(|c| c.tag == Tag::ATTRIBUTE_NAME)
                .and_then(|c| c.as_text().ok());
            for child in children {
                write_item(child, attribute_name, depth + 1, out);
            }
            out.push_str(&format!("{indent}</{name}>\n"));
        }
        value => {
            let text = value_text(item, context).unwrap_or_default();
            out.push_str(&format!(
                "{indent}<{name} type=\"{}\" value=\"{}\"/>\n",
                type_name(value.item_type()),
                escape(&text)
            ));
        }
    }
}

/// Parses ISO 8601 `YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)` into
/// seconds since the epoch and microseconds.
#[must_use]
pub fn parse_date_time(text: &str) -> Option<(i64, i64)> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        if s.bytes().all(|c| c.is_ascii_digit()) && !s.is_empty() {
            s.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = text.get(start..i)?;
        if digits.is_empty() || digits.len() > 9 {
            return None;
        }
        let mut padded = digits.to_owned();
        while padded.len() < 6 {
            padded.push('0');
        }
        micros = padded.get(..6)?.parse().ok()?;
    }
    let offset = match text.get(i..)? {
        "" | "Z" | "z" => 0,
        tz => {
            let sign = match tz.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if tz.len() != 6 || tz.as_bytes()[3] != b':' {
                return None;
            }
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 3600 + m * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3600 + minute * 60 + second - offset, micros))
}

/// Formats seconds since the epoch (and microseconds, for Date-Time
/// Extended) as ISO 8601 in UTC.
#[must_use]
pub fn format_date_time(seconds: i64, micros: Option<i64>) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let time = format!("{:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60);
    match micros {
        Some(us) => format!("{y:04}-{m:02}-{d:02}T{time}.{us:06}+00:00"),
        None => format!("{y:04}-{m:02}-{d:02}T{time}+00:00"),
    }
}

// Howard Hinnant's days-from-civil algorithm (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) mod hex {
    pub fn decode(text: &str) -> Option<Vec<u8>> {
        let b = text.as_bytes();
        if b.len() % 2 != 0 {
            return None;
        }
        b.chunks(2)
            .map(|pair| {
                let hi = (pair[0] as char).to_digit(16)?;
                let lo = (pair[1] as char).to_digit(16)?;
                Some((hi * 16 + lo) as u8)
            })
            .collect()
    }

    pub fn encode(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests;
