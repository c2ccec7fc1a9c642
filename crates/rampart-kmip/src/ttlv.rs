//! Binary TTLV (KMIP 1.4 §9.1, KMIP 2.1 §15): every item is a 3-byte tag,
//! a 1-byte type, a 4-byte big-endian length and the value, padded with
//! zero bytes to a multiple of 8. A Structure's value is its items.
//!
//! Untrusted bytes go through one [`Reader`]: every length is checked
//! against the bytes that are actually there before anything is sliced or
//! copied, the message length against [`Limits::max_message_len`] before
//! its buffer is allocated ([`message_len`]), and nesting depth and the
//! number of items against [`Limits`] as they are read. Nothing is ever
//! allocated from a length field alone.
//!
//! The codec is a leaf: it knows tags and nothing of KMIP operations, and
//! fails with its own [`TtlvError`], which [`crate::error::TtlvError`]
//! wraps (and maps to a Result Reason) in one place.

use crate::tag::Tag;
use zeroize::Zeroizing;

/// A failure of the codec: bytes that are not valid TTLV (the bounded
/// reader), a value that cannot be encoded, or a structure whose fields
/// are not what typed access ([`Item::as_int`], [`Fields`]) expects.
///
/// No variant carries a value: errors name tags, types and lengths only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TtlvError {
    // Decoding (the bounded reader).
    #[error("truncated TTLV: {needed} bytes needed, {left} left")]
    Truncated { needed: usize, left: usize },
    #[error("TTLV message of {len} bytes is longer than the {max} accepted")]
    TooLong { len: usize, max: usize },
    #[error("TTLV structures nested deeper than {max}")]
    TooDeep { max: usize },
    #[error("more than {max} TTLV items in one message")]
    TooManyItems { max: usize },
    #[error("{tag}: unknown item type 0x{item_type:02X}")]
    UnknownType { tag: Tag, item_type: u8 },
    #[error("{tag}: length {len} is not valid for a {item_type:?}")]
    BadLength { tag: Tag, item_type: ItemType, len: usize },
    #[error("{tag}: non-zero padding")]
    BadPadding { tag: Tag },
    #[error("{tag}: boolean value {value} is neither 0 nor 1")]
    BadBoolean { tag: Tag, value: u64 },
    #[error("{tag}: text string is not UTF-8")]
    BadUtf8 { tag: Tag },
    #[error("{len} bytes after the end of the TTLV item")]
    TrailingBytes { len: usize },
    #[error("a KMIP message must be a structure, {tag} is not")]
    NotAStructure { tag: Tag },

    // Typed access to decoded items.
    #[error("{tag}: expected a {expected:?}, found a {found:?}")]
    WrongType { tag: Tag, expected: ItemType, found: ItemType },
    #[error("{within}: {tag} is missing")]
    Missing { tag: Tag, within: Tag },
    #[error("{within}: {tag} appears more than once")]
    Duplicate { tag: Tag, within: Tag },
}

/// The bytes of a tag, type and length.
pub const HEADER_LEN: usize = 8;

/// Bounds for decoding untrusted TTLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one whole message (its header included).
    pub max_message_len: usize,
    /// Structures inside structures: the message itself is depth 1.
    /// Real KMIP 1.x/2.x messages reach 8 (a Key Wrapping Specification's
    /// Cryptographic Parameters inside a Get payload).
    pub max_depth: usize,
    /// Items in the whole message, structures included.
    pub max_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_message_len: 1 << 20, max_depth: 16, max_items: 16_384 }
    }
}

/// The item types of KMIP 1.0–2.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ItemType {
    Structure = 0x01,
    Integer = 0x02,
    LongInteger = 0x03,
    BigInteger = 0x04,
    Enumeration = 0x05,
    Boolean = 0x06,
    TextString = 0x07,
    ByteString = 0x08,
    DateTime = 0x09,
    Interval = 0x0A,
    /// KMIP 2.0: microseconds since the epoch.
    DateTimeExtended = 0x0B,
}

impl ItemType {
    #[must_use]
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0x01 => Self::Structure,
            0x02 => Self::Integer,
            0x03 => Self::LongInteger,
            0x04 => Self::BigInteger,
            0x05 => Self::Enumeration,
            0x06 => Self::Boolean,
            0x07 => Self::TextString,
            0x08 => Self::ByteString,
            0x09 => Self::DateTime,
            0x0A => Self::Interval,
            0x0B => Self::DateTimeExtended,
            _ => return None,
        })
    }

    /// The value length every item of this type has, for fixed-size types.
    #[must_use]
    pub fn fixed_len(self) -> Option<usize> {
        match self {
            Self::Integer | Self::Enumeration | Self::Interval => Some(4),
            Self::LongInteger | Self::Boolean | Self::DateTime | Self::DateTimeExtended => Some(8),
            _ => None,
        }
    }
}

