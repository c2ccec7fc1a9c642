#![allow(clippy::unwrap_used)]
//! Bad input and faults from the command line.
//!
//! - A wrong passphrase: exit 2, exactly one stderr line with "no key
//!   available with this passphrase", and the volume file byte-for-byte
//!   unchanged, for every verb that takes a passphrase.
//! - A damaged primary (or secondary) LUKS2 header copy: Rampart still
//!   opens the volume, warning that it used the other copy; `rampart repair`
//!   rewrites it, after which both copies verify independently (Python
//!   hashlib), cryptsetup and Rampart open it without a warning, and the
//!   data is intact.
//! - Truncated files, a header larger than the file, random bytes, an empty
//!   file, and LUKS2 JSON areas that are not objects or hold hostile values
//!   (rewritten with valid checksums): a one-line error, a non-zero exit,
//!   never a panic or a crash, and write verbs leave the file unchanged.

use crate::helpers::luks_support as support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};
use support::*;

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn flip_byte(path: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    byte[0] ^= 0x5a;
    file.write_all_at(&byte, offset).unwrap();
}

/// A small LUKS2 volume made by cryptsetup (16 KiB metadata, 1 MiB keyslots
/// area), with a second keyslot and some data.
fn small_luks2(dir: &TempDir, name: &str, key: &Path) -> PathBuf {
    let volume = dir.sparse(name, 3 << 20);
    let mut args = vec![
        "luksFormat",
        "--batch-mode",
        "--type",
        "luks2",
        "--luks2-keyslots-size",
        "1m",
        "--key-file",
        p(key),
    ];
    args.extend(PBKDF2);
    args.push(p(&volume));
    ok("cryptsetup luksFormat", cryptsetup(&args));
    volume
}

