//! Kernel TLS for connections over TCP (`ServerConfig::kernel_tls`).
//!
//! rustls runs the handshake; its traffic keys then go to the kernel
//! (`rampart_crypto::ktls`), which seals replies as they are sent and opens
//! requests as they arrive. Replies are written from the server's own
//! buffers straight into the socket, with no copy into a user-space record
//! buffer. Where the kernel has no `tls` module the connection stays in
//! rustls, as without the option.
//!
//! Keys are installed once: a kernel TLS session here never changes keys
//! (Linux 6.1, the kernel this was tested under, cannot take new ones), so
//! a client's TLS 1.3 key update ends the connection, and so does reaching
//! the cipher's record limit (AES-GCM: 2^23 or 2^24 records, at least 128
//! GiB of replies), where rustls would have changed keys on its own. Both
//! are logged with their reason.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rampart_crypto::ktls::{
    ktls_attach, ktls_enable, ktls_recv, ktls_send_record, KtlsCipher, KtlsDirection, KtlsKeys,
    KtlsVersion, RECORD_ALERT, RECORD_APPLICATION_DATA, RECORD_HANDSHAKE,
};
use rampart_crypto::SecretBytes;
use rustls::{ConnectionTrafficSecrets, ProtocolVersion, SupportedCipherSuite};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::{BoxStream, ReadBox, Stream, WriteBox};

/// The largest plaintext of one TLS record.
const RECORD_PLAINTEXT: usize = 1 << 14;

/// The TLS handshake over `tcp`, then the session handed to the kernel.
/// `Ok(Err(tcp))`: the kernel has no `tls` module (the reason is in the
/// error); the caller runs TLS in user space on the untouched socket.
pub(crate) async fn accept(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
) -> io::Result<Result<BoxStream, (TcpStream, io::Error)>> {
    if let Err(error) = ktls_attach(tcp.as_fd()) {
        return Ok(Err((tcp, error)));
    }
    let tls = acceptor.accept(RecordPacer::new(tcp)).await?;
    let (pacer, mut connection) = tls.into_inner();
    let mut tcp = pacer.into_inner()?;
    // Anything rustls still has to send (session tickets) goes out under
    // its keys, before the kernel's record numbers take over.
    if connection.wants_write() {
        let mut pending = Vec::new();
        while connection.wants_write() {
            connection.write_tls(&mut pending)?;
        }
        tcp.write_all(&pending).await?;
    }
    let early = take_early_plaintext(&mut connection)?;
    let version = match connection.protocol_version() {
        Some(ProtocolVersion::TLSv1_3) => KtlsVersion::Tls13,
        Some(ProtocolVersion::TLSv1_2) => KtlsVersion::Tls12,
        other => {
            return Err(io::Error::other(format!(
                "kernel TLS: unexpected protocol version {other:?}"
            )))
        }
    };
    let record_limit = match connection.negotiated_cipher_suite() {
        Some(SupportedCipherSuite::Tls13(suite)) => suite.common.confidentiality_limit,
        Some(SupportedCipherSuite::Tls12(suite)) => suite.common.confidentiality_limit,
        None => return Err(io::Error::other("kernel TLS: no cipher suite negotiated")),
    };
    let secrets = connection
        .dangerous_extract_secrets()
        .map_err(|e| io::Error::other(format!("kernel TLS: cannot take the session keys: {e}")))?;
    let send = kernel_keys(secrets.tx)?;
    let cipher = send.cipher;
    for (direction, keys) in
        [(KtlsDirection::Send, send), (KtlsDirection::Receive, kernel_keys(secrets.rx)?)]
    {
        ktls_enable(tcp.as_fd(), version, direction, &keys).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("kernel TLS: the kernel refused the {direction:?} key: {e}"),
            )
        })?;
    }
    tracing::debug!(?version, ?cipher, "TLS session handed to the kernel");
    let tcp = Arc::new(tcp);
    Ok(Ok(Box::new(KernelTls {
        reader: KernelTlsReader { tcp: Arc::clone(&tcp), early, at: 0, ended: false },
        writer: KernelTlsWriter { tcp, records: 0, record_limit, closed: false },
    })))
}

