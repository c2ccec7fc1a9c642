//! `reencrypt`: the data of a LUKS2 volume re-encrypted in place under a
//! new volume key, on cryptsetup's reencryption metadata.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use rampart_crypto::{HashAlg, SecretBytes};
use rampart_luks::{Luks, LuksVersion, Resilience};
use rampart_serve::protocol::{DecryptAttached, RunOptions};
use rampart_serve::remote;
use rampart_volume::reencrypt_plan::{PlanError, ReencryptSettings, ResilienceMode};
use rampart_volume::{Outcome, ReencryptError, ReencryptOptions, Reencryption, VolumePaths};
use serde_json::json;

use crate::cli::{ReencryptArgs, ResilienceArg, ResilienceHashArg};
use crate::commands::bind::bind_pbkdf;
use crate::commands::copy::progress;
use crate::commands::header::{
    create_header_file, load_released, paths, pbkdf_choice, relock, warn,
};
use crate::commands::keysource::{
    bound_tokens, context, new_passphrase, BoundToken, KeySource, Kms,
};
use crate::errors::{luks_error, map_open_error, remote_error, serve_error};
use crate::passphrase::Source;
use crate::UsageError;

mod hooks;

use hooks::Hooks;

/// Set by SIGINT or SIGTERM: the run stops at the next hotzone boundary,
/// the header recording the position (cryptsetup's behaviour).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Watches for SIGINT and SIGTERM on a helper thread for the rest of the
/// process. Until it is set up, a signal ends the process at once, which
/// the resilience data covers like a crash.
fn watch_signals() {
    std::thread::spawn(|| {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_io().build() else {
            return;
        };
        runtime.block_on(async {
            let (Ok(mut term), Ok(mut int)) =
                (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            INTERRUPTED.store(true, Ordering::Relaxed);
        });
    });
}

/// The request as the planning rules take it.
fn settings(args: &ReencryptArgs) -> ReencryptSettings {
    ReencryptSettings {
        cipher: args.cipher.clone(),
        key_bits: args.key_size,
        sector_size: args.sector_size,
        new_passphrase: args.new_key_file.is_some(),
        resilience: args.resilience.map(|mode| match mode {
            ResilienceArg::Checksum => ResilienceMode::Checksum,
            ResilienceArg::Journal => ResilienceMode::Journal,
            ResilienceArg::None => ResilienceMode::None,
            ResilienceArg::Datashift => ResilienceMode::Datashift,
        }),
        resilience_hash: args.resilience_hash.map(|hash| match hash {
            ResilienceHashArg::Sha1 => HashAlg::Sha1,
            ResilienceHashArg::Sha256 => HashAlg::Sha256,
            ResilienceHashArg::Sha512 => HashAlg::Sha512,
        }),
        reduce_device_size: args.reduce_device_size,
    }
}

/// A request the planning rules refuse is the user's to fix (exit 2).
fn usage(error: PlanError) -> anyhow::Error {
    UsageError(error.0).into()
}

/// The size of the data device.
fn device_len(paths: &VolumePaths) -> anyhow::Result<u64> {
    let file = std::fs::File::open(&paths.data)
        .with_context(|| format!("cannot open {}", paths.data.display()))?;
    rampart_luks::MetadataIo::len(&file).context("cannot size the data device")
}

pub fn run(args: &ReencryptArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let settings = settings(args);
    if args.encrypt {
        let header_in_progress = paths
            .open_header(false)
            .ok()
            .and_then(|h| Luks::load(&h).ok())
            .is_some_and(|(l, _)| matches!(l.reencrypt_state(), Ok(Some(_))));
        if !header_in_progress {
            let (old_key, new_key) = start_encrypt(args, &settings, &paths)?;
            if args.init_only {
                if !args.quiet && !args.json {
                    eprintln!("Encryption of {} initialised.", paths.data.display());
                }
                return Ok(());
            }
            return resume(args, &paths, &old_key, &new_key, None);
        }
    }
    // `--decrypt --header NEWFILE` on a volume whose header is attached:
    // the header is exported to NEWFILE and the data moved down over it.
    if args.decrypt {
        if let Some(new_header) = &paths.header {
            if matches!(std::fs::symlink_metadata(new_header), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
            {
                let (key, uuid) = start_decrypt_attached(args, &settings, &paths, new_header)?;
                if args.init_only {
                    if !args.quiet && !args.json {
                        eprintln!(
                            "Decryption of {} initialised; its header is now {}.",
                            paths.data.display(),
                            new_header.display()
                        );
                    }
                    return Ok(());
                }
                // A server that started the decryption serves the volume
                // through NEWFILE now, and takes the run as well.
                let served = remote::connect(&uuid);
                return resume(args, &paths, &key, &SecretBytes::new(Vec::new()), served);
            }
        }
    }
    // The header's "reencryption in progress" warning is this command's
    // own business: the others are shown.
    let (header, luks, mut report) = paths.load_released()?;
    // A server of the volume takes the job over (online reencryption).
    let served = remote::connect(luks.uuid());
    report.warnings.retain(|w| !w.starts_with("a reencryption is in progress"));
    warn(&report);
    if luks.version() != LuksVersion::Luks2 {
        return Err(UsageError(format!(
            "{} is LUKS1: only LUKS2 volumes can be re-encrypted in place",
            paths.header_path().display()
        ))
        .into());
    }
    let state = luks.reencrypt_state().map_err(luks_error)?;
    // Bound volumes open through their tokens with a client bundle; the
    // passphrase is read only when needed.
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    let (old_key, new_key) = match state {
        Some(state) => {
            settings.check_resume(&paths.data, &state).map_err(usage)?;
            if args.init_only {
                return Err(UsageError(format!(
                    "the reencryption of {} is already initialised",
                    paths.data.display()
                ))
                .into());
            }
            let keys = source.unlock_reencrypting(&luks, &header, paths.header_path())?;
            drop(header);
            if settings.changes_resilience(&state) {
                change_resilience(args, &settings, &paths, &state, &keys)?;
            }
            keys
        }
        None if args.resume_only => {
            return Err(UsageError(format!(
                "{} is not being re-encrypted: nothing to resume",
                paths.data.display()
            ))
            .into())
        }
        None if args.decrypt => {
            let (_, key) = source.unlock(&luks, &header, paths.header_path())?;
            drop(header);
            start_decrypt(args, &settings, &paths, &luks, key)?
        }
        None => {
            drop(header);
            start(args, &settings, &paths, &luks, &mut source)?
        }
    };
    if args.init_only {
        if !args.quiet && !args.json {
            eprintln!("Reencryption of {} initialised.", paths.data.display());
        }
        return Ok(());
    }
    resume(args, &paths, &old_key, &new_key, served)
}

/// `--encrypt`: writes the header of a plaintext image about to be
/// encrypted (after copying the data the header will overwrite, with a
/// data shift). Returns the keys: none (plaintext) and the new one.
fn start_encrypt(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
) -> anyhow::Result<(SecretBytes, SecretBytes)> {
    if args.resume_only {
        return Err(UsageError(format!(
            "{} is not being encrypted: nothing to resume",
            paths.data.display()
        ))
        .into());
    }
    let data = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&paths.data)
        .with_context(|| format!("cannot open {}", paths.data.display()))?;
    if Luks::load(&data).is_ok() {
        return Err(UsageError(format!(
            "{} already holds a LUKS header: it is encrypted already (use `rampart reencrypt` without --encrypt to change its key)",
            paths.data.display()
        ))
        .into());
    }
    let device_len = rampart_luks::MetadataIo::len(&data).context("cannot size the data device")?;
    let planned =
        settings.encrypt_start(&paths.data, device_len, paths.header.is_some()).map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let passphrase = Source::new(
        args.new_key_file.as_deref().or(args.key.key_file.as_deref()),
        "Enter passphrase for the encrypted volume: ",
        true,
    )
    .read()?;
    let opts = planned.format_options(pbkdf);
    let plan = planned.encrypt_plan();
    let (_, key) = match planned.moved_chunk() {
        Some(shift) => {
            // The first `shift` bytes, which the header will overwrite, go
            // to the device's last ones first (cryptsetup's moved segment).
            let len = usize::try_from(shift).context("data shift too large")?;
            let mut buf = SecretBytes::zeroed(len);
            rampart_luks::MetadataIo::read_at(&data, 0, buf.expose_mut())
                .context("cannot read the start of the data")?;
            rampart_luks::MetadataIo::write_at(&data, device_len - shift, buf.expose())
                .and_then(|()| rampart_luks::MetadataIo::sync(&data))
                .context("cannot copy the start of the data")?;
            Luks::format_encrypt(&data, &opts, passphrase.expose(), &plan).map_err(luks_error)?
        }
        None => {
            let header_path = paths.header_path();
            if header_path.exists() {
                let file = std::fs::File::open(header_path)
                    .with_context(|| format!("cannot open {}", header_path.display()))?;
                if Luks::load(&file).is_ok() {
                    return Err(UsageError(format!(
                        "{} already holds a LUKS header: refusing to overwrite it",
                        header_path.display()
                    ))
                    .into());
                }
            } else {
                create_header_file(header_path)?;
            }
            let header = paths.open_header(true)?;
            Luks::format_encrypt(&header, &opts, passphrase.expose(), &plan).map_err(luks_error)?
        }
    };
    drop(data);
    Ok((SecretBytes::new(Vec::new()), key))
}

/// `--decrypt --header NEWFILE` on a volume whose header is attached (as
/// cryptsetup 2.6): the header goes to NEWFILE, the first data-offset
/// bytes of ciphertext to the start of the device, and NEWFILE records a
/// decryption that moves the data down (see
/// [`rampart_volume::reencrypt::start_decrypt_shift`]); the server of a
/// served volume does it (see [`rampart_serve::control`]). Returns the key and the
/// volume's UUID.
fn start_decrypt_attached(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
    new_header: &std::path::Path,
) -> anyhow::Result<(SecretBytes, String)> {
    settings.check_decrypt().map_err(usage)?;
    let attached = VolumePaths::new(&paths.data, None);
    let (header, luks, report) = attached.load_released().with_context(|| {
        format!(
            "{} does not exist, so {} must hold its LUKS2 header (to be exported to it)",
            new_header.display(),
            paths.data.display()
        )
    })?;
    warn(&report);
    if luks.version() != LuksVersion::Luks2 {
        return Err(UsageError(format!(
            "{} is LUKS1: only LUKS2 volumes can be decrypted in place",
            paths.data.display()
        ))
        .into());
    }
    if luks.reencrypt_state().map_err(luks_error)?.is_some() {
        return Err(UsageError(format!(
            "{} is being re-encrypted with its header attached: resume it with `rampart reencrypt --resume-only` without --header first",
            paths.data.display()
        ))
        .into());
    }
    let served = remote::connect(luks.uuid());
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    let (_, key) = source.unlock(&luks, &header, attached.header_path())?;
    drop(header);
    let resilience = settings.moved_decrypt_resilience().map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let context = || format!("cannot start the decryption of {}", paths.data.display());
    match served {
        Some(stream) => {
            let header = std::path::absolute(new_header)
                .with_context(|| format!("cannot resolve {}", new_header.display()))?;
            let (resilience, resilience_hash) = match &resilience {
                Resilience::Checksum { hash, .. } => ("checksum", Some(hash.name().to_owned())),
                other => (other.name(), None),
            };
            let start = DecryptAttached {
                header,
                resilience: resilience.to_owned(),
                resilience_hash,
                digest_hash: pbkdf.hash.name().to_owned(),
                quick_digest: pbkdf.forced_iterations.is_some(),
            };
            remote::start_decrypt_attached_remote(stream, start, &key)
                .map_err(serve_error)
                .with_context(context)?;
        }
        None => rampart_volume::reencrypt::start_decrypt_shift(
            &paths.data,
            new_header,
            &key,
            resilience,
            &pbkdf,
        )
        .map_err(map_open_error)
        .with_context(context)?,
    }
    Ok((key, luks.uuid().to_owned()))
}

/// `--decrypt`: writes the reencryption metadata of a decryption (mode
/// decrypt, backward, as cryptsetup). Returns the key and none.
fn start_decrypt(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
    luks: &Luks,
    key: SecretBytes,
) -> anyhow::Result<(SecretBytes, SecretBytes)> {
    if paths.header.is_none() {
        return Err(UsageError(format!(
            "{} has its header attached: give --header NEWFILE (a file that does not exist yet), as cryptsetup 2.6 asks: the header is exported to it and the data moved down over it while it is decrypted",
            paths.data.display()
        ))
        .into());
    }
    settings.check_decrypt().map_err(usage)?;
    let segment = luks.segment().map_err(luks_error)?;
    let resilience = settings.decrypt_resilience(&segment, device_len(paths)?).map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let (header, mut luks) = relock(paths, &key)?;
    luks.reencrypt_init_decrypt(&header, &key, resilience, &pbkdf).map_err(luks_error)?;
    drop(header);
    Ok((key, SecretBytes::new(Vec::new())))
}

/// Resuming with another `--resilience` (cryptsetup 2.6 allows it among
/// checksum, journal and none): an interrupted hotzone is recovered under
/// the old mode first, then the keyslot area's mode changes.
fn change_resilience(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
    state: &rampart_luks::ReencryptState,
    (old_key, new_key): &(SecretBytes, SecretBytes),
) -> anyhow::Result<()> {
    settings.check_resilience_change(&paths.data, state).map_err(usage)?;
    if state.hotzone.is_some() {
        Reencryption::open(paths, old_key, new_key)
            .and_then(Reencryption::recover_only)
            .map_err(map_open_error)?;
    }
    let resilience = settings.changed_resilience(state, device_len(paths)?).map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let (header, mut luks, _) = paths.load(true)?;
    luks.reencrypt_set_resilience(&header, old_key, new_key, &resilience, &pbkdf)
        .map_err(luks_error)?;
    if !args.quiet && !args.json {
        eprintln!("Resilience changed from {} to {}.", state.resilience.name(), resilience.name());
    }
    Ok(())
}

/// Writes the reencryption metadata: the new key, its keyslots, the
/// reencrypt keyslot. Returns the old and the new key.
fn start(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
    luks: &Luks,
    source: &mut KeySource<'_>,
) -> anyhow::Result<(SecretBytes, SecretBytes)> {
    let segment = luks.segment().map_err(luks_error)?;
    let (header, _) = load_released(paths)?;
    let (_, old_key) = source.unlock(luks, &header, paths.header_path())?;
    let shape = settings.new_key(Some(&segment)).map_err(usage)?;
    let planned = settings.reencrypt_start(&segment, shape, device_len(paths)?).map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;

    // The keyslots of the new key: the new passphrase, or a twin of each
    // keyslot the passphrase opens, then one per key-manager binding.
    let selected: Vec<usize> = match args.key.key_slot {
        Some(slot) => vec![slot],
        None => luks.active_keyslots(),
    };
    let bound: Vec<BoundToken> = bound_tokens(luks)
        .into_iter()
        .filter_map(|(_, t)| t.ok())
        .filter(|t| selected.contains(&t.slot))
        .collect();
    let passphrase = match (source.passphrase(), &args.key.key_file) {
        (Some(p), _) => Some(p.clone()),
        // A token unlocked; a passphrase given as well is re-enrolled.
        (None, Some(file)) => Some(Source::new(Some(file), "", false).read()?),
        (None, None) => None,
    };
    let given_new;
    let mut passphrases: Vec<&[u8]> = Vec::new();
    if let Some(file) = &args.new_key_file {
        given_new = Source::new(Some(file), "Enter new passphrase: ", false).read()?;
        passphrases.push(given_new.expose());
    } else {
        let mut kept = Vec::new();
        if let Some(passphrase) = &passphrase {
            for slot in selected.iter().filter(|s| !bound.iter().any(|t| t.slot == **s)) {
                if luks.unlock(&header, passphrase.expose(), Some(*slot)).is_ok() {
                    passphrases.push(passphrase.expose());
                    kept.push(*slot);
                }
            }
        }
        // With no passphrase given, the passphrase keyslots could not be
        // re-enrolled: refuse rather than silently lock them out.
        let lost: Vec<String> = selected
            .iter()
            .filter(|s| !kept.contains(s) && !bound.iter().any(|t| t.slot == **s))
            .map(ToString::to_string)
            .collect();
        if passphrase.is_none() && args.key.key_slot.is_none() && !lost.is_empty() {
            return Err(UsageError(format!(
                "keyslot(s) {} of {} would no longer open it after the reencryption (their passphrase was not given): give it with --key-file to keep it under the new key, or remove the keyslot first (rampart kill-slot)",
                lost.join(", "),
                paths.data.display()
            ))
            .into());
        }
    }
    let kms = if bound.is_empty() {
        None
    } else if crate::commands::kms::bundle_path(&args.tokens.client).is_some() {
        Some(Kms::connect(&args.tokens.client)?)
    } else {
        let list: Vec<String> = bound.iter().map(BoundToken::describe).collect();
        return Err(UsageError(format!(
            "{} is bound to the key manager ({}): give --kms BUNDLE (or $RAMPART_KMS) to move the binding to the new volume key, or remove it first (rampart unbind)",
            paths.data.display(),
            list.join(", ")
        ))
        .into());
    };
    drop(header);
    let new_key = shape.generate()?;
    let (header, mut luks) = relock(paths, &old_key)?;
    // Each binding: a fresh secret, wrapped by the newest version of its
    // key for the keyslot it will have (the lowest free ids, in order),
    // before anything is written, so that a refusal changes nothing.
    let wanted = passphrases.len() + bound.len();
    let slot_ids = luks.free_keyslots(wanted);
    if luks.free_keyslots(wanted + 1).len() <= wanted {
        return Err(UsageError(format!(
            "{} has too few free keyslots for the new key's {} keyslot(s) and the reencryption keyslot",
            paths.data.display(),
            passphrases.len() + bound.len()
        ))
        .into());
    }
    let bind_kdf = bind_pbkdf(&args.pbkdf)?;
    let mut secrets = Vec::new();
    let mut tokens = Vec::new();
    let mut rebound = Vec::new();
    if let Some(kms) = &kms {
        for (old, slot) in bound.iter().zip(&slot_ids[passphrases.len()..]) {
            let secret = new_passphrase()?;
            let (wrapped, key_version) = kms
                .wrap(&old.key, &secret, &context(luks.uuid(), *slot))
                .with_context(|| format!("the key manager did not wrap with key {}", old.key))?;
            let token = BoundToken {
                id: 0,
                slot: *slot,
                key: old.key.clone(),
                key_version,
                endpoints: kms.endpoints().to_vec(),
                wrapped,
                bundle: old.bundle.clone(),
            };
            tokens.push(token.to_json());
            rebound.push((old.clone(), token));
            secrets.push(secret);
        }
    }
    let mut kdfs: Vec<&rampart_luks::PbkdfChoice> = vec![&pbkdf; passphrases.len()];
    kdfs.extend(std::iter::repeat_n(&bind_kdf, secrets.len()));
    passphrases.extend(secrets.iter().map(SecretBytes::expose));
    let slots = luks
        .reencrypt_init_with_tokens(
            &header,
            &old_key,
            &new_key,
            shape.cipher,
            shape.sector_size,
            planned.resilience,
            &pbkdf,
            &passphrases,
            &tokens,
            &kdfs,
        )
        .map_err(luks_error)?;
    drop(header);
    if !args.quiet && !args.json {
        let list: Vec<String> = slots.iter().map(ToString::to_string).collect();
        eprintln!("New keyslot(s) {} hold the new volume key.", list.join(", "));
        for (old, new) in &rebound {
            eprintln!(
                "Keyslot {} (key {} version {}) rebound as keyslot {} (key {} version {}).",
                old.slot, old.key, old.key_version, new.slot, new.key, new.key_version
            );
        }
    }
    Ok((old_key, new_key))
}

fn resume(
    args: &ReencryptArgs,
    paths: &VolumePaths,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    served: Option<UnixStream>,
) -> anyhow::Result<()> {
    let hooks = Hooks::from_env()?;
    let bar = if args.json || args.quiet { None } else { progress(0) };
    let started = Instant::now();
    let (mut first, mut total) = (None, 0);
    watch_signals();
    let mut report = |done: u64, size: u64| {
        let first = *first.get_or_insert(done);
        total = size;
        if let Some(bar) = &bar {
            bar.set_length(size);
            bar.set_position(done);
        }
        if args.json {
            let secs = started.elapsed().as_secs_f64();
            let rate = if secs > 0.0 { (done - first) as f64 / secs } else { 0.0 };
            let eta = if rate > 0.0 { (size - done) as f64 / rate } else { 0.0 };
            let line = json!({"event": "progress", "done": done, "total": size,
                "bytes_per_second": rate.round(), "eta_seconds": eta.round()});
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    };
    let outcome = match served {
        // The volume is being served: the server does the work, online.
        Some(stream) => {
            hooks.check_online()?;
            remote::reencrypt_remote(
                stream,
                old_key,
                new_key,
                RunOptions { hotzone_size: args.hotzone_size, stop_after: hooks.stop_after },
                &INTERRUPTED,
                &mut report,
            )
            .map_err(remote_error)
            .with_context(|| format!("online reencryption of {} failed", paths.data.display()))
        }
        None => offline(paths, old_key, new_key, args.hotzone_size, hooks, &mut report),
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let outcome = outcome?;
    let first = first.unwrap_or(total);
    let secs = started.elapsed().as_secs_f64();
    match outcome {
        Outcome::Finished => {
            if args.json {
                outln!("{}", json!({"event": "finished", "bytes": total, "seconds": secs}))?;
            } else if !args.quiet {
                eprintln!(
                    "Re-encrypted {} bytes of {} in {secs:.1} s.",
                    total - first,
                    paths.data.display()
                );
            }
        }
        Outcome::Stopped { done } if INTERRUPTED.load(Ordering::Relaxed) => {
            if args.json {
                outln!("{}", json!({"event": "interrupted", "done": done, "total": total}))?;
            }
            anyhow::bail!(
                "interrupted at {done} of {total} bytes; resume with `rampart reencrypt --resume-only`"
            );
        }
        Outcome::Stopped { done } => {
            if args.json {
                outln!("{}", json!({"event": "stopped", "done": done, "total": total}))?;
            } else if !args.quiet {
                eprintln!(
                    "Stopped at {done} of {total} bytes; resume with `rampart reencrypt --resume-only`."
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// Runs the reencryption in this process.
fn offline(
    paths: &VolumePaths,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    hotzone_size: Option<u64>,
    hooks: Hooks,
    report: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Outcome> {
    let job = Reencryption::open(paths, old_key, new_key).map_err(map_open_error)?;
    let options = ReencryptOptions {
        hotzone_size,
        stop_after: hooks.stop_after,
        crash_after: hooks.crash_after,
        serving: None,
    };
    match job.run(&options, &INTERRUPTED, report) {
        Ok(outcome) => Ok(outcome),
        Err(ReencryptError::SimulatedCrash(_)) => std::process::exit(137),
        Err(ReencryptError::Volume(e)) => Err(map_open_error(e))
            .with_context(|| format!("reencryption of {} failed", paths.data.display())),
        Err(other) => Err(other.into()),
    }
}
