//! The keyslots a reencryption gives its new volume key, as cryptsetup
//! re-enrols them: the new passphrase alone when one is given, else a twin
//! of each keyslot the passphrase opens; and every key-manager binding of
//! those keyslots moved to the new key (a fresh secret, wrapped by the
//! newest version of its key). Nothing is written until every wrap is in
//! hand, so that a refusal changes nothing.

use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_luks::{DataCipher, Luks, MetadataIo, PbkdfChoice, Resilience};

use crate::{bound_tokens, context, new_passphrase, BoundToken, Error, Kms};

/// What the new key's keyslots should be.
#[derive(Debug, Clone, Copy)]
pub struct NewKeyslots<'a> {
    /// Only this keyslot (and its binding) carries over (`--key-slot`);
    /// default: every active keyslot.
    pub key_slot: Option<usize>,
    /// The passphrase the user gave (to unlock, or beside a token that
    /// unlocked): each selected keyslot it opens gets a twin.
    pub passphrase: Option<&'a SecretBytes>,
    /// One keyslot with this passphrase instead of the twins
    /// (`--new-key-file`).
    pub new_passphrase: Option<&'a SecretBytes>,
}

/// The new key's keyslots, worked out on the volume as it is.
#[derive(Debug)]
pub struct KeyslotPlan<'a> {
    passphrases: Vec<&'a SecretBytes>,
    bound: Vec<BoundToken>,
}

impl KeyslotPlan<'_> {
    /// The bindings that move to the new key: a key manager must be
    /// reachable to wrap their new secrets.
    #[must_use]
    pub fn bindings(&self) -> &[BoundToken] {
        &self.bound
    }
}

/// Works out the new key's keyslots on the volume `luks` (header `header`,
/// of the volume `volume`), checking each selected passphrase keyslot
/// against the passphrase given.
///
/// # Errors
/// Usage: with no passphrase given and no `key_slot` chosen, passphrase
/// keyslots that would no longer open the volume afterwards.
pub fn plan_keyslots<'a>(
    luks: &Luks,
    header: &dyn MetadataIo,
    volume: &Path,
    request: &NewKeyslots<'a>,
) -> Result<KeyslotPlan<'a>, Error> {
    let selected: Vec<usize> = match request.key_slot {
        Some(slot) => vec![slot],
        None => luks.active_keyslots(),
    };
    let bound: Vec<BoundToken> = bound_tokens(luks)
        .into_iter()
        .filter_map(|(_, t)| t.ok())
        .filter(|t| selected.contains(&t.slot))
        .collect();
    let is_bound = |slot: usize| bound.iter().any(|t| t.slot == slot);
    let mut passphrases = Vec::new();
    if let Some(new) = request.new_passphrase {
        passphrases.push(new);
        return Ok(KeyslotPlan { passphrases, bound });
    }
    let mut kept = Vec::new();
    if let Some(passphrase) = request.passphrase {
        for slot in selected.iter().copied().filter(|s| !is_bound(*s)) {
            if luks.unlock(header, passphrase.expose(), Some(slot)).is_ok() {
                passphrases.push(passphrase);
                kept.push(slot);
            }
        }
    }
    // With no passphrase given, the passphrase keyslots cannot be
    // re-enrolled: refuse rather than silently lock them out.
    let lost: Vec<String> = selected
        .iter()
        .filter(|s| !kept.contains(s) && !is_bound(**s))
        .map(ToString::to_string)
        .collect();
    if request.passphrase.is_none() && request.key_slot.is_none() && !lost.is_empty() {
        return Err(Error::Usage(format!(
            "keyslot(s) {} of {} would no longer open it after the reencryption (their passphrase was not given): give it with --key-file to keep it under the new key, or remove the keyslot first (rampart kill-slot)",
            lost.join(", "),
            volume.display()
        )));
    }
    Ok(KeyslotPlan { passphrases, bound })
}

