//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rampart_luks::{HashAlg, PbkdfChoice, PbkdfKind};

pub use rampart_test_support::{fast_pbkdf2, TempDir};

pub fn open_rw(path: &Path) -> File {
    OpenOptions::new().read(true).write(true).open(path).unwrap()
}

/// The cryptsetup binary. The interop tests must not silently pass without
/// it: they fail with instructions instead.
pub fn cryptsetup() -> &'static str {
    let found = Command::new("cryptsetup")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "cryptsetup is not installed: the LUKS interoperability tests need it. \
         Run the project's test script, scripts/test, which installs Debian's cryptsetup-bin \
         (or run `apt-get install -y cryptsetup-bin`)."
    );
    "cryptsetup"
}

/// Runs cryptsetup with `args`, returning its output (not checked).
pub fn cs(args: &[&str]) -> Output {
    Command::new(cryptsetup()).args(args).env("LC_ALL", "C").stdin(Stdio::null()).output().unwrap()
}

/// Runs cryptsetup and asserts success.
pub fn cs_ok(args: &[&str]) -> String {
    let out = cs(args);
    assert!(
        out.status.success(),
        "cryptsetup {args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The volume key cryptsetup recovers with `key_file` (from the hex lines
/// of `luksDump --dump-volume-key`).
pub fn cs_volume_key(device: &Path, header: Option<&Path>, key_file: &Path) -> Vec<u8> {
    let mut args = vec!["luksDump", "--dump-volume-key", "--batch-mode", "--key-file", s(key_file)];
    if let Some(h) = header {
        args.extend(["--header", s(h)]);
    }
    args.push(s(device));
    let text = cs_ok(&args);
    let mut hex = String::new();
    let mut in_key = false;
    for line in text.lines() {
        if let Some(rest) =
            line.strip_prefix("MK dump:").or_else(|| line.strip_prefix("Volume key:"))
        {
            in_key = true;
            hex.push_str(rest);
        } else if in_key && line.starts_with(char::is_whitespace) {
            hex.push_str(line);
        } else if in_key {
            break;
        }
    }
    let hex: String = hex.split_whitespace().collect();
    assert!(!hex.is_empty(), "no volume key in cryptsetup output:\n{text}");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// cryptsetup's parsed LUKS2 JSON metadata.
pub fn cs_json(device: &Path) -> serde_json::Value {
    serde_json::from_str(&cs_ok(&["luksDump", "--dump-json-metadata", s(device)])).unwrap()
}

/// `cryptsetup open --test-passphrase`: whether the key file opens the
/// device (optionally a given keyslot).
pub fn cs_test_passphrase(
    device: &Path,
    header: Option<&Path>,
    key_file: &Path,
    slot: Option<usize>,
) -> bool {
    let slot_text = slot.map(|s| s.to_string());
    let mut args = vec!["open", "--test-passphrase", "--key-file", s(key_file)];
    if let Some(h) = header {
        args.extend(["--header", s(h)]);
    }
    if let Some(slot) = &slot_text {
        args.extend(["--key-slot", slot]);
    }
    args.push(s(device));
    cs(&args).status.success()
}

/// Cheap Argon2 for tests (time 4, 64 KiB).
pub fn fast_argon2(kind: PbkdfKind) -> PbkdfChoice {
    PbkdfChoice {
        kind,
        hash: HashAlg::Sha256,
        iter_time_ms: 1,
        forced_iterations: Some(4),
        memory_kib: 64,
        parallel: 2,
    }
}
