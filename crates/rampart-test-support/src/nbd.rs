//! The NBD wire format from a client's side, with the constants of
//! `rampart_nbd::proto`: request and option encoders, reply decoders, and
//! a blocking raw client for protocol tests over any stream.
//!
//! The encoders and decoders are shared with the asynchronous in-memory
//! client of `rampart-nbd`'s own tests; [`Client`] drives a running server
//! over a Unix socket.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rampart_nbd::proto::{
    CMD_READ, CMD_WRITE, IHAVEOPT, INFO_EXPORT, NBDMAGIC, OPTION_REPLY_MAGIC, OPT_GO,
    OPT_STRUCTURED_REPLY, REP_ACK, REP_INFO, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC,
    STRUCTURED_REPLY_MAGIC,
};

/// The largest option reply or chunk payload a test accepts.
const MAX_PAYLOAD: u32 = 64 << 20;

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

/// A transmission request header.
#[must_use]
pub fn request_bytes(flags: u16, kind: u16, handle: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(28);
    bytes.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    bytes.extend_from_slice(&flags.to_be_bytes());
    bytes.extend_from_slice(&kind.to_be_bytes());
    bytes.extend_from_slice(&handle.to_be_bytes());
    bytes.extend_from_slice(&offset.to_be_bytes());
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes
}

/// Option `option` with `data`, as sent during haggling.
#[must_use]
pub fn option_bytes(option: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = IHAVEOPT.to_be_bytes().to_vec();
    bytes.extend_from_slice(&option.to_be_bytes());
    bytes.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// The payload of `NBD_OPT_INFO`/`NBD_OPT_GO`: the export name and the
/// information `requests`.
#[must_use]
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
#[must_use]
pub fn meta_context_payload(name: &str, query: &str) -> Vec<u8> {
    let mut data = u32::try_from(name.len()).unwrap().to_be_bytes().to_vec();
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&1u32.to_be_bytes());
    data.extend_from_slice(&u32::try_from(query.len()).unwrap().to_be_bytes());
    data.extend_from_slice(query.as_bytes());
    data
}

fn be_u16(bytes: &[u8]) -> u16 {
    u16::from_be_bytes(bytes[..2].try_into().unwrap())
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().unwrap())
}

fn be_u64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes[..8].try_into().unwrap())
}

/// The server's 18-byte greeting: its handshake flags.
#[must_use]
pub fn greeting_flags(greeting: &[u8; 18]) -> u16 {
    assert_eq!(be_u64(&greeting[..8]), NBDMAGIC, "bad greeting magic");
    assert_eq!(be_u64(&greeting[8..16]), IHAVEOPT, "not a newstyle greeting");
    be_u16(&greeting[16..])
}

/// A 20-byte option reply header: (option, reply type, payload length).
#[must_use]
pub fn option_reply_header(header: &[u8; 20]) -> (u32, u32, u32) {
    assert_eq!(be_u64(&header[..8]), OPTION_REPLY_MAGIC, "bad option reply magic");
    let len = be_u32(&header[16..]);
    assert!(len <= MAX_PAYLOAD, "option reply of {len} bytes");
    (be_u32(&header[8..]), be_u32(&header[12..]), len)
}

/// A 16-byte simple reply: (error, handle).
#[must_use]
pub fn simple_reply(header: &[u8; 16]) -> (u32, u64) {
    assert_eq!(be_u32(header), SIMPLE_REPLY_MAGIC, "expected a simple reply, got {header:02x?}");
    (be_u32(&header[4..]), be_u64(&header[8..]))
}

/// A 20-byte structured reply chunk header: the chunk without its
/// payload, and the payload's length.
#[must_use]
pub fn chunk_header(header: &[u8; 20]) -> (Chunk, u32) {
    assert_eq!(
        be_u32(header),
        STRUCTURED_REPLY_MAGIC,
        "expected a structured reply chunk, got {header:02x?}"
    );
    let len = be_u32(&header[16..]);
    assert!(len <= MAX_PAYLOAD, "chunk of {len} bytes");
    let chunk = Chunk {
        flags: be_u16(&header[4..]),
        kind: be_u16(&header[6..]),
        handle: be_u64(&header[8..]),
        payload: Vec::new(),
    };
    (chunk, len)
}

/// The (size, transmission flags) of an `NBD_INFO_EXPORT` reply, or `None`
/// for another information type.
#[must_use]
pub fn info_export(reply: &OptionReply) -> Option<(u64, u16)> {
    if reply.kind != REP_INFO || reply.data.len() < 12 || be_u16(&reply.data) != INFO_EXPORT {
        return None;
    }
    Some((be_u64(&reply.data[2..]), be_u16(&reply.data[10..])))
}

/// A blocking raw client over `S` (a Unix socket by default).
#[derive(Debug)]
pub struct Client<S = UnixStream> {
    pub stream: S,
}

