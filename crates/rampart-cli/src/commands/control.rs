//! The control socket of `rampart serve`, through which `rampart
//! reencrypt` re-encrypts a volume while it is served (cryptsetup's online
//! reencryption, where dm-crypt keeps serving the device).
//!
//! A writable volume's server listens on `/run/rampart/control/UUID.sock`
//! (a directory only its owner may enter). `reencrypt` writes the
//! reencryption metadata itself, as it does offline, then connects and
//! sends one request: a JSON line, followed by the old and the new volume
//! key as raw bytes (none for the plaintext side of an encryption or a
//! decryption). The server checks both keys against the header, puts
//! a [`ReencryptingDevice`] in place of the volume's single-key layer and
//! runs the reencryption on it while clients go on, answering with JSON
//! lines of progress and a final event. When the connection closes early
//! (the command was interrupted or killed) the run stops at the next
//! hotzone boundary, as an interrupted offline run does.
//!
//! A decryption that moves the data down over an attached header
//! (`reencrypt --decrypt --header NEWFILE`) cannot be started by the
//! command itself while clients write: the first data-offset bytes of
//! ciphertext are copied over the header and must not change before
//! NEWFILE records the move. The command sends a `decrypt-attached`
//! request instead, and the server does that step with every client
//! request held back (about as long as copying the data offset and
//! writing the header take), then serves the volume through NEWFILE; the
//! run itself is an ordinary `reencrypt` request.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use rampart_crypto::HashAlg;
use rampart_crypto::SecretBytes;
use rampart_luks::{PbkdfChoice, Resilience};
use rampart_volume::reencrypt::{start_decrypt_shift_on, SharedDevice};
use rampart_volume::{
    segment_device, BlockDevice, Outcome, ReencryptError, ReencryptOptions, ReencryptingDevice,
    Reencryption, ReplaceableDevice, VolumePaths,
};
use serde::{Deserialize, Serialize};

/// Where servers put their control sockets.
pub const CONTROL_DIR: &str = "/run/rampart/control";

/// The longest request line and the largest key accepted.
const MAX_LINE: u64 = 4096;
const MAX_KEY: usize = 512;

/// The control socket of the volume with this LUKS UUID.
#[must_use]
pub fn socket_path(uuid: &str) -> PathBuf {
    Path::new(CONTROL_DIR).join(format!("{uuid}.sock"))
}

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    op: String,
    old_key_bytes: usize,
    new_key_bytes: usize,
    hotzone_size: Option<u64>,
    stop_after: Option<u64>,
    #[serde(default)]
    decrypt_attached: Option<DecryptAttached>,
}

/// A `decrypt-attached` request: how to start moving the data of a volume
/// with an attached header down over it (see
/// [`rampart_volume::reencrypt::start_decrypt_shift`]).
#[derive(Debug, Serialize, Deserialize)]
pub struct DecryptAttached {
    /// The header file to create: absolute, since the server's working
    /// directory is not the requester's.
    pub header: PathBuf,
    /// `checksum` (with its hash) or `journal`.
    pub resilience: String,
    pub resilience_hash: Option<String>,
    /// The hash of the reencryption digest, and whether its PBKDF2 cost
    /// is the minimum (the requester forced the KDF costs).
    pub digest_hash: String,
    pub quick_digest: bool,
}

impl DecryptAttached {
    fn resilience(&self) -> anyhow::Result<Resilience> {
        let hash =
            |name: &str| HashAlg::from_name(name).with_context(|| format!("unknown hash '{name}'"));
        Ok(match self.resilience.as_str() {
            "checksum" => Resilience::Checksum {
                hash: hash(self.resilience_hash.as_deref().unwrap_or("sha256"))?,
                // The moved chunk's checksum blocks, whatever the sector
                // size, as cryptsetup writes them.
                block_size: 4096,
            },
            "journal" => Resilience::Journal,
            other => anyhow::bail!(
                "resilience {other} cannot protect a decryption that moves the data (checksum or journal), as in cryptsetup"
            ),
        })
    }

    fn pbkdf(&self) -> anyhow::Result<PbkdfChoice> {
        let hash = HashAlg::from_name(&self.digest_hash)
            .with_context(|| format!("unknown hash '{}'", self.digest_hash))?;
        Ok(PbkdfChoice {
            hash,
            // Only whether the cost is forced matters to the digest.
            forced_iterations: self.quick_digest.then_some(1000),
            ..PbkdfChoice::default()
        })
    }
}

/// One line of a server's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Progress {
        done: u64,
        total: u64,
    },
    Finished {
        total: u64,
    },
    Stopped {
        done: u64,
        total: u64,
    },
    /// A `decrypt-attached` request's step is done: the volume is served
    /// through the new header, its decryption recorded there.
    Initialised,
    Error {
        message: String,
    },
}

