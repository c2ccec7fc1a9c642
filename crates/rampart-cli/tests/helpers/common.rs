//! Helpers every CLI test shares (re-exported by the support module of
//! each kind of test): scratch directories, tool lookup, running programs and
//! comparing their output.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub use rampart_test_support::{tool, TempDir};

/// A path as a command-line argument (temp paths are UTF-8).
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn describe(what: &str, out: &Output) -> String {
    format!(
        "{what}: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        text(&out.stdout).chars().take(6000).collect::<String>(),
        text(&out.stderr).chars().take(6000).collect::<String>()
    )
}

/// Runs a prepared command with its output captured and `stdin` (or
/// nothing) as its standard input; backtraces off so errors read as users
/// see them.
pub fn output_with(mut command: Command, stdin: Option<&[u8]>) -> Output {
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

/// Runs a prepared command with its output captured, stdin closed.
pub fn output(command: Command) -> Output {
    output_with(command, None)
}

/// Runs `program` (a tool on PATH) with `args`.
pub fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Output {
    let mut command = Command::new(tool(program));
    command.args(args);
    output(command)
}

/// Runs the `rampart` binary under test.
pub fn rampart(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args);
    output(command)
}

/// Runs `rampart` with `stdin` as its standard input.
pub fn rampart_in(args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
    command.args(args);
    output_with(command, Some(stdin))
}

/// Asserts that the command succeeded and returns its output.
#[track_caller]
pub fn ok(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&format!("{what} failed"), &out));
    out
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

/// The JSON area of a LUKS2 header being written by another process, if
/// it parses at this instant.
pub fn header_json_now(header: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(header).ok()?;
    let size = usize::try_from(u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?)).ok()?;
    let area = bytes.get(4096..size)?;
    let end = area.iter().position(|&b| b == 0).unwrap_or(area.len());
    serde_json::from_slice(&area[..end]).ok()
}
