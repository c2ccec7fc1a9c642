//! Volumes bound to the key manager: `bind`, `unbind`, `rewrap` and
//! `unlock`, over `rampart_unlock`'s enrolment order.

use std::io::IsTerminal;

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rampart_luks::{Luks, MetadataIo, PbkdfChoice};
use rampart_unlock::{check_ids, Binding, BoundToken, Kms, Rewrap};
use rampart_volume::VolumePaths;

use crate::cli::{BindArgs, KeyArgs, PbkdfArgs, RewrapArgs, UnbindArgs, UnlockArgs};
use crate::commands::header::{load, load_released, paths, relock, unlock as unlock_passphrase};
use crate::commands::keysource::{connect_kms, print_passphrase};
use crate::errors::unlock_error;
use crate::UsageError;

/// Tokens are LUKS2 metadata: LUKS1 volumes cannot be bound.
pub fn require_luks2(luks: &Luks, paths: &VolumePaths) -> anyhow::Result<()> {
    rampart_unlock::require_luks2(luks, paths.header_path()).map_err(unlock_error)
}

/// The KDF of a bound keyslot (see [`rampart_unlock::bound_keyslot_pbkdf`]).
pub fn bind_pbkdf(args: &PbkdfArgs) -> anyhow::Result<PbkdfChoice> {
    rampart_unlock::bound_keyslot_pbkdf(&args.request()).map_err(unlock_error)
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

/// Adds a binding to an unlocked volume (see [`rampart_unlock::bind_volume`]).
fn bind_volume(
    kms: &Kms,
    header: &dyn MetadataIo,
    luks: &mut Luks,
    volume_key: &SecretBytes,
    binding: &Binding<'_>,
) -> anyhow::Result<BoundToken> {
    rampart_unlock::bind_volume(kms, header, luks, volume_key, binding).map_err(unlock_error)
}

pub fn bind(args: &BindArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (released, luks) = load_released(&paths)?;
    require_luks2(&luks, &paths)?;
    check_ids(&luks, args.key_slot, args.token_id).map_err(unlock_error)?;
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
    let kms = connect_kms(&args.client)?;
    let existing = KeyArgs { key_file: args.key_file.clone(), key_slot: None };
    let (_, volume_key) =
        unlock_passphrase(&luks, &released, &existing, "Enter any existing passphrase: ")?;
    let (header, mut luks) = relock(&paths, &volume_key)?;
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
    let pbkdf = PbkdfChoice::for_random_secret(rampart_luks::HashAlg::Sha256);
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

pub fn unbind(args: &UnbindArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, mut luks) = load(&paths, true)?;
    require_luks2(&luks, &paths)?;
    let (id, slots) =
        rampart_unlock::unbind(&header, &mut luks, paths.header_path(), args.token_id)
            .map_err(unlock_error)?;
    let slots: Vec<String> = slots.iter().map(ToString::to_string).collect();
    outln!("token {id} and keyslot {} removed", slots.join(", "))?;
    Ok(())
}

pub fn rewrap(args: &RewrapArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, mut luks) = load(&paths, true)?;
    require_luks2(&luks, &paths)?;
    // Which tokens first: a volume with no binding is refused before any
    // key manager is asked.
    rampart_unlock::chosen_tokens(&luks, paths.header_path(), args.token_id)
        .map_err(unlock_error)?;
    let kms = connect_kms(&args.client)?;
    rampart_unlock::rewrap(&kms, &header, &mut luks, paths.header_path(), args.token_id, |done| {
        match done {
            Rewrap::Newest { id, key, version } => {
                outln!("token {id}: key {key} version {version} is already the newest")
            }
            Rewrap::Rewrapped { id, key, from, to } => {
                outln!("token {id}: key {key} version {from} -> {to}")
            }
        }
    })
    .map_err(unlock_error)
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
    rampart_unlock::chosen_tokens(&luks, paths.header_path(), args.token_id)
        .map_err(unlock_error)?;
    let kms = connect_kms(&args.client)?;
    let (slot, id, passphrase) =
        rampart_unlock::token_passphrase(&kms, &header, &luks, paths.header_path(), args.token_id)
            .map_err(unlock_error)?;
    if args.print_passphrase {
        print_passphrase(&passphrase)?;
    } else if std::io::stderr().is_terminal() {
        eprintln!("Key slot {slot} unlocked by token {id}.");
    }
    Ok(())
}
