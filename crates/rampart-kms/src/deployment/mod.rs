//! A deployment as its operator handles it: `kms init` here, `kms serve`
//! in [`serve`], audit archives in [`archive`], and the store opened
//! directly ([`StoreAccess`]) by the tools that need no server.
//!
//! `kms init` makes a new deployment. The root key is made here and leaves
//! this function only as an unseal key file (mode 0600) or as Shamir
//! shares handed back to the caller to print once; it is never stored.
//!
//! With an HSM (`InitSeal::Hsm`), the root key is generated inside the
//! PKCS#11 token and never leaves it ([`crate::hsm`]).
//!
//! The data directory holds `ca.pem`, `server.pem`, `server.key` (mode
//! 0600: servers need it to answer TLS while sealed), `admin.bundle` and,
//! with the file scheme, `unseal.key`; with an HSM, `hsm.json` (module,
//! token and key label). The store holds the seal
//! configuration, the root key check value, the CA certificate and the CA
//! private key sealed under the root key. Further servers of an
//! active-active deployment get a copy of the directory.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_crypto::{fill_random, SecretBytes};
use serde::{Deserialize, Serialize};

use crate::bundle::{read_limited, write_private_file, Bundle, Endpoint, BUNDLE_FORMAT};
use crate::error::{KmsError, Result};
use crate::hsm::{read_pin_file, HsmConfig, HsmRoot, META_AUDIT_KEY};
use crate::keys::{RootKey, RootOfTrust, KEY_BYTES};
use crate::model::{now_ms, ClientInfo, Labels};
use crate::pki::{client_request, Authority};
use crate::shamir::{self, Share};
use crate::store::{meta, Store};

pub mod archive;
pub mod serve;

/// An operator command's failure: a setting to change, a file that could
/// not be read or written, or the key manager's own error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// A setting or argument the operator must change.
    #[error("{0}")]
    Usage(String),
    /// A local file or directory could not be read or written.
    #[error("{0}")]
    Io(String),
    /// Writing the command's own output failed (its reader may be gone).
    #[error(transparent)]
    Output(std::io::Error),
    #[error(transparent)]
    Kms(#[from] KmsError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// Any other failure under the command (a KMIP exchange's), kept
    /// whole with its causes.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl From<rampart_kms_client::ConfigError> for AdminError {
    fn from(error: rampart_kms_client::ConfigError) -> Self {
        Self::Kms(error.into())
    }
}

impl AdminError {
    /// An I/O failure on `path`: `"{what} {path}: {error}"`.
    #[must_use]
    pub fn io(what: &str, path: &Path, error: &std::io::Error) -> Self {
        Self::Io(format!("{what} {}: {error}", path.display()))
    }
}

/// Where a deployment keeps its store and root key, for the commands that
/// open the store themselves rather than ask a server.
#[derive(Debug, Clone)]
pub struct StoreAccess {
    pub data_dir: PathBuf,
    /// `sqlite` (default: `DIR/kms.db`), a `.db` path or a postgres:// URL.
    pub store: Option<String>,
    /// The unseal key file (default `DIR/unseal.key`).
    pub unseal_key_file: Option<PathBuf>,
}

impl StoreAccess {
    /// The unseal key file this deployment unseals with.
    #[must_use]
    pub fn unseal_key_path(&self) -> PathBuf {
        self.unseal_key_file.clone().unwrap_or_else(|| self.data_dir.join(files::UNSEAL_KEY))
    }

    /// The root key, read from the unseal key file.
    pub fn root_key(&self) -> Result<RootKey> {
        read_root_key(&self.unseal_key_path())
    }

    /// The store, opened (and migrated) directly.
    pub async fn open_store(&self) -> Result<Arc<dyn Store>> {
        crate::store::open(self.store.as_deref(), &self.data_dir).await
    }
}

