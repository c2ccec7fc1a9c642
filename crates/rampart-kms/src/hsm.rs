//! The root key in a PKCS#11 token (an HSM, or SoftHSM2 for testing).
//!
//! `kms init --hsm-module LIB --hsm-token LABEL --hsm-pin-file F` has the
//! token generate an AES-256 secret key object that is persistent
//! (`CKA_TOKEN`), private, sensitive and never extractable, usable for
//! `CKA_ENCRYPT`/`CKA_DECRYPT` only. Everything the file and Shamir schemes
//! seal under the in-memory root key (every key version's material, the
//! CA's private key, the check value) is sealed by that object instead,
//! with `CKM_AES_GCM` inside the token: the same `nonce(12) || ciphertext
//! || tag(16)` format and the same associated data, so a stored blob stays
//! bound to its key name and version.
//!
//! Why `CKM_AES_GCM` (`C_Encrypt`/`C_Decrypt`) and not `CKM_AES_KEY_WRAP_PAD`
//! (`C_WrapKey`/`C_UnwrapKey`): the key versions' material is used by the
//! server's own AES-GCM for the API's wrap and unwrap, so it is data to the
//! token, not a key object; key wrap would need every version imported as
//! an extractable session object first, and RFC 5649 carries no associated
//! data to bind the name and version. SoftHSM2 2.6 implements `CKM_AES_GCM`
//! single-part encryption with caller-supplied 96-bit IVs, as do the
//! network HSMs that follow PKCS#11 2.40.
//!
//! Unsealing is a login (`C_Login` as the user) to the token: the PIN is
//! read from a file or given through the API, kept in zeroizing memory only
//! while logging in, and never logged or shown. The module path, the token
//! label and the key object's label are recorded in `DIR/hsm.json`, so
//! serving needs only the PIN.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::error::{Error as P11Error, RvError};
use cryptoki::mechanism::aead::GcmParams;
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::RawAuthPin;
use rampart_crypto::{fill_random, SecretBytes, GCM_NONCE_LEN, GCM_TAG_LEN};
use serde::{Deserialize, Serialize};

use crate::bundle::{read_limited, write_private_file};
use crate::error::{KmsError, Result};
use crate::keys::RootOfTrust;

/// The file in the data directory that records where the root key is.
pub const HSM_CONFIG_FILE: &str = "hsm.json";
/// Store metadata: the audit log's MAC key, sealed by the token's key
/// (with an in-memory root key it is derived from the key instead).
pub const META_AUDIT_KEY: &str = "hsm_audit_key";
/// Longest PIN file read.
const MAX_PIN_FILE: u64 = 1024;
/// Idle sessions kept open for reuse.
const MAX_IDLE_SESSIONS: usize = 32;

/// Where the root key lives, as recorded in `DIR/hsm.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HsmConfig {
    /// The PKCS#11 module (shared library) path.
    pub module: PathBuf,
    /// The token label (`CK_TOKEN_INFO.label`, trailing blanks removed).
    pub token: String,
    /// The root key object's `CKA_LABEL`.
    pub key_label: String,
}

impl HsmConfig {
    /// Reads `DIR/hsm.json`.
    pub fn read(data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(HSM_CONFIG_FILE);
        let text = read_limited(&path, 64 * 1024).map_err(|e| {
            KmsError::Config(format!(
                "this deployment keeps its root key in an HSM, but {e} (copy {HSM_CONFIG_FILE} from the data directory where `kms init` ran)"
            ))
        })?;
        serde_json::from_slice(text.expose())
            .map_err(|e| KmsError::Config(format!("{} is not valid: {e}", path.display())))
    }

    /// Writes `DIR/hsm.json` (mode 0600, like the rest of the directory).
    pub fn write(&self, data_dir: &Path) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(self)
            .map_err(|e| KmsError::Config(format!("cannot encode {HSM_CONFIG_FILE}: {e}")))?;
        text.push(b'\n');
        Ok(write_private_file(&data_dir.join(HSM_CONFIG_FILE), &text)?)
    }
}

/// Reads a PIN file: its first line, without the line ending. The PIN is
/// secret: it is never part of an error message.
pub fn read_pin_file(path: &Path) -> Result<SecretBytes> {
    let bytes = read_limited(path, MAX_PIN_FILE)?;
    let text = bytes.expose();
    let end = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    let line = &text[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(KmsError::Config(format!("{} holds no PIN", path.display())));
    }
    Ok(SecretBytes::from_slice(line))
}

