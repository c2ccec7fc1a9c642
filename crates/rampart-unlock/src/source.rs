//! The unlock policy every command that opens a volume follows: when a
//! client bundle is configured every `rampart-kms` token is tried first; a
//! token that fails (revoked key, server down, refused client) is reported
//! once through [`Prompter::token_failed`] and the passphrase is used
//! instead, unless tokens are all that may be used.

use std::path::{Path, PathBuf};

use rampart_crypto::SecretBytes;
use rampart_luks::{Luks, MetadataIo};

use crate::{bound_tokens, combine_failures, BoundToken, Error, Kms, TOKEN_TYPE};

/// Tokens as the volume lists them, each parsed or with why it cannot be.
type Tokens = [(usize, Result<BoundToken, String>)];

/// What the command asks of the user: a passphrase, and to be told that
/// no token opened a volume.
pub trait Prompter {
    /// The passphrase (a key file, a prompt); asked at most once per
    /// [`KeySource`], however many volumes it unlocks.
    fn passphrase(&mut self) -> Result<SecretBytes, Error>;

    /// No token opened `volume`, for the reason `failure`; the passphrase
    /// is tried next.
    fn token_failed(&mut self, volume: &Path, failure: Error);
}

/// Where a volume key may come from.
#[derive(Debug, Clone, Default)]
pub struct KeySettings {
    /// Only this keyslot (its token, or the passphrase tried on it).
    pub key_slot: Option<usize>,
    /// The client bundle; without one, tokens are skipped.
    pub bundle: Option<PathBuf>,
    /// Tokens only: no passphrase fallback.
    pub token_only: bool,
    /// The passphrase was given (a key file) rather than asked for.
    pub passphrase_given: bool,
    /// A given passphrase is used alone, tokens untried (checking that
    /// passphrase, not whatever else would open the volume).
    pub passphrase_only_when_given: bool,
}

/// How a command gets a volume key: tokens first, then a passphrase.
pub struct KeySource<P> {
    settings: KeySettings,
    prompter: P,
    /// The key manager, once connected (or why it cannot be).
    kms: Option<Result<Kms, String>>,
    /// The passphrase, once read (several volumes may share it).
    passphrase: Option<SecretBytes>,
    /// The token that unlocked the last volume, if one did.
    unlocked_by: Option<BoundToken>,
}

