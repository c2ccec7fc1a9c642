//! Client bundles: one JSON file holding a client certificate, its private
//! key, the deployment CA and the servers' endpoints. Written mode 0600.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rampart_crypto::SecretBytes;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// The `format` field of a bundle.
pub const BUNDLE_FORMAT: &str = "rampart-kms-bundle/v1";
const MAX_BUNDLE: u64 = 1 << 20;
const MAX_ENDPOINTS: usize = 64;

/// A server endpoint: host (DNS name or IP address) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// Parses `HOST:PORT`, `[V6]:PORT` or `https://HOST:PORT[/]`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || {
            ConfigError::Config(format!("endpoint '{text}' is not HOST:PORT or https://HOST:PORT"))
        };
        let rest = text.strip_prefix("https://").unwrap_or(text).trim_end_matches('/');
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || host.contains('/') || host.len() > 253 {
            return Err(bad());
        }
        Ok(Self { host: host.to_owned(), port })
    }

    /// The `https://` URL form.
    #[must_use]
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }
}

/// A client bundle. `Debug` never shows the private key.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    pub format: String,
    /// The client's name (the certificate's common name).
    pub name: String,
    /// `https://HOST:PORT` of every server, tried in order.
    pub endpoints: Vec<String>,
    /// The deployment CA certificate, PEM.
    pub ca_cert: String,
    /// The client certificate, PEM.
    pub cert: String,
    /// The client's private key, PKCS#8 PEM.
    #[serde(with = "secret_text")]
    pub key: SecretBytes,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("name", &self.name)
            .field("endpoints", &self.endpoints)
            .field("key", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// Serde for secret text fields: read straight into (and written from)
/// a zeroizing buffer, never a `String` that outlives the call.
pub mod secret_text {
    use rampart_crypto::SecretBytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(key: &SecretBytes, s: S) -> Result<S::Ok, S::Error> {
        let text = std::str::from_utf8(key.expose()).map_err(serde::ser::Error::custom)?;
        s.serialize_str(text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SecretBytes, D::Error> {
        let text = String::deserialize(d)?;
        Ok(SecretBytes::new(text.into_bytes()))
    }
}

impl Bundle {
    /// The parsed endpoints (at least one).
    pub fn endpoints(&self) -> Result<Vec<Endpoint>> {
        if self.endpoints.is_empty() || self.endpoints.len() > MAX_ENDPOINTS {
            return Err(ConfigError::Config(format!(
                "a bundle needs 1 to {MAX_ENDPOINTS} endpoints"
            )));
        }
        self.endpoints.iter().map(|e| Endpoint::parse(e)).collect()
    }

    /// Reads and checks a bundle file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = read_limited(path, MAX_BUNDLE)?;
        Self::parse(text.expose(), &path.display().to_string())
    }

    /// Parses and checks a bundle file's contents; `origin` names it in
    /// errors.
    pub fn parse(text: &[u8], origin: &str) -> Result<Self> {
        let bundle: Self = serde_json::from_slice(text).map_err(|e| {
            ConfigError::Config(format!("{origin} is not a Rampart KMS bundle: {e}"))
        })?;
        if bundle.format != BUNDLE_FORMAT {
            return Err(ConfigError::Config(format!(
                "{origin}: unsupported bundle format '{}'",
                bundle.format
            )));
        }
        bundle.endpoints()?;
        Ok(bundle)
    }

    /// Writes the bundle, mode 0600.
    pub fn write(&self, path: &Path) -> Result<()> {
        let json = SecretBytes::new(
            serde_json::to_vec_pretty(self)
                .map_err(|e| ConfigError::Config(format!("cannot encode the bundle: {e}")))?,
        );
        write_private_file(path, json.expose())
    }
}

/// Reads at most `limit` bytes of a file into a secret buffer.
pub fn read_limited(path: &Path, limit: u64) -> Result<SecretBytes> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| ConfigError::Config(format!("cannot open {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ConfigError::Config(format!("cannot read {}: {e}", path.display())))?;
    let bytes = SecretBytes::new(bytes);
    if bytes.len() as u64 > limit {
        return Err(ConfigError::Config(format!(
            "{} is larger than {limit} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` with mode 0600 (also when it existed).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail =
        |e: std::io::Error| ConfigError::Config(format!("cannot write {}: {e}", path.display()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(fail)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(
            Endpoint::parse("https://kms.example:8443/").unwrap(),
            Endpoint { host: "kms.example".into(), port: 8443 }
        );
        assert_eq!(Endpoint::parse("[::1]:1").unwrap().url(), "https://[::1]:1");
        assert_eq!(Endpoint::parse("127.0.0.1:8443").unwrap().host, "127.0.0.1");
        for bad in ["kms", "kms:http", ":8443", "https://a/b:1"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let b = Bundle {
            format: BUNDLE_FORMAT.into(),
            name: "n".into(),
            endpoints: vec!["127.0.0.1:1".into()],
            ca_cert: String::new(),
            cert: String::new(),
            key: SecretBytes::from_slice(b"-----BEGIN PRIVATE KEY-----sekrit"),
        };
        assert!(!format!("{b:?}").contains("sekrit"));
        let json = serde_json::to_string(&b).unwrap();
        let back: Bundle = serde_json::from_str(&json).unwrap();
        assert_eq!(back.key, b.key);
    }
}
