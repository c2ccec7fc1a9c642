//! A connection to the key manager through a client bundle, with the
//! runtime its async client needs, for code that is not async.

use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_kms::client::KmsClient;
use rampart_kms::keys::WrappedHeader;
use rampart_kms::Bundle;
use rampart_luks::{Luks, MetadataIo};

use crate::{BoundToken, Error};

/// Why no key manager can be reached when no client bundle is configured.
pub const NO_BUNDLE: &str = "no client bundle: give --kms BUNDLE or set RAMPART_KMS";

/// The runtime the key manager's client runs on.
pub fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-kms")
        .build()
        .map_err(|e| Error::Failed(format!("cannot start the I/O runtime: {e}")))
}

/// A key-manager client and its runtime.
pub struct Kms {
    client: KmsClient,
    runtime: tokio::runtime::Runtime,
    endpoints: Vec<String>,
}

impl std::fmt::Debug for Kms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kms").field("endpoints", &self.endpoints).finish_non_exhaustive()
    }
}

impl Kms {
    /// Connects with the client bundle at `bundle` (required).
    pub fn connect(bundle: Option<&Path>) -> Result<Self, Error> {
        let path = bundle.ok_or_else(|| Error::Usage(NO_BUNDLE.into()))?;
        Self::new(&Bundle::read(path).map_err(Error::Bundle)?)
    }

    /// Connects with `bundle`.
    pub fn new(bundle: &Bundle) -> Result<Self, Error> {
        let client = KmsClient::new(bundle)?;
        Ok(Self { client, runtime: runtime()?, endpoints: bundle.endpoints.clone() })
    }

    /// The bundle's server endpoints (recorded in new tokens).
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Wraps `secret` under the newest version of `key`; returns the
    /// ciphertext and that version.
    pub fn wrap(
        &self,
        key: &str,
        secret: &SecretBytes,
        context: &[u8],
    ) -> Result<(String, u32), Error> {
        let wrapped = self.runtime.block_on(self.client.wrap(key, secret.expose(), context))?;
        let version = WrappedHeader::parse(&wrapped)
            .map_err(|e| {
                Error::Failed(format!("the key server returned a malformed ciphertext: {e}"))
            })?
            .version;
        Ok((wrapped, version))
    }

    /// Unwraps `wrapped`, bound to `context`.
    pub fn unwrap(&self, wrapped: &str, context: &[u8]) -> Result<SecretBytes, Error> {
        Ok(self.runtime.block_on(self.client.unwrap(wrapped, context))?)
    }

    /// Unwraps a token's passphrase (bound to this volume and keyslot).
    pub fn unwrap_token(&self, luks: &Luks, token: &BoundToken) -> Result<SecretBytes, Error> {
        Ok(self.runtime.block_on(rampart_kms::binding::unwrap_passphrase(
            &self.client,
            luks.uuid(),
            token,
        ))?)
    }

    /// Unwraps the token's passphrase and opens its keyslot: returns the
    /// volume key and the passphrase.
    pub fn open_token(
        &self,
        luks: &Luks,
        header: &dyn MetadataIo,
        token: &BoundToken,
    ) -> Result<(SecretBytes, SecretBytes), Error> {
        let passphrase = self.unwrap_token(luks, token)?;
        let (_, key) =
            luks.unlock(header, passphrase.expose(), Some(token.slot)).map_err(|e| match e {
                rampart_luks::Error::NoKey => Error::Usage(format!(
                    "the unwrapped passphrase does not open keyslot {}",
                    token.slot
                )),
                other => Error::Luks(other),
            })?;
        Ok((key, passphrase))
    }
}
