#![allow(clippy::unwrap_used)]
//! Shared helpers of the LUKS interoperability tests (used by the
//! `luks_*.rs` modules).
//!
//! The peers are the real tools: cryptsetup, qemu-img, nbdkit with its luks
//! filter, nbdcopy/nbdinfo and Python's pyca/cryptography (through
//! `tests/helpers/luks_reference.py`). A missing tool fails the test with a
//! message naming `scripts/test`, which installs them.

use super::common;
pub use common::*;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const HELPER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/luks_reference.py");

/// Cheap KDF settings, the same spelling for cryptsetup and Rampart.
pub const PBKDF2: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
pub const ARGON2I: &[&str] =
    &["--pbkdf", "argon2i", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32768"];
pub const ARGON2ID: &[&str] =
    &["--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32768"];

/// The error every wrong passphrase must produce.
pub const NO_KEY: &str = "no key available with this passphrase";

/// Checks that every tool is installed (and Python has `cryptography`).
pub fn require(tools: &[&str]) {
    for name in tools {
        if *name == "python3" {
            python();
        } else {
            tool(name);
        }
    }
}

/// The Python interpreter that has pyca/cryptography, resolved once: a
/// `python3` on PATH may be a slow launcher (pyenv's shim costs a quarter
/// of a second per run), so the tests call the interpreter it resolves to.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let out = Command::new(tool("python3"))
            .args([
                "-c",
                "import sys, cryptography.hazmat.primitives.ciphers; print(sys.executable)",
            ])
            .output()
            .unwrap();
        let path = PathBuf::from(text(&out.stdout).trim());
        if out.status.success() && path.is_file() {
            Ok(path)
        } else {
            Err(text(&out.stderr).trim().to_owned())
        }
    });
    match found {
        Ok(path) => path.clone(),
        Err(why) => panic!(
            "python3 has no pyca/cryptography module ({why}); run scripts/test, which installs it"
        ),
    }
}

/// Runs `program` with `args` (no stdin); `python3` is the interpreter
/// that has pyca/cryptography.
pub fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Output {
    let mut command = Command::new(if program == "python3" { python() } else { tool(program) });
    command.args(args);
    output(command)
}

pub fn cryptsetup(args: &[&str]) -> Output {
    run("cryptsetup", args)
}

/// Asserts a clean `rampart` failure: a non-zero exit (`code` when given),
/// exactly one stderr line `rampart: error: ...`, no panic. Returns that line.
#[track_caller]
pub fn fails(what: &str, out: &Output, code: Option<i32>) -> String {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{}", describe(&format!("{what} should fail"), out));
    assert!(!err.contains("panicked"), "{}", describe(&format!("{what} panicked"), out));
    if let Some(code) = code {
        assert_eq!(out.status.code(), Some(code), "{}", describe(what, out));
    } else {
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{}",
            describe(&format!("{what}: exit status should be 1 or 2"), out)
        );
    }
    assert_eq!(err.lines().count(), 1, "{}", describe(&format!("{what}: not one line"), out));
    assert!(err.starts_with("rampart: error: "), "{}", describe(what, out));
    err.trim_end().to_owned()
}

/// Like [`fails`], but warnings (`rampart: warning: ...` lines) may come
/// before the one error line.
#[track_caller]
pub fn fails_after_warnings(what: &str, out: &Output) -> String {
    let err = text(&out.stderr);
    let errors = err.lines().filter(|l| !l.starts_with("rampart: warning: ")).count();
    if errors == err.lines().count() {
        return fails(what, out, None);
    }
    assert!(!out.status.success(), "{}", describe(&format!("{what} should fail"), out));
    assert!(!err.contains("panicked"), "{}", describe(&format!("{what} panicked"), out));
    assert!(matches!(out.status.code(), Some(1 | 2)), "{}", describe(what, out));
    assert_eq!(errors, 1, "{}", describe(&format!("{what}: not one error line"), out));
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("rampart: error: "), "{}", describe(what, out));
    last.to_owned()
}

/// Asserts that `rampart` failed with exit 2 and the wrong-passphrase line.
#[track_caller]
pub fn fails_no_key(what: &str, out: &Output) {
    let line = fails(what, out, Some(2));
    assert!(line.contains(NO_KEY), "{what}: {line}");
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len() % 2 == 0, "odd hex length: {text}");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// The volume key as `cryptsetup luksDump --dump-volume-key` prints it
/// ("MK dump:" and its continuation lines). `header` is the LUKS header
/// (the volume itself, or the detached header file).
pub fn cryptsetup_volume_key(header: &Path, key_file: &Path) -> Vec<u8> {
    let out = ok(
        "cryptsetup luksDump --dump-volume-key",
        cryptsetup(&[
            "luksDump",
            "--dump-volume-key",
            "--batch-mode",
            "--key-file",
            p(key_file),
            p(header),
        ]),
    );
    let dump = text(&out.stdout);
    let mut lines = dump.lines();
    let mut hexdigits = String::new();
    let first = lines
        .by_ref()
        .find_map(|line| line.strip_prefix("MK dump:"))
        .unwrap_or_else(|| panic!("no 'MK dump:' in cryptsetup's output:\n{dump}"));
    hexdigits.extend(first.split_whitespace());
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let is_hex = !words.is_empty()
            && line.starts_with(char::is_whitespace)
            && words.iter().all(|w| w.len() == 2 && w.chars().all(|c| c.is_ascii_hexdigit()));
        if !is_hex {
            break;
        }
        hexdigits.extend(words);
    }
    unhex(&hexdigits)
}

