#![allow(clippy::unwrap_used)]
//! `rampart serve` with real NBD clients: nbdinfo (export properties, named
//! exports, printed URIs), qemu-img/qemu-io (patterns, zeroes, discard,
//! unaligned writes), fio's nbd engine (verified random and sequential
//! I/O), crash safety of acknowledged FUA/flushed writes (nbdsh, then
//! `kill -9`), and shutdown on SIGTERM/SIGINT with clients connected.

use crate::helpers::serve_support as support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

fn nbdinfo_json(args: &[&str]) -> serde_json::Value {
    let out = ok("nbdinfo --json", run("nbdinfo", args));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("nbdinfo --json: {e}: {}", text(&out.stdout)))
}

#[test]
fn nbdinfo_sees_export_properties_and_named_exports() {
    require(&["nbdinfo"]);
    let dir = TempDir::new("info");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 32 * MIB);
    let small = make_volume(&dir, "small", 4 * MIB);
    let socket = dir.join("s.sock");

    // One volume, a Unix socket and an ephemeral TCP port: one URI per
    // listener, the TCP one with the port actually bound.
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket), "--listen", "127.0.0.1:0"],
        dir.join("serve.log"),
        2,
    );
    assert_eq!(server.uris[0], unix_uri(&socket, ""), "{:?}", server.uris);
    let tcp = server.uris[1].clone();
    let port: u16 = tcp
        .strip_prefix("nbd://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected TCP URI {tcp}"))
        .parse()
        .unwrap();
    assert_ne!(port, 0, "the printed URI must show the bound port: {tcp}");

    for uri in [server.uris[0].clone(), tcp.clone()] {
        let info = nbdinfo_json(&["--json", &uri]);
        let export = &info["exports"][0];
        assert_eq!(info["protocol"], "newstyle-fixed", "{info}");
        assert_eq!(info["structured"], true, "{info}");
        assert_eq!(export["export-size"], 32 * MIB, "{info}");
        assert_eq!(export["can_multi_conn"], true, "{info}");
        assert_eq!(export["can_flush"], true, "{info}");
        assert_eq!(export["can_fua"], true, "{info}");
        assert_eq!(export["can_trim"], true, "{info}");
        assert_eq!(export["can_zero"], true, "{info}");
        assert_eq!(export["is_read_only"], false, "{info}");
        assert_eq!(export["block_size_minimum"], 512, "{info}");
        assert_eq!(export["block_size_preferred"], 4096, "{info}");
        assert_eq!(export["block_size_maximum"], 32 * MIB, "{info}");
        let contexts: Vec<&str> =
            export["contexts"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert!(contexts.contains(&"base:allocation"), "{info}");
    }
    // base:allocation answers: one data extent over the whole export.
    let map = ok("nbdinfo --map", run("nbdinfo", &["--map", server.uri()]));
    let extents: Vec<Vec<String>> = text(&map.stdout)
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert_eq!(extents.len(), 1, "{}", text(&map.stdout));
    assert_eq!(extents[0][..3], ["0".to_owned(), (32 * MIB).to_string(), "0".to_owned()]);
    assert_eq!(extents[0][3], "data");
    let size = ok("nbdinfo --size", run("nbdinfo", &["--size", &tcp]));
    assert_eq!(text(&size.stdout).trim(), (32 * MIB).to_string());
    server.assert_alive("nbdinfo");
    server.stop();
    assert!(!socket.exists(), "the Unix socket must be removed on exit");

    // Two volumes with names: nbdinfo --list shows both, each URI works,
    // and there is no default export.
    let spec_a = format!("{}=alpha", p(&vol));
    let spec_b = format!("{}=beta", p(&small));
    let mut server = Serve::start(
        &[&spec_a, &spec_b, "--key-file", p(&key), "--socket", p(&socket), "--read-only"],
        dir.join("serve2.log"),
        2,
    );
    assert_eq!(server.uris, [unix_uri(&socket, "alpha"), unix_uri(&socket, "beta")]);
    let list = nbdinfo_json(&["--list", "--json", &unix_uri(&socket, "")]);
    let exports = list["exports"].as_array().unwrap();
    let mut seen: Vec<(String, u64, bool)> = exports
        .iter()
        .map(|e| {
            (
                e["export-name"].as_str().unwrap().to_owned(),
                e["export-size"].as_u64().unwrap(),
                e["is_read_only"].as_bool().unwrap(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [("alpha".to_owned(), 32 * MIB, true), ("beta".to_owned(), 4 * MIB, true)],
        "{list}"
    );
    let beta = ok("nbdinfo --size beta", run("nbdinfo", &["--size", &server.uris[1]]));
    assert_eq!(text(&beta.stdout).trim(), (4 * MIB).to_string());
    let default = run("nbdinfo", &[unix_uri(&socket, "")]);
    assert!(!default.status.success(), "{}", describe("nbdinfo of the default export", &default));
    server.assert_alive("nbdinfo --list");
    let log = server.stop();
    assert!(log.contains("served "), "{log}");

    // An export name and a socket path that need percent-encoding: the
    // printed URIs still work as printed.
    let odd_dir = dir.join("odd dir&x=1#");
    std::fs::create_dir_all(&odd_dir).unwrap();
    let odd_socket = odd_dir.join("s.sock");
    let name = "my disk?#%\u{e9}";
    let spec = format!("{}={name}", p(&small));
    let mut server = Serve::start(
        &[&spec, "--key-file", p(&key), "--socket", p(&odd_socket), "--listen", "127.0.0.1:0"],
        dir.join("serve3.log"),
        2,
    );
    for uri in server.uris.clone() {
        assert!(!uri.contains(' ') && !uri.contains('#'), "not percent-encoded: {uri}");
        let size = ok(&format!("nbdinfo --size {uri}"), run("nbdinfo", &["--size", &uri]));
        assert_eq!(text(&size.stdout).trim(), (4 * MIB).to_string());
    }
    let list = nbdinfo_json(&["--list", "--json", &server.uris[1]]);
    assert_eq!(list["exports"][0]["export-name"], name, "{list}");
    server.stop();
}

#[test]
fn qemu_img_and_qemu_io_patterns() {
    require(&["qemu-img", "qemu-io"]);
    let dir = TempDir::new("qemu");
    let key = key_file(&dir);
    let size = 32 * MIB;
    let vol = make_volume(&dir, "vol", size);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();

    let info = ok("qemu-img info", run("qemu-img", &["info", "--output=json", &uri]));
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["virtual-size"], size, "{info}");

    // raw file -> export -> raw file.
    let mut data = random_bytes(4, size as usize);
    let src = dir.file("src.raw", &data);
    ok(
        "qemu-img convert raw -> nbd",
        run("qemu-img", &["convert", "-n", "-f", "raw", "-O", "raw", p(&src), &uri]),
    );
    let back = dir.join("back.raw");
    ok(
        "qemu-img convert nbd -> raw",
        run("qemu-img", &["convert", "-f", "raw", "-O", "raw", &uri, p(&back)]),
    );
    assert_same("qemu-img round trip", &std::fs::read(&back).unwrap(), &data);

    let commands = [
        "write -P 0xab 0 1M",
        "read -P 0xab 0 1M",
        "flush",
        "write -z 1M 1M",
        "read -P 0 1M 1M",
        "discard 2M 1M",
        "write -P 0x12 1000 3000",
        "read -P 0x12 1000 3000",
        "read -P 0xab 0 1000",
        "read -P 0xab 4000 1044576",
        "write -f -P 0x34 3M 64k",
        "read -P 0x34 3M 64k",
        "write -P 0x56 33553920 512",
        "read -P 0x56 33553920 512",
        "flush",
    ];
    let mut args = vec!["-f", "raw"];
    for command in &commands {
        args.extend(["-c", command]);
    }
    args.push(&uri);
    let out = ok("qemu-io", run("qemu-io", &args));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!said.contains("Pattern verification failed"), "qemu-io:\n{said}");
    assert!(!said.contains("failed"), "qemu-io:\n{said}");
    assert_eq!(said.matches("wrote ").count(), 5, "qemu-io:\n{said}");
    assert_eq!(said.matches("read ").count(), 7, "qemu-io:\n{said}");

    // A write past the end is refused, and says so.
    let out = run("qemu-io", &["-f", "raw", "-c", "write -P 1 33554432 512", &uri]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("failed") || !out.status.success(), "write past the end:\n{said}");

    // What qemu-io did, seen by a second reader (the discarded MiB has
    // unspecified contents).
    data[..MIB as usize].fill(0xab);
    data[1000..4000].fill(0x12);
    data[MIB as usize..2 * MIB as usize].fill(0);
    data[3 * MIB as usize..3 * MIB as usize + 65536].fill(0x34);
    data[size as usize - 512..].fill(0x56);
    std::fs::remove_file(&back).unwrap();
    ok(
        "qemu-img convert nbd -> raw",
        run("qemu-img", &["convert", "-f", "raw", "-O", "raw", &uri, p(&back)]),
    );
    let mut got = std::fs::read(&back).unwrap();
    got[2 * MIB as usize..3 * MIB as usize].fill(0);
    data[2 * MIB as usize..3 * MIB as usize].fill(0);
    assert_same("after qemu-io", &got, &data);
    server.assert_alive("qemu");
    server.stop();

    // And the volume holds it, read without the server.
    let mut plain = export_range(&vol, &key, 0, size);
    plain[2 * MIB as usize..3 * MIB as usize].fill(0);
    assert_same("rampart export after qemu-io", &plain, &data);
}

/// Runs fio with `args` in `dir` (its verify state files land there) and
/// returns the job's JSON, asserting exit 0 and no job error.
fn fio(dir: &TempDir, uri: &str, args: &[&str]) -> serde_json::Value {
    let mut command = Command::new(tool("fio"));
    command
        .current_dir(dir.path())
        .args(["--ioengine=nbd", &format!("--uri={uri}"), "--output-format=json"])
        .args(args);
    let out = output(command);
    assert!(out.status.success(), "{}", describe(&format!("fio {args:?}"), &out));
    let stdout = text(&out.stdout);
    // fio's nbd engine prints "fio: connected to NBD server" before the JSON.
    let json = &stdout[stdout.find('{').unwrap_or_else(|| panic!("fio printed: {stdout}"))..];
    let report: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("fio JSON: {e}: {stdout}"));
    let job = report["jobs"][0].clone();
    assert_eq!(job["error"], 0, "fio {args:?}: {job}");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("verify"), "fio {args:?} reported:\n{stderr}");
    job
}

