//! The typed, bounded values of the key manager: names, labels, policy
//! selectors, key states, and the records the store holds and the API
//! returns. Untrusted text is turned into these by their `parse`
//! constructors, which check every bound.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{KmsError, Result};

use rampart_kms_client::names::name_chars_ok;
pub use rampart_kms_client::names::MAX_NAME;
/// Most selectors in a key's policy.
pub const MAX_SELECTORS: usize = 64;
/// Most labels on a client.
pub const MAX_LABELS: usize = 32;
/// Longest revocation reason.
pub const MAX_REASON: usize = 1024;

/// Checks a key or client name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`,
/// starting with a letter or digit (the rule of
/// [`rampart_kms_client::names::check_name`], which clients apply too).
pub fn check_name(what: &str, text: &str) -> Result<()> {
    rampart_kms_client::names::check_name(what, text).map_err(KmsError::from)
}

/// A client's labels (`region=eu`, `role=host`): keys 1 to 64 characters
/// of `a-z 0-9 . _ -`, values 0 to 128 characters of `A-Z a-z 0-9 . _ -`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    /// Checks every label of a map.
    pub fn new(map: BTreeMap<String, String>) -> Result<Self> {
        if map.len() > MAX_LABELS {
            return Err(KmsError::invalid(format!("at most {MAX_LABELS} labels")));
        }
        for (key, value) in &map {
            check_label(key, value)?;
        }
        Ok(Self(map))
    }

    /// Parses `k=v,k2=v2` (empty text: no labels).
    pub fn parse_list(text: &str) -> Result<Self> {
        let mut map = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| KmsError::invalid(format!("label '{item}' is not KEY=VALUE")))?;
            if map.insert(key.to_owned(), value.to_owned()).is_some() {
                return Err(KmsError::invalid(format!("label '{key}' is given twice")));
            }
        }
        Self::new(map)
    }

    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    #[must_use]
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

fn check_label(key: &str, value: &str) -> Result<()> {
    let key_ok = !key.is_empty()
        && key.len() <= 64
        && key.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if !key_ok {
        return Err(KmsError::invalid(format!(
            "label key '{key}' must be 1 to 64 characters of a-z, 0-9, '.', '_', '-'"
        )));
    }
    if value.len() > 128 || !name_chars_ok(value) {
        return Err(KmsError::invalid(format!(
            "label value for '{key}' must be at most 128 characters of letters, digits, '.', '_', '-'"
        )));
    }
    Ok(())
}

/// One entry of a key's access policy. A client may use a key (wrap,
/// unwrap, export) when at least one selector matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Selector {
    /// `client:NAME`: the client with this name.
    Client(String),
    /// `label:KEY=VALUE`: every client certified with this label.
    Label { key: String, value: String },
}

impl Selector {
    pub fn parse(text: &str) -> Result<Self> {
        if let Some(name) = text.strip_prefix("client:") {
            check_name("client name", name)?;
            Ok(Self::Client(name.to_owned()))
        } else if let Some(label) = text.strip_prefix("label:") {
            let (key, value) = label.split_once('=').ok_or_else(|| {
                KmsError::invalid(format!("selector '{text}' is not label:KEY=VALUE"))
            })?;
            check_label(key, value)?;
            Ok(Self::Label { key: key.to_owned(), value: value.to_owned() })
        } else {
            Err(KmsError::invalid(format!(
                "selector '{text}' must be client:NAME or label:KEY=VALUE"
            )))
        }
    }

    /// Whether this selector matches `client`.
    #[must_use]
    pub fn matches(&self, client: &ClientInfo) -> bool {
        match self {
            Self::Client(name) => *name == client.name,
            Self::Label { key, value } => client.labels.get(key) == Some(value.as_str()),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Client(name) => write!(f, "client:{name}"),
            Self::Label { key, value } => write!(f, "label:{key}={value}"),
        }
    }
}

