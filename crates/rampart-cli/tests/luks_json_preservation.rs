#![allow(clippy::unwrap_used)]
//! What Rampart does not change, it writes back byte for byte: the same
//! header change made by Rampart and by cryptsetup on copies of one
//! cryptsetup-made volume leaves JSON metadata areas with identical bytes
//! (key order, number and string formatting, untouched objects).

use crate::helpers::luks_support as support;

use std::path::Path;

use support::*;

/// The primary header's JSON text (LUKS2, 16 KiB metadata: from byte
/// 4096 to the first NUL).
fn json_area(vol: &Path) -> String {
    let bytes = std::fs::read(vol).unwrap();
    let area = &bytes[4096..16384];
    let end = area.iter().position(|&b| b == 0).unwrap();
    String::from_utf8(area[..end].to_vec()).unwrap()
}

fn copy(dir: &TempDir, from: &Path, name: &str) -> std::path::PathBuf {
    let to = dir.join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

#[test]
fn rampart_and_cryptsetup_write_the_same_json_for_the_same_change() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("json-bytes");
    let key = dir.file("key", b"preservation passphrase");
    let second = dir.file("second", b"second passphrase");
    let vol = dir.sparse("vol", 20 << 20);
    let mut format = vec!["luksFormat", "-q", "--type", "luks2", p(&vol), p(&key)];
    format.extend_from_slice(PBKDF2);
    ok("cryptsetup luksFormat", cryptsetup(&format));
    let mut add = vec!["luksAddKey", p(&vol), "--key-file", p(&key), p(&second)];
    add.extend_from_slice(PBKDF2);
    ok("cryptsetup luksAddKey", cryptsetup(&add));
    let foreign = dir.file(
        "foreign.json",
        "{\"type\":\"zz-site\",\"keyslots\":[\"1\"],\"b\":[3,1.5,-2],\"a\":\"caf\u{e9} / \\\\ \\u0001\"}"
            .as_bytes(),
    );
    ok(
        "cryptsetup token import",
        cryptsetup(&["token", "import", p(&vol), "--json-file", p(&foreign), "--token-id", "2"]),
    );
    let token = dir.file("token.json", br#"{"type":"note","keyslots":["0"],"z":{"y":1,"x":[]}}"#);

    type Change<'a> = (&'a str, Vec<&'a str>, Vec<&'a str>);
    let changes: Vec<Change> = vec![
        (
            "token import",
            vec!["token", "import", "VOL", "--json-file", p(&token), "--token-id", "5"],
            vec!["token", "import", "VOL", "--json-file", p(&token), "--token-id", "5"],
        ),
        (
            "token remove",
            vec!["token", "remove", "VOL", "--token-id", "2"],
            vec!["token", "remove", "VOL", "--token-id", "2"],
        ),
        ("kill-slot", vec!["kill-slot", "VOL", "1", "-q"], vec!["luksKillSlot", "-q", "VOL", "1"]),
    ];
    for (what, ours, theirs) in changes {
        let a = copy(&dir, &vol, "by-rampart");
        let b = copy(&dir, &vol, "by-cryptsetup");
        let ours: Vec<&str> = ours.iter().map(|s| if *s == "VOL" { p(&a) } else { s }).collect();
        let theirs: Vec<&str> =
            theirs.iter().map(|s| if *s == "VOL" { p(&b) } else { s }).collect();
        ok(&format!("rampart {what}"), rampart(&ours));
        ok(&format!("cryptsetup {what}"), cryptsetup(&theirs));
        assert_eq!(json_area(&a), json_area(&b), "{what}: the JSON metadata differs");
    }
    // And a token round trip returns exactly the bytes cryptsetup was given.
    let exported =
        ok("rampart token export", rampart(&["token", "export", p(&vol), "--token-id", "2"]));
    assert_eq!(text(&exported.stdout).trim(), text(&std::fs::read(&foreign).unwrap()).trim());
}

/// A header as another tool might have written it: sections, objects and
/// members in an unusual order, unknown members inside known objects
/// (before the known ones), an unknown member in a KDF, an unknown
/// top-level member between the sections.
fn hand_made(cryptsetup_json: &str) -> String {
    use serde_json::{json, Map, Value};
    let v: Value = serde_json::from_str(cryptsetup_json).unwrap();
    let mut ks1 = Map::new();
    ks1.insert("x-first".into(), json!({"b": 2, "a": [1, "x"]}));
    for (k, val) in v["keyslots"]["1"].as_object().unwrap() {
        ks1.insert(k.clone(), val.clone());
    }
    ks1["kdf"].as_object_mut().unwrap().insert("x-kdf".into(), json!("kept"));
    let mut config = Map::new();
    config.insert("x-site".into(), json!({"z": 0, "a": 1}));
    for (k, val) in v["config"].as_object().unwrap() {
        config.insert(k.clone(), val.clone());
    }
    let mut keyslots = Map::new();
    keyslots.insert("1".into(), Value::Object(ks1));
    keyslots.insert("0".into(), v["keyslots"]["0"].clone());
    let mut top = Map::new();
    top.insert("config".into(), Value::Object(config));
    top.insert("segments".into(), v["segments"].clone());
    top.insert("x-top".into(), json!([1, {"z": 0, "a": 1}]));
    top.insert("keyslots".into(), Value::Object(keyslots));
    top.insert("digests".into(), v["digests"].clone());
    top.insert("tokens".into(), v["tokens"].clone());
    serde_json::to_string(&Value::Object(top)).unwrap()
}

