//! The LUKS2 JSON metadata as typed structures.
//!
//! Parsing goes from untrusted bytes to a `serde_json::Value` (bounded by
//! the JSON area, at most 4 MiB) and then to these types, object by object,
//! so that every error names the object it is about. Fields this crate does
//! not know are kept (`extra`) and written back unchanged, as cryptsetup
//! keeps them; keyslots, segments and digests of unknown types, and all
//! tokens, are kept as raw JSON.
//!
//! Writing is as tolerant as reading: the document as loaded is kept, and
//! every object whose typed form did not change is written back as it was
//! read, byte for byte (unknown members, member order, object order);
//! inside a changed object, members keep their places and new ones follow,
//! as json-c's in-place updates leave them in cryptsetup.
//!
//! 64-bit numbers are JSON strings of decimal digits; they are parsed with
//! overflow checks and every layout computation on them uses checked
//! arithmetic.

use std::collections::BTreeMap;

use base64ct::{Base64, Encoding};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// The most keyslots, tokens, segments or digests an id may name
/// (cryptsetup's `LUKS2_KEYSLOTS_MAX` and friends).
pub(crate) const MAX_ID: usize = 31;

/// json-c's default nesting limit, which cryptsetup's parser applies.
const MAX_DEPTH: usize = 32;

/// The nesting depth of a value (a scalar is 0, `{}` is 1).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Shortens untrusted text for an error message.
pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 48;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}...")
    }
}

/// Parses a string-uint64: ASCII digits only, no sign, no overflow.
pub(crate) fn parse_u64_str(s: &str) -> std::result::Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("\"{}\" is not an unsigned decimal number", shorten(s)));
    }
    s.parse::<u64>().map_err(|_| format!("\"{}\" does not fit in 64 bits", shorten(s)))
}

/// Parses an object name or reference: canonical decimal, at most `MAX_ID`.
pub(crate) fn parse_id(s: &str) -> std::result::Result<usize, String> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    match s.parse::<usize>() {
        // Ids above MAX_ID load (cryptsetup loads them); Rampart only
        // creates ids up to MAX_ID.
        Ok(id) if canonical && id <= u32::MAX as usize => Ok(id),
        _ => Err(format!("\"{}\" is not an object id (a decimal number)", shorten(s))),
    }
}

/// How cryptsetup reads an object's name (`numbered()`): any string of
/// decimal digits. It looks objects up by their canonical name (`"%d"`), so
/// an object named `"01"` loads but cannot be found by id; Rampart keeps
/// such names and refuses to use the object, as cryptsetup fails to.
fn parse_name(s: &str) -> std::result::Result<(usize, bool), String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("\"{}\" is not an object id (a decimal number)", shorten(s)));
    }
    let digits = s.trim_start_matches('0');
    let id = if digits.is_empty() { Ok(0) } else { digits.parse::<u32>().map(|n| n as usize) };
    match id {
        Ok(id) => Ok((id, parse_id(s).is_ok())),
        Err(_) => {
            Err(format!("\"{}\" is not an object id (it does not fit in 32 bits)", shorten(s)))
        }
    }
}

/// A string-uint64 field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct U64Str(pub(crate) u64);

impl Serialize for U64Str {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for U64Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_u64_str(&s).map(U64Str).map_err(D::Error::custom)
    }
}

/// A reference to another object by id (`"0"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct IdRef(pub(crate) usize);

impl Serialize for IdRef {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for IdRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_id(&s).map(IdRef).map_err(D::Error::custom)
    }
}

/// A segment size: a string-uint64 or `"dynamic"` (to the end of the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeField {
    Dynamic,
    Bytes(u64),
}

impl Serialize for SizeField {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Dynamic => s.serialize_str("dynamic"),
            Self::Bytes(n) => s.serialize_str(&n.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for SizeField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == "dynamic" {
            return Ok(Self::Dynamic);
        }
        match parse_u64_str(&s).map_err(D::Error::custom)? {
            0 => Err(D::Error::custom("segment size 0 is invalid")),
            n => Ok(Self::Bytes(n)),
        }
    }
}

/// Decodes a base64 field.
pub(crate) fn b64_decode(s: &str, what: &str) -> Result<Vec<u8>> {
    Base64::decode_vec(s).map_err(|_| Error::corrupt(format!("{what} is not valid base64")))
}

