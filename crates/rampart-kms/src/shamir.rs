//! Shamir secret sharing over GF(2^8) (the AES field, reduction polynomial
//! x^8 + x^4 + x^3 + x + 1), byte by byte.
//!
//! Field arithmetic is branch-free and table-free so that the time it takes
//! does not depend on share or secret bytes. A share is encoded as hex of
//! `threshold || x || y...`; the threshold travels with the share so that a
//! server can report progress and refuse shares of another split.

use rampart_crypto::{fill_random, SecretBytes};

use crate::error::{KmsError, Result};

/// One share of a split secret. Its `Debug` shows only the share's index.
#[derive(Clone)]
pub struct Share {
    threshold: u8,
    x: u8,
    y: SecretBytes,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Share(#{} of a {}-threshold split, redacted)", self.x, self.threshold)
    }
}

impl Share {
    /// The share's x coordinate (1..=255), distinct within a split.
    #[must_use]
    pub fn index(&self) -> u8 {
        self.x
    }

    #[must_use]
    pub fn threshold(&self) -> u8 {
        self.threshold
    }

    /// A share from its parts, as a KMIP Split Key holds them (the Key
    /// Part Identifier is `x`, the Key Material `y`).
    pub fn from_parts(threshold: u8, x: u8, y: SecretBytes) -> Result<Self> {
        if threshold < 2 || x == 0 || y.is_empty() {
            return Err(KmsError::invalid("share parts are invalid"));
        }
        Ok(Self { threshold, x, y })
    }

    /// The share's y coordinates, one per secret byte. Secret.
    #[must_use]
    pub fn y(&self) -> &SecretBytes {
        &self.y
    }

    /// Hex text: `threshold || x || y`. The result is secret.
    #[must_use]
    pub fn to_hex(&self) -> SecretBytes {
        let mut raw = SecretBytes::zeroed(2 + self.y.len());
        let bytes = raw.expose_mut();
        bytes[0] = self.threshold;
        bytes[1] = self.x;
        bytes[2..].copy_from_slice(self.y.expose());
        SecretBytes::new(hex::encode(raw.expose()).into_bytes())
    }

    /// Parses [`Share::to_hex`] text (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        let text = text.trim();
        if text.len() > 2 * (2 + 64) {
            return Err(KmsError::invalid("share is too long"));
        }
        let raw = SecretBytes::new(
            hex::decode(text).map_err(|_| KmsError::invalid("share is not hex text"))?,
        );
        let bytes = raw.expose();
        if bytes.len() < 3 {
            return Err(KmsError::invalid("share is too short"));
        }
        let (threshold, x) = (bytes[0], bytes[1]);
        if threshold < 2 || x == 0 {
            return Err(KmsError::invalid("share header is invalid"));
        }
        Ok(Self { threshold, x, y: SecretBytes::from_slice(&bytes[2..]) })
    }
}

fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0u8;
    for _ in 0..8 {
        // mask = 0xff when the low bit of b is set, without branching.
        product ^= a & 0u8.wrapping_sub(b & 1);
        let carry = 0u8.wrapping_sub(a >> 7);
        a = (a << 1) ^ (0x1b & carry);
        b >>= 1;
    }
    product
}

/// a^254 = a^-1 in GF(2^8) (0 maps to 0).
fn gf_inv(a: u8) -> u8 {
    let mut result = 1u8;
    let mut base = a;
    let mut exponent = 254u8;
    for _ in 0..8 {
        let factor = gf_mul(result, base);
        let mask = 0u8.wrapping_sub(exponent & 1);
        result = (factor & mask) | (result & !mask);
        base = gf_mul(base, base);
        exponent >>= 1;
    }
    result
}

