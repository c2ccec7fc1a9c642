//! The server side of the control socket of `rampart serve`, through which
//! `rampart reencrypt` re-encrypts a volume while it is served
//! (cryptsetup's online reencryption, where dm-crypt keeps serving the
//! device).
//!
//! A writable volume's server listens on `/run/rampart/control/UUID.sock`
//! (a directory only its owner may enter). `reencrypt` writes the
//! reencryption metadata itself, as it does offline, then connects and
//! sends one request: a JSON line, followed by the old and the new volume
//! key as raw bytes (none for the plaintext side of an encryption or a
//! decryption; see [`crate::protocol`]). The server checks both keys
//! against the header, puts a two-key layer in place of the volume's
//! single-key one and runs the reencryption on it while clients go on,
//! answering with JSON lines of progress and a final event. When the
//! connection closes early (the command was interrupted or killed) the run
//! stops at the next hotzone boundary, as an interrupted offline run does.
//!
//! A decryption that moves the data down over an attached header
//! (`reencrypt --decrypt --header NEWFILE`) cannot be started by the
//! command itself while clients write: the first data-offset bytes of
//! ciphertext are copied over the header and must not change before
//! NEWFILE records the move. The command sends a `decrypt-attached`
//! request instead, and the server does that step with every client
//! request held back, then serves the volume through NEWFILE; the run
//! itself is an ordinary `reencrypt` request.
//!
//! What a request does to the volume is a [`ControlTarget`]'s business
//! ([`crate::served::ServedVolume`] in `rampart serve`); this module only
//! speaks the protocol.

use std::io::{BufReader, Read};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rampart_crypto::SecretBytes;
use rampart_volume::Outcome;

use crate::error::{chain, ServeError};
use crate::protocol::{socket_path, DecryptAttached, Event, Request, RunOptions, CONTROL_DIR};

/// What the control socket acts on.
pub trait ControlTarget: Send + Sync + 'static {
    /// Runs the reencryption the header records with these keys,
    /// reporting `(done, total)` bytes; stops at the next hotzone boundary
    /// once `stop` is set.
    fn reencrypt(
        &self,
        run: RunOptions,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ServeError>;

    /// Starts the decryption of a volume with an attached header that
    /// moves its data down over it (`key` is its volume key).
    fn start_decrypt_attached(
        &self,
        request: &DecryptAttached,
        key: &SecretBytes,
    ) -> Result<(), ServeError>;
}

/// A bound control socket; the file goes when it is dropped, unless
/// another server has bound the path since.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    inode: (u64, u64),
}

fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if inode(&self.path) == Some(self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn io_at(context: String) -> impl FnOnce(std::io::Error) -> ServeError {
    move |source| ServeError::IoAt { context, source }
}

/// Binds the control socket of `target` (whose LUKS UUID is `uuid`) and
/// answers requests on a thread of its own. Two read-only servers of one
/// volume may run; the later one takes the socket over.
pub fn listen(uuid: &str, target: Arc<impl ControlTarget>) -> Result<ControlSocket, ServeError> {
    let parent = Path::new(CONTROL_DIR).parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .and_then(|()| std::fs::DirBuilder::new().recursive(true).mode(0o700).create(CONTROL_DIR))
        .map_err(io_at(format!("cannot create {CONTROL_DIR}")))?;
    // Keys pass through these sockets: only the owner may connect.
    std::fs::set_permissions(CONTROL_DIR, std::fs::Permissions::from_mode(0o700))
        .map_err(io_at(format!("cannot restrict {CONTROL_DIR}")))?;
    let path = socket_path(uuid);
    // A socket left by a server that was killed, or by a read-only one
    // (a writable server holds the data-writer lock: it is the only one).
    let _ = std::fs::remove_file(&path);
    let listener =
        UnixListener::bind(&path).map_err(io_at(format!("cannot listen on {}", path.display())))?;
    let inode = inode(&path).ok_or_else(|| ServeError::Vanished(path.clone()))?;
    std::thread::Builder::new()
        .name("rampart-control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let target = Arc::clone(&target);
                let _ = std::thread::Builder::new()
                    .name("rampart-reencrypt".into())
                    .spawn(move || answer(&*target, stream));
            }
        })
        .map_err(io_at("cannot start the control thread".into()))?;
    Ok(ControlSocket { path, inode })
}

/// Answers the one request of `stream`: progress lines, then a final
/// event (an error event when the request is refused or fails).
pub fn answer(target: &impl ControlTarget, mut stream: UnixStream) {
    let event = match serve_request(target, &mut stream) {
        Ok(event) => event,
        Err(e) => Event::Error { message: chain(&e) },
    };
    let _ = event.send(&mut stream);
}

fn serve_request(
    target: &impl ControlTarget,
    stream: &mut UnixStream,
) -> Result<Event, ServeError> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let (request, old_key, new_key) = Request::receive(&mut reader)?;
    match (request.op.as_str(), &request.decrypt_attached) {
        ("reencrypt", _) => {}
        ("decrypt-attached", Some(start)) => {
            if old_key.is_empty() || !new_key.is_empty() {
                return Err(ServeError::DecryptKeys);
            }
            target.start_decrypt_attached(start, &old_key)?;
            return Ok(Event::Initialised);
        }
        (op, _) => return Err(ServeError::UnknownRequest(op.to_owned())),
    }
    if old_key.is_empty() && new_key.is_empty() {
        return Err(ServeError::NoVolumeKey);
    }
    // The requester closing its end (interrupted, killed) stops the run
    // at the next hotzone boundary.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            while matches!(reader.read(&mut byte), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Relaxed);
        });
    }
    let mut total = 0;
    let mut progress = |done: u64, size: u64| {
        total = size;
        if (Event::Progress { done, total: size }).send(stream).is_err() {
            stop.store(true, Ordering::Relaxed);
        }
    };
    let outcome =
        target.reencrypt(request.run_options(), &old_key, &new_key, &stop, &mut progress)?;
    Ok(match outcome {
        Outcome::Stopped { done } => Event::Stopped { done, total },
        _ => Event::Finished { total },
    })
}
