#![allow(clippy::unwrap_used)]
//! `rampart serve`'s limits against hostile clients, each with an abusive
//! raw-socket client cut off (within a bound) while a real client (nbdinfo,
//! nbdcopy) keeps being served: a client that never reads its replies (to
//! reads, and to writes), a silent one in the handshake, an idle one, a
//! flood of connections past --max-connections, and a flood of requests
//! past --max-requests.

use crate::helpers::serve_support as support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

const SIZE: u64 = 4 * MIB;

struct Setup {
    _dir: TempDir,
    server: Serve,
    socket: std::path::PathBuf,
    data: Vec<u8>,
}

/// A volume of SIZE random bytes served on a Unix socket with `limits`.
fn serve(tag: &str, limits: &[&str]) -> Setup {
    require(&["nbdinfo", "nbdcopy"]);
    let dir = TempDir::new(tag);
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let data = random_bytes(3, SIZE as usize);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&data_file), "--key-file", p(&key)]));
    let socket = dir.join("nbd.sock");
    let mut args = vec![p(&vol), "--key-file", p(&key), "--socket", p(&socket)];
    args.extend_from_slice(limits);
    let server = Serve::start(&args, dir.join("serve.log"), 1);
    Setup { _dir: dir, server, socket, data }
}

impl Setup {
    /// A real client reads the whole export, within `limit`.
    #[track_caller]
    fn well_behaved_copy(&mut self, limit: Duration, during: &str) {
        let uri = self.server.uri().to_owned();
        let copy = run_limited("nbdcopy", &[uri.as_str(), "-"], limit);
        assert!(copy.status.success(), "{}", describe(&format!("nbdcopy {during}"), &copy));
        assert_same(&format!("nbdcopy {during}"), &copy.stdout, &self.data);
        self.server.assert_alive(during);
    }

    #[track_caller]
    fn well_behaved_info(&mut self, during: &str) {
        let uri = self.server.uri().to_owned();
        let info = run_limited("nbdinfo", &["--size", &uri], Duration::from_secs(20));
        assert!(info.status.success(), "{}", describe(&format!("nbdinfo {during}"), &info));
        assert_eq!(text(&info.stdout).trim(), SIZE.to_string(), "{during}");
    }

    /// Waits until the log holds `count` lines containing `needle`.
    #[track_caller]
    fn wait_log(&self, needle: &str, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.server.log();
            if log.matches(needle).count() >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "fewer than {count} '{needle}' in the log within {limit:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn socket(&self) -> &Path {
        &self.socket
    }
}

/// Asserts that the server closes `stream` within `limit` of `since`.
#[track_caller]
fn closed_within(stream: &mut UnixStream, since: Instant, limit: Duration, what: &str) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("{what}: not closed within {limit:?}: {e}"),
        }
    }
    let took = since.elapsed();
    assert!(took <= limit, "{what}: closed only after {took:?} (bound {limit:?})");
}

#[test]
fn clients_that_never_read_their_replies_are_cut_off_and_release_the_budget() {
    // Each connection may hold max(64M / 4, 32M) = 32 MiB: two abusers
    // alone exhaust the whole budget.
    let mut s = serve("stall", &["--max-inflight", "64M", "--stall-timeout", "2"]);
    let mut abusers = Vec::new();
    for _ in 0..4 {
        let (mut client, _) = RawClient::open(s.socket(), "", false);
        let mut burst = Vec::new();
        for handle in 0..64u64 {
            burst.extend(request_bytes(0, CMD_READ, handle, (handle % 4) * MIB, MIB as u32));
        }
        client.send(&burst);
        abusers.push(client);
    }
    let start = Instant::now();
    // The well-behaved client waits at most for the stall timeout.
    s.well_behaved_copy(Duration::from_secs(30), "while four clients never read");
    s.well_behaved_info("while four clients never read");
    s.wait_log("read no reply byte", 4, Duration::from_secs(15));
    assert!(start.elapsed() < Duration::from_secs(20), "the stalled clients took too long");
    for (i, abuser) in abusers.iter_mut().enumerate() {
        closed_within(
            &mut abuser.stream,
            Instant::now(),
            Duration::from_secs(10),
            &format!("abuser {i}"),
        );
    }
    s.well_behaved_copy(Duration::from_secs(20), "after the abusers were cut off");
    let log = s.server.stop();
    assert!(log.contains("4 timed out"), "counters line: {log}");
}

#[test]
fn clients_that_never_read_their_write_replies_are_cut_off() {
    // Writes of 16 KiB and more are answered by a task of their own, not
    // by the connection's reader: a reply that cannot be sent must still
    // end the connection. The replies pile up unread until the socket's
    // send buffer is full, then the stall timeout runs out.
    let mut s = serve("stall-writes", &["--stall-timeout", "2"]);
    let (mut client, _) = RawClient::open(s.socket(), "", false);
    let mut writer = client.stream.try_clone().unwrap();
    const WRITES: u64 = 200_000;
    const LEN: u32 = 16 << 10;
    let sender = std::thread::spawn(move || {
        let payload = vec![0x5a_u8; LEN as usize];
        for handle in 0..WRITES {
            let offset = (handle * u64::from(LEN)) % SIZE;
            let mut request = request_bytes(0, CMD_WRITE, handle, offset, LEN);
            request.extend_from_slice(&payload);
            if writer.write_all(&request).is_err() {
                return handle;
            }
        }
        WRITES
    });
    s.wait_log("read no reply byte", 1, Duration::from_secs(60));
    closed_within(&mut client.stream, Instant::now(), Duration::from_secs(10), "the writer");
    let sent = sender.join().unwrap();
    assert!(sent < WRITES, "all {WRITES} writes were taken from a client reading no reply");
    s.well_behaved_info("after the writer was cut off");
    let log = s.server.stop();
    assert!(log.contains("1 timed out"), "counters line: {log}");
}

