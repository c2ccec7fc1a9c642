#![allow(clippy::unwrap_used)]
//! What Rampart does not change, it writes back byte for byte: the same
//! header change made by Rampart and by cryptsetup on copies of one
//! cryptsetup-made volume leaves JSON metadata areas with identical bytes
//! (key order, number and string formatting, untouched objects).

#[path = "helpers/luks_support.rs"]
mod support;

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
