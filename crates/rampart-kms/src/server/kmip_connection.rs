//! One connection to the KMIP port: the TLS handshake with a mandatory
//! client certificate, the client's identity, then the messages. The port
//! serves both of the KMIP Profiles' transports, told apart by the first
//! byte the client sends: binary TTLV (every message starts with the
//! Request Message tag, whose first byte is 0x42) is served by
//! [`super::kmip::serve_messages`]; an HTTP request (its method, in ASCII
//! letters) by [`super::kmip_http`], as KMIP Additional Message Encodings
//! §2.2 allows a server that serves both on port 5696 to do.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_rustls::TlsAcceptor;

use super::connection::tls_handshake;
use super::kmip::{read_exact_within, serve_messages};
use super::kmip_http;
use super::state::State;
use super::writes;

/// The first byte of every TTLV request (the tag 0x42007B).
const TTLV_FIRST_BYTE: u8 = 0x42;

/// Serves one KMIP connection (from [`super::connection::accept_loop`]).
pub(super) async fn serve_connection(
    state: Arc<State>,
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let limits = state.limits.clone();
    let Some((stream, fp)) =
        tls_handshake(&state, &acceptor, tcp, peer, "kmip.tls.handshake").await
    else {
        return;
    };
    let client = state.identify(&fp).await.ok();
    let mut stream = writes::StallGuard::new(stream, limits.idle_timeout);
    let mut first = [0u8; 1];
    if let Err(error) = read_exact_within(&mut stream, &mut first, limits.idle_timeout).await {
        tracing::debug!("KMIP connection from {peer} ended: {error}");
        return;
    }
    let mut stream = Prefixed { first: Some(first[0]), inner: stream };
    if first[0] == TTLV_FIRST_BYTE {
        if let Err(error) = serve_messages(&state, &fp, &mut stream, limits.idle_timeout).await {
            tracing::debug!("KMIP connection from {peer} ended: {error}");
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
    } else {
        kmip_http::serve(state, fp, client, stream, peer).await;
    }
}

/// A stream with the byte already read from it put back in front.
pub(super) struct Prefixed<S> {
    first: Option<u8>,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if buf.remaining() > 0 {
            if let Some(byte) = self.first.take() {
                buf.put_slice(&[byte]);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
