#![allow(clippy::unwrap_used)]
//! Key management and LUKS2 tokens, each step
//! cross-checked with cryptsetup 2.6 on the same volume file.
//!
//! Keys: `rampart add-key` → cryptsetup opens with the new passphrase;
//! `rampart change-key` → the old one no longer opens in cryptsetup, the new
//! one does; `rampart remove-key` / `kill-slot` → cryptsetup's luksDump no
//! longer lists the slot; a key added by `cryptsetup luksAddKey` unlocks in
//! Rampart; removing the last keyslot without `--batch-mode` is refused with
//! exit 2 and leaves the volume unchanged; the volume key and data survive.
//!
//! Tokens: a token imported by cryptsetup survives Rampart's header rewrites
//! (`cryptsetup token export` returns the same JSON object); `rampart token
//! add/export/remove` round-trips and is visible to cryptsetup.

use crate::helpers::luks_support as support;

use std::path::Path;

use support::*;

fn slots(header: &Path) -> Vec<usize> {
    cryptsetup_keyslots(&cryptsetup_dump(header))
}

fn cs_format(volume: &Path, key: &Path, luks_type: &str) {
    let mut args = vec!["luksFormat", "--batch-mode", "--type", luks_type, "--key-file", p(key)];
    args.extend(PBKDF2);
    args.push(p(volume));
    ok("cryptsetup luksFormat", cryptsetup(&args));
}

fn cs_add_key(volume: &Path, key: &Path, new_key: &Path) {
    let mut args = vec!["luksAddKey", "--batch-mode", "--key-file", p(key)];
    args.extend(PBKDF2);
    args.extend([p(volume), p(new_key)]);
    ok("cryptsetup luksAddKey", cryptsetup(&args));
}

