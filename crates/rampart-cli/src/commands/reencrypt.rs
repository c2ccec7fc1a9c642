//! `reencrypt`: the data of a LUKS2 volume re-encrypted in place under a
//! new volume key, on cryptsetup's reencryption metadata.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use rampart_crypto::{HashAlg, SecretBytes};
use rampart_luks::{Luks, LuksVersion};
use rampart_serve::protocol::{DecryptAttached, RunOptions};
use rampart_serve::remote;
use rampart_unlock::{NewKeyShape, NewKeyslots, Rebound};
use rampart_volume::reencrypt_plan::{PlanError, ReencryptSettings, ResilienceMode};
use rampart_volume::reencrypt_start::{self, DecryptAttachedStart, EncryptStart};
use rampart_volume::{Outcome, ReencryptError, ReencryptOptions, Reencryption, VolumePaths};
use serde_json::json;

use crate::cli::{ReencryptArgs, ResilienceArg};
use crate::commands::bind::bind_pbkdf;
use crate::commands::copy::progress;
use crate::commands::header::{load_released, paths, pbkdf_choice, relock, warn};
use crate::commands::keysource::{connect_kms, KeySource};
use crate::errors::{
    luks_error, map_open_error, remote_error, serve_error, start_error, unlock_error,
};
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
        resilience_hash: args.resilience_hash.map(HashAlg::from),
        reduce_device_size: args.reduce_device_size,
        init_only: args.init_only,
        resume_only: args.resume_only,
    }
}

/// A request the planning rules refuse is the user's to fix (exit 2).
fn usage(error: PlanError) -> anyhow::Error {
    UsageError(error.0).into()
}

/// The size of the data device.
fn device_len(paths: &VolumePaths) -> anyhow::Result<u64> {
    reencrypt_start::device_len(paths).map_err(map_open_error)
}

pub fn run(args: &ReencryptArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let settings = settings(args);
    if args.encrypt && !reencrypt_start::in_progress(&paths) {
        let (old_key, new_key) = start_encrypt(args, &settings, &paths)?;
        if args.init_only {
            if !args.quiet && !args.json {
                eprintln!("Encryption of {} initialised.", paths.data.display());
            }
            return Ok(());
        }
        return resume(args, &paths, &old_key, &new_key, None);
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
    reencrypt_start::require_luks2(&luks, paths.header_path()).map_err(start_error)?;
    let state = luks.reencrypt_state().map_err(luks_error)?;
    // Bound volumes open through their tokens with a client bundle; the
    // passphrase is read only when needed.
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    let (old_key, new_key) = match state {
        Some(state) => {
            settings.check_resume(&paths.data, &state).map_err(usage)?;
            let keys = source.unlock_reencrypting(&luks, &header, paths.header_path())?;
            drop(header);
            if settings.changes_resilience(&state) {
                let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
                let (old_key, new_key) = &keys;
                let resilience = reencrypt_start::change_resilience(
                    &paths, &settings, &state, old_key, new_key, &pbkdf,
                )
                .map_err(start_error)?;
                if !args.quiet && !args.json {
                    eprintln!(
                        "Resilience changed from {} to {}.",
                        state.resilience.name(),
                        resilience.name()
                    );
                }
            }
            keys
        }
        None => {
            settings.check_start(&paths.data, false).map_err(usage)?;
            if args.decrypt {
                let (_, key) = source.unlock(&luks, &header, paths.header_path())?;
                drop(header);
                let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
                reencrypt_start::start_decrypt(&paths, &settings, &luks, &key, &pbkdf)
                    .map_err(start_error)?;
                (key, SecretBytes::new(Vec::new()))
            } else {
                drop(header);
                start(args, &settings, &paths, &luks, &mut source)?
            }
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
/// encrypted (see [`EncryptStart`]). Returns the keys: none (plaintext)
/// and the new one.
fn start_encrypt(
    args: &ReencryptArgs,
    settings: &ReencryptSettings,
    paths: &VolumePaths,
) -> anyhow::Result<(SecretBytes, SecretBytes)> {
    settings.check_start(&paths.data, true).map_err(usage)?;
    let start = EncryptStart::prepare(paths, settings).map_err(start_error)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let passphrase = Source::new(
        args.new_key_file.as_deref().or(args.key.key_file.as_deref()),
        "Enter passphrase for the encrypted volume: ",
        true,
    )
    .read()?;
    let key = start.write(pbkdf, passphrase.expose()).map_err(start_error)?;
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
    let start = DecryptAttachedStart::prepare(paths, settings, new_header).map_err(start_error)?;
    warn(&start.report);
    let served = remote::connect(start.luks.uuid());
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    let (_, key) = source.unlock(&start.luks, &start.header, start.header_path())?;
    let DecryptAttachedStart { header, luks, .. } = start;
    drop(header);
    let resilience = settings.moved_decrypt_resilience().map_err(usage)?;
    let pbkdf = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
    let context = || format!("cannot start the decryption of {}", paths.data.display());
    match served {
        Some(stream) => {
            let header = std::path::absolute(new_header)
                .with_context(|| format!("cannot resolve {}", new_header.display()))?;
            let start = DecryptAttached::new(header, &resilience, &pbkdf);
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

/// Writes the reencryption metadata: the new key, its keyslots (see
/// [`rampart_unlock::plan_keyslots`]), the reencrypt keyslot. Returns the
/// old and the new key.
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
    let passphrase = match (source.passphrase(), &args.key.key_file) {
        (Some(p), _) => Some(p.clone()),
        // A token unlocked; a passphrase given as well is re-enrolled.
        (None, Some(file)) => Some(Source::new(Some(file), "", false).read()?),
        (None, None) => None,
    };
    let new_passphrase = args
        .new_key_file
        .as_deref()
        .map(|file| Source::new(Some(file), "Enter new passphrase: ", false).read())
        .transpose()?;
    let request = NewKeyslots {
        key_slot: args.key.key_slot,
        passphrase: passphrase.as_ref(),
        new_passphrase: new_passphrase.as_ref(),
    };
    let plan = rampart_unlock::plan_keyslots(luks, &header, &paths.data, &request)
        .map_err(unlock_error)?;
    let kms = match &args.tokens.client.bundle {
        Some(_) if !plan.bindings().is_empty() => Some(connect_kms(&args.tokens.client)?),
        _ => None,
    };
    drop(header);
    let new_key = shape.generate()?;
    let (header, mut luks) = relock(paths, &old_key)?;
    let bound_pbkdf = bind_pbkdf(&args.pbkdf)?;
    let new_shape = NewKeyShape {
        cipher: shape.cipher,
        sector_size: shape.sector_size,
        resilience: planned.resilience,
        pbkdf: &pbkdf,
        bound_pbkdf: &bound_pbkdf,
    };
    let started = rampart_unlock::start_reencryption(
        &plan,
        kms.as_ref(),
        &header,
        &mut luks,
        &paths.data,
        &old_key,
        &new_key,
        &new_shape,
    )
    .map_err(unlock_error)?;
    drop(header);
    if !args.quiet && !args.json {
        let list: Vec<String> = started.slots.iter().map(ToString::to_string).collect();
        eprintln!("New keyslot(s) {} hold the new volume key.", list.join(", "));
        for Rebound { old, new } in &started.rebound {
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