/// The plaintext rustls opened beyond the handshake. tokio-rustls reads on
/// while rustls wants to read, so when the client's first application
/// record has already arrived with its Finished, rustls opens it (and stops
/// there: it wants no more while it holds plaintext). The pacer keeps the
/// socket on a record boundary behind it; this plaintext is served first,
/// then the kernel's. More than two records of it is not a client waiting
/// for the handshake to end.
fn take_early_plaintext(connection: &mut rustls::ServerConnection) -> io::Result<Vec<u8>> {
    let mut early = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match std::io::Read::read(&mut connection.reader(), &mut chunk) {
            Ok(0) => return Ok(early),
            Ok(n) if early.len() + n > 2 * RECORD_PLAINTEXT => {
                return Err(io::Error::other("kernel TLS: too much data inside the handshake"))
            }
            Ok(n) => early.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(early),
            Err(e) => return Err(e),
        }
    }
}

fn kernel_keys((sequence, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<KtlsKeys> {
    let (cipher, key, iv) = match &secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (KtlsCipher::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (KtlsCipher::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (KtlsCipher::Chacha20Poly1305, key, iv)
        }
        _ => return Err(io::Error::other("kernel TLS: a cipher the kernel does not offload")),
    };
    Ok(KtlsKeys {
        cipher,
        key: SecretBytes::from_slice(key.as_ref()),
        iv: SecretBytes::from_slice(iv.as_ref()),
        sequence,
    })
}

/// A reader for the handshake that never reads past the end of a TLS
/// record, so that when rustls is done it holds whole records only (whose
/// plaintext is taken out) and the kernel starts at the next record's
/// header.
/// Only the five header bytes of each record are looked at; the length
/// bounds nothing but how far the next read may go.
struct RecordPacer {
    tcp: TcpStream,
    header: [u8; 5],
    header_len: usize,
    /// Bytes of the current record's body still to pass.
    body_left: usize,
}

impl RecordPacer {
    fn new(tcp: TcpStream) -> Self {
        Self { tcp, header: [0; 5], header_len: 0, body_left: 0 }
    }

    /// The socket, if the handshake ended on a record boundary.
    fn into_inner(self) -> io::Result<TcpStream> {
        if self.header_len != 0 || self.body_left != 0 {
            return Err(io::Error::other("kernel TLS: the handshake ended inside a record"));
        }
        Ok(self.tcp)
    }
}

impl AsyncRead for RecordPacer {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let in_header = this.body_left == 0;
        let want = if in_header { 5 - this.header_len } else { this.body_left };
        let mut chunk = [0u8; 4096];
        let take = want.min(chunk.len()).min(buf.remaining());
        if take == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut part = ReadBuf::new(&mut chunk[..take]);
        ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut part))?;
        let got = part.filled();
        if in_header {
            this.header[this.header_len..this.header_len + got.len()].copy_from_slice(got);
            this.header_len += got.len();
            if this.header_len == 5 {
                this.body_left = usize::from(u16::from_be_bytes([this.header[3], this.header[4]]));
                this.header_len = 0;
            }
        } else {
            this.body_left -= got.len();
        }
        buf.put_slice(got);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RecordPacer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// A TCP connection whose TLS records the kernel seals and opens. The
/// option haggling after STARTTLS reads and writes through it whole; the
/// transmission phase takes its two halves.
struct KernelTls {
    reader: KernelTlsReader,
    writer: KernelTlsWriter,
}

impl Stream for KernelTls {
    fn into_halves(self: Box<Self>) -> (ReadBox, WriteBox) {
        (Box::new(self.reader), Box::new(self.writer))
    }

    fn into_tcp(self: Box<Self>) -> Result<TcpStream, BoxStream> {
        Err(self)
    }
}

impl AsyncRead for KernelTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().reader).poll_read(cx, buf)
    }
}

