//! `encrypt` and `decrypt`: authenticated streaming encryption of files
//! and pipes (`rampart-file`), and `openssl enc` files for migration.
//!
//! Output files are written under a temporary name beside the target and
//! renamed into place only on success ([`rampart_file::output`]), so a
//! failure (a wrong key, a tampered segment, a full disk) removes the
//! partial output and leaves an existing file untouched. Standard output
//! gets only authenticated segments, and stops before the first that fails.

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rampart_file::openssl::{self, Cipher, Kdf};
use rampart_file::output::{is_stdio, Output, OutputError};
use rampart_file::{Identity, Passphrase, RawKey, Recipient, Summary};
use rampart_luks::LuksVersion;
use rampart_unlock::KmsKey;
use serde_json::json;

use crate::cli::{DecryptArgs, EncryptArgs};
use crate::commands::copy::{progress, ticker};
use crate::commands::header::pbkdf_choice;
use crate::errors::unlock_error;
use crate::passphrase::Source;
use crate::UsageError;

/// Library errors: tampering, wrong keys and bad formats exit 2.
fn file_error(error: rampart_file::Error) -> anyhow::Error {
    if error.is_data_error() {
        UsageError(error.to_string()).into()
    } else {
        error.into()
    }
}

fn read_raw_key(path: &Path) -> anyhow::Result<RawKey> {
    let key = Source::KeyFile(path).read()?;
    RawKey::new(key).map_err(|e| UsageError(format!("{}: {e}", path.display())).into())
}

/// The passphrase: `--key-file` or the prompt, which cannot share
/// standard input with the data.
fn read_passphrase(
    input: &Path,
    key_file: Option<&Path>,
    confirm: bool,
) -> anyhow::Result<SecretBytes> {
    if is_stdio(input) && key_file.is_none_or(is_stdio) {
        return Err(UsageError(
            "standard input carries the data: give the passphrase with --key-file FILE".into(),
        )
        .into());
    }
    Source::new(key_file, "Enter passphrase: ", confirm).read()
}

/// Opens the output; a target that names no file is the user's to fix.
fn create_output(path: &Path) -> anyhow::Result<Output> {
    Output::create(path).map_err(|e| match e {
        OutputError::NotAFileName(_) => UsageError(e.to_string()).into(),
        other => other.into(),
    })
}

