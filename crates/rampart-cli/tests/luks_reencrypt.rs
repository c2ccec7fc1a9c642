#![allow(clippy::unwrap_used)]
//! `rampart reencrypt` against the real cryptsetup 2.6 and
//! pyca/cryptography: the volume Rampart re-encrypts opens in cryptsetup
//! under a new volume key and decrypts (with the key cryptsetup prints) to
//! the same plaintext, in every resilience mode, with 4096- and 512-byte
//! sectors and a changed sector and key size; a run Rampart stops or
//! crashes in the middle of a hotzone is finished by cryptsetup, and one
//! cryptsetup initialises or is killed in is finished by Rampart.

use crate::helpers::luks_support as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const MIB: usize = 1 << 20;

/// A cryptsetup LUKS2 volume of `size` MiB (16 MiB of header) with random
/// data in its first `data` bytes; returns the volume.
fn volume(dir: &TempDir, name: &str, size: u64, sector: &str, key: &Path, data: &[u8]) -> PathBuf {
    let vol = dir.sparse(name, size << 20);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2", "--sector-size", sector];
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(key), p(&vol)]);
    ok("cryptsetup luksFormat", cryptsetup(&args));
    let part = dir.file(&format!("{name}.data"), data);
    ok("rampart import", rampart(&["import", p(&vol), p(&part), "--key-file", p(key)]));
    vol
}

/// The segment of a LUKS2 volume without reencryption, from its JSON.
fn segment(vol: &Path) -> SegmentInfo {
    let json = luks2_json(vol, 0);
    let seg = &json["segments"]["0"];
    SegmentInfo {
        data_offset: seg["offset"].as_str().unwrap().parse().unwrap(),
        cipher: seg["encryption"].as_str().unwrap().to_owned(),
        sector_size: seg["sector_size"].as_u64().unwrap(),
        iv_tweak: seg["iv_tweak"].as_str().unwrap().parse().unwrap(),
    }
}

/// `len` bytes of plaintext at data byte `at`, decrypted by
/// pyca/cryptography with the volume key cryptsetup prints for `key`.
fn plaintext(dir: &TempDir, vol: &Path, key: &Path, at: u64, len: usize) -> Vec<u8> {
    let volume_key = cryptsetup_volume_key(vol, key);
    let mut seg = segment(vol);
    seg.data_offset += at;
    seg.iv_tweak += at / 512;
    python_decrypt(dir, vol, &seg, &volume_key, len)
}

