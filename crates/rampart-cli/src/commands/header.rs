//! What the commands share about a volume's header: where it is, loading
//! it under cryptsetup's locks (with its warnings said once), unlocking
//! it with a passphrase, the KDF options, and the confirmation prompt.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rampart_luks::{LoadReport, Luks, LuksVersion, MetadataIo, PbkdfChoice};
use rampart_volume::{HeaderFile, ReleasedHeader, VolumePaths};

use crate::cli::{KeyArgs, PbkdfArgs, VolumeArgs};
use crate::errors::{luks_error, map_open_error};
use crate::passphrase::Source;

pub fn paths(args: &VolumeArgs) -> VolumePaths {
    VolumePaths::new(&args.volume, args.header.as_deref())
}

/// Prints a load's warnings, each once per process: a command that loads
/// the header twice (to unlock, then to write under the lock) says it once.
pub fn warn(report: &LoadReport) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for warning in &report.warnings {
        if !said.contains(warning) {
            eprintln!("rampart: warning: {warning}");
            said.push(warning.clone());
        }
    }
}

/// Loads the header under cryptsetup's metadata lock (exclusive when
/// `write`, held until the returned file is dropped), reporting any
/// fallback to the secondary copy.
pub fn load(paths: &VolumePaths, write: bool) -> anyhow::Result<(HeaderFile, Luks)> {
    let (file, luks, report) = paths.load(write)?;
    warn(&report);
    Ok((file, luks))
}

/// Loads the header under the shared metadata lock and lets the lock go,
/// as cryptsetup does before it asks for a passphrase: the returned header
/// locks for each later read by itself.
pub fn load_released(paths: &VolumePaths) -> anyhow::Result<(ReleasedHeader, Luks)> {
    let (file, luks, report) = paths.load_released()?;
    warn(&report);
    Ok((file, luks))
}

/// Loads the header again for writing, under the exclusive metadata lock,
/// once `volume_key` was recovered without it: if cryptsetup or another
/// Rampart changed the header meanwhile, the change goes ahead on the new
/// header only if it still belongs to the same volume key.
pub fn relock(paths: &VolumePaths, volume_key: &SecretBytes) -> anyhow::Result<(HeaderFile, Luks)> {
    let (header, luks, report) = paths.relock(volume_key).map_err(map_open_error)?;
    warn(&report);
    Ok((header, luks))
}

/// Unlocks with the passphrase from `key`: the keyslot and the volume key.
/// A wrong passphrase is a usage error (exit 2).
pub fn unlock(
    luks: &Luks,
    header: &dyn MetadataIo,
    key: &KeyArgs,
    prompt: &str,
) -> anyhow::Result<(usize, SecretBytes)> {
    let passphrase = Source::new(key.key_file.as_deref(), prompt, false).read()?;
    luks.unlock(header, passphrase.expose(), key.key_slot).map_err(luks_error)
}

/// The KDF of new keyslots of a `version` volume, from the KDF options.
pub fn pbkdf_choice(args: &PbkdfArgs, version: LuksVersion) -> anyhow::Result<PbkdfChoice> {
    args.request().choice(version).map_err(luks_error)
}

pub fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("{question} (Type 'yes' in capital letters): ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).context("cannot read the answer")?;
    Ok(answer.trim_end() == "YES")
}
