//! Byte sizes as users write them: `4096`, `64K`, `1M`, `1GiB`, `1G`.
//! Suffixes are binary (K = 1024), as in cryptsetup and qemu-img.

pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "'{text}' is not a size (expected a number with an optional K/M/G/T suffix)"
        ));
    }
    let number: u64 = digits.parse().map_err(|_| format!("'{text}' is too large"))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" | "kb" => 10,
        "m" | "mib" | "mb" => 20,
        "g" | "gib" | "gb" => 30,
        "t" | "tib" | "tb" => 40,
        other => return Err(format!("'{text}': unknown size suffix '{other}' (use K, M, G or T)")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn parses_plain_and_suffixed_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("17179869184T").is_err());
    }
}