/// Creates the data directory (owner only: it will hold private keys),
/// opens the store `store` and makes the deployment there ([`init`]).
pub async fn create(opts: &InitOptions, store: Option<&str>) -> Result<InitOutcome, AdminError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&opts.data_dir)
        .map_err(|e| AdminError::io("cannot create", &opts.data_dir, &e))?;
    let store = crate::store::open(store, &opts.data_dir).await?;
    Ok(init(opts, store.as_ref()).await?)
}

/// Certificate validity days as `kms init` takes them: 1 to 3650.
#[must_use]
pub fn clamp_days(days: u32) -> i64 {
    i64::from(days.clamp(1, 3650))
}

/// File names in the data directory.
pub mod files {
    pub const CA_CERT: &str = "ca.pem";
    pub const SERVER_CERT: &str = "server.pem";
    pub const SERVER_KEY: &str = "server.key";
    pub const UNSEAL_KEY: &str = "unseal.key";
    pub const ADMIN_BUNDLE: &str = "admin.bundle";
    pub const HSM_CONFIG: &str = crate::hsm::HSM_CONFIG_FILE;
}

/// How the root key is kept, as stored in the deployment metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "lowercase")]
#[non_exhaustive]
pub enum SealConfig {
    /// An unseal key file: servers unseal themselves at start.
    File,
    /// Shamir shares: servers start sealed until `threshold` shares arrive.
    Shamir { shares: u8, threshold: u8 },
    /// A non-extractable key in a PKCS#11 token (recorded in
    /// `DIR/hsm.json`): servers unseal by logging in to the token.
    Hsm,
}

/// How `init` should keep the root key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum InitSeal {
    /// Write the root key (hex) to this file, mode 0600.
    File(PathBuf),
    /// Split it `threshold`-of-`shares`.
    Shamir { shares: u8, threshold: u8 },
    /// Generate it inside the PKCS#11 token `token` of `module`, logging
    /// in with the user PIN read from `pin_file`.
    Hsm { module: PathBuf, token: String, pin_file: PathBuf },
}

/// Options of [`init`].
#[derive(Debug, Clone)]
pub struct InitOptions {
    pub data_dir: PathBuf,
    pub seal: InitSeal,
    /// Extra server certificate names (DNS names or IP addresses).
    pub sans: Vec<String>,
    /// The endpoints written into bundles (default `https://127.0.0.1:8443`).
    pub endpoints: Vec<String>,
    /// Validity of the server and admin certificates, days.
    pub days: i64,
}

/// What [`init`] made.
#[derive(Debug)]
pub struct InitOutcome {
    pub admin_bundle: PathBuf,
    pub unseal_key_file: Option<PathBuf>,
    /// The shares to hand out (empty with an unseal key file).
    pub shares: Vec<Share>,
    /// Where the root key was generated, with an HSM.
    pub hsm: Option<HsmConfig>,
}

/// Creates a deployment in `opts.data_dir` and `store`.
pub async fn init(opts: &InitOptions, store: &dyn Store) -> Result<InitOutcome> {
    let config = match opts.seal {
        InitSeal::File(_) => SealConfig::File,
        InitSeal::Shamir { shares, threshold } => {
            if threshold < 2 || shares < threshold {
                return Err(KmsError::Config(format!(
                    "need 2 <= --threshold <= --shares <= 255 (got {threshold} of {shares})"
                )));
            }
            SealConfig::Shamir { shares, threshold }
        }
        InitSeal::Hsm { .. } => SealConfig::Hsm,
    };
    let mut endpoints = Vec::new();
    for e in if opts.endpoints.is_empty() {
        vec!["127.0.0.1:8443".to_owned()]
    } else {
        opts.endpoints.clone()
    } {
        endpoints.push(Endpoint::parse(&e)?.url());
    }
    for name in [files::SERVER_KEY, files::ADMIN_BUNDLE] {
        if opts.data_dir.join(name).exists() {
            return Err(KmsError::Config(format!(
                "{} already holds a deployment ({name} exists)",
                opts.data_dir.display()
            )));
        }
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&opts.data_dir)
        .map_err(|e| KmsError::Config(format!("cannot create {}: {e}", opts.data_dir.display())))?;

    let made = make_root(&opts.seal)?;
    match finish_init(opts, store, config, endpoints, &made).await {
        Ok(outcome) => Ok(outcome),
        Err(error) => {
            // Leave no orphan key object behind in the token.
            if let MadeRoot::Hsm { hsm, .. } = &made {
                if let Err(e) = hsm.destroy() {
                    tracing::warn!("cannot delete the new root key from the HSM: {e}");
                }
            }
            Err(error)
        }
    }
}