/// A loaded module. PKCS#11 allows one `C_Initialize` per process and
/// `C_Finalize` would end every other user's sessions, so each module is
/// loaded once and kept for the life of the process.
fn module(path: &Path) -> Result<Pkcs11> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Pkcs11>>> = OnceLock::new();
    let mut modules =
        MODULES.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(ctx) = modules.get(path) {
        return Ok(ctx.clone());
    }
    let fail = |e: P11Error| {
        KmsError::Config(format!("cannot load the PKCS#11 module {}: {e}", path.display()))
    };
    if !path.exists() {
        return Err(KmsError::Config(format!(
            "cannot load the PKCS#11 module {}: no such file",
            path.display()
        )));
    }
    let ctx = Pkcs11::new(path).map_err(fail)?;
    match ctx.initialize(CInitializeArgs::OsThreads) {
        Ok(()) | Err(P11Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => return Err(fail(e)),
    }
    modules.insert(path.to_owned(), ctx.clone());
    Ok(ctx)
}

fn p11(what: &str, e: P11Error) -> KmsError {
    KmsError::Crypto(format!("HSM: {what}: {e}"))
}

/// The slot holding the token labelled `label`.
fn find_token(ctx: &Pkcs11, config: &HsmConfig) -> Result<Slot> {
    let slots = ctx.get_slots_with_token().map_err(|e| p11("listing the slots", e))?;
    let mut seen = Vec::new();
    let mut found = Vec::new();
    for slot in slots {
        let Ok(info) = ctx.get_token_info(slot) else { continue };
        let label = info.label().trim_end().to_owned();
        if label == config.token {
            found.push(slot);
        }
        seen.push(label);
    }
    match found.as_slice() {
        [slot] => Ok(*slot),
        [] => Err(KmsError::Config(format!(
            "no token labelled '{}' in the PKCS#11 module {} (tokens: {})",
            config.token,
            config.module.display(),
            if seen.is_empty() { "none".to_owned() } else { seen.join(", ") }
        ))),
        _ => Err(KmsError::Config(format!(
            "{} tokens are labelled '{}' in {}: relabel all but one",
            found.len(),
            config.token,
            config.module.display()
        ))),
    }
}

/// Logs the application in as the token's user. The PIN is copied into
/// the binding's zeroizing PIN type for the call only.
fn login(session: &Session, config: &HsmConfig, pin: &SecretBytes) -> Result<()> {
    let attempt =
        || session.login_with_raw(UserType::User, &RawAuthPin::new(pin.expose().to_vec()));
    let refused = |rv: RvError| match rv {
        RvError::PinIncorrect | RvError::PinInvalid | RvError::PinLenRange => {
            KmsError::UnsealFailed(format!("the HSM token '{}' refused the PIN", config.token))
        }
        RvError::PinLocked => KmsError::UnsealFailed(format!(
            "the user PIN of the HSM token '{}' is locked (too many wrong PINs)",
            config.token
        )),
        RvError::PinExpired => KmsError::UnsealFailed(format!(
            "the user PIN of the HSM token '{}' has expired: set a new one",
            config.token
        )),
        RvError::UserPinNotInitialized => KmsError::UnsealFailed(format!(
            "the HSM token '{}' has no user PIN yet (initialise it first)",
            config.token
        )),
        other => KmsError::UnsealFailed(format!(
            "cannot log in to the HSM token '{}': {other}",
            config.token
        )),
    };
    match attempt() {
        Ok(()) => Ok(()),
        // Login state is per process and token: another holder in this
        // process logged in. Log out and in again so that this PIN is
        // checked rather than taken on trust.
        Err(P11Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {
            session.logout().map_err(|e| p11("logging out", e))?;
            attempt().map_err(|e| match e {
                P11Error::Pkcs11(rv, _) => refused(rv),
                other => p11("logging in", other),
            })
        }
        Err(P11Error::Pkcs11(rv, _)) => Err(refused(rv)),
        Err(other) => Err(p11("logging in", other)),
    }
}

/// The attributes that make the root key what the deployment promises.
const REQUIRED: [(AttributeType, bool, &str); 4] = [
    (AttributeType::Sensitive, true, "sensitive"),
    (AttributeType::Extractable, false, "non-extractable"),
    (AttributeType::AlwaysSensitive, true, "always sensitive"),
    (AttributeType::NeverExtractable, true, "never extractable"),
];

fn check_attributes(session: &Session, key: ObjectHandle, label: &str) -> Result<()> {
    let types: Vec<AttributeType> = REQUIRED.iter().map(|(t, _, _)| *t).collect();
    let attributes =
        session.get_attributes(key, &types).map_err(|e| p11("reading the key's attributes", e))?;
    for (kind, want, name) in REQUIRED {
        let value = attributes.iter().find_map(|a| match (kind, a) {
            (AttributeType::Sensitive, Attribute::Sensitive(v))
            | (AttributeType::Extractable, Attribute::Extractable(v))
            | (AttributeType::AlwaysSensitive, Attribute::AlwaysSensitive(v))
            | (AttributeType::NeverExtractable, Attribute::NeverExtractable(v)) => Some(*v),
            _ => None,
        });
        if value != Some(want) {
            return Err(KmsError::UnsealFailed(format!(
                "the HSM key '{label}' is not {name}: refusing it as the root key"
            )));
        }
    }
    Ok(())
}

/// The root key as an object in a logged-in token.
pub struct HsmRoot {
    config: HsmConfig,
    slot: Slot,
    key: ObjectHandle,
    /// Keeps the login: it lasts while the application has a session open.
    login_session: Mutex<Session>,
    /// Sessions for operations (a session runs one operation at a time).
    idle: Mutex<Vec<Session>>,
    ctx: Pkcs11,
}

impl std::fmt::Debug for HsmRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HsmRoot")
            .field("module", &self.config.module)
            .field("token", &self.config.token)
            .field("key", &self.config.key_label)
            .finish_non_exhaustive()
    }
}