/// `cryptsetup luksDump` text (asserting exit 0).
pub fn cryptsetup_dump(header: &Path) -> String {
    text(&ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(header)])).stdout)
}

/// The data offset in bytes as `cryptsetup luksDump` states it: LUKS2's
/// "offset: N [bytes]" of segment 0, LUKS1's "Payload offset: N" sectors.
pub fn cryptsetup_data_offset(dump: &str) -> u64 {
    if let Some(line) = dump.lines().find(|l| l.starts_with("Payload offset:")) {
        let sectors: u64 = line["Payload offset:".len()..].trim().parse().unwrap();
        return sectors * 512;
    }
    let segments = dump
        .split("Data segments:")
        .nth(1)
        .unwrap_or_else(|| panic!("no data segment in cryptsetup's dump:\n{dump}"));
    let line = segments.lines().find(|l| l.trim_start().starts_with("offset:")).unwrap();
    line.trim_start()["offset:".len()..].trim().trim_end_matches("[bytes]").trim().parse().unwrap()
}

/// The keyslot ids cryptsetup's luksDump lists as in use (LUKS2 "Keyslots:"
/// section entries, LUKS1 "Key Slot N: ENABLED").
pub fn cryptsetup_keyslots(dump: &str) -> Vec<usize> {
    if dump.contains("Key Slot 0:") {
        return dump
            .lines()
            .filter_map(|l| l.strip_prefix("Key Slot "))
            .filter(|l| l.ends_with("ENABLED"))
            .map(|l| l.split(':').next().unwrap().parse().unwrap())
            .collect();
    }
    section_ids(dump, "Keyslots:")
}

/// The token ids cryptsetup's LUKS2 luksDump lists.
pub fn cryptsetup_tokens(dump: &str) -> Vec<(usize, String)> {
    let Some(section) = dump.split("\nTokens:\n").nth(1) else { return Vec::new() };
    section
        .lines()
        .take_while(|l| l.starts_with(char::is_whitespace))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.contains(':'))
        .map(|l| {
            let (id, kind) = l.trim().split_once(':').unwrap();
            (id.parse().unwrap(), kind.trim().to_owned())
        })
        .collect()
}

fn section_ids(dump: &str, title: &str) -> Vec<usize> {
    let Some(section) = dump.split(&format!("\n{title}\n")).nth(1) else { return Vec::new() };
    section
        .lines()
        .take_while(|l| l.starts_with(char::is_whitespace))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && !l.starts_with("  \t"))
        .filter_map(|l| l.trim().split(':').next().and_then(|id| id.parse().ok()))
        .collect()
}

/// Runs `cryptsetup open --test-passphrase` and returns whether it opened.
pub fn cryptsetup_opens(volume: &Path, header: Option<&Path>, key_file: &Path) -> bool {
    let mut args = vec!["open", "--test-passphrase", "--key-file", p(key_file)];
    if let Some(h) = header {
        args.extend(["--header", p(h)]);
    }
    args.push(p(volume));
    let out = cryptsetup(&args);
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "{}",
        describe("cryptsetup open --test-passphrase", &out)
    );
    out.status.success()
}