/// A Byte String value: zeroized when dropped (it may be key material) and
/// shown by `Debug` only as its length.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Bytes(Zeroizing<Vec<u8>>);

impl Bytes {
    #[must_use]
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Zeroizing::new(bytes))
    }
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&[u8]> for Bytes {
    fn from(b: &[u8]) -> Self {
        Self::new(b.to_vec())
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

/// A typed TTLV value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Structure(Vec<Item>),
    Integer(i32),
    LongInteger(i64),
    /// Two's complement, big-endian, a multiple of 8 bytes (as on the wire).
    BigInteger(Vec<u8>),
    Enumeration(u32),
    Boolean(bool),
    TextString(String),
    ByteString(Bytes),
    /// Seconds since 1970-01-01 00:00:00 UTC.
    DateTime(i64),
    /// Seconds.
    Interval(u32),
    /// Microseconds since 1970-01-01 00:00:00 UTC (KMIP 2.0).
    DateTimeExtended(i64),
}

impl Value {
    #[must_use]
    pub fn item_type(&self) -> ItemType {
        match self {
            Self::Structure(_) => ItemType::Structure,
            Self::Integer(_) => ItemType::Integer,
            Self::LongInteger(_) => ItemType::LongInteger,
            Self::BigInteger(_) => ItemType::BigInteger,
            Self::Enumeration(_) => ItemType::Enumeration,
            Self::Boolean(_) => ItemType::Boolean,
            Self::TextString(_) => ItemType::TextString,
            Self::ByteString(_) => ItemType::ByteString,
            Self::DateTime(_) => ItemType::DateTime,
            Self::Interval(_) => ItemType::Interval,
            Self::DateTimeExtended(_) => ItemType::DateTimeExtended,
        }
    }
}

/// One TTLV item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub tag: Tag,
    pub value: Value,
}

/// A cursor over untrusted bytes: every read checks what is left first.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    cursor: usize,
}

impl<'a> Reader<'a> {
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, cursor: 0 }
    }

    #[must_use]
    pub fn left(&self) -> usize {
        self.buf.len() - self.cursor
    }

    #[must_use]
    pub fn any_left(&self) -> bool {
        self.cursor < self.buf.len()
    }

    /// The next `len` bytes, or `Truncated` if fewer are left.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], TtlvError> {
        if len > self.left() {
            return Err(TtlvError::Truncated { needed: len, left: self.left() });
        }
        let start = self.cursor;
        self.cursor += len;
        Ok(&self.buf[start..self.cursor])
    }

    /// A reader over the next `len` bytes (a structure's value).
    pub fn sub(&mut self, len: usize) -> Result<Reader<'a>, TtlvError> {
        self.take(len).map(Reader::new)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TtlvError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

/// The length of the whole message that starts with `header` (its first
/// eight bytes), checked before the rest is read or a buffer allocated:
/// the outer item must be a Structure and fit in `limits.max_message_len`.
pub fn message_len(header: &[u8; HEADER_LEN], limits: &Limits) -> Result<usize, TtlvError> {
    let tag = Tag(u32::from_be_bytes([0, header[0], header[1], header[2]]));
    if header[3] != ItemType::Structure as u8 {
        return Err(TtlvError::NotAStructure { tag });
    }
    let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let total = len.saturating_add(HEADER_LEN);
    if total > limits.max_message_len {
        return Err(TtlvError::TooLong { len: total, max: limits.max_message_len });
    }
    Ok(total)
}

/// Decodes exactly one item that spans all of `bytes`.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Item, TtlvError> {
    if bytes.len() > limits.max_message_len {
        return Err(TtlvError::TooLong { len: bytes.len(), max: limits.max_message_len });
    }
    let mut reader = Reader::new(bytes);
    let mut items = 0usize;
    let item = read_item(&mut reader, limits, 1, &mut items)?;
    if reader.any_left() {
        return Err(TtlvError::TrailingBytes { len: reader.left() });
    }
    Ok(item)
}

fn padded(len: usize) -> usize {
    // `len` is at most u32::MAX, so this cannot overflow a 64-bit usize;
    // saturating keeps 32-bit targets correct (the take then fails).
    len.saturating_add(7) & !7
}