/// Asserts the header carries no trace of a reencryption, as cryptsetup
/// sees it.
fn assert_finished(vol: &Path) {
    let out = ok(
        "cryptsetup luksDump --dump-json-metadata",
        cryptsetup(&["luksDump", "--dump-json-metadata", p(vol)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["segments"].as_object().unwrap().len(), 1, "{json}");
    assert!(json["segments"]["0"].get("flags").is_none(), "{json}");
    assert_eq!(json["segments"]["0"]["size"], "dynamic", "{json}");
    assert!(json["config"].get("requirements").is_none(), "{json}");
    for (id, ks) in json["keyslots"].as_object().unwrap() {
        assert_eq!(ks["type"], "luks2", "keyslot {id}: {json}");
    }
    for (id, d) in json["digests"].as_object().unwrap() {
        assert_eq!(d["segments"], serde_json::json!(["0"]), "digest {id}: {json}");
    }
}

fn reencrypt_args<'a>(vol: &'a Path, key: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["reencrypt", p(vol), "--key-file", p(key)];
    args.extend_from_slice(PBKDF2);
    args.extend_from_slice(extra);
    args
}

fn reencryption_json(vol: &Path) -> serde_json::Value {
    let out = ok("rampart dump --json", rampart(&["dump", "--json", p(vol)]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["reencryption"].clone()
}

#[test]
fn reencrypted_volumes_open_in_cryptsetup_with_the_same_plaintext() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-modes");
    let key = dir.file("key", b"old passphrase");
    let other = dir.file("other", b"another passphrase");
    let data = random_bytes(11, 24 * MIB);
    let cases: &[(&str, &str, &[&str])] = &[
        ("4096", "checksum", &[]),
        ("512", "checksum", &[]),
        ("4096", "journal", &[]),
        ("512", "journal", &[]),
        ("4096", "none", &[]),
        ("512", "checksum", &["--sector-size", "4096", "--key-size", "256"]),
    ];
    for (sector, resilience, extra) in cases {
        let what = format!("{sector}/{resilience}/{extra:?}");
        let vol = dir.join("vol");
        let _ = std::fs::remove_file(&vol);
        let vol = volume(&dir, "vol", 40, sector, &key, &data);
        let mut add = vec!["luksAddKey", "-q", "--key-file", p(&key)];
        add.extend_from_slice(PBKDF2);
        add.extend([p(&vol), p(&other)]);
        ok("cryptsetup luksAddKey", cryptsetup(&add));
        let old_key = cryptsetup_volume_key(&vol, &key);

        let mut extra_args = vec!["--resilience", *resilience, "--hotzone-size", "4M"];
        extra_args.extend_from_slice(extra);
        ok(
            &format!("{what}: rampart reencrypt"),
            rampart(&reencrypt_args(&vol, &key, &extra_args)),
        );

        assert_finished(&vol);
        ok(
            &format!("{what}: cryptsetup opens the result"),
            cryptsetup(&["open", "--test-passphrase", "--key-file", p(&key), p(&vol)]),
        );
        assert!(
            !cryptsetup_opens(&vol, None, &other),
            "{what}: a keyslot the passphrase does not open survived the reencryption"
        );
        let new_key = cryptsetup_volume_key(&vol, &key);
        assert_ne!(old_key, new_key, "{what}: the volume key did not change");
        let seg = segment(&vol);
        if let Some(pos) = extra.iter().position(|a| *a == "--sector-size") {
            assert_eq!(seg.sector_size.to_string(), extra[pos + 1], "{what}");
            assert_eq!(new_key.len(), 32, "{what}");
        } else {
            assert_eq!(seg.sector_size.to_string(), *sector, "{what}");
        }
        assert_same(&what, &plaintext(&dir, &vol, &key, 0, data.len()), &data);
    }
}

#[test]
fn a_new_passphrase_replaces_the_old_ones() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-newkey");
    let key = dir.file("key", b"old passphrase");
    let new = dir.file("new", b"new passphrase");
    let data = random_bytes(12, 8 * MIB);
    let vol = volume(&dir, "vol", 32, "4096", &key, &data);
    ok("rampart reencrypt", rampart(&reencrypt_args(&vol, &key, &["--new-key-file", p(&new)])));
    assert_finished(&vol);
    assert!(cryptsetup_opens(&vol, None, &new), "the new passphrase does not open the volume");
    assert!(!cryptsetup_opens(&vol, None, &key), "the old passphrase still opens the volume");
    assert_same("plaintext", &plaintext(&dir, &vol, &new, 0, data.len()), &data);
}

#[test]
fn cryptsetup_finishes_what_rampart_stopped_or_crashed_in() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-to-cryptsetup");
    let key = dir.file("key", b"old passphrase");
    let data = random_bytes(13, 24 * MIB);
    for (sector, resilience) in
        [("4096", "checksum"), ("512", "checksum"), ("4096", "journal"), ("512", "journal")]
    {
        for (hook, status) in [
            ("RAMPART_REENCRYPT_STOP_AFTER", Some(0)),
            ("RAMPART_REENCRYPT_CRASH_AFTER", Some(137)),
        ] {
            let what = format!("{sector}/{resilience}/{hook}");
            let vol = dir.join("vol");
            let _ = std::fs::remove_file(&vol);
            let vol = volume(&dir, "vol", 40, sector, &key, &data);
            let args =
                reencrypt_args(&vol, &key, &["--resilience", resilience, "--hotzone-size", "4M"]);
            let out = rampart_env(&args, &[(hook, "2")]);
            assert_eq!(out.status.code(), status, "{}", describe(&what, &out));

            let state = reencryption_json(&vol);
            assert_eq!(state["mode"], "reencrypt", "{what}: {state}");
            assert_eq!(state["resilience"], resilience, "{what}: {state}");
            assert_eq!(state["done_bytes"], 8 * MIB, "{what}: {state}");
            let json = luks2_json(&vol, 0);
            assert_eq!(
                json["config"]["requirements"]["mandatory"],
                serde_json::json!(["online-reencrypt-v2"]),
                "{what}: {json}"
            );
            let hot = json["segments"].as_object().unwrap().values().any(|s| {
                s["flags"].as_array().is_some_and(|f| f.iter().any(|f| f == "in-reencryption"))
            });
            assert_eq!(hot, hook.ends_with("CRASH_AFTER"), "{what}: {json}");

            let mut resume = vec!["reencrypt", "--resume-only", "--force-offline-reencrypt", "-q"];
            resume.extend(["--key-file", p(&key), p(&vol)]);
            if hot {
                // cryptsetup recovers an interrupted hotzone in `repair`.
                ok(
                    &format!("{what}: cryptsetup repair"),
                    cryptsetup(&["repair", "-q", "--key-file", p(&key), p(&vol)]),
                );
            }
            ok(&format!("{what}: cryptsetup reencrypt --resume-only"), cryptsetup(&resume));
            assert_finished(&vol);
            assert_same(&what, &plaintext(&dir, &vol, &key, 0, data.len()), &data);
        }
    }
}