#[test]
fn hand_made_headers_keep_their_bytes_where_nothing_changed() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("json-hand-made");
    let key = dir.file("key", b"preservation passphrase");
    let second = dir.file("second", b"second passphrase");
    let vol = dir.sparse("vol", 20 << 20);
    let mut format = vec!["luksFormat", "-q", "--type", "luks2", p(&vol), p(&key)];
    format.extend_from_slice(PBKDF2);
    ok("cryptsetup luksFormat", cryptsetup(&format));
    let mut add = vec!["luksAddKey", p(&vol), "--key-file", p(&key), p(&second)];
    add.extend_from_slice(PBKDF2);
    ok("cryptsetup luksAddKey", cryptsetup(&add));
    let foreign = dir.file("foreign.json", br#"{"keyslots":["1"],"type":"zz-site","b":[3]}"#);
    ok(
        "cryptsetup token import",
        cryptsetup(&["token", "import", p(&vol), "--json-file", p(&foreign), "--token-id", "2"]),
    );
    let original = hand_made(&json_area(&vol));
    python_rewrite_json(&dir, &vol, original.as_bytes());
    ok("cryptsetup luksDump of the hand-made header", cryptsetup(&["luksDump", p(&vol)]));
    ok("rampart dump of the hand-made header", rampart(&["dump", p(&vol)]));

    // A change outside the JSON leaves it as it was, byte for byte.
    let uuid = "6b1e2a8e-57c3-4c1f-9d0e-0d4c1e6f9a11";
    let a = copy(&dir, &vol, "uuid-by-rampart");
    ok("rampart uuid --uuid", rampart(&["uuid", p(&a), "--uuid", uuid]));
    assert_eq!(json_area(&a), original, "a UUID change rewrote the JSON");

    let token = dir.file("token.json", br#"{"type":"note","keyslots":["0"],"z":{"y":1}}"#);
    type Change<'a> = (&'a str, Vec<&'a str>, Vec<&'a str>);
    let changes: Vec<Change> = vec![
        ("uuid", vec!["uuid", "VOL", "--uuid", uuid], vec!["luksUUID", "VOL", "--uuid", uuid]),
        (
            "token import",
            vec!["token", "import", "VOL", "--json-file", p(&token), "--token-id", "5"],
            vec!["token", "import", "VOL", "--json-file", p(&token), "--token-id", "5"],
        ),
        (
            "token remove",
            vec!["token", "remove", "VOL", "--token-id", "2"],
            vec!["token", "remove", "VOL", "--token-id", "2"],
        ),
        (
            "kill-slot 0",
            vec!["kill-slot", "VOL", "0", "-q"],
            vec!["luksKillSlot", "-q", "VOL", "0"],
        ),
        (
            "kill-slot 1",
            vec!["kill-slot", "VOL", "1", "-q"],
            vec!["luksKillSlot", "-q", "VOL", "1"],
        ),
    ];
    for (what, ours, theirs) in changes {
        let a = copy(&dir, &vol, "by-rampart");
        let b = copy(&dir, &vol, "by-cryptsetup");
        let ours: Vec<&str> = ours.iter().map(|s| if *s == "VOL" { p(&a) } else { s }).collect();
        let theirs: Vec<&str> =
            theirs.iter().map(|s| if *s == "VOL" { p(&b) } else { s }).collect();
        ok(&format!("rampart {what}"), rampart(&ours));
        ok(&format!("cryptsetup {what}"), cryptsetup(&theirs));
        // The one difference: cryptsetup drops members it does not know
        // from a KDF object whenever it writes (its keyslot repair), even
        // for a keyslot it did not change; Rampart keeps them.
        let ours = json_area(&a);
        let kept = ",\"x-kdf\":\"kept\"";
        if what != "kill-slot 1" {
            assert!(ours.contains(kept), "{what}: the unknown KDF member was dropped");
        }
        assert_eq!(ours.replace(kept, ""), json_area(&b), "{what}: the JSON metadata differs");
    }
}
