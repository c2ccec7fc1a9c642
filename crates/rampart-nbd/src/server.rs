use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::buffers::BufferPool;
use crate::handshake::{negotiate, BoxStream};
use crate::transmission;
use crate::{Export, NbdError};

/// Whether connections may, must or cannot upgrade to TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is refused.
    Off,
    /// TLS offered; plain-text clients are served too.
    Optional,
    /// Every option but STARTTLS and ABORT is refused until TLS is up.
    Required,
}

/// Everything a server needs.
pub struct ServerConfig {
    pub exports: Vec<Export>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub tls_mode: TlsMode,
    /// Cap on request payload bytes held in memory at once, across all
    /// connections; requests beyond it wait.
    pub max_inflight_bytes: usize,
    /// How long a client may take to finish option haggling.
    pub handshake_timeout: Duration,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("exports", &self.exports)
            .field("tls_mode", &self.tls_mode)
            .field("max_inflight_bytes", &self.max_inflight_bytes)
            .finish_non_exhaustive()
    }
}

/// Counters over the server's life, logged on exit.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub failed_connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub request_errors: AtomicU64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "{} connections ({} ended by errors), {} requests ({} failed), {} bytes read, {} bytes written",
            get(&self.connections),
            get(&self.failed_connections),
            get(&self.requests),
            get(&self.request_errors),
            get(&self.bytes_read),
            get(&self.bytes_written)
        )
    }
}

/// Unit of the in-flight memory budget.
pub(crate) const PERMIT_BYTES: usize = 4096;

pub(crate) struct Shared {
    pub(crate) exports: Vec<Export>,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) tls_mode: TlsMode,
    pub(crate) inflight: Arc<Semaphore>,
    pub(crate) inflight_permits: u32,
    pub(crate) pool: BufferPool,
    pub(crate) stats: Arc<Stats>,
    pub(crate) handshake_timeout: Duration,
}

impl Shared {
    pub(crate) fn export(&self, name: &str) -> Option<&Export> {
        self.exports.iter().find(|e| e.name == name)
    }
}

/// A bound listening socket.
#[derive(Debug)]
pub enum Bound {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Bound {
    pub async fn tcp(address: &str) -> Result<Self, NbdError> {
        let listener = TcpListener::bind(address).await.map_err(|e| NbdError::Io {
            context: format!("cannot listen on {address}"),
            source: e,
        })?;
        Ok(Self::Tcp(listener))
    }

    /// Binds a Unix socket, replacing a stale socket file left by a
    /// previous server (but never a live one, nor a file of another kind).
    pub fn unix(path: &std::path::Path) -> Result<Self, NbdError> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if meta.file_type().is_socket() {
                // A socket that answers belongs to a running server: never
                // take it over (its clients would be cut off).
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(NbdError::Io {
                        context: format!("cannot listen on {}", path.display()),
                        source: io::Error::new(
                            io::ErrorKind::AddrInUse,
                            "a server is already listening there",
                        ),
                    });
                }
                let _ = std::fs::remove_file(path);
            }
        }
        let listener = UnixListener::bind(path).map_err(|e| NbdError::Io {
            context: format!("cannot listen on {}", path.display()),
            source: e,
        })?;
        Ok(Self::Unix(listener, path.to_owned()))
    }

    /// The NBD URI of `export` on this listener (the export name and the
    /// socket path percent-encoded, as RFC 3986 and the NBD URI spec want).
    #[must_use]
    pub fn uri(&self, tls: bool, export: &str) -> String {
        let scheme = if tls { "nbds" } else { "nbd" };
        let export = percent_encode(export.as_bytes());
        match self {
            Self::Tcp(listener) => match listener.local_addr() {
                Ok(addr) if addr.is_ipv6() => {
                    format!("{scheme}://[{}]:{}/{export}", addr.ip(), addr.port())
                }
                Ok(addr) => format!("{scheme}://{}:{}/{export}", addr.ip(), addr.port()),
                Err(_) => format!("{scheme}://?/{export}"),
            },
            Self::Unix(_, path) => {
                use std::os::unix::ffi::OsStrExt;
                let socket = percent_encode(path.as_os_str().as_bytes());
                format!("{scheme}+unix:///{export}?socket={socket}")
            }
        }
    }
}

/// Percent-encodes every byte but RFC 3986's unreserved characters and `/`.
fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub struct Server {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("exports", &self.shared.exports).finish_non_exhaustive()
    }
}

