//! The command's side of `rampart_unlock`: its key sources built from the
//! command line, the passphrase prompt and the warning line, and its
//! errors as exit statuses (the unlock policy itself is the library's).

use std::io::Write;
use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_luks::{Luks, MetadataIo};
use rampart_unlock::{KeySettings, Prompter};

use crate::cli::{KeyArgs, TokenArgs};
use crate::commands::kms::ClientArgs;
use crate::errors::unlock_error;
use crate::passphrase::Source;

pub use rampart_unlock::BoundToken;

/// Connects to the key manager with the bundle of `--kms`/`$RAMPART_KMS`
/// (required).
pub fn connect_kms(client: &ClientArgs) -> anyhow::Result<rampart_unlock::Kms> {
    rampart_unlock::Kms::connect(client.bundle.as_deref()).map_err(unlock_error)
}

/// The passphrase from `--key-file` or the prompt, and the warning line
/// for a volume no token opened.
#[derive(Debug)]
pub struct Terminal<'a> {
    key_file: Option<&'a Path>,
    prompt: &'a str,
}

impl Prompter for Terminal<'_> {
    fn passphrase(&mut self) -> Result<SecretBytes, rampart_unlock::Error> {
        Source::new(self.key_file, self.prompt, false).read().map_err(|e| {
            if e.downcast_ref::<crate::UsageError>().is_some() {
                rampart_unlock::Error::Usage(format!("{e:#}"))
            } else {
                rampart_unlock::Error::Failed(format!("{e:#}"))
            }
        })
    }

    fn token_failed(&mut self, volume: &Path, failure: rampart_unlock::Error) {
        let failure = unlock_error(failure);
        eprintln!(
            "rampart: warning: no token unlocked {}: {failure:#}; trying a passphrase",
            volume.display()
        );
    }
}

/// How a command gets a volume key: tokens first, then a passphrase.
#[derive(Debug)]
pub struct KeySource<'a>(rampart_unlock::KeySource<Terminal<'a>>);

impl<'a> KeySource<'a> {
    pub fn new(key: &'a KeyArgs, tokens: &'a TokenArgs, prompt: &'a str) -> Self {
        let settings = KeySettings {
            key_slot: key.key_slot,
            bundle: tokens.client.bundle.clone(),
            token_only: tokens.token_only,
            passphrase_given: key.key_file.is_some(),
            passphrase_only_when_given: false,
        };
        let terminal = Terminal { key_file: key.key_file.as_deref(), prompt };
        Self(rampart_unlock::KeySource::new(settings, terminal))
    }

    /// The token that unlocked the last volume (`None`: a passphrase did).
    #[must_use]
    pub fn unlocked_by(&self) -> Option<&BoundToken> {
        self.0.unlocked_by()
    }

    /// The passphrase that was read to unlock, if one was (none when a
    /// token opened the volume).
    #[must_use]
    pub fn passphrase(&self) -> Option<&SecretBytes> {
        self.0.passphrase()
    }

    /// With `--key-file`, use only that passphrase (`test-key` checks the
    /// passphrase it is given, not whatever else would open the volume).
    #[must_use]
    pub fn passphrase_only_with_key_file(mut self) -> Self {
        self.0.settings_mut().passphrase_only_when_given = true;
        self
    }

    /// Recovers the volume key of `luks` (whose header is `header`, of the
    /// volume `what`): returns the keyslot and the key.
    pub fn unlock(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> anyhow::Result<(usize, SecretBytes)> {
        self.0.unlock(luks, header, what).map_err(unlock_error)
    }

    /// Recovers both volume keys of a volume in the middle of a
    /// reencryption (see [`rampart_unlock::KeySource::unlock_reencrypting`]).
    pub fn unlock_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> anyhow::Result<(SecretBytes, SecretBytes)> {
        self.0.unlock_reencrypting(luks, header, what).map_err(unlock_error)
    }
}

/// Writes the passphrase bytes exactly (no newline) to standard output
/// (`rampart unlock --print-passphrase`, which refuses a terminal first).
pub fn print_passphrase(passphrase: &SecretBytes) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(passphrase.expose())?;
    out.flush()?;
    Ok(())
}
