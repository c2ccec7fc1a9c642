//! Passphrases as cryptsetup takes them: `--key-file F` is the file's exact
//! bytes (`-` = standard input); otherwise a prompt without echo on a
//! terminal, or one line of standard input when it is not a terminal.

use std::fs::File;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::path::Path;

use anyhow::Context;
use rampart_crypto::SecretBytes;
use rustix::termios::{self, LocalModes, OptionalActions};

use crate::UsageError;

/// cryptsetup's default key file size limit.
const MAX_KEY_FILE: u64 = 8 << 20;

/// Where a passphrase comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    KeyFile(&'a Path),
    Prompt { text: &'a str, confirm: bool },
}

impl<'a> Source<'a> {
    pub fn new(key_file: Option<&'a Path>, text: &'a str, confirm: bool) -> Self {
        match key_file {
            Some(path) => Self::KeyFile(path),
            None => Self::Prompt { text, confirm },
        }
    }

    pub fn read(self) -> anyhow::Result<SecretBytes> {
        let secret = match self {
            Self::KeyFile(path) => read_key_file(path)?,
            Self::Prompt { text, confirm } => prompt(text, confirm)?,
        };
        if secret.is_empty() {
            return Err(UsageError("the passphrase is empty".into()).into());
        }
        Ok(secret)
    }
}

fn read_key_file(path: &Path) -> anyhow::Result<SecretBytes> {
    let mut bytes = Vec::new();
    let limit = MAX_KEY_FILE + 1;
    if path == Path::new("-") {
        io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)
            .context("cannot read the key from standard input")?;
    } else {
        File::open(path)
            .and_then(|f| f.take(limit).read_to_end(&mut bytes))
            .with_context(|| format!("cannot read key file {}", path.display()))?;
    }
    let secret = SecretBytes::new(bytes);
    if secret.len() as u64 > MAX_KEY_FILE {
        return Err(UsageError(format!(
            "key file {} is larger than {MAX_KEY_FILE} bytes",
            path.display()
        ))
        .into());
    }
    Ok(secret)
}

fn prompt(text: &str, confirm: bool) -> anyhow::Result<SecretBytes> {
    let first = prompt_once(text)?;
    if confirm && io::stdin().is_terminal() {
        let again = prompt_once("Verify passphrase: ")?;
        if first != again {
            return Err(UsageError("passphrases do not match".into()).into());
        }
    }
    Ok(first)
}

/// Reads one line; on a terminal, with echo turned off and restored.
fn prompt_once(text: &str) -> anyhow::Result<SecretBytes> {
    let stdin = io::stdin();
    let terminal = stdin.is_terminal();
    let saved = if terminal {
        eprint!("{text}");
        let _ = io::stderr().flush();
        let saved = termios::tcgetattr(&stdin).context("cannot read terminal settings")?;
        let mut quiet = saved.clone();
        quiet.local_modes.remove(LocalModes::ECHO);
        termios::tcsetattr(&stdin, OptionalActions::Now, &quiet)
            .context("cannot turn off terminal echo")?;
        Some(saved)
    } else {
        None
    };
    let mut line = Vec::new();
    let read = stdin.lock().take(MAX_KEY_FILE).read_until(b'\n', &mut line);
    if let Some(saved) = saved {
        let _ = termios::tcsetattr(&stdin, OptionalActions::Now, &saved);
        eprintln!();
    }
    let mut line = SecretBytes::new(line);
    read.context("cannot read the passphrase")?;
    let mut len = line.len();
    if line.expose().ends_with(b"\n") {
        len -= 1;
        if line.expose()[..len].ends_with(b"\r") {
            len -= 1;
        }
    }
    if len != line.len() {
        line = SecretBytes::from_slice(&line.expose()[..len]);
    }
    Ok(line)
}