/// A volume `serve` writes, with what an online reencryption needs.
pub struct ServedVolume {
    /// Where the header is: a decryption moving the data over an attached
    /// header takes it to a file of its own.
    paths: Mutex<VolumePaths>,
    /// The data device, opened once (the data-writer lock is on it).
    raw: SharedDevice,
    /// What the export serves.
    device: Arc<ReplaceableDevice>,
    /// The two-key layer while a reencryption is under way.
    reencrypting: Mutex<Option<Arc<ReencryptingDevice>>>,
    /// Served read-only: a reencryption is refused (and, since the socket
    /// answers, `reencrypt` does not re-encrypt offline under the server).
    read_only: bool,
    /// Unlocked through a key-manager binding: its key and the version the
    /// heartbeat reports, moved to the newest binding of that key when a
    /// reencryption (a rebind) finishes.
    binding: Mutex<Option<(String, Arc<AtomicU32>)>>,
}

impl ServedVolume {
    #[must_use]
    pub fn new(
        paths: VolumePaths,
        raw: SharedDevice,
        device: Arc<dyn BlockDevice>,
        reencrypting: Option<Arc<ReencryptingDevice>>,
        read_only: bool,
    ) -> Self {
        Self {
            paths: Mutex::new(paths),
            raw,
            device: Arc::new(ReplaceableDevice::new(device)),
            reencrypting: Mutex::new(reencrypting),
            read_only,
            binding: Mutex::new(None),
        }
    }

    /// The volume was unlocked through a binding of key `key`: after a
    /// rebind, `version` follows the binding of the new volume key.
    pub fn follow_binding(&self, key: &str, version: Arc<AtomicU32>) {
        *self.binding.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((key.to_owned(), version));
    }

    /// After a finished reencryption: the newest version of the followed
    /// key among the volume's bindings, which now all belong to the new
    /// volume key (the old ones were removed with the old keyslots).
    fn update_binding(&self, luks: &rampart_luks::Luks) {
        let binding = self.binding.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((key, version)) = binding.as_ref() else {
            return;
        };
        let newest = crate::commands::keysource::bound_tokens(luks)
            .into_iter()
            .filter_map(|(_, t)| t.ok())
            .filter(|t| luks.active_keyslots().contains(&t.slot) && &t.key == key)
            .map(|t| t.key_version)
            .max();
        if let Some(newest) = newest {
            version.store(newest, Ordering::Relaxed);
        }
    }

