//! The one bounded reader for untrusted on-disk bytes.
//!
//! Every read checks that the bytes are there and returns a typed error
//! naming the structure and field otherwise; nothing here can panic or index
//! out of bounds, whatever the input.

use crate::{Error, Result};

/// A cursor over untrusted bytes.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// `what` names the structure being decoded, for error messages.
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self { bytes, pos: 0, what }
    }

    /// The next `len` bytes.
    pub(crate) fn take(&mut self, len: usize, field: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|&end| end <= self.bytes.len());
        match end {
            Some(end) => {
                let out = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(Error::corrupt(format!(
                "{}: truncated reading {field} ({len} bytes at offset {})",
                self.what, self.pos
            ))),
        }
    }

    pub(crate) fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn u16_be(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u32_be(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u64_be(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16_le(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u32_le(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u64_le(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A fixed-size C string field: the bytes before the first NUL. A field
    /// with no NUL at all is cut to `len - 1` bytes, as cryptsetup does.
    pub(crate) fn c_string(&mut self, len: usize, field: &str) -> Result<CString<'a>> {
        let raw = self.take(len, field)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(len.saturating_sub(1));
        Ok(CString { bytes: &raw[..end] })
    }

    /// The current offset from the start.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }
}

/// A decoded C string field.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CString<'a> {
    /// The bytes before the terminator.
    pub(crate) bytes: &'a [u8],
}

impl CString<'_> {
    /// The text, with any invalid UTF-8 replaced (for display only).
    pub(crate) fn lossy(&self) -> String {
        String::from_utf8_lossy(self.bytes).into_owned()
    }

    /// The text if it is printable ASCII (what LUKS names and UUIDs are).
    pub(crate) fn ascii(&self, field: &str, what: &str) -> Result<String> {
        if self.bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            Ok(self.lossy())
        } else {
            Err(Error::corrupt(format!("{what}: {field} is not printable ASCII")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let bytes = [0u8, 1, 2, 3, 4, 5];
        let mut r = Reader::new(&bytes, "test header");
        assert_eq!(r.u16_be("a").unwrap(), 1);
        assert_eq!(r.u32_be("b").unwrap(), 0x0203_0405);
        let err = r.u16_be("c").unwrap_err().to_string();
        assert!(err.contains("test header: truncated reading c"), "{err}");
        let mut r = Reader::new(&bytes, "x");
        assert!(r.take(usize::MAX, "huge").is_err());
        assert_eq!(r.position(), 0);
    }

    #[test]
    fn c_strings() {
        let bytes = *b"abc\0zzzzxyz";
        let mut r = Reader::new(&bytes, "x");
        let s = r.c_string(8, "label").unwrap();
        assert_eq!(s.bytes, b"abc");
        let s = r.c_string(3, "unterminated").unwrap();
        assert_eq!(s.bytes, b"xy");
    }
}
