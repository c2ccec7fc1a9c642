#![allow(clippy::unwrap_used)]
//! `scripts/serve-kill-trials` with 10 trials: `rampart serve` killed with
//! SIGKILL under fio load (nbd engine), restarted, and every block fio
//! wrote and saw flushed before the kill verified with its crc32c. The
//! 100-trial run and its figures are in BENCHMARKS.md,
//! "Crash trials: `kill -9` of `rampart serve` under fio". Then five
//! trials on a volume with integrity in each mode: through the journal,
//! every block of the killed writes must also pass its check.

use crate::helpers::serve_support as support;

use std::process::Command;
use std::time::Duration;

use support::*;

#[test]
fn flushed_writes_survive_kill_9_under_fio() {
    require(&["fio"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/serve-kill-trials");
    let mut command = Command::new(script);
    command.arg("10").env("RAMPART", env!("CARGO_BIN_EXE_rampart"));
    let out = output_limited(command, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("serve kill trials: 10, failures: 0"),
        "{}",
        describe("scripts/serve-kill-trials 10", &out)
    );
}

#[test]
fn kill_9_keeps_each_integrity_modes_promise() {
    require(&["fio", "nbdsh"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/serve-kill-trials");
    for mode in ["journal", "direct"] {
        let mut command = Command::new(script);
        command.args(["--integrity", mode, "5"]).env("RAMPART", env!("CARGO_BIN_EXE_rampart"));
        let out = output_limited(command, Duration::from_secs(300));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("serve kill trials: 5, failures: 0"),
            "{}",
            describe(&format!("scripts/serve-kill-trials --integrity {mode} 5"), &out)
        );
    }
}
