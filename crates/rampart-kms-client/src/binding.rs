//! Volumes bound to the key manager: the `rampart-kms` LUKS2 token and
//! the one way its keyslot passphrase is recovered. Used by the `rampart`
//! command (`bind`, `unlock`, token-first unlocking) and by cryptsetup's
//! token plugin (`libcryptsetup-token-rampart-kms.so`), so that both
//! derive the same passphrase by the same code.
//!
//! A bound volume holds, per binding, one keyslot whose passphrase is 32
//! random bytes written as 43 base64url characters, and a LUKS2 token
//! holding that passphrase wrapped by the key manager:
//!
//! ```json
//! {"type": "rampart-kms", "keyslots": ["1"], "format": 1,
//!  "endpoints": ["https://127.0.0.1:8443"], "key": "vol-keys", "key_version": 1,
//!  "wrapped": "rampart:v1:vol-keys:1:BASE64URL",
//!  "bundle": "/etc/rampart/client.bundle"}
//! ```
//!
//! `bundle` is optional: the client bundle the token plugin unlocks with
//! (absolute path; [`DEFAULT_BUNDLE`] when absent). The `rampart` command
//! uses the bundle it is given (`--kms`, `$RAMPART_KMS`) instead.
//!
//! The wrap's associated data (its context) is [`context`]: the volume's
//! LUKS UUID and the keyslot, computed from the header at unlock time and
//! never stored, so a token copied to another volume does not unwrap.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use rampart_crypto::SecretBytes;
use serde_json::{json, Value};

use crate::bundle::Bundle;
use crate::error::{ClientError, ConfigError};
use crate::transport::Transport;
use crate::wrapped::WrappedHeader;

/// The LUKS2 token type of a key-manager binding.
pub const TOKEN_TYPE: &str = "rampart-kms";
/// The token layout version (the `format` field).
pub const TOKEN_FORMAT: u64 = 1;
/// Random bytes in a bound keyslot's passphrase.
pub const PASSPHRASE_BYTES: usize = 32;
/// The client bundle of a token without a `bundle` field (the path
/// systemd-cryptsetup and cryptsetup use through the token plugin).
pub const DEFAULT_BUNDLE: &str = "/etc/rampart/client.bundle";
/// LUKS2 keyslot ids run from 0 to 31.
const MAX_KEYSLOT: usize = 31;
/// Longest token JSON accepted (a LUKS2 JSON area is at most 4 MiB; a
/// binding is a few hundred bytes).
pub const MAX_TOKEN_JSON: usize = 64 << 10;
/// Longest `bundle` path.
const MAX_BUNDLE_PATH: usize = 4096;

/// The wrap context of a bound keyslot: the volume's UUID and the keyslot.
#[must_use]
pub fn context(uuid: &str, slot: usize) -> Vec<u8> {
    format!("rampart-bind/v1 luks-uuid={uuid} keyslot={slot}").into_bytes()
}

/// A fresh keyslot passphrase: 32 random bytes as base64url text (43
/// characters, no padding), so it survives any passphrase channel.
pub fn new_passphrase() -> Result<SecretBytes, ConfigError> {
    let raw = rampart_crypto::random_secret(PASSPHRASE_BYTES)?;
    let mut text = SecretBytes::zeroed(PASSPHRASE_BYTES.div_ceil(3) * 4);
    let len = B64
        .encode_slice(raw.expose(), text.expose_mut())
        .map_err(|e| ConfigError::Crypto(format!("cannot encode the passphrase: {e}")))?;
    Ok(SecretBytes::from_slice(&text.expose()[..len]))
}