fn read_item(
    r: &mut Reader<'_>,
    limits: &Limits,
    depth: usize,
    items: &mut usize,
) -> Result<Item, TtlvError> {
    *items += 1;
    if *items > limits.max_items {
        return Err(TtlvError::TooManyItems { max: limits.max_items });
    }
    let header: [u8; HEADER_LEN] = r.array()?;
    let tag = Tag(u32::from_be_bytes([0, header[0], header[1], header[2]]));
    let item_type = ItemType::from_byte(header[3])
        .ok_or(TtlvError::UnknownType { tag, item_type: header[3] })?;
    let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let bad_len = || TtlvError::BadLength { tag, item_type, len };
    if let Some(fixed) = item_type.fixed_len() {
        if len != fixed {
            return Err(bad_len());
        }
    }
    let value = match item_type {
        ItemType::Structure => {
            if depth >= limits.max_depth {
                return Err(TtlvError::TooDeep { max: limits.max_depth });
            }
            if len % 8 != 0 {
                return Err(bad_len());
            }
            let mut sub = r.sub(len)?;
            let mut children = Vec::new();
            while sub.any_left() {
                children.push(read_item(&mut sub, limits, depth + 1, items)?);
            }
            return Ok(Item { tag, value: Value::Structure(children) });
        }
        ItemType::BigInteger if len % 8 != 0 || len == 0 => return Err(bad_len()),
        _ => {
            let raw = r.take(padded(len))?;
            let (data, pad) = raw.split_at(len);
            if pad.iter().any(|&b| b != 0) {
                return Err(TtlvError::BadPadding { tag });
            }
            decode_primitive(tag, item_type, data)?
        }
    };
    Ok(Item { tag, value })
}

fn decode_primitive(tag: Tag, item_type: ItemType, data: &[u8]) -> Result<Value, TtlvError> {
    let be4 = || u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    let be8 = || {
        let mut a = [0u8; 8];
        a.copy_from_slice(data);
        u64::from_be_bytes(a)
    };
    // Fixed lengths were checked by the caller, so the slices above are
    // exactly 4 or 8 bytes long.
    Ok(match item_type {
        ItemType::Integer => Value::Integer(be4() as i32),
        ItemType::Enumeration => Value::Enumeration(be4()),
        ItemType::Interval => Value::Interval(be4()),
        ItemType::LongInteger => Value::LongInteger(be8() as i64),
        ItemType::DateTime => Value::DateTime(be8() as i64),
        ItemType::DateTimeExtended => Value::DateTimeExtended(be8() as i64),
        ItemType::Boolean => match be8() {
            0 => Value::Boolean(false),
            1 => Value::Boolean(true),
            value => return Err(TtlvError::BadBoolean { tag, value }),
        },
        ItemType::BigInteger => Value::BigInteger(data.to_vec()),
        ItemType::TextString => Value::TextString(
            std::str::from_utf8(data).map_err(|_| TtlvError::BadUtf8 { tag })?.to_owned(),
        ),
        ItemType::ByteString => Value::ByteString(Bytes::from(data)),
        // Structures never get here (read_item reads them); refuse rather than panic.
        ItemType::Structure => return Err(TtlvError::NotAStructure { tag }),
    })
}

impl Item {
    #[must_use]
    pub fn new(tag: Tag, value: Value) -> Self {
        Self { tag, value }
    }
    #[must_use]
    pub fn structure(tag: Tag, items: Vec<Item>) -> Self {
        Self::new(tag, Value::Structure(items))
    }
    #[must_use]
    pub fn int(tag: Tag, v: i32) -> Self {
        Self::new(tag, Value::Integer(v))
    }
    #[must_use]
    pub fn long(tag: Tag, v: i64) -> Self {
        Self::new(tag, Value::LongInteger(v))
    }
    #[must_use]
    pub fn enumeration(tag: Tag, v: u32) -> Self {
        Self::new(tag, Value::Enumeration(v))
    }
    #[must_use]
    pub fn boolean(tag: Tag, v: bool) -> Self {
        Self::new(tag, Value::Boolean(v))
    }
    #[must_use]
    pub fn text(tag: Tag, v: impl Into<String>) -> Self {
        Self::new(tag, Value::TextString(v.into()))
    }
    #[must_use]
    pub fn bytes(tag: Tag, v: &[u8]) -> Self {
        Self::new(tag, Value::ByteString(Bytes::from(v)))
    }
    #[must_use]
    pub fn date_time(tag: Tag, seconds: i64) -> Self {
        Self::new(tag, Value::DateTime(seconds))
    }
    #[must_use]
    pub fn interval(tag: Tag, seconds: u32) -> Self {
        Self::new(tag, Value::Interval(seconds))
    }