/// A new root key, as `init` made it.
enum MadeRoot {
    /// In memory: the key and its bytes (for the unseal key file or shares).
    Memory { root: RootKey, bytes: SecretBytes },
    /// In a token; the sealed audit key goes to the store.
    Hsm { root: RootKey, hsm: Arc<HsmRoot>, sealed_audit_key: Vec<u8> },
}

impl MadeRoot {
    fn root(&self) -> &RootKey {
        match self {
            Self::Memory { root, .. } | Self::Hsm { root, .. } => root,
        }
    }
}

fn make_root(seal: &InitSeal) -> Result<MadeRoot> {
    let InitSeal::Hsm { module, token, pin_file } = seal else {
        let (root, bytes) = RootKey::generate()?;
        return Ok(MadeRoot::Memory { root, bytes });
    };
    let pin = read_pin_file(pin_file)?;
    let mut id = [0u8; 8];
    fill_random(&mut id)?;
    let hsm_config = HsmConfig {
        module: module.clone(),
        token: token.clone(),
        key_label: format!("rampart-kms root {}", hex::encode(id)),
    };
    let hsm = Arc::new(HsmRoot::generate(&hsm_config, &pin)?);
    drop(pin);
    let made = RootKey::sealed_audit_key(hsm.as_ref()).and_then(|sealed| {
        let root = RootKey::with_root(Arc::clone(&hsm) as Arc<dyn RootOfTrust>, &sealed)?;
        Ok((root, sealed))
    });
    match made {
        Ok((root, sealed_audit_key)) => Ok(MadeRoot::Hsm { root, hsm, sealed_audit_key }),
        Err(e) => {
            let _ = hsm.destroy();
            Err(e)
        }
    }
}

