#![allow(clippy::unwrap_used)]
//! Online reencryption: `rampart reencrypt` on a volume that `rampart
//! serve` is serving hands the job to the server, which re-encrypts under
//! its clients. fio writes and verifies through the server all along;
//! afterwards cryptsetup opens the volume with a new volume key and its
//! plaintext (decrypted with that key by pyca/cryptography) is what the
//! clients wrote. A run stopped or interrupted part-way leaves cryptsetup's
//! reencryption metadata, which `--resume-only` (online) or cryptsetup
//! (offline) finishes; `scripts/online-reencrypt-kill-trials` kills the
//! server at random moments under load (10 trials here, 100 in
//! BENCHMARKS.md, "Crash trials: `kill -9` of `rampart serve` under fio").

use crate::helpers::serve_support as support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::*;

const DATA: u64 = 48 * MIB;

fn reencrypt_command(vol: &Path, key: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(["reencrypt", p(vol), "--key-file", p(key), "--hotzone-size", "1M", "--json"]);
    command.args(PBKDF2).args(extra);
    command
}

fn fio(uri: &str, extra: &[&str]) -> Output {
    let mut command = Command::new("fio");
    command.args([
        "--name=online",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--rw=randwrite",
        "--bs=4k",
        "--size=32M",
        "--offset=0",
        "--iodepth=16",
        "--verify=crc32c",
        "--randseed=4242",
        // No verify state file in the working directory (the source tree).
        "--verify_state_save=0",
    ]);
    command.args(extra);
    output_limited(command, Duration::from_secs(240))
}

fn cryptsetup_state(vol: &Path) -> String {
    text(&ok("cryptsetup luksDump", run("cryptsetup", &["luksDump", p(vol)])).stdout)
}

