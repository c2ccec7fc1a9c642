//! The header corpus checked against the real cryptsetup: every case made
//! by `header_corpus.py` (one mutation of a cryptsetup-made LUKS2 volume
//! per check of cryptsetup 2.6's header validation) is loaded by Rampart
//! and by `cryptsetup luksDump`, and opened with its passphrase by Rampart
//! and by `cryptsetup open --test-passphrase`; both must give the verdict
//! the corpus records. A disagreement names the case and the cryptsetup
//! check it models. Where cryptsetup 2.6.1 misbehaves (an assertion on
//! token ids above 31, a digest check that accepts any passphrase), the
//! corpus records what it does instead and the test checks that too, so a
//! cryptsetup that changes shows up here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{cryptsetup, TempDir};
use rampart_luks::{Luks, MemoryIo};
use serde_json::Value;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/header_corpus.py");

fn rampart_verdict(img: &[u8], passphrase: &[u8]) -> (&'static str, String) {
    let io = MemoryIo::from_vec(img.to_vec());
    match Luks::load(&io) {
        Err(e) => ("refuse", e.to_string()),
        Ok((luks, _)) => match luks.unlock(&io, passphrase, None) {
            Ok(_) => ("open", String::new()),
            Err(e) => ("load", e.to_string()),
        },
    }
}

fn cryptsetup_opens(img: &Path, key: &Path) -> Option<bool> {
    let open = Command::new(cryptsetup())
        .args(["open", "--test-passphrase", "--key-file"])
        .arg(key)
        .arg(img)
        .output()
        .unwrap();
    // None: killed by a signal (an assertion).
    open.status.code().map(|code| code == 0)
}

/// cryptsetup's verdict, or how it misbehaves (see `CRYPTSETUP_DIFFERS`
/// in header_corpus.py): "abort" when `open` dies of a signal,
/// "accepts-any-passphrase" when it also opens with a wrong passphrase.
fn cryptsetup_verdict(img: &Path, key: &Path, wrong_key: &Path) -> &'static str {
    let dump = Command::new(cryptsetup()).arg("luksDump").arg(img).output().unwrap();
    if !dump.status.success() {
        return "refuse";
    }
    match cryptsetup_opens(img, key) {
        None => "abort",
        Some(true) if cryptsetup_opens(img, wrong_key) == Some(true) => "accepts-any-passphrase",
        Some(true) => "open",
        Some(false) => "load",
    }
}

#[test]
fn every_case_gets_cryptsetups_verdict() {
    let dir = TempDir::new("corpus");
    let out = Command::new("python3").arg(SCRIPT).arg("make").arg(dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "header_corpus.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    assert!(cases.len() > 100, "only {} cases", cases.len());
    let wrong_key = dir.file("wrong", b"not the passphrase");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let check = case["check"].as_str().unwrap();
        let want = case["verdict"].as_str().unwrap();
        let want_cryptsetup = case["cryptsetup"].as_str().unwrap();
        let pass = case["passphrase"].as_str().unwrap();
        let img_path = dir.join(&format!("{name}.img"));
        let img = std::fs::read(&img_path).unwrap();
        // Rampart first: cryptsetup may repair a damaged copy in place.
        let (ours, why) = rampart_verdict(&img, pass.as_bytes());
        let key = dir.file("key", pass.as_bytes());
        let theirs = cryptsetup_verdict(&img_path, &key, &wrong_key);
        if ours != want || theirs != want_cryptsetup {
            failures.push(format!(
                "{name} ({check}): expected {want} (cryptsetup {want_cryptsetup}), cryptsetup {theirs}, rampart {ours} {why}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