/// Every verb with a wrong passphrase: exit 2, the one line, no change.
fn wrong_passphrase(tag: &str, luks_type: &str) {
    require(&["cryptsetup"]);
    let dir = TempDir::new(tag);
    let volume = dir.join("volume.img");
    let key = dir.file("key", b"right passphrase");
    let second = dir.file("second", b"second passphrase");
    let wrong = dir.file("wrong", b"right passphrasf");
    let new = dir.file("new", b"new passphrase");
    let mut args = vec!["format", p(&volume), "--type", luks_type, "--size", "20M", "-d", p(&key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let mut args = vec!["luksAddKey", "--batch-mode", "--key-file", p(&key)];
    args.extend(PBKDF2);
    args.extend([p(&volume), p(&second)]);
    ok("cryptsetup luksAddKey", cryptsetup(&args));
    let data = dir.file("data.bin", &random_bytes(1, 70_000));
    ok("rampart import", rampart(&["import", p(&volume), p(&data), "-d", p(&key)]));
    let before = read(&volume);
    let out_file = dir.join("out.bin");

    let vol = p(&volume);
    let w = p(&wrong);
    let mut cases: Vec<(&str, Output)> = vec![
        ("test-key", rampart(&["test-key", vol, "--key-file", w])),
        ("test-key --key-slot 1", rampart(&["test-key", vol, "-d", w, "--key-slot", "1"])),
        ("add-key", rampart(&["add-key", vol, "-d", w, "--new-key-file", p(&new)])),
        ("change-key", rampart(&["change-key", vol, "-d", w, "--new-key-file", p(&new)])),
        ("remove-key", rampart(&["remove-key", vol, "-d", w])),
        ("kill-slot", rampart(&["kill-slot", vol, "1", "-d", w])),
        ("import", rampart(&["import", vol, p(&data), "-d", w])),
        ("export", rampart(&["export", vol, p(&out_file), "-d", w])),
        ("dump --dump-volume-key", rampart(&["dump", vol, "--dump-volume-key", "-d", w])),
        // A passphrase on standard input (one line, newline stripped).
        ("test-key from stdin", rampart_in(&["test-key", vol], b"right passphrasf\n")),
        ("import from a key on stdin", rampart_in(&["import", vol, p(&data), "-d", "-"], b"nope")),
    ];
    // The right passphrase in the wrong slot is wrong too.
    cases.push(("test-key in another slot", rampart(&["test-key", vol, "-d", p(&key), "-S", "1"])));
    for (what, out) in &cases {
        fails_no_key(&format!("{luks_type} {what} with a wrong passphrase"), out);
        assert!(out.stdout.is_empty(), "{what} printed {}", text(&out.stdout));
    }
    assert_same("volume after wrong passphrases", &read(&volume), &before);
    assert!(!out_file.exists(), "export created its output before authenticating");

    // The right one still works, also from standard input with its newline.
    ok("test-key from stdin", rampart_in(&["test-key", vol], b"right passphrase\n"));
    ok("test-key", rampart(&["test-key", vol, "-d", p(&key)]));
    // An empty passphrase is refused before any KDF runs.
    let empty = dir.file("empty", b"");
    let line = fails(
        "test-key with an empty key file",
        &rampart(&["test-key", vol, "-d", p(&empty)]),
        Some(2),
    );
    assert!(line.contains("empty"), "{line}");
    fails(
        "test-key with a missing key file",
        &rampart(&["test-key", vol, "-d", "/nonexistent/key"]),
        None,
    );
}

#[test]
fn faults_wrong_passphrase_luks2() {
    wrong_passphrase("wrong-luks2", "luks2");
}

#[test]
fn faults_wrong_passphrase_luks1() {
    wrong_passphrase("wrong-luks1", "luks1");
}

/// Damage to one LUKS2 header copy: warning, still opens, repair fixes it.
#[test]
fn faults_damaged_header_copy_and_repair() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("repair");
    let key = dir.file("key", b"repair me");
    let pristine = small_luks2(&dir, "pristine.img", &key);
    let data = random_bytes(2, 123_457);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&pristine), p(&data_file), "-d", p(&key)]));
    let pristine_json = luks2_json(&pristine, 0);
    let (valid, why) = python_headers_valid(&pristine);
    assert!(valid, "{why}");

    // (name, byte to flip, copy that is damaged)
    let damages: &[(&str, u64, &str)] = &[
        ("primary magic", 0, "primary"),
        ("primary checksum field", 448 + 7, "primary"),
        ("primary JSON area", 4096 + 20, "primary"),
        ("primary seqid", 16 + 7, "primary"),
        ("secondary magic", 16384 + 1, "secondary"),
        ("secondary checksum field", 16384 + 448, "secondary"),
    ];
    for (i, &(name, offset, copy)) in damages.iter().enumerate() {
        let volume = dir.join(&format!("damaged-{i}.img"));
        std::fs::copy(&pristine, &volume).unwrap();
        flip_byte(&volume, offset);
        let (valid, _) = python_headers_valid(&volume);
        assert!(!valid, "{name}: the damage is not detectable");

        // Rampart opens it from the intact copy; a damaged primary is
        // announced on stderr.
        let out = ok(name, rampart(&["test-key", p(&volume), "-d", p(&key)]));
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{name}: {err}");
        if copy == "primary" {
            assert_eq!(err.lines().count(), 1, "{name}: expected one warning, got {err:?}");
            assert!(
                err.starts_with("rampart: warning:") && err.contains("secondary"),
                "{name}: the warning does not say the secondary copy is used: {err:?}"
            );
        }
        let exported = dir.join("exported.bin");
        ok(
            name,
            rampart(&["export", p(&volume), p(&exported), "-d", p(&key), "--length", "123457"]),
        );
        assert_same(&format!("{name}: data"), &read(&exported), &data);

        // repair rewrites both copies, which then verify on their own.
        let out = ok(&format!("{name}: repair"), rampart(&["repair", p(&volume)]));
        assert!(text(&out.stdout).contains("Rewrote"), "{name}: {}", text(&out.stdout));
        let (valid, why) = python_headers_valid(&volume);
        assert!(valid, "{name}: after repair: {why}");
        let mut repaired_json = luks2_json(&volume, 0);
        assert_eq!(luks2_json(&volume, 16384), repaired_json);
        // The metadata is what it was (the seqid in the binary header moves on).
        repaired_json["config"] = pristine_json["config"].clone();
        assert_eq!(repaired_json, pristine_json, "{name}: metadata changed by repair");

        let out = ok(name, rampart(&["test-key", p(&volume), "-d", p(&key)]));
        assert!(out.stderr.is_empty(), "{name}: warning after repair: {}", text(&out.stderr));
        let out = ok(name, rampart(&["repair", p(&volume)]));
        assert!(text(&out.stdout).contains("No damage"), "{name}: {}", text(&out.stdout));
        let after_repair = read(&volume);
        let out = ok(name, cryptsetup(&["luksDump", p(&volume)]));
        assert!(out.stderr.is_empty(), "{name}: cryptsetup: {}", text(&out.stderr));
        assert!(cryptsetup_opens(&volume, None, &key), "{name}");
        // cryptsetup found nothing to fix (it repairs damaged copies itself).
        assert_same(&format!("{name}: header after cryptsetup"), &read(&volume), &after_repair);
        ok(
            name,
            rampart(&["export", p(&volume), p(&exported), "-d", p(&key), "--length", "123457"]),
        );
        assert_same(&format!("{name}: data after repair"), &read(&exported), &data);
    }

    // Writing to a volume whose primary copy is damaged leaves both valid.
    let volume = dir.join("write-through.img");
    std::fs::copy(&pristine, &volume).unwrap();
    flip_byte(&volume, 0);
    let new = dir.file("new", b"added while damaged");
    let mut args = vec!["add-key", p(&volume), "-d", p(&key), "--new-key-file", p(&new)];
    args.extend(PBKDF2);
    ok("add-key on a damaged primary", rampart(&args));
    let (valid, why) = python_headers_valid(&volume);
    assert!(valid, "after add-key on a damaged primary: {why}");
    assert!(cryptsetup_opens(&volume, None, &new));
}

