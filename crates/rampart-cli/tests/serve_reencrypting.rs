#![allow(clippy::unwrap_used)]
//! `rampart serve` on a volume in the middle of a reencryption, as dm-crypt
//! maps one: nbdcopy reads the whole plaintext (new key below the
//! boundary, old key above), nbdsh writes across the boundary, and once
//! the reencryption is finished (by Rampart or cryptsetup) the volume
//! decrypts with cryptsetup's key to the data with those writes. A hotzone
//! a crash interrupted is repaired before serving.

use crate::helpers::serve_support as support;

use std::path::Path;
use std::process::Command;

use support::*;

/// A cryptsetup-made volume holding `data` (24 MiB of plaintext).
fn volume(dir: &TempDir, key: &Path, data: &[u8]) -> std::path::PathBuf {
    let vol = dir.sparse("vol", 40 * MIB);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2"];
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(key), p(&vol)]);
    ok("cryptsetup luksFormat", run("cryptsetup", &args));
    let part = dir.file("data", data);
    ok("rampart import", rampart(&["import", p(&vol), p(&part), "--key-file", p(key)]));
    vol
}

fn stopped_run(vol: &Path, key: &Path, hook: &str) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(["reencrypt", p(vol), "--key-file", p(key), "--hotzone-size", "4M"]);
    command.args(PBKDF2);
    command.env(hook, "2");
    let out = output(command);
    assert!(
        matches!(out.status.code(), Some(0 | 137)),
        "{}",
        describe("rampart reencrypt with a stop", &out)
    );
}

fn serve_and_write(dir: &TempDir, vol: &Path, key: &Path, data: &mut [u8], what: &str) {
    let tag = if what.contains("CRASH") { "crash" } else { "stop" };
    let socket = dir.join(&format!("{tag}.sock"));
    let mut server = Serve::start(
        &[p(vol), "--key-file", p(key), "--socket", p(&socket)],
        dir.join(&format!("{tag}.log")),
        1,
    );
    let uri = server.uri().to_owned();
    let out = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"]));
    assert_same(&format!("{what}: nbdcopy of the volume"), &out.stdout[..data.len()], data);
    // Across the boundary at 8 MiB (two 4 MiB hotzones done), and an
    // unaligned write in the old part.
    let script = "\
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
h.pwrite(b'\\x5a' * 1048576, 8 * 1048576 - 524288)
h.pwrite(b'\\x3c' * 3000, 12 * 1048576 + 1000)
h.flush()
print('written')
";
    let mut command = nbdsh_command();
    command.args(["-u", &uri, "-c", script]);
    let out = ok("nbdsh writes", output(command));
    assert_eq!(text(&out.stdout).trim(), "written");
    server.stop();
    let start = 8 * MIB as usize - 524_288;
    data[start..start + MIB as usize].fill(0x5a);
    let start = 12 * MIB as usize + 1000;
    data[start..start + 3000].fill(0x3c);
}

#[test]
fn a_volume_stopped_mid_reencryption_is_served_and_finished() {
    require(&["cryptsetup", "nbdsh", "nbdcopy"]);
    let dir = TempDir::new("serve-reencrypting");
    let key = key_file(&dir);
    for (hook, finisher) in [
        ("RAMPART_REENCRYPT_STOP_AFTER", "rampart"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "cryptsetup"),
    ] {
        let _ = std::fs::remove_file(dir.join("vol"));
        let mut data = random_bytes(21, 24 * MIB as usize);
        let vol = volume(&dir, &key, &data);
        stopped_run(&vol, &key, hook);
        serve_and_write(&dir, &vol, &key, &mut data, hook);
        let header = String::from_utf8_lossy(&std::fs::read(&vol).unwrap()[..16384]).into_owned();
        assert!(header.contains("online-reencrypt-v2"), "{hook}: serving ended the reencryption");
        if finisher == "rampart" {
            ok(
                "rampart reencrypt --resume-only",
                rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key)]),
            );
        } else {
            ok(
                "cryptsetup reencrypt --resume-only",
                run(
                    "cryptsetup",
                    &[
                        "reencrypt",
                        "--resume-only",
                        "--force-offline-reencrypt",
                        "-q",
                        "--key-file",
                        p(&key),
                        p(&vol),
                    ],
                ),
            );
        }
        let after = export_range(&vol, &key, 0, data.len() as u64);
        assert_same(&format!("{hook}: plaintext after the reencryption"), &after, &data);
        ok(
            "cryptsetup opens the result",
            run("cryptsetup", &["open", "--test-passphrase", "--key-file", p(&key), p(&vol)]),
        );
    }
}

#[test]
fn a_volume_a_killed_cryptsetup_left_is_served_and_finished() {
    require(&["cryptsetup", "nbdsh", "nbdcopy"]);
    let dir = TempDir::new("serve-cryptsetup-killed");
    let key = key_file(&dir);
    let vol = dir.sparse("vol", 400 * MIB);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2"];
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol)]);
    ok("cryptsetup luksFormat", run("cryptsetup", &args));
    let mut data = random_bytes(22, 24 * MIB as usize);
    let part = dir.file("data", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&part), "--key-file", p(&key)]));

    let mut args = vec!["reencrypt", "--force-offline-reencrypt", "-q"];
    args.extend_from_slice(PBKDF2);
    args.extend(["--hotzone-size", "1M", "--key-file", p(&key), p(&vol)]);
    let mut child = Command::new(tool("cryptsetup"))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(json) = header_json_now(&vol) {
            let first = json["segments"]["0"]["size"].as_str().unwrap_or("dynamic");
            if first.parse::<u64>().is_ok_and(|n| n >= 16 * MIB) {
                break;
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "cryptsetup finished before it could be killed"
        );
        assert!(std::time::Instant::now() < deadline, "cryptsetup made no progress");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let header = String::from_utf8_lossy(&std::fs::read(&vol).unwrap()[..16384]).into_owned();
    assert!(header.contains("online-reencrypt-v2"), "cryptsetup was killed too late");

    // The boundary lies past 16 MiB, wherever cryptsetup stopped: the
    // write at 4 MiB lands under the new key, the one at 20 MiB under
    // either; the read spans both keys (the volume is 384 MiB).
    let socket = dir.join("k.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("k.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let out = ok("nbdcopy", run("nbdcopy", &[uri.as_str(), "-"]));
    assert_same("nbdcopy mid-reencryption", &out.stdout[..data.len()], &data);
    let script = "\
h.pwrite(b'\\x77' * 1048576, 4 * 1048576)
h.pwrite(b'\\x66' * 1048576, 20 * 1048576)
h.flush()
print('written')
";
    let mut command = nbdsh_command();
    command.args(["-u", &uri, "-c", script]);
    let out = ok("nbdsh writes", output(command));
    assert_eq!(text(&out.stdout).trim(), "written");
    server.stop();
    data[4 * MIB as usize..5 * MIB as usize].fill(0x77);
    data[20 * MIB as usize..21 * MIB as usize].fill(0x66);

    ok(
        "rampart reencrypt --resume-only",
        rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key)]),
    );
    let after = export_range(&vol, &key, 0, data.len() as u64);
    assert_same("plaintext after the reencryption", &after, &data);
}
