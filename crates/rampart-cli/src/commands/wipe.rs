//! `wipe`: zeros through the key over a volume's whole data area, or
//! random bytes over its headers and keyslots.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use rampart_volume::{
    wipe_data, wipe_header_area, BlockDevice, FileDevice, SegmentDevice, VolumePaths,
};

use crate::cli::{VolumeArgs, WipeArgs};
use crate::commands::copy::{open_with, progress, readers};
use crate::commands::header::{confirm, load, paths};
use crate::commands::keysource::KeySource;
use crate::UsageError;

pub fn wipe(args: &WipeArgs) -> anyhow::Result<()> {
    let volume_args = VolumeArgs { volume: args.volume.clone(), header: args.header_file.clone() };
    let paths = paths(&volume_args);
    if args.header {
        wipe_header(&paths, args.batch_mode)
    } else {
        let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
        ask(
            &format!(
                "This overwrites all data of {} with zeros. Are you sure?",
                paths.data.display()
            ),
            args.batch_mode,
        )?;
        wipe_volume_data(&paths, &mut source)
    }
}

/// Zeros over the whole data area of an unlocked volume (also `format
/// --wipe`). Refused while anything else writes the volume.
pub fn wipe_volume_data(paths: &VolumePaths, source: &mut KeySource<'_>) -> anyhow::Result<()> {
    let volume = open_with(paths, source, false, true)
        .with_context(|| format!("cannot open {} for wiping", paths.data.display()))?;
    wipe_device(paths, volume.device())
}

/// Zeros over all of an open volume's plaintext, with a progress bar; a
/// volume with integrity gets sealed zeros in every sector, which then
/// pass their check.
pub fn wipe_device(paths: &VolumePaths, device: &SegmentDevice<FileDevice>) -> anyhow::Result<()> {
    let bar = progress(device.len());
    let show = |total: u64| {
        if let Some(bar) = &bar {
            bar.set_position(total);
        }
    };
    let done = AtomicU64::new(0);
    let result = match device {
        SegmentDevice::Authenticated(device) => device.wipe(&mut |total, _| show(total)),
        crypt => wipe_data(crypt, readers(), &|n| show(done.fetch_add(n, Ordering::Relaxed) + n)),
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result.with_context(|| format!("cannot wipe {}", paths.data.display()))?;
    if std::io::stderr().is_terminal() {
        eprintln!("Wiped {} bytes of {}.", device.len(), paths.data.display());
    }
    Ok(())
}

/// Random bytes over the whole header area (see
/// [`rampart_volume::wipe_header_area`]), once confirmed.
fn wipe_header(paths: &VolumePaths, batch_mode: bool) -> anyhow::Result<()> {
    let (lock, luks) = load(paths, true)?;
    ask(
        &format!(
            "This destroys every keyslot and both headers of {}; its data can never be decrypted again. Are you sure?",
            paths.header_path().display()
        ),
        batch_mode,
    )?;
    let end = wipe_header_area(paths, &luks)?;
    drop(lock);
    if std::io::stderr().is_terminal() {
        eprintln!(
            "Destroyed {end} bytes of header and keyslots on {}.",
            paths.header_path().display()
        );
    }
    Ok(())
}

fn ask(question: &str, batch_mode: bool) -> anyhow::Result<()> {
    if batch_mode || confirm(question)? {
        Ok(())
    } else {
        Err(UsageError("not confirmed; add --batch-mode (-q) to wipe without asking".into()).into())
    }
}