/// Runs the verbs that read a header against `volume` and checks each
/// fails cleanly (one line, non-zero, no panic) — or, when `must_fail` is
/// false, at least never panics or crashes. Write verbs must not change a
/// file they fail on.
fn hostile(dir: &TempDir, what: &str, volume: &Path, key: &Path, must_fail: bool) {
    let out_file = dir.join("hostile-out.bin");
    let input = dir.file("hostile-in.bin", &random_bytes(4, 5000));
    let new = dir.file("hostile-new", b"hostile new key");
    let backup = dir.join("hostile-backup.hdr");
    let k = p(key);
    let verbs: Vec<(&str, Vec<&str>)> = vec![
        ("test-key", vec!["test-key", p(volume), "-d", k]),
        ("dump", vec!["dump", p(volume)]),
        ("dump --json", vec!["dump", "--json", p(volume)]),
        ("export", vec!["export", p(volume), p(&out_file), "-d", k]),
        ("import", vec!["import", p(volume), p(&input), "-d", k]),
        ("add-key", vec!["add-key", p(volume), "-d", k, "--new-key-file", p(&new)]),
        ("token add", vec!["token", "add", p(volume), "--json-file", p(&input)]),
        ("repair", vec!["repair", p(volume)]),
        ("header backup", vec!["header", "backup", p(volume), p(&backup)]),
    ];
    for (verb, args) in verbs {
        let before = read(volume);
        let mut args = args;
        if verb == "add-key" {
            args.extend(PBKDF2);
        }
        let out = rampart(&args);
        let label = format!("{what}: rampart {verb}");
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{label} panicked: {err}");
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "{label}: crashed or odd exit {:?}: {err}",
            out.status
        );
        if must_fail || !out.status.success() {
            if must_fail {
                fails(&label, &out, None);
            } else {
                fails_after_warnings(&label, &out);
            }
            if !matches!(verb, "export" | "dump" | "dump --json" | "test-key") {
                assert_same(&format!("{label}: file changed"), &read(volume), &before);
            }
        }
        let _ = std::fs::remove_file(&out_file);
        let _ = std::fs::remove_file(&backup);
    }
}

