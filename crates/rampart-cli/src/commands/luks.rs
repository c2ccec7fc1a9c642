//! The header verbs: format, dump, test-key, keyslot and token management,
//! header backup/restore and repair.

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::Path;

use anyhow::{bail, Context};
use rampart_luks::{Luks, LuksVersion, RemovalRefused};
use rampart_volume::format::{self, FormatRequest};
use rampart_volume::integrity::{AuthenticatedDevice, IntegrityMode};
use rampart_volume::{FileDevice, HeaderBackup, SegmentDevice};

use crate::cli::{
    AddKeyArgs, ChangeKeyArgs, DumpArgs, FormatArgs, HeaderCommand, IsLuksArgs, KillSlotArgs,
    RemoveKeyArgs, RepairArgs, TestKeyArgs, TokenCommand, UuidArgs,
};
use crate::commands::bind::{bind_new_volume, require_luks2};
use crate::commands::header::{
    confirm, load, load_released, paths, pbkdf_choice, relock, unlock, warn,
};
use crate::commands::keysource::{connect_kms, KeySource};
use crate::errors::{backup_error, format_error, luks_error};
use crate::passphrase::Source;
use crate::{QuietExit, UsageError};

pub fn format(args: &FormatArgs) -> anyhow::Result<()> {
    let version = LuksVersion::from(args.luks_type);
    let paths = paths(&args.volume);
    let request = FormatRequest {
        version,
        cipher: &args.cipher,
        key_bits: args.key_size,
        sector_size: args.sector_size,
        pbkdf: args.pbkdf.request(),
        label: args.label.clone(),
        subsystem: args.subsystem.clone(),
        metadata_size: args.luks2_metadata_size,
        keyslots_size: args.luks2_keyslots_size,
        data_offset_sectors: args.offset,
        uuid: args.uuid.clone(),
        integrity: args.integrity.map(Into::into),
        integrity_no_journal: args.integrity_no_journal,
    };
    let options = request.options(&paths).map_err(format_error)?;
    format::create_files(&paths, args.size).map_err(format_error)?;
    // Binding at creation (`--key NAME`): LUKS2 only, and the bundle must
    // load before anything is written.
    let kms = match &args.kms_key {
        Some(_) if version == LuksVersion::Luks1 => {
            return Err(UsageError(
                "LUKS1 volumes have no tokens to hold a binding; use --type luks2 with --key"
                    .into(),
            )
            .into())
        }
        Some(_) => Some(connect_kms(&args.client)?),
        None => None,
    };
    let header = paths.open_header(true)?;
    if Luks::load(&header).is_ok() && !args.batch_mode {
        let question = format!(
            "This will overwrite the LUKS header on {} irrevocably. Are you sure?",
            paths.header_path().display()
        );
        if !confirm(&question)? {
            return Err(UsageError(format!(
                "{} already holds a LUKS header; add --batch-mode (-q) to overwrite it",
                paths.header_path().display()
            ))
            .into());
        }
    }
    let passphrase =
        Source::new(args.key_file.as_deref(), "Enter passphrase for the new volume: ", true)
            .read()?;
    let (mut luks, volume_key) = Luks::format(&header, &options, passphrase.expose())?;
    format::check_data_room(&paths, &luks).map_err(format_error)?;
    if let (Some(kms), Some(key_name)) = (&kms, &args.kms_key) {
        require_luks2(&luks, &paths)?;
        bind_new_volume(kms, &header, &mut luks, &volume_key, key_name)?;
    }
    drop(header);
    if let Some(segment) = luks.integrity_segment()? {
        // dm-integrity's superblock and journal, then (unless told not to)
        // sealed zeros in every sector, as cryptsetup's luksFormat does.
        let data = FileDevice::open(&paths.data, false)
            .with_context(|| format!("cannot open {}", paths.data.display()))?;
        rampart_volume::integrity::format_integrity(&data, &segment).with_context(|| {
            format!("cannot format the integrity area of {}", paths.data.display())
        })?;
        if !args.integrity_no_wipe || args.wipe {
            let device =
                AuthenticatedDevice::open(data, &segment, &volume_key, IntegrityMode::Direct)
                    .with_context(|| format!("cannot open {} for wiping", paths.data.display()))?;
            let device = SegmentDevice::Authenticated(Box::new(device));
            crate::commands::wipe::wipe_device(&paths, &device)?;
        }
    } else if args.wipe {
        let access = rampart_volume::DataAccess::default();
        let volume = rampart_volume::Volume::with_key(&paths, luks, &volume_key, access)
            .with_context(|| format!("cannot open {} for wiping", paths.data.display()))?;
        crate::commands::wipe::wipe_device(&paths, volume.device())?;
    }
    Ok(())
}

