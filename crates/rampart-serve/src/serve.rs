//! `rampart serve` put together: each volume unlocked and opened, with its
//! control socket and, when the key manager unlocked it, its place in the
//! heartbeat; then the NBD server on its listeners (and a metrics
//! endpoint) until a signal, or until the heartbeat closed every export.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use rampart_crypto::SecretBytes;
use rampart_luks::LoadReport;
use rampart_nbd::{Bound, Export, Server, ServerConfig, TlsMode};
use rampart_volume::plain::PlainLayout;
use rampart_volume::{BlockDevice, DataAccess, FileDevice, VolumePaths};

use crate::control::{self, ControlSocket};
use crate::error::ServeError;
use crate::heartbeat::{Checker, HeldVolume};
use crate::open::{open_layers, OpenError, VolumeKeys};
use crate::served::ServedVolume;

/// Where the served volumes are.
#[derive(Debug, Clone)]
pub struct Volumes {
    /// Each volume's data device and its export name.
    pub volumes: Vec<(PathBuf, String)>,
    /// The detached header (of a single volume).
    pub header: Option<PathBuf>,
    pub read_only: bool,
    /// Volumes with integrity are written without dm-integrity's journal.
    pub integrity_no_journal: bool,
}

impl Volumes {
    /// The volumes of `PATH[=NAME]` specs: a lone volume without a name is
    /// the default export (named ""), several are named after their file
    /// unless named; a detached header only with a single volume.
    pub fn parse(
        specs: &[String],
        header: Option<PathBuf>,
        read_only: bool,
    ) -> Result<Self, ServeError> {
        if header.is_some() && specs.len() > 1 {
            return Err(ServeError::HeaderOfSeveral);
        }
        let single = specs.len() == 1;
        let mut volumes: Vec<(PathBuf, String)> = Vec::new();
        for spec in specs {
            let (path, name) = match spec.split_once('=') {
                Some((path, name)) => (PathBuf::from(path), name.to_owned()),
                None if single => (PathBuf::from(spec), String::new()),
                None => {
                    let name = PathBuf::from(spec)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| spec.clone());
                    (PathBuf::from(spec), name)
                }
            };
            if volumes.iter().any(|(_, n)| *n == name) {
                return Err(ServeError::ExportNameTwice(name));
            }
            volumes.push((path, name));
        }
        Ok(Self { volumes, header, read_only, integrity_no_journal: false })
    }
}

/// The unlocked volumes, ready to be exported.
#[derive(Debug)]
pub struct OpenedExports {
    exports: Vec<Export>,
    held: Vec<HeldVolume>,
    /// Removed when dropped: each volume's socket for online reencryption.
    control_sockets: Vec<ControlSocket>,
}

/// Unlocks and opens every volume, binds its control socket (a volume
/// that cannot have one is still served, without online reencryption,
/// after `no_control` is told why) and notes the volumes the key manager
/// unlocked.
pub fn open_exports<K: VolumeKeys>(
    volumes: &Volumes,
    keys: &mut K,
    loaded: &mut dyn FnMut(&LoadReport),
    no_control: &mut dyn FnMut(&Path, &ServeError),
) -> Result<OpenedExports, OpenError<K::Error>> {
    let mut opened =
        OpenedExports { exports: Vec::new(), held: Vec::new(), control_sockets: Vec::new() };
    for (path, name) in &volumes.volumes {
        let paths = VolumePaths::new(path, volumes.header.as_deref());
        let access = DataAccess {
            read_only: volumes.read_only,
            integrity_no_journal: volumes.integrity_no_journal,
        };
        let layers = open_layers(&paths, keys, access, loaded)?;
        let served = Arc::new(ServedVolume::new(
            paths,
            layers.raw,
            layers.device,
            layers.reencrypting,
            volumes.read_only,
        ));
        match control::listen(&layers.uuid, Arc::clone(&served)) {
            Ok(socket) => opened.control_sockets.push(socket),
            Err(e) => no_control(path, &e),
        }
        let device = served.device();
        if let Some(token) = keys.unlocked_by() {
            let version = Arc::new(AtomicU32::new(token.key_version));
            served.follow_binding(&token.key, Arc::clone(&version));
            opened.held.push(HeldVolume { export: name.clone(), key: token.key.clone(), version });
        }
        opened.exports.push(Export {
            description: format!("{} (LUKS, {} bytes)", path.display(), device.len()),
            name: name.clone(),
            device,
            read_only: volumes.read_only,
        });
    }
    Ok(opened)
}

/// Opens headerless volumes (plain mode, one-time keys): each one's data
/// device mapped by `layout` under the key `key_for` gives it (asked once
/// per volume, after the file opened). They have no header to re-encrypt
/// through, so no control socket; `kind` names them to clients.
pub fn open_headerless_exports<E>(
    volumes: &Volumes,
    layout: &PlainLayout,
    kind: &str,
    key_for: &mut dyn FnMut(&Path) -> Result<SecretBytes, E>,
) -> Result<OpenedExports, OpenError<E>> {
    let mut opened =
        OpenedExports { exports: Vec::new(), held: Vec::new(), control_sockets: Vec::new() };
    for (path, name) in &volumes.volumes {
        let data = FileDevice::open(path, volumes.read_only).map_err(|source| {
            ServeError::IoAt { context: format!("cannot open {}", path.display()), source }
        })?;
        let key = key_for(path).map_err(OpenError::Key)?;
        let device = layout
            .device(data, &key)
            .map_err(|source| ServeError::Headerless { path: path.clone(), source })?;
        drop(key);
        let device: Arc<dyn BlockDevice> = Arc::new(device);
        opened.exports.push(Export {
            description: format!("{} ({kind}, {} bytes)", path.display(), device.len()),
            name: name.clone(),
            device,
            read_only: volumes.read_only,
        });
    }
    Ok(opened)
}

