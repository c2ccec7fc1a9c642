#![allow(clippy::unwrap_used)]
//! Online encryption and decryption: `rampart serve` serves a volume in
//! the middle of an encryption or a decryption (plaintext pieces beside
//! encrypted ones, data shifts included, an interrupted hotzone repaired
//! first), and `rampart reencrypt --resume-only` / `--decrypt` on a served
//! volume hands the run to the server, whose clients keep reading and
//! writing; a decryption moving the data down over an attached header is
//! started by the server too. fio writes and verifies through the server
//! all along; at the end cryptsetup opens an encrypted volume with the
//! passphrase and pyca decrypts its data with the key cryptsetup prints
//! to what the clients see, and a decrypted one holds that plaintext on
//! the device;
//! `scripts/online-encrypt-decrypt-kill-trials` kills the server at random
//! moments under load (10 trials here, 100 in BENCHMARKS.md,
//! "Crash trials: `kill -9` of `rampart serve` under fio").

use crate::helpers::serve_support as support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use support::*;

fn reencrypt(args: &[&str], key: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.arg("reencrypt").args(args).args(["--key-file", p(key), "--json"]);
    command.args(PBKDF2);
    output_limited(command, Duration::from_secs(240))
}

fn fio(uri: &str, extra: &[&str]) -> Output {
    let mut command = Command::new("fio");
    command.args([
        "--name=online",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--rw=randwrite",
        "--bs=4k",
        "--size=16M",
        "--offset=0",
        "--iodepth=16",
        "--verify=crc32c",
        "--randseed=4343",
        "--verify_state_save=0",
    ]);
    command.args(extra);
    output_limited(command, Duration::from_secs(240))
}

fn finished(what: &str, out: Output) {
    let events = text(&ok(what, out).stdout);
    assert!(events.lines().last().unwrap_or("").contains("\"finished\""), "{what}: {events}");
}

fn luks_json(header: &Path) -> serde_json::Value {
    let out = ok(
        "cryptsetup luksDump --dump-json-metadata",
        run("cryptsetup", &["luksDump", "--dump-json-metadata", p(header)]),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The finished encryption: cryptsetup opens it, and the data decrypts
/// with the key it prints (pyca) to `plain`.
fn assert_encrypted_to(dir: &TempDir, vol: &Path, header: &Path, key: &Path, plain: &[u8]) {
    let json = luks_json(header);
    assert!(json["config"].get("requirements").is_none(), "{json}");
    let segment = &json["segments"]["0"];
    assert_eq!(segment["type"], "crypt", "{json}");
    let opens = run(
        "cryptsetup",
        &["open", "--test-passphrase", "--header", p(header), "--key-file", p(key), p(vol)],
    );
    assert!(opens.status.success(), "{}", describe("cryptsetup open --test-passphrase", &opens));
    let key_hex = cryptsetup_volume_key(header, key);
    let sector = segment["sector_size"].as_u64().unwrap().to_string();
    let plain_file = dir.file("expected", plain);
    let range = format!("0:{}", plain.len());
    let out = run(
        "python3",
        &[
            XTS_CHECK,
            p(vol),
            segment["offset"].as_str().unwrap(),
            &key_hex,
            &sector,
            segment["iv_tweak"].as_str().unwrap(),
            p(&plain_file),
            &range,
        ],
    );
    assert!(out.status.success(), "{}", describe("xts_check.py", &out));
}

/// The finished decryption: one linear segment, no keyslot; the device
/// holds `plain` from byte `offset`.
fn assert_decrypted_to(vol: &Path, header: &Path, offset: usize, plain: &[u8]) {
    let json = luks_json(header);
    assert_eq!(
        json["segments"],
        serde_json::json!({"0": {"type": "linear", "offset": offset.to_string(), "size": "dynamic"}}),
        "{json}"
    );
    assert_eq!(json["keyslots"], serde_json::json!({}), "{json}");
    let device = std::fs::read(vol).unwrap();
    assert_same("the decrypted device", &device[offset..offset + plain.len()], plain);
}

/// fio writes and verifies the first 16 MiB through `uri` while `run`
/// runs; returns what the server serves afterwards, checked by fio.
fn under_fio(uri: &str, during: impl FnOnce()) -> Vec<u8> {
    let writer = {
        let uri = uri.to_owned();
        std::thread::spawn(move || fio(&uri, &["--loops=2"]))
    };
    std::thread::sleep(Duration::from_millis(300));
    during();
    let out = writer.join().unwrap();
    assert!(out.status.success(), "{}", describe("fio during the run", &out));
    let out = fio(uri, &["--verify_only", "--verify_fatal=1"]);
    assert!(out.status.success(), "{}", describe("fio --verify_only after the run", &out));
    ok("nbdcopy", run("nbdcopy", &[uri, "-"])).stdout
}

#[test]
fn a_plain_image_is_encrypted_under_the_clients_of_its_server() {
    require(&["cryptsetup", "fio", "nbdcopy", "python3"]);
    let dir = TempDir::new("online-encrypt");
    let key = key_file(&dir);
    let data = random_bytes(81, 40 * MIB as usize);
    let vol = dir.file("vol", &data);
    let header = dir.join("vol.hdr");
    // cryptsetup's model: initialise, serve, resume.
    let init =
        ["--encrypt", "--init-only", "--header", p(&header), "--sector-size", "4096", p(&vol)];
    ok("rampart reencrypt --encrypt --init-only", reencrypt(&init, &key));
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--header", p(&header), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let before = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("the plaintext served before the run", &before, &data);
    let served = under_fio(&uri, || {
        let args = ["--resume-only", "--header", p(&header), "--hotzone-size", "1M", p(&vol)];
        finished("online rampart reencrypt --resume-only (encrypt)", reencrypt(&args, &key));
    });
    server.assert_alive("the online encryption");
    server.stop();
    assert_eq!(served.len(), data.len());
    // What fio did not touch is the original data.
    assert_same(
        "the untouched plaintext",
        &served[16 * MIB as usize..],
        &data[16 * MIB as usize..],
    );
    assert_encrypted_to(&dir, &vol, &header, &key, &served);
}

/// A detached-header LUKS2 volume made by cryptsetup, holding `data`.
fn detached_volume(
    dir: &TempDir,
    key: &Path,
    data: &[u8],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let vol = dir.sparse("vol", data.len() as u64);
    let header = dir.sparse("vol.hdr", 16 * MIB);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2", "--header", p(&header)];
    args.extend(["--sector-size", "512"]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(key), p(&vol)]);
    ok("cryptsetup luksFormat --header", run("cryptsetup", &args));
    let input = dir.file("input", data);
    ok(
        "rampart import",
        rampart(&["import", p(&vol), p(&input), "--header", p(&header), "--key-file", p(key)]),
    );
    (vol, header)
}

#[test]
fn a_served_volume_is_decrypted_under_its_clients() {
    require(&["cryptsetup", "fio", "nbdcopy"]);
    let dir = TempDir::new("online-decrypt");
    let key = key_file(&dir);
    let data = random_bytes(82, 32 * MIB as usize);
    let (vol, header) = detached_volume(&dir, &key, &data);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--header", p(&header), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let served = under_fio(&uri, || {
        let args = ["--decrypt", "--header", p(&header), "--hotzone-size", "1M", p(&vol)];
        finished("online rampart reencrypt --decrypt", reencrypt(&args, &key));
    });
    server.assert_alive("the online decryption");
    server.stop();
    assert_same(
        "the untouched plaintext",
        &served[16 * MIB as usize..],
        &data[16 * MIB as usize..],
    );
    assert_decrypted_to(&vol, &header, 0, &served);
}