    fn paths(&self) -> VolumePaths {
        self.paths.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The device to export.
    #[must_use]
    pub fn device(&self) -> Arc<dyn BlockDevice> {
        Arc::clone(&self.device) as Arc<dyn BlockDevice>
    }

    /// Runs the reencryption the header records, on the served device.
    fn reencrypt(
        &self,
        request: &Request,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> anyhow::Result<Outcome> {
        let paths = self.paths();
        self.refuse_read_only(&paths)?;
        // Checks both keys against the header, and holds cryptsetup's
        // reencryption lock for the run.
        let job = Reencryption::open_served(&paths, Arc::clone(&self.raw), old_key, new_key)?;
        let device = {
            let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
            match &*slot {
                Some(device) => Arc::clone(device),
                None => {
                    let (_, luks, _) = paths.load_released()?;
                    let device = Arc::new(ReencryptingDevice::on(
                        Arc::clone(&self.raw),
                        &luks,
                        old_key,
                        new_key,
                    )?);
                    self.device.replace(Arc::clone(&device) as Arc<dyn BlockDevice>);
                    *slot = Some(Arc::clone(&device));
                    device
                }
            }
        };
        let options = ReencryptOptions {
            hotzone_size: request.hotzone_size,
            stop_after: request.stop_after,
            crash_after: None,
            serving: Some(device),
        };
        let outcome = job.run(&options, stop, progress).map_err(|e| match e {
            ReencryptError::Volume(e) => anyhow::Error::from(e),
            other => other.into(),
        })?;
        if outcome == Outcome::Finished {
            // One key again: back to the plain layer.
            let (_, luks, _) = paths.load_released()?;
            // The clients keep the size they know: a data shift leaves the
            // final segment larger than the data was (its last bytes
            // random), which a server started now would serve.
            let len = self.device.len();
            let decrypted = luks.data_map()?.iter().all(|piece| piece.crypt.is_none());
            let single = if decrypted {
                None
            } else {
                Some(segment_device(Arc::clone(&self.raw), &luks, new_key)?)
            };
            let plain: Arc<dyn BlockDevice> = match single {
                Some(device) if device.len() == len => Arc::new(device),
                _ => Arc::new(ReencryptingDevice::mapped(
                    Arc::clone(&self.raw),
                    &luks,
                    old_key,
                    new_key,
                    len,
                )?),
            };
            self.update_binding(&luks);
            let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
            self.device.replace(plain);
            *slot = None;
        }
        Ok(outcome)
    }

    fn refuse_read_only(&self, paths: &VolumePaths) -> anyhow::Result<()> {
        if self.read_only {
            anyhow::bail!(
                "{} is served read-only: stop the server (or serve it writable) to re-encrypt it",
                paths.data.display()
            );
        }
        Ok(())
    }

    /// Starts the decryption of a volume with an attached header that
    /// moves its data down over it, while no client request runs (see the
    /// module documentation), and serves it from then on through the new
    /// header with both pieces of the map.
    fn start_decrypt_attached(
        &self,
        request: &DecryptAttached,
        key: &SecretBytes,
    ) -> anyhow::Result<()> {
        let paths = self.paths();
        self.refuse_read_only(&paths)?;
        if let Some(header) = &paths.header {
            anyhow::bail!(
                "{} is served with its header in {}: decrypt it with --header {} (the data stays where it is)",
                paths.data.display(),
                header.display(),
                header.display()
            );
        }
        if !request.header.is_absolute() {
            anyhow::bail!("the new header's path {} is not absolute", request.header.display());
        }
        let resilience = request.resilience()?;
        let pbkdf = request.pbkdf()?;
        let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            anyhow::bail!("{} is already being re-encrypted", paths.data.display());
        }
        let detached = VolumePaths::new(&paths.data, Some(&request.header));
        let started = self.device.replace_with(|_| {
            start_decrypt_shift_on(
                &*self.raw,
                &paths.data,
                &request.header,
                key,
                resilience,
                &pbkdf,
            )?;
            let (_, luks, _) = detached.load_released()?;
            let device = Arc::new(ReencryptingDevice::on(
                Arc::clone(&self.raw),
                &luks,
                key,
                &SecretBytes::new(Vec::new()),
            )?);
            *slot = Some(Arc::clone(&device));
            Ok::<_, anyhow::Error>(device as Arc<dyn BlockDevice>)
        });
        // Past the copy over the attached header, the volume's header is
        // the new file, even when a later step failed (it then still
        // describes the volume as it was, which the current layer serves).
        if started.is_ok() || (paths.load_released().is_err() && detached.load_released().is_ok()) {
            *self.paths.lock().unwrap_or_else(PoisonError::into_inner) = detached;
        }
        started
    }
}

/// A bound control socket; the file goes when it is dropped, unless
/// another server has bound the path since.
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

/// Binds the control socket of `volume` (whose LUKS UUID is `uuid`) and
/// answers requests on a thread of its own. Two read-only servers of one
/// volume may run; the later one takes the socket over.
pub fn listen(uuid: &str, volume: Arc<ServedVolume>) -> anyhow::Result<ControlSocket> {
    let parent = Path::new(CONTROL_DIR).parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .and_then(|()| std::fs::DirBuilder::new().recursive(true).mode(0o700).create(CONTROL_DIR))
        .with_context(|| format!("cannot create {CONTROL_DIR}"))?;
    // Keys pass through these sockets: only the owner may connect.
    std::fs::set_permissions(CONTROL_DIR, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot restrict {CONTROL_DIR}"))?;
    let path = socket_path(uuid);
    // A socket left by a server that was killed, or by a read-only one
    // (a writable server holds the data-writer lock: it is the only one).
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    let inode = inode(&path).with_context(|| format!("{} vanished", path.display()))?;
    std::thread::Builder::new()
        .name("rampart-control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let volume = Arc::clone(&volume);
                let _ = std::thread::Builder::new()
                    .name("rampart-reencrypt".into())
                    .spawn(move || answer(&volume, stream));
            }
        })
        .context("cannot start the control thread")?;
    Ok(ControlSocket { path, inode })
}

