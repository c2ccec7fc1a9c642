//! A raw NBD client over an in-memory pipe to [`Server::serve_stream`],
//! speaking the protocol with the constants of `rampart_nbd::proto`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rampart_nbd::proto::*;
use rampart_nbd::{BlockDevice, Export, Server, ServerConfig};
use rampart_volume::MemDevice;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
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

/// One option reply.
#[derive(Debug)]
pub struct OptionReply {
    pub option: u32,
    pub kind: u32,
    pub data: Vec<u8>,
}

/// One structured reply chunk.
#[derive(Debug)]
pub struct Chunk {
    pub flags: u16,
    pub kind: u16,
    pub handle: u64,
    pub payload: Vec<u8>,
}

pub struct Client {
    stream: DuplexStream,
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
        assert_eq!(u64::from_be_bytes(greeting[..8].try_into().unwrap()), NBDMAGIC);
        assert_eq!(u64::from_be_bytes(greeting[8..16].try_into().unwrap()), IHAVEOPT);
        let flags = u16::from_be_bytes([greeting[16], greeting[17]]);
        assert_eq!(flags, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
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

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    pub async fn send_flags(&mut self, flags: u32) {
        self.send(&flags.to_be_bytes()).await;
    }

    /// Sends option `option` with `data`.
    pub async fn option(&mut self, option: u32, data: &[u8]) {
        let mut header = IHAVEOPT.to_be_bytes().to_vec();
        header.extend_from_slice(&option.to_be_bytes());
        header.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
        header.extend_from_slice(data);
        self.send(&header).await;
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
        assert_eq!(u64::from_be_bytes(header[..8].try_into().unwrap()), OPTION_REPLY_MAGIC);
        let option = u32::from_be_bytes(header[8..12].try_into().unwrap());
        let kind = u32::from_be_bytes(header[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(header[16..20].try_into().unwrap());
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
                REP_INFO if reply.data[..2] == INFO_EXPORT.to_be_bytes() => {
                    let size = u64::from_be_bytes(reply.data[2..10].try_into().unwrap());
                    export = Some((size, u16::from_be_bytes([reply.data[10], reply.data[11]])));
                }
                REP_INFO => {}
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
        let reply = self.read(16).await;
        assert_eq!(u32::from_be_bytes(reply[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
        let error = u32::from_be_bytes(reply[4..8].try_into().unwrap());
        (error, u64::from_be_bytes(reply[8..16].try_into().unwrap()))
    }

    pub async fn chunk(&mut self) -> Chunk {
        let header = self.read(20).await;
        assert_eq!(u32::from_be_bytes(header[..4].try_into().unwrap()), STRUCTURED_REPLY_MAGIC);
        let flags = u16::from_be_bytes([header[4], header[5]]);
        let kind = u16::from_be_bytes([header[6], header[7]]);
        let handle = u64::from_be_bytes(header[8..16].try_into().unwrap());
        let len = u32::from_be_bytes(header[16..20].try_into().unwrap());
        let payload = self.read(len as usize).await;
        Chunk { flags, kind, handle, payload }
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

pub fn request_bytes(flags: u16, kind: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut head = Vec::with_capacity(28);
    head.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    head.extend_from_slice(&flags.to_be_bytes());
    head.extend_from_slice(&kind.to_be_bytes());
    head.extend_from_slice(&handle.to_be_bytes());
    head.extend_from_slice(&offset.to_be_bytes());
    head.extend_from_slice(&len.to_be_bytes());
    head
}

/// The payload of `NBD_OPT_INFO`/`NBD_OPT_GO`.
pub fn info_payload(name: &str, requests: &[u16]) -> Vec<u8> {
    let mut data = u32::try_from(name.len()).unwrap().to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&u16::try_from(requests.len()).unwrap().to_be_bytes());
    for request in requests {
        data.extend_from_slice(&request.to_be_bytes());
    }
    data
}

/// The payload of `NBD_OPT_{LIST,SET}_META_CONTEXT` with one query.
pub fn meta_context_payload(name: &str, query: &str) -> Vec<u8> {
    let mut data = u32::try_from(name.len()).unwrap().to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&1u32.to_be_bytes());
    data.extend_from_slice(&u32::try_from(query.len()).unwrap().to_be_bytes());
    data.extend_from_slice(query.as_bytes());
    data
}