impl AsyncWrite for KernelTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().writer).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().writer).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_shutdown(cx)
    }
}

struct KernelTlsReader {
    tcp: Arc<TcpStream>,
    /// Plaintext rustls had already opened when the session moved.
    early: Vec<u8>,
    at: usize,
    ended: bool,
}

impl AsyncRead for KernelTlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.early.len() {
            let n = (this.early.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.early[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        poll_read_records(&this.tcp, &mut this.ended, cx, buf)
    }
}

/// Reads application data; a close_notify alert ends the stream, any
/// other alert or a handshake record (a key update the kernel cannot
/// follow) is an error that ends the connection.
fn poll_read_records(
    tcp: &TcpStream,
    ended: &mut bool,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    if *ended || buf.remaining() == 0 {
        return Poll::Ready(Ok(()));
    }
    loop {
        ready!(tcp.poll_read_ready(cx))?;
        let unfilled = buf.initialize_unfilled();
        match tcp.try_io(Interest::READABLE, || ktls_recv(tcp.as_fd(), unfilled)) {
            Ok((RECORD_APPLICATION_DATA, n)) => {
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Ok((RECORD_ALERT, n)) => {
                let alert = &buf.initialize_unfilled()[..n];
                *ended = true;
                // A close_notify (description 0) is the end of the stream.
                if alert.get(1) == Some(&0) || n < 2 {
                    return Poll::Ready(Ok(()));
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    format!("the client sent TLS alert {}", alert[1]),
                )));
            }
            Ok((RECORD_HANDSHAKE, _)) => {
                *ended = true;
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the client sent a TLS handshake message after the handshake (a key \
                     update?), which kernel TLS cannot follow",
                )));
            }
            Ok((other, _)) => {
                *ended = true;
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the client sent a TLS record of type {other}"),
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// Sends the close_notify alert, once the socket takes it.
fn poll_close_notify(tcp: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        match tcp
            .try_io(Interest::WRITABLE, || ktls_send_record(tcp.as_fd(), RECORD_ALERT, &[1, 0]))
        {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return Poll::Ready(other),
        }
    }
}

struct KernelTlsWriter {
    tcp: Arc<TcpStream>,
    /// Records sealed so far, counted from above: one per started 16 KiB
    /// of each write (the kernel ends a record with each write).
    records: u64,
    record_limit: u64,
    closed: bool,
}

