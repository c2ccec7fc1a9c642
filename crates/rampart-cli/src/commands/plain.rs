//! Headerless volumes on the command line: `--type plain` (cryptsetup's
//! plain mode) and `serve --one-time-key`. The flags are checked once
//! into [`Headerless`]; the key is then read by cryptsetup 2.6's rules
//! (src/cryptsetup.c `action_open_plain`, lib/utils.c
//! `crypt_keyfile_device_read`, lib/setup.c `process_key`):
//!
//! * `--key-file FILE` (not `-`) holds the key itself: exactly key-size
//!   bytes from `--keyfile-offset`; `--hash` and `--keyfile-size` do not
//!   apply (cryptsetup warns and ignores them).
//! * `--key-file -` is a passphrase of standard input's exact bytes (no
//!   newline handling; a prompt on a terminal), hashed by `--hash` (default ripemd160); with
//!   `--hash plain` exactly key-size bytes are read, else up to
//!   `--keyfile-size` (all of it, 8 MiB at most, without it).
//! * Without `--key-file`: a prompt on a terminal, or standard input up
//!   to its first newline (not part of the passphrase), hashed likewise.
//! * A passphrase that is not hashed is the key's first bytes, the rest
//!   zeros.

use std::fs::File;
use std::io::{self, BufRead, IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rampart_volume::plain::{self, KeyHash, PlainCipher, PlainError, PlainLayout};
use rampart_volume::{CryptDevice, FileDevice};

use crate::cli::{KeyArgs, PlainArgs, TokenArgs, VolumeArgs, VolumeTypeArg};
use crate::passphrase::Source;
use crate::UsageError;

/// cryptsetup's limit on a key file read to its end (8192 KiB).
const MAX_KEY_FILE: u64 = 8 << 20;

/// A headerless volume: how its data lies and where its key comes from.
#[derive(Debug)]
pub struct Headerless {
    pub layout: PlainLayout,
    pub key: HeaderlessKey,
}

/// Where a headerless volume's key comes from.
#[derive(Debug)]
pub enum HeaderlessKey {
    /// A random key per volume, made when it opens (`--one-time-key`).
    OneTime,
    /// A key file holding the key itself.
    KeyFile { path: PathBuf, offset: u64 },
    /// A passphrase, from standard input (`--key-file -`) or the prompt.
    Passphrase { stdin_file: bool, offset: u64, size: Option<u64>, hash: KeyHash },
}

impl Headerless {
    /// What a headerless volume is called, to clients.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self.key {
            HeaderlessKey::OneTime => "one-time key",
            _ => "plain",
        }
    }

    /// Checks the flags of a command that opens a volume's data: `None`
    /// for a LUKS volume (no plain flag given), else the settings.
    /// `data_offset` is the command's data-offset flag and its value.
    pub fn from_args(
        plain: &PlainArgs,
        (offset_flag, data_offset): (&str, Option<u64>),
        key: &KeyArgs,
        tokens: &TokenArgs,
        header: Option<&Path>,
        one_time: bool,
    ) -> anyhow::Result<Option<Self>> {
        let is_plain = plain.volume_type == Some(VolumeTypeArg::Plain);
        if one_time && plain.volume_type == Some(VolumeTypeArg::Luks) {
            return usage("--one-time-key serves a volume without a header: not --type luks");
        }
        if !is_plain && !one_time {
            let given = [
                ("--cipher", plain.cipher.is_some()),
                ("--key-size", plain.key_size.is_some()),
                ("--hash", plain.hash.is_some()),
                ("--keyfile-offset", plain.keyfile_offset.is_some()),
                ("--keyfile-size", plain.keyfile_size.is_some()),
                ("--skip", plain.skip.is_some()),
                ("--sector-size", plain.sector_size.is_some()),
                ("--iv-large-sectors", plain.iv_large_sectors),
                (offset_flag, data_offset.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                return usage(&format!(
                    "{flag} is for volumes without a header: add --type plain (a LUKS \
                     header says how its volume is encrypted)"
                ));
            }
            return Ok(None);
        }
        if header.is_some() {
            return usage("--header is for LUKS volumes: a plain volume has no header");
        }
        if key.key_slot.is_some() {
            return usage("--key-slot is for LUKS volumes: a plain volume has no keyslots");
        }
        if tokens.token_only {
            return usage("--token-only is for LUKS volumes: a plain volume has no tokens");
        }
        let default_cipher = if one_time { "aes-xts-plain64" } else { plain::DEFAULT_CIPHER };
        let cipher = PlainCipher::parse(plain.cipher.as_deref().unwrap_or(default_cipher))
            .map_err(refusal)?;
        let key_bits = plain.key_size.unwrap_or(if one_time {
            cipher.largest_key_bits()
        } else {
            plain::DEFAULT_KEY_BITS
        });
        cipher.check_key_bits(key_bits).map_err(refusal)?;
        let layout = PlainLayout {
            cipher,
            key_bytes: key_bits / 8,
            offset: data_offset.unwrap_or(0),
            skip: plain.skip.unwrap_or(0),
            sector_size: plain.sector_size.unwrap_or(if one_time { 4096 } else { 512 }),
            iv_large_sectors: plain.iv_large_sectors,
        };
        if let Some(size) = plain.keyfile_size {
            if size == 0 || size > MAX_KEY_FILE {
                return usage(&format!("--keyfile-size {size}: use 1 to {MAX_KEY_FILE} bytes"));
            }
        }
        let key = if one_time {
            for (flag, set) in [
                ("--hash", plain.hash.is_some()),
                ("--keyfile-offset", plain.keyfile_offset.is_some()),
                ("--keyfile-size", plain.keyfile_size.is_some()),
            ] {
                if set {
                    return usage(&format!("{flag} does not apply to --one-time-key"));
                }
            }
            HeaderlessKey::OneTime
        } else {
            Self::key_source(plain, key)?
        };
        Ok(Some(Self { layout, key }))
    }

    fn key_source(plain: &PlainArgs, key: &KeyArgs) -> anyhow::Result<HeaderlessKey> {
        let offset = plain.keyfile_offset.unwrap_or(0);
        match key.key_file.as_deref() {
            Some(path) if path != Path::new("-") => {
                // cryptsetup ignores both, with a warning, for a key file.
                if plain.hash.is_some() {
                    eprintln!(
                        "rampart: warning: --hash is ignored with a key file in plain mode \
                         (the file holds the key itself)"
                    );
                }
                if plain.keyfile_size.is_some() {
                    eprintln!(
                        "rampart: warning: --keyfile-size is ignored with a key file in plain \
                         mode (the key size is read)"
                    );
                }
                Ok(HeaderlessKey::KeyFile { path: path.to_owned(), offset })
            }
            stdin => {
                let hash = KeyHash::parse(plain.hash.as_deref().unwrap_or(plain::DEFAULT_HASH))
                    .map_err(refusal)?;
                Ok(HeaderlessKey::Passphrase {
                    stdin_file: stdin.is_some(),
                    offset,
                    size: plain.keyfile_size,
                    hash,
                })
            }
        }
    }

    /// The volume key, read (or made) as the key source says.
    pub fn volume_key(&self) -> anyhow::Result<SecretBytes> {
        let key_bytes = self.layout.key_bytes;
        match &self.key {
            HeaderlessKey::OneTime => Ok(rampart_crypto::random_secret(key_bytes)?),
            HeaderlessKey::KeyFile { path, offset } => read_key_file(path, *offset, key_bytes),
            HeaderlessKey::Passphrase { stdin_file, offset, size, hash } => {
                // A terminal is prompted, also for `--key-file -`.
                let passphrase = if io::stdin().is_terminal() {
                    if *offset > 0 {
                        return usage("--keyfile-offset cannot skip into a typed passphrase");
                    }
                    Source::new(None, "Enter passphrase: ", false).read()?
                } else if *stdin_file {
                    // Unhashed, the passphrase is read for the key size.
                    let size = if *hash == KeyHash::None { Some(key_bytes as u64) } else { *size };
                    read_input(*offset, size, false)?
                } else {
                    read_input(*offset, *size, true)?
                };
                hash.key(passphrase.expose(), key_bytes).map_err(refusal)
            }
        }
    }

    /// The plaintext of the volume `volume` (its data file or device).
    pub fn open(
        &self,
        volume: &VolumeArgs,
        read_only: bool,
    ) -> anyhow::Result<CryptDevice<FileDevice>> {
        let path = &volume.volume;
        let data = FileDevice::open(path, read_only)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let key = self.volume_key()?;
        self.layout
            .device(data, &key)
            .map_err(refusal)
            .with_context(|| format!("cannot use {}", path.display()))
    }
}

