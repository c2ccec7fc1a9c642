//! Headerless volumes without the kernel: `--type plain` round trips
//! through `rampart import` and `rampart export`, the one-line refusals of
//! settings and keys that cannot work, and `rampart serve --one-time-key`:
//! once the server stops, nothing left on disk reads the data back.
//! (`kernel_plain_mode.rs` compares every option with dm-crypt.)

use crate::helpers::serve_support::*;

use std::path::Path;

/// `rampart ARGS` with standard input `stdin`, asserting success.
fn rampart_ok(what: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    ok(what, rampart_in(args, stdin)).stdout
}

#[test]
fn plain_volumes_round_trip_under_each_key_source() {
    let dir = TempDir::new("plain-round-trip");
    let data = random_bytes(1, 3 * MIB as usize);
    let input = dir.file("data", &data);
    let raw_key = dir.file("raw.key", &random_bytes(2, 100));
    let raw = p(&raw_key);
    let settings: [(&str, Vec<&str>, &[u8]); 4] = [
        ("defaults, a passphrase line", vec![], b"pass phrase\n"),
        (
            "XTS, a key file at an offset",
            vec!["--cipher", "aes-xts-plain64", "--key-size", "512", "--key-file", raw],
            b"",
        ),
        (
            "CBC plain64, --key-file -",
            vec!["--cipher", "aes-cbc-plain64", "--hash", "sha256", "--key-file", "-"],
            b"binary\npassphrase\n",
        ),
        (
            "XTS 4096-byte sectors, large-sector IVs, offset and skip",
            vec![
                "--cipher",
                "aes-xts-plain64",
                "--sector-size",
                "4096",
                "--iv-large-sectors",
                "--skip",
                "8",
                "--data-offset",
                "16",
                "--hash",
                "sha3-256",
            ],
            b"another\n",
        ),
    ];
    let mut images = Vec::new();
    for (i, (what, flags, stdin)) in settings.iter().enumerate() {
        let vol = dir.sparse(&format!("v{i}.img"), 3 * MIB + 16 * 512);
        let mut import = vec!["import", p(&vol), p(&input), "--type", "plain"];
        import.extend(flags.iter().copied());
        rampart_ok(&format!("{what}: import"), &import, stdin);
        let stored = std::fs::read(&vol).unwrap();
        assert!(
            !stored.windows(64).any(|w| w == &data[..64]),
            "{what}: the plaintext is on the device"
        );
        let out = dir.join(&format!("v{i}.out"));
        let mut export = vec!["export", p(&vol), p(&out), "--type", "plain"];
        export.extend(flags.iter().copied());
        rampart_ok(&format!("{what}: export"), &export, stdin);
        let back = std::fs::read(&out).unwrap();
        let offset = if i == 3 { 16 * 512 } else { 0 };
        assert_same(what, &back[..data.len()], &data);
        assert_eq!(back.len() as u64, 3 * MIB + 16 * 512 - offset, "{what}: the plaintext size");
        images.push(stored);
    }
    // Another passphrase reads other bytes.
    let out = dir.join("wrong.out");
    let vol = dir.join("v0.img");
    rampart_ok("wrong passphrase", &["export", p(&vol), p(&out), "--type", "plain"], b"pass\n");
    assert_ne!(std::fs::read(&out).unwrap()[..data.len()], data[..]);
}

