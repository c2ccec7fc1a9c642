//! Where the key of a volume comes from: its `rampart-kms` tokens first
//! (a keyslot passphrase wrapped by the key manager), then a passphrase.
//!
//! The token format and the wrap context are `rampart_kms::binding`'s.
//!
//! Commands that open a volume use [`KeySource`]: when a client bundle is
//! configured (`--kms BUNDLE` or `$RAMPART_KMS`) every `rampart-kms` token
//! is tried first; a token that fails (revoked key, server down, refused
//! client) costs one warning line on standard error, and the passphrase
//! (`--key-file` or the prompt) is used instead, unless `--token-only`.

use std::io::Write;
use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_kms::client::KmsClient;
use rampart_kms::keys::WrappedHeader;
use rampart_kms::Bundle;
use rampart_luks::{Luks, MetadataIo};

use crate::cli::{KeyArgs, TokenArgs};
use crate::commands::kms::{self, ClientArgs};
use crate::errors::luks_error;
use crate::passphrase::Source;
use crate::UsageError;

pub use rampart_kms::binding::{context, BoundToken, TOKEN_TYPE};

/// A fresh keyslot passphrase (see [`rampart_kms::binding::new_passphrase`]).
pub fn new_passphrase() -> anyhow::Result<SecretBytes> {
    rampart_kms::binding::new_passphrase().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The volume's `rampart-kms` tokens, each parsed or with the reason it
/// cannot be used.
#[must_use]
pub fn bound_tokens(luks: &Luks) -> Vec<(usize, Result<BoundToken, String>)> {
    rampart_kms::binding::bound_tokens(luks.tokens())
}

/// A connection to the key manager through a client bundle, with the
/// runtime its async client needs.
pub struct Kms {
    client: KmsClient,
    runtime: tokio::runtime::Runtime,
    bundle: Bundle,
}

impl Kms {
    /// Connects with the bundle of `--kms`/`$RAMPART_KMS` (required).
    pub fn connect(args: &ClientArgs) -> anyhow::Result<Self> {
        let bundle = kms::load_bundle(args)?;
        let client = KmsClient::new(&bundle).map_err(kms::map_client)?;
        Ok(Self { client, runtime: kms::runtime()?, bundle })
    }

    /// The bundle's server endpoints (recorded in new tokens).
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.bundle.endpoints
    }

    /// Wraps `secret` under the newest version of `key`; returns the
    /// ciphertext and that version.
    pub fn wrap(
        &self,
        key: &str,
        secret: &SecretBytes,
        context: &[u8],
    ) -> anyhow::Result<(String, u32)> {
        let wrapped = self
            .runtime
            .block_on(self.client.wrap(key, secret.expose(), context))
            .map_err(kms::map_client)?;
        let version = WrappedHeader::parse(&wrapped)
            .map_err(|e| anyhow::anyhow!("the key server returned a malformed ciphertext: {e}"))?
            .version;
        Ok((wrapped, version))
    }

    /// Unwraps `wrapped`, bound to `context`.
    pub fn unwrap(&self, wrapped: &str, context: &[u8]) -> anyhow::Result<SecretBytes> {
        self.runtime.block_on(self.client.unwrap(wrapped, context)).map_err(kms::map_client)
    }

    /// Unwraps a token's passphrase (bound to this volume and keyslot).
    pub fn unwrap_token(&self, luks: &Luks, token: &BoundToken) -> anyhow::Result<SecretBytes> {
        self.runtime
            .block_on(rampart_kms::binding::unwrap_passphrase(&self.client, luks.uuid(), token))
            .map_err(kms::map_client)
    }

    /// Unwraps the token's passphrase and opens its keyslot: returns the
    /// volume key and the passphrase.
    pub fn open_token(
        &self,
        luks: &Luks,
        header: &dyn MetadataIo,
        token: &BoundToken,
    ) -> anyhow::Result<(SecretBytes, SecretBytes)> {
        let passphrase = self.unwrap_token(luks, token)?;
        let (_, key) =
            luks.unlock(header, passphrase.expose(), Some(token.slot)).map_err(|e| match e {
                rampart_luks::Error::NoKey => UsageError(format!(
                    "the unwrapped passphrase does not open keyslot {}",
                    token.slot
                ))
                .into(),
                other => luks_error(other),
            })?;
        Ok((key, passphrase))
    }
}

