//! The transmission phase: requests are validated here and run against the
//! device (page-cache reads and writes on the runtime, syncs and requests
//! over 256 KiB on the blocking pool), and answered out of order: large
//! ones by the task that ran them, the rest by one writer task.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Mutex, OwnedSemaphorePermit, Semaphore};

use crate::connection::{ReadBox, WriteBox};
use crate::metrics::{ExportMetrics, InflightGauge};
use crate::proto::*;
use crate::state::{Negotiated, Opened, ServerState, PERMIT_BYTES};
use crate::Export;

const KNOWN_FLAGS: u16 =
    CMD_FLAG_FUA | CMD_FLAG_NO_HOLE | CMD_FLAG_DF | CMD_FLAG_REQ_ONE | CMD_FLAG_FAST_ZERO;

#[derive(Debug, Clone, Copy)]
struct Request {
    flags: u16,
    kind: u16,
    handle: u64,
    offset: u64,
    len: u32,
    /// When the header was read (for the latency histogram).
    started: std::time::Instant,
}

impl Request {
    fn parse(header: &[u8; 28]) -> io::Result<Self> {
        let magic = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        if magic != REQUEST_MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad request magic {magic:#x}"),
            ));
        }
        let mut handle = [0u8; 8];
        handle.copy_from_slice(&header[8..16]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&header[16..24]);
        Ok(Self {
            flags: u16::from_be_bytes([header[4], header[5]]),
            kind: u16::from_be_bytes([header[6], header[7]]),
            handle: u64::from_be_bytes(handle),
            offset: u64::from_be_bytes(offset),
            len: u32::from_be_bytes([header[24], header[25], header[26], header[27]]),
            started: std::time::Instant::now(),
        })
    }
}

enum Body {
    Done,
    Data(Vec<u8>),
    Extent { len: u32, flags: u32 },
    Error { errno: u32, message: String },
}

struct Reply {
    request: Request,
    body: Body,
    _held: Held,
}

/// In-flight budget held by one request: the connection's share and the
/// server-wide one, and its bytes in the export's in-flight gauge.
struct Permit {
    _own: OwnedSemaphorePermit,
    _shared: OwnedSemaphorePermit,
    _gauge: InflightGauge,
}

/// What a request holds until its reply is on the wire: one of the
/// connection's request slots and, for requests carrying data, in-flight
/// budget. Dropping an unsent reply (the client was cut off) releases both.
struct Held {
    _slot: OwnedSemaphorePermit,
    _budget: Option<Permit>,
}

