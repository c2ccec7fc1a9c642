//! The one error type of the crate. Messages carry paths, sizes and the
//! server's own words, never a key.

use std::io;
use std::path::PathBuf;

/// Why serving, a control request or a heartbeat setup failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A file or socket operation, with what it was for (`cannot open
    /// PATH`, `cannot listen on PATH`...).
    #[error("{context}")]
    IoAt {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A socket just bound is gone.
    #[error("{} vanished", .0.display())]
    Vanished(PathBuf),
    #[error(transparent)]
    Volume(#[from] rampart_volume::VolumeError),
    #[error(transparent)]
    Reencrypt(rampart_volume::ReencryptError),
    #[error(transparent)]
    Luks(#[from] rampart_luks::Error),
    /// The unlocked volume's data segment cannot be mapped.
    #[error("cannot use {}", path.display())]
    Unusable {
        path: PathBuf,
        #[source]
        source: rampart_volume::VolumeError,
    },
    /// Setting up the NBD server or a listener.
    #[error(transparent)]
    Nbd(#[from] rampart_nbd::NbdError),
    /// The metrics endpoint cannot listen on `address`.
    #[error("cannot listen on {address}")]
    MetricsListen {
        address: String,
        #[source]
        source: io::Error,
    },
    /// The heartbeat's client of the key manager cannot be set up.
    #[error(transparent)]
    KeyManager(#[from] rampart_kms_client::ClientError),
    /// A detached header names one volume's header: serving several
    /// volumes it cannot be.
    #[error("--header can be used with a single volume only")]
    HeaderOfSeveral,
    /// A headerless volume's settings do not fit its device.
    #[error("cannot use {}: {source}", path.display())]
    Headerless {
        path: PathBuf,
        #[source]
        source: rampart_volume::plain::PlainError,
    },
    /// Two volumes were given the same export name.
    #[error("export name '{0}' is used twice")]
    ExportNameTwice(String),
    /// The key manager's heartbeat closed every export, for this reason.
    #[error("every export was closed: {0}")]
    AllClosed(String),

    // Control requests, as the server refuses them.
    #[error("a malformed request")]
    MalformedRequest(#[source] serde_json::Error),
    #[error("a volume key of {0} bytes")]
    KeyTooLong(usize),
    #[error("the request ended early")]
    RequestEnded(#[source] io::Error),
    #[error("unknown request '{0}'")]
    UnknownRequest(String),
    #[error("a decryption takes the volume key and no new key")]
    DecryptKeys,
    #[error("no volume key")]
    NoVolumeKey,
    #[error("unknown hash '{0}'")]
    UnknownHash(String),
    #[error(
        "resilience {0} cannot protect a decryption that moves the data (checksum or journal), as in cryptsetup"
    )]
    ResilienceCannotMove(String),
    #[error(
        "{} is served read-only: stop the server (or serve it writable) to re-encrypt it",
        .0.display()
    )]
    ReadOnly(PathBuf),
    #[error(
        "{} is served with its header in {}: decrypt it with --header {} (the data stays where it is)",
        data.display(),
        header.display(),
        header.display()
    )]
    HeaderDetached { data: PathBuf, header: PathBuf },
    #[error("the new header's path {} is not absolute", .0.display())]
    HeaderNotAbsolute(PathBuf),
    #[error("{} is already being re-encrypted", .0.display())]
    AlreadyReencrypting(PathBuf),

    // Control requests, as the requester sees the server's answers.
    #[error("the server stopped answering (it may have been killed)")]
    ServerStopped,
    #[error("the server sent a line too long")]
    LineTooLong,
    #[error("lost the server")]
    LostServer(#[source] io::Error),
    #[error("the server sent a malformed answer")]
    MalformedAnswer(#[source] serde_json::Error),
    /// The server's own error message.
    #[error("the server: {0}")]
    Server(String),
    #[error("the server answered out of turn")]
    OutOfTurn,
    /// Another answer than the start of a decryption (its `Debug` form).
    #[error("the server answered {0} to a decryption's start")]
    UnexpectedAnswer(String),
}

/// `error` and its causes on one line, `outer: inner: innermost`.
#[must_use]
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_read_outer_to_inner() {
        let error = ServeError::RequestEnded(io::Error::new(io::ErrorKind::UnexpectedEof, "eof"));
        assert_eq!(chain(&error), "the request ended early: eof");
        let error = ServeError::from(io::Error::other("plain"));
        assert_eq!(chain(&error), "plain");
    }
}