#[test]
fn fio_nbd_engine_verified_io() {
    require(&["fio"]);
    let dir = TempDir::new("fio");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 64 * MIB);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let common = ["--size=64M", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"];

    // Random writes then a verify pass over everything written.
    let mut args = vec!["--name=randwrite", "--rw=randwrite", "--bs=4k", "--iodepth=16"];
    args.extend(common);
    let job = fio(&dir, &uri, &args);
    assert_eq!(job["write"]["io_bytes"], 64 * MIB, "{job}");
    assert_eq!(job["read"]["io_bytes"], 64 * MIB, "verify pass: {job}");

    // Mixed random reads and writes, verifying what was written.
    let mut args = vec!["--name=randrw", "--rw=randrw", "--bs=4k", "--iodepth=16"];
    args.extend(common);
    let job = fio(&dir, &uri, &args);
    assert!(job["write"]["io_bytes"].as_u64().unwrap() > 0, "{job}");

    // Sequential writes in 1 MiB requests with verification, then the same
    // job verify-only from a fresh connection, then a plain sequential read.
    let mut args = vec!["--name=seq", "--rw=write", "--bs=1M", "--iodepth=4"];
    args.extend(common);
    let job = fio(&dir, &uri, &args);
    assert_eq!(job["write"]["io_bytes"], 64 * MIB, "{job}");
    assert_eq!(job["read"]["io_bytes"], 64 * MIB, "{job}");
    args.push("--verify_only=1");
    let job = fio(&dir, &uri, &args);
    assert_eq!(job["read"]["io_bytes"], 64 * MIB, "verify-only pass: {job}");
    let job =
        fio(&dir, &uri, &["--name=seqread", "--rw=read", "--bs=256k", "--iodepth=8", "--size=64M"]);
    assert_eq!(job["read"]["io_bytes"], 64 * MIB, "{job}");

    server.assert_alive("fio");
    let log = server.stop();
    assert!(log.contains("(0 failed)"), "fio's requests should all succeed:\n{log}");
}