/// How the new key is used and its keyslots protected.
#[derive(Debug, Clone)]
pub struct NewKeyShape<'a> {
    pub cipher: DataCipher,
    pub sector_size: u32,
    pub resilience: Resilience,
    /// The KDF of the passphrase keyslots (and of the reencryption digest).
    pub pbkdf: &'a PbkdfChoice,
    /// The KDF of the bound keyslots, whose secrets are random.
    pub bound_pbkdf: &'a PbkdfChoice,
}

/// A binding moved to the new key.
#[derive(Debug, Clone)]
pub struct Rebound {
    pub old: BoundToken,
    pub new: BoundToken,
}

/// What [`start_reencryption`] wrote.
#[derive(Debug, Clone)]
pub struct Started {
    /// The keyslots of the new key.
    pub slots: Vec<usize>,
    pub rebound: Vec<Rebound>,
}

/// Writes the reencryption metadata of the volume `luks` (under the
/// exclusive lock held by `header`): the new key's keyslots as `plan` says,
/// each binding's fresh secret wrapped first by `kms`, and the reencrypt
/// keyslot.
///
/// # Errors
/// Usage: too few free keyslots, bindings with no key manager to move
/// them. Otherwise a wrap refused or the header write failing; either way
/// nothing was written before the failure.
#[allow(clippy::too_many_arguments)] // one call site; the keys stay apart from the shape
pub fn start_reencryption(
    plan: &KeyslotPlan<'_>,
    kms: Option<&Kms>,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    volume: &Path,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    shape: &NewKeyShape<'_>,
) -> Result<Started, Error> {
    if kms.is_none() && !plan.bound.is_empty() {
        let list: Vec<String> = plan.bound.iter().map(BoundToken::describe).collect();
        return Err(Error::Usage(format!(
            "{} is bound to the key manager ({}): give --kms BUNDLE (or $RAMPART_KMS) to move the binding to the new volume key, or remove it first (rampart unbind)",
            volume.display(),
            list.join(", ")
        )));
    }
    let wanted = plan.passphrases.len() + plan.bound.len();
    let slot_ids = luks.free_keyslots(wanted);
    if luks.free_keyslots(wanted + 1).len() <= wanted {
        return Err(Error::Usage(format!(
            "{} has too few free keyslots for the new key's {wanted} keyslot(s) and the reencryption keyslot",
            volume.display(),
        )));
    }
    let mut secrets = Vec::new();
    let mut tokens = Vec::new();
    let mut rebound = Vec::new();
    if let Some(kms) = kms {
        // Each binding: a fresh secret, wrapped by the newest version of
        // its key for the keyslot it will have (the lowest free ids, in
        // order), before anything is written.
        for (old, slot) in plan.bound.iter().zip(&slot_ids[plan.passphrases.len()..]) {
            let secret = new_passphrase()?;
            let (wrapped, key_version) =
                kms.wrap(&old.key, &secret, &context(luks.uuid(), *slot)).map_err(|e| {
                    e.context(format!("the key manager did not wrap with key {}", old.key))
                })?;
            let new = BoundToken {
                id: 0,
                slot: *slot,
                key: old.key.clone(),
                key_version,
                endpoints: kms.endpoints().to_vec(),
                wrapped,
                bundle: old.bundle.clone(),
            };
            tokens.push(new.to_json());
            rebound.push(Rebound { old: old.clone(), new });
            secrets.push(secret);
        }
    }
    let mut passphrases: Vec<&[u8]> = plan.passphrases.iter().map(|p| p.expose()).collect();
    let mut kdfs: Vec<&PbkdfChoice> = vec![shape.pbkdf; passphrases.len()];
    kdfs.extend(std::iter::repeat_n(shape.bound_pbkdf, secrets.len()));
    passphrases.extend(secrets.iter().map(SecretBytes::expose));
    let slots = luks.reencrypt_init_with_tokens(
        header,
        old_key,
        new_key,
        shape.cipher,
        shape.sector_size,
        shape.resilience.clone(),
        shape.pbkdf,
        &passphrases,
        &tokens,
        &kdfs,
    )?;
    Ok(Started { slots, rebound })
}
