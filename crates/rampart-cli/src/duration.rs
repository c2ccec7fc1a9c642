//! Time spans as users write them for timeouts: `10` (seconds), `1.5`,
//! `500ms`, `30s`, `5m`, `1h`. `0` is zero, which the flags that allow it
//! read as "no limit".

use std::time::Duration;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let number_end =
        trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(number_end);
    let value: f64 = number.parse().map_err(|_| {
        format!("'{text}' is not a time (expected seconds, or a number with ms, s, m or h)")
    })?;
    let seconds = match suffix.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("'{text}': unknown time unit '{other}' (use ms, s, m or h)")),
    };
    // A week is past any timeout worth setting; beyond it, probably a typo.
    if !(0.0..=604_800.0).contains(&seconds) {
        return Err(format!("'{text}' is out of range (at most a week)"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn parses_seconds_and_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "x", "-1", "5d", "1.2.3", "9999999"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
