//! `export` and `import`: whole-volume plaintext copies, like
//! `qemu-img convert`, with reading and writing overlapped on two threads.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;
use std::sync::mpsc;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use rampart_volume::{read_in_order, BlockDevice, Volume, VolumePaths};

use crate::cli::{ExportArgs, ImportArgs, KeyArgs, TokenArgs, VolumeArgs};
use crate::commands::header::{load_released, paths};
use crate::commands::keysource::KeySource;
use crate::UsageError;

const CHUNK: usize = 8 << 20;

/// Readers (or writers) for a whole-volume stream: one per core.
pub(crate) fn readers() -> usize {
    rampart_bench::available_cores()
}

/// Opens and unlocks a volume for data access: a bound token first, then
/// the passphrase.
pub fn open_volume(
    volume: &VolumeArgs,
    key: &KeyArgs,
    tokens: &TokenArgs,
    read_only: bool,
) -> anyhow::Result<Volume> {
    let paths = paths(volume);
    let mut source = KeySource::new(key, tokens, "Enter passphrase: ");
    open_with(&paths, &mut source, read_only)
}

/// Loads the header of `paths`, gets the key from `source` and opens the
/// data segment.
pub fn open_with(
    paths: &VolumePaths,
    source: &mut KeySource<'_>,
    read_only: bool,
) -> anyhow::Result<Volume> {
    let (header, luks) = load_released(paths)?;
    let (_, volume_key) = source.unlock(&luks, &header, paths.header_path())?;
    Volume::with_key(paths, luks, &volume_key, read_only).map_err(map_open_error)
}

pub use crate::errors::map_open_error;

pub(crate) fn progress(total: u64) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

/// Runs `produce` on a helper thread and `consume` here, with two buffers
/// in flight so reading and writing overlap. `produce` fills the buffer it
/// is given and returns `false` at the end.
fn pipeline(
    mut produce: impl FnMut(&mut Vec<u8>) -> anyhow::Result<bool> + Send,
    mut consume: impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<anyhow::Result<Vec<u8>>>(1);
        let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(2);
        for _ in 0..2 {
            let _ = empty_tx.send(Vec::with_capacity(CHUNK));
        }
        scope.spawn(move || {
            while let Ok(mut buffer) = empty_rx.recv() {
                match produce(&mut buffer) {
                    Ok(true) => {
                        if full_tx.send(Ok(buffer)).is_err() {
                            return;
                        }
                    }
                    Ok(false) => return,
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        for buffer in full_rx {
            let buffer = buffer?;
            consume(&buffer)?;
            if empty_tx.send(buffer).is_err() {
                break;
            }
        }
        Ok(())
    })
}

pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let volume = open_volume(&args.volume, &args.key, &args.tokens, true)?;
    let device = volume.device();
    let size = device.len();
    if args.offset > size {
        return Err(UsageError(format!(
            "--offset {} lies beyond the volume ({size} bytes)",
            args.offset
        ))
        .into());
    }
    let length = args.length.unwrap_or(size - args.offset);
    let end = args.offset.checked_add(length).filter(|&end| end <= size).ok_or_else(|| {
        UsageError(format!("--offset/--length reach beyond the volume ({size} bytes)"))
    })?;

    let mut out: Box<dyn Write> = if args.out == Path::new("-") {
        Box::new(io::stdout().lock())
    } else {
        Box::new(
            File::create(&args.out)
                .with_context(|| format!("cannot create {}", args.out.display()))?,
        )
    };
    let bar = progress(length);
    let result = read_in_order(device, args.offset, end, readers(), |data| {
        out.write_all(data)?;
        if let Some(bar) = &bar {
            bar.inc(data.len() as u64);
        }
        Ok(())
    })
    .map_err(anyhow::Error::from);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    // A reader that went away (`| head`) ends the command quietly in main.
    result
        .and_then(|()| out.flush().map_err(Into::into))
        .with_context(|| format!("cannot write {}", args.out.display()))
}

pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    if args.input == Path::new("-") && args.key.key_file.as_deref() == Some(Path::new("-")) {
        return Err(UsageError(
            "standard input cannot hold both the key file (--key-file -) and the data (IN -)"
                .into(),
        )
        .into());
    }
    let mut input: Box<dyn Read + Send> = if args.input == Path::new("-") {
        Box::new(io::stdin())
    } else {
        Box::new(
            File::open(&args.input)
                .with_context(|| format!("cannot open {}", args.input.display()))?,
        )
    };
    let input_len = if args.input == Path::new("-") {
        None
    } else {
        Some(std::fs::metadata(&args.input)?.len())
    };
    let volume = open_volume(&args.volume, &args.key, &args.tokens, false)?;
    let device = volume.device();
    let size = device.len();
    if args.offset > size {
        return Err(UsageError(format!(
            "--offset {} lies beyond the volume ({size} bytes)",
            args.offset
        ))
        .into());
    }
    let room = size - args.offset;
    if let Some(len) = input_len {
        if len > room {
            return Err(UsageError(format!(
                "{} ({len} bytes) does not fit in the volume ({room} bytes from offset {})",
                args.input.display(),
                args.offset
            ))
            .into());
        }
    }
    let bar = progress(input_len.unwrap_or(room));
    let produce = |buffer: &mut Vec<u8>| -> anyhow::Result<bool> {
        buffer.resize(CHUNK, 0);
        let mut filled = 0;
        while filled < CHUNK {
            match input.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("cannot read the input"),
            }
        }
        buffer.truncate(filled);
        Ok(filled > 0)
    };
    let mut position = args.offset;
    let result = pipeline(produce, |data| {
        if data.len() as u64 > size - position {
            return Err(UsageError(format!(
                "the input is larger than the volume ({room} bytes from offset {}); the first {} bytes were written",
                args.offset,
                position - args.offset
            ))
            .into());
        }
        device
            .write_at(data, position)
            .with_context(|| format!("cannot write the volume at byte {position}"))?;
        position += data.len() as u64;
        if let Some(bar) = &bar {
            bar.inc(data.len() as u64);
        }
        Ok(())
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result?;
    device.flush().context("cannot flush the volume")?;
    Ok(())
}
