//! Volumes bound to the key manager, as Clevis binds LUKS2 volumes to
//! Tang: `bind`, `unbind`, `rewrap` and `unlock`. The token format and the
//! unlocking order are described in `keysource.rs`.

use std::io::IsTerminal;

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rampart_luks::{Luks, LuksVersion, MetadataIo, PbkdfChoice};
use rampart_volume::VolumePaths;

use crate::cli::{BindArgs, KeyArgs, PbkdfArgs, RewrapArgs, UnbindArgs, UnlockArgs};
use crate::commands::header::{
    load, load_released, paths, pbkdf_choice, relock, unlock as unlock_passphrase,
};
use crate::commands::keysource::{
    bound_tokens, combine_failures, context, new_passphrase, print_passphrase, BoundToken, Kms,
    TOKEN_TYPE,
};
use crate::errors::luks_error;
use crate::UsageError;

/// LUKS2 keyslot and token ids run from 0 to 31.
const MAX_ID: usize = 31;

/// Tokens are LUKS2 metadata: LUKS1 volumes cannot be bound.
pub fn require_luks2(luks: &Luks, paths: &VolumePaths) -> anyhow::Result<()> {
    if luks.version() == LuksVersion::Luks1 {
        return Err(UsageError(format!(
            "{} is a LUKS1 volume, which has no tokens to hold a binding (convert it with \
             `cryptsetup convert --type luks2` first)",
            paths.header_path().display()
        ))
        .into());
    }
    Ok(())
}

/// The KDF of a bound keyslot: PBKDF2-SHA256 at cryptsetup's minimum of
/// 1000 iterations unless the user chose otherwise. Its passphrase has 256
/// random bits, so stretching adds nothing but unlock time.
pub fn bind_pbkdf(args: &PbkdfArgs) -> anyhow::Result<PbkdfChoice> {
    let chosen = args.pbkdf.is_some()
        || args.iter_time.is_some()
        || args.pbkdf_force_iterations.is_some()
        || args.pbkdf_memory.is_some()
        || args.pbkdf_parallel.is_some();
    if chosen {
        return pbkdf_choice(args, LuksVersion::Luks2);
    }
    let cheap = PbkdfArgs {
        pbkdf: Some("pbkdf2".into()),
        hash: args.hash.clone(),
        iter_time: None,
        pbkdf_force_iterations: Some(1000),
        pbkdf_memory: None,
        pbkdf_parallel: None,
    };
    pbkdf_choice(&cheap, LuksVersion::Luks2)
}

/// Refuses a keyslot or token id that is out of range or taken, before
/// anything is written or asked of the key manager.
fn check_ids(luks: &Luks, slot: Option<usize>, token_id: Option<usize>) -> anyhow::Result<()> {
    if let Some(slot) = slot {
        if slot > MAX_ID {
            return Err(UsageError(format!("keyslot {slot} is out of range (0..={MAX_ID})")).into());
        }
        if luks.active_keyslots().contains(&slot) {
            return Err(UsageError(format!("keyslot {slot} is already in use")).into());
        }
    }
    if let Some(id) = token_id {
        if id > MAX_ID {
            return Err(UsageError(format!("token {id} is out of range (0..={MAX_ID})")).into());
        }
        if luks.tokens().iter().any(|(t, _)| *t == id) {
            return Err(UsageError(format!("token {id} is already in use")).into());
        }
    }
    Ok(())
}

/// What a new binding should look like.
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
/// harmless and can be removed with `rampart kill-slot`.
pub fn bind_volume(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    volume_key: &SecretBytes,
    binding: &Binding<'_>,
) -> anyhow::Result<BoundToken> {
    let Binding { key_name, ref pbkdf, slot, token_id, bundle } = *binding;
    check_ids(luks, slot, token_id)?;
    let active = luks.active_keyslots();
    let slot = match slot {
        Some(slot) => slot,
        None => (0..=MAX_ID).find(|s| !active.contains(s)).ok_or_else(|| {
            UsageError("all 32 LUKS2 keyslots are in use; free one with kill-slot".into())
        })?,
    };
    let passphrase = new_passphrase()?;
    let (wrapped, key_version) = kms
        .wrap(key_name, &passphrase, &context(luks.uuid(), slot))
        .with_context(|| format!("the key manager did not wrap with key {key_name}"))?;
    let token = BoundToken {
        id: 0,
        slot,
        key: key_name.to_owned(),
        key_version,
        endpoints: kms.endpoints().to_vec(),
        wrapped,
        bundle: bundle.map(str::to_owned),
    };
    luks.add_keyslot(header, volume_key, passphrase.expose(), pbkdf, Some(slot))
        .map_err(luks_error)?;
    match luks.add_token(header, token.to_json(), token_id) {
        Ok(id) => Ok(BoundToken { id, ..token }),
        Err(error) => {
            // Nothing refers to the new keyslot: take it back if we can.
            let removed = luks.remove_keyslot(header, slot).is_ok();
            Err(luks_error(error)).with_context(|| {
                if removed {
                    format!("the binding's token cannot be stored (keyslot {slot} was removed again)")
                } else {
                    format!("the binding's token cannot be stored; keyslot {slot} is left over (rampart kill-slot can remove it)")
                }
            })
        }
    }
}

