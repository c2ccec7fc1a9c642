//! A bounded DER reader and writer, for the few ASN.1 structures keys
//! travel in (PKCS#1, PKCS#8, SubjectPublicKeyInfo, SEC 1).
//!
//! The reader never trusts a length: it is checked against the bytes that
//! remain before anything is sliced, nothing is allocated from it, and
//! only definite, minimal lengths are accepted (DER, X.690 §10.1).

use zeroize::Zeroizing;

use crate::{CryptoError, Result};

pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
pub(crate) const SEQUENCE: u8 = 0x30;

fn malformed(what: &'static str) -> CryptoError {
    CryptoError::InvalidEncoding(what)
}

/// A cursor over DER bytes.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(der: &'a [u8]) -> Self {
        Self { rest: der }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// How many bytes are left.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The first `len` bytes left (for an element read since this copy
    /// of the reader was taken).
    pub(crate) fn rest_prefix(&self, len: usize) -> &'a [u8] {
        self.rest.get(..len).unwrap_or(self.rest)
    }

    /// The next element: its tag and contents.
    pub(crate) fn any(&mut self) -> Result<(u8, &'a [u8])> {
        let (&tag, after_tag) = self.rest.split_first().ok_or(malformed("truncated DER"))?;
        if tag & 0x1F == 0x1F {
            return Err(malformed("multi-byte DER tag"));
        }
        let (&first, mut after_len) = after_tag.split_first().ok_or(malformed("truncated DER"))?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7F);
            if count == 0 || count > 4 {
                return Err(malformed("DER length"));
            }
            let (bytes, rest) =
                after_len.split_at_checked(count).ok_or(malformed("truncated DER"))?;
            after_len = rest;
            if bytes.first() == Some(&0) {
                return Err(malformed("non-minimal DER length"));
            }
            let len = bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            if len < 0x80 {
                return Err(malformed("non-minimal DER length"));
            }
            len
        };
        let (content, rest) = after_len.split_at_checked(len).ok_or(malformed("truncated DER"))?;
        self.rest = rest;
        Ok((tag, content))
    }

    /// The next element, which must have tag `tag`.
    pub(crate) fn expect(&mut self, tag: u8, what: &'static str) -> Result<&'a [u8]> {
        match self.any()? {
            (t, content) if t == tag => Ok(content),
            _ => Err(malformed(what)),
        }
    }

    /// A SEQUENCE's contents as a reader.
    pub(crate) fn sequence(&mut self, what: &'static str) -> Result<Reader<'a>> {
        self.expect(SEQUENCE, what).map(Reader::new)
    }

    /// A non-negative INTEGER's magnitude (big-endian, no leading zero).
    pub(crate) fn unsigned(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let content = self.expect(INTEGER, what)?;
        match content {
            [] => Err(malformed(what)),
            [first, ..] if first & 0x80 != 0 => Err(malformed(what)),
            [0, second, ..] if second & 0x80 == 0 => Err(malformed("non-minimal DER integer")),
            [0, rest @ ..] if !rest.is_empty() => Ok(rest),
            _ => Ok(content),
        }
    }

    /// A small non-negative INTEGER (a version field).
    pub(crate) fn small(&mut self, what: &'static str) -> Result<u32> {
        let magnitude = self.unsigned(what)?;
        if magnitude.len() > 4 {
            return Err(malformed(what));
        }
        Ok(magnitude.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
    }

    /// Requires that nothing follows.
    pub(crate) fn finish(&self, what: &'static str) -> Result<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(malformed(what))
        }
    }
}

/// Appends one element. The buffer is zeroizing: private keys pass here.
pub(crate) fn put(out: &mut Zeroizing<Vec<u8>>, tag: u8, content: &[u8]) {
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        // Fits in the short form (checked above).
        out.push(u8::try_from(len).unwrap_or(0));
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        let significant = bytes.get(skip..).unwrap_or(&[]);
        out.push(0x80 | u8::try_from(significant.len()).unwrap_or(0));
        out.extend_from_slice(significant);
    }
    out.extend_from_slice(content);
}

/// One element as a new zeroizing buffer.
pub(crate) fn element(tag: u8, content: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(content.len() + 6));
    put(&mut out, tag, content);
    out
}

/// Appends a non-negative INTEGER from its big-endian magnitude (leading
/// zeros allowed), in DER's minimal two's complement form.
pub(crate) fn put_unsigned(out: &mut Zeroizing<Vec<u8>>, magnitude: &[u8]) {
    let skip = magnitude.iter().take_while(|b| **b == 0).count();
    let trimmed = magnitude.get(skip..).unwrap_or(&[]);
    let mut content = Zeroizing::new(Vec::with_capacity(trimmed.len() + 1));
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        content.push(0);
    }
    content.extend_from_slice(trimmed);
    put(out, INTEGER, &content);
}

/// The number of significant bits of a big-endian magnitude.
pub(crate) fn bit_length(magnitude: &[u8]) -> u32 {
    let skip = magnitude.iter().take_while(|b| **b == 0).count();
    match magnitude.get(skip..) {
        Some([first, rest @ ..]) => {
            let rest_bits = u32::try_from(rest.len()).unwrap_or(u32::MAX / 16).saturating_mul(8);
            rest_bits.saturating_add(8 - first.leading_zeros())
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_in_short_and_long_form() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; len];
            let der = element(OCTET_STRING, &content);
            let mut r = Reader::new(&der);
            assert_eq!(r.expect(OCTET_STRING, "x").unwrap(), &content[..]);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn truncated_indefinite_and_non_minimal_lengths_are_refused() {
        for bad in [
            &[0x04u8, 0x05, 1, 2][..],
            &[0x04, 0x80, 0, 0],
            &[0x04, 0x81, 0x05, 1, 2, 3, 4, 5],
            &[0x04, 0x82, 0x00, 0x81],
            &[0x04, 0x85, 1, 1, 1, 1, 1],
            &[0x1F, 0x01, 0x00],
        ] {
            assert!(Reader::new(bad).any().is_err(), "{bad:02x?}");
        }
    }

    #[test]
    fn integers_are_read_and_written_minimally() {
        let mut out = Zeroizing::new(Vec::new());
        put_unsigned(&mut out, &[0, 0, 0x80, 1]);
        assert_eq!(&out[..], &[0x02, 0x03, 0x00, 0x80, 0x01]);
        assert_eq!(Reader::new(&out).unsigned("n").unwrap(), &[0x80, 1]);
        assert!(Reader::new(&[0x02, 0x02, 0x00, 0x01]).unsigned("n").is_err());
        assert!(Reader::new(&[0x02, 0x01, 0xFF]).unsigned("n").is_err());
        assert_eq!(bit_length(&[0, 0x01, 0]), 9);
    }
}
