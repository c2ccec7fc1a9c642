#![allow(clippy::unwrap_used)]
//! Shared helpers of the NBD serve tests (used by the `serve_*.rs`
//! modules).
//!
//! The tests drive the real `rampart serve` binary with real NBD clients
//! (libnbd's nbdinfo/nbdcopy/nbdfuse/nbdsh, qemu-img/qemu-io, fio's nbd
//! engine) and, for protocol abuse, a small raw-socket client below. A
//! missing tool fails the test with a message naming `scripts/test`.

use super::common;
pub use common::*;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const XTS_CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/xts_check.py");

/// Cheap KDF settings for `rampart format`.
pub const PBKDF2: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

/// LUKS2's default header area: a volume file of `data + HEADER` bytes holds
/// exactly `data` bytes of plaintext.
pub const HEADER: u64 = 16 << 20;

pub const MIB: u64 = 1 << 20;

/// Checks that every tool is installed; `python3` must import pyca's
/// `cryptography`, `nbdsh` must find libnbd's Python module.
pub fn require(tools: &[&str]) {
    for name in tools {
        let path = tool(name);
        if *name == "python3" {
            let out = Command::new(&path)
                .args(["-c", "import cryptography.hazmat.primitives.ciphers"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "python3 has no pyca/cryptography module ({}); run scripts/test, which installs it",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if *name == "nbdsh" {
            let out = nbdsh_command().args(["-c", "pass"]).output().unwrap();
            assert!(
                out.status.success(),
                "nbdsh cannot load libnbd's Python module ({}); run scripts/test, which installs \
                 python3-libnbd",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
}

/// `nbdsh` runs `python3 -m nbd`; Debian's python3 has the module
/// (python3-libnbd) even when another python3 comes first on PATH.
pub fn nbdsh_command() -> Command {
    let mut command = Command::new(tool("nbdsh"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
    dirs.extend(std::env::split_paths(&path));
    command.env("PATH", std::env::join_paths(dirs).unwrap());
    command
}

/// Runs `program` with `args`, failing the test when it has not finished
/// within `limit` (a hung client must fail, not hang, the test).
pub fn run_limited<S: AsRef<OsStr>>(program: &str, args: &[S], limit: Duration) -> Output {
    let mut command = Command::new(tool(program));
    command.args(args);
    output_limited(command, limit)
}

/// `rampart ARGS`, failing the test when it has not finished within `limit`.
pub fn rampart_limited(args: &[&str], limit: Duration) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args).env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    output_limited(command, limit)
}

/// Runs a prepared command with its output captured, failing the test when
/// it has not finished within `limit`.
pub fn output_limited(mut command: Command, limit: Duration) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let Some(status) = wait_timeout(&mut child, limit) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{program} did not finish within {limit:?}");
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// The passphrase file every serve test volume uses.
pub fn key_file(dir: &TempDir) -> PathBuf {
    let path = dir.join("key");
    if !path.exists() {
        std::fs::write(&path, b"serve passphrase").unwrap();
    }
    path
}

/// Formats a LUKS2 volume `name` in `dir` holding `data` bytes of
/// plaintext, with a cheap KDF; returns its path.
pub fn make_volume(dir: &TempDir, name: &str, data: u64) -> PathBuf {
    let key = key_file(dir);
    let path = dir.join(name);
    let size = (data + HEADER).to_string();
    let mut args = vec!["format", p(&path), "--size", &size, "--key-file", p(&key)];
    args.extend_from_slice(PBKDF2);
    args.push("-q");
    ok("rampart format", rampart(&args));
    path
}

/// `rampart export VOL --offset O --length L -` as bytes.
pub fn export_range(vol: &Path, key: &Path, offset: u64, length: u64) -> Vec<u8> {
    let offset = offset.to_string();
    let length = length.to_string();
    let out = ok(
        "rampart export",
        rampart(&[
            "export",
            p(vol),
            "-",
            "--key-file",
            p(key),
            "--offset",
            &offset,
            "--length",
            &length,
        ]),
    );
    out.stdout
}

/// The volume key from `cryptsetup luksDump --dump-volume-key`.
pub fn cryptsetup_volume_key(vol: &Path, key: &Path) -> String {
    let out = ok(
        "cryptsetup luksDump --dump-volume-key",
        run(
            "cryptsetup",
            &["luksDump", "--dump-volume-key", "--batch-mode", "--key-file", p(key), p(vol)],
        ),
    );
    let dump = text(&out.stdout);
    let mut lines = dump.lines();
    let first = lines
        .by_ref()
        .find_map(|l| l.strip_prefix("MK dump:").or_else(|| l.strip_prefix("Volume key:")))
        .unwrap_or_else(|| panic!("no volume key in cryptsetup's output:\n{dump}"));
    let mut hex: String = first.split_whitespace().collect();
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let continues = line.starts_with(char::is_whitespace)
            && !words.is_empty()
            && words.iter().all(|w| w.len() == 2 && w.chars().all(|c| c.is_ascii_hexdigit()));
        if !continues {
            break;
        }
        hex.extend(words);
    }
    hex
}

/// Sends `signal` (TERM, INT, KILL) to process `pid` with kill(1).
pub fn send_signal(pid: u32, signal: &str) {
    let out = run("kill", &[format!("-{signal}"), pid.to_string()]);
    assert!(out.status.success(), "{}", describe("kill", &out));
}

/// Waits for `child` to exit, at most `limit`.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `rampart serve`, killed (SIGKILL) and reaped on drop. Its
/// stdout (the URIs) is read by a thread, its stderr goes to a log file.
pub struct Serve {
    child: Child,
    log: PathBuf,
    pub uris: Vec<String>,
    /// The URIs of the first `uris.len()` stdout lines; later lines land here.
    later: mpsc::Receiver<String>,
    pub status: Option<ExitStatus>,
}

impl Serve {
    /// Starts `rampart serve ARGS` and waits until it has printed `uris`
    /// lines (it prints them after binding every listener).
    pub fn start(args: &[&str], log: PathBuf, uris: usize) -> Self {
        Self::start_with_stdin(args, log, uris, Stdio::null())
    }

    /// [`Serve::start`] with `stdin` as the server's standard input (a
    /// passphrase it reads).
    pub fn start_with_stdin(args: &[&str], log: PathBuf, uris: usize, stdin: Stdio) -> Self {
        let log_file = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("serve")
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .env_remove("RAMPART_LOG")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start rampart serve: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut serve = Self { child, log, uris: Vec::new(), later: rx, status: None };
        let deadline = Instant::now() + Duration::from_secs(30);
        while serve.uris.len() < uris {
            match serve.later.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => serve.uris.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = wait_timeout(&mut serve.child, Duration::from_secs(5));
                    panic!(
                        "rampart serve {args:?} ended ({status:?}) after printing {:?}: {}",
                        serve.uris,
                        serve.log()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "rampart serve printed only {:?} within 30 s: {}",
                serve.uris,
                serve.log()
            );
        }
        serve
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The first printed URI.
    pub fn uri(&self) -> &str {
        &self.uris[0]
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Asserts that the server is still running and never panicked.
    #[track_caller]
    pub fn assert_alive(&mut self, after: &str) {
        let status = self.child.try_wait().unwrap();
        assert!(status.is_none(), "rampart serve died ({status:?}) after {after}: {}", self.log());
        self.assert_no_panic(after);
    }

    #[track_caller]
    pub fn assert_no_panic(&self, after: &str) {
        let log = self.log();
        assert!(!log.contains("panicked"), "rampart serve panicked after {after}:\n{log}");
    }

    /// Sends `signal` and waits (at most `limit`) for the exit status.
    pub fn stop_with(&mut self, signal: &str, limit: Duration) -> ExitStatus {
        send_signal(self.pid(), signal);
        let status = wait_timeout(&mut self.child, limit).unwrap_or_else(|| {
            panic!("rampart serve did not exit within {limit:?} of SIG{signal}: {}", self.log())
        });
        self.status = Some(status);
        status
    }

    /// SIGTERM, then asserts a clean exit (status 0, the counters line, no
    /// panic) within 20 s; returns the log.
    #[track_caller]
    pub fn stop(&mut self) -> String {
        let status = self.stop_with("TERM", Duration::from_secs(20));
        let log = self.log();
        assert!(status.success(), "rampart serve exited {status} on SIGTERM:\n{log}");
        assert!(log.contains("served "), "no counters line on exit:\n{log}");
        assert!(!log.contains("panicked"), "rampart serve panicked:\n{log}");
        log
    }

    /// The exit status if the server has exited (reaping it), else `None`.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().unwrap();
        if status.is_some() {
            self.status = status;
        }
        status
    }

    /// SIGKILL (no chance to flush) and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        self.status = Some(self.child.wait().unwrap());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The unix-socket URI among a server's printed URIs for export `name`.
pub fn unix_uri(socket: &Path, name: &str) -> String {
    format!("nbd+unix:///{name}?socket={}", socket.display())
}

// A raw NBD client for protocol tests, with the protocol's constants.

pub use rampart_nbd::proto::*;
pub use rampart_test_support::nbd::request_bytes;

/// The blocking raw client over the server's Unix socket.
pub type RawClient = rampart_test_support::nbd::Client;

/// An INFO/GO payload: `name`, no information requests.
pub fn info_payload(name: &str) -> Vec<u8> {
    rampart_test_support::nbd::info_payload(name, &[])
}

/// Extensions of a test CA certificate (with [`issue_certificate`]).
pub const CA_EXTENSIONS: &str = "[req]\ndistinguished_name=dn\n[dn]\n[v3]\n\
    basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n\
    subjectKeyIdentifier=hash\n";
/// Extensions of a test server certificate for localhost and 127.0.0.1
/// (qemu insists on keyEncipherment, even for ECDSA certificates).
pub const SERVER_EXTENSIONS: &str = "[v3]\nbasicConstraints=critical,CA:FALSE\n\
    keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n\
    subjectAltName=DNS:localhost,IP:127.0.0.1\n";
/// Extensions of a test client certificate.
pub const CLIENT_EXTENSIONS: &str = "[v3]\nbasicConstraints=critical,CA:FALSE\n\
    keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n";

/// Runs the openssl CLI in `dir`; panics with its output on failure.
pub fn openssl(dir: &Path, args: &[&str]) {
    let mut command = Command::new(tool("openssl"));
    command.current_dir(dir).args(args);
    ok(&format!("openssl {}", args[0]), output(command));
}

/// A P-256 key `DIR/NAME-key.pem` and a certificate `DIR/NAME-cert.pem`
/// for `subject`, signed by the certificate and key `DIR/CA-*.pem` (self-signed
/// when `ca` is None), with the `[v3]` section of `extensions`.
pub fn issue_certificate(
    dir: &Path,
    name: &str,
    subject: &str,
    ca: Option<&str>,
    extensions: &str,
) {
    let key = format!("{name}-key.pem");
    let cert = format!("{name}-cert.pem");
    let ext = format!("{name}.ext");
    std::fs::write(dir.join(&ext), extensions).unwrap();
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    match ca {
        None => {
            let mut args = vec!["req", "-x509"];
            args.extend(curve);
            args.extend(["-keyout", &key, "-out", &cert, "-days", "2", "-subj", subject]);
            args.extend(["-extensions", "v3", "-config", &ext]);
            openssl(dir, &args);
        }
        Some(ca) => {
            let csr = format!("{name}.csr");
            let mut args = vec!["req"];
            args.extend(curve);
            args.extend(["-keyout", &key, "-out", &csr, "-subj", subject]);
            openssl(dir, &args);
            let (ca_cert, ca_key) = (format!("{ca}-cert.pem"), format!("{ca}-key.pem"));
            let serial = format!("0x{:016x}", std::process::id() as u64 * 1000 + name.len() as u64);
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &ca_cert,
                    "-CAkey",
                    &ca_key,
                    "-set_serial",
                    &serial,
                    "-out",
                    &cert,
                    "-days",
                    "2",
                    "-extfile",
                    &ext,
                    "-extensions",
                    "v3",
                ],
            );
        }
    }
}