/// Opens the input; returns it and its size when it is a regular file.
fn open_input(path: &Path) -> anyhow::Result<(Box<dyn Read + Send>, Option<u64>)> {
    if is_stdio(path) {
        return Ok((Box::new(io::stdin()), None));
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let meta = file.metadata()?;
    let size = meta.is_file().then_some(meta.len());
    Ok((Box::new(file), size))
}

fn print_summary(to_stdout: bool, value: &serde_json::Value) -> std::io::Result<()> {
    if to_stdout {
        outln!("{value}")
    } else {
        eprintln!("{value}");
        Ok(())
    }
}

fn summary_json(
    op: &str,
    summary: &Summary,
    started: Instant,
    extra: serde_json::Value,
) -> serde_json::Value {
    let seconds = started.elapsed().as_secs_f64();
    let mut value = json!({
        "operation": op,
        "plaintext_bytes": summary.plaintext_bytes,
        "ciphertext_bytes": summary.ciphertext_bytes,
        "segments": summary.segments,
        "seconds": seconds,
        "mib_per_s": summary.mib_per_second(seconds),
    });
    if let (Some(map), serde_json::Value::Object(more)) = (value.as_object_mut(), extra) {
        map.extend(more);
    }
    value
}

pub fn encrypt(args: &EncryptArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let segment_size = rampart_file::new_segment_size(args.segment_size).ok_or_else(|| {
        UsageError(format!("--segment-size {} is outside 4K..=8M", args.segment_size))
    })?;
    if is_stdio(&args.output) && io::stdout().is_terminal() {
        return Err(UsageError(
            "refusing to write ciphertext to a terminal (use -o FILE or a pipe)".into(),
        )
        .into());
    }
    let mut recipients: Vec<Box<dyn Recipient + '_>> = Vec::new();
    if let Some(path) = &args.keys.raw_key_file {
        recipients.push(Box::new(read_raw_key(path)?));
    }
    if let Some(key) = &args.kms_key {
        if args.client.bundle.is_none() {
            return Err(UsageError(
                "--key needs a client bundle: --kms BUNDLE or $RAMPART_KMS".into(),
            )
            .into());
        }
        recipients.push(Box::new(KmsKey::recipient(args.client.bundle.clone(), key.clone())));
    }
    if args.keys.key_file.is_some() || recipients.is_empty() {
        let passphrase = read_passphrase(&args.input, args.keys.key_file.as_deref(), true)?;
        let choice = pbkdf_choice(&args.pbkdf, LuksVersion::Luks2)?;
        let cost = rampart_unlock::passphrase_cost(&choice).map_err(unlock_error)?;
        recipients.push(Box::new(Passphrase::new(passphrase, cost)));
    }
    let (mut input, size) = open_input(&args.input)?;
    let output = create_output(&args.output)?;
    let to_file = output.is_file();
    let bar = size.and_then(progress);
    let on_progress = ticker(bar.as_ref());
    let refs: Vec<&dyn Recipient> =
        recipients.iter().map(|r| r.as_ref() as &dyn Recipient).collect();
    let summary = output.run(|out| {
        rampart_file::encrypt(&mut *input, out, &refs, segment_size, &on_progress)
            .map_err(file_error)
    })?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if args.json {
        let names: Vec<String> = recipients.iter().map(|r| r.describe()).collect();
        print_summary(
            to_file,
            &summary_json(
                "encrypt",
                &summary,
                started,
                json!({"segment_size": segment_size, "recipients": names}),
            ),
        )?;
    }
    Ok(())
}

pub fn decrypt(args: &DecryptArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    if let Some(cipher) = &args.openssl {
        return decrypt_openssl(args, cipher, started);
    }
    let mut identities: Vec<Box<dyn Identity + '_>> = Vec::new();
    if let Some(path) = &args.keys.raw_key_file {
        identities.push(Box::new(read_raw_key(path)?));
    }
    if args.client.bundle.is_some() {
        identities.push(Box::new(KmsKey::identity(args.client.bundle.clone())));
    }
    if args.keys.key_file.is_some() || identities.is_empty() {
        let passphrase = read_passphrase(&args.input, args.keys.key_file.as_deref(), false)?;
        identities.push(Box::new(Passphrase::opening(passphrase)));
    }
    let refs: Vec<&dyn Identity> = identities.iter().map(|i| i.as_ref() as &dyn Identity).collect();
    let ranged = args.offset.is_some() || args.length.is_some();
    let (offset, length) = (args.offset.unwrap_or(0), args.length.unwrap_or(u64::MAX));
    if ranged && is_stdio(&args.input) {
        return Err(UsageError(
            "--offset/--length need a seekable input file, not standard input".into(),
        )
        .into());
    }
    // The output is created only once the key is recovered.
    let to_file = !is_stdio(&args.output);
    let (summary, opened_by) = if is_stdio(&args.input) {
        let mut input = io::stdin();
        let opened = rampart_file::open(&mut input, &refs).map_err(file_error)?;
        let output = create_output(&args.output)?;
        let summary = output.run(|out| {
            let mut input = io::stdin();
            opened.decrypt(&mut input, out, &|_| {}).map_err(file_error)
        })?;
        (summary, opened.opened_by)
    } else {
        let mut file = File::open(&args.input)
            .with_context(|| format!("cannot open {}", args.input.display()))?;
        let opened = rampart_file::open(&mut file, &refs)
            .map_err(file_error)
            .with_context(|| args.input.display().to_string())?;
        let len = file.metadata()?.len();
        let total = opened.plaintext_len(len).map_err(file_error)?;
        let output = create_output(&args.output)?;
        let bar = progress(total.saturating_sub(offset).min(length));
        let on_progress = ticker(bar.as_ref());
        let summary = output.run(|out| {
            if ranged {
                opened.decrypt_range(&mut file, offset, length, out, &on_progress)
            } else {
                opened.decrypt(&mut file, out, &on_progress)
            }
            .map_err(file_error)
        })?;
        if let Some(bar) = &bar {
            bar.finish_and_clear();
        }
        (summary, opened.opened_by)
    };
    if args.json {
        print_summary(
            to_file,
            &summary_json("decrypt", &summary, started, json!({"opened_by": opened_by})),
        )?;
    }
    Ok(())
}

fn decrypt_openssl(args: &DecryptArgs, cipher_name: &str, started: Instant) -> anyhow::Result<()> {
    let cipher = Cipher::parse(cipher_name).map_err(UsageError)?;
    let kdf = Kdf::from_options(args.md.as_deref(), args.pbkdf2, args.iter).map_err(UsageError)?;
    if args.offset.is_some() || args.length.is_some() || args.keys.raw_key_file.is_some() {
        return Err(UsageError(
            "--openssl takes a passphrase only, and no --offset/--length".into(),
        )
        .into());
    }
    let passphrase = read_passphrase(&args.input, args.keys.key_file.as_deref(), false)?;
    eprintln!(
        "rampart: warning: openssl enc files are not authenticated: modifications are not detected (re-encrypt with `rampart encrypt`)"
    );
    let (mut input, size) = open_input(&args.input)?;
    let output = create_output(&args.output)?;
    let to_file = output.is_file();
    let bar = size.and_then(progress);
    let on_progress = ticker(bar.as_ref());
    let written = output.run(|out| {
        openssl::decrypt(passphrase.expose(), cipher, kdf, &mut *input, out, &on_progress)
            .map_err(file_error)
    })?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if args.json {
        let summary =
            Summary { plaintext_bytes: written, ciphertext_bytes: size.unwrap_or(0), segments: 0 };
        print_summary(
            to_file,
            &summary_json("decrypt-openssl", &summary, started, json!({"cipher": cipher_name})),
        )?;
    }
    Ok(())
}
