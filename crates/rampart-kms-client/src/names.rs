//! The rule for key and client names, shared by the key manager (which
//! checks every name it is given with it) and this client (which checks
//! the key name inside a ciphertext before putting it in a URL path).

use crate::error::ConfigError;

/// Longest key or client name.
pub const MAX_NAME: usize = 128;

/// Whether every byte of `text` is one of `A-Z a-z 0-9 . _ -`.
#[must_use]
pub fn name_chars_ok(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Checks a key or client name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`,
/// starting with a letter or digit. `what` names it in the error.
pub fn check_name(what: &str, text: &str) -> Result<(), ConfigError> {
    if text.is_empty() || text.len() > MAX_NAME {
        return Err(ConfigError::invalid(format!("{what} must be 1 to {MAX_NAME} characters")));
    }
    if !name_chars_ok(text) || !text.as_bytes()[0].is_ascii_alphanumeric() {
        return Err(ConfigError::invalid(format!(
            "{what} may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded() {
        assert!(check_name("key", "db-volume.01").is_ok());
        assert!(check_name("key", &"a".repeat(MAX_NAME)).is_ok());
        assert!(check_name("key", "").is_err());
        assert!(check_name("key", "-x").is_err());
        assert!(check_name("key", "a:b").is_err());
        assert!(check_name("key", "a/b").is_err());
        assert_eq!(
            check_name("key", &"a".repeat(129)),
            Err(ConfigError::Invalid("key must be 1 to 128 characters".into()))
        );
    }
}