/// `unix_socket`: the connection is on a Unix socket (see
/// [`write_in_own_task`]).
pub(crate) async fn serve(
    negotiated: Negotiated,
    unix_socket: bool,
    shared: Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let Negotiated { stream, opened, structured, base_allocation } = negotiated;
    let Opened { export, metrics, mut closing } = opened;
    metrics.connected();
    let _connected = Connected(Arc::clone(&metrics));
    let (mut reader, writer) = stream.into_halves();
    // Unbounded, yet bounded by the request slots every reply holds.
    let (replies, queue) = mpsc::unbounded_channel::<Reply>();
    // Why a write answered from a task of its own could not be answered.
    let (reply_failed, mut reply_failures) = mpsc::unbounded_channel::<io::Error>();
    let out = Arc::new(Mutex::new(ReplyWriter {
        inner: Box::new(StallGuard::new(writer, shared.limits.stall_timeout)),
        pending: Vec::with_capacity(PENDING_MAX),
        structured,
        metrics: Arc::clone(&metrics),
    }));
    let mut writing = tokio::spawn(write_replies(Arc::clone(&out), queue, Arc::clone(&shared)));
    // One connection may hold at most a quarter of the server's in-flight
    // budget (and always one largest request): a client that stops reading
    // its replies then stalls itself, not every other client.
    let own = (shared.inflight_permits / 4).max(MAX_REQUEST / PERMIT_BYTES as u32);
    let own = Arc::new(Semaphore::new(own as usize));
    let max_slots = shared.limits.max_requests.min(Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max_slots));
    let context = Arc::new(Context {
        export,
        metrics,
        shared,
        base_allocation,
        replies,
        reply_failed,
        unix_socket,
        own,
        slots,
        max_slots,
        out,
    });
    let mut written = None;
    // In this order, reading requests last: a connection whose export was
    // closed meanwhile reads no request at all, and one whose writer has
    // failed reads no more (were reading first, a client flooding
    // requests would keep it busy until the task's cooperative budget ran
    // out, and the writer's end would not be seen while the flood lasts).
    let reading = tokio::select! {
        biased;
        _ = stop.wait_for(|stopping| *stopping) => Ok(()),
        // The export was closed (its key revoked): in-flight requests are
        // answered below, then the connection is closed.
        _ = closing.wait_for(|closed| *closed) => Ok(()),
        // The writer fails when the client stops reading its replies (or
        // goes away): stop reading its requests too.
        result = &mut writing => {
            written = Some(result);
            Ok(())
        }
        // As when the reader's own direct answer fails.
        Some(error) = reply_failures.recv() => Err(error),
        result = read_requests(&mut reader, &context) => result,
    };
    // In-flight requests hold clones of the sender; the writer ends once
    // they have all answered.
    drop(context);
    let written = match written {
        Some(result) => result,
        None => writing.await,
    };
    let written = written.map_err(io::Error::other)?;
    // The writer's error says why the connection ended (a stall, a reset)
    // when it ended first; otherwise the reader's does.
    written.and(reading)
}

/// Counts the connection in its export's gauge until dropped.
struct Connected(Arc<ExportMetrics>);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.disconnected();
    }
}

struct Context {
    export: Export,
    metrics: Arc<ExportMetrics>,
    shared: Arc<ServerState>,
    base_allocation: bool,
    replies: mpsc::UnboundedSender<Reply>,
    /// Where a write's own task reports that its reply could not be sent:
    /// the connection ends, as when the reader's direct answer fails.
    reply_failed: mpsc::UnboundedSender<io::Error>,
    unix_socket: bool,
    own: Arc<Semaphore>,
    /// The connection's request slots (`Limits::max_requests`).
    slots: Arc<Semaphore>,
    max_slots: usize,
    /// Shared with the writer task: inline reads answer through it directly.
    out: Arc<Mutex<ReplyWriter>>,
}

impl Context {
    fn answer(&self, request: Request, body: Body, held: Held) {
        // A closed channel means the client is gone; nothing to tell it.
        let _ = self.replies.send(Reply { request, body, _held: held });
    }

    fn fail(&self, request: Request, slot: OwnedSemaphorePermit, errno: u32, message: &str) {
        let held = Held { _slot: slot, _budget: None };
        self.answer(request, Body::Error { errno, message: message.to_owned() }, held);
    }

    /// Whether no request of this connection awaits its reply.
    fn is_idle(&self) -> bool {
        self.slots.available_permits() == self.max_slots
    }
}

/// Reads the next request header. With an idle timeout, a client that
/// sends nothing for that long while it has nothing in flight is cut off
/// (one waiting for a slow request is not idle).
async fn read_header(reader: &mut ReadBox, cx: &Context, header: &mut [u8; 28]) -> io::Result<()> {
    let read = reader.read_exact(header);
    let Some(idle) = cx.shared.limits.idle_timeout else {
        return read.await.map(|_| ());
    };
    tokio::pin!(read);
    loop {
        tokio::select! {
            result = &mut read => return result.map(|_| ()),
            () = tokio::time::sleep(idle) => {
                if cx.is_idle() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("idle for {} s (--idle-timeout)", idle.as_secs_f64()),
                    ));
                }
            }
        }
    }
}