/// The whole key-management sequence on one volume, made by `formatter`.
fn key_management(tag: &str, luks_type: &str, made_by_rampart: bool) {
    require(&["cryptsetup"]);
    let dir = TempDir::new(tag);
    let volume = dir.join("volume.img");
    let k1 = dir.file("k1", b"first passphrase");
    let k2 = dir.file("k2", b"second passphrase\n");
    let k3 = dir.file("k3", b"third passphrase");
    let k4 = dir.file("k4", b"fourth passphrase (cryptsetup)");
    let kdf: &[&str] = if luks_type == "luks2" { ARGON2ID } else { PBKDF2 };

    if made_by_rampart {
        let mut args =
            vec!["format", p(&volume), "--type", luks_type, "--size", "20M", "-d", p(&k1)];
        args.extend(kdf);
        ok("rampart format", rampart(&args));
    } else {
        std::fs::File::create(&volume).unwrap().set_len(20 << 20).unwrap();
        cs_format(&volume, &k1, luks_type);
    }
    let volume_key = cryptsetup_volume_key(&volume, &k1);
    let data = random_bytes(3, 100_000);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&volume), p(&data_file), "-d", p(&k1)]));
    assert_eq!(slots(&volume), [0]);

    // add-key: the new passphrase opens in cryptsetup, the old one still does.
    let mut args = vec!["add-key", p(&volume), "--key-file", p(&k1), "--new-key-file", p(&k2)];
    args.extend(kdf);
    ok("rampart add-key", rampart(&args));
    assert_eq!(slots(&volume), [0, 1]);
    assert!(cryptsetup_opens(&volume, None, &k2), "cryptsetup refuses the added passphrase");
    assert!(cryptsetup_opens(&volume, None, &k1));
    assert_eq!(cryptsetup_volume_key(&volume, &k2), volume_key);
    if luks_type == "luks2" {
        let dump = cryptsetup_dump(&volume);
        assert!(dump.contains("PBKDF:      argon2id"), "{dump}");
    }

    // change-key: k2 is replaced by k3.
    let mut args = vec!["change-key", p(&volume), "--key-file", p(&k2), "--new-key-file", p(&k3)];
    args.extend(kdf);
    ok("rampart change-key", rampart(&args));
    assert!(!cryptsetup_opens(&volume, None, &k2), "the changed passphrase still opens");
    assert!(cryptsetup_opens(&volume, None, &k3), "the new passphrase does not open");
    assert!(cryptsetup_opens(&volume, None, &k1));
    let after_change = slots(&volume);
    assert_eq!(after_change.len(), 2, "{after_change:?}");
    fails_no_key(
        "test-key with the changed passphrase",
        &rampart(&["test-key", p(&volume), "-d", p(&k2)]),
    );

    // A key added by cryptsetup unlocks in Rampart, in its slot only.
    cs_add_key(&volume, &k1, &k4);
    let after_cs_add = slots(&volume);
    let k4_slot = *after_cs_add.iter().find(|s| !after_change.contains(s)).unwrap();
    ok("test-key with cryptsetup's key", rampart(&["test-key", p(&volume), "-d", p(&k4)]));
    let k4_slot_text = k4_slot.to_string();
    ok(
        "test-key --key-slot",
        rampart(&["test-key", p(&volume), "-d", p(&k4), "--key-slot", &k4_slot_text]),
    );
    fails_no_key(
        "test-key in another slot",
        &rampart(&["test-key", p(&volume), "-d", p(&k4), "--key-slot", "0"]),
    );
    let dump = rampart_json(&volume, None, Some(&k4));
    assert_eq!(dump["volume_key"].as_str().unwrap(), hex(&volume_key));
    assert_eq!(dump["unlocked_keyslot"].as_u64().unwrap(), k4_slot as u64);

    // remove-key: k3's slot disappears from cryptsetup's dump.
    let k3_slot = *after_change.iter().find(|&&s| s != 0).unwrap();
    ok("rampart remove-key", rampart(&["remove-key", p(&volume), "--key-file", p(&k3)]));
    let after_remove = slots(&volume);
    assert!(!after_remove.contains(&k3_slot), "slot {k3_slot} still listed: {after_remove:?}");
    assert!(!cryptsetup_opens(&volume, None, &k3));

    // kill-slot needs a passphrase of a remaining slot.
    let before = std::fs::read(&volume).unwrap();
    fails_no_key(
        "kill-slot with a wrong passphrase",
        &rampart(&["kill-slot", p(&volume), &k4_slot_text, "-d", p(&k3)]),
    );
    fails_no_key(
        "kill-slot authorised only by the slot itself",
        &rampart(&["kill-slot", p(&volume), &k4_slot_text, "-d", p(&k4)]),
    );
    assert_same("volume after refused kill-slot", &std::fs::read(&volume).unwrap(), &before);
    ok("rampart kill-slot", rampart(&["kill-slot", p(&volume), &k4_slot_text, "-d", p(&k1)]));
    assert_eq!(slots(&volume), [0]);
    assert!(!cryptsetup_opens(&volume, None, &k4));
    let line = fails(
        "kill-slot of an inactive slot",
        &rampart(&["kill-slot", p(&volume), "5", "-d", p(&k1)]),
        Some(2),
    );
    assert!(line.contains('5'), "{line}");

    // The last keyslot: refused without --batch-mode, volume unchanged.
    let before = std::fs::read(&volume).unwrap();
    let line = fails(
        "remove-key of the last slot",
        &rampart(&["remove-key", p(&volume), "-d", p(&k1)]),
        Some(2),
    );
    assert!(line.contains("last"), "{line}");
    let line = fails(
        "kill-slot of the last slot",
        &rampart(&["kill-slot", p(&volume), "0", "-d", p(&k1)]),
        Some(2),
    );
    assert!(line.contains("last"), "{line}");
    assert_same("volume after refused removals", &std::fs::read(&volume).unwrap(), &before);
    assert_eq!(slots(&volume), [0]);

    // The volume key never changed: the data reads back.
    let out = dir.join("out.bin");
    ok(
        "rampart export",
        rampart(&["export", p(&volume), p(&out), "--length", "100000", "-d", p(&k1)]),
    );
    assert_same("data after key changes", &std::fs::read(&out).unwrap(), &data);
    assert_eq!(cryptsetup_volume_key(&volume, &k1), volume_key);

    // With --batch-mode the last slot goes; nothing opens any more.
    ok(
        "remove-key --batch-mode",
        rampart(&["remove-key", p(&volume), "-d", p(&k1), "--batch-mode"]),
    );
    assert_eq!(slots(&volume), Vec::<usize>::new());
    assert!(!cryptsetup_opens(&volume, None, &k1));
    fails_no_key("test-key without keyslots", &rampart(&["test-key", p(&volume), "-d", p(&k1)]));
}

#[test]
fn keys_luks2_made_by_rampart() {
    key_management("keys-luks2-rampart", "luks2", true);
}

#[test]
fn keys_luks2_made_by_cryptsetup() {
    key_management("keys-luks2-cs", "luks2", false);
}

#[test]
fn keys_luks1_made_by_rampart() {
    key_management("keys-luks1-rampart", "luks1", true);
}

#[test]
fn keys_luks1_made_by_cryptsetup() {
    key_management("keys-luks1-cs", "luks1", false);
}

