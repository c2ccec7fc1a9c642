#![allow(clippy::unwrap_used)]
//! Shared helpers of the key manager's CLI tests (used by the
//! `kms_*.rs` modules):
//! temporary directories, free ports, `rampart` runs, server processes,
//! and throwaway PostgreSQL clusters from `scripts/pg-test-cluster`.

pub use super::common;
pub use common::TempDir;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn rampart_bin() -> &'static str {
    env!("CARGO_BIN_EXE_rampart")
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `rampart ARGS` with `stdin` as standard input.
pub fn rampart_in(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(rampart_bin())
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("RAMPART_KMS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

pub fn rampart(args: &[&str]) -> Output {
    rampart_in(args, b"")
}

/// Runs and expects success; returns standard output.
pub fn ok(args: &[&str]) -> String {
    let out = rampart(args);
    assert!(
        out.status.success(),
        "rampart {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Issues client bundle `out` for `name` with `labels` (`k=v,...`),
/// signed by the admin bundle `admin`.
pub fn issue_client(admin: &str, name: &str, labels: &str, out: &str) {
    ok(&["kms", "client", "issue", name, "--labels", labels, "--out", out, "--kms", admin]);
}

/// A `rampart kms serve` process, killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    pub child: Child,
    pub url: String,
    /// `HOST:PORT` of the KMIP front end, when started with it.
    pub kmip: Option<String>,
}

impl ServerProcess {
    /// A server without KMIP (`kms serve` opens it only when asked).
    pub fn start(data_dir: &Path, port: u16, store: Option<&str>) -> Self {
        Self::start_full(data_dir, port, store, None, &[])
    }

    /// A server with KMIP on `127.0.0.1:kmip_port`.
    pub fn start_kmip(data_dir: &Path, port: u16, kmip_port: u16, store: Option<&str>) -> Self {
        Self::start_full(data_dir, port, store, Some(kmip_port), &[])
    }

    /// As [`Self::start`], with more `kms serve` flags.
    pub fn start_with(data_dir: &Path, port: u16, store: Option<&str>, extra: &[&str]) -> Self {
        Self::start_full(data_dir, port, store, None, extra)
    }

    fn start_full(
        data_dir: &Path,
        port: u16,
        store: Option<&str>,
        kmip: Option<u16>,
        extra: &[&str],
    ) -> Self {
        let listen = format!("127.0.0.1:{port}");
        let mut args: Vec<String> = vec![
            "kms".into(),
            "serve".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--listen".into(),
            listen,
            // The CLI tests benchmark and load servers from one
            // certificate; rate limits have their own tests.
            "--rate-limit".into(),
            "0".into(),
        ];
        if let Some(store) = store {
            args.push("--store".into());
            args.push(store.into());
        }
        if let Some(port) = kmip {
            args.push("--kmip-listen".into());
            args.push(format!("127.0.0.1:{port}"));
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut child = Command::new(rampart_bin())
            .args(&args)
            .env("RAMPART_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("https://127.0.0.1:"), "server did not start: {line:?}");
        let kmip = kmip.map(|_| {
            let mut kmip = String::new();
            out.read_line(&mut kmip).unwrap();
            kmip.trim().strip_prefix("kmip://").unwrap_or_else(|| panic!("{kmip:?}")).to_owned()
        });
        Self { child, url: line.trim().to_owned(), kmip }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub use rampart_test_support::PgCluster;

pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The items a list command printed with `--json` (one JSON object per
/// line), as a JSON array.
pub fn json_lines(text: impl AsRef<[u8]>) -> serde_json::Value {
    let text = std::str::from_utf8(text.as_ref()).unwrap();
    serde_json::Value::Array(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
            })
            .collect(),
    )
}

/// The token plugin's file name where cryptsetup looks for it.
pub const TOKEN_PLUGIN: &str = "libcryptsetup-token-rampart-kms.so";

/// cryptsetup's compiled-in token plugin directory, as `--help` reports.
pub fn token_plugin_dir() -> PathBuf {
    let mut command = Command::new(common::tool("cryptsetup"));
    command.arg("--help");
    let help = common::output(command);
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("LUKS2 external token plugin path: "))
        .unwrap_or_else(|| panic!("this cryptsetup has no external token support:\n{text}"));
    PathBuf::from(line.trim().trim_end_matches('.'))
}

/// The token plugin of this build (the newest of target/release and its
/// deps), or `None` with `RAMPART_TOKEN_PLUGIN=installed`, after checking
/// that the installed package's plugin is in [`token_plugin_dir`].
pub fn built_token_plugin() -> Option<PathBuf> {
    if std::env::var("RAMPART_TOKEN_PLUGIN").as_deref() == Ok("installed") {
        let installed = token_plugin_dir().join(TOKEN_PLUGIN);
        assert!(installed.is_file(), "RAMPART_TOKEN_PLUGIN=installed but {installed:?} is missing");
        return None;
    }
    let bin_dir = Path::new(rampart_bin()).parent().unwrap().to_owned();
    let built = ["", "deps"]
        .iter()
        .map(|sub| bin_dir.join(sub).join("libcryptsetup_token_rampart_kms.so"))
        .filter(|path| path.is_file())
        .max_by_key(|path| std::fs::metadata(path).unwrap().modified().unwrap())
        .unwrap_or_else(|| {
            panic!(
                "the token plugin is not built in {bin_dir:?}: `cargo build --release \
                 --workspace` (scripts/test) builds it"
            )
        });
    Some(built)
}

/// One test on each store: for a `fn NAME(store: Option<&str>)` (or, with
/// `async`, an `async fn`), the tests `NAME::on_sqlite` (the default
/// store) and `NAME::on_postgres` (a fresh database whose name starts
/// with `TAG`, given as `--store URL`).
macro_rules! on_each_store {
    ($name:ident, $tag:literal) => {
        mod $name {
            #[test]
            fn on_sqlite() {
                super::$name(None);
            }

            #[test]
            fn on_postgres() {
                let cluster = $crate::helpers::kms_support::PgCluster::get();
                let db = cluster.database($tag);
                super::$name(Some(&db));
            }
        }
    };
    (async $name:ident, $tag:literal) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_sqlite() {
                super::$name(None).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_postgres() {
                let cluster = $crate::helpers::kms_support::PgCluster::get();
                let db = cluster.database($tag);
                super::$name(Some(&db)).await;
            }
        }
    };
}
pub(crate) use on_each_store;