/// The `rampart-kms` tokens among a header's tokens (`(id, JSON)`, as
/// `rampart_luks::Luks::tokens` lists them), each parsed or with the
/// reason it cannot be used; tokens of other types are left out.
#[must_use]
pub fn bound_tokens(
    tokens: impl IntoIterator<Item = (usize, Value)>,
) -> Vec<(usize, Result<BoundToken, String>)> {
    tokens
        .into_iter()
        .filter(|(_, t)| t.get("type").and_then(Value::as_str) == Some(TOKEN_TYPE))
        .map(|(id, t)| (id, BoundToken::parse(id, &t)))
        .collect()
}

/// A parsed `rampart-kms` token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundToken {
    /// The token id in the header.
    pub id: usize,
    /// The keyslot it opens.
    pub slot: usize,
    pub key: String,
    pub key_version: u32,
    /// Where the volume was bound (informational: the client bundle's
    /// endpoints are the ones used).
    pub endpoints: Vec<String>,
    /// The key manager's ciphertext of the keyslot passphrase.
    pub wrapped: String,
    /// The client bundle the token plugin uses (absolute path), if set.
    pub bundle: Option<String>,
}

impl BoundToken {
    /// Reads token `id`; the error says what is wrong with it (one line,
    /// naming fields, never their secret contents).
    pub fn parse(id: usize, token: &Value) -> Result<Self, String> {
        if !token.is_object() {
            return Err("it is not a JSON object".to_owned());
        }
        if let Some(kind) = token.get("type") {
            if kind.as_str() != Some(TOKEN_TYPE) {
                return Err(format!("its type is not \"{TOKEN_TYPE}\""));
            }
        }
        let slots: Vec<&str> = token
            .get("keyslots")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let [slot] = slots.as_slice() else {
            return Err(format!("it names {} keyslots instead of one", slots.len()));
        };
        let slot: usize = slot
            .parse()
            .ok()
            .filter(|s| *s <= MAX_KEYSLOT)
            .ok_or_else(|| "its keyslot is not a number from 0 to 31".to_owned())?;
        if let Some(format) = token.get("format") {
            if format.as_u64() != Some(TOKEN_FORMAT) {
                return Err(format!("its format {format} is not {TOKEN_FORMAT}"));
            }
        }
        let wrapped = token
            .get("wrapped")
            .and_then(Value::as_str)
            .ok_or_else(|| "it has no \"wrapped\" string".to_owned())?
            .to_owned();
        let header =
            WrappedHeader::parse(&wrapped).map_err(|e| format!("its \"wrapped\" field: {e}"))?;
        let endpoints = token
            .get("endpoints")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let bundle = match token.get("bundle") {
            None | Some(Value::Null) => None,
            Some(Value::String(path)) => {
                check_bundle_path(path)?;
                Some(path.clone())
            }
            Some(_) => return Err("its \"bundle\" field is not a string".to_owned()),
        };
        Ok(Self {
            id,
            slot,
            key: header.name,
            key_version: header.version,
            endpoints,
            wrapped,
            bundle,
        })
    }

    /// Parses token JSON text (as cryptsetup hands it to a token plugin).
    pub fn parse_text(id: usize, json: &str) -> Result<Self, String> {
        if json.len() > MAX_TOKEN_JSON {
            return Err(format!("its JSON is larger than {MAX_TOKEN_JSON} bytes"));
        }
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("it is not valid JSON: {e}"))?;
        if value.get("type").and_then(Value::as_str) != Some(TOKEN_TYPE) {
            return Err(format!("its type is not \"{TOKEN_TYPE}\""));
        }
        Self::parse(id, &value)
    }

    /// The token as stored in the LUKS2 header.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut token = json!({
            "type": TOKEN_TYPE,
            "keyslots": [self.slot.to_string()],
            "format": TOKEN_FORMAT,
            "endpoints": self.endpoints,
            "key": self.key,
            "key_version": self.key_version,
            "wrapped": self.wrapped,
        });
        if let (Some(bundle), Some(map)) = (&self.bundle, token.as_object_mut()) {
            map.insert("bundle".into(), Value::String(bundle.clone()));
        }
        token
    }

    /// `token 0 (key vol-keys version 1, keyslot 1)`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "token {} (key {} version {}, keyslot {})",
            self.id, self.key, self.key_version, self.slot
        )
    }

    /// The client bundle the token plugin unlocks with.
    #[must_use]
    pub fn bundle_path(&self) -> PathBuf {
        PathBuf::from(self.bundle.as_deref().unwrap_or(DEFAULT_BUNDLE))
    }

    /// The token's details for `cryptsetup luksDump` (no secret: the
    /// wrapped passphrase is left out).
    #[must_use]
    pub fn dump_lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!("\tKey:        {}", self.key),
            format!("\tVersion:    {}", self.key_version),
        ];
        for endpoint in &self.endpoints {
            lines.push(format!("\tServer:     {endpoint}"));
        }
        let bundle = match &self.bundle {
            Some(path) => path.clone(),
            None => format!("{DEFAULT_BUNDLE} (default)"),
        };
        lines.push(format!("\tBundle:     {bundle}"));
        lines
    }
}

