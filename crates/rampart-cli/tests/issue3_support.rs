#![allow(clippy::unwrap_used)]
#![allow(dead_code)]
//! Shared helpers of the issue-3 interoperability tests (included by each
//! `issue3_*.rs` test with `#[path]`; built alone it holds no tests).
//!
//! The peers are the real tools: cryptsetup, qemu-img, nbdkit with its luks
//! filter, nbdcopy/nbdinfo and Python's pyca/cryptography (through
//! `tests/helpers/issue3_luks.py`). A missing tool fails the test with a
//! message naming `scripts/test`, which installs them.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const HELPER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/issue3_luks.py");

/// Cheap KDF settings, the same spelling for cryptsetup and Rampart.
pub const PBKDF2: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
pub const ARGON2I: &[&str] =
    &["--pbkdf", "argon2i", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32768"];
pub const ARGON2ID: &[&str] =
    &["--pbkdf", "argon2id", "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32768"];

/// The error every wrong passphrase must produce.
pub const NO_KEY: &str = "no key available with this passphrase";

/// Finds `name` on PATH (or in /usr/sbin, /sbin where cryptsetup lives);
/// fails the test, naming `scripts/test`, when it is not installed.
pub fn tool(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{name}` is not installed, and the issue-3 interoperability tests need it: run \
         scripts/test, which installs the test dependencies (cryptsetup-bin, qemu-utils, nbdkit, \
         libnbd-bin, python3 with pyca/cryptography)"
    );
}

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

/// A unique, fresh directory under the system temp dir, removed on drop
/// (kept, and named on stderr, when the test is failing).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir()
            .join(format!("rampart-issue3-{tag}-{}-{n}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `bytes` to a new file `name` and returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A sparse file of `size` bytes.
    pub fn sparse(&self, name: &str, size: u64) -> PathBuf {
        let path = self.join(name);
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(size).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("issue3: kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A path as a command-line argument (temp paths are UTF-8).
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn run_with(mut command: Command, stdin: Option<&[u8]>) -> Output {
    command.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().unwrap();
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            // The child may exit before reading everything; that is its
            // answer, not an error here.
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = child.wait_with_output().unwrap();
    if let Some(writer) = writer {
        writer.join().unwrap();
    }
    out
}

/// Runs `program` with `args` (no stdin).
pub fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Output {
    let mut command = Command::new(if program == "python3" { python() } else { tool(program) });
    command.args(args);
    run_with(command, None)
}

/// Runs the `rampart` binary under test.
pub fn rampart(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args);
    run_with(command, None)
}

/// Runs `rampart` with `stdin` as its standard input.
pub fn rampart_in(args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args);
    run_with(command, Some(stdin))
}

pub fn cryptsetup(args: &[&str]) -> Output {
    run("cryptsetup", args)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(what: &str, out: &Output) -> String {
    format!(
        "{what}: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        text(&out.stdout).chars().take(4000).collect::<String>(),
        text(&out.stderr)
    )
}

/// Asserts that the command succeeded and returns its output.
#[track_caller]
pub fn ok(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&format!("{what} failed"), &out));
    out
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

/// Deterministic pseudo-random bytes (splitmix64).
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
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
#[track_caller]
pub fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes differ from the expected {} bytes (first difference at {first:?})",
            got.len(),
            want.len()
        );
    }
}

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