impl OpenedExports {
    /// The volumes the heartbeat watches, every `every`: those the key
    /// manager unlocked, unless there are none or the period is zero.
    #[must_use]
    pub fn heartbeat_volumes(&self, every: Duration) -> Option<Vec<HeldVolume>> {
        (!self.held.is_empty() && !every.is_zero()).then(|| self.held.clone())
    }
}

/// Where the server listens.
#[derive(Debug, Clone, Default)]
pub struct Listeners {
    pub unix: Vec<PathBuf>,
    /// TCP addresses; with neither, `127.0.0.1:10809` (NBD's port).
    pub tcp: Vec<String>,
    /// The Prometheus scrape endpoint.
    pub metrics: Option<String>,
}

/// Serves `opened` with `config` (whose exports are those of `opened`) on
/// `listeners` until SIGTERM or SIGINT, or until `checker` closed every
/// export; `ready` gets the URI of each export on each listener once all
/// listen.
pub fn run(
    opened: OpenedExports,
    mut config: ServerConfig,
    listeners: &Listeners,
    checker: Option<Checker>,
    ready: impl FnOnce(&[String]) -> io::Result<()>,
) -> Result<(), ServeError> {
    let OpenedExports { exports, held: _, control_sockets: _control_sockets } = opened;
    config.exports = exports;
    let tls_required = config.tls_mode == TlsMode::Required;
    let names: Vec<String> = config.exports.iter().map(|e| e.name.clone()).collect();
    let server = Server::new(config)?;
    let handle = server.handle();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-serve")
        .build()
        .map_err(|source| ServeError::IoAt {
            context: "cannot start the I/O runtime".into(),
            source,
        })?;
    runtime.block_on(async {
        let mut bound = Vec::new();
        for path in &listeners.unix {
            bound.push(Bound::unix(path)?);
        }
        let default_tcp = ["127.0.0.1:10809".to_owned()];
        let tcp = if listeners.tcp.is_empty() && listeners.unix.is_empty() {
            &default_tcp[..]
        } else {
            &listeners.tcp[..]
        };
        for address in tcp {
            bound.push(Bound::tcp(address).await?);
        }
        // Aborted on return: the scrape endpoint lives as long as serving.
        let _metrics = match &listeners.metrics {
            Some(address) => {
                let listener = tokio::net::TcpListener::bind(address).await.map_err(|source| {
                    ServeError::MetricsListen { address: address.clone(), source }
                })?;
                let task = tokio::spawn(rampart_nbd::serve_metrics(listener, handle.clone()));
                Some(AbortOnDrop(task))
            }
            None => None,
        };
        let uris: Vec<String> = bound
            .iter()
            .flat_map(|listener| names.iter().map(|name| listener.uri(tls_required, name)))
            .collect();
        ready(&uris)?;
        // The checker says why when it closed the last export; without
        // one, the sender is kept here so that the channel never closes.
        let (emptied_tx, mut emptied) = tokio::sync::oneshot::channel::<String>();
        let mut _unused_sender = None;
        let _checking = match checker {
            Some(checker) => {
                Some(AbortOnDrop(tokio::spawn(checker.run(handle.clone(), emptied_tx))))
            }
            None => {
                _unused_sender = Some(emptied_tx);
                None
            }
        };
        let mut all_closed = None;
        let shutdown = async {
            tokio::select! {
                () = shutdown_signal() => {}
                reason = &mut emptied => {
                    if let Ok(reason) = reason {
                        all_closed = Some(reason);
                    }
                }
            }
        };
        server.run(bound, shutdown).await.map_err(|source| ServeError::IoAt {
            context: "flushing the volumes on exit".into(),
            source,
        })?;
        match all_closed {
            Some(reason) => Err(ServeError::AllClosed(reason)),
            None => Ok(()),
        }
    })
}

/// Aborts a background task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn volume_specs_name_their_exports() {
        let one = Volumes::parse(&specs(&["/dev/a"]), None, false).unwrap();
        assert_eq!(one.volumes, vec![(PathBuf::from("/dev/a"), String::new())]);
        let two = Volumes::parse(&specs(&["/dev/a", "/srv/b=data"]), None, true).unwrap();
        assert_eq!(
            two.volumes,
            vec![
                (PathBuf::from("/dev/a"), "a".to_owned()),
                (PathBuf::from("/srv/b"), "data".into())
            ]
        );
        assert!(two.read_only);
    }

    #[test]
    fn volume_specs_refuse_a_shared_header_and_a_name_used_twice() {
        let header = Some(PathBuf::from("/h"));
        let error = Volumes::parse(&specs(&["/dev/a", "/dev/b"]), header, false).unwrap_err();
        assert_eq!(error.to_string(), "--header can be used with a single volume only");
        let error = Volumes::parse(&specs(&["/x/a", "/y/a"]), None, false).unwrap_err();
        assert_eq!(error.to_string(), "export name 'a' is used twice");
    }
}
