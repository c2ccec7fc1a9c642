//! The plain-HTTP endpoint Prometheus scrapes (`GET /metrics`).
//!
//! A minimal HTTP/1.1 responder on tokio rather than hyper: this crate is
//! the NBD protocol and depends on nothing but tokio and rustls, and a
//! scrape is one GET every few seconds from a known collector. Answering
//! it takes reading one request head (bounded: 8 KiB, 10 s) and writing
//! one response with `Connection: close`, which every Prometheus version
//! handles; a general HTTP stack (keep-alive, pipelining, chunked bodies)
//! would add attack surface to the data path's process and nothing a
//! scraper needs.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::ServerHandle;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a scraper has to send its request head and read the response.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes answered at once; further connections are closed at once.
const MAX_SCRAPES: usize = 16;

/// Answers scrapes on `listener` until the task is dropped or aborted.
pub async fn serve_metrics(listener: TcpListener, handle: ServerHandle) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("metrics listener: accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            if tokio::time::timeout(TIMEOUT, answer(stream, &handle)).await.is_err() {
                tracing::debug!(%peer, "metrics scrape timed out");
            }
            drop(slot);
        });
    }
}

async fn answer(mut stream: tokio::net::TcpStream, handle: &ServerHandle) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return respond(&mut stream, "431 Request Header Fields Too Large", "", false).await;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    // The query string (Prometheus sends none; some tools add one) is ignored.
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => {
            let body = handle.metrics_text();
            respond(&mut stream, "200 OK", &body, method == b"HEAD").await
        }
        (b"GET" | b"HEAD", _) => {
            respond(&mut stream, "404 Not Found", "metrics are at /metrics\n", false).await
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "", false).await,
    }
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let content_type = if status.starts_with("200") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let allow = if status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}