#[test]
fn plain_settings_that_cannot_work_are_refused_in_one_line() {
    let dir = TempDir::new("plain-refusals");
    let vol = dir.sparse("v.img", MIB);
    let odd = dir.sparse("odd.img", MIB + 512);
    let short = dir.file("short.key", &[7u8; 40]);
    let out = dir.join("out");
    let v = p(&vol);
    let o = p(&out);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--cipher", "serpent-xts-plain64"], "not supported"),
        (vec!["--cipher", "aes-xts-plain64", "--key-size", "384"], "--key-size 384"),
        (vec!["--hash", "whirlpool"], "--hash whirlpool"),
        (vec!["--hash", "sha256:40"], "do not fit"),
        (vec!["--sector-size", "3000"], "--sector-size 3000"),
        (vec!["--sector-size", "4096", "--skip", "3"], "--skip 3"),
        (vec!["--sector-size", "4096", "--data-offset", "1"], "--offset 1"),
        (vec!["--data-offset", "4096"], "beyond the end"),
        (
            vec!["--cipher", "aes-xts-plain64", "--key-size", "512", "--key-file", p(&short)],
            "40 bytes",
        ),
        (vec!["--key-file", p(&short), "--keyfile-offset", "41"], "beyond the end"),
        (vec!["--keyfile-size", "0"], "--keyfile-size 0"),
        (vec!["--header", p(&short)], "no header"),
        (vec!["--key-slot", "1"], "no keyslots"),
    ];
    for (flags, message) in &cases {
        let mut args = vec!["export", v, o, "--type", "plain"];
        args.extend(flags.iter().copied());
        let out = rampart_in(&args, b"pass\n");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe("export", &out));
        assert!(stderr.contains(message), "{args:?}: wanted {message:?} in {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: not one line: {stderr}");
    }
    // Whole sectors only, as dm-crypt.
    let args = ["export", p(&odd), o, "--type", "plain", "--sector-size", "4096"];
    let out = rampart_in(&args, b"pass\n");
    assert_eq!(out.status.code(), Some(2), "{}", describe("odd size", &out));
    assert!(text(&out.stderr).contains("whole number"), "{}", text(&out.stderr));
    // The 32-bit plain IV must not wrap: 2 TiB and no more.
    let huge = dir.sparse("huge.img", (2 << 40) + 4096);
    let args =
        ["export", p(&huge), o, "--type", "plain", "--cipher", "aes-xts-plain", "--length", "1"];
    let out = rampart_in(&args, b"pass\n");
    assert_eq!(out.status.code(), Some(2), "{}", describe("aes-xts-plain beyond 2 TiB", &out));
    assert!(text(&out.stderr).contains("aes-xts-plain64"), "{}", text(&out.stderr));
    let out = rampart_in(&["export", p(&huge), o, "--type", "plain", "--length", "1"], b"pass\n");
    ok("aes-cbc-essiv:sha256 beyond 2 TiB", out);
    // Plain flags on a LUKS volume, and one-time keys with a key.
    let out = rampart(&["export", v, o, "--cipher", "aes-xts-plain64"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("--cipher without --type", &out));
    assert!(text(&out.stderr).contains("--type plain"), "{}", text(&out.stderr));
    let out = rampart(&["serve", v, "--offset", "8"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("--offset without --type", &out));
    assert!(text(&out.stderr).contains("--offset is for"), "{}", text(&out.stderr));
    let out = rampart(&["serve", v, "--one-time-key", "--key-file", p(&short)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("--one-time-key --key-file", &out));
    let out = rampart(&["serve", v, "--one-time-key", "--hash", "sha256"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("--one-time-key --hash", &out));
    assert!(text(&out.stderr).contains("--hash"), "{}", text(&out.stderr));
}

/// Every file below `dir`, with its contents.
fn files_below(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_below(&path));
        } else if path.is_file() {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found
}

#[test]
fn one_time_key_data_is_unreadable_once_the_server_stops() {
    require(&["nbdcopy"]);
    let dir = TempDir::new("one-time-key");
    let vol = dir.sparse("scratch.img", 16 * MIB);
    let marker = b"ONE-TIME-KEY-MARKER:the data that must not survive the server.";
    let mut data = Vec::new();
    while data.len() < 8 * MIB as usize {
        data.extend_from_slice(marker);
        data.extend_from_slice(&random_bytes(data.len() as u64, 1000));
    }
    data.truncate(8 * MIB as usize);
    // The data and the copies the test reads back live outside `dir`.
    let outside = TempDir::new("one-time-key-client");
    let input = outside.file("data", &data);
    let socket = dir.join("serve.sock");
    let uri = unix_uri(&socket, "");
    let args = [p(&vol), "--one-time-key", "--socket", p(&socket)];

    let mut serve = Serve::start(&args, outside.join("serve.log"), 1);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.pid())).unwrap();
    let locked = status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(locked > 0, "the server holds no locked memory:\n{status}");
    ok("nbdcopy into the one-time volume", run("nbdcopy", &[p(&input), &uri]));
    let back = outside.join("back");
    ok("nbdcopy out of the one-time volume", run("nbdcopy", &[&uri, p(&back)]));
    assert_same("read back while served", &std::fs::read(&back).unwrap()[..data.len()], &data);
    let log = serve.stop();

    // Nothing the server left, nor its log, holds the data; it wrote no
    // file but the volume.
    let left = files_below(dir.path());
    let names: Vec<String> =
        left.iter().map(|(path, _)| path.file_name().unwrap().to_string_lossy().into()).collect();
    assert_eq!(names, ["scratch.img"], "files the server left: {names:?}");
    for (path, bytes) in &left {
        assert!(
            !bytes.windows(marker.len()).any(|w| w == marker),
            "{} holds the plaintext",
            path.display()
        );
    }
    assert!(!log.contains("ONE-TIME-KEY-MARKER"), "the log holds the plaintext: {log}");
    // Nor anything long enough to be a key in hex or base64.
    let longest = log
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest < 32, "the log holds a run of {longest} key-like characters: {log}");
    assert_eq!(
        std::fs::metadata(&vol).unwrap().len(),
        16 * MIB,
        "the volume grew a header or a key"
    );

    // A new server has a new key: the same device reads as other bytes.
    let mut again = Serve::start(&args, outside.join("serve2.log"), 1);
    let other = outside.join("other");
    ok("nbdcopy out of a new one-time volume", run("nbdcopy", &[&uri, p(&other)]));
    again.stop();
    let other = std::fs::read(&other).unwrap();
    assert!(
        !other.windows(marker.len()).any(|w| w == marker),
        "a new one-time key reads the old data"
    );
    assert_ne!(other[..data.len()], data[..]);
}