impl Server {
    pub fn new(config: ServerConfig) -> Result<Self, NbdError> {
        if config.exports.is_empty() {
            return Err(NbdError::Config("no exports".into()));
        }
        for (i, export) in config.exports.iter().enumerate() {
            if config.exports[..i].iter().any(|e| e.name == export.name) {
                return Err(NbdError::Config(format!(
                    "export name '{}' is used twice",
                    export.name
                )));
            }
            if export.name.len() > 4096 || export.name.contains('\0') {
                return Err(NbdError::Config(
                    "export names must be at most 4096 bytes without NUL".into(),
                ));
            }
        }
        if config.tls_mode != TlsMode::Off && config.tls.is_none() {
            return Err(NbdError::Config("TLS requested without a certificate and key".into()));
        }
        let permits = (config.max_inflight_bytes / PERMIT_BYTES)
            .max(crate::proto::MAX_REQUEST as usize / PERMIT_BYTES);
        let permits = u32::try_from(permits).unwrap_or(u32::MAX >> 4);
        Ok(Self {
            shared: Arc::new(Shared {
                exports: config.exports,
                tls: config.tls.map(TlsAcceptor::from),
                tls_mode: config.tls_mode,
                inflight: Arc::new(Semaphore::new(permits as usize)),
                inflight_permits: permits,
                // Idle buffers beyond half the in-flight budget are returned
                // to the allocator, so the budget still bounds memory.
                pool: BufferPool::new(permits as usize * PERMIT_BYTES / 2),
                stats: Arc::new(Stats::default()),
                handshake_timeout: config.handshake_timeout,
            }),
        })
    }

    #[must_use]
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.shared.stats)
    }

    /// Serves one already-connected client over any byte stream (an
    /// in-memory pipe in tests and fuzzing, a socket accepted elsewhere):
    /// the handshake, then transmission until the client disconnects. The
    /// result is the connection's outcome, which `run` only logs.
    pub async fn serve_stream<S>(&self, stream: S) -> io::Result<()>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        // The sender stays alive for the call: this connection never sees
        // a shutdown signal.
        let (_stop_tx, stop_rx) = watch::channel(false);
        let stream: BoxStream = Box::new(crate::handshake::AnyStream(stream));
        connection(stream, "stream", Arc::clone(&self.shared), stop_rx).await
    }

    /// Serves every listener until `shutdown` completes; then stops
    /// accepting, lets connections finish their in-flight requests, flushes
    /// every export and returns.
    pub async fn run(
        self,
        listeners: Vec<Bound>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> io::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut accepting = JoinSet::new();
        let mut sockets = Vec::new();
        for listener in listeners {
            if let Bound::Unix(_, path) = &listener {
                sockets.push(path.clone());
            }
            accepting.spawn(accept_loop(listener, Arc::clone(&self.shared), stop_rx.clone()));
        }
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
        // Accept loops end on the signal and wait for their connections.
        let drain = async { while accepting.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(30), drain).await.is_err() {
            tracing::warn!("connections did not finish within 30 s; closing them");
            accepting.abort_all();
        }
        for path in sockets {
            let _ = std::fs::remove_file(path);
        }
        let shared = Arc::clone(&self.shared);
        let flushed = tokio::task::spawn_blocking(move || {
            shared.exports.iter().try_for_each(|export| export.device.flush())
        })
        .await
        .map_err(io::Error::other)?;
        tracing::info!("served {}", self.shared.stats);
        flushed
    }
}

async fn accept_loop(listener: Bound, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        let accepted: io::Result<(BoxStream, String)> = tokio::select! {
            _ = stop.changed() => break,
            accepted = accept(&listener) => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                let shared = Arc::clone(&shared);
                let stop = stop.clone();
                connections.spawn(async move {
                    if let Err(error) = connection(stream, &peer, shared.clone(), stop).await {
                        shared.stats.failed_connections.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(%peer, "connection ended: {error}");
                    }
                });
            }
            Err(error) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!("accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // Reap finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

async fn accept(listener: &Bound) -> io::Result<(BoxStream, String)> {
    match listener {
        Bound::Tcp(listener) => {
            let (stream, peer) = listener.accept().await?;
            stream.set_nodelay(true)?;
            Ok((Box::new(stream), peer.to_string()))
        }
        Bound::Unix(listener, path) => {
            let (stream, _) = listener.accept().await?;
            Ok((Box::new(stream), path.display().to_string()))
        }
    }
}

async fn connection(
    stream: BoxStream,
    peer: &str,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    // A client still haggling has nothing in flight: on shutdown it is
    // dropped at once rather than holding the exit for the drain timeout.
    let mut stopping = stop.clone();
    let negotiated = tokio::select! {
        result = tokio::time::timeout(shared.handshake_timeout, negotiate(stream, &shared)) => {
            match result {
                Ok(result) => result?,
                Err(_) => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "handshake timed out"))
                }
            }
        }
        _ = stopping.wait_for(|stopping| *stopping) => return Ok(()),
    };
    let Some(negotiated) = negotiated else {
        return Ok(());
    };
    tracing::debug!(%peer, export = %negotiated.export.name, "transmission");
    transmission::serve(negotiated, shared, stop).await
}
