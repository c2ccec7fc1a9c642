//! A raw NBD client over an in-memory pipe to [`Server::serve_stream`],
//! speaking the protocol with the constants of `rampart_nbd::proto`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rampart_nbd::proto::*;
use rampart_nbd::{BlockDevice, Export, Server, ServerConfig};
use rampart_test_support::nbd::{
    chunk_header, greeting_flags, info_export, option_bytes, option_reply_header, simple_reply,
};
pub use rampart_test_support::nbd::{
    info_payload, meta_context_payload, request_bytes, Chunk, OptionReply,
};
use rampart_volume::MemDevice;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::task::JoinHandle;

/// The size of the exports these tests serve.
pub const SIZE: u64 = 1 << 20;

/// An export of [`SIZE`] bytes in memory named `name`.
pub fn export(name: &str, device: Arc<dyn BlockDevice>) -> Export {
    Export { name: name.into(), description: format!("{name} in memory"), device, read_only: false }
}

/// A memory device of [`SIZE`] bytes whose byte `i` is `i % 251`.
pub fn patterned() -> Arc<dyn BlockDevice> {
    let device = MemDevice::new(SIZE as usize);
    let pattern: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    device.write_at(&pattern, 0).unwrap();
    Arc::new(device)
}

/// A raw client over `S`: the in-memory pipe, or TLS over it after
/// `NBD_OPT_STARTTLS`.
pub struct Client<S = DuplexStream> {
    stream: S,
    /// The server's side of the connection: how it ended.
    pub served: JoinHandle<io::Result<()>>,
}

/// How long a test waits for any one reply.
const PATIENCE: Duration = Duration::from_secs(10);

impl Client {
    /// Connects to a fresh server of `config` and reads its greeting
    /// (fixed newstyle, no zeroes offered).
    pub async fn connect(config: ServerConfig) -> Self {
        let server = Server::new(config).unwrap();
        let (mut stream, theirs) = tokio::io::duplex(4 << 20);
        let served = tokio::spawn(async move { server.serve_stream(theirs, "test").await });
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting).await.unwrap();
        assert_eq!(greeting_flags(&greeting), FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        Self { stream, served }
    }

    /// [`Client::connect`] to one export, then the client flags.
    pub async fn haggle(device: Arc<dyn BlockDevice>) -> Self {
        let mut client = Self::connect(ServerConfig::new(vec![export("", device)])).await;
        client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
        client
    }

    /// [`Client::haggle`], structured replies if `structured` (with
    /// `base:allocation`), and `NBD_OPT_GO` to the export.
    pub async fn open(device: Arc<dyn BlockDevice>, structured: bool) -> Self {
        let mut client = Self::haggle(device).await;
        if structured {
            client.option(OPT_STRUCTURED_REPLY, &[]).await;
            assert_eq!(client.option_reply().await.kind, REP_ACK);
            client.option(OPT_SET_META_CONTEXT, &meta_context_payload("", BASE_ALLOCATION)).await;
            assert_eq!(client.option_reply().await.kind, REP_META_CONTEXT);
            assert_eq!(client.option_reply().await.kind, REP_ACK);
        }
        let (size, _) = client.go("").await;
        assert_eq!(size, SIZE);
        client
    }

    /// `NBD_OPT_STARTTLS`, acknowledged, then a TLS handshake over the pipe
    /// that trusts only `root`; the client goes on over TLS.
    pub async fn starttls(
        mut self,
        root: rustls_pki_types::CertificateDer<'static>,
    ) -> Client<tokio_rustls::client::TlsStream<DuplexStream>> {
        self.option(OPT_STARTTLS, &[]).await;
        let reply = self.option_reply().await;
        assert_eq!((reply.option, reply.kind), (OPT_STARTTLS, REP_ACK), "{reply:?}");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(root).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let stream = tokio::time::timeout(
            PATIENCE,
            tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, self.stream),
        )
        .await
        .expect("no TLS handshake from the server")
        .unwrap();
        Client { stream, served: self.served }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    pub async fn send_flags(&mut self, flags: u32) {
        self.send(&flags.to_be_bytes()).await;
    }

    /// Sends option `option` with `data`.
    pub async fn option(&mut self, option: u32, data: &[u8]) {
        self.send(&option_bytes(option, data)).await;
    }

    pub async fn read(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        tokio::time::timeout(PATIENCE, self.stream.read_exact(&mut bytes))
            .await
            .expect("no answer from the server")
            .unwrap();
        bytes
    }

    pub async fn option_reply(&mut self) -> OptionReply {
        let header = self.read(20).await;
        let (option, kind, len) = option_reply_header(header.as_slice().try_into().unwrap());
        let data = self.read(len as usize).await;
        OptionReply { option, kind, data }
    }

    /// `NBD_OPT_GO` to `name` with no information requests; the size and
    /// transmission flags of `NBD_INFO_EXPORT`.
    pub async fn go(&mut self, name: &str) -> (u64, u16) {
        self.option(OPT_GO, &info_payload(name, &[])).await;
        let mut export = None;
        loop {
            let reply = self.option_reply().await;
            assert_eq!(reply.option, OPT_GO, "{reply:?}");
            match reply.kind {
                REP_ACK => return export.expect("no NBD_INFO_EXPORT before the ACK"),
                REP_INFO => export = info_export(&reply).or(export),
                other => panic!("GO answered {other:#x}: {reply:?}"),
            }
        }
    }

    /// Sends a request header.
    pub async fn request(&mut self, flags: u16, kind: u16, handle: u64, offset: u64, len: u32) {
        self.send(&request_bytes(flags, kind, handle, offset, len)).await;
    }

    /// A simple reply's (error, handle).
    pub async fn simple_reply(&mut self) -> (u32, u64) {
        simple_reply(self.read(16).await.as_slice().try_into().unwrap())
    }

    pub async fn chunk(&mut self) -> Chunk {
        let (mut chunk, len) = chunk_header(self.read(20).await.as_slice().try_into().unwrap());
        chunk.payload = self.read(len as usize).await;
        chunk
    }

    /// A simple read; `Err(errno)` when refused.
    pub async fn simple_read(
        &mut self,
        handle: u64,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, u32> {
        self.request(0, CMD_READ, handle, offset, len).await;
        let (error, got) = self.simple_reply().await;
        assert_eq!(got, handle);
        if error != 0 {
            return Err(error);
        }
        Ok(self.read(len as usize).await)
    }

    /// A simple write; the reply's error.
    pub async fn simple_write(&mut self, handle: u64, offset: u64, data: &[u8], flags: u16) -> u32 {
        let len = u32::try_from(data.len()).unwrap();
        let mut bytes = request_bytes(flags, CMD_WRITE, handle, offset, len);
        bytes.extend_from_slice(data);
        self.send(&bytes).await;
        let (error, got) = self.simple_reply().await;
        assert_eq!(got, handle);
        error
    }

    /// The server closes the connection; what serving it returned.
    pub async fn closed(mut self) -> io::Result<()> {
        let mut rest = Vec::new();
        tokio::time::timeout(PATIENCE, self.stream.read_to_end(&mut rest))
            .await
            .expect("the server kept the connection open")
            .unwrap();
        assert!(rest.is_empty(), "sent before closing: {rest:?}");
        tokio::time::timeout(PATIENCE, self.served).await.unwrap().unwrap()
    }
}
