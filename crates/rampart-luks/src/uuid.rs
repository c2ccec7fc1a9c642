//! Device UUIDs in the textual form LUKS stores (`uuid_unparse`).

use rampart_crypto::fill_random;

use crate::{Error, Result};

/// A random (version 4) UUID, lowercase.
pub(crate) fn generate() -> Result<String> {
    let mut b = [0u8; 16];
    fill_random(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Ok(unparse(&b))
}

fn unparse(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// Checks a caller-supplied UUID (8-4-4-4-12 hexadecimal digits, as
/// `uuid_parse` accepts) and returns it lowercase.
pub(crate) fn parse(text: &str) -> Result<String> {
    let ok = text.len() == 36
        && text.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    if ok {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(Error::invalid(format!(
            "\"{}\" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
            crate::luks2::json::shorten(text)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_uuids_parse() {
        let u = generate().unwrap();
        assert_eq!(parse(&u).unwrap(), u);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(parse("not-a-uuid").is_err());
        assert!(parse("0B1C6F2E-7D39-4B5E-9D2C-3C1F0E2A4B6D").is_ok());
        assert!(parse("0b1c6f2e7d394b5e9d2c3c1f0e2a4b6d0000").is_err());
    }
}
