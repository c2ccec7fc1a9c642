//! Volumes bound to the key manager, as Clevis binds LUKS2 volumes to
//! Tang: a keyslot with a random passphrase and a token holding the key
//! manager's wrap of it; added, removed and re-wrapped in an order that a
//! crash cannot turn into a token pointing at nothing useful.

use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_luks::{Luks, MetadataIo, PbkdfChoice, PbkdfRequest};

use crate::source::parsed;
use crate::TOKEN_TYPE;
use crate::{bound_tokens, combine_failures, context, new_passphrase, BoundToken, Error, Kms};

/// LUKS2 keyslot and token ids run from 0 to 31.
pub const MAX_ID: usize = 31;

/// Refuses a keyslot or token id that is out of range or taken, before
/// anything is written or asked of the key manager.
pub fn check_ids(luks: &Luks, slot: Option<usize>, token_id: Option<usize>) -> Result<(), Error> {
    if let Some(slot) = slot {
        if slot > MAX_ID {
            return Err(Error::Usage(format!("keyslot {slot} is out of range (0..={MAX_ID})")));
        }
        if luks.active_keyslots().contains(&slot) {
            return Err(Error::Usage(format!("keyslot {slot} is already in use")));
        }
    }
    if let Some(id) = token_id {
        if id > MAX_ID {
            return Err(Error::Usage(format!("token {id} is out of range (0..={MAX_ID})")));
        }
        if luks.tokens().iter().any(|(t, _)| *t == id) {
            return Err(Error::Usage(format!("token {id} is already in use")));
        }
    }
    Ok(())
}

/// The KDF of a bound keyslot: [`PbkdfChoice::for_random_secret`] (with
/// the hash asked for) unless the user chose a KDF.
///
/// # Errors
/// A KDF choice LUKS2 refuses.
pub fn bound_keyslot_pbkdf(request: &PbkdfRequest) -> Result<PbkdfChoice, Error> {
    let chosen = PbkdfRequest { hash: None, ..*request };
    if chosen.is_empty() {
        let hash = request.hash.unwrap_or(rampart_crypto::HashAlg::Sha256);
        return Ok(PbkdfChoice::for_random_secret(hash));
    }
    Ok(request.choice(rampart_luks::LuksVersion::Luks2)?)
}

/// What a new binding should look like.
#[derive(Debug, Clone)]
pub struct Binding<'a> {
    /// The key-manager key that wraps the passphrase.
    pub key_name: &'a str,
    /// The KDF of the new keyslot.
    pub pbkdf: PbkdfChoice,
    /// The new keyslot (default: the first free one).
    pub slot: Option<usize>,
    /// The token id (default: the first free one).
    pub token_id: Option<usize>,
    /// The client bundle recorded for cryptsetup's token plugin.
    pub bundle: Option<&'a str>,
}

/// Adds a binding to an unlocked volume: a new keyslot with a random
/// passphrase, wrapped by the key manager with the volume's context, and a
/// token holding the wrap.
///
/// Crash-safe order: the key manager wraps first (nothing is written if it
/// refuses), then the keyslot is added, then the token. A crash between the
/// last two leaves a keyslot whose passphrase nobody knows, which is
/// harmless and can be removed with `rampart kill-slot`; a token that
/// cannot be stored takes its keyslot back.
pub fn bind_volume(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    volume_key: &SecretBytes,
    binding: &Binding<'_>,
) -> Result<BoundToken, Error> {
    let Binding { key_name, ref pbkdf, slot, token_id, bundle } = *binding;
    check_ids(luks, slot, token_id)?;
    let active = luks.active_keyslots();
    let slot = match slot {
        Some(slot) => slot,
        None => (0..=MAX_ID).find(|s| !active.contains(s)).ok_or_else(|| {
            Error::Usage("all 32 LUKS2 keyslots are in use; free one with kill-slot".into())
        })?,
    };
    let passphrase = new_passphrase()?;
    let (wrapped, key_version) = kms
        .wrap(key_name, &passphrase, &context(luks.uuid(), slot))
        .map_err(|e| e.context(format!("the key manager did not wrap with key {key_name}")))?;
    let token = BoundToken {
        id: 0,
        slot,
        key: key_name.to_owned(),
        key_version,
        endpoints: kms.endpoints().to_vec(),
        wrapped,
        bundle: bundle.map(str::to_owned),
    };
    luks.add_keyslot(header, volume_key, passphrase.expose(), pbkdf, Some(slot))?;
    match luks.add_token(header, token.to_json(), token_id) {
        Ok(id) => Ok(BoundToken { id, ..token }),
        Err(error) => {
            // Nothing refers to the new keyslot: take it back if we can.
            let removed = luks.remove_keyslot(header, slot).is_ok();
            Err(Error::Luks(error).context(if removed {
                format!("the binding's token cannot be stored (keyslot {slot} was removed again)")
            } else {
                format!("the binding's token cannot be stored; keyslot {slot} is left over (rampart kill-slot can remove it)")
            }))
        }
    }
}