impl Client<UnixStream> {
    /// Connects to `socket` and reads the server's greeting, which must
    /// offer fixed newstyle.
    #[must_use]
    pub fn connect(socket: &Path) -> Self {
        let stream = UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", socket.display()));
        stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut client = Self { stream };
        let flags = greeting_flags(&client.read_array());
        assert_eq!(flags & 1, 1, "the server must offer fixed newstyle");
        client
    }

    /// Connects and sends client flags FIXED_NEWSTYLE | NO_ZEROES.
    #[must_use]
    pub fn connect_flags(socket: &Path) -> Self {
        let mut client = Self::connect(socket);
        client.send(&3u32.to_be_bytes());
        client
    }

    /// The whole handshake to transmission on export `name`; `structured`
    /// negotiates structured replies first. Returns the export's size.
    #[must_use]
    pub fn open(socket: &Path, name: &str, structured: bool) -> (Self, u64) {
        let mut client = Self::connect_flags(socket);
        if structured {
            client.option(OPT_STRUCTURED_REPLY, &[]);
            let reply = client.option_reply();
            assert_eq!(reply.kind, REP_ACK, "structured replies refused");
        }
        let (size, _) = client.go(name);
        (client, size)
    }
}

impl<S: Read + Write> Client<S> {
    /// Writes all of `bytes` (panics on an error).
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap_or_else(|e| panic!("send failed: {e}"));
    }

    /// Writes `bytes`, tolerating a server that already closed.
    pub fn send_lossy(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    pub fn read(&mut self, n: usize) -> Vec<u8> {
        let mut buffer = vec![0u8; n];
        self.stream.read_exact(&mut buffer).unwrap_or_else(|e| panic!("reading {n} bytes: {e}"));
        buffer
    }

    fn read_array<const N: usize>(&mut self) -> [u8; N] {
        let mut buffer = [0u8; N];
        self.stream.read_exact(&mut buffer).unwrap_or_else(|e| panic!("reading {N} bytes: {e}"));
        buffer
    }

    pub fn option(&mut self, option: u32, data: &[u8]) {
        self.send(&option_bytes(option, data));
    }

    pub fn option_reply(&mut self) -> OptionReply {
        let (option, kind, len) = option_reply_header(&self.read_array());
        let data = self.read(len as usize);
        OptionReply { option, kind, data }
    }

    /// `NBD_OPT_GO` for `name` (no information requests); the export's
    /// (size, transmission flags).
    pub fn go(&mut self, name: &str) -> (u64, u16) {
        self.option(OPT_GO, &info_payload(name, &[]));
        let mut export = None;
        loop {
            let reply = self.option_reply();
            assert_eq!(reply.option, OPT_GO, "{reply:?}");
            match reply.kind {
                REP_INFO => export = info_export(&reply).or(export),
                REP_ACK => return export.expect("GO acknowledged without NBD_INFO_EXPORT"),
                other => {
                    panic!("GO failed: reply {other:#x} {:?}", String::from_utf8_lossy(&reply.data))
                }
            }
        }
    }

    pub fn request(&mut self, flags: u16, kind: u16, handle: u64, offset: u64, len: u32) {
        self.send(&request_bytes(flags, kind, handle, offset, len));
    }

    /// A simple reply: (error, handle).
    pub fn simple_reply(&mut self) -> (u32, u64) {
        simple_reply(&self.read_array())
    }

    pub fn chunk(&mut self) -> Chunk {
        let (mut chunk, len) = chunk_header(&self.read_array());
        chunk.payload = self.read(len as usize);
        chunk
    }

    /// A read on a simple-reply connection; `Ok(data)` or `Err(errno)`.
    pub fn simple_read(&mut self, handle: u64, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.request(0, CMD_READ, handle, offset, len);
        let (error, got) = self.simple_reply();
        assert_eq!(got, handle);
        if error == 0 {
            Ok(self.read(len as usize))
        } else {
            Err(error)
        }
    }

    /// A write on a simple-reply connection; the reply's error.
    pub fn simple_write(&mut self, handle: u64, offset: u64, data: &[u8], flags: u16) -> u32 {
        let len = u32::try_from(data.len()).unwrap();
        let mut bytes = request_bytes(flags, CMD_WRITE, handle, offset, len);
        bytes.extend_from_slice(data);
        self.send(&bytes);
        let (error, got) = self.simple_reply();
        assert_eq!(got, handle);
        error
    }

    /// Asserts that the server closes the connection (EOF or reset) within
    /// the read timeout, reading and discarding anything before it.
    #[track_caller]
    pub fn expect_closed(&mut self, after: &str) {
        let mut buffer = [0u8; 4096];
        loop {
            match self.stream.read(&mut buffer) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("the server did not close the connection after {after}: {e}"),
            }
        }
    }
}
