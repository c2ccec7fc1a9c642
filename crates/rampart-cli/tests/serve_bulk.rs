#![allow(clippy::unwrap_used)]
//! 1 GiB through `rampart serve` with nbdcopy: random data in and back out
//! byte-identical, the same bytes from `rampart export` once the server has
//! stopped, and the on-disk ciphertext decrypting (pyca/cryptography) under
//! the volume key cryptsetup prints.

use crate::helpers::serve_support as support;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use support::*;

const SIZE: u64 = 1 << 30;

/// Streams `command`'s stdout against the file `want`, 4 MiB at a time,
/// asserting identical bytes and length and a successful exit.
fn assert_stdout_equals_file(what: &str, mut command: Command, want: &Path) {
    command
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut file = File::open(want).unwrap();
    let mut got = vec![0u8; 4 << 20];
    let mut expected = vec![0u8; 4 << 20];
    let mut offset = 0u64;
    let mismatch = loop {
        let n = read_full(&mut stdout, &mut got);
        let m = read_full(&mut file, &mut expected[..n.max(1)]);
        if n == 0 {
            break (m != 0).then(|| format!("output ends at {offset}, short of the file"));
        }
        if m < n {
            break Some(format!("output runs past the file's end at {}", offset + m as u64));
        }
        if got[..n] != expected[..n] {
            let first = got[..n].iter().zip(&expected[..n]).position(|(a, b)| a != b).unwrap();
            break Some(format!("first differing byte at {}", offset + first as u64));
        }
        offset += n as u64;
    };
    drop(stdout);
    let status = child.wait().unwrap();
    let errors = errors.join().unwrap();
    assert!(mismatch.is_none(), "{what}: {} ({status}; stderr: {errors})", mismatch.unwrap());
    assert!(status.success(), "{what} failed: {status}: {errors}");
    assert_eq!(offset, SIZE, "{what}: {offset} bytes");
}

fn read_full(reader: &mut impl Read, buffer: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    filled
}

#[test]
fn one_gib_through_nbdcopy_and_back_matches_export_and_ciphertext() {
    require(&["nbdcopy", "cryptsetup", "python3"]);
    let dir = TempDir::new("bulk");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let data = dir.join("data.bin");
    ok("rampart rand", rampart(&["rand", "1G", "--out", p(&data)]));
    assert_eq!(std::fs::metadata(&data).unwrap().len(), SIZE);

    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    ok("nbdcopy file -> nbd", run("nbdcopy", &["--flush", p(&data), &uri]));
    let mut back = Command::new(tool("nbdcopy"));
    back.args([&uri, "-"]);
    assert_stdout_equals_file("nbdcopy nbd -> stdout", back, &data);
    server.assert_alive("nbdcopy");
    let log = server.stop();
    let counters = log.lines().find(|l| l.contains("served ")).unwrap();
    assert!(counters.contains(&format!("{SIZE} bytes read")), "{counters}");
    assert!(counters.contains(&format!("{SIZE} bytes written")), "{counters}");
    assert!(counters.contains("(0 failed)"), "{counters}");

    // The same plaintext without the server.
    let mut export = Command::new(env!("CARGO_BIN_EXE_rampart"));
    export.args(["export", p(&vol), "-", "--key-file", p(&key)]);
    assert_stdout_equals_file("rampart export", export, &data);

    // The ciphertext decrypts under the key cryptsetup unlocks.
    let json = ok(
        "cryptsetup luksDump --dump-json-metadata",
        run("cryptsetup", &["luksDump", "--dump-json-metadata", p(&vol)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let segment = &json["segments"]["0"];
    assert_eq!(segment["encryption"], "aes-xts-plain64", "{segment}");
    let data_offset = segment["offset"].as_str().unwrap();
    let sector = segment["sector_size"].as_u64().unwrap();
    let iv_tweak = segment["iv_tweak"].as_str().unwrap();
    let volume_key = cryptsetup_volume_key(&vol, &key);
    assert_eq!(volume_key.len(), 128, "a 512-bit XTS key: {volume_key}");

    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
            as u64;
    let picks = random_bytes(seed, 32);
    let mut ranges = vec![format!("0:{MIB}"), format!("{}:{MIB}", SIZE - MIB)];
    for chunk in picks.chunks(8) {
        let r = u64::from_le_bytes(chunk.try_into().unwrap());
        let start = r % ((SIZE - MIB) / sector) * sector;
        ranges.push(format!("{start}:{MIB}"));
    }
    let sector_text = sector.to_string();
    let mut args: Vec<&str> =
        vec![XTS_CHECK, p(&vol), data_offset, &volume_key, &sector_text, iv_tweak, p(&data)];
    args.extend(ranges.iter().map(String::as_str));
    let out = run("python3", &args);
    assert!(out.status.success(), "{}", describe(&format!("ciphertext check {ranges:?}"), &out));
    assert_eq!(text(&out.stdout).matches(": ok").count(), ranges.len(), "{}", text(&out.stdout));

    // The check itself can fail: one wrong key bit and nothing matches.
    let flipped =
        format!("{}{}", if volume_key.starts_with('0') { "1" } else { "0" }, &volume_key[1..]);
    args[3] = &flipped;
    args.truncate(8);
    let out = run("python3", &args);
    assert!(!out.status.success(), "{}", describe("ciphertext check with a wrong key", &out));
}