    /// The encoded size of this item, header and padding included.
    #[must_use]
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + padded(self.value_len())
    }

    fn value_len(&self) -> usize {
        match &self.value {
            Value::Structure(items) => items.iter().map(Item::encoded_len).sum(),
            Value::Integer(_) | Value::Enumeration(_) | Value::Interval(_) => 4,
            Value::LongInteger(_)
            | Value::Boolean(_)
            | Value::DateTime(_)
            | Value::DateTimeExtended(_) => 8,
            Value::BigInteger(b) => b.len(),
            Value::TextString(s) => s.len(),
            Value::ByteString(b) => b.len(),
        }
    }

    /// Encodes the item. Fails only for a value longer than a TTLV length
    /// can say (4 GiB) or a Big Integer that is not a multiple of 8 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, TtlvError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), TtlvError> {
        let len = self.value_len();
        let wire_len =
            u32::try_from(len).map_err(|_| TtlvError::TooLong { len, max: u32::MAX as usize })?;
        out.extend_from_slice(&self.tag.0.to_be_bytes()[1..]);
        out.push(self.value.item_type() as u8);
        out.extend_from_slice(&wire_len.to_be_bytes());
        match &self.value {
            Value::Structure(items) => {
                for item in items {
                    item.encode_into(out)?;
                }
                return Ok(());
            }
            Value::Integer(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Enumeration(v) | Value::Interval(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::LongInteger(v) | Value::DateTime(v) | Value::DateTimeExtended(v) => {
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Boolean(v) => out.extend_from_slice(&u64::from(*v).to_be_bytes()),
            Value::BigInteger(b) => {
                if b.is_empty() || b.len() % 8 != 0 {
                    return Err(TtlvError::BadLength {
                        tag: self.tag,
                        item_type: ItemType::BigInteger,
                        len,
                    });
                }
                out.extend_from_slice(b);
            }
            Value::TextString(s) => out.extend_from_slice(s.as_bytes()),
            Value::ByteString(b) => out.extend_from_slice(b.as_slice()),
        }
        out.resize(out.len() + (padded(len) - len), 0);
        Ok(())
    }

    // Typed access, for parsing messages: a wrong type is an error that
    // names the tag.

    fn wrong_type(&self, expected: ItemType) -> TtlvError {
        TtlvError::WrongType { tag: self.tag, expected, found: self.value.item_type() }
    }

    pub fn children(&self) -> Result<&[Item], TtlvError> {
        match &self.value {
            Value::Structure(items) => Ok(items),
            _ => Err(self.wrong_type(ItemType::Structure)),
        }
    }
    pub fn as_int(&self) -> Result<i32, TtlvError> {
        match self.value {
            Value::Integer(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::Integer)),
        }
    }
    pub fn as_long(&self) -> Result<i64, TtlvError> {
        match self.value {
            Value::LongInteger(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::LongInteger)),
        }
    }
    pub fn as_enum(&self) -> Result<u32, TtlvError> {
        match self.value {
            Value::Enumeration(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::Enumeration)),
        }
    }
    pub fn as_bool(&self) -> Result<bool, TtlvError> {
        match self.value {
            Value::Boolean(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::Boolean)),
        }
    }
    pub fn as_text(&self) -> Result<&str, TtlvError> {
        match &self.value {
            Value::TextString(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::TextString)),
        }
    }
    pub fn as_bytes(&self) -> Result<&[u8], TtlvError> {
        match &self.value {
            Value::ByteString(v) => Ok(v.as_slice()),
            _ => Err(self.wrong_type(ItemType::ByteString)),
        }
    }
    /// A Date-Time (seconds); a KMIP 2.0 Date-Time Extended is truncated
    /// to seconds.
    pub fn as_date_time(&self) -> Result<i64, TtlvError> {
        match self.value {
            Value::DateTime(v) => Ok(v),
            Value::DateTimeExtended(v) => Ok(v.div_euclid(1_000_000)),
            _ => Err(self.wrong_type(ItemType::DateTime)),
        }
    }
    pub fn as_interval(&self) -> Result<u32, TtlvError> {
        match self.value {
            Value::Interval(v) => Ok(v),
            _ => Err(self.wrong_type(ItemType::Interval)),
        }
    }
}

/// The fields of a structure, looked up by tag.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub tag: Tag,
    pub items: &'a [Item],
}

impl<'a> Fields<'a> {
    pub fn of(item: &'a Item) -> Result<Self, TtlvError> {
        Ok(Self { tag: item.tag, items: item.children()? })
    }

    /// The item with `tag`, if there is exactly zero or one.
    pub fn optional(&self, tag: Tag) -> Result<Option<&'a Item>, TtlvError> {
        let mut found = self.items.iter().filter(|i| i.tag == tag);
        let first = found.next();
        if first.is_some() && found.next().is_some() {
            return Err(TtlvError::Duplicate { tag, within: self.tag });
        }
        Ok(first)
    }

    /// The one item with `tag`.
    pub fn required(&self, tag: Tag) -> Result<&'a Item, TtlvError> {
        self.optional(tag)?.ok_or(TtlvError::Missing { tag, within: self.tag })
    }

    /// Every item with `tag`, in order.
    pub fn all(&self, tag: Tag) -> impl Iterator<Item = &'a Item> + 'a {
        self.items.iter().filter(move |i| i.tag == tag)
    }
}
