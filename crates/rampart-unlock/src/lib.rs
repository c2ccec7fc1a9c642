//! Where a volume's key comes from: its `rampart-kms` tokens first (a
//! keyslot passphrase wrapped by the key manager), then a passphrase; and
//! how a volume is bound to a key-manager key (bind, unbind, rewrap) and
//! moved to a reencryption's new volume key; and the key manager as a
//! `rampart-file` recipient.
//!
//! Nothing here reads the terminal or prints: the passphrase and the
//! warning about a failed token go through [`Prompter`], which the command
//! implements.
#![forbid(unsafe_code)]

mod binding;
mod error;
mod file;
mod kms;
mod reencrypt;
mod source;

pub use binding::{
    bind_volume, bound_keyslot_pbkdf, check_ids, chosen_tokens, rewrap, token_passphrase, unbind,
    Binding, Rewrap, MAX_ID,
};
pub use error::{client_is_usage, combine_failures, luks_is_usage, Error};
pub use file::{passphrase_cost, KmsKey};
pub use kms::{runtime, Kms, NO_BUNDLE};
pub use rampart_kms::binding::{context, BoundToken, TOKEN_TYPE};
pub use reencrypt::{
    plan_keyslots, start_reencryption, KeyslotPlan, NewKeyShape, NewKeyslots, Rebound, Started,
};
pub use source::{KeySettings, KeySource, Prompter};

/// A token id and its parsed `rampart-kms` token, or why it cannot be used.
pub type TokenSlot = (usize, Result<BoundToken, String>);

/// The volume's `rampart-kms` tokens, each parsed or with the reason it
/// cannot be used.
#[must_use]
pub fn bound_tokens(luks: &rampart_luks::Luks) -> Vec<TokenSlot> {
    rampart_kms::binding::bound_tokens(luks.tokens())
}

/// A fresh keyslot passphrase (see [`rampart_kms::binding::new_passphrase`]).
pub fn new_passphrase() -> Result<rampart_crypto::SecretBytes, Error> {
    rampart_kms::binding::new_passphrase().map_err(|e| Error::Failed(e.to_string()))
}

/// Tokens are LUKS2 metadata: LUKS1 volumes cannot be bound.
pub fn require_luks2(
    luks: &rampart_luks::Luks,
    header_path: &std::path::Path,
) -> Result<(), Error> {
    if luks.version() == rampart_luks::LuksVersion::Luks1 {
        return Err(Error::Usage(format!(
            "{} is a LUKS1 volume, which has no tokens to hold a binding (convert it with \
             `cryptsetup convert --type luks2` first)",
            header_path.display()
        )));
    }
    Ok(())
}