impl<P> std::fmt::Debug for KeySource<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySource").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl<P: Prompter> KeySource<P> {
    pub fn new(settings: KeySettings, prompter: P) -> Self {
        Self { settings, prompter, kms: None, passphrase: None, unlocked_by: None }
    }

    /// The settings, to change before the first unlock.
    pub fn settings_mut(&mut self) -> &mut KeySettings {
        &mut self.settings
    }

    /// The token that unlocked the last volume (`None`: a passphrase did).
    #[must_use]
    pub fn unlocked_by(&self) -> Option<&BoundToken> {
        self.unlocked_by.as_ref()
    }

    /// The passphrase that was read to unlock, if one was (none when a
    /// token opened the volume).
    #[must_use]
    pub fn passphrase(&self) -> Option<&SecretBytes> {
        self.passphrase.as_ref()
    }

    /// Recovers the volume key of `luks` (whose header is `header`, of the
    /// volume `what`): returns the keyslot and the key.
    pub fn unlock(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> Result<(usize, SecretBytes), Error> {
        self.unlock_with(
            luks,
            what,
            |source, tokens| source.try_tokens(luks, header, what, tokens),
            |passphrase, slot| luks.unlock(header, passphrase, slot),
        )
    }

    /// Recovers both volume keys of a volume in the middle of a
    /// reencryption: through its tokens first (each key from a token of its
    /// own keyslots, as a rebind leaves one binding of each key), then a
    /// passphrase that opens a keyslot of each key.
    pub fn unlock_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> Result<(SecretBytes, SecretBytes), Error> {
        self.unlock_with(
            luks,
            what,
            |source, tokens| source.try_tokens_reencrypting(luks, header, tokens),
            |passphrase, slot| luks.reencrypt_unlock(header, passphrase, slot),
        )
    }

    /// Tokens first when a bundle is given (or only tokens), then the
    /// passphrase: the order every command that opens a volume follows,
    /// whatever it recovers.
    fn unlock_with<T>(
        &mut self,
        luks: &Luks,
        what: &Path,
        by_tokens: impl FnOnce(&mut Self, &Tokens) -> Result<Result<T, Error>, Error>,
        by_passphrase: impl FnOnce(&[u8], Option<usize>) -> Result<T, rampart_luks::Error>,
    ) -> Result<T, Error> {
        self.unlocked_by = None;
        let tokens = bound_tokens(luks);
        let settings = &self.settings;
        // Without a client bundle, tokens are skipped silently (unless
        // they are all that may be used).
        let use_tokens = (settings.bundle.is_some() || settings.token_only)
            && (settings.token_only
                || !settings.passphrase_given
                || !settings.passphrase_only_when_given);
        if use_tokens && !tokens.is_empty() {
            match by_tokens(self, &tokens)? {
                Ok(found) => return Ok(found),
                Err(failure) if self.settings.token_only => {
                    return Err(failure.context(format!("no token unlocked {}", what.display())))
                }
                Err(failure) => self.prompter.token_failed(what, failure),
            }
        } else if settings.token_only {
            return Err(Error::Usage(format!(
                "{} has no {TOKEN_TYPE} token (see rampart bind)",
                what.display()
            )));
        }
        let passphrase = match &self.passphrase {
            Some(passphrase) => passphrase,
            None => self.passphrase.insert(self.prompter.passphrase()?),
        };
        Ok(by_passphrase(passphrase.expose(), self.settings.key_slot)?)
    }

    /// The key manager, connected on first use: the outer error is fatal
    /// (tokens only), the inner one why tokens cannot be tried.
    fn kms(&mut self) -> Result<Result<&Kms, Error>, Error> {
        if self.kms.is_none() {
            self.kms = Some(match Kms::connect(self.settings.bundle.as_deref()) {
                Ok(kms) => Ok(kms),
                Err(e) if self.settings.token_only => return Err(e),
                Err(e) => Err(format!("the key manager cannot be used: {}", e.chain())),
            });
        }
        Ok(match &self.kms {
            Some(Ok(kms)) => Ok(kms),
            Some(Err(reason)) => Err(Error::Failed(reason.clone())),
            None => Err(Error::Failed("the key manager is not configured".into())),
        })
    }

    /// Unwraps every usable token and opens both keys with the secrets;
    /// errors as [`Self::try_tokens`].
    fn try_tokens_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        tokens: &Tokens,
    ) -> Result<Result<(SecretBytes, SecretBytes), Error>, Error> {
        let kms = match self.kms()? {
            Ok(kms) => kms,
            Err(why) => return Ok(Err(why)),
        };
        let mut failures = Vec::new();
        let mut secrets = Vec::new();
        for (id, token) in tokens {
            let token = match parsed(*id, token) {
                Ok(token) => token,
                Err(unusable) => {
                    failures.push(unusable);
                    continue;
                }
            };
            match kms.unwrap_token(luks, token) {
                Ok(secret) => secrets.push((token.clone(), secret)),
                Err(e) => failures.push(e.context(token.describe())),
            }
        }
        let candidates: Vec<(usize, &[u8])> =
            secrets.iter().map(|(t, s)| (t.slot, s.expose())).collect();
        match luks.reencrypt_unlock_slots(header, &candidates) {
            Ok(keys) => {
                // The binding that outlives the reencryption is the one a
                // server reports in its heartbeats: the newest key version.
                self.unlocked_by =
                    secrets.iter().map(|(t, _)| t).max_by_key(|t| t.key_version).cloned();
                Ok(Ok(keys))
            }
            Err(rampart_luks::Error::NoKey) => {
                failures.push(Error::Usage(
                    "the tokens that unwrapped do not open a keyslot of both the old and the new volume key"
                        .into(),
                ));
                Ok(Err(combine_failures(failures)))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Tries each usable token: the outer error is fatal, the inner one
    /// says why no token opened the volume (one line, no secrets).
    fn try_tokens(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
        tokens: &Tokens,
    ) -> Result<Result<(usize, SecretBytes), Error>, Error> {
        let key_slot = self.settings.key_slot;
        let kms = match self.kms()? {
            Ok(kms) => kms,
            Err(why) => return Ok(Err(why)),
        };
        let mut failures = Vec::new();
        let mut opened = None;
        for (id, token) in tokens {
            let token = match parsed(*id, token) {
                Ok(token) => token,
                Err(unusable) => {
                    failures.push(unusable);
                    continue;
                }
            };
            if key_slot.is_some_and(|slot| slot != token.slot) {
                continue;
            }
            match kms.open_token(luks, header, token) {
                Ok((key, _)) => {
                    tracing::debug!("{}: unlocked by {}", what.display(), token.describe());
                    opened = Some((token.clone(), key));
                    break;
                }
                Err(e) => failures.push(e.context(token.describe())),
            }
        }
        if let Some((token, key)) = opened {
            let slot = token.slot;
            self.unlocked_by = Some(token);
            return Ok(Ok((slot, key)));
        }
        if failures.is_empty() {
            failures.push(Error::Usage(format!(
                "no {TOKEN_TYPE} token opens keyslot {}",
                key_slot.unwrap_or_default()
            )));
        }
        Ok(Err(combine_failures(failures)))
    }
}

/// Token `id` as parsed, or why it cannot be used.
pub(crate) fn parsed(id: usize, token: &Result<BoundToken, String>) -> Result<&BoundToken, Error> {
    token.as_ref().map_err(|why| Error::Usage(format!("token {id} is unusable: {why}")))
}
