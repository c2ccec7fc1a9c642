#![allow(clippy::unwrap_used)]
//! Protocol abuse against `rampart serve`, from a raw Unix-socket client:
//! malformed handshakes, oversized and truncated options, unknown exports,
//! bad request magic, out-of-range and oversized requests, a connection
//! dropped mid-payload, unknown commands and flags. After every case a
//! fresh nbdinfo and nbdcopy by another client still work and see the
//! expected bytes, the server is alive, and its stderr never says
//! "panicked".

use crate::helpers::serve_support as support;

use std::path::Path;
use std::time::Duration;

use support::*;

const SIZE: u64 = MIB;

struct Bench {
    server: Serve,
    socket: std::path::PathBuf,
    data: Vec<u8>,
}

impl Bench {
    /// Another client sees the export whole and unchanged; the server lives.
    #[track_caller]
    fn healthy(&mut self, after: &str) {
        self.server.assert_alive(after);
        let uri = self.server.uri().to_owned();
        let limit = Duration::from_secs(20);
        let size = run_limited("nbdinfo", &["--size", &uri], limit);
        assert!(size.status.success(), "{}", describe(&format!("nbdinfo after {after}"), &size));
        assert_eq!(text(&size.stdout).trim(), SIZE.to_string(), "after {after}");
        let copy = run_limited("nbdcopy", &[uri.as_str(), "-"], limit);
        assert!(copy.status.success(), "{}", describe(&format!("nbdcopy after {after}"), &copy));
        assert_same(&format!("nbdcopy after {after}"), &copy.stdout, &self.data);
        self.server.assert_alive(after);
    }

    fn socket(&self) -> &Path {
        &self.socket
    }
}

fn expect_error(client: &mut RawClient, handle: u64, errno: u32, what: &str) {
    let (error, got) = client.simple_reply();
    assert_eq!(got, handle, "{what}: reply handle");
    assert_eq!(error, errno, "{what}: errno");
}

