//! Tests under a real Linux kernel: `scripts/kernel-vm` boots Debian's
//! stock kernel in QEMU on this machine's tree (writes stay in the
//! guest's memory) and runs a shell script there as root, where
//! device-mapper (kernel dm-crypt), loop devices and the kernel's NBD
//! client exist. `scripts/test`
//! installs the kernel and checks that it boots before any test runs.
//!
//! Files in the shared directory report the 9p mount's block size
//! (258048 bytes, not a power of two), on which cryptsetup's header
//! reads fail: guest scripts put volume and header files on a loop
//! device (`losetup -f --show FILE`) and hand cryptsetup that.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

pub use super::common::{assert_same, describe, ok, p, rampart, random_bytes, tool, TempDir};

/// The rampart binary under test (the guest runs the same file).
pub fn rampart_bin() -> &'static str {
    env!("CARGO_BIN_EXE_rampart")
}

/// `scripts/kernel-vm`.
pub fn kernel_vm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kernel-vm")
}

/// What a script run under the kernel left: its exit status, and the
/// console, its own output and QEMU's messages for failure reports.
#[derive(Debug)]
pub struct GuestRun {
    pub out: Output,
    pub console: String,
    pub transcript: String,
}

impl GuestRun {
    /// Panics, with the script's transcript and the console, unless the
    /// script exited 0.
    pub fn assert_ok(&self, what: &str) {
        assert!(
            self.out.status.success(),
            "{what} under the kernel: {}\n--- script output ---\n{}\n--- console ---\n{}",
            describe("kernel-vm", &self.out),
            self.transcript,
            self.console,
        );
    }
}

/// Runs `script` (shell text, `set -e` added) under the test kernel with
/// `dir` shared read-write at its own path, and with `modules` loaded
/// besides loop, dm-crypt, dm-integrity and nbd. The script's standard
/// output and error go to `dir/guest.out` (returned as the transcript).
/// `limit` bounds the whole boot.
pub fn run_in_kernel(dir: &TempDir, script: &str, modules: &[&str], limit: Duration) -> GuestRun {
    run_guest(dir, script, modules, limit, false)
}

/// [`run_in_kernel`] on a guest whose PID 1 is systemd (with udev and
/// the journal): the script runs as a service once the basic system is
/// up, and may start units with `systemctl`.
pub fn run_in_kernel_with_systemd(dir: &TempDir, script: &str, limit: Duration) -> GuestRun {
    run_guest(dir, script, &[], limit, true)
}

fn run_guest(
    dir: &TempDir,
    script: &str,
    modules: &[&str],
    limit: Duration,
    systemd: bool,
) -> GuestRun {
    let body =
        format!("set -e\nexec >{out} 2>&1\nset -x\n{script}\n", out = p(&dir.join("guest.out")));
    let script_file = dir.file("guest.sh", body.as_bytes());
    let mut args = vec![p(&kernel_vm()).to_owned()];
    if systemd {
        args.push("--systemd".to_owned());
    }
    args.extend([p(dir.path()).to_owned(), p(&script_file).to_owned()]);
    args.extend(modules.iter().map(|m| (*m).to_owned()));
    let boot = || {
        let mut command = std::process::Command::new(tool("bash"));
        command.args(&args).env("RAMPART_VM_TIMEOUT", limit.as_secs().to_string());
        super::common::output(command)
    };
    let mut out = boot();
    // QEMU itself has aborted on an assertion while the guest kernel set
    // up its devices (hw/pci/msix.c), before the script began: that boot
    // is tried once more. A failure once the script has begun is the
    // test's, and is never retried.
    let emulator_aborted = |out: &Output| {
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("qemu failed (134)")
            && !dir.join("guest.out").exists()
    };
    if emulator_aborted(&out) {
        out = boot();
    }
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    let transcript = std::fs::read_to_string(dir.join("guest.out")).unwrap_or_default();
    // The test harness shows captured output only when the test fails:
    // then whichever assertion failed comes with what the guest did.
    println!("--- guest script output ---\n{transcript}\n--- guest console ---\n{console}");
    GuestRun { out, console, transcript }
}

/// The guest's shell function `step NAME COMMAND...`: runs COMMAND with
/// its output in `NAME.out` and its exit status in `NAME.rc`, and goes on
/// whatever the status (the host asserts on it with [`step`]).
pub const STEP: &str = r#"step() {
  name=$1; shift
  rc=0; "$@" >$name.out 2>&1 || rc=$?
  echo $rc >$name.rc
  cat $name.out
}"#;

/// What a guest [`STEP`] named `name` left in `dir`: its exit status and
/// its output.
pub fn step(dir: &TempDir, name: &str) -> (i32, String) {
    let rc = std::fs::read_to_string(dir.join(&format!("{name}.rc")))
        .unwrap_or_else(|e| panic!("the guest recorded no status for step {name}: {e}"));
    let out = std::fs::read_to_string(dir.join(&format!("{name}.out"))).unwrap_or_default();
    (rc.trim().parse().unwrap(), out)
}

/// Asserts that the guest step succeeded; returns its output.
#[track_caller]
pub fn step_ok(dir: &TempDir, name: &str) -> String {
    let (rc, out) = step(dir, name);
    assert_eq!(rc, 0, "guest step {name} failed:\n{out}");
    out
}