/// A volume of `data` behind Rampart's attached 16 MiB header.
fn attached_volume(dir: &TempDir, key: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let vol = make_volume(dir, name, data.len() as u64);
    let input = dir.file("input", data);
    ok("rampart import", rampart(&["import", p(&vol), p(&input), "--key-file", p(key)]));
    vol
}

#[test]
fn a_served_volume_with_an_attached_header_is_decrypted_moving_its_data_under_its_clients() {
    require(&["cryptsetup", "fio", "nbdcopy", "nbdsh"]);
    let dir = TempDir::new("online-decrypt-attached");
    let key = key_file(&dir);

    // Started and finished through the server, fio writing and verifying
    // the first 16 MiB: the chunk copied over the header at the start.
    let data = random_bytes(85, 48 * MIB as usize);
    let vol = attached_volume(&dir, &key, "vol", &data);
    let header = dir.join("vol.hdr");
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let served = under_fio(&uri, || {
        let args = ["--decrypt", "--header", p(&header), p(&vol)];
        finished(
            "online rampart reencrypt --decrypt --header NEW (attached)",
            reencrypt(&args, &key),
        );
    });
    server.assert_alive("the online decryption of an attached header");
    server.stop();
    assert_eq!(served.len(), data.len());
    assert_same(
        "the untouched plaintext",
        &served[16 * MIB as usize..],
        &data[16 * MIB as usize..],
    );
    assert_decrypted_to(&vol, &header, 0, &served);

    // Initialised through the server (`--init-only`), written to in the
    // moved chunk and beyond, then finished online.
    let mut data = random_bytes(86, 24 * MIB as usize);
    let vol = attached_volume(&dir, &key, "vol2", &data);
    let header = dir.join("vol2.hdr");
    let socket = dir.join("s2.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve2.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let init = ["--decrypt", "--init-only", "--header", p(&header), p(&vol)];
    ok("online rampart reencrypt --decrypt --init-only (attached)", reencrypt(&init, &key));
    assert!(header.exists(), "the header was not exported");
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served after the online start", &served, &data);
    nbdsh_writes(&uri, &mut data, 2 * MIB as usize, 19 * MIB as usize + 1000);
    // A second start is refused: the header has moved.
    let again = reencrypt(&["--decrypt", "--header", p(&dir.join("other.hdr")), p(&vol)], &key);
    assert!(!again.status.success(), "{}", describe("a second start", &again));
    assert!(!dir.join("other.hdr").exists());
    let args = ["--resume-only", "--header", p(&header), p(&vol)];
    finished("online --resume-only after the online start", reencrypt(&args, &key));
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served after the online decryption", &served, &data);
    server.assert_alive("the online decryption after an online start");
    server.stop();
    assert_decrypted_to(&vol, &header, 0, &data);
}

/// Writes through `uri` with nbdsh: 1 MiB of 0x5a at `a`, 3000 bytes of
/// 0x3c at `b` (unaligned), flushed; applies them to `data`.
fn nbdsh_writes(uri: &str, data: &mut [u8], a: usize, b: usize) {
    let script = format!(
        "h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)\n\
         h.pwrite(b'\\x5a' * 1048576, {a})\n\
         h.pwrite(b'\\x3c' * 3000, {b})\n\
         h.flush()\n\
         print('written')\n"
    );
    let mut command = nbdsh_command();
    command.args(["-u", uri, "-c", &script]);
    let out = ok("nbdsh writes", output(command));
    assert_eq!(text(&out.stdout).trim(), "written");
    data[a..a + MIB as usize].fill(0x5a);
    data[b..b + 3000].fill(0x3c);
}

#[test]
fn volumes_mid_encryption_or_decryption_with_a_data_shift_are_served_and_finished_online() {
    require(&["cryptsetup", "nbdsh", "nbdcopy", "python3"]);
    let dir = TempDir::new("online-shift");
    let key = key_file(&dir);

    // Encryption with a data shift (attached header), crashed in its
    // third hotzone: the server repairs the hotzone, serves the moved
    // first chunk, the plaintext and the ciphertext, and finishes online.
    let image = random_bytes(83, 40 * MIB as usize);
    let vol = dir.file("shift", &image);
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(["reencrypt", "--encrypt", "--reduce-device-size", "8M", p(&vol)]);
    command.args(["--sector-size", "4096", "--key-file", p(&key), "-q"]).args(PBKDF2);
    command.env("RAMPART_REENCRYPT_CRASH_AFTER", "2");
    let out = output(command);
    assert_eq!(out.status.code(), Some(137), "{}", describe("crashed encryption", &out));
    let mut data = image[..32 * MIB as usize].to_vec();
    let socket = dir.join("shift.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("shift.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served mid-encryption with a shift", &served, &data);
    // In the moved first chunk, and in the part not yet encrypted.
    nbdsh_writes(&uri, &mut data, 2 * MIB as usize, 9 * MIB as usize + 1000);
    finished("online --resume-only (shift)", reencrypt(&["--resume-only", p(&vol)], &key));
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served after the online encryption", &served, &data);
    server.assert_alive("the online encryption with a shift");
    server.stop();
    assert_encrypted_to(&dir, &vol, &vol, &key, &data);

    // Decryption moving the data down over an exported header, initialised
    // offline, then served and finished online.
    let _ = std::fs::remove_file(dir.join("moved"));
    let vol = make_volume(&dir, "moved", 24 * MIB);
    let mut data = random_bytes(84, 24 * MIB as usize);
    let input = dir.file("input", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&input), "--key-file", p(&key)]));
    let header = dir.join("moved.hdr");
    let init = ["--decrypt", "--init-only", "--header", p(&header), p(&vol)];
    ok("rampart --decrypt --init-only (attached)", reencrypt(&init, &key));
    let socket = dir.join("moved.sock");
    let mut server = Serve::start(
        &[p(&vol), "--header", p(&header), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("moved.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served mid-decryption with a shift", &served, &data);
    nbdsh_writes(&uri, &mut data, 20 * MIB as usize, 3 * MIB as usize + 1000);
    let args = ["--resume-only", "--header", p(&header), p(&vol)];
    finished("online --resume-only (decrypt moving the data)", reencrypt(&args, &key));
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("served after the online decryption", &served, &data);
    server.assert_alive("the online decryption moving the data");
    server.stop();
    assert_decrypted_to(&vol, &header, 0, &data);
}

#[test]
fn flushed_writes_survive_kill_9_during_online_encryption_and_decryption() {
    require(&["fio", "cryptsetup"]);
    let script =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/online-encrypt-decrypt-kill-trials");
    let mut command = Command::new(script);
    command.arg("10").env("RAMPART", env!("CARGO_BIN_EXE_rampart"));
    let out = output_limited(command, Duration::from_secs(400));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("online encrypt/decrypt kill trials: 10,")
            && stdout.contains("failures: 0"),
        "{}",
        describe("scripts/online-encrypt-decrypt-kill-trials 10", &out)
    );
}
