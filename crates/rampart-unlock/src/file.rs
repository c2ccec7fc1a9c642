//! The key manager as a `rampart-file` recipient and identity, and the
//! Argon2 cost of a new passphrase stanza.

use std::cell::OnceCell;
use std::path::PathBuf;

use rampart_crypto::{Argon2Params, Argon2Variant, SecretBytes};
use rampart_file::recipient::STANZA_KMS;
use rampart_file::{Identity, Recipient, UnwrapFailure};
use rampart_kms::keys::WrappedHeader;
use rampart_luks::{KdfParams, PbkdfChoice, PbkdfKind};

use crate::{Error, Kms};

/// The key manager as a recipient (encrypt) and an identity (decrypt),
/// connecting through its client bundle on first use only.
pub struct KmsKey {
    bundle: Option<PathBuf>,
    /// The key to wrap with (encrypt only).
    key: Option<String>,
    kms: OnceCell<Result<Kms, String>>,
}

impl std::fmt::Debug for KmsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsKey").field("bundle", &self.bundle).field("key", &self.key).finish()
    }
}

impl KmsKey {
    /// A recipient that wraps the file key under the newest version of `key`.
    #[must_use]
    pub fn recipient(bundle: Option<PathBuf>, key: impl Into<String>) -> Self {
        Self { bundle, key: Some(key.into()), kms: OnceCell::new() }
    }

    /// An identity that unwraps whichever key the stanza names.
    #[must_use]
    pub fn identity(bundle: Option<PathBuf>) -> Self {
        Self { bundle, key: None, kms: OnceCell::new() }
    }

    fn kms(&self) -> Result<&Kms, String> {
        self.kms
            .get_or_init(|| Kms::connect(self.bundle.as_deref()).map_err(|e| e.chain()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Recipient for KmsKey {
    fn kind(&self) -> u8 {
        STANZA_KMS
    }

    fn describe(&self) -> String {
        format!("kms:{}", self.key.as_deref().unwrap_or_default())
    }

    fn wrap(&self, file_key: &SecretBytes, context: &[u8]) -> rampart_file::Result<Vec<u8>> {
        let key = self.key.as_deref().unwrap_or_default();
        let kms =
            self.kms().map_err(|e| rampart_file::Error::NoKey { reasons: e, runtime: true })?;
        let (wrapped, _) =
            kms.wrap(key, file_key, context).map_err(|e| rampart_file::Error::NoKey {
                reasons: format!("the key manager did not wrap with key {key}: {}", e.chain()),
                runtime: !e.is_usage(),
            })?;
        Ok(wrapped.into_bytes())
    }
}

impl Identity for KmsKey {
    fn kind(&self) -> u8 {
        STANZA_KMS
    }

    fn describe(&self) -> String {
        "key manager".into()
    }

    fn unwrap(&self, body: &[u8], context: &[u8]) -> Result<SecretBytes, UnwrapFailure> {
        let wrapped = std::str::from_utf8(body)
            .map_err(|_| UnwrapFailure::refused("the stanza is not a key-manager ciphertext"))?;
        let header = WrappedHeader::parse(wrapped)
            .map_err(|e| UnwrapFailure::refused(format!("the stanza: {e}")))?;
        let kms = self.kms().map_err(|message| UnwrapFailure { message, runtime: true })?;
        kms.unwrap(wrapped, context).map_err(|e| UnwrapFailure {
            message: format!("key {} version {}: {}", header.name, header.version, e.chain()),
            runtime: !e.is_usage(),
        })
    }
}

/// The Argon2 cost of a new passphrase stanza, calibrated from `choice` as
/// a LUKS2 keyslot's is, so a file costs an attacker what a volume does.
///
/// # Errors
/// PBKDF2 (a file stanza is Argon2 only), or a calibration failure.
pub fn passphrase_cost(choice: &PbkdfChoice) -> Result<Argon2Params, Error> {
    if choice.kind == PbkdfKind::Pbkdf2 {
        return Err(Error::Usage(
            "file passphrases use Argon2: --pbkdf argon2id or argon2i".into(),
        ));
    }
    match rampart_luks::pbkdf_for_time(choice, 32)? {
        KdfParams::Argon2 { kind, time, memory_kib, parallel } => Ok(Argon2Params {
            variant: if kind == PbkdfKind::Argon2i {
                Argon2Variant::Argon2i
            } else {
                Argon2Variant::Argon2id
            },
            time,
            memory_kib,
            parallelism: parallel,
        }),
        KdfParams::Pbkdf2 { .. } => Err(Error::Usage("file passphrases use Argon2".into())),
    }
}