async fn finish_init(
    opts: &InitOptions,
    store: &dyn Store,
    config: SealConfig,
    endpoints: Vec<String>,
    made: &MadeRoot,
) -> Result<InitOutcome> {
    let root = made.root();
    let deployment = hex::encode(&root.check_value()?[..4]);
    let (ca, ca_key) = Authority::generate(&deployment)?;
    let mut sans = opts.sans.clone();
    for e in &endpoints {
        let host = Endpoint::parse(e)?.host;
        if !sans.contains(&host) {
            sans.push(host);
        }
    }
    let server = ca.issue_server(&sans, opts.days)?;
    let (csr, admin_key) = client_request("admin")?;
    let issued = ca.issue_client_days(&csr, "admin", opts.days)?;
    let admin = ClientInfo {
        name: "admin".into(),
        labels: Labels::default(),
        admin: true,
        serial: issued.serial,
        fingerprint: issued.fingerprint,
        created_ms: now_ms(),
        not_after_ms: issued.not_after_ms,
        revoked: None,
    };
    let seal_json = serde_json::to_vec(&config)
        .map_err(|e| KmsError::Config(format!("cannot encode the seal configuration: {e}")))?;
    let mut entries = vec![
        (meta::SEAL, seal_json),
        (meta::ROOT_CHECK, root.check_value()?),
        (meta::CA_CERT, ca.cert_pem().as_bytes().to_vec()),
        (meta::CA_KEY, root.seal_ca_key(ca_key.expose())?),
    ];
    if let MadeRoot::Hsm { sealed_audit_key, .. } = made {
        entries.push((META_AUDIT_KEY, sealed_audit_key.clone()));
    }
    store.initialize(entries, admin).await?;

    let dir = &opts.data_dir;
    if let MadeRoot::Hsm { hsm, .. } = made {
        hsm.config().write(dir)?;
    }
    write_public_file(&dir.join(files::CA_CERT), ca.cert_pem().as_bytes())?;
    write_public_file(&dir.join(files::SERVER_CERT), server.cert_pem.as_bytes())?;
    write_private_file(&dir.join(files::SERVER_KEY), server.key_pem.expose())?;
    let bundle = Bundle {
        format: BUNDLE_FORMAT.into(),
        name: "admin".into(),
        endpoints,
        ca_cert: ca.cert_pem().to_owned(),
        cert: issued.cert_pem,
        key: admin_key,
    };
    let admin_bundle = dir.join(files::ADMIN_BUNDLE);
    bundle.write(&admin_bundle)?;
    match (&opts.seal, made) {
        (InitSeal::File(path), MadeRoot::Memory { bytes, .. }) => {
            write_unseal_key(path, bytes)?;
            Ok(InitOutcome {
                admin_bundle,
                unseal_key_file: Some(path.clone()),
                shares: Vec::new(),
                hsm: None,
            })
        }
        (InitSeal::Shamir { shares, threshold }, MadeRoot::Memory { bytes, .. }) => {
            Ok(InitOutcome {
                admin_bundle,
                unseal_key_file: None,
                shares: shamir::split(bytes.expose(), *threshold, *shares)?,
                hsm: None,
            })
        }
        (_, MadeRoot::Hsm { hsm, .. }) => Ok(InitOutcome {
            admin_bundle,
            unseal_key_file: None,
            shares: Vec::new(),
            hsm: Some(hsm.config().clone()),
        }),
        // make_root makes an HSM root exactly for InitSeal::Hsm.
        (InitSeal::Hsm { .. }, MadeRoot::Memory { .. }) => {
            Err(KmsError::Config("internal: the root key was not made in the HSM".into()))
        }
    }
}

fn write_public_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)))
        .map_err(|e| KmsError::Config(format!("cannot write {}: {e}", path.display())))
}

/// Writes the root key as hex text, mode 0600.
pub fn write_unseal_key(path: &Path, key: &SecretBytes) -> Result<()> {
    Ok(write_private_file(path, hex_line(key.expose()).expose())?)
}

/// `bytes` as one line of hex text, kept as a secret (no copy of it is
/// left behind unzeroed).
#[must_use]
pub fn hex_line(bytes: &[u8]) -> SecretBytes {
    let mut text = SecretBytes::new(hex::encode(bytes).into_bytes());
    let mut line = SecretBytes::zeroed(text.len() + 1);
    line.expose_mut()[..text.len()].copy_from_slice(text.expose());
    line.expose_mut()[text.len()] = b'\n';
    text.expose_mut().fill(0);
    line
}

/// Reads an unseal key file and makes the root key of it.
pub fn read_root_key(path: &Path) -> Result<RootKey> {
    RootKey::new(&read_unseal_key(path)?)
}

/// Writes a bundle's certificate, private key and CA certificate into
/// `dir` (created if absent) as `cert.pem`, `key.pem` (mode 0600) and
/// `ca.pem`, for KMIP and other TLS clients.
pub fn write_pem_files(bundle: &Bundle, dir: &Path) -> Result<(), AdminError> {
    std::fs::create_dir_all(dir).map_err(|e| AdminError::io("cannot create", dir, &e))?;
    let files: [(&str, &[u8], u32); 3] = [
        ("cert.pem", bundle.cert.as_bytes(), 0o644),
        ("key.pem", bundle.key.expose(), 0o600),
        ("ca.pem", bundle.ca_cert.as_bytes(), 0o644),
    ];
    for (name, bytes, mode) in files {
        let path = dir.join(name);
        write_file_mode(&path, bytes, mode)
            .map_err(|e| AdminError::io("cannot write", &path, &e))?;
    }
    Ok(())
}

