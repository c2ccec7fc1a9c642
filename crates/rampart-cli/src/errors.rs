//! The library crates' errors as the command reports them: the same
//! message, and exit status 2 for what is the user's to fix (a wrong
//! passphrase, a refusal, a bad setting) rather than 1.

use rampart_kms::client::ClientError;
use rampart_serve::ServeError;
use rampart_volume::format::FormatError;
use rampart_volume::plain::PlainError;
use rampart_volume::reencrypt_start::StartError;
use rampart_volume::{BackupError, VolumeError};

use crate::UsageError;

/// A wrong passphrase or an argument the volume cannot take (a keyslot out
/// of range or in use) is the user's to fix: exit status 2. Everything else
/// stays a runtime error.
pub fn luks_error(error: rampart_luks::Error) -> anyhow::Error {
    if rampart_unlock::luks_is_usage(&error) {
        UsageError(error.to_string()).into()
    } else {
        error.into()
    }
}

/// A wrong passphrase is exit status 2; anything else stays a runtime error.
pub fn map_open_error(error: VolumeError) -> anyhow::Error {
    match error {
        VolumeError::Luks(inner) => luks_error(inner),
        other => other.into(),
    }
}

/// A reencryption's start the request or the volume refuses is exit
/// status 2.
pub fn start_error(error: StartError) -> anyhow::Error {
    match error {
        StartError::Refused(message) => UsageError(message).into(),
        StartError::Volume(e) => map_open_error(e),
        other => other.into(),
    }
}

/// A format request the volume or its files refuse is exit status 2.
pub fn format_error(error: FormatError) -> anyhow::Error {
    match error {
        FormatError::Refused(message) => UsageError(message).into(),
        FormatError::Volume(e) => map_open_error(e),
        other => other.into(),
    }
}

/// A header backup that cannot be restored is exit status 2.
pub fn backup_error(error: BackupError) -> anyhow::Error {
    match error {
        BackupError::Refused(message) => UsageError(message).into(),
        other => other.into(),
    }
}

/// Errors the user can fix (refusals, bad input) exit 2; others 1.
pub fn map_client(error: ClientError) -> anyhow::Error {
    if rampart_unlock::client_is_usage(&error) {
        UsageError(error.to_string()).into()
    } else {
        anyhow::Error::new(error)
    }
}

/// Unlocking and binding errors, their causes kept as the chain of the
/// command's error.
pub fn unlock_error(error: rampart_unlock::Error) -> anyhow::Error {
    use rampart_unlock::Error;
    match error {
        Error::Context { context, source } => unlock_error(*source).context(context),
        Error::Luks(e) => luks_error(e),
        Error::KeyManager(e) => map_client(e),
        Error::Io(e) => e.into(),
        Error::Bundle(e) => {
            let usage = Error::Bundle(e.clone()).is_usage();
            let e = rampart_kms::KmsError::from(e);
            if usage {
                UsageError(e.to_string()).into()
            } else {
                e.into()
            }
        }
        other if other.is_usage() => UsageError(other.to_string()).into(),
        other => anyhow::anyhow!("{other}"),
    }
}

/// A server setup error the user must fix (exit 2), with its whole cause
/// chain.
pub fn nbd_error(error: rampart_nbd::NbdError) -> anyhow::Error {
    UsageError(rampart_serve::chain(&error)).into()
}

/// `rampart serve`'s errors, and those of the requests it answers.
pub fn serve_error(error: ServeError) -> anyhow::Error {
    match error {
        ServeError::Io(e) => e.into(),
        ServeError::Luks(e) => luks_error(e),
        ServeError::Volume(e) => map_open_error(e),
        ServeError::Unusable { path, source } => {
            map_open_error(source).context(format!("cannot use {}", path.display()))
        }
        ServeError::Nbd(e) => nbd_error(e),
        ServeError::MetricsListen { address, source } => {
            UsageError(format!("cannot listen on {address} (--metrics-listen): {source}")).into()
        }
        ServeError::KeyManager(e) => map_client(e),
        ServeError::Headerless { path, source: PlainError::Refused(message) } => {
            UsageError(format!("cannot use {}: {message}", path.display())).into()
        }
        ServeError::HeaderOfSeveral | ServeError::ExportNameTwice(_) => {
            UsageError(error.to_string()).into()
        }
        other => anyhow::Error::new(other),
    }
}

/// The errors of a reencryption handed to a server: a server that stopped
/// answering left a run to resume.
pub fn remote_error(error: ServeError) -> anyhow::Error {
    match error {
        ServeError::ServerStopped => {
            anyhow::anyhow!("{error}; run `rampart reencrypt --resume-only` to go on")
        }
        other => serve_error(other),
    }
}