fn cs_token(volume: &Path, id: usize) -> serde_json::Value {
    let id = id.to_string();
    let out = ok(
        "cryptsetup token export",
        cryptsetup(&["token", "export", "--token-id", &id, p(volume)]),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn rampart_token(volume: &Path, id: usize) -> serde_json::Value {
    let id = id.to_string();
    let out =
        ok("rampart token export", rampart(&["token", "export", p(volume), "--token-id", &id]));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A vendor's token, of a type no token plugin claims: cryptsetup hands
/// a `rampart-kms` token to Rampart's plugin when it is installed, which
/// refuses one that does not wrap a real key.
const VENDOR_TOKEN: &str = r#"{"type":"vendor-kms","keyslots":["0"],"server":"https://kms.example:8443/v1","key_id":"vol-42","wrapped":"rampart:v1:vol-42:1:q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJCrze8SNFZ4kKvN7xI0VniQ","nested":{"list":[1,-2,3.5,true,null,{"k":"v"}],"text":"Zürich \"quoted\" \\ tab\t"}}"#;

/// A token imported by cryptsetup survives every Rampart header rewrite.
#[test]
fn tokens_imported_by_cryptsetup_survive_rampart_rewrites() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("tokens-cs");
    let volume = dir.sparse("volume.img", 20 << 20);
    let k1 = dir.file("k1", b"token test");
    let k2 = dir.file("k2", b"token test 2");
    let k3 = dir.file("k3", b"token test 3");
    cs_format(&volume, &k1, "luks2");
    let token_file = dir.file("token.json", VENDOR_TOKEN.as_bytes());
    let want: serde_json::Value = serde_json::from_str(VENDOR_TOKEN).unwrap();
    ok(
        "cryptsetup token import",
        cryptsetup(&[
            "token",
            "import",
            "--json-file",
            p(&token_file),
            "--token-id",
            "3",
            p(&volume),
        ]),
    );
    assert_eq!(cs_token(&volume, 3), want);
    assert_eq!(rampart_token(&volume, 3), want, "Rampart reads the token differently");

    let mut args = vec!["add-key", p(&volume), "-d", p(&k1), "--new-key-file", p(&k2)];
    args.extend(PBKDF2);
    ok("rampart add-key", rampart(&args));
    assert_eq!(cs_token(&volume, 3), want, "token changed by add-key");
    assert_eq!(cryptsetup_tokens(&cryptsetup_dump(&volume)), [(3, "vendor-kms".to_owned())]);

    let mut args = vec!["change-key", p(&volume), "-d", p(&k2), "--new-key-file", p(&k3)];
    args.extend(PBKDF2);
    ok("rampart change-key", rampart(&args));
    assert_eq!(cs_token(&volume, 3), want, "token changed by change-key");
    ok("rampart remove-key", rampart(&["remove-key", p(&volume), "-d", p(&k3)]));
    assert_eq!(cs_token(&volume, 3), want, "token changed by remove-key");

    // Both header copies stay valid and identical.
    let (valid, why) = python_headers_valid(&volume);
    assert!(valid, "{why}");
}

/// A token naming a keyslot that Rampart wipes loses that reference, as
/// cryptsetup's luksKillSlot does, so cryptsetup still accepts the header.
#[test]
fn tokens_follow_keyslot_removal_like_cryptsetup() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("tokens-kill");
    let k1 = dir.file("k1", b"token kill 1");
    let k2 = dir.file("k2", b"token kill 2");
    let token_file = dir.file("token.json", br#"{"type":"x-test","keyslots":["1"],"a":1}"#);
    let mut results = Vec::new();
    for tool in ["cryptsetup", "rampart"] {
        let volume = dir.sparse(&format!("{tool}.img"), 20 << 20);
        cs_format(&volume, &k1, "luks2");
        cs_add_key(&volume, &k1, &k2);
        ok(
            "cryptsetup token import",
            cryptsetup(&["token", "import", "--json-file", p(&token_file), p(&volume)]),
        );
        if tool == "cryptsetup" {
            ok(
                "cryptsetup luksKillSlot",
                cryptsetup(&[
                    "luksKillSlot",
                    "--batch-mode",
                    "--key-file",
                    p(&k1),
                    p(&volume),
                    "1",
                ]),
            );
        } else {
            ok("rampart kill-slot", rampart(&["kill-slot", p(&volume), "1", "-d", p(&k1)]));
        }
        let dump = cryptsetup_dump(&volume);
        assert_eq!(cryptsetup_keyslots(&dump), [0], "{tool}: {dump}");
        results.push(cs_token(&volume, 0));
    }
    assert_eq!(results[1], results[0], "Rampart and cryptsetup leave different tokens");
    assert_eq!(results[1]["keyslots"], serde_json::json!([]));
}

/// `rampart token add/export/remove`, seen by cryptsetup.
#[test]
fn tokens_rampart_add_export_remove() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("tokens-rampart");
    let volume = dir.join("volume.img");
    let k1 = dir.file("k1", b"rampart tokens");
    let mut args = vec!["format", p(&volume), "--size", "20M", "-d", p(&k1)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let token_file = dir.file("token.json", VENDOR_TOKEN.as_bytes());
    let want: serde_json::Value = serde_json::from_str(VENDOR_TOKEN).unwrap();

    // First free id (0), then an explicit one.
    let out = ok(
        "rampart token add",
        rampart(&["token", "add", p(&volume), "--json-file", p(&token_file)]),
    );
    assert_eq!(text(&out.stdout).trim(), "0");
    let other = serde_json::json!({"type": "other-kind", "keyslots": [], "n": 1});
    let other_file = dir.file("other.json", other.to_string().as_bytes());
    let out = ok(
        "rampart token add --token-id 7",
        rampart(&["token", "add", p(&volume), "--json-file", p(&other_file), "--token-id", "7"]),
    );
    assert_eq!(text(&out.stdout).trim(), "7");
    // From standard input.
    let third = serde_json::json!({"type": "from-stdin", "keyslots": ["0"]});
    let out = ok(
        "rampart token add --json-file -",
        rampart_in(&["token", "add", p(&volume), "--json-file", "-"], third.to_string().as_bytes()),
    );
    assert_eq!(text(&out.stdout).trim(), "1");

    let dump = cryptsetup_dump(&volume);
    assert_eq!(
        cryptsetup_tokens(&dump),
        [(0, "vendor-kms".to_owned()), (1, "from-stdin".to_owned()), (7, "other-kind".to_owned())],
        "{dump}"
    );
    assert_eq!(cs_token(&volume, 0), want);
    assert_eq!(cs_token(&volume, 7), other);
    assert_eq!(cs_token(&volume, 1), third);
    assert_eq!(rampart_token(&volume, 0), want);
    assert_eq!(rampart_token(&volume, 7), other);
    assert!(cryptsetup_opens(&volume, None, &k1));

    // An id in use, bad JSON, a missing keyslot: refused, header unchanged.
    let before = std::fs::read(&volume).unwrap();
    fails(
        "token add with a used id",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&other_file), "--token-id", "7"]),
        None,
    );
    let bad = dir.file("bad.json", b"{\"type\": \"x\", \"keyslots\": [");
    fails(
        "token add of bad JSON",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&bad)]),
        Some(2),
    );
    let no_slot = dir.file("noslot.json", br#"{"type":"x","keyslots":["9"]}"#);
    fails(
        "token add naming a missing keyslot",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&no_slot)]),
        None,
    );
    let no_type = dir.file("notype.json", br#"{"keyslots":[]}"#);
    fails(
        "token add without a type",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&no_type)]),
        None,
    );
    let not_object = dir.file("array.json", b"[1,2]");
    fails(
        "token add of a non-object",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&not_object)]),
        None,
    );
    assert_same("volume after refused token adds", &std::fs::read(&volume).unwrap(), &before);

    // Remove: gone for both tools; the others stay.
    ok("rampart token remove", rampart(&["token", "remove", p(&volume), "--token-id", "0"]));
    let dump = cryptsetup_dump(&volume);
    assert_eq!(
        cryptsetup_tokens(&dump),
        [(1, "from-stdin".to_owned()), (7, "other-kind".to_owned())],
        "{dump}"
    );
    let out = cryptsetup(&["token", "export", "--token-id", "0", p(&volume)]);
    assert!(!out.status.success(), "cryptsetup still exports token 0");
    fails(
        "token export of a removed token",
        &rampart(&["token", "export", p(&volume), "--token-id", "0"]),
        Some(2),
    );
    fails(
        "token remove of a removed token",
        &rampart(&["token", "remove", p(&volume), "--token-id", "0"]),
        None,
    );
    assert_eq!(cs_token(&volume, 7), other);
    let (valid, why) = python_headers_valid(&volume);
    assert!(valid, "{why}");
}

/// LUKS1 has no tokens: a one-line error, the header unchanged.
#[test]
fn tokens_refused_on_luks1() {
    let dir = TempDir::new("tokens-luks1");
    let volume = dir.join("volume.img");
    let k1 = dir.file("k1", b"luks1 tokens");
    ok(
        "rampart format",
        rampart(&[
            "format",
            p(&volume),
            "--type",
            "luks1",
            "--size",
            "8M",
            "-d",
            p(&k1),
            "--pbkdf-force-iterations",
            "1000",
        ]),
    );
    let before = std::fs::read(&volume).unwrap();
    let token_file = dir.file("token.json", VENDOR_TOKEN.as_bytes());
    fails(
        "token add on LUKS1",
        &rampart(&["token", "add", p(&volume), "--json-file", p(&token_file)]),
        None,
    );
    fails(
        "token export on LUKS1",
        &rampart(&["token", "export", p(&volume), "--token-id", "0"]),
        None,
    );
    assert_same("LUKS1 volume after token add", &std::fs::read(&volume).unwrap(), &before);
}