/// The bindings a command acts on: token `id`, or every binding (of the
/// volume whose header is `header_path`).
pub fn chosen_tokens(
    luks: &Luks,
    header_path: &Path,
    id: Option<usize>,
) -> Result<Vec<crate::TokenSlot>, Error> {
    let bound = bound_tokens(luks);
    if let Some(id) = id {
        if let Some(found) = bound.into_iter().find(|(t, _)| *t == id) {
            return Ok(vec![found]);
        }
        return Err(Error::Usage(match luks.tokens().into_iter().find(|(t, _)| *t == id) {
            Some((_, token)) => format!(
                "token {id} is a {} token, not a {TOKEN_TYPE} binding",
                token.get("type").and_then(serde_json::Value::as_str).unwrap_or("typeless")
            ),
            None => format!("token {id} does not exist"),
        }));
    }
    if bound.is_empty() {
        return Err(Error::Usage(format!(
            "{} is not bound to a key manager (it has no {TOKEN_TYPE} token)",
            header_path.display()
        )));
    }
    Ok(bound)
}

/// Removes a binding (token `id`, or the only one) and the keyslots its
/// token opens; returns the token id and those keyslots. Refuses to
/// remove the only way into the volume.
pub fn unbind(
    header: &dyn MetadataIo,
    luks: &mut Luks,
    header_path: &Path,
    id: Option<usize>,
) -> Result<(usize, Vec<usize>), Error> {
    let chosen = chosen_tokens(luks, header_path, id)?;
    let [(id, _)] = chosen.as_slice() else {
        let ids: Vec<String> = chosen.iter().map(|(id, _)| id.to_string()).collect();
        return Err(Error::Usage(format!(
            "{} has several bindings (tokens {}); choose one with --token-id",
            header_path.display(),
            ids.join(", ")
        )));
    };
    let id = *id;
    // The keyslots the token opens, read from the raw token so that even a
    // damaged binding can be removed.
    let slots: Vec<usize> = luks
        .tokens()
        .into_iter()
        .find(|(t, _)| *t == id)
        .and_then(|(_, token)| token.get("keyslots").and_then(|v| v.as_array()).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().and_then(|s| s.parse::<usize>().ok()))
        .collect();
    let active = luks.active_keyslots();
    if !active.iter().any(|s| !slots.contains(s)) {
        return Err(Error::Usage(format!(
            "token {id} opens the only keyslot of {}; unbinding it would lock you out (add a \
             passphrase with rampart add-key first)",
            header_path.display()
        )));
    }
    // Token first: a crash in between leaves an unreferenced keyslot,
    // harmless, never a token pointing at nothing useful.
    luks.remove_token(header, id)?;
    for slot in slots.iter().filter(|s| active.contains(s)) {
        luks.remove_keyslot(header, *slot)?;
    }
    Ok((id, slots))
}

/// What [`rewrap`] did to one binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrap {
    /// The token already held a wrap by the key's newest version.
    Newest { id: usize, key: String, version: u32 },
    /// The token now holds a wrap by version `to` instead of `from`.
    Rewrapped { id: usize, key: String, from: u32, to: u32 },
}

/// Wraps each chosen binding's passphrase again with the newest version of
/// its key, reporting each binding to `done` as it is handled.
///
/// A token is never replaced by one that cannot unlock: the passphrase
/// must open its keyslot first, and the new wrap must give it back.
pub fn rewrap(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    header_path: &Path,
    id: Option<usize>,
    mut done: impl FnMut(&Rewrap) -> std::io::Result<()>,
) -> Result<(), Error> {
    for (id, token) in chosen_tokens(luks, header_path, id)? {
        let token = parsed(id, &token)?;
        let (_, passphrase) = kms
            .open_token(luks, header, token)
            .map_err(|e| e.context(format!("cannot unwrap {}", token.describe())))?;
        let ctx = context(luks.uuid(), token.slot);
        let (wrapped, version) = kms
            .wrap(&token.key, &passphrase, &ctx)
            .map_err(|e| e.context(format!("cannot wrap again with key {}", token.key)))?;
        if version == token.key_version {
            done(&Rewrap::Newest { id, key: token.key.clone(), version })?;
            continue;
        }
        let fresh = BoundToken { wrapped, key_version: version, ..token.clone() };
        let check =
            kms.unwrap_token(luks, &fresh).map_err(|e| e.context("cannot unwrap the new wrap"))?;
        if check != passphrase {
            return Err(Error::Failed(format!("the key manager's new wrap of token {id} does not give the passphrase back; token unchanged")));
        }
        luks.replace_token(header, id, fresh.to_json())?;
        done(&Rewrap::Rewrapped {
            id,
            key: token.key.clone(),
            from: token.key_version,
            to: version,
        })?;
    }
    Ok(())
}

/// The keyslot passphrase of the first chosen binding that opens its
/// keyslot: returns the keyslot, the token id and the passphrase.
pub fn token_passphrase(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &Luks,
    header_path: &Path,
    id: Option<usize>,
) -> Result<(usize, usize, SecretBytes), Error> {
    let mut failures = Vec::new();
    for (id, token) in chosen_tokens(luks, header_path, id)? {
        let token = match parsed(id, &token) {
            Ok(token) => token,
            Err(unusable) => {
                failures.push(unusable);
                continue;
            }
        };
        match kms.open_token(luks, header, token) {
            Ok((_, passphrase)) => return Ok((token.slot, id, passphrase)),
            Err(e) => failures.push(e.context(token.describe())),
        }
    }
    Err(combine_failures(failures).context(format!("no token unlocked {}", header_path.display())))
}