#[test]
fn rampart_finishes_what_cryptsetup_initialised() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-from-init");
    let key = dir.file("key", b"old passphrase");
    let data = random_bytes(14, 24 * MIB);
    for sector in ["4096", "512"] {
        let vol = dir.join("vol");
        let _ = std::fs::remove_file(&vol);
        let vol = volume(&dir, "vol", 40, sector, &key, &data);
        let mut init = vec!["reencrypt", "--init-only", "--force-offline-reencrypt", "-q"];
        init.extend_from_slice(PBKDF2);
        init.extend(["--key-file", p(&key), p(&vol)]);
        ok("cryptsetup reencrypt --init-only", cryptsetup(&init));
        let out = ok("rampart dump", rampart(&["dump", p(&vol)]));
        let dump = text(&out.stdout);
        assert!(dump.contains("Reencryption:") && dump.contains("checksum"), "{dump}");
        ok(
            "rampart reencrypt --resume-only",
            rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key)]),
        );
        assert_finished(&vol);
        assert_same(sector, &plaintext(&dir, &vol, &key, 0, data.len()), &data);
    }
}

#[test]
fn rampart_finishes_what_a_killed_cryptsetup_left() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-from-kill");
    let key = dir.file("key", b"old passphrase");
    let data = random_bytes(15, 16 * MIB);
    for (sector, resilience) in [("4096", "checksum"), ("512", "journal")] {
        let what = format!("{sector}/{resilience}");
        let vol = dir.join("vol");
        let _ = std::fs::remove_file(&vol);
        let vol = volume(&dir, "vol", 400, sector, &key, &data);
        let before = dir.join("before");
        ok("rampart export", rampart(&["export", p(&vol), p(&before), "--key-file", p(&key)]));

        let mut args = vec!["reencrypt", "--force-offline-reencrypt", "-q"];
        args.extend_from_slice(PBKDF2);
        args.extend(["--resilience", resilience, "--hotzone-size", "1M"]);
        args.extend(["--key-file", p(&key), p(&vol)]);
        let mut child = Command::new(tool("cryptsetup"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill it once the header shows progress past the first megabytes.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(json) = header_json_now(&vol) {
                let segs = json["segments"].as_object().map_or(0, |s| s.len());
                let first = json["segments"]["0"]["size"].as_str().unwrap_or("dynamic");
                if segs >= 4 && first.parse::<u64>().is_ok_and(|n| n >= 8 * MIB as u64) {
                    break;
                }
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "{what}: cryptsetup finished before it could be killed"
            );
            assert!(Instant::now() < deadline, "{what}: cryptsetup made no progress");
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let state = reencryption_json(&vol);
        assert!(state["done_bytes"].as_u64().unwrap() >= 8 * MIB as u64, "{what}: {state}");

        ok(
            &format!("{what}: rampart reencrypt --resume-only"),
            rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key), "--json"]),
        );
        assert_finished(&vol);
        let after = dir.join("after");
        ok("rampart export", rampart(&["export", p(&vol), p(&after), "--key-file", p(&key)]));
        assert_same(&what, &std::fs::read(&after).unwrap(), &std::fs::read(&before).unwrap());
        assert_same(&what, &plaintext(&dir, &vol, &key, 0, data.len()), &data);
    }
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("reencrypt-bad");
    let key = dir.file("key", b"old passphrase");
    let wrong = dir.file("wrong", b"wrong passphrase");
    let data = random_bytes(16, MIB);
    let vol = volume(&dir, "vol", 20, "4096", &key, &data);
    let before = std::fs::read(&vol).unwrap();
    let out = rampart(&reencrypt_args(&vol, &wrong, &[]));
    assert_eq!(out.status.code(), Some(2), "{}", describe("wrong passphrase", &out));
    let out = rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe("nothing to resume", &out));
    assert!(text(&out.stderr).contains("not being re-encrypted"), "{}", describe("resume", &out));
    for bad in [&["--resilience", "fast"][..], &["--sector-size", "300"], &["--key-size", "384"]] {
        let out = rampart(&reencrypt_args(&vol, &key, bad));
        assert_eq!(out.status.code(), Some(2), "{}", describe(&format!("{bad:?}"), &out));
    }
    assert!(std::fs::read(&vol).unwrap() == before, "a refused request changed the volume");
}

