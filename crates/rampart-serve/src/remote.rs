//! The requester's side of the control socket (see [`crate::control`]):
//! `rampart reencrypt` hands a served volume's reencryption to its server.

use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rampart_crypto::SecretBytes;
use rampart_volume::Outcome;

use crate::error::ServeError;
use crate::protocol::{socket_path, DecryptAttached, Event, Request, RunOptions, MAX_LINE};

/// Connects to the server of the volume with this UUID, if one is
/// serving it.
#[must_use]
pub fn connect(uuid: &str) -> Option<UnixStream> {
    UnixStream::connect(socket_path(uuid)).ok()
}

fn parse_event(line: &[u8]) -> Result<Event, ServeError> {
    serde_json::from_slice(line).map_err(ServeError::MalformedAnswer)
}

/// Hands the reencryption to the server at the other end of `stream` and
/// follows it: `progress` gets each report; `interrupted` set stops the
/// run at the next hotzone boundary.
pub fn reencrypt_remote(
    mut stream: UnixStream,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    run: RunOptions,
    interrupted: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Outcome, ServeError> {
    let request = Request {
        op: "reencrypt".into(),
        old_key_bytes: old_key.len(),
        new_key_bytes: new_key.len(),
        hotzone_size: run.hotzone_size,
        stop_after: run.stop_after,
        decrypt_attached: None,
    };
    request.send(&mut stream, old_key, new_key)?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut told_to_stop = false;
    let mut line = Vec::new();
    loop {
        if interrupted.load(Ordering::Relaxed) && !told_to_stop {
            stream.shutdown(std::net::Shutdown::Write)?;
            told_to_stop = true;
        }
        let room = MAX_LINE.saturating_sub(line.len() as u64) + 1;
        match reader.by_ref().take(room).read_until(b'\n', &mut line) {
            Ok(0) => return Err(ServeError::ServerStopped),
            Ok(_) if line.ends_with(b"\n") => {}
            Ok(_) if line.len() as u64 > MAX_LINE => return Err(ServeError::LineTooLong),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                continue
            }
            Err(e) => return Err(ServeError::LostServer(e)),
        }
        let event = parse_event(&line)?;
        line.clear();
        match event {
            Event::Progress { done, total } => progress(done, total),
            Event::Finished { .. } => return Ok(Outcome::Finished),
            Event::Stopped { done, .. } => return Ok(Outcome::Stopped { done }),
            Event::Error { message } => return Err(ServeError::Server(message)),
            Event::Initialised => return Err(ServeError::OutOfTurn),
        }
    }
}

/// Asks the server at the other end of `stream` to start decrypting its
/// volume (whose header is attached) by moving the data down over the
/// header, which goes to `start.header`; returns once the server serves
/// it through that file.
pub fn start_decrypt_attached_remote(
    mut stream: UnixStream,
    start: DecryptAttached,
    key: &SecretBytes,
) -> Result<(), ServeError> {
    let request = Request {
        op: "decrypt-attached".into(),
        old_key_bytes: key.len(),
        new_key_bytes: 0,
        hotzone_size: None,
        stop_after: None,
        decrypt_attached: Some(start),
    };
    request.send(&mut stream, key, &SecretBytes::new(Vec::new()))?;
    let mut line = Vec::new();
    BufReader::new(stream)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .map_err(ServeError::LostServer)?;
    if line.is_empty() {
        return Err(ServeError::ServerStopped);
    }
    match parse_event(&line)? {
        Event::Initialised => Ok(()),
        Event::Error { message } => Err(ServeError::Server(message)),
        other => Err(ServeError::UnexpectedAnswer(format!("{other:?}"))),
    }
}