pub(crate) fn b64_encode(bytes: &[u8]) -> String {
    Base64::encode_string(bytes)
}

/// `config`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Config {
    pub(crate) json_size: U64Str,
    pub(crate) keyslots_size: U64Str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) flags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) requirements: Option<Requirements>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// `config.requirements`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Requirements {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mandatory: Option<Vec<String>>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// A keyslot: the `luks2` type this crate implements, or any other type
/// (for example `reencrypt`), kept verbatim.
#[derive(Debug, Clone)]
pub(crate) enum Keyslot {
    Luks2(Box<Luks2Keyslot>),
    Other { kind: String, area: Area, raw: Value },
}

impl Keyslot {
    pub(crate) fn area(&self) -> Area {
        match self {
            Self::Luks2(ks) => Area { offset: ks.area.offset.0, size: ks.area.size.0 },
            Self::Other { area, .. } => *area,
        }
    }

    pub(crate) fn kind(&self) -> &str {
        match self {
            Self::Luks2(_) => "luks2",
            Self::Other { kind, .. } => kind,
        }
    }
}

/// The bytes a keyslot occupies in the keyslots area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Area {
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// A keyslot of type `luks2`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Luks2Keyslot {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) key_size: u32,
    pub(crate) af: Af,
    pub(crate) area: RawArea,
    pub(crate) kdf: Kdf,
    /// cryptsetup reads any value here; anything but 0, 1 and 2 makes the
    /// keyslot unusable (checked when it is used).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "any_priority")]
    pub(crate) priority: Option<i64>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// The anti-forensic splitter object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Af {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Any JSON integer: checked when the keyslot is used.
    pub(crate) stripes: i64,
    pub(crate) hash: String,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// A `raw` keyslot area.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RawArea {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) offset: U64Str,
    pub(crate) size: U64Str,
    pub(crate) encryption: String,
    /// Any JSON integer: checked when the keyslot is used.
    pub(crate) key_size: i64,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// The keyslot PBKDF object, with the fields cryptsetup requires of each
/// type (it drops any others when it repairs a header). The costs are any
/// JSON integers, as cryptsetup loads them: legacy or hostile values are
/// refused when the keyslot is used, never at load. KDF types cryptsetup
/// does not know are loaded as `Other`, as cryptsetup loads them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum Kdf {
    #[serde(rename = "pbkdf2")]
    Pbkdf2 { hash: String, iterations: i64, salt: String },
    #[serde(rename = "argon2i")]
    Argon2i { time: i64, memory: i64, cpus: i64, salt: String },
    #[serde(rename = "argon2id")]
    Argon2id { time: i64, memory: i64, cpus: i64, salt: String },
    #[serde(other)]
    Other,
}

/// A priority as cryptsetup reads it (`json_object_get_int`): integers as
/// they are, anything else as an invalid value.
fn any_priority<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(Some(v.as_i64().unwrap_or(-1)))
}

/// A segment: `crypt`, or any other type kept verbatim.
#[derive(Debug, Clone)]
pub(crate) enum SegmentJson {
    Crypt(Box<CryptSegment>),
    Other { kind: String, offset: u64, size: SizeField, raw: Value },
}

impl SegmentJson {
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Self::Crypt(s) => s.offset.0,
            Self::Other { offset, .. } => *offset,
        }
    }

    pub(crate) fn size(&self) -> SizeField {
        match self {
            Self::Crypt(s) => s.size,
            Self::Other { size, .. } => *size,
        }
    }

    pub(crate) fn kind(&self) -> &str {
        match self {
            Self::Crypt(_) => "crypt",
            Self::Other { kind, .. } => kind,
        }
    }

    pub(crate) fn flags(&self) -> Vec<String> {
        match self {
            Self::Crypt(s) => s.flags.clone().unwrap_or_default(),
            Self::Other { raw, .. } => raw
                .get("flags")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
        }
    }
}

/// A `crypt` segment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CryptSegment {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) offset: U64Str,
    pub(crate) size: SizeField,
    pub(crate) iv_tweak: U64Str,
    pub(crate) encryption: String,
    pub(crate) sector_size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) integrity: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) flags: Option<Vec<String>>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// A digest: `pbkdf2`, or any other type kept verbatim.
#[derive(Debug, Clone)]
pub(crate) enum DigestJson {
    Pbkdf2(Box<Pbkdf2Digest>),
    Other { keyslots: Vec<IdRef>, segments: Vec<IdRef>, raw: Value },
}