/// Reads a write's payload; a client that stops sending it for the stall
/// timeout is cut off, releasing the budget the write holds.
async fn read_payload(reader: &mut ReadBox, cx: &Context, buffer: &mut [u8]) -> io::Result<()> {
    let stall = cx.shared.limits.stall_timeout;
    let mut filled = 0;
    while filled < buffer.len() {
        // `read` is cancel-safe: a timeout loses no byte.
        let n = tokio::time::timeout(stall, reader.read(&mut buffer[filled..]))
            .await
            .map_err(|_| stalled(stall, "sent no byte of a request's payload"))??;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
    }
    Ok(())
}

fn stalled(limit: Duration, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the client {what} for {} s (--stall-timeout)", limit.as_secs_f64()),
    )
}

async fn read_requests(reader: &mut ReadBox, cx: &Arc<Context>) -> io::Result<()> {
    let size = cx.export.device.len();
    let mut header = [0u8; 28];
    loop {
        match read_header(reader, cx, &mut header).await {
            Ok(()) => {}
            // A client that just goes away is not an error worth reporting.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let request = Request::parse(&header)?;
        cx.shared.stats.requests.fetch_add(1, Ordering::Relaxed);
        if request.kind != CMD_DISC {
            cx.metrics.request(request.kind);
        }
        let closed = |_| io::Error::other("server is shutting down");
        let slot = Arc::clone(&cx.slots).acquire_owned().await.map_err(closed)?;

        if request.kind == CMD_WRITE {
            if request.len > MAX_REQUEST {
                // The payload cannot be skipped cheaply: hard disconnect.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "write of {} bytes exceeds the {MAX_REQUEST}-byte maximum",
                        request.len
                    ),
                ));
            }
            let permit = acquire(cx, request.len).await?;
            let mut buffer = cx.shared.pool.take(request.len as usize);
            read_payload(reader, cx, &mut buffer).await?;
            if let Err((errno, message)) = validate(cx, &request, size) {
                cx.shared.pool.give(buffer);
                cx.fail(request, slot, errno, &message);
                continue;
            }
            cx.shared.stats.bytes_written.fetch_add(u64::from(request.len), Ordering::Relaxed);
            let held = Held { _slot: slot, _budget: Some(permit) };
            if answers_directly(&request) {
                if cx.unix_socket {
                    write_in_own_task(cx, request, buffer, held);
                } else {
                    let body = execute_write(cx, &request, buffer);
                    answer_directly(cx, Reply { request, body, _held: held }).await?;
                }
            } else {
                start_write(cx, request, buffer, held);
            }
            continue;
        }

        match request.kind {
            CMD_DISC => return Ok(()),
            CMD_READ | CMD_FLUSH | CMD_TRIM | CMD_CACHE | CMD_WRITE_ZEROES | CMD_BLOCK_STATUS => {}
            other => {
                cx.fail(request, slot, EINVAL, &format!("unknown command {other}"));
                continue;
            }
        }
        if let Err((errno, message)) = validate(cx, &request, size) {
            cx.fail(request, slot, errno, &message);
            continue;
        }
        let permit =
            if request.kind == CMD_READ { Some(acquire(cx, request.len).await?) } else { None };
        let held = Held { _slot: slot, _budget: permit };
        if request.kind == CMD_READ {
            cx.shared.stats.bytes_read.fetch_add(u64::from(request.len), Ordering::Relaxed);
            if answers_directly(&request) {
                let body = execute_other(cx, &request);
                answer_directly(cx, Reply { request, body, _held: held }).await?;
                continue;
            }
        }
        start_other(cx, request, held);
    }
}

