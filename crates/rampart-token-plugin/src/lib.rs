//! cryptsetup's external token plugin for volumes bound to Rampart's key
//! manager (`rampart bind`): `libcryptsetup-token-rampart-kms.so`, which
//! cryptsetup 2.4+ (and systemd-cryptsetup through it) loads from its
//! token directory for LUKS2 tokens of type `rampart-kms`.
//!
//! The token model and the unwrap are `rampart_kms_client::binding`'s,
//! the code `rampart unlock` runs, so the passphrase handed to cryptsetup
//! is the one Rampart derives. The plugin depends on that client crate
//! only (no key server, database or HSM code), and links nothing but the
//! C runtime: libcryptsetup's functions are found at run time. The client bundle is the token's `bundle` field,
//! or `/etc/rampart/client.bundle`.
//!
//! This file is safe Rust; the C ABI (the only `unsafe` of the crate) is
//! in `ffi.rs`.

use rampart_crypto::SecretBytes;
use rampart_kms_client::binding::{self, BoundToken, UnlockError};

mod ffi;

/// cryptsetup's log levels (libcryptsetup.h `CRYPT_LOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Plain output (luksDump lines).
    Normal,
    Error,
    Verbose,
    Debug,
}

/// Where messages go (cryptsetup's `crypt_log` in the plugin).
pub trait Log {
    /// One line, without its end of line.
    fn line(&self, level: Level, text: &str);
}

/// Why `open` failed, as the errno cryptsetup's token ABI expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// The token is malformed (-EINVAL).
    Invalid,
    /// The token cannot be used here: no bundle, unreadable bundle
    /// (-ENOENT).
    Unusable,
    /// The key manager refused (-EPERM).
    Refused,
    /// No key server answered (-EAGAIN: what the token needs is absent
    /// now, as cryptsetup uses it for missing hardware).
    Unavailable,
}

impl OpenError {
    /// The negative errno of the ABI.
    #[must_use]
    pub fn errno(self) -> i32 {
        -match self {
            Self::Invalid => libc::EINVAL,
            Self::Unusable => libc::ENOENT,
            Self::Refused => libc::EPERM,
            Self::Unavailable => libc::EAGAIN,
        }
    }
}

/// The plugin's version (`cryptsetup_token_version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Recovers the keyslot passphrase of token `id` (its JSON text `json`)
/// of the volume whose LUKS UUID is `uuid`.
pub fn open(id: usize, json: &str, uuid: &str, log: &dyn Log) -> Result<SecretBytes, OpenError> {
    let token = match BoundToken::parse_text(id, json) {
        Ok(token) => token,
        Err(why) => {
            log.line(
                Level::Error,
                &format!("{} token {id} is unusable: {why}.", binding::TOKEN_TYPE),
            );
            return Err(OpenError::Invalid);
        }
    };
    let bundle = token.bundle_path();
    log.line(
        Level::Debug,
        &format!(
            "{}: unwrapping the passphrase of keyslot {} with client bundle {}.",
            token.describe(),
            token.slot,
            bundle.display()
        ),
    );
    match binding::unwrap_with_bundle(&bundle, uuid, &token) {
        Ok(passphrase) => {
            log.line(Level::Verbose, &format!("{}: passphrase unwrapped.", token.describe()));
            Ok(passphrase)
        }
        Err(error) => {
            let kind = match &error {
                UnlockError::Refused(_) => OpenError::Refused,
                UnlockError::Unavailable(_) => OpenError::Unavailable,
                _ => OpenError::Unusable,
            };
            log.line(
                Level::Error,
                &format!("{} {}: {error}.", binding::TOKEN_TYPE, token.describe()),
            );
            Err(kind)
        }
    }
}

/// Checks a token's JSON (`cryptsetup token import`, and before every
/// open); the error is one line.
pub fn validate(json: &str) -> Result<(), String> {
    BoundToken::parse_text(0, json).map(|_| ())
}

/// The token's lines in `cryptsetup luksDump`.
pub fn dump(json: &str, log: &dyn Log) {
    match BoundToken::parse_text(0, json) {
        Ok(token) => {
            for line in token.dump_lines() {
                log.line(Level::Normal, &line);
            }
        }
        Err(why) => log.line(Level::Normal, &format!("\tUnusable:   {why}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::cell::RefCell;

    use super::*;

    #[derive(Default)]
    struct Lines(RefCell<Vec<(Level, String)>>);

    impl Log for Lines {
        fn line(&self, level: Level, text: &str) {
            self.0.borrow_mut().push((level, text.to_owned()));
        }
    }

    const TOKEN: &str = r#"{"type":"rampart-kms","keyslots":["1"],"format":1,
        "endpoints":["https://127.0.0.1:1"],"key":"disk","key_version":2,
        "wrapped":"rampart:v1:disk:2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "bundle":"/nonexistent/rampart.bundle"}"#;

    #[test]
    fn validate_accepts_bindings_only() {
        validate(TOKEN).unwrap();
        assert!(validate(r#"{"type":"rampart-kms","keyslots":[]}"#).is_err());
        assert!(validate("not json").is_err());
        assert!(validate(r#"{"type":"luks2-keyring","keyslots":["1"]}"#).is_err());
    }

    #[test]
    fn dump_shows_the_binding_but_not_the_ciphertext() {
        let lines = Lines::default();
        dump(TOKEN, &lines);
        let text: Vec<String> = lines.0.into_inner().into_iter().map(|(_, t)| t).collect();
        let text = text.join("\n");
        assert!(text.contains("Key:        disk"), "{text}");
        assert!(text.contains("Version:    2"), "{text}");
        assert!(text.contains("/nonexistent/rampart.bundle"), "{text}");
        assert!(!text.contains("AAAA"), "{text}");
    }

    #[test]
    fn open_maps_failures_to_the_abi_errnos() {
        let lines = Lines::default();
        assert_eq!(open(0, "{", "uuid", &lines).unwrap_err(), OpenError::Invalid);
        // The bundle does not exist: unusable here, not a refusal.
        assert_eq!(open(0, TOKEN, "uuid", &lines).unwrap_err(), OpenError::Unusable);
        let logged = lines.0.into_inner();
        assert!(logged.iter().any(|(l, t)| *l == Level::Error && t.contains("rampart.bundle")));
        assert_eq!(OpenError::Refused.errno(), -libc::EPERM);
        assert_eq!(OpenError::Unavailable.errno(), -libc::EAGAIN);
    }
}