#[test]
fn acknowledged_fua_and_flushed_writes_survive_kill_9() {
    require(&["nbdsh", "nbdcopy"]);
    let dir = TempDir::new("crash");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 8 * MIB);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    // What a fresh volume reads as (decrypted zeros, not zeros).
    let before = export_range(&vol, &key, 0, 3 * MIB);
    // libnbd refuses requests below the advertised 512-byte minimum unless
    // told otherwise; the server read-modify-writes them.
    let script = "\
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
h.pwrite(b'\\x5a' * 1048576, 0, nbd.CMD_FLAG_FUA)
h.pwrite(b'\\xa5' * 1048576, 1048576)
h.pwrite(b'\\x3c' * 3000, 2 * 1048576 + 1000)
h.flush()
print('acknowledged')
";
    let mut command = nbdsh_command();
    command.args(["-u", &uri, "-c", script]);
    let out = ok("nbdsh writes", output(command));
    assert_eq!(text(&out.stdout).trim(), "acknowledged");

    // No chance to flush or finish anything: acknowledged data must be in
    // the volume file.
    server.kill9();
    assert!(server.status.is_some_and(|s| !s.success()));
    let plain = export_range(&vol, &key, 0, 3 * MIB);
    assert!(plain[..MIB as usize].iter().all(|&b| b == 0x5a), "FUA write lost");
    assert!(plain[MIB as usize..2 * MIB as usize].iter().all(|&b| b == 0xa5), "flushed write lost");
    let third = &plain[2 * MIB as usize..];
    let old = &before[2 * MIB as usize..];
    assert_same("bytes before the unaligned write", &third[..1000], &old[..1000]);
    assert!(third[1000..4000].iter().all(|&b| b == 0x3c), "unaligned flushed write lost");
    assert_same("bytes after the unaligned write", &third[4000..], &old[4000..]);

    // The killed server left its socket file; a new server replaces it.
    assert!(socket.exists());
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve2.log"),
        1,
    );
    let out = ok("nbdcopy", run("nbdcopy", &[server.uri(), "-"]));
    assert_same("nbdcopy after restart", &out.stdout[..3 * MIB as usize], &plain);

    // A volume being served is not opened for writing by a second server.
    let other_socket = dir.join("other.sock");
    let locked = rampart_limited(
        &["serve", p(&vol), "--key-file", p(&key), "--socket", p(&other_socket)],
        Duration::from_secs(20),
    );
    assert_eq!(locked.status.code(), Some(1), "{}", describe("a second writer", &locked));
    assert!(
        text(&locked.stderr).contains("another process is writing the volume"),
        "{}",
        text(&locked.stderr)
    );

    // A live server's socket is not taken over by another server.
    let vol2 = make_volume(&dir, "vol2", MIB);
    let second = rampart_limited(
        &["serve", p(&vol2), "--key-file", p(&key), "--socket", p(&socket)],
        Duration::from_secs(20),
    );
    let err = text(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{}", describe("a second server", &second));
    assert!(err.starts_with("rampart: error: cannot listen on"), "{err}");
    assert!(second.stdout.is_empty(), "no URI before binding: {}", text(&second.stdout));
    server.assert_alive("a second server on its socket");
    let out = ok("nbdcopy", run("nbdcopy", &[server.uri(), "-"]));
    assert_same("nbdcopy after the second server", &out.stdout[..3 * MIB as usize], &plain);
    server.stop();
}

