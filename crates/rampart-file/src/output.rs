//! Where an encryption's or decryption's output goes, so that a failure
//! leaves nothing half-written: a regular file is written under a
//! temporary name beside the target and renamed into place only on
//! success (a failure removes it and leaves an existing file untouched);
//! a device or a FIFO is written in place; `-` is standard output.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the output could not be set up or completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The target names no file (the user's to fix).
    #[error("{} is not a file name", .0.display())]
    NotAFileName(PathBuf),
    #[error("cannot open {}", .path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot create {}", .path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot use standard output")]
    Stdout(#[source] io::Error),
    #[error("cannot sync the output")]
    Sync(#[source] io::Error),
    #[error("cannot rename the output to {}", .path.display())]
    Rename { path: PathBuf, source: io::Error },
}

/// `-`: standard input or output.
#[must_use]
pub fn is_stdio(path: &Path) -> bool {
    path == Path::new("-")
}

/// Where the output goes: standard output, a file written in place (a
/// device or a FIFO), or a temporary file renamed on success.
#[derive(Debug)]
pub enum Output {
    Stdout,
    Direct(File),
    Temporary { file: File, temp: PathBuf, target: PathBuf },
}

impl Output {
    /// Opens the output for `path` (`-`: standard output).
    ///
    /// # Errors
    /// The target cannot be opened, or its temporary file created.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        if is_stdio(path) {
            return Ok(Self::Stdout);
        }
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.is_file() {
                let file = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|source| OutputError::Open { path: path.to_owned(), source })?;
                return Ok(Self::Direct(file));
            }
        }
        let name = path.file_name().ok_or_else(|| OutputError::NotAFileName(path.to_owned()))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".rampart-{}", std::process::id()));
        let temp = path.with_file_name(temp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|source| OutputError::Create { path: temp.clone(), source })?;
        Ok(Self::Temporary { file, temp, target: path.to_owned() })
    }

    /// The output is a file rather than standard output.
    #[must_use]
    pub fn is_file(&self) -> bool {
        !matches!(self, Self::Stdout)
    }

    /// Runs `work` on the writer; renames on success, removes on failure.
    ///
    /// # Errors
    /// `work`'s, or the output could not be completed.
    pub fn run<T, E: From<OutputError>>(
        self,
        work: impl FnOnce(&mut (dyn Write + Send)) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Self::Stdout => {
                // A duplicate of descriptor 1: large unbuffered writes, and
                // `Send` for the writer thread (a locked `Stdout` is not).
                let fd = io::stdout().as_fd().try_clone_to_owned().map_err(OutputError::Stdout)?;
                let mut out = File::from(fd);
                work(&mut out)
            }
            Self::Direct(mut file) => work(&mut file),
            Self::Temporary { mut file, temp, target } => {
                let result = work(&mut file).and_then(|value| {
                    file.sync_all().map_err(OutputError::Sync)?;
                    drop(file);
                    std::fs::rename(&temp, &target)
                        .map_err(|source| OutputError::Rename { path: target.clone(), source })?;
                    Ok(value)
                });
                if result.is_err() {
                    let _ = std::fs::remove_file(&temp);
                }
                result
            }
        }
    }
}