pub fn dump(args: &DumpArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, luks) = load_released(&paths)?;
    let key = if args.dump_volume_key {
        let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
        Some(source.unlock(&luks, &header, paths.header_path())?)
    } else {
        None
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut value = luks.to_json();
        if let Some((slot, key)) = &key {
            value["volume_key"] = hex(key.expose()).into();
            value["unlocked_keyslot"] = (*slot).into();
        }
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", luks.dump_text())?;
        if let Some((_, key)) = &key {
            writeln!(out, "Volume key ({} bits):", key.len() * 8)?;
            for chunk in key.expose().chunks(16) {
                writeln!(out, "\t{}", hex(chunk))?;
            }
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn test_key(args: &TestKeyArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, luks) = load_released(&paths)?;
    // With --key-file, test that passphrase only; without, what opens the
    // volume (a bound token, else the prompt).
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ")
        .passphrase_only_with_key_file();
    let (slot, _) = source.unlock(&luks, &header, paths.header_path())?;
    if std::io::stderr().is_terminal() {
        eprintln!("Key slot {slot} unlocked.");
    }
    Ok(())
}

pub fn add_key(args: &AddKeyArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, luks) = load_released(&paths)?;
    let (_, volume_key) = unlock(&luks, &header, &args.key, "Enter any existing passphrase: ")?;
    let pbkdf = pbkdf_choice(&args.pbkdf, luks.version())?;
    let new = Source::new(args.new_key_file.as_deref(), "Enter new passphrase: ", true).read()?;
    let (header, mut luks) = relock(&paths, &volume_key)?;
    let slot = luks
        .add_keyslot(&header, &volume_key, new.expose(), &pbkdf, args.new_key_slot)
        .map_err(luks_error)?;
    if std::io::stderr().is_terminal() {
        eprintln!("Key slot {slot} created.");
    }
    Ok(())
}

pub fn change_key(args: &ChangeKeyArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, luks) = load_released(&paths)?;
    let (old_slot, volume_key) =
        unlock(&luks, &header, &args.key, "Enter passphrase to be changed: ")?;
    let pbkdf = pbkdf_choice(&args.pbkdf, luks.version())?;
    let new = Source::new(args.new_key_file.as_deref(), "Enter new passphrase: ", true).read()?;
    let (header, mut luks) = relock(&paths, &volume_key)?;
    if luks.check_removal(old_slot, true).is_err() {
        bail!(removed_meanwhile(old_slot));
    }
    let in_place = || {
        eprintln!(
            "rampart: warning: every keyslot is in use; replacing keyslot {old_slot} in place"
        );
    };
    let new_slot = luks
        .change_keyslot(&header, &volume_key, old_slot, new.expose(), &pbkdf, in_place)
        .map_err(luks_error)?;
    if std::io::stderr().is_terminal() {
        eprintln!("Key slot {old_slot} replaced by key slot {new_slot}.");
    }
    Ok(())
}

pub fn remove_key(args: &RemoveKeyArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, luks) = load_released(&paths)?;
    let (slot, volume_key) = unlock(&luks, &header, &args.key, "Enter passphrase to be deleted: ")?;
    let (header, mut luks) = relock(&paths, &volume_key)?;
    match luks.check_removal(slot, args.batch_mode) {
        Err(RemovalRefused::NotActive) => bail!(removed_meanwhile(slot)),
        Err(_) => return Err(UsageError(last_keyslot(slot, "removing")).into()),
        Ok(()) => {}
    }
    luks.remove_keyslot(&header, slot)?;
    Ok(())
}

/// The keyslot vanished between the passphrase check and the write.
fn removed_meanwhile(slot: usize) -> String {
    format!("keyslot {slot} was removed by another program meanwhile; nothing was written")
}

fn last_keyslot(slot: usize, doing: &str) -> String {
    format!(
        "keyslot {slot} is the last one; {doing} it makes the data unrecoverable (add --batch-mode to do it anyway)"
    )
}

pub fn kill_slot(args: &KillSlotArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (released, luks) = load_released(&paths)?;
    match luks.check_removal(args.slot, args.batch_mode) {
        Err(RemovalRefused::NotActive) => {
            return Err(UsageError(format!("keyslot {} is not active", args.slot)).into())
        }
        Err(_) => return Err(UsageError(last_keyslot(args.slot, "wiping")).into()),
        Ok(()) => {}
    }
    let others: Vec<usize> =
        luks.active_keyslots().into_iter().filter(|&s| s != args.slot).collect();
    let (header, mut luks) = if args.batch_mode {
        load(&paths, true)?
    } else {
        // Prove the right to change the volume with a passphrase of a slot
        // that stays.
        let passphrase =
            Source::new(args.key_file.as_deref(), "Enter any remaining passphrase: ", false)
                .read()?;
        let volume_key = others
            .iter()
            .find_map(|&slot| luks.unlock(&released, passphrase.expose(), Some(slot)).ok())
            .map(|(_, key)| key)
            .ok_or_else(|| luks_error(rampart_luks::Error::NoKey))?;
        relock(&paths, &volume_key)?
    };
    if luks.check_removal(args.slot, true).is_err() {
        bail!(removed_meanwhile(args.slot));
    }
    luks.remove_keyslot(&header, args.slot)?;
    Ok(())
}