/// Splits `secret` into `shares` shares, any `threshold` of which
/// reconstruct it (2 <= threshold <= shares <= 255).
pub fn split(secret: &[u8], threshold: u8, shares: u8) -> Result<Vec<Share>> {
    if threshold < 2 || shares < threshold {
        return Err(KmsError::invalid(format!(
            "need 2 <= threshold <= shares <= 255 (got threshold {threshold}, shares {shares})"
        )));
    }
    if secret.is_empty() || secret.len() > 64 {
        return Err(KmsError::invalid("the secret to split must be 1 to 64 bytes"));
    }
    let degree = usize::from(threshold) - 1;
    // coefficients[i * degree + j] is the (j+1)-th coefficient for byte i.
    let mut coefficients = SecretBytes::zeroed(secret.len() * degree);
    fill_random(coefficients.expose_mut())?;
    let mut out = Vec::with_capacity(usize::from(shares));
    for x in 1..=shares {
        let mut y = SecretBytes::zeroed(secret.len());
        for (i, byte) in secret.iter().enumerate() {
            // Horner's rule from the highest coefficient down.
            let coefs = &coefficients.expose()[i * degree..(i + 1) * degree];
            let mut acc = 0u8;
            for &c in coefs.iter().rev() {
                acc = gf_mul(acc, x) ^ c;
            }
            y.expose_mut()[i] = gf_mul(acc, x) ^ byte;
        }
        out.push(Share { threshold, x, y });
    }
    Ok(out)
}

/// Reconstructs the secret from at least `threshold` shares with distinct
/// indices. Fewer shares, or shares of different splits, yield an error or
/// (for a wrong but well-formed set) a wrong secret, which the caller
/// detects with its check value.
pub fn combine(shares: &[Share]) -> Result<SecretBytes> {
    let first = shares.first().ok_or_else(|| KmsError::invalid("no shares"))?;
    let threshold = usize::from(first.threshold);
    let len = first.y.len();
    if shares.iter().any(|s| s.threshold != first.threshold || s.y.len() != len) {
        return Err(KmsError::invalid("the shares belong to different splits"));
    }
    if shares.len() < threshold {
        return Err(KmsError::invalid(format!(
            "{} of {threshold} shares: not enough to reconstruct",
            shares.len()
        )));
    }
    let used = &shares[..threshold];
    for (i, a) in used.iter().enumerate() {
        if used[..i].iter().any(|b| b.x == a.x) {
            return Err(KmsError::invalid("the same share was given twice"));
        }
    }
    let mut secret = SecretBytes::zeroed(len);
    for (i, share) in used.iter().enumerate() {
        // Lagrange basis polynomial for share i, evaluated at 0.
        let mut numerator = 1u8;
        let mut denominator = 1u8;
        for (j, other) in used.iter().enumerate() {
            if i != j {
                numerator = gf_mul(numerator, other.x);
                denominator = gf_mul(denominator, other.x ^ share.x);
            }
        }
        let basis = gf_mul(numerator, gf_inv(denominator));
        for (out, &y) in secret.expose_mut().iter_mut().zip(share.y.expose()) {
            *out ^= gf_mul(y, basis);
        }
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_inverse_is_an_inverse() {
        for a in 1..=255u8 {
            assert_eq!(gf_mul(a, gf_inv(a)), 1, "a = {a}");
        }
        // Known AES field product: 0x57 * 0x83 = 0xc1 (FIPS 197, 4.2).
        assert_eq!(gf_mul(0x57, 0x83), 0xc1);
    }

    #[test]
    fn any_k_of_n_reconstruct_and_k_minus_1_do_not() {
        let secret: Vec<u8> = (0..32).map(|i| i * 7 + 3).collect();
        let shares = split(&secret, 3, 5).unwrap();
        for a in 0..5 {
            for b in 0..5 {
                for c in 0..5 {
                    if a == b || b == c || a == c {
                        continue;
                    }
                    let chosen = [shares[a].clone(), shares[b].clone(), shares[c].clone()];
                    assert_eq!(combine(&chosen).unwrap().expose(), &secret[..]);
                }
            }
        }
        assert!(combine(&shares[..2]).is_err());
        // Two shares and a duplicate are still two shares.
        let dup = [shares[0].clone(), shares[1].clone(), shares[0].clone()];
        assert!(combine(&dup).is_err());
    }

    #[test]
    fn hex_round_trip_and_debug_redacts() {
        let shares = split(&[9u8; 32], 2, 3).unwrap();
        let text = shares[1].to_hex();
        let text = std::str::from_utf8(text.expose()).unwrap().to_owned();
        let parsed = Share::from_hex(&format!(" {text}\n")).unwrap();
        assert_eq!(parsed.index(), 2);
        assert_eq!(parsed.threshold(), 2);
        let recovered = combine(&[shares[0].clone(), parsed]).unwrap();
        assert_eq!(recovered.expose(), &[9u8; 32]);
        assert!(!format!("{:?}", shares[1]).contains(&text[4..12]));
        assert!(Share::from_hex("zz").is_err());
        assert!(Share::from_hex("0101ff").is_err());
    }
}
