#![allow(clippy::unwrap_used)]
//! The verbs scripts use, compared with cryptsetup's: `is-luks` (`isLuks`),
//! `uuid` (`luksUUID`), `token import` (with `token add` kept as an alias),
//! output into a pipe whose reader is gone (`| head`),
//! and errors that stay one line whatever `RUST_BACKTRACE` says.

use crate::helpers::luks_support as support;

use std::process::Command;

use support::*;

fn make(dir: &TempDir, name: &str, version: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = dir.file(&format!("{name}.key"), b"scripting passphrase");
    let vol = dir.sparse(name, 20 << 20);
    let mut args = vec!["format", p(&vol), "--type", version, "--key-file", p(&key), "-q"];
    args.extend_from_slice(PBKDF2);
    ok("rampart format", rampart(&args));
    (vol, key)
}

#[test]
fn is_luks_answers_by_exit_status_like_cryptsetup() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("is-luks");
    let (luks2, _) = make(&dir, "v2", "luks2");
    let (luks1, _) = make(&dir, "v1", "luks1");
    let junk = dir.file("junk", &random_bytes(3, 1 << 20));
    let missing = dir.join("missing");
    let cases: [(&std::path::Path, Option<&str>, i32); 8] = [
        (&luks2, None, 0),
        (&luks2, Some("luks2"), 0),
        (&luks2, Some("luks1"), 1),
        (&luks1, None, 0),
        (&luks1, Some("luks1"), 0),
        (&luks1, Some("luks2"), 1),
        (&junk, None, 1),
        (&missing, None, 1),
    ];
    for (vol, version, want) in cases {
        let mut args = vec!["is-luks", p(vol)];
        let mut reference = vec!["isLuks", p(vol)];
        if let Some(v) = version {
            args.extend(["--type", v]);
            reference.extend(["--type", v]);
        }
        let out = rampart(&args);
        assert_eq!(out.status.code(), Some(want), "{}", describe("rampart is-luks", &out));
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "is-luks is silent");
        let theirs = cryptsetup(&reference);
        assert_eq!(
            theirs.status.success(),
            want == 0,
            "cryptsetup {reference:?} disagrees: {}",
            describe("cryptsetup isLuks", &theirs)
        );
        if want != 0 {
            args.push("-v");
            let out = rampart(&args);
            assert_eq!(out.status.code(), Some(want));
            let said = text(&out.stderr);
            assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
            assert!(said.contains(p(vol)), "{said}");
        }
    }
    let out = rampart(&["is-luks", p(&luks2), "--type", "luks3"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("bad --type", &out));
}

#[test]
fn uuid_prints_and_sets_like_luksuuid() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("uuid");
    for version in ["luks2", "luks1"] {
        let (vol, key) = make(&dir, version, version);
        let ours = ok("rampart uuid", rampart(&["uuid", p(&vol)]));
        let theirs = ok("cryptsetup luksUUID", cryptsetup(&["luksUUID", p(&vol)]));
        assert_eq!(text(&ours.stdout), text(&theirs.stdout));

        let new = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
        ok("rampart uuid --uuid", rampart(&["uuid", p(&vol), "--uuid", new]));
        let theirs = ok("cryptsetup luksUUID", cryptsetup(&["luksUUID", p(&vol)]));
        assert_eq!(text(&theirs.stdout).trim(), new, "{version}");
        assert!(cryptsetup_opens(&vol, None, &key), "{version} still opens after the change");
        let out = rampart(&["uuid", p(&vol), "--uuid", "not-a-uuid"]);
        assert_eq!(out.status.code(), Some(2), "{}", describe("bad uuid", &out));
        let ours = ok("rampart uuid", rampart(&["uuid", p(&vol)]));
        assert_eq!(text(&ours.stdout).trim(), new, "a refused change writes nothing");
    }
}

#[test]
fn token_import_is_cryptsetups_verb_and_add_its_alias() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("token-import");
    let (vol, _) = make(&dir, "vol", "luks2");
    let first = dir.file("a.json", br#"{"type":"note","keyslots":[],"z":1,"a":2}"#);
    let second = dir.file("b.json", br#"{"type":"note","keyslots":["0"],"b":[1,2]}"#);
    let out = ok(
        "rampart token import",
        rampart(&["token", "import", p(&vol), "--json-file", p(&first)]),
    );
    assert_eq!(text(&out.stdout).trim(), "0");
    let out =
        ok("rampart token add", rampart(&["token", "add", p(&vol), "--json-file", p(&second)]));
    assert_eq!(text(&out.stdout).trim(), "1");
    let tokens = cryptsetup_tokens(&cryptsetup_dump(&vol));
    assert_eq!(tokens.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![0, 1]);
}

#[test]
fn errors_stay_one_line_with_rust_backtrace_set() {
    let dir = TempDir::new("backtrace");
    let junk = dir.file("junk", &[0u8; 8192]);
    for setting in ["1", "full"] {
        let out = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .args(["dump", p(&junk)])
            .env("RUST_BACKTRACE", setting)
            .env("RUST_LIB_BACKTRACE", setting)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", describe("dump of junk", &out));
        let said = text(&out.stderr);
        assert_eq!(said.lines().count(), 1, "RUST_BACKTRACE={setting} gave: {said}");
        assert!(said.starts_with("rampart: error: "), "{said}");
    }
}

/// `rampart uuid | head -c0` and the like: the reader of standard output is
/// gone before the command writes. It ends with status 0 and says nothing,
/// as ripgrep does, instead of panicking on the closed pipe.
#[test]
fn a_closed_standard_output_ends_the_command_quietly() {
    let dir = TempDir::new("closed-stdout");
    let (vol, key) = make(&dir, "v2", "luks2");
    for args in [
        vec!["uuid", p(&vol)],
        vec!["dump", p(&vol)],
        vec!["rand", "1M"],
        vec!["export", p(&vol), "-", "--key-file", p(&key)],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let said = text(&out.stderr);
        assert!(
            out.status.success(),
            "rampart {args:?} into a closed pipe: {:?} {said}",
            out.status
        );
        assert!(said.is_empty(), "rampart {args:?} into a closed pipe said: {said}");
    }
}