/// Checks flags, lengths and bounds; the error is (errno, message).
fn validate(cx: &Context, request: &Request, size: u64) -> Result<(), (u32, String)> {
    if request.flags & !KNOWN_FLAGS != 0 {
        return Err((EINVAL, format!("unknown command flags {:#x}", request.flags)));
    }
    let writes = matches!(request.kind, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
    if writes && cx.export.read_only {
        return Err((EPERM, "the export is read-only".into()));
    }
    if request.kind == CMD_READ && request.len > MAX_REQUEST {
        return Err((
            EINVAL,
            format!("read of {} bytes exceeds the {MAX_REQUEST}-byte maximum", request.len),
        ));
    }
    if request.kind == CMD_FLUSH {
        // The specification reserves both fields as zero; nbdkit refuses
        // anything else with EINVAL, and so do we.
        if request.offset != 0 || request.len != 0 {
            return Err((EINVAL, "a flush must have offset and length zero".into()));
        }
        return Ok(());
    }
    if request.kind == CMD_BLOCK_STATUS && !cx.base_allocation {
        return Err((EINVAL, "no metadata context was negotiated".into()));
    }
    if request.len == 0 {
        // Refused with the connection kept, as the NBD specification asks
        // and as nbdkit answers: EINVAL, or ENOSPC for the writes (an empty
        // range fails nbdkit's bounds check). Served, a structured read
        // would be answered by a data chunk too short to hold an offset and
        // a byte, which libnbd drops the connection over.
        let errno =
            if matches!(request.kind, CMD_WRITE | CMD_WRITE_ZEROES) { ENOSPC } else { EINVAL };
        return Err((errno, "a request of zero length".into()));
    }
    let in_bounds =
        request.offset.checked_add(u64::from(request.len)).is_some_and(|end| end <= size);
    let starts_inside = request.offset < size;
    if request.kind == CMD_BLOCK_STATUS {
        // The reply may cover less than asked, but must start inside.
        return if starts_inside { Ok(()) } else { Err((EINVAL, "offset beyond the end".into())) };
    }
    if !in_bounds {
        let errno = if writes { ENOSPC } else { EINVAL };
        return Err((
            errno,
            format!("{}+{} lies beyond the end ({size} bytes)", request.offset, request.len),
        ));
    }
    Ok(())
}

async fn acquire(cx: &Context, len: u32) -> io::Result<Permit> {
    let wanted = (len as usize).div_ceil(PERMIT_BYTES).max(1);
    // Requests are at most MAX_REQUEST here, and both budgets hold that.
    let wanted = u32::try_from(wanted)
        .unwrap_or(u32::MAX)
        .min(MAX_REQUEST / PERMIT_BYTES as u32)
        .min(cx.shared.inflight_permits);
    let closed = |_| io::Error::other("server is shutting down");
    let own = Arc::clone(&cx.own).acquire_many_owned(wanted).await.map_err(closed)?;
    let shared =
        Arc::clone(&cx.shared.inflight).acquire_many_owned(wanted).await.map_err(closed)?;
    Ok(Permit { _own: own, _shared: shared, _gauge: InflightGauge::new(&cx.metrics, len) })
}

fn errno_of(error: &io::Error) -> u32 {
    match error.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => EPERM,
        io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof => EINVAL,
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => ENOSPC,
        io::ErrorKind::OutOfMemory => ENOMEM,
        io::ErrorKind::Unsupported => ENOTSUP,
        _ => EIO,
    }
}

/// Requests up to this size that need no sync run on the connection's task:
/// a page-cache read or write and its crypto take microseconds, less than
/// handing them to another thread. Larger ones, flushes and FUA go to the
/// blocking pool.
const INLINE_MAX: u32 = 256 << 10;

fn inline(request: &Request) -> bool {
    let syncs = request.kind == CMD_FLUSH || request.flags & CMD_FLAG_FUA != 0;
    let small = matches!(request.kind, CMD_READ | CMD_WRITE | CMD_CACHE | CMD_BLOCK_STATUS)
        && request.len <= INLINE_MAX;
    small && !syncs
}