impl DigestJson {
    pub(crate) fn keyslots(&self) -> &[IdRef] {
        match self {
            Self::Pbkdf2(d) => &d.keyslots,
            Self::Other { keyslots, .. } => keyslots,
        }
    }

    pub(crate) fn segments(&self) -> &[IdRef] {
        match self {
            Self::Pbkdf2(d) => &d.segments,
            Self::Other { segments, .. } => segments,
        }
    }

    /// Replaces the segment references.
    pub(crate) fn set_segments(&mut self, list: Vec<IdRef>) {
        match self {
            Self::Pbkdf2(d) => d.segments = list,
            Self::Other { segments, raw, .. } => {
                let values: Vec<Value> =
                    list.iter().map(|k| Value::String(k.0.to_string())).collect();
                *segments = list;
                if let Some(obj) = raw.as_object_mut() {
                    obj.insert("segments".into(), Value::Array(values));
                }
            }
        }
    }

    pub(crate) fn remove_keyslot(&mut self, slot: usize) {
        match self {
            Self::Pbkdf2(d) => d.keyslots.retain(|k| k.0 != slot),
            Self::Other { keyslots, raw, .. } => {
                keyslots.retain(|k| k.0 != slot);
                let list: Vec<Value> =
                    keyslots.iter().map(|k| Value::String(k.0.to_string())).collect();
                if let Some(obj) = raw.as_object_mut() {
                    obj.insert("keyslots".into(), Value::Array(list));
                }
            }
        }
    }
}

/// A `pbkdf2` digest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pbkdf2Digest {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) keyslots: Vec<IdRef>,
    pub(crate) segments: Vec<IdRef>,
    pub(crate) hash: String,
    pub(crate) iterations: u32,
    pub(crate) salt: String,
    pub(crate) digest: String,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// The whole JSON metadata.
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    pub(crate) keyslots: BTreeMap<usize, Keyslot>,
    pub(crate) tokens: BTreeMap<usize, Value>,
    pub(crate) segments: BTreeMap<usize, SegmentJson>,
    pub(crate) digests: BTreeMap<usize, DigestJson>,
    pub(crate) config: Config,
    /// Unknown top-level members.
    pub(crate) extra: Map<String, Value>,
    /// Object names that are not canonical ids (`"01"`), by section and id.
    pub(crate) odd_names: BTreeMap<(Section, usize), String>,
    /// The document as loaded, for writing untouched objects back as they
    /// were; `None` for a header made here.
    pub(crate) source: Option<std::sync::Arc<Source>>,
}

/// The sections of numbered objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    Keyslots,
    Tokens,
    Segments,
    Digests,
}

/// A loaded document and its typed form at load time.
#[derive(Debug)]
pub(crate) struct Source {
    /// The JSON text as parsed (member order kept).
    document: Value,
    /// What the typed model wrote for it right after loading: a member
    /// whose typed form still equals this is written back from `document`.
    typed: Value,
}

