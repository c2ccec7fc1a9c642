//! `clone`: a volume's plaintext under a new volume key, UUID and
//! keyslots, streamed to a file, a block device or standard output.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use anyhow::{bail, Context};
use rampart_crypto::SecretBytes;
use rampart_volume::{write_clone, BlockDevice, CloneHeader, FileDevice};

use crate::cli::CloneArgs;
use crate::commands::bind::{bind_new_volume, require_luks2};
use crate::commands::copy::{open_with, progress, readers, ticker};
use crate::commands::header::{confirm, paths, pbkdf_choice};
use crate::commands::keysource::{connect_kms, KeySource};
use crate::errors::{luks_error, map_open_error};
use crate::passphrase::Source;
use crate::UsageError;

pub fn clone(args: &CloneArgs) -> anyhow::Result<()> {
    let to_stdout = args.target == Path::new("-");
    if to_stdout && io::stdout().is_terminal() {
        return Err(UsageError("the clone is binary: redirect standard output".into()).into());
    }
    let stdin_twice = args.key.key_file.as_deref() == Some(Path::new("-"))
        && args.new_key_file.as_deref() == Some(Path::new("-"));
    if stdin_twice {
        return Err(UsageError(
            "standard input cannot hold both passphrases (--key-file - and --new-key-file -)"
                .into(),
        )
        .into());
    }
    let src_paths = paths(&args.volume);
    if !to_stdout && same_file(&args.target, &src_paths.data) {
        return Err(UsageError("DST is SRC: a clone needs a second device or file".into()).into());
    }
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase for SRC: ");
    let volume = open_with(&src_paths, &mut source, true, false)?;
    let src = volume.luks();
    let version = src.version();
    let kms = match &args.kms_key {
        Some(_) => {
            require_luks2(src, &src_paths)?;
            Some(connect_kms(&args.tokens.client)?)
        }
        None => None,
    };

    // The clone's passphrase: a new one, the source's, or (bound only) a
    // throwaway that is removed once the binding holds.
    let new_passphrase = match (&args.new_key_file, source.passphrase(), &args.kms_key) {
        (Some(_), _, _) => Some(
            Source::new(args.new_key_file.as_deref(), "Enter passphrase for the clone: ", true)
                .read()?,
        ),
        (None, Some(passphrase), None) => Some(passphrase.clone()),
        (None, _, Some(_)) => None,
        (None, None, None) => {
            return Err(UsageError(
                "SRC was opened through the key manager, so there is no passphrase to give the clone: use --new-key-file or --key"
                    .into(),
            )
            .into())
        }
    };
    let throwaway = match &new_passphrase {
        Some(_) => None,
        None => Some(random_passphrase()?),
    };
    let first = new_passphrase.as_ref().or(throwaway.as_ref()).map_or(&[][..], SecretBytes::expose);
    let pbkdf = pbkdf_choice(&args.pbkdf, version)?;
    let mut clone = CloneHeader::format(src, src_paths.header.is_none(), pbkdf, first)
        .map_err(map_open_error)?;
    if let (Some(kms), Some(key_name)) = (&kms, &args.kms_key) {
        let (io, luks, volume_key) = clone.parts();
        bind_new_volume(kms, io, luks, volume_key, key_name)?;
        if throwaway.is_some() {
            luks.remove_keyslot(io, 0).map_err(luks_error)?;
        }
    }
    let uuid = clone.uuid().to_owned();
    if let Some(source_segment) = src.integrity_segment().map_err(luks_error)? {
        if to_stdout {
            return Err(UsageError(
                "a volume with integrity is cloned in place (its tags lie between the data): \
                 give a file or block device as DST, not -"
                    .into(),
            )
            .into());
        }
        let area = volume.device().inner().len().saturating_sub(source_segment.offset);
        let offset = clone
            .parts()
            .1
            .integrity_segment()
            .map_err(luks_error)?
            .map_or(source_segment.offset, |s| s.offset);
        let target = open_target(&args.target, offset + area, args.batch_mode)?;
        if !target.metadata()?.file_type().is_block_device() {
            target
                .set_len(offset + area)
                .with_context(|| format!("cannot size {}", args.target.display()))?;
        }
        let target = FileDevice::from_file(target, false)
            .with_context(|| format!("cannot open {}", args.target.display()))?;
        let bar = progress(volume.device().len());
        let result =
            clone.write_integrity_clone(volume.device(), target, readers(), ticker(bar.as_ref()));
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        result.with_context(|| format!("cannot write the clone to {}", args.target.display()))?;
        report(&src_paths, &args.target, &uuid);
        return Ok(());
    }
    let plaintext = volume.device().len();
    let (header, layout, cipher) = clone.into_image(plaintext).map_err(map_open_error)?;
    let total = layout.offset + plaintext;

    let mut out: Box<dyn Write + Send> = if to_stdout {
        Box::new(io::stdout())
    } else {
        Box::new(open_target(&args.target, total, args.batch_mode)?)
    };
    let bar = progress(plaintext);
    let result = write_clone(
        volume.device(),
        &header,
        layout,
        cipher,
        &mut *out,
        readers(),
        ticker(bar.as_ref()),
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result.with_context(|| format!("cannot write the clone to {}", args.target.display()))?;
    drop(out);
    if !to_stdout {
        File::open(&args.target)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("cannot sync {}", args.target.display()))?;
    }
    report(&src_paths, &args.target, &uuid);
    Ok(())
}

/// Says on a terminal what was cloned to where.
fn report(source: &rampart_volume::VolumePaths, target: &Path, uuid: &str) {
    if io::stderr().is_terminal() {
        eprintln!(
            "Cloned {} to {}: UUID {uuid}, a new volume key.",
            source.header_path().display(),
            target.display()
        );
    }
}

/// A passphrase nobody will know, for a keyslot that is removed again.
fn random_passphrase() -> anyhow::Result<SecretBytes> {
    let mut bytes = SecretBytes::zeroed(32);
    rampart_crypto::fill_random(bytes.expose_mut())?;
    Ok(bytes)
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Opens DST for the clone: a block device large enough, or a file (new,
/// empty, or overwritten with --batch-mode), with the data-writer lock so
/// that nothing serves it meanwhile.
fn open_target(path: &Path, total: u64, batch_mode: bool) -> anyhow::Result<File> {
    let existing = std::fs::metadata(path).ok();
    let block = existing.as_ref().is_some_and(|m| m.file_type().is_block_device());
    if let Some(meta) = &existing {
        if !block && meta.len() > 0 && !batch_mode {
            let question = format!("{} is not empty; overwrite it with the clone?", path.display());
            if !confirm(&question)? {
                return Err(UsageError(format!(
                    "{} is not empty; add --batch-mode (-q) to overwrite it",
                    path.display()
                ))
                .into());
            }
        }
    }
    // Readable too: a clone with integrity reads back its superblock.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(!block)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    rampart_volume::lock::lock_data_writer(&file)
        .with_context(|| format!("{} is in use (served or being written)", path.display()))?;
    if block {
        let len = rampart_volume::FileDevice::from_file(file.try_clone()?, true)?.len();
        if len < total {
            bail!("{} has {len} bytes; the clone needs {total}", path.display());
        }
    } else {
        file.set_len(0).with_context(|| format!("cannot truncate {}", path.display()))?;
    }
    Ok(file)
}