#[test]
fn silent_and_idle_clients_are_dropped_while_others_are_served() {
    let mut s = serve("idle", &["--handshake-timeout", "1", "--idle-timeout", "1"]);
    // Connects and never answers the greeting.
    let start = Instant::now();
    let mut silent = UnixStream::connect(s.socket()).unwrap();
    // Reaches transmission, then sends nothing.
    let (mut idle, _) = RawClient::open(s.socket(), "", false);
    let idle_since = Instant::now();
    s.well_behaved_info("beside a silent and an idle client");
    closed_within(&mut silent, start, Duration::from_secs(5), "silent client in the handshake");
    closed_within(&mut idle.stream, idle_since, Duration::from_secs(5), "idle client");
    s.wait_log("handshake timed out", 1, Duration::from_secs(5));
    s.wait_log("--idle-timeout", 1, Duration::from_secs(5));
    // A client with a request in flight is not idle: a read that keeps
    // the export busy still gets its answer.
    let (mut busy, _) = RawClient::open(s.socket(), "", false);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(busy.simple_read(1, 0, 4096).unwrap(), s.data[..4096]);
    s.well_behaved_copy(Duration::from_secs(20), "after the idle clients were dropped");
    s.server.stop();
}

#[test]
fn connections_past_the_maximum_are_closed_at_once() {
    let mut s = serve("maxconn", &["--max-connections", "3"]);
    let (_held_a, _) = RawClient::open(s.socket(), "", false);
    let (_held_b, _) = RawClient::open(s.socket(), "", false);
    // A flood: the first takes the last slot, the rest are closed at once
    // (end of file before any greeting).
    let mut flood: Vec<UnixStream> =
        (0..20).map(|_| UnixStream::connect(s.socket()).unwrap()).collect();
    let start = Instant::now();
    let mut refused = 0;
    for stream in &mut flood {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut greeting = [0u8; 18];
        match stream.read(&mut greeting) {
            Ok(0) => refused += 1,
            Ok(_) => {}
            Err(e) => panic!("a flooding connection was neither greeted nor closed: {e}"),
        }
    }
    assert_eq!(refused, 19, "all but one flooding connection refused");
    assert!(start.elapsed() < Duration::from_secs(5), "refusals were not immediate");
    s.wait_log("refused a connection", 1, Duration::from_secs(5));
    drop(flood);
    std::thread::sleep(Duration::from_millis(200));
    // The slot the flood took is free again: a real client is served.
    s.well_behaved_info("with two connections held and after a flood");
    s.well_behaved_copy(Duration::from_secs(20), "with two connections held");
    let log = s.server.stop();
    assert!(log.contains("19 refused over the limit"), "counters line: {log}");
}

#[test]
fn a_request_flood_is_held_back_by_the_per_connection_cap() {
    let mut s = serve("maxreq", &["--max-requests", "4", "--stall-timeout", "3"]);
    let (mut abuser, _) = RawClient::open(s.socket(), "", false);
    // A million requests for an unknown command, never reading the error
    // replies: without a cap every one would be queued in the server.
    let request = request_bytes(0, 99, 7, 0, 0);
    let flood: Vec<u8> = request.iter().copied().cycle().take(request.len() * 1_000_000).collect();
    abuser.stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut sent = 0usize;
    while sent < flood.len() {
        match abuser.stream.write(&flood[sent..(sent + (1 << 16)).min(flood.len())]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    // With 4 slots the server stops reading once the socket buffers fill
    // (about 0.25 MB here); 65,536 slots would take ~2 MB, no cap all 28 MB.
    assert!(
        sent < 1 << 20,
        "the server took {sent} bytes of requests from a client that reads no reply"
    );
    s.well_behaved_info("beside a request flood");
    s.well_behaved_copy(Duration::from_secs(20), "beside a request flood");
    s.wait_log("read no reply byte", 1, Duration::from_secs(15));
    s.server.stop();
}

#[test]
fn limit_flags_are_validated() {
    let dir = TempDir::new("limitflags");
    let vol = make_volume(&dir, "vol", MIB);
    let key = key_file(&dir);
    for bad in [
        &["--stall-timeout", "0"][..],
        &["--handshake-timeout", "0"],
        &["--max-requests", "0"],
        &["--idle-timeout", "soon"],
    ] {
        let mut args = vec!["serve", p(&vol), "--key-file", p(&key), "--socket"];
        let socket = dir.join("x.sock");
        args.push(p(&socket));
        args.extend_from_slice(bad);
        let out = rampart_limited(&args, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", describe("serve", &out));
        let err = text(&out.stderr);
        assert!(err.contains(bad[0]), "{bad:?}: the error names the flag: {err}");
    }
}