pub fn token(command: &TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Import { volume, json_file, token_id } => {
            // Read the token before taking the metadata lock: standard
            // input may be slow.
            let mut text = Vec::new();
            let limit = 1 << 20;
            if json_file == Path::new("-") {
                std::io::stdin().lock().take(limit).read_to_end(&mut text)?;
            } else {
                File::open(json_file)
                    .and_then(|f| f.take(limit).read_to_end(&mut text))
                    .with_context(|| format!("cannot read {}", json_file.display()))?;
            }
            let token: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
                UsageError(format!("{} is not valid JSON: {e}", json_file.display()))
            })?;
            let paths = paths(volume);
            let (header, mut luks) = load(&paths, true)?;
            let id = luks.add_token(&header, token, *token_id).map_err(luks_error)?;
            outln!("{id}")?;
            Ok(())
        }
        TokenCommand::Export { volume, token_id } => {
            let (_, luks) = load(&paths(volume), false)?;
            let token = luks
                .tokens()
                .into_iter()
                .find(|(id, _)| id == token_id)
                .ok_or_else(|| UsageError(format!("token {token_id} does not exist")))?;
            outln!("{}", serde_json::to_string(&token.1)?)?;
            Ok(())
        }
        TokenCommand::Remove { volume, token_id } => {
            let paths = paths(volume);
            let (header, mut luks) = load(&paths, true)?;
            luks.remove_token(&header, *token_id).map_err(luks_error)?;
            Ok(())
        }
    }
}

pub fn header(command: &HeaderCommand) -> anyhow::Result<()> {
    match command {
        HeaderCommand::Backup { volume, file } => {
            let paths = paths(volume);
            let (header, luks) = load(&paths, false)?;
            rampart_volume::backup_header(&header, &luks, paths.header_path(), file)
                .map_err(backup_error)?;
            Ok(())
        }
        HeaderCommand::Restore { volume, file, batch_mode } => {
            let paths = paths(volume);
            let backup = HeaderBackup::read(file).map_err(backup_error)?;
            warn(&backup.report);
            let target = paths.open_header(true)?;
            if let Ok((current, _)) = Luks::load(&target) {
                if current.uuid() != backup.uuid() && !batch_mode {
                    let question = format!(
                        "The backup's UUID {} differs from the volume's {}. Replace the header?",
                        backup.uuid(),
                        current.uuid()
                    );
                    if !confirm(&question)? {
                        return Err(UsageError(format!(
                            "the backup belongs to another volume (UUID {}); add --batch-mode to restore it anyway",
                            backup.uuid()
                        ))
                        .into());
                    }
                }
            }
            backup.restore(&target, paths.header_path()).map_err(backup_error)
        }
    }
}

pub fn repair(args: &RepairArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    let (header, mut luks, report) = paths.load(true)?;
    warn(&report);
    if !report.used_secondary && report.warnings.is_empty() {
        outln!("No damage found in {}.", paths.header_path().display())?;
        return Ok(());
    }
    luks.write(&header)?;
    outln!("Rewrote both header copies of {}.", paths.header_path().display())?;
    Ok(())
}

/// `cryptsetup isLuks`: exit 0 when VOL holds a loadable LUKS header (of
/// the requested version), 1 otherwise, silently unless `--verbose`.
pub fn is_luks(args: &IsLuksArgs) -> anyhow::Result<()> {
    let wanted = match args.luks_type.as_deref() {
        None => None,
        Some("luks2") => Some(LuksVersion::Luks2),
        Some("luks1" | "luks") => Some(LuksVersion::Luks1),
        Some(other) => {
            return Err(
                UsageError(format!("unknown --type '{other}' (expected luks2 or luks1)")).into()
            )
        }
    };
    let paths = paths(&args.volume);
    let verdict = match paths.load(false) {
        Ok((_, luks, _)) if wanted.is_none_or(|v| v == luks.version()) => return Ok(()),
        Ok((_, luks, _)) => format!(
            "{} is {}, not {}",
            paths.header_path().display(),
            version_name(luks.version()),
            args.luks_type.as_deref().unwrap_or_default()
        ),
        Err(error) => format!(
            "{} is not a valid LUKS device: {:#}",
            paths.header_path().display(),
            anyhow::Error::from(error)
        ),
    };
    if args.verbose {
        eprintln!("rampart: {verdict}");
    }
    Err(QuietExit(1).into())
}

fn version_name(version: LuksVersion) -> &'static str {
    match version {
        LuksVersion::Luks1 => "LUKS1",
        LuksVersion::Luks2 => "LUKS2",
    }
}

/// `cryptsetup luksUUID`: print the UUID, or set a new one.
pub fn uuid(args: &UuidArgs) -> anyhow::Result<()> {
    let paths = paths(&args.volume);
    match &args.uuid {
        None => {
            let (_, luks) = load(&paths, false)?;
            outln!("{}", luks.uuid())?;
        }
        Some(new) => {
            let (header, mut luks) = load(&paths, true)?;
            luks.set_uuid(&header, new).map_err(luks_error)?;
        }
    }
    Ok(())
}