impl Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Parses a policy: at most [`MAX_SELECTORS`] selectors, no duplicates.
pub fn parse_policy(items: &[String]) -> Result<Vec<Selector>> {
    if items.len() > MAX_SELECTORS {
        return Err(KmsError::invalid(format!("at most {MAX_SELECTORS} selectors")));
    }
    let mut out: Vec<Selector> = Vec::with_capacity(items.len());
    for item in items {
        let selector = Selector::parse(item)?;
        if !out.contains(&selector) {
            out.push(selector);
        }
    }
    Ok(out)
}

/// The state of one key version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
#[non_exhaustive]
pub enum KeyState {
    /// Wraps (if newest) and unwraps.
    Active,
    /// No longer unwraps or wraps; the material is kept.
    Revoked { reason: String },
    /// The material is erased.
    Destroyed,
}

impl KeyState {
    /// The name stored in the database.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Revoked { .. } => "revoked",
            Self::Destroyed => "destroyed",
        }
    }

    /// Rebuilds a state from its stored name and reason.
    pub fn from_stored(name: &str, reason: Option<String>) -> Result<Self> {
        match name {
            "active" => Ok(Self::Active),
            "revoked" => Ok(Self::Revoked { reason: reason.unwrap_or_default() }),
            "destroyed" => Ok(Self::Destroyed),
            other => Err(KmsError::Corrupt(format!("unknown key state '{other}'"))),
        }
    }

    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Revoked { reason } => Some(reason),
            _ => None,
        }
    }
}

/// One version of a key, without its material.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyVersionInfo {
    pub version: u32,
    #[serde(flatten)]
    pub state: KeyState,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Time of the last state change (revocation, destruction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_ms: Option<i64>,
}

/// A key and its versions, without material.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyInfo {
    pub name: String,
    pub exportable: bool,
    pub allow: Vec<Selector>,
    pub created_ms: i64,
    /// Oldest first.
    pub versions: Vec<KeyVersionInfo>,
}

/// What kind of object a key is and, for an asymmetric one, its
/// algorithm and the objects it is linked to: what `GET /v1/keys` and
/// `GET /v1/keys/{name}` add to a [`KeyInfo`] (every key the REST API
/// makes is a 256-bit AES symmetric key unless created with a `type`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectInfo {
    /// `symmetric-key`, `private-key`, `public-key`, `certificate`,
    /// `secret-data`, `opaque-object` or `split-key`.
    #[serde(rename = "type", default = "symmetric_key")]
    pub object_type: String,
    /// `aes`, `rsa`, `ec`, `ed25519`, `hmac-sha256`...: the KMIP
    /// Cryptographic Algorithm (a certificate's is its public key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Bits (a key's, or a certificate's public key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<i32>,
    /// `P-256`, `P-384`, `P-521` for an EC key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<String>,
    /// The `type` of `POST /v1/keys` that makes such a key (`aes-256`,
    /// `rsa-2048`, `ec-p256`, `ed25519`...), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<String>,
    /// A private key's public key (KMIP Public Key Link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// A public key's private key (KMIP Private Key Link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// The linked certificate (KMIP Certificate Link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

fn symmetric_key() -> String {
    "symmetric-key".into()
}

/// A key with what kind of object it is (`GET /v1/keys`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyView {
    #[serde(flatten)]
    pub key: KeyInfo,
    #[serde(flatten)]
    pub object: ObjectInfo,
}

impl KeyInfo {
    /// The newest version.
    #[must_use]
    pub fn latest(&self) -> Option<&KeyVersionInfo> {
        self.versions.last()
    }

    /// Whether `client` matches the policy.
    #[must_use]
    pub fn allows(&self, client: &ClientInfo) -> bool {
        self.allow.iter().any(|s| s.matches(client))
    }
}

/// A registered client: the holder of a certificate issued by the
/// deployment CA, identified by the certificate's SHA-256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    pub labels: Labels,
    pub admin: bool,
    /// The certificate serial number, hex.
    pub serial: String,
    /// SHA-256 of the certificate DER, hex.
    pub fingerprint: String,
    pub created_ms: i64,
    pub not_after_ms: i64,
    /// Set once an admin revoked the client: its certificate is refused at
    /// every TLS handshake and request from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<ClientRevocation>,
}