/// A plain key file: exactly `key_bytes` from `offset`, no hashing.
fn read_key_file(path: &Path, offset: u64, key_bytes: usize) -> anyhow::Result<SecretBytes> {
    let mut file =
        File::open(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    skip(&mut file, offset, &path.display().to_string())?;
    let mut key = SecretBytes::zeroed(key_bytes);
    let mut got = 0;
    while got < key_bytes {
        match file.read(&mut key.expose_mut()[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot read key file {}", path.display())))
            }
        }
    }
    if got < key_bytes {
        return usage(&format!(
            "key file {} has {got} bytes after --keyfile-offset {offset}, and a plain key \
             file holds the whole {key_bytes}-byte key",
            path.display()
        ));
    }
    Ok(key)
}

/// Discards `offset` bytes of `input` (a seek would not work on a pipe).
fn skip(input: &mut dyn Read, offset: u64, what: &str) -> anyhow::Result<()> {
    let skipped = io::copy(&mut input.take(offset), &mut io::sink())
        .with_context(|| format!("cannot read {what}"))?;
    if skipped < offset {
        return usage(&format!("--keyfile-offset {offset} lies beyond the end of {what}"));
    }
    Ok(())
}

/// A passphrase from standard input after `offset` bytes: `size` bytes
/// exactly, or all of it (at most 8 MiB); with `line`, up to the first
/// newline, which is dropped.
fn read_input(offset: u64, size: Option<u64>, line: bool) -> anyhow::Result<SecretBytes> {
    let what = "standard input";
    let stdin = io::stdin();
    let mut input = stdin.lock();
    skip(&mut input, offset, what)?;
    let limit = size.unwrap_or(MAX_KEY_FILE + 1);
    // The buffer never grows, so no copy of the passphrase is left behind
    // in a freed allocation.
    let mut bytes = Vec::with_capacity(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut newline = false;
    let read = if line {
        input.by_ref().take(limit).read_until(b'\n', &mut bytes).map(|_| {
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
                newline = true;
            }
        })
    } else {
        input.by_ref().take(limit).read_to_end(&mut bytes).map(drop)
    };
    let passphrase = SecretBytes::new(bytes);
    read.with_context(|| format!("cannot read the passphrase from {what}"))?;
    if passphrase.is_empty() && !newline {
        return usage("nothing to read on standard input");
    }
    match size {
        None if passphrase.len() as u64 > MAX_KEY_FILE => {
            usage(&format!("the passphrase on {what} is larger than {MAX_KEY_FILE} bytes"))
        }
        Some(size) if passphrase.len() as u64 != size => usage(&format!(
            "{what} has {} bytes of passphrase, and {size} were to be read",
            passphrase.len()
        )),
        _ => Ok(passphrase),
    }
}

fn refusal(error: PlainError) -> anyhow::Error {
    match error {
        PlainError::Refused(message) => UsageError(message).into(),
        other => other.into(),
    }
}

fn usage<T>(message: &str) -> anyhow::Result<T> {
    Err(UsageError(message.to_owned()).into())
}