impl HsmRoot {
    /// Generates a new root key in the token `token` of `module`, labelled
    /// `key_label`.
    pub fn generate(config: &HsmConfig, pin: &SecretBytes) -> Result<Self> {
        let ctx = module(&config.module)?;
        let slot = find_token(&ctx, config)?;
        let session = ctx.open_rw_session(slot).map_err(|e| p11("opening a session", e))?;
        login(&session, config, pin)?;
        let label = config.key_label.as_bytes().to_vec();
        if !session
            .find_objects(&[Attribute::Label(label.clone())])
            .map_err(|e| p11("searching the token", e))?
            .is_empty()
        {
            return Err(KmsError::Config(format!(
                "the HSM token '{}' already holds an object labelled '{}'",
                config.token, config.key_label
            )));
        }
        let template = [
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::AES),
            Attribute::ValueLen(32.into()),
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Modifiable(false),
            Attribute::Encrypt(true),
            Attribute::Decrypt(true),
            Attribute::Wrap(false),
            Attribute::Unwrap(false),
            Attribute::Sign(false),
            Attribute::Verify(false),
            Attribute::Derive(false),
            Attribute::Label(label),
        ];
        let key = session
            .generate_key(&Mechanism::AesKeyGen, &template)
            .map_err(|e| p11("generating the root key", e))?;
        if let Err(e) = check_attributes(&session, key, &config.key_label) {
            let _ = session.destroy_object(key);
            return Err(e);
        }
        Ok(Self {
            config: config.clone(),
            slot,
            key,
            login_session: Mutex::new(session),
            idle: Mutex::new(Vec::new()),
            ctx,
        })
    }

    /// Logs in to the token recorded in `config` and finds its root key:
    /// the unseal of an HSM deployment.
    pub fn open(config: &HsmConfig, pin: &SecretBytes) -> Result<Self> {
        let ctx = module(&config.module)?;
        let slot = find_token(&ctx, config)?;
        let session = ctx.open_ro_session(slot).map_err(|e| p11("opening a session", e))?;
        login(&session, config, pin)?;
        let found = session
            .find_objects(&[
                Attribute::Class(ObjectClass::SECRET_KEY),
                Attribute::KeyType(KeyType::AES),
                Attribute::Label(config.key_label.as_bytes().to_vec()),
            ])
            .map_err(|e| p11("searching the token", e))?;
        let key = match found.as_slice() {
            [key] => *key,
            [] => {
                return Err(KmsError::UnsealFailed(format!(
                    "the HSM token '{}' holds no AES key labelled '{}' (another token, or the key was deleted)",
                    config.token, config.key_label
                )))
            }
            _ => {
                return Err(KmsError::UnsealFailed(format!(
                    "the HSM token '{}' holds {} AES keys labelled '{}'",
                    config.token,
                    found.len(),
                    config.key_label
                )))
            }
        };
        check_attributes(&session, key, &config.key_label)?;
        Ok(Self {
            config: config.clone(),
            slot,
            key,
            login_session: Mutex::new(session),
            idle: Mutex::new(Vec::new()),
            ctx,
        })
    }

    /// Deletes the key object: undoes [`HsmRoot::generate`] when the rest
    /// of `init` fails.
    pub fn destroy(&self) -> Result<()> {
        let session = self.login_session.lock().unwrap_or_else(PoisonError::into_inner);
        session.destroy_object(self.key).map_err(|e| p11("deleting the root key", e))
    }

    #[must_use]
    pub fn config(&self) -> &HsmConfig {
        &self.config
    }

    /// Runs `op` on an idle session (or a new one); a session whose
    /// operation failed for a reason other than the data is not reused.
    fn with_session<T>(
        &self,
        op: impl FnOnce(&Session) -> std::result::Result<T, P11Error>,
    ) -> std::result::Result<T, P11Error> {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let session = match idle {
            Some(session) => session,
            None => self.ctx.open_ro_session(self.slot)?,
        };
        let result = op(&session);
        let reusable = match &result {
            Ok(_) => true,
            Err(P11Error::Pkcs11(rv, _)) => {
                matches!(rv, RvError::EncryptedDataInvalid | RvError::EncryptedDataLenRange)
            }
            Err(_) => false,
        };
        if reusable {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < MAX_IDLE_SESSIONS {
                idle.push(session);
            }
        }
        result
    }
}