#[test]
fn detached_headers_are_reencrypted_and_resumed_by_cryptsetup() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("reencrypt-detached");
    let key = dir.file("key", b"old passphrase");
    let data = random_bytes(17, 16 * MIB);
    let vol = dir.sparse("data", 32 << 20);
    let header = dir.sparse("header", 16 << 20);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2", "--header", p(&header)];
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol)]);
    ok("cryptsetup luksFormat --header", cryptsetup(&args));
    let part = dir.file("part", &data);
    ok(
        "rampart import",
        rampart(&["import", p(&vol), p(&part), "--header", p(&header), "--key-file", p(&key)]),
    );
    let args = reencrypt_args(&vol, &key, &["--header", p(&header), "--hotzone-size", "4M"]);
    let out = rampart_env(&args, &[("RAMPART_REENCRYPT_STOP_AFTER", "1")]);
    assert!(out.status.success(), "{}", describe("rampart reencrypt (stopped)", &out));
    ok(
        "cryptsetup reencrypt --resume-only --header",
        cryptsetup(&[
            "reencrypt",
            "--resume-only",
            "--force-offline-reencrypt",
            "-q",
            "--header",
            p(&header),
            "--key-file",
            p(&key),
            p(&vol),
        ]),
    );
    assert_finished(&header);
    let volume_key = cryptsetup_volume_key(&header, &key);
    let json = luks2_json(&header, 0);
    let seg = &json["segments"]["0"];
    let info = SegmentInfo {
        data_offset: seg["offset"].as_str().unwrap().parse().unwrap(),
        cipher: seg["encryption"].as_str().unwrap().to_owned(),
        sector_size: seg["sector_size"].as_u64().unwrap(),
        iv_tweak: 0,
    };
    assert_eq!(info.data_offset, 0, "{json}");
    assert_same("detached", &python_decrypt(&dir, &vol, &info, &volume_key, data.len()), &data);
}