/// A token's `bundle`: an absolute path without NUL or control
/// characters, of bounded length.
pub fn check_bundle_path(path: &str) -> Result<(), String> {
    if path.len() > MAX_BUNDLE_PATH {
        return Err(format!("its \"bundle\" path is longer than {MAX_BUNDLE_PATH} bytes"));
    }
    if !path.starts_with('/') || path.chars().any(char::is_control) {
        return Err("its \"bundle\" is not an absolute path".to_owned());
    }
    Ok(())
}

/// Unwraps a token's keyslot passphrase, bound to the volume `uuid` and
/// the token's keyslot. Every unlock through a token goes through here.
pub async fn unwrap_passphrase(
    client: &Transport,
    uuid: &str,
    token: &BoundToken,
) -> Result<SecretBytes, ClientError> {
    client.unwrap(&token.wrapped, &context(uuid, token.slot)).await
}

/// Why a token did not give its passphrase (for the token plugin, which
/// maps each case to the errno cryptsetup expects).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnlockError {
    /// The token or its client bundle is unusable (malformed, missing).
    #[error("{0}")]
    Config(String),
    /// The key manager refused (revoked or destroyed key, a client not
    /// allowed, a token of another volume).
    #[error("{0}")]
    Refused(String),
    /// No key server answered.
    #[error("{0}")]
    Unavailable(String),
}

impl From<ClientError> for UnlockError {
    fn from(error: ClientError) -> Self {
        match &error {
            ClientError::Api { status, .. } if (400..500).contains(status) => {
                Self::Refused(error.to_string())
            }
            ClientError::Tls { .. } => Self::Refused(error.to_string()),
            ClientError::Config(_) => Self::Config(error.to_string()),
            _ => Self::Unavailable(error.to_string()),
        }
    }
}