impl RootOfTrust for HsmRoot {
    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; GCM_NONCE_LEN];
        fill_random(&mut nonce)?;
        let mut iv = nonce;
        let sealed = self
            .with_session(|session| {
                let params = GcmParams::new(&mut iv, aad, (8 * GCM_TAG_LEN as u64).into())?;
                session.encrypt(&Mechanism::AesGcm(params), self.key, plaintext)
            })
            .map_err(|e| p11("sealing under the root key", e))?;
        if sealed.len() != plaintext.len() + GCM_TAG_LEN {
            return Err(KmsError::Crypto(format!(
                "HSM: AES-GCM returned {} bytes for {} (expected ciphertext and a 16-byte tag)",
                sealed.len(),
                plaintext.len()
            )));
        }
        let mut out = Vec::with_capacity(GCM_NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn open(&self, aad: &[u8], blob: &[u8]) -> Result<SecretBytes> {
        if blob.len() < GCM_NONCE_LEN + GCM_TAG_LEN {
            return Err(KmsError::UnwrapFailed);
        }
        let mut iv = [0u8; GCM_NONCE_LEN];
        iv.copy_from_slice(&blob[..GCM_NONCE_LEN]);
        let opened = self.with_session(|session| {
            let params = GcmParams::new(&mut iv, aad, (8 * GCM_TAG_LEN as u64).into())?;
            session.decrypt(&Mechanism::AesGcm(params), self.key, &blob[GCM_NONCE_LEN..])
        });
        match opened {
            Ok(plaintext) => Ok(SecretBytes::new(plaintext)),
            // A tag that does not verify (SoftHSM2 reports it as a
            // general error of C_Decrypt, others as invalid data).
            Err(P11Error::Pkcs11(
                RvError::EncryptedDataInvalid
                | RvError::EncryptedDataLenRange
                | RvError::GeneralError
                | RvError::FunctionFailed,
                _,
            )) => Err(KmsError::UnwrapFailed),
            Err(e) => Err(p11("opening under the root key", e)),
        }
    }

    fn describe(&self) -> String {
        format!("HSM token '{}', key '{}'", self.config.token, self.config.key_label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let mut random = [0u8; 8];
        fill_random(&mut random).unwrap();
        let path = std::env::temp_dir().join(format!("rampart-hsm-{name}-{}", hex::encode(random)));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn pin_files_give_their_first_line_and_never_show_it() {
        for (bytes, want) in [
            (&b"1234\n"[..], &b"1234"[..]),
            (b"1234\r\n", b"1234"),
            (b"12 34", b"12 34"),
            (b"pin\nsecond line\n", b"pin"),
        ] {
            let path = temp_file("pin", bytes);
            assert_eq!(read_pin_file(&path).unwrap().expose(), want);
            let _ = std::fs::remove_file(&path);
        }
        for bytes in [&b""[..], b"\n", b"\r\n"] {
            let path = temp_file("empty", bytes);
            let error = read_pin_file(&path).unwrap_err().to_string();
            assert!(error.contains("holds no PIN"), "{error}");
            let _ = std::fs::remove_file(&path);
        }
        let long = temp_file("long", &[b'7'; 2000]);
        let error = read_pin_file(&long).unwrap_err().to_string();
        assert!(error.contains("larger than") && !error.contains("777"), "{error}");
        let _ = std::fs::remove_file(&long);
    }

    #[test]
    fn missing_module_is_a_clear_error() {
        let config = HsmConfig {
            module: "/nonexistent/libpkcs11.so".into(),
            token: "t".into(),
            key_label: "k".into(),
        };
        let error = HsmRoot::open(&config, &SecretBytes::from_slice(b"1234")).unwrap_err();
        assert!(
            error.to_string().contains("cannot load the PKCS#11 module /nonexistent/libpkcs11.so"),
            "{error}"
        );
    }
}