/// `rampart dump --json` (with the volume key when `key_file` is given).
pub fn rampart_json(
    volume: &Path,
    header: Option<&Path>,
    key_file: Option<&Path>,
) -> serde_json::Value {
    let mut args = vec!["dump", "--json", p(volume)];
    if let Some(h) = header {
        args.extend(["--header", p(h)]);
    }
    if let Some(k) = key_file {
        args.extend(["--dump-volume-key", "--key-file", p(k)]);
    }
    let out = ok("rampart dump --json", rampart(&args));
    assert!(out.stderr.is_empty(), "unexpected warnings: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The segment parameters the reference decryption needs.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub data_offset: u64,
    pub cipher: String,
    pub sector_size: u64,
    pub iv_tweak: u64,
}

/// Reads the segment from `rampart dump --json`; for LUKS2 the `iv_tweak`
/// comes from the header's own JSON area (`header` is the file holding the
/// header), cross-checked against the dump.
pub fn segment_info(dump: &serde_json::Value, header: &Path) -> SegmentInfo {
    let mut info = SegmentInfo {
        data_offset: dump["data_offset"].as_u64().unwrap(),
        cipher: dump["cipher"].as_str().unwrap().to_owned(),
        sector_size: dump["sector_size"].as_u64().unwrap(),
        iv_tweak: 0,
    };
    if dump["version"] == 2 {
        let json = luks2_json(header, 0);
        let seg = &json["segments"]["0"];
        info.iv_tweak = seg["iv_tweak"].as_str().unwrap().parse().unwrap();
        assert_eq!(seg["offset"].as_str().unwrap(), info.data_offset.to_string(), "{json}");
        assert_eq!(seg["encryption"].as_str().unwrap(), info.cipher, "{json}");
        assert_eq!(seg["sector_size"].as_u64().unwrap(), info.sector_size, "{json}");
    }
    info
}

/// Decrypts `len` bytes at the start of the crypt segment of `data_file`
/// with pyca/cryptography.
pub fn python_decrypt(
    dir: &TempDir,
    data_file: &Path,
    seg: &SegmentInfo,
    key: &[u8],
    len: usize,
) -> Vec<u8> {
    let out_path = dir.join("python-plain.bin");
    ok(
        "python decrypt",
        run(
            "python3",
            &[
                HELPER,
                "decrypt",
                p(data_file),
                &seg.data_offset.to_string(),
                &len.to_string(),
                &seg.cipher,
                &hex(key),
                &seg.sector_size.to_string(),
                &seg.iv_tweak.to_string(),
                p(&out_path),
            ],
        ),
    );
    let plain = std::fs::read(&out_path).unwrap();
    std::fs::remove_file(&out_path).unwrap();
    plain
}

/// Encrypts `plain` with pyca/cryptography and writes it at the start of
/// the crypt segment of `data_file`.
pub fn python_encrypt(
    dir: &TempDir,
    data_file: &Path,
    seg: &SegmentInfo,
    key: &[u8],
    plain: &[u8],
) {
    let in_path = dir.file("python-in.bin", plain);
    ok(
        "python encrypt",
        run(
            "python3",
            &[
                HELPER,
                "encrypt",
                p(data_file),
                &seg.data_offset.to_string(),
                &seg.cipher,
                &hex(key),
                &seg.sector_size.to_string(),
                &seg.iv_tweak.to_string(),
                p(&in_path),
            ],
        ),
    );
    std::fs::remove_file(&in_path).unwrap();
}

/// Rewrites both LUKS2 JSON areas with `json` and valid checksums.
pub fn python_rewrite_json(dir: &TempDir, volume: &Path, json: &[u8]) {
    let json_path = dir.file("rewrite.json", json);
    ok("python rewrite-json", run("python3", &[HELPER, "rewrite-json", p(volume), p(&json_path)]));
}

/// Whether both LUKS2 header copies are valid (magic, checksum, seqid).
pub fn python_headers_valid(volume: &Path) -> (bool, String) {
    let out = run("python3", &[HELPER, "check-headers", p(volume)]);
    (out.status.success(), text(&out.stdout).trim().to_owned())
}

/// Reads a LUKS2 header's JSON area (copy at byte `offset`).
pub fn luks2_json(volume: &Path, offset: u64) -> serde_json::Value {
    let bytes = std::fs::read(volume).unwrap();
    let start = usize::try_from(offset).unwrap();
    let size = usize::try_from(u64::from_be_bytes(bytes[8..16].try_into().unwrap())).unwrap();
    let area = &bytes[start + 4096..start + size];
    let end = area.iter().position(|&b| b == 0).unwrap_or(area.len());
    serde_json::from_slice(&area[..end]).unwrap()
}

/// Asserts two byte strings are equal without printing megabytes.
/// A background server process (nbdkit), killed and reaped on drop. Its
/// stderr goes to a log file for failure messages.
#[derive(Debug)]
pub struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    /// Starts `program` and waits until `socket` exists.
    pub fn start(program: &str, args: &[&str], socket: &Path, log: PathBuf) -> Self {
        let log_file = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(tool(program))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "{program} exited ({status}) before creating its socket: {} (scripts/test \
                     installs nbdkit and its filters)",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "{program} did not create {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, log }
    }

    /// What the server said on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `rampart ARGS` with extra environment variables (the test hooks
/// `RAMPART_REENCRYPT_STOP_AFTER` / `_CRASH_AFTER`).
pub fn rampart_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    output(command)
}

/// Runs cryptsetup with `args` and kills it (SIGKILL) once `progressed`
/// holds for the JSON of `header`.
pub fn kill_cryptsetup_when(
    what: &str,
    args: &[&str],
    header: &Path,
    progressed: impl Fn(&serde_json::Value) -> bool,
) {
    let mut child = Command::new(tool("cryptsetup"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if header_json_now(header).is_some_and(|j| progressed(&j)) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{what}: cryptsetup finished before it could be killed"
        );
        assert!(Instant::now() < deadline, "{what}: cryptsetup made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whether a header in reencryption marks a hotzone as in progress (a run
/// interrupted mid-hotzone).
pub fn has_hotzone(header: &Path) -> bool {
    let json = luks2_json(header, 0);
    json["segments"]
        .as_object()
        .unwrap()
        .values()
        .any(|s| s["flags"].as_array().is_some_and(|f| f.iter().any(|f| f == "in-reencryption")))
}
