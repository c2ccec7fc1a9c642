#![allow(clippy::unwrap_used)]
//! LUKS1 volumes round-trip through QEMU (`qemu-img`)
//! and nbdkit's luks filter, both ways.
//!
//! (a) `rampart format --type luks1` + `rampart import`, then `qemu-img
//!     convert` of the LUKS image to raw gives the same bytes;
//! (b) `qemu-img create -f luks` + `qemu-img convert -n` of raw data into
//!     it, then `rampart export` returns the data (and a passphrase Rampart
//!     adds opens it in QEMU);
//! (c) nbdkit's luks filter serves data Rampart imported (read with
//!     `nbdcopy`/`nbdinfo`), and data `nbdcopy` writes through nbdkit into a
//!     Rampart-formatted volume comes back from `rampart export`.
//!
//! nbdkit always listens on a Unix socket in the test's temp dir, runs in
//! the foreground with `--exit-with-parent`, and is killed on drop.

use crate::helpers::luks_support as support;

use std::path::Path;

use support::*;

const SIZE: u64 = 8 << 20;

fn rampart_luks1(dir: &TempDir, key: &Path, cipher_args: &[&str]) -> std::path::PathBuf {
    let volume = dir.join("volume.img");
    let size = SIZE.to_string();
    let mut args = vec!["format", p(&volume), "--type", "luks1", "--size", &size, "-d", p(key)];
    args.extend(PBKDF2);
    args.extend(cipher_args);
    ok("rampart format --type luks1", rampart(&args));
    volume
}

fn export_all(dir: &TempDir, volume: &Path, key: &Path) -> Vec<u8> {
    let out = dir.join("rampart-export.bin");
    ok("rampart export", rampart(&["export", p(volume), p(&out), "-d", p(key)]));
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    bytes
}

fn data_offset(volume: &Path) -> u64 {
    rampart_json(volume, None, None)["data_offset"].as_u64().unwrap()
}

/// QEMU's json: image spec of a LUKS image in a file, keyed by secret `s0`.
fn qemu_luks_spec(volume: &Path) -> String {
    serde_json::json!({
        "driver": "luks",
        "key-secret": "s0",
        "file": {"driver": "file", "filename": p(volume)},
    })
    .to_string()
}

fn qemu_secret(key: &Path) -> String {
    format!("secret,id=s0,file={},format=raw", p(key))
}

/// (a) Rampart writes, QEMU reads.
fn rampart_to_qemu(tag: &str, cipher_args: &[&str]) {
    require(&["qemu-img"]);
    let dir = TempDir::new(tag);
    let key = dir.file("key", format!("qemu reads {tag}").as_bytes());
    let volume = rampart_luks1(&dir, &key, cipher_args);
    // An odd length: the last sector is partly old (zero-key garbage) data.
    let data = random_bytes(21, (1 << 20) + 333);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&volume), p(&data_file), "-d", p(&key)]));

    let raw = dir.join("qemu.raw");
    ok(
        "qemu-img convert (LUKS to raw)",
        run(
            "qemu-img",
            &[
                "convert",
                "--object",
                &qemu_secret(&key),
                "-O",
                "raw",
                &format!("json:{}", qemu_luks_spec(&volume)),
                p(&raw),
            ],
        ),
    );
    let raw = std::fs::read(&raw).unwrap();
    assert_eq!(raw.len() as u64, SIZE - data_offset(&volume), "QEMU's payload size");
    assert_same("QEMU's plaintext of Rampart's import", &raw[..data.len()], &data);
    assert_same("QEMU's plaintext of the whole volume", &raw, &export_all(&dir, &volume, &key));

    // A wrong passphrase fails in QEMU too (the header is not just ignored).
    let wrong = dir.file("wrong", b"not the passphrase");
    let out = run(
        "qemu-img",
        &[
            "convert",
            "--object",
            &qemu_secret(&wrong),
            "-O",
            "raw",
            &format!("json:{}", qemu_luks_spec(&volume)),
            p(&dir.join("wrong.raw")),
        ],
    );
    assert!(!out.status.success(), "qemu-img opened the volume with a wrong passphrase");
}

#[test]
fn qemu_reads_rampart_luks1_xts512() {
    rampart_to_qemu("qemu-read-xts", &[]);
}

#[test]
fn qemu_reads_rampart_luks1_cbc_essiv() {
    rampart_to_qemu("qemu-read-essiv", &["--cipher", "aes-cbc-essiv:sha256", "--key-size", "256"]);
}

#[test]
fn qemu_reads_rampart_luks1_cbc_plain64_sha1() {
    rampart_to_qemu(
        "qemu-read-plain64",
        &["--cipher", "aes-cbc-plain64", "--key-size", "256", "--hash", "sha1"],
    );
}

