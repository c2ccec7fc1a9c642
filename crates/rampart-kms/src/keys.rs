//! The root of trust and the two ciphertext formats of the key manager.
//!
//! * Stored material: every key version's 256-bit material (and the
//!   deployment CA's private key) is sealed under the root key with
//!   AES-256-GCM as `nonce(12) || ciphertext || tag(16)`; the associated
//!   data binds the key name and version, so a stored blob moved to another
//!   row does not open.
//! * Wrapped data (the API's `wrap`/`unwrap`):
//!   `rampart:v1:NAME:VERSION:BASE64URL(nonce || ciphertext || tag)`, sealed
//!   under the key version's material; the associated data binds the format
//!   version, key name, key version and the caller's context.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::sync::Arc;

use base64::Engine as _;
use rampart_crypto::{
    fill_random, hkdf, hmac, random_secret, Gcm, HashAlg, HmacKey, SecretBytes, GCM_NONCE_LEN,
    GCM_TAG_LEN,
};

use crate::error::{KmsError, Result};
pub use rampart_kms_client::wrapped::{WrappedHeader, MAX_WRAP_PLAINTEXT};

/// Bytes of the root key and of every key version's material.
pub const KEY_BYTES: usize = 32;
/// Largest caller context bound into a wrap.
pub const MAX_CONTEXT: usize = 4096;

const CHECK_PLAINTEXT: &[u8] = b"rampart-kms root key check v1";

/// The key that authenticates list cursors, derived from the audit MAC
/// key: every server of a deployment holds that one (an HSM root cannot be
/// read to derive from), so each accepts the others' cursors.
fn cursor_key(audit_key: &SecretBytes) -> Result<SecretBytes> {
    let mut cursor_key = SecretBytes::zeroed(32);
    hkdf(
        HashAlg::Sha256,
        audit_key.expose(),
        b"",
        b"rampart-kms list cursor mac v1",
        cursor_key.expose_mut(),
    )?;
    Ok(cursor_key)
}

/// The key that authenticates audit checkpoints and the anchor left by
/// pruning, derived from the audit MAC key: a key of its own, so that an
/// entry's MAC can never pass for one.
fn mark_key(audit_key: &SecretBytes) -> Result<SecretBytes> {
    let mut mark_key = SecretBytes::zeroed(32);
    hkdf(
        HashAlg::Sha256,
        audit_key.expose(),
        b"",
        b"rampart-kms audit checkpoint mac v1",
        mark_key.expose_mut(),
    )?;
    Ok(mark_key)
}

/// Where the root key is and what it can do: seal and open blobs
/// (`nonce(12) || ciphertext || tag(16)`, AES-256-GCM) under associated
/// data. Two implementations: [`MemoryRoot`], the key itself in process
/// memory (from an unseal key file or Shamir shares), and
/// [`crate::hsm::HsmRoot`], a non-extractable key object in a PKCS#11
/// token that does the AES-GCM itself.
pub trait RootOfTrust: Send + Sync + std::fmt::Debug {
    /// Seals `plaintext` under the root key with `aad`.
    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>>;
    /// Opens a blob of [`RootOfTrust::seal`]; [`KmsError::UnwrapFailed`]
    /// when it does not authenticate.
    fn open(&self, aad: &[u8], blob: &[u8]) -> Result<SecretBytes>;
    /// Where the key is, for messages (never anything secret).
    fn describe(&self) -> String;
}

/// The root key in process memory.
#[derive(Debug)]
pub struct MemoryRoot {
    gcm: Gcm,
}

impl RootOfTrust for MemoryRoot {
    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>> {
        seal(&self.gcm, aad, plaintext)
    }

    fn open(&self, aad: &[u8], blob: &[u8]) -> Result<SecretBytes> {
        open(&self.gcm, aad, blob)
    }

    fn describe(&self) -> String {
        "root key in memory".into()
    }
}

/// The root key: a [`RootOfTrust`] and the audit log's MAC key. Never
/// stored in the clear.
#[derive(Debug)]
pub struct RootKey {
    root: Arc<dyn RootOfTrust>,
    audit_key: SecretBytes,
    /// Authenticates list cursors (see `cursor_key`).
    cursor_key: SecretBytes,
    /// Authenticates audit checkpoints and the anchor left by pruning: a
    /// key of its own, so that an entry's MAC can never pass for one.
    mark_key: SecretBytes,
}

impl RootKey {
    /// Wraps 32 secret bytes.
    pub fn new(key: &SecretBytes) -> Result<Self> {
        if key.len() != KEY_BYTES {
            return Err(KmsError::UnsealFailed(format!(
                "the root key must be {KEY_BYTES} bytes, got {}",
                key.len()
            )));
        }
        let mut audit_key = SecretBytes::zeroed(32);
        hkdf(
            HashAlg::Sha256,
            key.expose(),
            b"",
            b"rampart-kms audit mac v1",
            audit_key.expose_mut(),
        )?;
        let (cursor_key, mark_key) = (cursor_key(&audit_key)?, mark_key(&audit_key)?);
        Ok(Self {
            root: Arc::new(MemoryRoot { gcm: Gcm::new(key.expose())? }),
            audit_key,
            cursor_key,
            mark_key,
        })
    }

