#![allow(clippy::unwrap_used)]
//! The key manager's web console (`/ui/`), from outside:
//! - in headless Chromium (Debian's `chromium`) driven by Playwright for
//!   Python: sign in with a one-time URL, create a key, issue a client
//!   and download its bundle, use it, revoke it and find the refused
//!   unwrap in the audit page, rotate the key, filter and download the
//!   audit log, tamper with the SQLite store and see the broken chain,
//!   sign out and see the cookie refused; a screenshot of each page is
//!   saved to `target/console-screenshots` (CI keeps them);
//! - over plain HTTPS without a client certificate: REST still refuses
//!   such requests; a non-admin gets no code; a code works once and only
//!   from this origin; a revoked admin's codes and sessions die; state
//!   changes without the CSRF token or from another origin are refused;
//!   values are escaped; the security headers are on every page;
//!   sessions are listed and ended.
//!
//! A missing browser, Python or Playwright fails the tests (they never
//! skip); `scripts/test` installs them.

use crate::helpers::kms_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{free_port, ok, rampart_bin, ServerProcess, TempDir};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/console/console_checks.py");

fn screenshots() -> PathBuf {
    // target/console-screenshots, beside the test binaries.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().find(|p| p.ends_with("target")).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        Path::to_path_buf,
    );
    target.join("console-screenshots")
}

fn run_checks(mode: &str) {
    let tmp = TempDir::new(&format!("kms-console-{mode}"));
    let dir = tmp.join("data");
    let port = free_port();
    ok(&[
        "kms",
        "init",
        "--data-dir",
        &dir.display().to_string(),
        "--endpoint",
        &format!("127.0.0.1:{port}"),
    ]);
    let mut server = ServerProcess::start(&dir, port, None);
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let shots = screenshots();
    let out = Command::new("python3")
        .arg(SCRIPT)
        .args([mode, rampart_bin()])
        .args([&dir, &work, &shots])
        .output()
        .expect("python3 is missing (scripts/test installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "console checks ({mode}) failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
    assert!(server.child.try_wait().unwrap().is_none(), "the server died");
    // Whatever the console did is in one intact chain... but the browser
    // run tampered with it on purpose.
    let verify = support::rampart(&[
        "kms",
        "audit",
        "verify",
        "--kms",
        &dir.join("admin.bundle").display().to_string(),
    ]);
    assert_eq!(
        verify.status.success(),
        mode != "browser",
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    server.kill();
}

#[test]
fn console_browser_flow_in_chromium() {
    run_checks("browser");
    let shots = screenshots();
    for name in ["01-sign-in", "04-audit-denied", "07-audit-broken", "08-health", "10-keys"] {
        assert!(shots.join(format!("{name}.png")).is_file(), "no screenshot {name}");
    }
    println!("console screenshots: {}", shots.display());
}

#[test]
fn console_security_refusals_over_https() {
    run_checks("security");
}
