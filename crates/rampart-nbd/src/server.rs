//! The server on top of everything else: listeners, the accept loop, a
//! thread per connection running the handshake then the transmission
//! phase, shutdown, and the handle that closes exports while it runs.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::ServerConfig;
use crate::connection::{AnyStream, BoxStream};
use crate::metrics::{ExportMetrics, Stats};
use crate::state::ServerState;
use crate::{handshake, transmission, NbdError};

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
    shared: Arc<ServerState>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("exports", &self.shared.open_exports())
            .finish_non_exhaustive()
    }
}

impl Server {
    pub fn new(config: ServerConfig) -> Result<Self, NbdError> {
        Ok(Self { shared: Arc::new(ServerState::new(config)?) })
    }

    #[must_use]
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.shared.stats)
    }

    /// A handle for scraping metrics and closing exports while the server
    /// runs.
    #[must_use]
    pub fn handle(&self) -> ServerHandle {
        ServerHandle { shared: Arc::clone(&self.shared) }
    }

    /// Serves one client over any byte stream (an in-memory pipe, a socket
    /// accepted elsewhere) until it disconnects: handshake, transmission
    /// and every limit, as for a listener's connections; `peer` names it in
    /// the log. The connection limit is not applied (the caller accepted
    /// the stream).
    pub async fn serve_stream<S>(&self, stream: S, peer: &str) -> io::Result<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // Held for the call: a dropped sender would read as "stopping".
        let (_running, stop) = watch::channel(false);
        self.shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let stream = Box::new(AnyStream(stream));
        connection(stream, false, peer, Arc::clone(&self.shared), stop).await
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
        let (kill_tx, kill_rx) = watch::channel(false);
        let mut accepting = JoinSet::new();
        let mut sockets = Vec::new();
        for listener in listeners {
            if let Bound::Unix(_, path) = &listener {
                sockets.push(path.clone());
            }
            let signals = Signals { stop: stop_rx.clone(), kill: kill_rx.clone() };
            accepting.spawn(accept_loop(listener, Arc::clone(&self.shared), signals));
        }
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
        // Accept loops end on the signal and wait for their connections.
        let grace = self.shared.limits.shutdown_grace;
        if tokio::time::timeout(grace, drain(&mut accepting)).await.is_err() {
            tracing::warn!(
                "connections did not finish within {} s; closing them",
                grace.as_secs_f64()
            );
            // Each connection's thread drops its connection at its next
            // await; a device call under way finishes first, so no write
            // lands after the flush below.
            let _ = kill_tx.send(true);
            if tokio::time::timeout(Duration::from_secs(10), drain(&mut accepting)).await.is_err() {
                tracing::warn!("connections still busy after 10 s more; not waiting for them");
                accepting.abort_all();
            }
        }
        for path in sockets {
            let _ = std::fs::remove_file(path);
        }
        let shared = Arc::clone(&self.shared);
        let flushed = tokio::task::spawn_blocking(move || {
            shared.open_exports().iter().try_for_each(|export| export.device.flush())
        })
        .await
        .map_err(io::Error::other)?;
        tracing::info!("served {}", self.shared.stats);
        flushed
    }
}

/// Controls a running server: metrics, and closing one export while the
/// others go on.
#[derive(Clone)]
pub struct ServerHandle {
    shared: Arc<ServerState>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle").finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The Prometheus text exposition of the server's metrics.
    #[must_use]
    pub fn metrics_text(&self) -> String {
        let exports: Vec<(String, Arc<ExportMetrics>)> = self
            .shared
            .exports
            .iter()
            .map(|slot| (slot.name.clone(), Arc::clone(&slot.metrics)))
            .collect();
        crate::metrics::render(&exports, &self.shared.metrics, &self.shared.stats)
    }

    /// The names of the exports still served.
    #[must_use]
    pub fn open_exports(&self) -> Vec<String> {
        self.shared.open_exports().into_iter().map(|e| e.name).collect()
    }