    /// A root key that cannot be read (in an HSM): the audit MAC key is a
    /// random key sealed by it, kept in the store ([`RootKey::sealed_audit_key`]).
    pub fn with_root(root: Arc<dyn RootOfTrust>, sealed_audit_key: &[u8]) -> Result<Self> {
        let audit_key =
            root.open(&aad(b"audit-key", &[]), sealed_audit_key).map_err(|e| match e {
                KmsError::UnwrapFailed => KmsError::UnsealFailed(format!(
                    "the audit key does not open under the {}: not this deployment's root key",
                    root.describe()
                )),
                other => other,
            })?;
        if audit_key.len() != 32 {
            return Err(KmsError::Corrupt("the sealed audit key is not 32 bytes".into()));
        }
        let (cursor_key, mark_key) = (cursor_key(&audit_key)?, mark_key(&audit_key)?);
        Ok(Self { root, audit_key, cursor_key, mark_key })
    }

    /// A new random audit MAC key sealed by `root`, for [`RootKey::with_root`].
    pub fn sealed_audit_key(root: &dyn RootOfTrust) -> Result<Vec<u8>> {
        let key = random_secret(32)?;
        root.seal(&aad(b"audit-key", &[]), key.expose())
    }

    /// A fresh random root key (and its bytes, for splitting or the unseal
    /// key file).
    pub fn generate() -> Result<(Self, SecretBytes)> {
        let key = random_secret(KEY_BYTES)?;
        Ok((Self::new(&key)?, key))
    }

    /// Where the root key is, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        self.root.describe()
    }

    /// The check value stored with the deployment: proves a candidate root
    /// key right without revealing anything about it.
    pub fn check_value(&self) -> Result<Vec<u8>> {
        self.root.seal(&aad(b"check", &[]), CHECK_PLAINTEXT)
    }

    /// Whether `check` was made by this root key.
    #[must_use]
    pub fn verify_check(&self, check: &[u8]) -> bool {
        self.root.open(&aad(b"check", &[]), check).is_ok_and(|p| p.expose() == CHECK_PLAINTEXT)
    }

    /// Seals a key version's material for the store.
    pub fn seal_material(
        &self,
        name: &str,
        version: u32,
        material: &SecretBytes,
    ) -> Result<Vec<u8>> {
        self.root.seal(&material_aad(name, version), material.expose())
    }

    /// Opens a stored key version's material.
    pub fn open_material(&self, name: &str, version: u32, blob: &[u8]) -> Result<SecretBytes> {
        self.root.open(&material_aad(name, version), blob).map_err(|e| match e {
            KmsError::UnwrapFailed => KmsError::Corrupt(format!(
                "the stored material of {name} version {version} does not open under the root key"
            )),
            other => other,
        })
    }

    /// Seals the deployment CA's private key.
    pub fn seal_ca_key(&self, key_der: &[u8]) -> Result<Vec<u8>> {
        self.root.seal(&aad(b"ca-key", &[]), key_der)
    }

    pub fn open_ca_key(&self, blob: &[u8]) -> Result<SecretBytes> {
        self.root.open(&aad(b"ca-key", &[]), blob).map_err(|e| match e {
            KmsError::UnwrapFailed => {
                KmsError::Corrupt("the CA key does not open under the root key".into())
            }
            other => other,
        })
    }

    /// The MAC of an audit entry's hash.
    #[must_use]
    pub fn audit_mac(&self, hash: &[u8]) -> Vec<u8> {
        hmac(HashAlg::Sha256, self.audit_key.expose(), hash).expose().to_vec()
    }

    /// [`Self::audit_mac`] with its HMAC states computed once, for walks
    /// over millions of entries.
    #[must_use]
    pub fn audit_macer(&self) -> AuditMacer {
        AuditMacer { key: HmacKey::new(HashAlg::Sha256, self.audit_key.expose()) }
    }

    /// The MAC of an audit checkpoint or anchor's canonical bytes.
    #[must_use]
    pub fn audit_mark_mac(&self, canonical: &[u8]) -> Vec<u8> {
        hmac(HashAlg::Sha256, self.mark_key.expose(), canonical).expose().to_vec()
    }
}

/// HMAC-SHA256 under the audit key with its inner and outer states
/// computed once (RFC 2104): the entry MAC of [`RootKey::audit_mac`]
/// without a key schedule and a locked allocation per entry, and two
/// compressions per entry instead of four.
#[derive(Debug)]
pub struct AuditMacer {
    key: HmacKey,
}

impl AuditMacer {
    /// `HMAC-SHA256(audit key, hash)` of a 32-byte entry hash.
    #[must_use]
    pub fn mac(&self, hash: &[u8; 32]) -> [u8; 32] {
        let mut out = [0u8; 32];
        // A 32-byte buffer holds an HMAC-SHA256: this cannot fail.
        let _ = self.key.sign_into(hash, &mut out);
        out
    }
}