fn run(cx: &Arc<Context>, request: &Request, work: impl FnOnce(&Context) + Send + 'static) {
    if inline(request) {
        work(cx);
    } else {
        let cx = Arc::clone(cx);
        tokio::task::spawn_blocking(move || work(&cx));
    }
}

fn start_write(cx: &Arc<Context>, request: Request, buffer: Vec<u8>, held: Held) {
    run(cx, &request, move |answer| {
        let body = execute_write(answer, &request, buffer);
        answer.answer(request, body, held);
    });
}

fn execute_write(cx: &Context, request: &Request, mut buffer: Vec<u8>) -> Body {
    let device = &cx.export.device;
    // The request buffer is ours: it may be encrypted in place.
    let mut result = device.write_at_mut(&mut buffer, request.offset);
    if result.is_ok() && request.flags & CMD_FLAG_FUA != 0 {
        result = device.flush();
    }
    cx.shared.pool.give(buffer);
    match result {
        Ok(()) => Body::Done,
        Err(e) => Body::Error { errno: errno_of(&e), message: e.to_string() },
    }
}

/// Large inline requests are answered by the task that ran them (a read
/// by the connection's own task, a write by its own) while their data is
/// still in this core's cache, as a thread-per-request server would: a
/// reply queued behind others is read back from memory instead, and
/// waking the writer task costs more than the write.
fn answers_directly(request: &Request) -> bool {
    request.len as usize >= DIRECT_MIN && inline(request)
}

/// On a Unix socket, runs a large inline write and answers it in a task
/// of its own, so that the connection's task reads on meanwhile. There a
/// client cannot queue its next request while nobody reads: the socket's
/// send buffer (208 KiB by default) is smaller than one 256 KiB write.
/// Answered inline, every write held up the client for the time of its
/// encryption and write. TCP's receive window holds many requests, and
/// there the task only cost CPU, so TCP writes stay inline.
/// The task runs on the connection's thread, with the payload still in
/// its cache, once the reader has read all the client has sent.
fn write_in_own_task(cx: &Arc<Context>, request: Request, buffer: Vec<u8>, held: Held) {
    let cx = Arc::clone(cx);
    tokio::spawn(async move {
        let body = execute_write(&cx, &request, buffer);
        if let Err(error) = answer_directly(&cx, Reply { request, body, _held: held }).await {
            // Nobody listens once the connection is ending anyway.
            let _ = cx.reply_failed.send(error);
        }
    });
}

async fn answer_directly(cx: &Context, reply: Reply) -> io::Result<()> {
    let mut out = cx.out.lock().await;
    out.reply(reply, &cx.shared).await?;
    out.flush().await
}

fn start_other(cx: &Arc<Context>, request: Request, held: Held) {
    run(cx, &request, move |answer| {
        let body = execute_other(answer, &request);
        answer.answer(request, body, held);
    });
}

/// Runs every request but WRITE against the device.
fn execute_other(cx: &Context, request: &Request) -> Body {
    let device = &cx.export.device;
    let fua = request.flags & CMD_FLAG_FUA != 0;
    let result: io::Result<Body> = match request.kind {
        CMD_READ => {
            let mut buffer = cx.shared.pool.take(request.len as usize);
            match device.read_at(&mut buffer, request.offset) {
                Ok(()) => Ok(Body::Data(buffer)),
                Err(e) => {
                    cx.shared.pool.give(buffer);
                    Err(e)
                }
            }
        }
        CMD_FLUSH => device.flush().map(|()| Body::Done),
        CMD_TRIM => device
            .discard(request.offset, u64::from(request.len))
            .and_then(|()| if fua { device.flush() } else { Ok(()) })
            .map(|()| Body::Done),
        CMD_WRITE_ZEROES if request.flags & CMD_FLAG_FAST_ZERO != 0 => {
            // Zeros on an encrypted volume are written as ciphertext:
            // never faster than a write, so a fast zero is refused.
            Ok(Body::Error { errno: ENOTSUP, message: "zeroing is not faster than writing".into() })
        }
        CMD_WRITE_ZEROES => device
            .write_zeroes(request.offset, u64::from(request.len))
            .and_then(|()| if fua { device.flush() } else { Ok(()) })
            .map(|()| Body::Done),
        CMD_CACHE => Ok(Body::Done),
        CMD_BLOCK_STATUS => {
            // Everything is reported allocated data: holes and zeros in
            // ciphertext say nothing about the plaintext.
            let remaining = device.len() - request.offset;
            let len = u64::from(request.len).min(remaining) as u32;
            Ok(Body::Extent { len, flags: 0 })
        }
        other => Ok(Body::Error { errno: EINVAL, message: format!("unknown command {other}") }),
    };
    result.unwrap_or_else(|e| Body::Error { errno: errno_of(&e), message: e.to_string() })
}

