#![allow(clippy::unwrap_used)]
//! Rampart and cryptsetup on one volume at once, through cryptsetup's
//! locking protocol: header reads share a `flock`, header writes take it
//! exclusively (on the image file, or on `/run/cryptsetup/L_MAJ:MIN` for a
//! block device), and only for the metadata operation. A served volume
//! therefore stays open to `cryptsetup luksDump`, `luksAddKey` and `token
//! import`, while a second data writer is refused by a lock cryptsetup
//! never sees.

use crate::helpers::serve_support as support;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn cryptsetup(args: &[&str]) -> std::process::Output {
    run_limited("cryptsetup", args, LIMIT)
}

fn keyslots(vol: &Path) -> Vec<u64> {
    let out = ok("rampart dump --json", rampart_limited(&["dump", p(vol), "--json"], LIMIT));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["keyslots"].as_array().unwrap().iter().map(|k| k["id"].as_u64().unwrap()).collect()
}

/// Holds `flock [-s] PATH sleep SECONDS` in the background, returning once
/// the lock is taken (`flock` creates PATH when missing).
fn hold_flock(path: &Path, shared: bool, seconds: u32) -> Child {
    let mut command = Command::new(tool("flock"));
    if shared {
        command.arg("-s");
    }
    let mut child = command
        .arg(path)
        .args(["-c", &format!("echo locked; sleep {seconds}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    child
}

/// Starts `rampart ARGS` and returns it with the time it was started.
fn spawn_rampart(args: &[&str]) -> (Child, Instant) {
    let child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, Instant::now())
}

#[test]
fn cryptsetup_reads_and_changes_the_header_of_a_served_volume() {
    require(&["cryptsetup", "nbdcopy", "nbdinfo"]);
    let dir = TempDir::new("lock-serve");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 8 * MIB);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let uri = server.uri().to_owned();
    let data = random_bytes(7, (8 * MIB) as usize);
    let input = dir.file("data", &data);
    ok("nbdcopy in", run_limited("nbdcopy", &[p(&input), &uri], LIMIT));

    // Readers are never blocked by a serving Rampart (before, luksDump hung).
    let dump = ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(&vol)]));
    assert!(text(&dump.stdout).contains("LUKS header information"), "{}", text(&dump.stdout));

    // Header writers neither: a keyslot and a token while serving.
    let new_key = dir.file("new-key", b"added by cryptsetup");
    ok(
        "cryptsetup luksAddKey",
        cryptsetup(&[
            "luksAddKey",
            p(&vol),
            "--key-file",
            p(&key),
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            p(&new_key),
        ]),
    );
    let token = dir.file("token.json", br#"{"type":"site-note","keyslots":[],"rack":"b12"}"#);
    ok(
        "cryptsetup token import",
        cryptsetup(&["token", "import", p(&vol), "--json-file", p(&token), "--token-id", "3"]),
    );

    // Rampart sees both at its next metadata operation, and its own header
    // write keeps them.
    assert_eq!(keyslots(&vol), vec![0, 1]);
    let rampart_key = dir.file("rampart-key", b"added by rampart");
    let mut add = vec!["add-key", p(&vol), "--key-file", p(&key), "--new-key-file"];
    add.push(p(&rampart_key));
    add.extend_from_slice(PBKDF2);
    ok("rampart add-key while serving", rampart_limited(&add, LIMIT));
    assert_eq!(keyslots(&vol), vec![0, 1, 2]);
    let exported = ok(
        "rampart token export",
        rampart_limited(&["token", "export", p(&vol), "--token-id", "3"], LIMIT),
    );
    assert_eq!(text(&exported.stdout).trim(), r#"{"type":"site-note","keyslots":[],"rack":"b12"}"#);
    for passphrase in [&new_key, &rampart_key, &key] {
        ok(
            "cryptsetup open --test-passphrase",
            cryptsetup(&["open", "--test-passphrase", p(&vol), "--key-file", p(passphrase)]),
        );
    }

    // The export served the same plaintext throughout.
    let output = dir.join("out");
    ok("nbdcopy out", run_limited("nbdcopy", &[&uri, p(&output)], LIMIT));
    assert_same("served plaintext", &std::fs::read(&output).unwrap(), &data);
    server.assert_alive("cryptsetup changed the header");
    server.stop();
}

#[test]
fn a_second_data_writer_is_refused_while_readers_go_on() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("lock-writer");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 4 * MIB);
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    let input = dir.file("in", &[7u8; 4096]);
    let out = rampart_limited(&["import", p(&vol), p(&input), "--key-file", p(&key)], LIMIT);
    assert_eq!(out.status.code(), Some(1), "{}", describe("import while serving", &out));
    assert!(
        text(&out.stderr).contains("another process is writing the volume"),
        "{}",
        text(&out.stderr)
    );
    let second = rampart_limited(
        &["serve", p(&vol), "--key-file", p(&key), "--socket", p(&dir.join("t.sock"))],
        LIMIT,
    );
    assert_ne!(second.status.code(), Some(0), "{}", describe("second serve", &second));
    assert!(text(&second.stderr).contains("another process is writing the volume"));
    // Read-only users are welcome: export, a read-only serve, cryptsetup.
    ok(
        "rampart export while serving",
        rampart_limited(
            &["export", p(&vol), p(&dir.join("copy")), "--key-file", p(&key), "--length", "1M"],
            LIMIT,
        ),
    );
    ok(
        "cryptsetup open --test-passphrase while serving",
        cryptsetup(&["open", "--test-passphrase", p(&vol), "--key-file", p(&key)]),
    );
    server.assert_alive("other processes tried to write");
    server.stop();
    // With the server gone, the writer lock is free again.
    ok(
        "rampart import after serve",
        rampart_limited(&["import", p(&vol), p(&input), "--key-file", p(&key)], LIMIT),
    );
}