/// `new` laid out as `src`: a value the typed model left as it was when it
/// read `src` (`base`) is `src` itself; in a changed object, members keep
/// their order, members the model dropped stay dropped, new ones follow.
fn preserve(src: &Value, base: Option<&Value>, new: &Value) -> Value {
    if base == Some(new) {
        return src.clone();
    }
    match (src, new) {
        (Value::Object(src), Value::Object(new_map)) => {
            let base = base.and_then(Value::as_object);
            let mut out = Map::new();
            for (name, old) in src {
                if let Some(value) = new_map.get(name) {
                    let before = base.and_then(|b| b.get(name));
                    out.insert(name.clone(), preserve(old, before, value));
                }
            }
            for (name, value) in new_map {
                if !src.contains_key(name) {
                    out.insert(name.clone(), value.clone());
                }
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

fn typed<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::corrupt(format!("{what}: {e}")))
}

fn take_object(top: &mut Map<String, Value>, name: &str) -> Result<Map<String, Value>> {
    match top.remove(name) {
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(Error::corrupt(format!("JSON metadata: \"{name}\" is not an object"))),
        None => Err(Error::corrupt(format!("JSON metadata: the \"{name}\" section is missing"))),
    }
}

fn numbered<T>(
    section: Map<String, Value>,
    kind: Section,
    odd_names: &mut BTreeMap<(Section, usize), String>,
    what: &str,
    mut parse: impl FnMut(usize, Value) -> Result<T>,
) -> Result<BTreeMap<usize, T>> {
    let mut out = BTreeMap::new();
    for (name, value) in section {
        let (id, canonical) =
            parse_name(&name).map_err(|e| Error::corrupt(format!("{what} name {e}")))?;
        if !value.is_object() {
            return Err(Error::corrupt(format!("{what} {id} is not an object")));
        }
        if out.contains_key(&id) {
            return Err(Error::corrupt(format!(
                "two {what}s are both numbered {id} (\"{}\")",
                shorten(&name)
            )));
        }
        if !canonical {
            odd_names.insert((kind, id), name);
        }
        out.insert(id, parse(id, value)?);
    }
    Ok(out)
}

fn type_of(value: &Value, what: &str) -> Result<String> {
    value
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Error::corrupt(format!("{what} has no \"type\" string")))
}

fn refs(value: &Value, field: &str, what: &str) -> Result<Vec<IdRef>> {
    match value.get(field) {
        Some(list) => typed(list.clone(), &format!("{what} \"{field}\"")),
        None => Err(Error::corrupt(format!("{what} has no \"{field}\" array"))),
    }
}

#[derive(Deserialize)]
struct AreaBounds {
    offset: U64Str,
    size: U64Str,
}

#[derive(Deserialize)]
struct SegmentBounds {
    offset: U64Str,
    size: SizeField,
}

impl Metadata {
    /// Parses the JSON text of a metadata area.
    pub(crate) fn parse(text: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(text)
            .map_err(|e| Error::corrupt(format!("JSON metadata does not parse: {e}")))?;
        if depth(&value) > MAX_DEPTH {
            return Err(Error::corrupt(format!(
                "JSON metadata nests deeper than {MAX_DEPTH} levels (json-c's limit)"
            )));
        }
        let document = value.clone();
        let Value::Object(mut top) = value else {
            return Err(Error::corrupt("JSON metadata is not an object"));
        };
        let mut odd_names = BTreeMap::new();
        let names = &mut odd_names;
        let keyslots = numbered(
            take_object(&mut top, "keyslots")?,
            Section::Keyslots,
            names,
            "keyslot",
            |id, v| {
                let what = format!("keyslot {id}");
                let kind = type_of(&v, &what)?;
                match v.get("key_size") {
                    Some(Value::Number(n))
                        if n.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)) => {}
                    _ => {
                        return Err(Error::corrupt(format!(
                            "{what}: \"key_size\" is not a 32-bit unsigned integer"
                        )))
                    }
                }
                if kind == "luks2" {
                    Ok(Keyslot::Luks2(Box::new(typed(v, &what)?)))
                } else {
                    let area = v
                        .get("area")
                        .cloned()
                        .ok_or_else(|| Error::corrupt(format!("{what} has no \"area\" object")))?;
                    let bounds: AreaBounds = typed(area, &format!("{what} area"))?;
                    Ok(Keyslot::Other {
                        kind,
                        area: Area { offset: bounds.offset.0, size: bounds.size.0 },
                        raw: v,
                    })
                }
            },
        )?;
        let tokens =
            numbered(take_object(&mut top, "tokens")?, Section::Tokens, names, "token", |_, v| {
                Ok(v)
            })?;
        let segments = numbered(
            take_object(&mut top, "segments")?,
            Section::Segments,
            names,
            "segment",
            |id, v| {
                let what = format!("segment {id}");
                let kind = type_of(&v, &what)?;
                if kind == "crypt" {
                    let seg: CryptSegment = typed(v, &what)?;
                    if seg.encryption.is_empty() {
                        return Err(Error::corrupt(format!("{what}: \"encryption\" is empty")));
                    }
                    if let Some(integrity) = &seg.integrity {
                        let ok =
                            ["type", "journal_encryption", "journal_integrity"].iter().all(|f| {
                                integrity
                                    .get(f)
                                    .and_then(Value::as_str)
                                    .is_some_and(|s| !s.is_empty())
                            });
                        if !ok {
                            return Err(Error::corrupt(format!(
                            "{what}: \"integrity\" needs type, journal_encryption and journal_integrity strings"
                        )));
                        }
                    }
                    Ok(SegmentJson::Crypt(Box::new(seg)))
                } else {
                    let bounds: SegmentBounds = typed(v.clone(), &what)?;
                    Ok(SegmentJson::Other {
                        kind,
                        offset: bounds.offset.0,
                        size: bounds.size,
                        raw: v,
                    })
                }
            },
        )?;
        let digests = numbered(
            take_object(&mut top, "digests")?,
            Section::Digests,
            names,
            "digest",
            |id, v| {
                let what = format!("digest {id}");
                let kind = type_of(&v, &what)?;
                // Digest fields are checked when the digest is used, as
                // cryptsetup checks them: a pbkdf2 digest Rampart cannot read
                // is kept as it is.
                let pbkdf2 = if kind == "pbkdf2" {
                    typed::<Pbkdf2Digest>(v.clone(), &what).ok()
                } else {
                    None
                };
                if let Some(d) = pbkdf2 {
                    Ok(DigestJson::Pbkdf2(Box::new(d)))
                } else {
                    Ok(DigestJson::Other {
                        keyslots: refs(&v, "keyslots", &what)?,
                        segments: refs(&v, "segments", &what)?,
                        raw: v,
                    })
                }
            },
        )?;
        let config: Config = typed(Value::Object(take_object(&mut top, "config")?), "config")?;
        let mut meta = Self {
            keyslots,
            tokens,
            segments,
            digests,
            config,
            extra: top,
            odd_names,
            source: None,
        };
        let typed = meta.typed_value()?;
        meta.source = Some(std::sync::Arc::new(Source { document, typed }));
        Ok(meta)
    }

    /// The metadata as JSON, untouched objects as they were loaded.
    pub(crate) fn to_value(&self) -> Result<Value> {
        let new = self.typed_value()?;
        Ok(match &self.source {
            Some(source) => preserve(&source.document, Some(&source.typed), &new),
            None => new,
        })
    }

    /// The name of object `id` of a section: its id, or the name it was
    /// loaded with.
    fn name_of(&self, section: Section, id: usize) -> String {
        self.odd_names.get(&(section, id)).cloned().unwrap_or_else(|| id.to_string())
    }

    /// Whether object `id` of a section has a canonical name, that is,
    /// whether cryptsetup can find it by id.
    pub(crate) fn reachable(&self, section: Section, id: usize) -> bool {
        !self.odd_names.contains_key(&(section, id))
    }

    /// The metadata as the typed model writes it.
    fn typed_value(&self) -> Result<Value> {
        let section = |kind: Section, items: Vec<(usize, Value)>| {
            let mut out = Map::new();
            for (id, item) in items {
                out.insert(self.name_of(kind, id), item);
            }
            Value::Object(out)
        };
        fn each<T>(
            map: &BTreeMap<usize, T>,
            mut f: impl FnMut(&T) -> Result<Value>,
        ) -> Result<Vec<(usize, Value)>> {
            map.iter().map(|(id, item)| Ok((*id, f(item)?))).collect()
        }
        let ser = |e: serde_json::Error| Error::corrupt(format!("cannot encode metadata: {e}"));
        let mut top = self.extra.clone();
        top.insert(
            "keyslots".into(),
            section(
                Section::Keyslots,
                each(&self.keyslots, |k| match k {
                    Keyslot::Luks2(ks) => serde_json::to_value(ks).map_err(ser),
                    Keyslot::Other { raw, .. } => Ok(raw.clone()),
                })?,
            ),
        );
        top.insert(
            "tokens".into(),
            section(Section::Tokens, each(&self.tokens, |t| Ok(t.clone()))?),
        );
        top.insert(
            "segments".into(),
            section(
                Section::Segments,
                each(&self.segments, |s| match s {
                    SegmentJson::Crypt(seg) => serde_json::to_value(seg).map_err(ser),
                    SegmentJson::Other { raw, .. } => Ok(raw.clone()),
                })?,
            ),
        );
        top.insert(
            "digests".into(),
            section(
                Section::Digests,
                each(&self.digests, |d| match d {
                    DigestJson::Pbkdf2(dg) => serde_json::to_value(dg).map_err(ser),
                    DigestJson::Other { raw, .. } => Ok(raw.clone()),
                })?,
            ),
        );
        top.insert("config".into(), serde_json::to_value(&self.config).map_err(ser)?);
        Ok(Value::Object(top))
    }

    /// Compact JSON text, as stored in the metadata area.
    pub(crate) fn to_text(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(&self.to_value()?)
            .map_err(|e| Error::corrupt(format!("cannot encode metadata: {e}")))
    }

    /// The digest a keyslot is assigned to.
    pub(crate) fn digest_of_keyslot(&self, slot: usize) -> Option<(usize, &DigestJson)> {
        self.digests
            .iter()
            .find(|(_, d)| d.keyslots().iter().any(|k| k.0 == slot))
            .map(|(id, d)| (*id, d))
    }

    /// The digest assigned to a segment.
    pub(crate) fn digest_of_segment(&self, segment: usize) -> Option<(usize, &DigestJson)> {
        self.digests
            .iter()
            .find(|(_, d)| d.segments().iter().any(|s| s.0 == segment))
            .map(|(id, d)| (*id, d))
    }

    /// The mandatory requirements listed in `config`.
    pub(crate) fn mandatory_requirements(&self) -> Vec<String> {
        self.config.requirements.as_ref().and_then(|r| r.mandatory.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_strings() {
        assert_eq!(parse_u64_str("16777216"), Ok(16_777_216));
        assert_eq!(parse_u64_str("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_u64_str("18446744073709551616").unwrap_err().contains("64 bits"));
        for bad in ["", "+1", "-1", " 1", "1 ", "0x10", "1e3"] {
            assert!(parse_u64_str(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("0"), Ok(0));
        assert_eq!(parse_id("31"), Ok(31));
        assert_eq!(parse_id("40"), Ok(40));
        for bad in ["", "01", "-1", "a", "99999999999999999999999"] {
            assert!(parse_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let text = br#"{"keyslots":{},"tokens":{"0":{"type":"x","keyslots":[],"k":[1,{"a":null}]}},
            "segments":{"0":{"type":"crypt","offset":"16777216","size":"dynamic","iv_tweak":"0",
            "encryption":"aes-xts-plain64","sector_size":4096,"vendor":"v"}},
            "digests":{"0":{"type":"pbkdf2","keyslots":[],"segments":["0"],"hash":"sha256",
            "iterations":1000,"salt":"AA==","digest":"AA==","note":1}},
            "config":{"json_size":"12288","keyslots_size":"16744448","x-cfg":true},
            "future":{"a":1}}"#;
        let meta = Metadata::parse(text).unwrap();
        let again = Metadata::parse(&meta.to_text().unwrap()).unwrap();
        let v = again.to_value().unwrap();
        assert_eq!(v["future"]["a"], 1);
        assert_eq!(v["segments"]["0"]["vendor"], "v");
        assert_eq!(v["digests"]["0"]["note"], 1);
        assert_eq!(v["config"]["x-cfg"], true);
        assert_eq!(v["tokens"]["0"]["k"][1]["a"], Value::Null);
    }

    #[test]
    fn untouched_objects_keep_their_bytes_and_changed_ones_their_order() {
        let text = br#"{"config":{"x":{"b":1,"a":2},"json_size":"12288","keyslots_size":"16744448"},"tokens":{"01":{"z":1,"type":"t","keyslots":[]},"3":{"type":"u","keyslots":[]}},"segments":{"0":{"type":"crypt","offset":"16777216","size":"dynamic","iv_tweak":"0","encryption":"aes-xts-plain64","sector_size":4096}},"keyslots":{},"digests":{"0":{"type":"pbkdf2","keyslots":[],"segments":["0"],"hash":"sha256","iterations":1000,"salt":"AA==","digest":"AA==","note":1}}}"#;
        let meta = Metadata::parse(text).unwrap();
        assert_eq!(meta.to_text().unwrap(), text.to_vec());
        assert!(!meta.reachable(Section::Tokens, 1));
        let mut changed = meta.clone();
        changed.tokens.remove(&3);
        changed.tokens.insert(2, serde_json::json!({"type": "new", "keyslots": []}));
        if let Some(DigestJson::Pbkdf2(d)) = changed.digests.get_mut(&0) {
            d.iterations = 2000;
        }
        let out = String::from_utf8(changed.to_text().unwrap()).unwrap();
        assert!(out.starts_with(r#"{"config":{"x":{"b":1,"a":2},"#), "{out}");
        assert!(
            out.contains(r#""tokens":{"01":{"z":1,"type":"t","keyslots":[]},"2":{"type":"new""#),
            "{out}"
        );
        assert!(
            out.contains(r#""iterations":2000,"salt":"AA==","digest":"AA==","note":1}"#),
            "{out}"
        );
    }
}