#[test]
fn sigterm_with_clients_connected_exits_cleanly() {
    require(&["nbdsh"]);
    let dir = TempDir::new("term");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 4 * MIB);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let before = export_range(&vol, &key, 0, 128 * 1024);

    // nbdsh writes without flushing, says so, then waits on stdin with its
    // connection open.
    let script = "\
import sys
h.pwrite(b'\\x77' * 65536, 4096)
print('written', flush=True)
sys.stdin.read()
";
    let mut command = nbdsh_command();
    command
        .args(["-u", &uri, "-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut nbdsh = KillOnDrop(command.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(nbdsh.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "written");

    // A raw client parked in option haggling, one in transmission with a
    // request answered, and one that connected and said nothing.
    let mut haggling = RawClient::connect_flags(&socket);
    haggling.option(OPT_LIST, &[]);
    while haggling.option_reply().kind != REP_ACK {}
    let (mut transmitting, size) = RawClient::open(&socket, "", false);
    assert_eq!(size, 4 * MIB);
    let first = transmitting.simple_read(1, 0, 4096).unwrap();
    assert_same("a raw read", &first, &before[..4096]);
    let mut silent = RawClient::connect(&socket);

    let started = Instant::now();
    let log = server.stop();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "shutdown took {took:?} with idle clients:\n{log}");
    let counters = log
        .lines()
        .find(|l| l.contains("served "))
        .unwrap_or_else(|| panic!("no counters line:\n{log}"));
    assert!(counters.contains("served 4 connections"), "{counters}");
    for word in ["requests", "bytes read", "bytes written"] {
        assert!(counters.contains(word), "{counters}");
    }
    assert!(!socket.exists(), "the Unix socket must be removed on exit");
    haggling.expect_closed("shutdown");
    transmitting.expect_closed("shutdown");
    silent.expect_closed("shutdown");
    drop(nbdsh.0.stdin.take());
    let _ = wait_timeout(&mut nbdsh.0, Duration::from_secs(10));

    // The unflushed write was flushed on the way out.
    let plain = export_range(&vol, &key, 0, 128 * 1024);
    assert_same("around the write", &plain[..4096], &before[..4096]);
    assert!(plain[4096..4096 + 65536].iter().all(|&b| b == 0x77), "write lost on SIGTERM");
    assert_same("after the write", &plain[4096 + 65536..], &before[4096 + 65536..]);

    // SIGINT does the same.
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve2.log"),
        1,
    );
    let (mut client, _) = RawClient::open(&socket, "", true);
    client.request(0, CMD_FLUSH, 9, 0, 0);
    // Structured replies are negotiated, but a flush is answered simply.
    assert_eq!(client.simple_reply(), (0, 9));
    let status = server.stop_with("INT", Duration::from_secs(10));
    let log = server.log();
    assert!(status.success(), "SIGINT: {status}\n{log}");
    assert!(log.contains("served 1 connections"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    client.expect_closed("SIGINT");

    // SIGTERM in the middle of a burst of writes: every write the server
    // acknowledged is on disk after its clean exit.
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve3.log"),
        1,
    );
    let (mut client, size) = RawClient::open(&socket, "", false);
    let chunk = 64 * 1024;
    let count = size / chunk;
    assert_eq!(client.simple_write(0, 0, &vec![1u8; chunk as usize], 0), 0);
    let mut sender = client.stream.try_clone().unwrap();
    let burst = std::thread::spawn(move || {
        for i in 1..count {
            let mut request = request_bytes(0, CMD_WRITE, i, i * chunk, chunk as u32);
            request.resize(28 + chunk as usize, (i + 1) as u8);
            if std::io::Write::write_all(&mut sender, &request).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(5));
    send_signal(server.pid(), "TERM");
    let mut acknowledged = vec![0u64];
    loop {
        let mut header = [0u8; 16];
        if std::io::Read::read_exact(&mut client.stream, &mut header).is_err() {
            break;
        }
        assert_eq!(header[..4], SIMPLE_REPLY_MAGIC.to_be_bytes());
        assert_eq!(header[4..8], [0; 4], "a write failed during shutdown");
        acknowledged.push(u64::from_be_bytes(header[8..].try_into().unwrap()));
    }
    burst.join().unwrap();
    let log = server.stop();
    assert!(log.contains("served 1 connections"), "{log}");
    let plain = export_range(&vol, &key, 0, size);
    for i in &acknowledged {
        let region = &plain[(i * chunk) as usize..((i + 1) * chunk) as usize];
        assert!(region.iter().all(|&b| b == (i + 1) as u8), "acknowledged write {i} lost");
    }
    eprintln!("{} of {count} writes acknowledged before the shutdown", acknowledged.len());
}

/// Kills a helper client process on drop.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