/// Rampart waits for a metadata lock held the way cryptsetup holds it, and
/// takes the shared one alongside other readers.
fn assert_waits_for_lock(lock_path: &Path, vol: &Path, key: &Path, dir: &TempDir) {
    // An exclusive holder (cryptsetup writing a header) stalls both a
    // reader and a writer until it lets go.
    let mut holder = hold_flock(lock_path, false, 3);
    let (dump, dump_started) = spawn_rampart(&["dump", p(vol), "--json"]);
    let new_key = dir.file("waiting-key", b"written after the lock");
    let mut add = vec!["add-key", p(vol), "--key-file", p(key), "--new-key-file", p(&new_key)];
    add.extend_from_slice(PBKDF2);
    let (add_key, add_started) = spawn_rampart(&add);
    for (child, started, what) in [(dump, dump_started, "dump"), (add_key, add_started, "add-key")]
    {
        let out = child.wait_with_output().unwrap();
        let waited = started.elapsed();
        assert!(out.status.success(), "{}", describe(what, &out));
        assert!(
            waited >= Duration::from_millis(2000),
            "rampart {what} finished after {waited:?} while the metadata lock was held"
        );
    }
    holder.wait().unwrap();

    // A shared holder (cryptsetup reading) lets readers in at once.
    let mut reader = hold_flock(lock_path, true, 3);
    let started = Instant::now();
    ok("rampart dump beside a reader", rampart_limited(&["dump", p(vol)], LIMIT));
    assert!(started.elapsed() < Duration::from_millis(2000), "{:?}", started.elapsed());
    reader.wait().unwrap();
}

#[test]
fn metadata_operations_wait_for_cryptsetups_lock_on_an_image_file() {
    let dir = TempDir::new("lock-file");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", MIB);
    assert_waits_for_lock(&vol, &vol, &key, &dir);
    assert_eq!(keyslots(&vol), vec![0, 1]);
}

#[test]
fn cryptsetup_waits_for_ramparts_header_write() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("lock-order");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", MIB);
    // A slow add-key (the KDF of the new slot takes a while) holds the
    // exclusive lock from loading the header to writing it.
    let new_key = dir.file("slow-key", b"slow");
    let (mut add, _) = spawn_rampart(&[
        "add-key",
        p(&vol),
        "--key-file",
        p(&key),
        "--new-key-file",
        p(&new_key),
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "3000000",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // `flock -n -s` fails once Rampart holds the exclusive lock.
        let free = Command::new(tool("flock"))
            .args(["-n", "-s", p(&vol), "true"])
            .status()
            .unwrap()
            .success();
        if !free {
            break;
        }
        assert!(add.try_wait().unwrap().is_none(), "add-key ended before it locked");
        assert!(Instant::now() < deadline, "rampart add-key never took the metadata lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    // cryptsetup blocks until Rampart is done, then sees the new keyslot: it
    // never reads a header that is being written.
    let dump = ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(&vol)]));
    assert!(add.try_wait().unwrap().is_some(), "cryptsetup read the header while it was locked");
    assert_eq!(add.wait().unwrap().code(), Some(0));
    let dump = text(&dump.stdout);
    assert!(dump.contains("  1: luks2"), "the new keyslot is missing: {dump}");
}