fn send(stream: &mut UnixStream, event: &Event) -> io::Result<()> {
    let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

fn answer(volume: &ServedVolume, mut stream: UnixStream) {
    let event = match serve_request(volume, &mut stream) {
        Ok(event) => event,
        Err(e) => Event::Error { message: format!("{e:#}") },
    };
    let _ = send(&mut stream, &event);
}

/// A volume key of `len` bytes; 0 for the plaintext side of an
/// encryption or a decryption (the header says which side has no key).
fn read_key(reader: &mut impl Read, len: usize) -> anyhow::Result<SecretBytes> {
    if len > MAX_KEY {
        anyhow::bail!("a volume key of {len} bytes");
    }
    let mut key = SecretBytes::zeroed(len);
    reader.read_exact(key.expose_mut()).context("the request ended early")?;
    Ok(key)
}

fn serve_request(volume: &ServedVolume, stream: &mut UnixStream) -> anyhow::Result<Event> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = Vec::new();
    (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
    let request: Request = serde_json::from_slice(&line).context("a malformed request")?;
    let old_key = read_key(&mut reader, request.old_key_bytes)?;
    let new_key = read_key(&mut reader, request.new_key_bytes)?;
    match (request.op.as_str(), &request.decrypt_attached) {
        ("reencrypt", _) => {}
        ("decrypt-attached", Some(start)) => {
            if old_key.is_empty() || !new_key.is_empty() {
                anyhow::bail!("a decryption takes the volume key and no new key");
            }
            volume.start_decrypt_attached(start, &old_key)?;
            return Ok(Event::Initialised);
        }
        (op, _) => anyhow::bail!("unknown request '{op}'"),
    }
    if old_key.is_empty() && new_key.is_empty() {
        anyhow::bail!("no volume key");
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
        if send(stream, &Event::Progress { done, total: size }).is_err() {
            stop.store(true, Ordering::Relaxed);
        }
    };
    let outcome = volume.reencrypt(&request, &old_key, &new_key, &stop, &mut progress)?;
    Ok(match outcome {
        Outcome::Stopped { done } => Event::Stopped { done, total },
        _ => Event::Finished { total },
    })
}

/// Connects to the server of the volume with this UUID, if one is
/// serving it.
#[must_use]
pub fn connect(uuid: &str) -> Option<UnixStream> {
    UnixStream::connect(socket_path(uuid)).ok()
}

/// Hands the reencryption to the server at the other end of `stream` and
/// follows it: `progress` gets each report; `interrupted` set stops the
/// run at the next hotzone boundary.
pub fn reencrypt_remote(
    mut stream: UnixStream,
    old_key: &SecretBytes,
    new_key: &SecretBytes,
    hotzone_size: Option<u64>,
    stop_after: Option<u64>,
    interrupted: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Outcome> {
    let request = Request {
        op: "reencrypt".into(),
        old_key_bytes: old_key.len(),
        new_key_bytes: new_key.len(),
        hotzone_size,
        stop_after,
        decrypt_attached: None,
    };
    let mut message = serde_json::to_vec(&request)?;
    message.push(b'\n');
    stream.write_all(&message)?;
    stream.write_all(old_key.expose())?;
    stream.write_all(new_key.expose())?;
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut told_to_stop = false;
    let mut line = Vec::new();
    loop {
        if interrupted.load(Ordering::Relaxed) && !told_to_stop {
            stream.shutdown(std::net::Shutdown::Write)?;
            told_to_stop = true;
        }
        match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) => anyhow::bail!("the server stopped answering (it may have been killed); run `rampart reencrypt --resume-only` to go on"),
            Ok(_) if line.ends_with(b"\n") => {}
            Ok(_) if line.len() as u64 > MAX_LINE => anyhow::bail!("the server sent a line too long"),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                continue
            }
            Err(e) => return Err(e).context("lost the server"),
        }
        let event: Event =
            serde_json::from_slice(&line).context("the server sent a malformed answer")?;
        line.clear();
        match event {
            Event::Progress { done, total } => progress(done, total),
            Event::Finished { .. } => return Ok(Outcome::Finished),
            Event::Stopped { done, .. } => return Ok(Outcome::Stopped { done }),
            Event::Error { message } => anyhow::bail!("the server: {message}"),
            Event::Initialised => anyhow::bail!("the server answered out of turn"),
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
) -> anyhow::Result<()> {
    let request = Request {
        op: "decrypt-attached".into(),
        old_key_bytes: key.len(),
        new_key_bytes: 0,
        hotzone_size: None,
        stop_after: None,
        decrypt_attached: Some(start),
    };
    let mut message = serde_json::to_vec(&request)?;
    message.push(b'\n');
    stream.write_all(&message)?;
    stream.write_all(key.expose())?;
    let mut line = Vec::new();
    BufReader::new(stream)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .context("lost the server")?;
    if line.is_empty() {
        anyhow::bail!("the server stopped answering (it may have been killed)");
    }
    match serde_json::from_slice(&line).context("the server sent a malformed answer")? {
        Event::Initialised => Ok(()),
        Event::Error { message } => anyhow::bail!("the server: {message}"),
        other => anyhow::bail!("the server answered {other:?} to a decryption's start"),
    }
}