/// How a command gets a volume key: tokens first, then a passphrase.
pub struct KeySource<'a> {
    key_file: Option<&'a Path>,
    key_slot: Option<usize>,
    client: &'a ClientArgs,
    token_only: bool,
    /// Try tokens even when `--key-file` is given (`test-key` does not: it
    /// checks the given passphrase).
    tokens_with_key_file: bool,
    prompt: &'a str,
    /// The key manager, once connected (or why it cannot be).
    kms: Option<Result<Kms, String>>,
    /// The passphrase, once read (several volumes share it in `serve`).
    passphrase: Option<SecretBytes>,
    /// The token that unlocked the last volume, if one did (`serve`
    /// checks in with the key manager for the keys it holds).
    unlocked_by: Option<BoundToken>,
}

impl<'a> KeySource<'a> {
    pub fn new(key: &'a KeyArgs, tokens: &'a TokenArgs, prompt: &'a str) -> Self {
        Self {
            key_file: key.key_file.as_deref(),
            key_slot: key.key_slot,
            client: &tokens.client,
            token_only: tokens.token_only,
            tokens_with_key_file: true,
            prompt,
            kms: None,
            passphrase: None,
            unlocked_by: None,
        }
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

    /// With `--key-file`, use only that passphrase (`test-key` checks the
    /// passphrase it is given, not whatever else would open the volume).
    #[must_use]
    pub fn passphrase_only_with_key_file(mut self) -> Self {
        self.tokens_with_key_file = false;
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
    ) -> anyhow::Result<(SecretBytes, SecretBytes)> {
        self.unlock_with(
            luks,
            what,
            |source, tokens| source.try_tokens_reencrypting(luks, header, tokens),
            |passphrase, slot| luks.reencrypt_unlock(header, passphrase, slot),
        )
    }

    /// Tokens first when a bundle is given (or only tokens with
    /// `--token-only`), then the passphrase: the order every command that
    /// opens a volume follows, whatever it recovers.
    fn unlock_with<T>(
        &mut self,
        luks: &Luks,
        what: &Path,
        by_tokens: impl FnOnce(
            &mut Self,
            &[(usize, Result<BoundToken, String>)],
        ) -> anyhow::Result<anyhow::Result<T>>,
        by_passphrase: impl FnOnce(&[u8], Option<usize>) -> Result<T, rampart_luks::Error>,
    ) -> anyhow::Result<T> {
        self.unlocked_by = None;
        let tokens = bound_tokens(luks);
        // Without a client bundle, tokens are skipped silently (unless
        // they are all that may be used).
        let have_bundle = kms::bundle_path(self.client).is_some();
        let use_tokens = (have_bundle || self.token_only)
            && (self.token_only || self.key_file.is_none() || self.tokens_with_key_file);
        if use_tokens && !tokens.is_empty() {
            match by_tokens(self, &tokens)? {
                Ok(found) => return Ok(found),
                Err(failure) if self.token_only => {
                    return Err(failure.context(format!("no token unlocked {}", what.display())))
                }
                Err(failure) => {
                    eprintln!(
                        "rampart: warning: no token unlocked {}: {failure:#}; trying a passphrase",
                        what.display()
                    );
                }
            }
        } else if self.token_only {
            return Err(UsageError(format!(
                "{} has no {TOKEN_TYPE} token (see rampart bind)",
                what.display()
            ))
            .into());
        }
        if self.passphrase.is_none() {
            self.passphrase = Some(Source::new(self.key_file, self.prompt, false).read()?);
        }
        let passphrase = self.passphrase.as_ref().map_or(&[][..], SecretBytes::expose);
        by_passphrase(passphrase, self.key_slot).map_err(luks_error)
    }

    /// Unwraps every usable token and opens both keys with the secrets;
    /// errors as [`Self::try_tokens`].
    #[allow(clippy::type_complexity)]
    fn try_tokens_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        tokens: &[(usize, Result<BoundToken, String>)],
    ) -> anyhow::Result<Result<(SecretBytes, SecretBytes), anyhow::Error>> {
        if self.kms.is_none() {
            self.kms = Some(match Kms::connect(self.client) {
                Ok(kms) => Ok(kms),
                Err(e) if self.token_only => return Err(e),
                Err(e) => Err(format!("the key manager cannot be used: {e:#}")),
            });
        }
        let kms = match &self.kms {
            Some(Ok(kms)) => kms,
            Some(Err(reason)) => return Ok(Err(anyhow::anyhow!("{reason}"))),
            None => return Ok(Err(anyhow::anyhow!("the key manager is not configured"))),
        };
        let mut failures = Vec::new();
        let mut secrets = Vec::new();
        for (id, token) in tokens {
            let token = match token {
                Ok(token) => token,
                Err(why) => {
                    failures.push(UsageError(format!("token {id} is unusable: {why}")).into());
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
                // The binding that outlives the reencryption is the one
                // serve reports in its heartbeats: the newest key version.
                self.unlocked_by =
                    secrets.iter().map(|(t, _)| t).max_by_key(|t| t.key_version).cloned();
                Ok(Ok(keys))
            }
            Err(rampart_luks::Error::NoKey) => {
                failures.push(
                    UsageError(
                        "the tokens that unwrapped do not open a keyslot of both the old and the new volume key"
                            .into(),
                    )
                    .into(),
                );
                Ok(Err(combine_failures(failures)))
            }
            Err(other) => Err(luks_error(other)),
        }
    }

    /// Tries each usable token: the outer error is fatal, the inner one
    /// says why no token opened the volume (one line, no secrets).
    #[allow(clippy::type_complexity)]
    fn try_tokens(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
        tokens: &[(usize, Result<BoundToken, String>)],
    ) -> anyhow::Result<Result<(usize, SecretBytes), anyhow::Error>> {
        if self.kms.is_none() {
            self.kms = Some(match Kms::connect(self.client) {
                Ok(kms) => Ok(kms),
                Err(e) if self.token_only => return Err(e),
                Err(e) => Err(format!("the key manager cannot be used: {e:#}")),
            });
        }
        let kms = match &self.kms {
            Some(Ok(kms)) => kms,
            Some(Err(reason)) => return Ok(Err(anyhow::anyhow!("{reason}"))),
            None => return Ok(Err(anyhow::anyhow!("the key manager is not configured"))),
        };
        let mut failures = Vec::new();
        for (id, token) in tokens {
            let token = match token {
                Ok(token) => token,
                Err(why) => {
                    failures.push(UsageError(format!("token {id} is unusable: {why}")).into());
                    continue;
                }
            };
            if self.key_slot.is_some_and(|slot| slot != token.slot) {
                continue;
            }
            match kms.open_token(luks, header, token) {
                Ok((key, _)) => {
                    tracing::debug!("{}: unlocked by {}", what.display(), token.describe());
                    self.unlocked_by = Some(token.clone());
                    return Ok(Ok((token.slot, key)));
                }
                Err(e) => failures.push(e.context(token.describe())),
            }
        }
        if failures.is_empty() {
            failures.push(
                UsageError(format!(
                    "no {TOKEN_TYPE} token opens keyslot {}",
                    self.key_slot.unwrap_or_default()
                ))
                .into(),
            );
        }
        Ok(Err(combine_failures(failures)))
    }
}

/// One error for several failed tokens: a usage error (exit 2) when every
/// failure was one (refusals, revoked keys, wrong volume), else a runtime
/// error (a server down).
pub fn combine_failures(failures: Vec<anyhow::Error>) -> anyhow::Error {
    let usage =
        !failures.is_empty() && failures.iter().all(|e| e.downcast_ref::<UsageError>().is_some());
    let text: Vec<String> = failures.iter().map(|e| format!("{e:#}")).collect();
    let text = if text.is_empty() { "no usable token".to_owned() } else { text.join("; ") };
    if usage {
        UsageError(text).into()
    } else {
        anyhow::anyhow!(text)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn failures_combine_into_one_line_with_the_right_exit_class() {
        let usage = combine_failures(vec![
            UsageError("a".into()).into(),
            anyhow::Error::from(UsageError("b".into())).context("token 1"),
        ]);
        assert!(usage.downcast_ref::<UsageError>().is_some());
        assert_eq!(format!("{usage:#}"), "a; token 1: b");
        let runtime = combine_failures(vec![
            UsageError("a".into()).into(),
            anyhow::anyhow!("no key server answered"),
        ]);
        assert!(runtime.downcast_ref::<UsageError>().is_none());
        assert!(combine_failures(Vec::new()).to_string().contains("no usable token"));
    }
}