/// When and why a client was revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRevocation {
    /// Unix milliseconds.
    pub revoked_ms: i64,
    pub reason: String,
}

/// A key version a host holds unwrapped, as a heartbeat names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldKey {
    pub name: String,
    pub version: u32,
}

/// The key server's verdict on one [`HeldKey`]: whether the client may
/// still hold it, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatVerdict {
    pub name: String,
    pub version: u32,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Most keys one heartbeat may name.
pub const MAX_HEARTBEAT_KEYS: usize = 256;

/// An audit entry before it is chained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditDraft {
    pub time_ms: i64,
    /// The client name, or `-` before one is known.
    pub client: String,
    pub operation: String,
    pub key: Option<String>,
    pub version: Option<u32>,
    /// `ok`, `denied`, `invalid` or `error`.
    pub outcome: String,
    /// Status code and error text; never secret.
    pub detail: String,
}

/// A stored audit entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    pub time_ms: i64,
    pub client: String,
    pub operation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    pub outcome: String,
    pub detail: String,
    /// SHA-256(previous hash || canonical entry bytes), hex.
    pub hash: String,
    /// HMAC-SHA-256 of the hash under a key derived from the root key, hex;
    /// absent for entries written while the server was sealed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The current time in Unix milliseconds.
#[must_use]
pub fn now_ms() -> i64 {
    let since =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// RFC 3339 text for Unix milliseconds.
#[must_use]
pub fn format_time(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// Parses RFC 3339 text (or plain Unix seconds) into Unix milliseconds.
pub fn parse_time(text: &str) -> Result<i64> {
    if let Ok(seconds) = text.parse::<i64>() {
        return seconds
            .checked_mul(1000)
            .ok_or_else(|| KmsError::invalid(format!("time '{text}' is out of range")));
    }
    let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            KmsError::invalid(format!("time '{text}' is not RFC 3339 (2024-05-01T12:00:00Z)"))
        })?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| KmsError::invalid(format!("time '{text}' is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, labels: &str) -> ClientInfo {
        ClientInfo {
            name: name.into(),
            labels: Labels::parse_list(labels).unwrap(),
            admin: false,
            serial: String::new(),
            fingerprint: String::new(),
            created_ms: 0,
            not_after_ms: 0,
            revoked: None,
        }
    }

    #[test]
    fn selectors_parse_and_match() {
        let eu = Selector::parse("label:region=eu").unwrap();
        let web = Selector::parse("client:web-1").unwrap();
        assert!(eu.matches(&client("a", "region=eu,role=host")));
        assert!(!eu.matches(&client("a", "region=us")));
        assert!(web.matches(&client("web-1", "")));
        assert!(!web.matches(&client("web-2", "")));
        assert_eq!(eu.to_string(), "label:region=eu");
        for bad in ["region=eu", "label:region", "client:", "client:a b", "label:Region=eu"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_and_labels_are_bounded() {
        assert!(check_name("key", "db-volume.01").is_ok());
        assert!(check_name("key", "-x").is_err());
        assert!(check_name("key", "a:b").is_err());
        assert!(check_name("key", &"a".repeat(129)).is_err());
        assert!(Labels::parse_list("a=1,a=2").is_err());
        assert!(Labels::parse_list("a").is_err());
        assert_eq!(
            Labels::parse_list(" region=eu , role=host ").unwrap().get("role"),
            Some("host")
        );
    }

    #[test]
    fn key_state_json() {
        let v = KeyVersionInfo {
            version: 2,
            state: KeyState::Revoked { reason: "leak".into() },
            created_ms: 1,
            changed_ms: Some(2),
        };
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["state"], "revoked");
        assert_eq!(json["reason"], "leak");
        let back: KeyVersionInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn times_round_trip() {
        let ms = parse_time("2024-05-01T12:00:00.250Z").unwrap();
        assert_eq!(format_time(ms), "2024-05-01T12:00:00.25Z");
        assert_eq!(parse_time("10").unwrap(), 10_000);
        assert!(parse_time("yesterday").is_err());
    }
}