/// Recovers a token's passphrase outside any async runtime, with the
/// bundle at `bundle` (the token plugin's whole job).
pub fn unwrap_with_bundle(
    bundle: &Path,
    uuid: &str,
    token: &BoundToken,
) -> Result<SecretBytes, UnlockError> {
    let bundle = Bundle::read(bundle).map_err(|e| UnlockError::Config(e.to_string()))?;
    let client = Transport::new(&bundle)?;
    // Sockets and timers; no signal handling (the plugin runs inside
    // cryptsetup or systemd-cryptsetup, whose signals are theirs).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| UnlockError::Config(format!("cannot start the I/O runtime: {e}")))?;
    let passphrase = runtime.block_on(unwrap_passphrase(&client, uuid, token))?;
    Ok(passphrase)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const WRAPPED: &str = "rampart:v1:vol-keys:3:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

    #[test]
    fn passphrases_are_43_base64url_characters_and_differ() {
        let a = new_passphrase().unwrap();
        let b = new_passphrase().unwrap();
        assert_eq!(a.len(), 43);
        assert!(a.expose().iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_'));
        assert_ne!(a, b);
    }

    #[test]
    fn context_binds_volume_and_keyslot() {
        let uuid = "0b6d1ad5-3f44-4c5e-9a0e-1f2b3c4d5e6f";
        assert_eq!(
            context(uuid, 1),
            b"rampart-bind/v1 luks-uuid=0b6d1ad5-3f44-4c5e-9a0e-1f2b3c4d5e6f keyslot=1".to_vec()
        );
        assert_ne!(context(uuid, 1), context(uuid, 2));
        assert_ne!(context(uuid, 1), context("another", 1));
    }

    #[test]
    fn tokens_round_trip_and_bad_ones_are_refused_without_panics() {
        let token = json!({"type": TOKEN_TYPE, "keyslots": ["4"], "format": 1,
            "endpoints": ["https://kms:8443"], "key": "vol-keys", "key_version": 3,
            "wrapped": WRAPPED});
        let parsed = BoundToken::parse(2, &token).unwrap();
        assert_eq!((parsed.id, parsed.slot, parsed.key_version), (2, 4, 3));
        assert_eq!(parsed.key, "vol-keys");
        assert_eq!(parsed.to_json(), token);
        assert_eq!(parsed.describe(), "token 2 (key vol-keys version 3, keyslot 4)");
        assert_eq!(parsed.bundle_path(), Path::new(DEFAULT_BUNDLE));
        let mut with_bundle = token.clone();
        with_bundle["bundle"] = json!("/srv/host.bundle");
        let parsed = BoundToken::parse_text(0, &with_bundle.to_string()).unwrap();
        assert_eq!(parsed.bundle_path(), Path::new("/srv/host.bundle"));
        assert_eq!(parsed.to_json(), with_bundle);
        assert!(parsed.dump_lines().iter().all(|l| !l.contains("AAAA")));
        for bad in [
            json!({"type": TOKEN_TYPE, "keyslots": [], "wrapped": WRAPPED}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1", "2"], "wrapped": WRAPPED}),
            json!({"type": TOKEN_TYPE, "keyslots": ["x"], "wrapped": WRAPPED}),
            json!({"type": TOKEN_TYPE, "keyslots": ["32"], "wrapped": WRAPPED}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"]}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": 7}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": "garbage"}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": WRAPPED, "format": 2}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": WRAPPED, "bundle": "rel"}),
            json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": WRAPPED, "bundle": 1}),
            json!({"type": "other", "keyslots": ["1"], "wrapped": WRAPPED}),
            json!("not an object"),
        ] {
            assert!(BoundToken::parse(0, &bad).is_err(), "{bad}");
            assert!(BoundToken::parse_text(0, &bad.to_string()).is_err(), "{bad}");
        }
        for bad in ["", "{", "[]", "null", "{\"type\":\"rampart-kms\"}"] {
            assert!(BoundToken::parse_text(0, bad).is_err(), "{bad}");
        }
        assert!(BoundToken::parse_text(0, &" ".repeat(MAX_TOKEN_JSON + 1)).is_err());
    }

    #[test]
    fn bound_tokens_are_the_rampart_kms_ones_parsed_or_refused() {
        let good = json!({"type": TOKEN_TYPE, "keyslots": ["1"], "wrapped": WRAPPED});
        let broken = json!({"type": TOKEN_TYPE, "keyslots": [], "wrapped": WRAPPED});
        let other = json!({"type": "systemd-tpm2", "keyslots": ["0"]});
        let bound = bound_tokens([(0, other), (3, good), (5, broken)]);
        assert_eq!(bound.len(), 2);
        assert_eq!(bound[0].0, 3);
        assert_eq!(bound[0].1.as_ref().map(|t| (t.id, t.slot)), Ok((3, 1)));
        assert_eq!(bound[1].0, 5);
        assert!(bound[1].1.is_err());
    }
}