/// Writes `bytes` to a new or truncated file created with `mode` (the
/// mode is set before any byte is written, so a key is never readable by
/// others, even briefly).
fn write_file_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Reads an unseal key file (hex text of the 32-byte root key).
pub fn read_unseal_key(path: &Path) -> Result<SecretBytes> {
    let text = read_limited(path, 256)?;
    let trimmed = std::str::from_utf8(text.expose())
        .map_err(|_| KmsError::Config(format!("{} is not an unseal key file", path.display())))?
        .trim();
    let key =
        SecretBytes::new(hex::decode(trimmed).map_err(|_| {
            KmsError::Config(format!("{} is not an unseal key file", path.display()))
        })?);
    if key.len() != KEY_BYTES {
        return Err(KmsError::Config(format!("{} does not hold a 256-bit key", path.display())));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let mut random = [0u8; 8];
        fill_random(&mut random).unwrap();
        let dir =
            std::env::temp_dir().join(format!("rampart-deployment-{tag}-{}", hex::encode(random)));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_hex_line_is_the_bytes_in_hex_and_a_newline() {
        assert_eq!(hex_line(&[0x00, 0xab, 0x7f]).expose(), b"00ab7f\n");
        assert_eq!(hex_line(&[]).expose(), b"\n");
    }

    #[test]
    fn store_access_defaults_to_the_unseal_key_in_the_data_directory() {
        let access =
            StoreAccess { data_dir: "/srv/kms".into(), store: None, unseal_key_file: None };
        assert_eq!(access.unseal_key_path(), Path::new("/srv/kms/unseal.key"));
        let given = StoreAccess { unseal_key_file: Some("/run/key".into()), ..access };
        assert_eq!(given.unseal_key_path(), Path::new("/run/key"));
        assert_eq!((clamp_days(0), clamp_days(825), clamp_days(100_000)), (1, 825, 3650));
    }

    #[test]
    fn pem_files_keep_the_private_key_to_the_owner() {
        let dir = temp_dir("pem");
        let out = dir.join("pem");
        let bundle = Bundle {
            format: BUNDLE_FORMAT.into(),
            name: "host".into(),
            endpoints: vec!["https://127.0.0.1:8443".into()],
            ca_cert: "CA\n".into(),
            cert: "CERT\n".into(),
            key: SecretBytes::from_slice(b"KEY\n"),
        };
        write_pem_files(&bundle, &out).unwrap();
        for (name, text, want) in
            [("cert.pem", "CERT\n", 0o644), ("key.pem", "KEY\n", 0o600), ("ca.pem", "CA\n", 0o644)]
        {
            let path = out.join(name);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}");
            assert_eq!(mode(&path), want, "{name}");
        }
        let blocked = dir.join("file");
        std::fs::write(&blocked, b"").unwrap();
        let error = write_pem_files(&bundle, &blocked.join("sub")).unwrap_err();
        assert!(matches!(error, AdminError::Io(_)), "{error:?}");
        assert!(error.to_string().starts_with("cannot create "), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unseal_key_files_round_trip_and_are_owner_only() {
        let dir = temp_dir("unseal");
        let path = dir.join("unseal.key");
        let key = SecretBytes::from_slice(&[7u8; KEY_BYTES]);
        write_unseal_key(&path, &key).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(read_unseal_key(&path).unwrap().expose(), key.expose());
        assert!(read_root_key(&path).is_ok());
        std::fs::write(&path, b"not hex\n").unwrap();
        let error = read_root_key(&path).unwrap_err();
        assert!(error.to_string().ends_with("is not an unseal key file"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