    /// Closes export `name` for good: new connections no longer find it,
    /// its connections stop reading requests, finish and answer those in
    /// flight and are closed, then the device is flushed and dropped here
    /// (with the last reference, which drops the volume key; a connection
    /// that does not read its replies holds it until the stall timeout
    /// cuts it off). `Ok(false)` when no open export has that name.
    pub async fn close_export(&self, name: &str) -> io::Result<bool> {
        let Some(slot) = self.shared.slot(name) else {
            return Ok(false);
        };
        let Some(export) = slot.close() else {
            return Ok(false);
        };
        let limits = &self.shared.limits;
        let patience = limits.stall_timeout + limits.handshake_timeout;
        let started = std::time::Instant::now();
        while slot.metrics.open_connections() > 0 {
            if started.elapsed() > patience {
                tracing::warn!(
                    export = %name,
                    "{} connection(s) still open after {} s; flushing without them",
                    slot.metrics.open_connections(),
                    patience.as_secs()
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let device = Arc::clone(&export.device);
        drop(export);
        let flushed = tokio::task::spawn_blocking(move || {
            let flushed = device.flush();
            // The last reference (unless a stalled connection still holds
            // one): the device and its key schedules are dropped, which
            // wipes them.
            drop(device);
            flushed
        })
        .await
        .map_err(io::Error::other)?;
        flushed.map(|()| true)
    }
}

async fn drain(tasks: &mut JoinSet<()>) {
    while tasks.join_next().await.is_some() {}
}

/// What tells connections to end: `stop` to finish what is in flight and
/// take no more, `kill` to drop everything at once.
#[derive(Clone)]
struct Signals {
    stop: watch::Receiver<bool>,
    kill: watch::Receiver<bool>,
}

async fn accept_loop(listener: Bound, shared: Arc<ServerState>, signals: Signals) {
    let mut connections = JoinSet::new();
    let mut stop = signals.stop.clone();
    loop {
        let accepted: io::Result<(Accepted, String)> = tokio::select! {
            _ = stop.changed() => break,
            accepted = accept(&listener) => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let permit = match &shared.connections {
                    None => None,
                    Some(slots) => match Arc::clone(slots).try_acquire_owned() {
                        Ok(permit) => Some(permit),
                        Err(_) => {
                            // Closed at once: a flood of connections costs
                            // an accept and a close each, nothing more.
                            drop(stream);
                            shared.refused(&peer);
                            continue;
                        }
                    },
                };
                shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                let (done, finished) = tokio::sync::oneshot::channel::<()>();
                let serving = Arc::clone(&shared);
                let signals = signals.clone();
                let thread = std::thread::Builder::new().name(CONNECTION_THREAD.to_owned()).spawn(
                    move || {
                        connection_thread(stream, &peer, serving, signals);
                        drop(permit);
                        drop(done);
                    },
                );
                match thread {
                    Ok(_) => {
                        connections.spawn(async move {
                            // An error only says the thread ended.
                            let _ = finished.await;
                        });
                    }
                    Err(error) => {
                        shared.stats.failed_connections.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("cannot start a connection's thread: {error}");
                    }
                }
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

/// Send buffer asked for on each Unix-socket connection (the kernel doubles
/// it, within `net.core.wmem_max`). With the default 208 KiB a 256 KiB read
/// reply (nbdcopy's size) never fits: the reply is written in pieces, the
/// task parking between them; a buffer that holds whole replies lets
/// `nbdcopy`'s reads go faster. TCP sockets keep the kernel's autotuning,
/// which a fixed size would turn off.
const UNIX_SEND_BUFFER: usize = 1 << 20;

fn enlarge_send_buffer(stream: &tokio::net::UnixStream) {
    if let Err(error) = socket2::SockRef::from(stream).set_send_buffer_size(UNIX_SEND_BUFFER) {
        // Only speed depends on it.
        tracing::debug!("cannot enlarge a Unix socket's send buffer: {error}");
    }
}

/// An accepted socket, taken off the runtime that accepted it so that the
/// connection's own thread can register it with its runtime.
enum Accepted {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Accepted {
    /// Registers the socket with the current runtime; whether it is a
    /// Unix socket.
    fn register(self) -> io::Result<(BoxStream, bool)> {
        Ok(match self {
            Self::Tcp(stream) => (Box::new(tokio::net::TcpStream::from_std(stream)?), false),
            Self::Unix(stream) => (Box::new(tokio::net::UnixStream::from_std(stream)?), true),
        })
    }
}

/// The next connection and its peer.
async fn accept(listener: &Bound) -> io::Result<(Accepted, String)> {
    match listener {
        Bound::Tcp(listener) => {
            let (stream, peer) = listener.accept().await?;
            stream.set_nodelay(true)?;
            Ok((Accepted::Tcp(stream.into_std()?), peer.to_string()))
        }
        Bound::Unix(listener, path) => {
            let (stream, _) = listener.accept().await?;
            enlarge_send_buffer(&stream);
            Ok((Accepted::Unix(stream.into_std()?), path.display().to_string()))
        }
    }
}

/// The name of each connection's thread (within Linux's 15 bytes).
const CONNECTION_THREAD: &str = "rampart-conn";

/// Serves one connection on the calling thread, in a runtime of its own,
/// until the client leaves or `kill` is sent.
///
/// A thread per connection, as nbdkit has, rather than one runtime whose
/// workers take any connection's tasks: the kernel wakes a connection's
/// thread where its client just wrote or read, so the socket buffers one
/// side fills are still in that core's cache when the other side copies
/// them, where shared workers moved each connection between cores and
/// left the client's copies into the socket slower than with nbdkit
/// (BENCHMARKS.md, "Transparent encryption: `rampart serve`").
fn connection_thread(stream: Accepted, peer: &str, shared: Arc<ServerState>, signals: Signals) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            shared.stats.failed_connections.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "cannot start a connection's runtime: {error}");
            return;
        }
    };
    runtime.block_on(async {
        let mut kill = signals.kill;
        let served = tokio::select! {
            served = async {
                let (stream, unix_socket) = stream.register()?;
                connection(stream, unix_socket, peer, Arc::clone(&shared), signals.stop).await
            } => served,
            _ = kill.wait_for(|kill| *kill) => Ok(()),
        };
        if let Err(error) = served {
            if error.kind() == io::ErrorKind::TimedOut {
                shared.stats.timed_out_connections.fetch_add(1, Ordering::Relaxed);
            } else {
                shared.stats.failed_connections.fetch_add(1, Ordering::Relaxed);
            }
            tracing::info!(%peer, "connection ended: {error}");
        }
    });
}

async fn connection(
    stream: BoxStream,
    unix_socket: bool,
    peer: &str,
    shared: Arc<ServerState>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    // A client still haggling has nothing in flight: on shutdown it is
    // dropped at once rather than holding the exit for the drain timeout.
    let mut stopping = stop.clone();
    let haggling = tokio::time::timeout(
        shared.limits.handshake_timeout,
        handshake::negotiate(stream, &shared),
    );
    let negotiated = tokio::select! {
        result = haggling => {
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
    tracing::debug!(%peer, export = %negotiated.opened.export.name, "transmission");
    transmission::serve(negotiated, unix_socket, shared, stop).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::proto::*;
    use crate::Export;

    #[tokio::test]
    async fn unix_connections_get_a_send_buffer_for_whole_replies() {
        let (stream, _peer) = tokio::net::UnixStream::pair().unwrap();
        let before = socket2::SockRef::from(&stream).send_buffer_size().unwrap();
        enlarge_send_buffer(&stream);
        let after = socket2::SockRef::from(&stream).send_buffer_size().unwrap();
        // The kernel doubles what it is asked for, within wmem_max.
        let wmem_max: usize =
            std::fs::read_to_string("/proc/sys/net/core/wmem_max").unwrap().trim().parse().unwrap();
        assert_eq!(after, 2 * UNIX_SEND_BUFFER.min(wmem_max), "was {before}");
        assert!(after > 256 << 10, "a 256 KiB reply fits: {after}");
    }

    /// Threads of this process named [`CONNECTION_THREAD`].
    fn connection_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|task| {
                let comm = task.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|name| name.trim() == CONNECTION_THREAD)
            })
            .count()
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 5 s: {what}");
    }

    /// Fixed newstyle with `NBD_OPT_GO` to the default export.
    async fn handshake(path: &std::path::Path) -> tokio::net::UnixStream {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::UnixStream::connect(path).await.unwrap();
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello).await.unwrap();
        assert_eq!(hello[..8], NBDMAGIC.to_be_bytes());
        let flags = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
        stream.write_all(&flags.to_be_bytes()).await.unwrap();
        let mut go = Vec::new();
        go.extend_from_slice(&IHAVEOPT.to_be_bytes());
        go.extend_from_slice(&OPT_GO.to_be_bytes());
        go.extend_from_slice(&6u32.to_be_bytes());
        go.extend_from_slice(&[0; 6]);
        stream.write_all(&go).await.unwrap();
        loop {
            let mut reply = [0u8; 20];
            stream.read_exact(&mut reply).await.unwrap();
            let len = u32::from_be_bytes(reply[16..20].try_into().unwrap());
            let mut data = vec![0u8; len as usize];
            stream.read_exact(&mut data).await.unwrap();
            match u32::from_be_bytes(reply[12..16].try_into().unwrap()) {
                REP_ACK => return stream,
                REP_INFO => {}
                other => panic!("option reply {other:#x}"),
            }
        }
    }

    /// A request header.
    fn request(kind: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
        let mut head = Vec::new();
        head.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        head.extend_from_slice(&0u16.to_be_bytes());
        head.extend_from_slice(&kind.to_be_bytes());
        head.extend_from_slice(&handle.to_be_bytes());
        head.extend_from_slice(&offset.to_be_bytes());
        head.extend_from_slice(&len.to_be_bytes());
        head
    }

    /// Each connection is served by a thread of its own, which ends with
    /// it; at shutdown a client that reads none of its replies is dropped
    /// after the grace period, not after the stall timeout, and a write
    /// acknowledged before is on the device.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_connection_has_a_thread_and_shutdown_drops_a_stuck_one() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = std::env::temp_dir().join(format!("rampart-nbd-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nbd.sock");
        let device: Arc<dyn rampart_volume::BlockDevice> =
            Arc::new(rampart_volume::MemDevice::new(1 << 20));
        let export =
            Export { name: String::new(), description: String::new(), device, read_only: false };
        let mut config = ServerConfig::new(vec![export.clone()]);
        config.limits.shutdown_grace = Duration::from_millis(300);
        config.limits.max_requests = 4096;
        let server = Server::new(config).unwrap();
        let listener = Bound::unix(&path).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(server.run(vec![listener], async {
            let _ = stopped.await;
        }));

        let before = connection_threads();
        let mut a = handshake(&path).await;
        let mut b = handshake(&path).await;
        until("two connection threads", || connection_threads() == before + 2).await;

        // Both are served: a write on one, read back on the other.
        let mut write = request(CMD_WRITE, 1, 4096, 512);
        write.extend_from_slice(&[0x5a; 512]);
        a.write_all(&write).await.unwrap();
        let mut reply = [0u8; 16];
        a.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply[4..8], &[0; 4], "write failed");
        b.write_all(&request(CMD_READ, 2, 4096, 512)).await.unwrap();
        b.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply[4..8], &[0; 4], "read failed");
        let mut data = [0u8; 512];
        b.read_exact(&mut data).await.unwrap();
        assert_eq!(data, [0x5a; 512]);

        // One client leaves: its thread ends.
        drop(b);
        until("the leaver's thread ends", || connection_threads() == before + 1).await;

        // The other asks for 8 MiB in small reads (queued for the
        // connection's reply writer) and reads no reply: the replies fill
        // the socket and the writer cannot finish them.
        let mut reads = Vec::new();
        for handle in 0..2048 {
            reads.extend_from_slice(&request(CMD_READ, 10 + handle, 0, 4096));
        }
        a.write_all(&reads).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = std::time::Instant::now();
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), running)
            .await
            .expect("shutdown waited for the stalled client")
            .unwrap()
            .unwrap();
        assert!(asked.elapsed() >= Duration::from_millis(300), "dropped before the grace");
        // The dropped connection's thread exits once its socket is shut,
        // which may be just after the server has returned.
        until("the stuck connection's thread ends", || connection_threads() == before).await;
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), a.read_to_end(&mut rest));
        let read = read.await.expect("the connection was closed").unwrap();
        assert!(read < 2048 * (16 + 4096), "every reply was sent: {read}");
        let mut sector = [0u8; 512];
        export.device.read_at(&mut sector, 4096).unwrap();
        assert_eq!(sector, [0x5a; 512]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn closing_an_export_drops_its_device_and_keeps_the_others() {
        let device: Arc<dyn rampart_volume::BlockDevice> =
            Arc::new(rampart_volume::MemDevice::new(1 << 20));
        let weak = Arc::downgrade(&device);
        let exports = vec![
            Export { name: "a".into(), description: String::new(), device, read_only: false },
            Export {
                name: "b".into(),
                description: String::new(),
                device: Arc::new(rampart_volume::MemDevice::new(1 << 20)),
                read_only: false,
            },
        ];
        let server = Server::new(ServerConfig::new(exports)).unwrap();
        let handle = server.handle();
        assert_eq!(handle.open_exports(), ["a", "b"]);
        assert!(handle.close_export("a").await.unwrap());
        // The last reference is gone: the device (and any key it holds) is dropped.
        assert!(weak.upgrade().is_none());
        assert_eq!(handle.open_exports(), ["b"]);
        assert!(!handle.close_export("a").await.unwrap(), "closed twice");
        assert!(!handle.close_export("nope").await.unwrap());
        let text = handle.metrics_text();
        assert!(text.contains("rampart_nbd_export_up{export=\"a\"} 0"), "{text}");
        assert!(text.contains("rampart_nbd_export_up{export=\"b\"} 1"), "{text}");
    }
}