#[test]
fn protocol_abuse_never_hurts_the_server_or_other_clients() {
    require(&["nbdinfo", "nbdcopy"]);
    let dir = TempDir::new("proto");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let data = random_bytes(8, SIZE as usize);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&data_file), "--key-file", p(&key)]));
    let socket = dir.join("s.sock");
    let server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let mut bench = Bench { server, socket, data };
    bench.healthy("start-up");

    // --- Handshake -------------------------------------------------------

    let mut c = RawClient::connect(bench.socket());
    c.send_lossy(&[0xde, 0xad, 0xbe, 0xef]);
    c.expect_closed("garbage client flags");
    bench.healthy("garbage client flags");

    let mut c = RawClient::connect(bench.socket());
    c.send_lossy(&(1u32 | 1 << 7).to_be_bytes());
    c.expect_closed("unknown client flags");
    bench.healthy("unknown client flags");

    let mut c = RawClient::connect(bench.socket());
    c.send_lossy(&[0x01]);
    drop(c);
    let c = RawClient::connect(bench.socket());
    drop(c);
    bench.healthy("clients that hang up during the greeting");

    let mut c = RawClient::connect_flags(bench.socket());
    c.send_lossy(b"NOT-IHAVEOPT....");
    c.expect_closed("bad option magic");
    bench.healthy("bad option magic");

    let mut c = RawClient::connect_flags(bench.socket());
    let mut header = IHAVEOPT.to_be_bytes().to_vec();
    header.extend_from_slice(&OPT_GO.to_be_bytes());
    header.extend_from_slice(&u32::MAX.to_be_bytes());
    c.send_lossy(&header);
    c.send_lossy(&[0u8; 1000]);
    c.expect_closed("an option of length 0xFFFFFFFF");
    bench.healthy("an option of length 0xFFFFFFFF");

    // A long but bounded option is skipped and refused politely; the
    // connection goes on.
    let mut c = RawClient::connect_flags(bench.socket());
    c.option(OPT_INFO, &vec![0u8; 100 << 10]);
    let reply = c.option_reply();
    assert_eq!((reply.option, reply.kind), (OPT_INFO, REP_ERR_TOO_BIG), "{reply:?}");
    // INFO with a truncated payload: the name claims 10 bytes, 3 follow.
    let mut truncated = 10u32.to_be_bytes().to_vec();
    truncated.extend_from_slice(b"abc");
    c.option(OPT_INFO, &truncated);
    let reply = c.option_reply();
    assert_eq!((reply.option, reply.kind), (OPT_INFO, REP_ERR_INVALID), "{reply:?}");
    // INFO with trailing bytes after the requests.
    let mut trailing = info_payload("");
    trailing.push(0);
    c.option(OPT_INFO, &trailing);
    assert_eq!(c.option_reply().kind, REP_ERR_INVALID);
    // INFO for an export that does not exist.
    c.option(OPT_INFO, &info_payload("nope"));
    assert_eq!(c.option_reply().kind, REP_ERR_UNKNOWN);
    // An option nobody knows.
    c.option(0x7777, b"whatever");
    let reply = c.option_reply();
    assert_eq!((reply.option, reply.kind), (0x7777, REP_ERR_UNSUP), "{reply:?}");
    // LIST with data.
    c.option(OPT_LIST, b"x");
    assert_eq!(c.option_reply().kind, REP_ERR_INVALID);
    // Still usable: GO and read.
    let (size, flags) = c.go("");
    assert_eq!(size, SIZE);
    assert_eq!(flags & 1, 1, "NBD_FLAG_HAS_FLAGS");
    assert_same(
        "read after bad options",
        &c.simple_read(1, 0, 65536).unwrap(),
        &bench.data[..65536],
    );
    drop(c);
    bench.healthy("oversized, truncated and unknown options");

    let mut c = RawClient::connect_flags(bench.socket());
    c.send_lossy(&{
        let mut h = IHAVEOPT.to_be_bytes().to_vec();
        h.extend_from_slice(&OPT_GO.to_be_bytes());
        h.extend_from_slice(&(2u32 << 20).to_be_bytes());
        h
    });
    c.expect_closed("an option of 2 MiB");
    bench.healthy("an option of 2 MiB");

    let mut c = RawClient::connect_flags(bench.socket());
    c.option(OPT_EXPORT_NAME, b"no-such-export");
    c.expect_closed("EXPORT_NAME of an unknown export");
    bench.healthy("EXPORT_NAME of an unknown export");

    // EXPORT_NAME of the default export enters transmission (size, flags,
    // no zero padding as NO_ZEROES was sent).
    let mut c = RawClient::connect_flags(bench.socket());
    c.option(OPT_EXPORT_NAME, b"");
    let answer = c.read(10);
    assert_eq!(u64::from_be_bytes(answer[..8].try_into().unwrap()), SIZE);
    assert_same(
        "read after EXPORT_NAME",
        &c.simple_read(2, 4096, 512).unwrap(),
        &bench.data[4096..4608],
    );
    drop(c);

    // ABORT ends the haggling cleanly.
    let mut c = RawClient::connect_flags(bench.socket());
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.option_reply().kind, REP_ACK);
    c.expect_closed("ABORT");
    bench.healthy("EXPORT_NAME and ABORT");

    // --- Transmission ------------------------------------------------------

    let (mut c, _) = RawClient::open(bench.socket(), "", false);
    c.send_lossy(&[0x42; 28]);
    c.expect_closed("a request with bad magic");
    bench.healthy("a request with bad magic");

    let (mut c, _) = RawClient::open(bench.socket(), "", false);
    assert_eq!(c.simple_read(3, SIZE, 4096), Err(EINVAL), "a read starting at the end");
    assert_eq!(c.simple_read(4, SIZE - 512, 4096), Err(EINVAL), "a read across the end");
    assert_eq!(c.simple_read(5, u64::MAX - 511, 4096), Err(EINVAL), "a read whose end overflows");
    assert_same(
        "a valid read after errors",
        &c.simple_read(6, 8192, 4096).unwrap(),
        &bench.data[8192..12288],
    );
    assert_eq!(c.simple_read(7, 0, u32::MAX), Err(EINVAL), "a read of 4 GiB - 1");
    assert_eq!(c.simple_read(8, 0, (32 << 20) + 1), Err(EINVAL), "a read over the maximum");
    assert_same(
        "a valid read after errors",
        &c.simple_read(9, 0, 4096).unwrap(),
        &bench.data[..4096],
    );
    // A write past the end: the payload is consumed, ENOSPC, still in sync.
    assert_eq!(c.simple_write(10, SIZE, &[0xee; 4096], 0), ENOSPC, "a write past the end");
    // Unknown command type and unknown command flags.
    c.request(0, 0x42, 11, 0, 512);
    expect_error(&mut c, 11, EINVAL, "an unknown command");
    c.request(1 << 9, CMD_READ, 12, 0, 512);
    expect_error(&mut c, 12, EINVAL, "unknown command flags");
    // Block status without a negotiated metadata context.
    c.request(0, CMD_BLOCK_STATUS, 13, 0, 4096);
    expect_error(&mut c, 13, EINVAL, "block status without base:allocation");
    assert_same(
        "a valid read after errors",
        &c.simple_read(14, 512, 1000).unwrap(),
        &bench.data[512..1512],
    );
    // A clean goodbye.
    c.request(0, CMD_DISC, 15, 0, 0);
    c.expect_closed("NBD_CMD_DISC");
    bench.healthy("out-of-range, oversized and unknown requests");

    let (mut c, _) = RawClient::open(bench.socket(), "", false);
    c.send_lossy(&request_bytes(0, CMD_WRITE, 16, 0, u32::MAX));
    c.send_lossy(&[0xee; 4096]);
    c.expect_closed("a write of length 0xFFFFFFFF");
    bench.healthy("a write of length 0xFFFFFFFF");

    // A write whose payload never fully arrives must not be applied.
    let (mut c, _) = RawClient::open(bench.socket(), "", false);
    c.send(&request_bytes(CMD_FLAG_FUA, CMD_WRITE, 17, 0, MIB as u32));
    c.send(&[0xee; 1000]);
    drop(c);
    bench.healthy("a connection dropped mid-write-payload");

    // Many large reads pipelined, replies never read, then a hang-up.
    let (mut c, _) = RawClient::open(bench.socket(), "", false);
    let mut burst = Vec::new();
    for handle in 0..256 {
        burst.extend_from_slice(&request_bytes(0, CMD_READ, handle, 0, MIB as u32));
    }
    c.send(&burst);
    drop(c);
    bench.healthy("a client that never reads its replies");

    // The same with the connection kept open: that client may hold only its
    // share of the in-flight budget, so everybody else is still served.
    let (mut stalled, _) = RawClient::open(bench.socket(), "", false);
    let mut burst = Vec::new();
    for handle in 0..300 {
        burst.extend_from_slice(&request_bytes(0, CMD_READ, handle, 0, MIB as u32));
    }
    stalled.send(&burst);
    std::thread::sleep(Duration::from_millis(300));
    bench.healthy("a connected client that never reads its replies");
    drop(stalled);

    // Structured replies: errors are NBD_REPLY_TYPE_ERROR chunks.
    let (mut c, _) = RawClient::open(bench.socket(), "", true);
    c.request(0, CMD_READ, 18, SIZE, 4096);
    let chunk = c.chunk();
    assert_eq!((chunk.kind, chunk.handle, chunk.flags & 1), (REPLY_TYPE_ERROR, 18, 1), "{chunk:?}");
    assert_eq!(u32::from_be_bytes(chunk.payload[..4].try_into().unwrap()), EINVAL);
    let message_len = u16::from_be_bytes([chunk.payload[4], chunk.payload[5]]) as usize;
    assert_eq!(chunk.payload.len(), 6 + message_len, "{chunk:?}");
    c.request(0, CMD_READ, 19, 4096, 4096);
    let chunk = c.chunk();
    assert_eq!((chunk.kind, chunk.handle, chunk.flags & 1), (REPLY_TYPE_OFFSET_DATA, 19, 1));
    assert_eq!(u64::from_be_bytes(chunk.payload[..8].try_into().unwrap()), 4096);
    assert_same("a structured read", &chunk.payload[8..], &bench.data[4096..8192]);
    drop(c);
    bench.healthy("structured replies");

    // Many clients at once, every one of them misbehaving differently.
    let mut clients = Vec::new();
    for i in 0..32u32 {
        let mut c = RawClient::connect(bench.socket());
        match i % 4 {
            0 => c.send_lossy(&0xffff_ffffu32.to_be_bytes()),
            1 => c.send_lossy(&3u32.to_be_bytes()),
            2 => {
                c.send_lossy(&3u32.to_be_bytes());
                c.send_lossy(&IHAVEOPT.to_be_bytes());
            }
            _ => {}
        }
        clients.push(c);
    }
    bench.healthy("32 idle and misbehaving clients");
    drop(clients);

    let log = bench.server.stop();
    assert!(!log.contains("panicked"), "{log}");
    let counters = log.lines().find(|l| l.contains("served ")).unwrap();
    assert!(!counters.contains("(0 ended by errors)"), "bad clients are counted: {counters}");

    // Nothing any bad client sent reached the volume.
    assert_same("the volume after the abuse", &export_range(&vol, &key, 0, SIZE), &bench.data);
}