async fn write_replies(
    out: Arc<Mutex<ReplyWriter>>,
    mut queue: mpsc::UnboundedReceiver<Reply>,
    shared: Arc<ServerState>,
) -> io::Result<()> {
    while let Some(reply) = queue.recv().await {
        let mut out = out.lock().await;
        out.reply(reply, &shared).await?;
        // Send everything already finished in one go.
        while let Ok(reply) = queue.try_recv() {
            out.reply(reply, &shared).await?;
        }
        out.flush().await?;
    }
    out.lock().await.inner.shutdown().await
}

/// Small replies and headers are gathered and sent together.
const PENDING_MAX: usize = 64 << 10;
/// Read data at least this large goes to the socket from its own buffer,
/// never copied into `pending`.
const DIRECT_MIN: usize = 16 << 10;

/// The reply side of a connection: small pieces are coalesced into one
/// buffer; large read data is written straight from the request buffer
/// together with whatever is pending, in one vectored write.
struct ReplyWriter {
    inner: WriteBox,
    pending: Vec<u8>,
    structured: bool,
    metrics: Arc<ExportMetrics>,
}

impl ReplyWriter {
    async fn reply(&mut self, reply: Reply, shared: &ServerState) -> io::Result<()> {
        let structured = self.structured;
        let Request { kind, len, started, .. } = reply.request;
        let failed = matches!(reply.body, Body::Error { .. });
        write_reply(self, reply, structured, shared).await?;
        // Up to the reply entering the socket buffer (a small reply may
        // still wait in `pending` for the batch it belongs to).
        self.metrics.answered(kind, len, failed, started.elapsed());
        Ok(())
    }

    async fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.pending.len() + bytes.len() > PENDING_MAX {
            self.send_pending().await?;
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    async fn data(&mut self, header: &[u8], body: &[u8]) -> io::Result<()> {
        if body.len() < DIRECT_MIN {
            self.push(header).await?;
            return self.push(body).await;
        }
        let pending = std::mem::take(&mut self.pending);
        let result = write_all_vectored(&mut self.inner, &mut [&pending, header, body]).await;
        self.pending = pending;
        self.pending.clear();
        result
    }

    async fn send_pending(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.inner.write_all(&self.pending).await?;
            self.pending.clear();
        }
        Ok(())
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.send_pending().await?;
        self.inner.flush().await
    }
}