/// (b) QEMU creates and writes, Rampart reads (and adds a key QEMU accepts).
fn qemu_to_rampart(tag: &str, qemu_options: &str) {
    require(&["qemu-img", "cryptsetup"]);
    let dir = TempDir::new(tag);
    let key = dir.file("key", format!("qemu writes {tag}").as_bytes());
    let volume = dir.join("qemu.luks");
    ok(
        "qemu-img create -f luks",
        run(
            "qemu-img",
            &[
                "create",
                "--object",
                &qemu_secret(&key),
                "-f",
                "luks",
                "-o",
                &format!("key-secret=s0,{qemu_options},iter-time=10"),
                p(&volume),
                "6M",
            ],
        ),
    );
    let data = random_bytes(22, 6 << 20);
    let data_file = dir.file("data.raw", &data);
    ok(
        "qemu-img convert (raw into LUKS)",
        run(
            "qemu-img",
            &[
                "convert",
                "--object",
                &qemu_secret(&key),
                "-n",
                "-f",
                "raw",
                p(&data_file),
                "--target-image-opts",
                &format!("driver=luks,key-secret=s0,file.driver=file,file.filename={}", p(&volume)),
            ],
        ),
    );

    ok("rampart test-key", rampart(&["test-key", p(&volume), "-d", p(&key)]));
    assert_same("Rampart's export of QEMU's volume", &export_all(&dir, &volume, &key), &data);
    // cryptsetup agrees it is a LUKS1 volume this passphrase opens.
    let dump = cryptsetup_dump(&volume);
    assert!(
        dump.lines().any(|l| l.split_whitespace().eq(["Version:", "1"])),
        "not LUKS1 for cryptsetup:\n{dump}"
    );
    assert!(cryptsetup_opens(&volume, None, &key));

    // Rampart adds a passphrase and rewrites some data; QEMU reads both.
    let key2 = dir.file("key2", b"added by rampart");
    let mut args = vec!["add-key", p(&volume), "-d", p(&key), "--new-key-file", p(&key2)];
    args.extend(PBKDF2);
    ok("rampart add-key", rampart(&args));
    let patch = random_bytes(23, 10_000);
    let patch_file = dir.file("patch.bin", &patch);
    ok(
        "rampart import --offset",
        rampart(&["import", p(&volume), p(&patch_file), "--offset", "4097", "-d", p(&key2)]),
    );
    let mut want = data.clone();
    want[4097..4097 + patch.len()].copy_from_slice(&patch);
    let raw = dir.join("back.raw");
    ok(
        "qemu-img convert with Rampart's new passphrase",
        run(
            "qemu-img",
            &[
                "convert",
                "--object",
                &qemu_secret(&key2),
                "-O",
                "raw",
                &format!("json:{}", qemu_luks_spec(&volume)),
                p(&raw),
            ],
        ),
    );
    assert_same("QEMU's read after Rampart's changes", &std::fs::read(&raw).unwrap(), &want);
}

#[test]
fn qemu_writes_luks1_xts_plain64_rampart_reads() {
    qemu_to_rampart(
        "qemu-write-xts",
        "cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64,hash-alg=sha256",
    );
}

#[test]
fn qemu_writes_luks1_cbc_essiv_rampart_reads() {
    qemu_to_rampart(
        "qemu-write-essiv",
        "cipher-alg=aes-256,cipher-mode=cbc,ivgen-alg=essiv,ivgen-hash-alg=sha256,hash-alg=sha1",
    );
}

fn nbdkit(dir: &TempDir, volume: &Path, key: &Path, read_only: bool) -> (Server, String) {
    let socket = dir.join("nbd.sock");
    let passphrase = format!("passphrase=+{}", p(key));
    let mut args = vec!["--exit-with-parent", "-f", "-U", p(&socket), "--filter=luks"];
    if read_only {
        args.push("-r");
    }
    args.extend(["file", p(volume), &passphrase]);
    let server = Server::start("nbdkit", &args, &socket, dir.join("nbdkit.log"));
    (server, format!("nbd+unix:///?socket={}", p(&socket)))
}

/// (c) nbdkit's luks filter reads what Rampart imported.
#[test]
fn nbdkit_reads_rampart_luks1() {
    require(&["nbdkit", "nbdcopy", "nbdinfo"]);
    let dir = TempDir::new("nbdkit-read");
    let key = dir.file("key", b"nbdkit reads this");
    let volume = rampart_luks1(&dir, &key, &[]);
    let data = random_bytes(31, (3 << 20) + 1234);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&volume), p(&data_file), "-d", p(&key)]));
    let whole = export_all(&dir, &volume, &key);

    let (server, uri) = nbdkit(&dir, &volume, &key, true);
    let out = run("nbdinfo", &["--size", &uri]);
    let size: u64 = text(&ok("nbdinfo --size", out).stdout).trim().parse().unwrap();
    assert_eq!(size, whole.len() as u64, "nbdkit's payload size");
    let copy = dir.join("nbdcopy.out");
    let out = run("nbdcopy", &[uri.as_str(), p(&copy)]);
    assert!(out.status.success(), "nbdcopy failed: {}\n{}", text(&out.stderr), server.log());
    drop(server);
    let copy = std::fs::read(&copy).unwrap();
    assert_same("nbdkit's plaintext of Rampart's import", &copy[..data.len()], &data);
    assert_same("nbdkit's plaintext of the whole volume", &copy, &whole);
}

/// (c) nbdcopy writes through nbdkit into a Rampart volume; Rampart reads.
#[test]
fn nbdkit_writes_rampart_luks1() {
    require(&["nbdkit", "nbdcopy", "cryptsetup"]);
    let dir = TempDir::new("nbdkit-write");
    let key = dir.file("key", b"nbdkit writes this");
    let volume = rampart_luks1(&dir, &key, &["--cipher", "aes-xts-plain64", "--key-size", "256"]);
    let data = random_bytes(32, 5 << 20);
    let data_file = dir.file("data.bin", &data);

    let (server, uri) = nbdkit(&dir, &volume, &key, false);
    let out = run("nbdcopy", &["--flush", p(&data_file), uri.as_str()]);
    assert!(out.status.success(), "nbdcopy failed: {}\n{}", text(&out.stderr), server.log());
    drop(server);

    let whole = export_all(&dir, &volume, &key);
    assert_same("Rampart's export of nbdkit's writes", &whole[..data.len()], &data);
    ok("rampart test-key", rampart(&["test-key", p(&volume), "-d", p(&key)]));
    assert!(cryptsetup_opens(&volume, None, &key), "the header survived nbdkit");
}