#[test]
fn read_only_exports_refuse_writes() {
    require(&["nbdinfo"]);
    let dir = TempDir::new("ro");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let socket = dir.join("s.sock");
    let before = export_range(&vol, &key, 0, SIZE);
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket), "--read-only"],
        dir.join("serve.log"),
        1,
    );
    let (mut c, _) = RawClient::open(&socket, "", false);
    assert_eq!(c.simple_write(1, 0, &[1; 4096], 0), EPERM, "a write to a read-only export");
    c.request(0, 4, 2, 0, 4096);
    expect_error(&mut c, 2, EPERM, "a trim on a read-only export");
    c.request(0, 6, 3, 0, 4096);
    expect_error(&mut c, 3, EPERM, "write zeroes on a read-only export");
    assert_same("a read", &c.simple_read(4, 0, 4096).unwrap(), &before[..4096]);
    c.request(0, CMD_FLUSH, 5, 0, 0);
    expect_error(&mut c, 5, 0, "a flush");
    drop(c);
    let info = ok("nbdinfo", run("nbdinfo", &["--json", server.uri()]));
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["exports"][0]["is_read_only"], true, "{info}");
    server.assert_alive("writes to a read-only export");
    server.stop();
    assert_same("a read-only volume", &export_range(&vol, &key, 0, SIZE), &before);
}