impl RootKey {
    /// The MAC of a list cursor's bytes.
    #[must_use]
    pub fn cursor_mac(&self, data: &[u8]) -> Vec<u8> {
        hmac(HashAlg::Sha256, self.cursor_key.expose(), data).expose().to_vec()
    }
}

fn aad(purpose: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut out = b"rampart-kms/".to_vec();
    out.extend_from_slice(purpose);
    out.push(0);
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

fn material_aad(name: &str, version: u32) -> Vec<u8> {
    aad(b"material/v1", &[name.as_bytes(), &version.to_be_bytes()])
}

fn wrap_aad(name: &str, version: u32, context: &[u8]) -> Vec<u8> {
    aad(b"wrap/v1", &[name.as_bytes(), &version.to_be_bytes(), context])
}

fn seal(gcm: &Gcm, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>> {
    let mut nonce = [0u8; GCM_NONCE_LEN];
    fill_random(&mut nonce)?;
    let mut out = Vec::with_capacity(GCM_NONCE_LEN + plaintext.len() + GCM_TAG_LEN);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(plaintext);
    let tag = gcm.seal(&nonce, aad, &mut out[GCM_NONCE_LEN..])?;
    out.extend_from_slice(&tag);
    Ok(out)
}

fn open(gcm: &Gcm, aad: &[u8], blob: &[u8]) -> Result<SecretBytes> {
    if blob.len() < GCM_NONCE_LEN + GCM_TAG_LEN {
        return Err(KmsError::UnwrapFailed);
    }
    let mut nonce = [0u8; GCM_NONCE_LEN];
    nonce.copy_from_slice(&blob[..GCM_NONCE_LEN]);
    let mut tag = [0u8; GCM_TAG_LEN];
    tag.copy_from_slice(&blob[blob.len() - GCM_TAG_LEN..]);
    let mut data = SecretBytes::from_slice(&blob[GCM_NONCE_LEN..blob.len() - GCM_TAG_LEN]);
    gcm.open(&nonce, aad, data.expose_mut(), &tag).map_err(|_| KmsError::UnwrapFailed)?;
    Ok(data)
}

/// Wraps `plaintext` under a key version's material.
pub fn wrap(
    name: &str,
    version: u32,
    material: &SecretBytes,
    plaintext: &[u8],
    context: &[u8],
) -> Result<String> {
    let gcm = Gcm::new(material.expose())?;
    let sealed = seal(&gcm, &wrap_aad(name, version, context), plaintext)?;
    Ok(format!("rampart:v1:{name}:{version}:{}", URL_SAFE_NO_PAD.encode(sealed)))
}

/// Unwraps a parsed ciphertext with its key version's material.
pub fn unwrap(
    header: &WrappedHeader,
    material: &SecretBytes,
    context: &[u8],
) -> Result<SecretBytes> {
    let gcm = Gcm::new(material.expose())?;
    open(&gcm, &wrap_aad(&header.name, header.version, context), header.sealed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prepared_audit_mac_is_the_audit_mac() {
        let (root, _) = RootKey::generate().unwrap();
        let macer = root.audit_macer();
        for i in 0..4u8 {
            let hash = [i; 32];
            assert_eq!(macer.mac(&hash).to_vec(), root.audit_mac(&hash));
        }
    }

    #[test]
    fn material_is_bound_to_name_and_version() {
        let (root, _) = RootKey::generate().unwrap();
        let material = random_secret(32).unwrap();
        let blob = root.seal_material("db", 1, &material).unwrap();
        assert_eq!(root.open_material("db", 1, &blob).unwrap(), material);
        assert!(root.open_material("db", 2, &blob).is_err());
        assert!(root.open_material("dc", 1, &blob).is_err());
        let (other, _) = RootKey::generate().unwrap();
        assert!(other.open_material("db", 1, &blob).is_err());
        assert!(root.verify_check(&root.check_value().unwrap()));
        assert!(!other.verify_check(&root.check_value().unwrap()));
    }

    #[test]
    fn wrap_binds_context_name_and_version() {
        let material = random_secret(32).unwrap();
        let text = wrap("vol", 3, &material, b"secret passphrase", b"host=a").unwrap();
        assert!(text.starts_with("rampart:v1:vol:3:"));
        let header = WrappedHeader::parse(&text).unwrap();
        assert_eq!((header.name.as_str(), header.version), ("vol", 3));
        assert_eq!(unwrap(&header, &material, b"host=a").unwrap().expose(), b"secret passphrase");
        assert_eq!(unwrap(&header, &material, b"host=b"), Err(KmsError::UnwrapFailed));
        let relabelled = text.replace(":vol:3:", ":vol:2:");
        let header = WrappedHeader::parse(&relabelled).unwrap();
        assert_eq!(unwrap(&header, &material, b"host=a"), Err(KmsError::UnwrapFailed));
        for bad in ["", "rampart:v2:vol:1:AAAA", "rampart:v1:vol:0:AAAA", "rampart:v1:vol:1:!!"] {
            assert!(WrappedHeader::parse(bad).is_err(), "{bad}");
        }
    }
}