fn report_bound(token: &BoundToken) -> std::io::Result<()> {
    outln!(
        "token {}: keyslot {} bound to key {} version {}",
        token.id,
        token.slot,
        token.key,
        token.key_version
    )
}

pub fn bind(args: &BindArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (released, luks) = load_released(&paths)?;
    require_luks2(&luks, &paths)?;
    check_ids(&luks, args.key_slot, args.token_id)?;
    let pbkdf = bind_pbkdf(&args.pbkdf)?;
    let token_bundle = match &args.token_bundle {
        Some(path) => {
            let text = path.to_str().ok_or_else(|| {
                UsageError(format!("--token-bundle {} is not UTF-8", path.display()))
            })?;
            rampart_kms::binding::check_bundle_path(text).map_err(|_| {
                UsageError(format!(
                    "--token-bundle {} is not an absolute path (of at most 4096 bytes)",
                    path.display()
                ))
            })?;
            Some(text)
        }
        None => None,
    };
    let kms = Kms::connect(&args.client)?;
    let existing = KeyArgs { key_file: args.key_file.clone(), key_slot: None };
    let (_, volume_key) =
        unlock_passphrase(&luks, &released, &existing, "Enter any existing passphrase: ")?;
    let (header, mut luks) = relock(&paths, &volume_key)?;
    check_ids(&luks, args.key_slot, args.token_id)?;
    let binding = Binding {
        key_name: &args.key_name,
        pbkdf,
        slot: args.key_slot,
        token_id: args.token_id,
        bundle: token_bundle,
    };
    let token = bind_volume(&kms, &header, &mut luks, &volume_key, &binding)?;
    report_bound(&token)?;
    Ok(())
}

/// Binds a volume `format` has just written (`format --key NAME`).
pub fn bind_new_volume(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    volume_key: &SecretBytes,
    key_name: &str,
) -> anyhow::Result<()> {
    let pbkdf = bind_pbkdf(&PbkdfArgs {
        pbkdf: None,
        hash: None,
        iter_time: None,
        pbkdf_force_iterations: None,
        pbkdf_memory: None,
        pbkdf_parallel: None,
    })?;
    let binding = Binding { key_name, pbkdf, slot: None, token_id: None, bundle: None };
    let token = bind_volume(kms, header, luks, volume_key, &binding).with_context(|| {
        format!(
            "the volume was formatted and opens with its passphrase, but binding it to key \
                 {key_name} failed (retry with rampart bind)"
        )
    })?;
    report_bound(&token)?;
    Ok(())
}

/// The bindings a command acts on: token `id`, or every binding.
fn chosen_tokens(
    luks: &Luks,
    paths: &VolumePaths,
    id: Option<usize>,
) -> anyhow::Result<Vec<(usize, Result<BoundToken, String>)>> {
    let bound = bound_tokens(luks);
    if let Some(id) = id {
        if let Some(found) = bound.into_iter().find(|(t, _)| *t == id) {
            return Ok(vec![found]);
        }
        return Err(match luks.tokens().into_iter().find(|(t, _)| *t == id) {
            Some((_, token)) => UsageError(format!(
                "token {id} is a {} token, not a {TOKEN_TYPE} binding",
                token.get("type").and_then(serde_json::Value::as_str).unwrap_or("typeless")
            )),
            None => UsageError(format!("token {id} does not exist")),
        }
        .into());
    }
    if bound.is_empty() {
        return Err(UsageError(format!(
            "{} is not bound to a key manager (it has no {TOKEN_TYPE} token)",
            paths.header_path().display()
        ))
        .into());
    }
    Ok(bound)
}

