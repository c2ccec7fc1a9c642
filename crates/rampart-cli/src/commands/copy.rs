//! `export` and `import`: whole-volume plaintext copies, like
//! `qemu-img convert` (the streams are `rampart_volume::stream`'s).

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use rampart_volume::stream::{self, StreamError};
use rampart_volume::{BlockDevice, DataAccess, FileDevice, SegmentDevice, Volume, VolumePaths};

use crate::cli::{ExportArgs, ImportArgs, KeyArgs, PlainArgs, TokenArgs, VolumeArgs};
use crate::commands::header::{load_released, paths};
use crate::commands::keysource::KeySource;
use crate::commands::plain::Headerless;
use crate::UsageError;

/// Readers (or writers) for a whole-volume stream: one per core.
pub(crate) fn readers() -> usize {
    rampart_bench::available_cores()
}

/// Loads the header of `paths`, gets the key from `source` and opens the
/// data segment (one with integrity without its journal when
/// `integrity_no_journal`).
pub fn open_with(
    paths: &VolumePaths,
    source: &mut KeySource<'_>,
    read_only: bool,
    integrity_no_journal: bool,
) -> anyhow::Result<Volume> {
    let (header, luks) = load_released(paths)?;
    let (_, volume_key) = source.unlock(&luks, &header, paths.header_path())?;
    let access = DataAccess { read_only, integrity_no_journal };
    Volume::with_key(paths, luks, &volume_key, access).map_err(map_open_error)
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

/// Advances the progress bar, when there is one.
pub(crate) fn ticker(bar: Option<&ProgressBar>) -> impl Fn(u64) + Sync + '_ {
    move |n| {
        if let Some(bar) = bar {
            bar.inc(n);
        }
    }
}

/// The plaintext of a LUKS volume (a bound token first, then the
/// passphrase) or, with `--type plain`, of a headerless one.
fn open_data(
    volume: &VolumeArgs,
    key: &KeyArgs,
    tokens: &TokenArgs,
    plain: &PlainArgs,
    data_offset: Option<u64>,
    access: DataAccess,
) -> anyhow::Result<SegmentDevice<FileDevice>> {
    let offset = ("--data-offset", data_offset);
    match Headerless::from_args(plain, offset, key, tokens, volume.header.as_deref(), false)? {
        Some(headerless) => Ok(SegmentDevice::Crypt(headerless.open(volume, access.read_only)?)),
        None => {
            let paths = paths(volume);
            let mut source = KeySource::new(key, tokens, "Enter passphrase: ");
            let volume =
                open_with(&paths, &mut source, access.read_only, access.integrity_no_journal)?;
            Ok(volume.into_device())
        }
    }
}

pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let access = DataAccess { read_only: true, integrity_no_journal: false };
    let device =
        &open_data(&args.volume, &args.key, &args.tokens, &args.plain, args.data_offset, access)?;
    let range =
        stream::export_range(device.len(), args.offset, args.length).map_err(stream_error)?;
    let mut out: Box<dyn Write> = if args.out == Path::new("-") {
        Box::new(io::stdout().lock())
    } else {
        Box::new(
            File::create(&args.out)
                .with_context(|| format!("cannot create {}", args.out.display()))?,
        )
    };
    let bar = progress(range.end - range.start);
    let result = stream::export(device, range, &mut out, readers(), ticker(bar.as_ref()));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        // The volume's own error says what could not be read, and where.
        Err(StreamError::Read(error)) => return Err(error.into()),
        // A reader that went away (`| head`) ends the command quietly in main.
        other => other
            .map_err(stream_error)
            .with_context(|| format!("cannot write {}", args.out.display()))?,
    };
    Ok(())
}

pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let stdin = args.input == Path::new("-");
    if stdin && args.key.key_file.as_deref() == Some(Path::new("-")) {
        return Err(UsageError(
            "standard input cannot hold both the key file (--key-file -) and the data (IN -)"
                .into(),
        )
        .into());
    }
    let (mut input, input_len): (Box<dyn Read + Send>, _) = if stdin {
        (Box::new(io::stdin()), None)
    } else {
        let file = File::open(&args.input)
            .with_context(|| format!("cannot open {}", args.input.display()))?;
        let len = file.metadata()?.len();
        (Box::new(file), Some(len))
    };
    let access = DataAccess { read_only: false, integrity_no_journal: args.integrity_no_journal };
    let device =
        &open_data(&args.volume, &args.key, &args.tokens, &args.plain, args.data_offset, access)?;
    let bar = progress(input_len.unwrap_or(device.len().saturating_sub(args.offset)));
    let name = args.input.display().to_string();
    let result =
        stream::import(&mut input, &name, input_len, device, args.offset, ticker(bar.as_ref()));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result.map_err(stream_error)?;
    Ok(())
}

/// A range or an input that does not fit is the user's to fix.
fn stream_error(error: StreamError) -> anyhow::Error {
    match error {
        StreamError::Refused(message) => UsageError(message).into(),
        // The io::Error itself, so that a reader gone away (`| head`) is
        // recognised in main.
        StreamError::Io(error) => error.into(),
        other => other.into(),
    }
}