/// Files that are not (whole) LUKS volumes.
#[test]
fn faults_truncated_random_and_empty_files() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("junk");
    let key = dir.file("key", b"junk key");
    let luks2 = small_luks2(&dir, "luks2.img", &key);
    let luks2_bytes = read(&luks2);
    let luks1 = dir.join("luks1.img");
    let mut args = vec!["format", p(&luks1), "--type", "luks1", "--size", "4M", "-d", p(&key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let luks1_bytes = read(&luks1);
    let default_luks2 = dir.join("default.img");
    let mut args = vec!["format", p(&default_luks2), "--size", "20M", "-d", p(&key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let default_bytes = read(&default_luks2);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty file", Vec::new()),
        ("100 zero bytes", vec![0; 100]),
        ("1 MiB of random bytes", random_bytes(99, 1 << 20)),
        ("the LUKS2 magic alone", luks2_bytes[..6].to_vec()),
        ("LUKS2 cut inside the binary header", luks2_bytes[..1000].to_vec()),
        ("LUKS2 cut inside the primary JSON area", luks2_bytes[..10_000].to_vec()),
        ("LUKS2 cut inside the secondary header", luks2_bytes[..20_000].to_vec()),
        ("LUKS2 cut inside the keyslot area", luks2_bytes[..100_000].to_vec()),
        ("default LUKS2 header larger than the file (1 MiB)", default_bytes[..1 << 20].to_vec()),
        ("LUKS1 phdr cut short", luks1_bytes[..300].to_vec()),
        ("LUKS1 cut inside the key material", luks1_bytes[..200_000].to_vec()),
        ("LUKS1 header larger than the file (1 MiB)", luks1_bytes[..1 << 20].to_vec()),
    ];
    for (i, (what, bytes)) in cases.iter().enumerate() {
        let volume = dir.file(&format!("case-{i}.img"), bytes);
        hostile(&dir, what, &volume, &key, true);
    }
}

/// A cryptsetup LUKS2 volume whose JSON area is replaced (both copies, valid
/// checksums) by `json` bytes.
fn with_json(dir: &TempDir, pristine: &Path, name: &str, json: &[u8]) -> PathBuf {
    let volume = dir.join(name);
    std::fs::copy(pristine, &volume).unwrap();
    python_rewrite_json(dir, &volume, json);
    let (valid, why) = python_headers_valid(&volume);
    assert!(valid, "{name}: the rewritten header copies do not verify: {why}");
    volume
}

/// JSON areas that are not objects, or not JSON: refused by every verb.
#[test]
fn faults_json_area_not_an_object() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("json-not-object");
    let key = dir.file("key", b"json key");
    let pristine = small_luks2(&dir, "pristine.img", &key);
    let cases: &[(&str, &[u8])] = &[
        ("an array", b"[]"),
        ("an array of the real object", b"[{\"keyslots\":{}}]"),
        ("a string", b"\"luks2\""),
        ("a number", b"42"),
        ("null", b"null"),
        ("true", b"true"),
        ("an empty object", b"{}"),
        ("truncated JSON", b"{\"keyslots\": {\"0\": "),
        ("not UTF-8", b"{\"keyslots\": \"\xff\xfe\"}"),
        ("an empty JSON area", b""),
        ("trailing garbage", b"{}}"),
    ];
    for (i, &(what, json)) in cases.iter().enumerate() {
        let volume = with_json(&dir, &pristine, &format!("case-{i}.img"), json);
        // cryptsetup refuses these too.
        let cs = cryptsetup(&["luksDump", p(&volume)]);
        assert!(!cs.status.success(), "cryptsetup accepts a JSON area that is {what}");
        hostile(&dir, &format!("JSON area that is {what}"), &volume, &key, true);
    }
}

type Edit = Box<dyn Fn(&mut Value)>;

/// Hostile but well-formed JSON values: (what, must every verb fail?, edit).
/// Where a case wants 2000 nested arrays, spliced into the text: built as
/// a `Value`, serde_json's recursion (serializing, dropping) overflows a
/// debug build's test thread.
const DEEP: &str = "@@2000 nested arrays@@";

fn hostile_json_cases() -> Vec<(&'static str, bool, Edit)> {
    let max = u64::MAX.to_string();
    let set = |path: &'static [&'static str], value: Value| -> Edit {
        Box::new(move |json: &mut Value| {
            let mut node = json;
            for part in path {
                node = &mut node[*part];
            }
            *node = value.clone();
        })
    };
    let cases: Vec<(&'static str, bool, Edit)> = vec![
        (
            "segment offset beyond the file",
            false,
            set(&["segments", "0", "offset"], json!("1099511627776")),
        ),
        ("segment offset 2^64-1", false, set(&["segments", "0", "offset"], json!(max))),
        ("segment offset not a number", true, set(&["segments", "0", "offset"], json!("abc"))),
        (
            "segment offset too large for u64",
            true,
            set(&["segments", "0", "offset"], json!("99999999999999999999999")),
        ),
        ("segment offset unaligned", false, set(&["segments", "0", "offset"], json!("1048577"))),
        (
            "segment size beyond the file",
            false,
            set(&["segments", "0", "size"], json!("1099511627776")),
        ),
        ("segment size zero", false, set(&["segments", "0", "size"], json!("0"))),
        ("segment iv_tweak 2^64-1", false, set(&["segments", "0", "iv_tweak"], json!(max))),
        ("sector size 0", false, set(&["segments", "0", "sector_size"], json!(0))),
        ("sector size 3000", false, set(&["segments", "0", "sector_size"], json!(3000))),
        ("sector size 8192", false, set(&["segments", "0", "sector_size"], json!(8192))),
        (
            "unknown cipher",
            false,
            set(&["segments", "0", "encryption"], json!("serpent-xts-plain64")),
        ),
        ("segments as an array", true, set(&["segments"], json!([]))),
        ("no segments", false, set(&["segments"], json!({}))),
        (
            "keyslot area offset beyond the file",
            false,
            set(&["keyslots", "0", "area", "offset"], json!("1099511627776")),
        ),
        (
            "keyslot area offset 2^64-1",
            false,
            set(&["keyslots", "0", "area", "offset"], json!(max)),
        ),
        ("keyslot area size 2^64-1", false, set(&["keyslots", "0", "area", "size"], json!(max))),
        ("keyslot area size 0", false, set(&["keyslots", "0", "area", "size"], json!("0"))),
        ("keyslot key_size 0", false, set(&["keyslots", "0", "key_size"], json!(0))),
        (
            "keyslot key_size huge",
            false,
            set(&["keyslots", "0", "key_size"], json!(4_000_000_000u64)),
        ),
        ("keyslot area key_size 0", false, set(&["keyslots", "0", "area", "key_size"], json!(0))),
        ("AF stripes 0", false, set(&["keyslots", "0", "af", "stripes"], json!(0))),
        (
            "AF stripes huge",
            false,
            set(&["keyslots", "0", "af", "stripes"], json!(4_000_000_000u64)),
        ),
        ("AF hash md5", false, set(&["keyslots", "0", "af", "hash"], json!("md5"))),
        ("PBKDF2 iterations 0", false, set(&["keyslots", "0", "kdf", "iterations"], json!(0))),
        (
            "PBKDF2 hash whirlpool",
            false,
            set(&["keyslots", "0", "kdf", "hash"], json!("whirlpool")),
        ),
        (
            "Argon2 memory over 4 GiB",
            false,
            set(
                &["keyslots", "0", "kdf"],
                json!({"type": "argon2id", "time": 4, "memory": 4_294_967_295u64, "cpus": 4,
                       "salt": "kp15+aMbvwX8eCCK1y8lkaKV+CnfwS9+BdWoNTwXfCw="}),
            ),
        ),
        (
            "Argon2 zero time and lanes",
            false,
            set(
                &["keyslots", "0", "kdf"],
                json!({"type": "argon2i", "time": 0, "memory": 32, "cpus": 0,
                       "salt": "kp15+aMbvwX8eCCK1y8lkaKV+CnfwS9+BdWoNTwXfCw="}),
            ),
        ),
        (
            "KDF salt not base64",
            false,
            set(&["keyslots", "0", "kdf", "salt"], json!("!!not base64!!")),
        ),
        ("keyslot type luks3", false, set(&["keyslots", "0", "type"], json!("luks3"))),
        (
            "keyslot id not a number",
            true,
            Box::new(|json: &mut Value| {
                let slot = json["keyslots"]["0"].take();
                json["keyslots"] = json!({"zero": slot});
            }),
        ),
        (
            "keyslot id huge",
            true,
            Box::new(|json: &mut Value| {
                let slot = json["keyslots"]["0"].take();
                json["keyslots"] = json!({"99999999999999999999": slot});
                json["digests"]["0"]["keyslots"] = json!(["99999999999999999999"]);
            }),
        ),
        (
            "digest for a missing keyslot",
            true,
            set(&["digests", "0", "keyslots"], json!(["0", "7"])),
        ),
        ("digest for a missing segment", true, set(&["digests", "0", "segments"], json!(["3"]))),
        ("digest not base64", false, set(&["digests", "0", "digest"], json!("%%%"))),
        ("digest iterations 0", false, set(&["digests", "0", "iterations"], json!(0))),
        ("no digests", false, set(&["digests"], json!({}))),
        ("no keyslots", false, set(&["keyslots"], json!({}))),
        ("config json_size 0", true, set(&["config", "json_size"], json!("0"))),
        (
            "config json_size larger than the area",
            true,
            set(&["config", "json_size"], json!("999999999")),
        ),
        ("config keyslots_size 2^64-1", false, set(&["config", "keyslots_size"], json!(max))),
        ("config not an object", true, set(&["config"], json!("config"))),
        (
            "token with a numeric type",
            false,
            set(&["tokens"], json!({"0": {"type": 5, "keyslots": []}})),
        ),
        (
            "token naming a missing keyslot",
            false,
            set(&["tokens"], json!({"0": {"type": "x", "keyslots": ["4"]}})),
        ),
        (
            "unknown requirement",
            false,
            set(&["config", "requirements"], json!({"mandatory": ["online-reencrypt-v9"]})),
        ),
        (
            "deeply nested token",
            false,
            Box::new(|json: &mut Value| {
                json["tokens"] = json!({"0": {"type": "deep", "keyslots": [], "x": DEEP}});
            }),
        ),
    ];
    cases
}