impl KernelTlsWriter {
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let most = (total.div_ceil(RECORD_PLAINTEXT) as u64).max(1);
        if self.records.saturating_add(most) >= self.record_limit {
            return Poll::Ready(Err(io::Error::other(format!(
                "kernel TLS: the connection reached its cipher's limit of {} records and the \
                 kernel cannot change keys; closing it (the client may reconnect)",
                self.record_limit
            ))));
        }
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            match self.tcp.try_write_vectored(bufs) {
                Ok(n) => {
                    self.records += (n.div_ceil(RECORD_PLAINTEXT) as u64).max(1);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for KernelTlsWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closed {
            ready!(poll_close_notify(&this.tcp, cx))?;
            this.closed = true;
        }
        Poll::Ready(socket2::SockRef::from(&*this.tcp).shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TLS 1.3 server and client over memory, handshaken up to the point
    /// where the client has sent its Finished (held in the returned bytes,
    /// not yet given to the server), with `early` written by the client
    /// right after it.
    fn finished_with_early_data(early: &[u8]) -> (rustls::ServerConnection, Vec<u8>) {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
        let mut client =
            rustls::ClientConnection::new(Arc::new(client_config), "localhost".try_into().unwrap())
                .unwrap();
        let mut wire = Vec::new();
        // ClientHello to the server, its whole flight back.
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        feed(&mut server, &wire);
        wire.clear();
        while server.wants_write() {
            server.write_tls(&mut wire).unwrap();
        }
        let mut flight = &wire[..];
        while !flight.is_empty() {
            client.read_tls(&mut flight).unwrap();
            client.process_new_packets().unwrap();
        }
        assert!(!client.is_handshaking());
        // The client's Finished and, in the same flight, its first records.
        std::io::Write::write_all(&mut client.writer(), early).unwrap();
        let mut wire = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        (server, wire)
    }

    /// What a reader of the socket gives rustls: everything it will take.
    fn feed(server: &mut rustls::ServerConnection, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if server.read_tls(&mut bytes).is_err() {
                break; // its plaintext buffer is full, as tokio-rustls would stop
            }
            server.process_new_packets().unwrap();
        }
    }

    #[test]
    fn a_request_that_came_with_the_clients_finished_is_served_first() {
        for early in [&b""[..], b"\x25\x60\x95\x13 an NBD request", &[9u8; 2 * RECORD_PLAINTEXT]] {
            let (mut server, wire) = finished_with_early_data(early);
            feed(&mut server, &wire);
            assert!(!server.is_handshaking());
            let taken = take_early_plaintext(&mut server).unwrap();
            // rustls stops opening records once it holds a record's worth;
            // what it opened is handed on whole and in order.
            assert!(!taken.is_empty() || early.is_empty());
            assert_eq!(taken[..], early[..taken.len()]);
            if early.len() < RECORD_PLAINTEXT {
                assert_eq!(taken, early);
            }
            // Nothing is left behind in rustls.
            assert!(take_early_plaintext(&mut server).unwrap().is_empty());
        }
    }

    #[tokio::test]
    async fn the_handshake_reader_never_reads_past_a_record() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // Two records (a 300-byte body split across the pacer's reads),
        // then what the kernel must see: the next record's first bytes.
        let mut sent = vec![22, 3, 3, 0, 3, b'a', b'b', b'c', 22, 3, 3, 1, 44];
        sent.extend(std::iter::repeat_n(7u8, 300));
        sent.extend_from_slice(b"\x17\x03\x03");
        client.write_all(&sent).await.unwrap();
        let records = 5 + 3 + 5 + 300;
        let mut pacer = RecordPacer::new(server);
        let mut got = Vec::new();
        let mut reads = Vec::new();
        while got.len() < records {
            let mut buf = [0u8; 1024];
            let n = pacer.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
            reads.push(got.len());
        }
        assert_eq!(got, sent[..records]);
        // Every read ended on a header or record boundary.
        for end in reads {
            assert!([5, 8, 13, records].contains(&end), "a read ended at {end}");
        }
        let mut tcp = pacer.into_inner().unwrap();
        let mut rest = [0u8; 3];
        tcp.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"\x17\x03\x03");
    }

    #[tokio::test]
    async fn the_writer_stops_before_the_ciphers_record_limit() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut writer =
            KernelTlsWriter { tcp: Arc::new(server), records: 0, record_limit: 4, closed: false };
        // One record, then two (16 KiB + 1 byte): three of the four.
        writer.write_all(&[1; RECORD_PLAINTEXT]).await.unwrap();
        writer.write_all(&[2; RECORD_PLAINTEXT + 1]).await.unwrap();
        assert_eq!(writer.records, 3);
        let error = writer.write_all(&[3; 10]).await.unwrap_err();
        assert!(error.to_string().contains("limit of 4 records"), "{error}");
        drop(client);
    }

    #[tokio::test]
    async fn a_handshake_that_stops_inside_a_record_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(&[22, 3, 3, 0, 9, 1, 2]).await.unwrap();
        let mut pacer = RecordPacer::new(server);
        let mut buf = [0u8; 64];
        let mut total = 0;
        while total < 7 {
            total += pacer.read(&mut buf).await.unwrap();
        }
        let error = pacer.into_inner().unwrap_err();
        assert!(error.to_string().contains("inside a record"), "{error}");
    }
}