/// A loop device over `image`, detached on drop.
struct Loop(PathBuf);

impl Loop {
    fn attach(image: &Path) -> Self {
        let out = ok("losetup", run_limited("losetup", &["--find", "--show", p(image)], LIMIT));
        let device = PathBuf::from(text(&out.stdout).trim());
        assert!(std::fs::metadata(&device).unwrap().file_type().is_block_device());
        Self(device)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

#[test]
fn block_devices_lock_through_run_cryptsetup_like_cryptsetup() {
    require(&["cryptsetup", "losetup"]);
    let dir = TempDir::new("lock-bdev");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", MIB);
    let device = Loop::attach(&vol);
    let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&device.0).unwrap());
    let (major, minor) = ((rdev >> 8) & 0xfff, (rdev & 0xff) | ((rdev >> 12) & 0xfff00));
    std::fs::create_dir_all("/run/cryptsetup").unwrap();
    let lock_file = PathBuf::from(format!("/run/cryptsetup/L_{major}:{minor}"));
    assert_waits_for_lock(&lock_file, &device.0, &key, &dir);
    // The last holder removes the lock file, as cryptsetup does.
    ok("rampart dump alone", rampart_limited(&["dump", p(&device.0)], LIMIT));
    assert!(!lock_file.exists(), "{} was left behind", lock_file.display());
    let dump = ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(&device.0)]));
    assert!(text(&dump.stdout).contains("  1: luks2"), "{}", text(&dump.stdout));
    // Served from the block device, cryptsetup still reads its header.
    let socket = dir.join("s.sock");
    let mut server = Serve::start(
        &[p(&device.0), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        1,
    );
    ok("cryptsetup luksDump while serving", cryptsetup(&["luksDump", p(&device.0)]));
    server.stop();
}

/// No lock is held while a passphrase is asked for: cryptsetup changes the
/// header while `rampart add-key` waits for its passphrases, and Rampart
/// then writes its keyslot onto the changed header, keeping cryptsetup's
/// change.
#[test]
fn no_lock_is_held_while_a_passphrase_is_asked_for() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("lock-prompt");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 8 * MIB);
    let mut args = vec!["add-key", p(&vol)];
    args.extend_from_slice(PBKDF2);
    // Passphrases come from standard input, one line each, written later.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Give Rampart time to load the header and block on its prompt.
    std::thread::sleep(Duration::from_millis(500));
    let token = dir.file("token.json", br#"{"type":"site-note","keyslots":[]}"#);
    let started = Instant::now();
    ok(
        "cryptsetup token import while rampart prompts",
        cryptsetup(&["token", "import", p(&vol), "--json-file", p(&token), "--token-id", "4"]),
    );
    assert!(started.elapsed() < Duration::from_secs(10), "cryptsetup waited for a lock");
    let mid_dump = ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(&vol)]));
    assert!(text(&mid_dump.stdout).contains("site-note"));
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        let passphrase = std::fs::read(&key).unwrap();
        stdin.write_all(&passphrase).unwrap();
        stdin.write_all(b"\nthe new passphrase\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    ok("rampart add-key", out);
    assert_eq!(keyslots(&vol), vec![0, 1]);
    let dump = text(&cryptsetup(&["luksDump", p(&vol)]).stdout);
    assert!(dump.contains("site-note"), "cryptsetup's token was lost:\n{dump}");
    let new_key = dir.file("new", b"the new passphrase");
    ok(
        "cryptsetup opens with the new passphrase",
        cryptsetup(&["open", "--test-passphrase", "--key-file", p(&new_key), p(&vol)]),
    );
}