/// Runs every `part`-th of the hostile JSON cases (three tests share them
/// so they run in parallel): each verb fails cleanly or copes; never a
/// panic, an overflow, a huge allocation or a crash.
fn hostile_json(part: usize) {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new(&format!("json-hostile-{part}"));
    let key = dir.file("key", b"hostile key");
    let pristine = small_luks2(&dir, "pristine.img", &key);
    let base = luks2_json(&pristine, 0);
    let deep = format!("{}1{}", "[".repeat(2000), "]".repeat(2000));
    for (i, (what, must_fail, edit)) in hostile_json_cases().iter().enumerate() {
        if i % 3 != part {
            continue;
        }
        let mut json = base.clone();
        edit(&mut json);
        let text = serde_json::to_string(&json).unwrap().replace(&format!("\"{DEEP}\""), &deep);
        let volume = with_json(&dir, &pristine, &format!("case-{i}.img"), text.as_bytes());
        hostile(&dir, what, &volume, &key, *must_fail);
        std::fs::remove_file(&volume).unwrap();
    }
}

#[test]
fn faults_hostile_json_values_part0() {
    hostile_json(0);
}

#[test]
fn faults_hostile_json_values_part1() {
    hostile_json(1);
}

#[test]
fn faults_hostile_json_values_part2() {
    hostile_json(2);
}