async fn write_reply(
    out: &mut ReplyWriter,
    reply: Reply,
    structured: bool,
    shared: &ServerState,
) -> io::Result<()> {
    let Reply { request, body, _held } = reply;
    let handle = request.handle.to_be_bytes();
    let simple = |error: u32| {
        let mut header = [0u8; 16];
        header[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        header[4..8].copy_from_slice(&error.to_be_bytes());
        header[8..].copy_from_slice(&handle);
        header
    };
    let chunk = |kind: u16, len: u32| {
        let mut header = [0u8; 20];
        header[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        header[4..6].copy_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
        header[6..8].copy_from_slice(&kind.to_be_bytes());
        header[8..16].copy_from_slice(&handle);
        header[16..].copy_from_slice(&len.to_be_bytes());
        header
    };
    match body {
        Body::Data(buffer) => {
            let mut header = [0u8; 28];
            let header_len = if structured {
                header[..20].copy_from_slice(&chunk(REPLY_TYPE_OFFSET_DATA, request.len + 8));
                header[20..].copy_from_slice(&request.offset.to_be_bytes());
                28
            } else {
                header[..16].copy_from_slice(&simple(0));
                16
            };
            out.data(&header[..header_len], &buffer).await?;
            shared.pool.give(buffer);
        }
        Body::Done if structured && request.kind == CMD_READ => {
            out.push(&chunk(REPLY_TYPE_NONE, 0)).await?;
        }
        Body::Done => out.push(&simple(0)).await?,
        Body::Extent { len, flags } => {
            let mut reply = [0u8; 32];
            reply[..20].copy_from_slice(&chunk(REPLY_TYPE_BLOCK_STATUS, 12));
            reply[20..24].copy_from_slice(&BASE_ALLOCATION_ID.to_be_bytes());
            reply[24..28].copy_from_slice(&len.to_be_bytes());
            reply[28..].copy_from_slice(&flags.to_be_bytes());
            out.push(&reply).await?;
        }
        Body::Error { errno, message } => {
            shared.stats.request_errors.fetch_add(1, Ordering::Relaxed);
            if structured {
                let message = &message.as_bytes()[..message.len().min(MAX_STRING)];
                out.push(&chunk(REPLY_TYPE_ERROR, 6 + message.len() as u32)).await?;
                out.push(&errno.to_be_bytes()).await?;
                out.push(&(message.len() as u16).to_be_bytes()).await?;
                out.push(message).await?;
            } else {
                out.push(&simple(errno)).await?;
            }
        }
    }
    Ok(())
}

/// Writes every slice in order with as few system calls as the stream
/// allows (one, unless the socket buffer fills).
async fn write_all_vectored(out: &mut WriteBox, parts: &mut [&[u8]; 3]) -> io::Result<()> {
    let mut first = 0;
    while first < parts.len() {
        if parts[first].is_empty() {
            first += 1;
            continue;
        }
        let mut slices = [std::io::IoSlice::new(&[]); 3];
        for (slice, part) in slices.iter_mut().zip(&parts[first..]) {
            *slice = std::io::IoSlice::new(part);
        }
        let mut written = out.write_vectored(&slices[..parts.len() - first]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let take = written.min(parts[first].len());
            parts[first] = &parts[first][take..];
            written -= take;
            if parts[first].is_empty() {
                first += 1;
            }
        }
    }
    Ok(())
}

/// The reply half of a connection, failing for good once the client has
/// accepted no byte for `limit` while replies wait: a client that never
/// reads its replies is then dropped, and what its requests hold (reply
/// buffers, the in-flight budget) is released.
struct StallGuard {
    inner: WriteBox,
    limit: Duration,
    /// Armed while a write waits on a full socket.
    deadline: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
    failed: bool,
}

impl StallGuard {
    fn new(inner: WriteBox, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            armed: false,
            failed: false,
        }
    }

    fn guard<T>(
        &mut self,
        cx: &mut TaskContext<'_>,
        op: impl FnOnce(Pin<&mut WriteBox>, &mut TaskContext<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.failed {
            return Poll::Ready(Err(stalled(self.limit, "read no reply byte")));
        }
        match op(Pin::new(&mut self.inner), cx) {
            Poll::Ready(result) => {
                self.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !self.armed {
                    self.armed = true;
                    let at = tokio::time::Instant::now() + self.limit;
                    self.deadline.as_mut().reset(at);
                }
                if self.deadline.as_mut().poll(cx).is_ready() {
                    self.failed = true;
                    return Poll::Ready(Err(stalled(self.limit, "read no reply byte")));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_shutdown(cx))
    }
}