pub fn unbind(args: &UnbindArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, mut luks) = load(&paths, true)?;
    require_luks2(&luks, &paths)?;
    let chosen = chosen_tokens(&luks, &paths, args.token_id)?;
    let [(id, _)] = chosen.as_slice() else {
        let ids: Vec<String> = chosen.iter().map(|(id, _)| id.to_string()).collect();
        return Err(UsageError(format!(
            "{} has several bindings (tokens {}); choose one with --token-id",
            paths.header_path().display(),
            ids.join(", ")
        ))
        .into());
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
        return Err(UsageError(format!(
            "token {id} opens the only keyslot of {}; unbinding it would lock you out (add a \
             passphrase with rampart add-key first)",
            paths.header_path().display()
        ))
        .into());
    }
    // Token first: a crash in between leaves an unreferenced keyslot,
    // harmless, never a token pointing at nothing useful.
    luks.remove_token(&header, id).map_err(luks_error)?;
    for slot in slots.iter().filter(|s| active.contains(s)) {
        luks.remove_keyslot(&header, *slot).map_err(luks_error)?;
    }
    let slots: Vec<String> = slots.iter().map(ToString::to_string).collect();
    outln!("token {id} and keyslot {} removed", slots.join(", "))?;
    Ok(())
}

pub fn rewrap(args: &RewrapArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, mut luks) = load(&paths, true)?;
    require_luks2(&luks, &paths)?;
    let chosen = chosen_tokens(&luks, &paths, args.token_id)?;
    let kms = Kms::connect(&args.client)?;
    for (id, token) in chosen {
        let token = token.map_err(|why| UsageError(format!("token {id} is unusable: {why}")))?;
        // The passphrase must open its keyslot before a new wrap of it is
        // written: a token is never replaced by one that cannot unlock.
        let (_, passphrase) = kms
            .open_token(&luks, &header, &token)
            .with_context(|| format!("cannot unwrap {}", token.describe()))?;
        let ctx = context(luks.uuid(), token.slot);
        let (wrapped, version) = kms
            .wrap(&token.key, &passphrase, &ctx)
            .with_context(|| format!("cannot wrap again with key {}", token.key))?;
        if version == token.key_version {
            outln!("token {id}: key {} version {version} is already the newest", token.key)?;
            continue;
        }
        let fresh = BoundToken { wrapped, key_version: version, ..token.clone() };
        let check = kms.unwrap_token(&luks, &fresh).context("cannot unwrap the new wrap")?;
        if check != passphrase {
            anyhow::bail!("the key manager's new wrap of token {id} does not give the passphrase back; token unchanged");
        }
        luks.replace_token(&header, id, fresh.to_json()).map_err(luks_error)?;
        outln!("token {id}: key {} version {} -> {version}", token.key, token.key_version)?;
    }
    Ok(())
}

pub fn unlock(args: &UnlockArgs) -> anyhow::Result<()> {
    if args.print_passphrase && std::io::stdout().is_terminal() {
        return Err(UsageError(
            "refusing to print a passphrase on a terminal; pipe it, e.g. to `cryptsetup open \
             --key-file - VOL NAME`"
                .into(),
        )
        .into());
    }
    let paths = paths(&args.volume);
    let (header, luks) = load(&paths, false)?;
    require_luks2(&luks, &paths)?;
    let chosen = chosen_tokens(&luks, &paths, args.token_id)?;
    let kms = Kms::connect(&args.client)?;
    let mut failures = Vec::new();
    for (id, token) in chosen {
        let token = match token {
            Ok(token) => token,
            Err(why) => {
                failures.push(UsageError(format!("token {id} is unusable: {why}")).into());
                continue;
            }
        };
        match kms.open_token(&luks, &header, &token) {
            Ok((_, passphrase)) => {
                if args.print_passphrase {
                    print_passphrase(&passphrase)?;
                } else if std::io::stderr().is_terminal() {
                    eprintln!("Key slot {} unlocked by token {id}.", token.slot);
                }
                return Ok(());
            }
            Err(e) => failures.push(e.context(token.describe())),
        }
    }
    Err(combine_failures(failures)
        .context(format!("no token unlocked {}", paths.header_path().display())))
}
