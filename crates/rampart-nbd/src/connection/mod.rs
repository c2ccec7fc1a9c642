//! A client's byte stream, whatever carries it: plain TCP, a Unix socket,
//! TLS over either (in rustls or, over TCP, in the kernel), or any stream a
//! caller hands to `Server::serve_stream`; and the upgrade to TLS that
//! `NBD_OPT_STARTTLS` asks for. Nothing here knows the NBD protocol.

mod ktls;
mod tls;

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

pub use tls::tls_config;
pub(crate) use tls::TlsUpgrade;

pub(crate) type ReadBox = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type WriteBox = Box<dyn AsyncWrite + Send + Unpin>;

/// A connection: plain TCP, Unix, or TLS over either.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {
    /// Separate halves for the request reader and the reply writer. Plain
    /// sockets split without a lock; TLS shares one session behind one.
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox);

    /// The TCP socket itself, for kernel TLS; any other stream comes back.
    fn into_tcp(self: Box<Self>) -> Result<tokio::net::TcpStream, BoxStream>;
}

impl Stream for tokio::net::TcpStream {
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox) {
        let (read, write) = (*self).into_split();
        (Box::new(read), Box::new(write))
    }

    fn into_tcp(self: Box<Self>) -> Result<tokio::net::TcpStream, BoxStream> {
        Ok(*self)
    }
}

impl Stream for tokio::net::UnixStream {
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox) {
        let (read, write) = (*self).into_split();
        (Box::new(read), Box::new(write))
    }

    fn into_tcp(self: Box<Self>) -> Result<tokio::net::TcpStream, BoxStream> {
        Err(self)
    }
}

impl Stream for tokio_rustls::server::TlsStream<BoxStream> {
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox) {
        let (read, write) = tokio::io::split(*self);
        (Box::new(read), Box::new(write))
    }

    fn into_tcp(self: Box<Self>) -> Result<tokio::net::TcpStream, BoxStream> {
        Err(self)
    }
}

/// Any other byte stream (see `Server::serve_stream`): the halves share
/// it behind a lock, as TLS does.
pub(crate) struct AnyStream<S>(pub(crate) S);

impl<S: AsyncRead + Unpin> AsyncRead for AnyStream<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AnyStream<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for AnyStream<S> {
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox) {
        let (read, write) = tokio::io::split(*self);
        (Box::new(read), Box::new(write))
    }

    fn into_tcp(self: Box<Self>) -> Result<tokio::net::TcpStream, BoxStream> {
        Err(self)
    }
}

pub(crate) type BoxStream = Box<dyn Stream>;