#[test]
fn a_served_volume_is_reencrypted_under_its_clients() {
    require(&["cryptsetup", "fio", "nbdcopy"]);
    let dir = TempDir::new("online-reencrypt");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", DATA);
    let key_before = cryptsetup_volume_key(&vol, &key);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    // fio writes (and then reads back and checks) 32 MiB while the whole
    // volume is re-encrypted under it.
    let writer = {
        let uri = uri.clone();
        std::thread::spawn(move || fio(&uri, &["--loops=3"]))
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = output_limited(reencrypt_command(&vol, &key, &[]), Duration::from_secs(240));
    let events = text(&ok("online rampart reencrypt", out).stdout);
    assert!(events.lines().last().unwrap().contains("\"finished\""), "{events}");
    let fio_out = writer.join().unwrap();
    assert!(fio_out.status.success(), "{}", describe("fio during the reencryption", &fio_out));
    // Everything fio wrote reads back through the server with the new key.
    let out = fio(&uri, &["--verify_only", "--verify_fatal=1"]);
    assert!(out.status.success(), "{}", describe("fio --verify_only after", &out));
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    server.assert_alive("the online reencryption");
    server.stop();

    let dump = cryptsetup_state(&vol);
    assert!(!dump.contains("reencrypt"), "reencryption metadata left behind:\n{dump}");
    assert!(cryptsetup_opens(&vol, &key));
    let key_after = cryptsetup_volume_key(&vol, &key);
    assert_ne!(key_before, key_after, "the volume key did not change");
    // The plaintext under cryptsetup's key is what the server served.
    let exported = export_range(&vol, &key, 0, DATA);
    assert_same("the served plaintext and the exported one", &served, &exported);
    assert_ciphertext_decrypts_to(&dir, &vol, &key_after, &served);
}

fn cryptsetup_opens(vol: &Path, key: &Path) -> bool {
    run("cryptsetup", &["open", "--test-passphrase", "--key-file", p(key), p(vol)]).status.success()
}

/// Checks with pyca/cryptography that the data area of `vol` decrypts
/// under `key_hex` to `plain`.
fn assert_ciphertext_decrypts_to(dir: &TempDir, vol: &Path, key_hex: &str, plain: &[u8]) {
    let json = ok(
        "cryptsetup luksDump --dump-json-metadata",
        run("cryptsetup", &["luksDump", "--dump-json-metadata", p(vol)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let segment = &json["segments"]["0"];
    let data_offset = segment["offset"].as_str().unwrap();
    let sector = segment["sector_size"].as_u64().unwrap().to_string();
    let iv_tweak = segment["iv_tweak"].as_str().unwrap();
    let plain_file = dir.file("served", plain);
    let range = format!("0:{}", plain.len());
    let out = run(
        "python3",
        &[XTS_CHECK, p(vol), data_offset, key_hex, &sector, iv_tweak, p(&plain_file), &range],
    );
    assert!(out.status.success(), "{}", describe("xts_check.py", &out));
}

#[test]
fn an_online_run_stopped_or_interrupted_is_resumed_online_or_by_cryptsetup() {
    require(&["cryptsetup", "nbdcopy"]);
    let dir = TempDir::new("online-reencrypt-stop");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", DATA);
    let data = random_bytes(77, DATA as usize);
    let input = dir.file("data", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&input), "--key-file", p(&key)]));
    let socket = dir.join("s.sock");
    let start = || {
        Serve::start(
            &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
            dir.join("serve.log"),
            1,
        )
    };
    let mut server = start();
    let uri = server.uri().to_owned();

    // A clean stop after three hotzones: the server keeps serving both
    // keys' parts.
    let mut command = reencrypt_command(&vol, &key, &[]);
    command.env("RAMPART_REENCRYPT_STOP_AFTER", "3");
    let events = text(&ok("online reencrypt with a stop", output(command)).stdout);
    assert!(events.contains("\"stopped\""), "{events}");
    assert!(cryptsetup_state(&vol).contains("online-reencrypt"));
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("the plaintext served after a stop", &served, &data);

    // SIGINT once it has made progress: it stops at a hotzone boundary.
    let mut child = reencrypt_command(&vol, &key, &["--resume-only"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut progressed = 0;
    for line in lines.by_ref() {
        if line.unwrap().contains("\"progress\"") {
            progressed += 1;
            if progressed == 3 {
                break;
            }
        }
    }
    send_signal(child.id(), "INT");
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = wait_timeout(&mut child, Duration::from_secs(60)).unwrap();
    let events = rest.join("\n");
    // It may have finished before the signal arrived; otherwise it stopped.
    if !events.contains("\"finished\"") {
        assert!(!status.success() && events.contains("\"interrupted\""), "{events}");
        assert!(cryptsetup_state(&vol).contains("online-reencrypt"));
        let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
        assert_same("the plaintext served after an interruption", &served, &data);
    }
    server.assert_alive("a stopped and an interrupted online reencryption");
    server.stop();

    // cryptsetup finishes what the server started.
    let out = run(
        "cryptsetup",
        &[
            "reencrypt",
            "--resume-only",
            "--force-offline-reencrypt",
            "--key-file",
            p(&key),
            p(&vol),
        ],
    );
    if cryptsetup_state(&vol).contains("online-reencrypt") || !out.status.success() {
        panic!("{}", describe("cryptsetup reencrypt --resume-only", &out));
    }
    assert_same(
        "the plaintext after cryptsetup finished",
        &export_range(&vol, &key, 0, DATA),
        &data,
    );

    // A second online reencryption, stopped, then resumed online to the end.
    let mut server = start();
    let uri = server.uri().to_owned();
    let mut command = reencrypt_command(&vol, &key, &[]);
    command.env("RAMPART_REENCRYPT_STOP_AFTER", "5");
    ok("online reencrypt with a stop", output(command));
    let events = text(
        &ok(
            "online reencrypt --resume-only",
            output(reencrypt_command(&vol, &key, &["--resume-only"])),
        )
        .stdout,
    );
    assert!(events.lines().last().unwrap().contains("\"finished\""), "{events}");
    let served = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"])).stdout;
    assert_same("the plaintext after resuming online", &served, &data);
    server.stop();
    assert!(!cryptsetup_state(&vol).contains("reencrypt"));
    assert!(cryptsetup_opens(&vol, &key));
}

#[test]
fn flushed_writes_survive_kill_9_during_online_reencryption() {
    require(&["fio", "cryptsetup"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/online-reencrypt-kill-trials");
    let mut command = Command::new(script);
    command.arg("10").env("RAMPART", env!("CARGO_BIN_EXE_rampart"));
    let out = output_limited(command, Duration::from_secs(400));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("online reencrypt kill trials: 10,")
            && stdout.contains("failures: 0"),
        "{}",
        describe("scripts/online-reencrypt-kill-trials 10", &out)
    );
}

#[test]
fn a_volume_served_read_only_is_not_reencrypted_under_its_server() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("online-reencrypt-ro");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 8 * MIB);
    let before = std::fs::read(&vol).unwrap();
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket), "--read-only"],
        dir.join("serve.log"),
        1,
    );
    let out = output(reencrypt_command(&vol, &key, &[]));
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("served read-only"),
        "{}",
        describe("reencrypt", &out)
    );
    server.assert_alive("a refused online reencryption");
    server.stop();
    // The metadata written before the refusal is left for --resume-only,
    // as after an interruption; the data is untouched.
    let after = std::fs::read(&vol).unwrap();
    assert_same("the data area", &after[HEADER as usize..], &before[HEADER as usize..]);
}
