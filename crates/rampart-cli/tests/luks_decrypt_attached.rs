#![allow(clippy::unwrap_used)]
//! `rampart reencrypt --decrypt --header NEWFILE VOL` on a volume whose
//! LUKS2 header is attached, against the real cryptsetup 2.6 and
//! pyca/cryptography: the header is exported to NEWFILE and the data moved
//! down over it while it is decrypted (`online-reencrypt-v3`,
//! `datashift-checksum`), so the plaintext ends at byte 0 of VOL. The
//! metadata Rampart initialises equals cryptsetup's; each tool finishes
//! what the other initialised, stopped, crashed or was killed in; the
//! result is the plaintext pyca finds with the volume key cryptsetup
//! prints, for 4096- and 512-byte sectors.

use crate::helpers::luks_support as support;

use std::path::{Path, PathBuf};

use support::*;

const MIB: usize = 1 << 20;

/// A volume with an attached LUKS2 header made by cryptsetup
/// (`offset_mib` MiB of header, `sector`-byte sectors) whose data is
/// `plain`, encrypted by pyca with the volume key cryptsetup prints.
fn attached_volume(
    dir: &TempDir,
    name: &str,
    sector: &str,
    offset_mib: usize,
    key: &Path,
    plain: &[u8],
) -> PathBuf {
    let _ = std::fs::remove_file(dir.join(name));
    let vol = dir.sparse(name, (offset_mib * MIB + plain.len()) as u64);
    let offset_sectors = (offset_mib * MIB / 512).to_string();
    let mut args = vec!["luksFormat", "-q", "--type", "luks2", "--sector-size", sector];
    args.extend(["--offset", &offset_sectors]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(key), p(&vol)]);
    ok("cryptsetup luksFormat", cryptsetup(&args));
    let info = info(offset_mib, sector);
    let volume_key = cryptsetup_volume_key(&vol, key);
    python_encrypt(dir, &vol, &info, &volume_key, plain);
    assert_same(
        "pyca round trip",
        &python_decrypt(dir, &vol, &info, &volume_key, plain.len()),
        plain,
    );
    vol
}

fn info(offset_mib: usize, sector: &str) -> SegmentInfo {
    SegmentInfo {
        data_offset: (offset_mib * MIB) as u64,
        cipher: "aes-xts-plain64".into(),
        sector_size: sector.parse().unwrap(),
        iv_tweak: 0,
    }
}

fn decrypt_args<'a>(vol: &'a Path, header: &'a Path, key: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["reencrypt", "--decrypt", "--header", p(header)];
    args.extend(["--key-file", p(key), p(vol), "-q"]);
    args
}

fn cryptsetup_decrypt_args<'a>(vol: &'a Path, header: &'a Path, key: &'a Path) -> Vec<&'a str> {
    let mut args = decrypt_args(vol, header, key);
    args.push("--force-offline-reencrypt");
    args
}

fn resume_args<'a>(vol: &'a Path, header: &'a Path, key: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["reencrypt", "--resume-only", "--header", p(header)];
    args.extend(["--key-file", p(key), p(vol), "-q"]);
    args
}

fn in_progress(header: &Path) -> bool {
    luks2_json(header, 0)["config"].get("requirements").is_some()
}

/// Finishes with cryptsetup a run another process left (`repair` first for
/// an interrupted hotzone, as cryptsetup requires; repairing the last one
/// may finish the run).
fn cryptsetup_finishes(what: &str, vol: &Path, header: &Path, key: &Path) {
    if has_hotzone(header) {
        let repair = vec!["repair", "-q", "--header", p(header), "--key-file", p(key), p(vol)];
        ok(&format!("{what}: cryptsetup repair"), cryptsetup(&repair));
    }
    if in_progress(header) {
        let mut args = resume_args(vol, header, key);
        args.push("--force-offline-reencrypt");
        ok(&format!("{what}: cryptsetup reencrypt --resume-only"), cryptsetup(&args));
    }
}

/// The metadata of a decryption moving the data, as cryptsetup 2.6 writes
/// it, less what differs between two initialisations (salts, digests).
fn shift_metadata(header: &Path) -> serde_json::Value {
    let json = luks2_json(header, 0);
    let reencrypt = json["keyslots"]
        .as_object()
        .unwrap()
        .values()
        .find(|k| k["type"] == "reencrypt")
        .cloned()
        .unwrap_or_default();
    let digests: Vec<serde_json::Value> = json["digests"]
        .as_object()
        .unwrap()
        .values()
        .map(|d| serde_json::json!([d["keyslots"], d["segments"]]))
        .collect();
    serde_json::json!({
        "segments": json["segments"],
        "config": json["config"],
        "reencrypt": reencrypt,
        "digests": digests,
    })
}

/// The finished state: NEWFILE holds one linear segment and nothing else,
/// VOL starts with the plaintext, keeps its size, and its last
/// data-offset bytes (the ciphertext moved down) are overwritten.
fn assert_decrypted(what: &str, vol: &Path, header: &Path, plain: &[u8], before: &[u8]) {
    let json = luks2_json(header, 0);
    assert_eq!(
        json["segments"],
        serde_json::json!({"0": {"type": "linear", "offset": "0", "size": "dynamic"}}),
        "{what}: {json}"
    );
    assert_eq!(json["keyslots"], serde_json::json!({}), "{what}: {json}");
    assert_eq!(json["digests"], serde_json::json!({}), "{what}: {json}");
    assert!(json["config"].get("requirements").is_none(), "{what}: {json}");
    let out = ok(
        &format!("{what}: cryptsetup luksDump"),
        cryptsetup(&["luksDump", "--dump-json-metadata", p(header)]),
    );
    let cs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cs["segments"], json["segments"], "{what}");
    let after = std::fs::read(vol).unwrap();
    assert_eq!(after.len(), before.len(), "{what}: the device changed size");
    assert_same(what, &after[..plain.len()], plain);
    let tail = &after[plain.len()..];
    let old_tail = &before[plain.len()..];
    assert!(
        tail.chunks(4096).zip(old_tail.chunks(4096)).all(|(a, b)| a != b),
        "{what}: ciphertext left beyond the plaintext"
    );
}

#[test]
fn attached_headers_are_exported_and_the_data_moved_down_as_cryptsetup_does() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("decrypt-attached");
    let key = dir.file("key", b"decryption passphrase");
    for (sector, seed) in [("4096", 41), ("512", 42)] {
        // 9 MiB of data over a 2 MiB shift: four moves, the last one
        // short, then the moved first chunk.
        let plain = random_bytes(seed, 9 * MIB);
        let a = attached_volume(&dir, "a", sector, 2, &key, &plain);
        let before = std::fs::read(&a).unwrap();
        let b = dir.file("b", &before);
        let c = dir.file("c", &before);
        let (ha, hb, hc) = (dir.join("a.hdr"), dir.join("b.hdr"), dir.join("c.hdr"));
        for h in [&ha, &hb, &hc] {
            let _ = std::fs::remove_file(h);
        }
        let mut init = decrypt_args(&a, &ha, &key);
        init.push("--init-only");
        ok(&format!("{sector}: rampart --decrypt --init-only"), rampart(&init));
        let mut init = cryptsetup_decrypt_args(&b, &hb, &key);
        init.push("--init-only");
        ok(&format!("{sector}: cryptsetup --decrypt --init-only"), cryptsetup(&init));
        assert_eq!(shift_metadata(&ha), shift_metadata(&hb), "{sector}: metadata differs");
        let meta = shift_metadata(&ha);
        assert_eq!(
            meta["config"]["requirements"]["mandatory"],
            serde_json::json!(["online-reencrypt-v3"]),
            "{meta}"
        );
        assert_eq!(meta["reencrypt"]["area"]["type"], "datashift-checksum", "{meta}");
        assert_eq!(meta["reencrypt"]["mode"], "decrypt", "{meta}");
        assert_eq!(meta["reencrypt"]["direction"], "forward", "{meta}");
        assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "{sector}: data differs");
        assert_eq!(std::fs::metadata(&ha).unwrap().len(), 2 * MIB as u64);
        let out =
            ok("rampart dump --json", rampart(&["dump", "--json", "--header", p(&ha), p(&a)]));
        let dump: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(dump["reencryption"]["mode"], "decrypt", "{dump}");
        assert_eq!(dump["reencryption"]["resilience"], "datashift-checksum", "{dump}");
        let out = ok("rampart dump", rampart(&["dump", "--header", p(&ha), p(&a)]));
        assert!(text(&out.stdout).contains("moved down"), "{}", text(&out.stdout));

        // Each tool finishes what the other initialised.
        let mut resume = resume_args(&a, &ha, &key);
        resume.push("--force-offline-reencrypt");
        ok(&format!("{sector}: cryptsetup finishes Rampart's"), cryptsetup(&resume));
        assert_decrypted(&format!("{sector}: cryptsetup after rampart"), &a, &ha, &plain, &before);
        ok(
            &format!("{sector}: rampart finishes cryptsetup's"),
            rampart(&resume_args(&b, &hb, &key)),
        );
        assert_decrypted(&format!("{sector}: rampart after cryptsetup"), &b, &hb, &plain, &before);

        // And Rampart alone, in one command.
        let mut args = decrypt_args(&c, &hc, &key);
        args.push("--json");
        let out = ok(&format!("{sector}: rampart --decrypt"), rampart(&args));
        assert!(text(&out.stdout).contains("\"finished\""), "{}", text(&out.stdout));
        assert_decrypted(&format!("{sector}: rampart"), &c, &hc, &plain, &before);
    }
}

#[test]
fn decryptions_moving_the_data_cross_resume_after_stops_and_crashes() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("decrypt-attached-crash");
    let key = dir.file("key", b"passphrase");
    // Hotzones: four moves of at most 2 MiB, then the moved chunk (5th).
    let points = [
        ("RAMPART_REENCRYPT_STOP_AFTER", "1", "4096"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "0", "4096"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "2", "512"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "3", "4096"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "4", "4096"),
        ("RAMPART_REENCRYPT_CRASH_AFTER", "4", "512"),
    ];
    for (i, (hook, n, sector)) in points.into_iter().enumerate() {
        let what = format!("{hook}={n}/{sector}");
        let plain = random_bytes(50 + i as u64, 9 * MIB);
        let vol = attached_volume(&dir, "vol", sector, 2, &key, &plain);
        let before = std::fs::read(&vol).unwrap();
        let header = dir.join("vol.hdr");
        let _ = std::fs::remove_file(&header);
        let out = rampart_env(&decrypt_args(&vol, &header, &key), &[(hook, n)]);
        let crashed = hook.ends_with("CRASH_AFTER");
        assert_eq!(
            out.status.code(),
            Some(if crashed { 137 } else { 0 }),
            "{}",
            describe(&what, &out)
        );
        assert!(in_progress(&header), "{what}: the run did not stop part-way");
        assert_eq!(has_hotzone(&header), crashed, "{what}");
        // Two copies of the interrupted state: one for each tool.
        let vol2 = dir.file("vol2", &std::fs::read(&vol).unwrap());
        let header2 = dir.file("vol2.hdr", &std::fs::read(&header).unwrap());
        ok(&format!("{what}: rampart --resume-only"), rampart(&resume_args(&vol, &header, &key)));
        assert_decrypted(&format!("{what}: rampart"), &vol, &header, &plain, &before);
        cryptsetup_finishes(&what, &vol2, &header2, &key);
        assert_decrypted(&format!("{what}: cryptsetup"), &vol2, &header2, &plain, &before);
    }
}

/// Bytes of the regular (non-backup) `linear` segments of fixed size.
fn linear_done(json: &serde_json::Value) -> u64 {
    json["segments"]
        .as_object()
        .map(|s| s.values().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s["type"] == "linear" && s.get("flags").is_none())
        .filter_map(|s| s["size"].as_str()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn rampart_finishes_decryptions_a_killed_cryptsetup_left() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("decrypt-attached-kill");
    let key = dir.file("key", b"passphrase");
    // Killed among the moves: 1 MiB shift over 150 MiB.
    let plain = random_bytes(60, 150 * MIB);
    let vol = attached_volume(&dir, "vol", "4096", 1, &key, &plain);
    let before = std::fs::read(&vol).unwrap();
    let header = dir.join("vol.hdr");
    let _ = std::fs::remove_file(&header);
    kill_cryptsetup_when("moves", &cryptsetup_decrypt_args(&vol, &header, &key), &header, |json| {
        json["config"].get("requirements").is_some()
            && (16 * MIB as u64..120 * MIB as u64).contains(&linear_done(json))
    });
    let out =
        ok("rampart dump --json", rampart(&["dump", "--json", "--header", p(&header), p(&vol)]));
    let dump: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(dump["reencryption"]["mode"], "decrypt", "{dump}");
    ok("moves: rampart --resume-only", rampart(&resume_args(&vol, &header, &key)));
    assert_decrypted("moves", &vol, &header, &plain, &before);

    // Killed once the moved chunk (16 MiB, the default header) is the
    // hotzone or done: the header's first segment is plaintext.
    let plain = random_bytes(61, 48 * MIB);
    let vol = attached_volume(&dir, "vol", "4096", 16, &key, &plain);
    let before = std::fs::read(&vol).unwrap();
    let _ = std::fs::remove_file(&header);
    kill_cryptsetup_when(
        "moved chunk",
        &cryptsetup_decrypt_args(&vol, &header, &key),
        &header,
        |json| {
            json["config"].get("requirements").is_some()
                && json["segments"]["0"]["type"] == "linear"
        },
    );
    assert!(in_progress(&header), "moved chunk: cryptsetup finished");
    ok("moved chunk: rampart --resume-only", rampart(&resume_args(&vol, &header, &key)));
    assert_decrypted("moved chunk", &vol, &header, &plain, &before);
}

#[test]
fn bad_requests_to_decrypt_an_attached_header_change_nothing() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("decrypt-attached-bad");
    let key = dir.file("key", b"passphrase");
    let wrong = dir.file("wrong", b"not the passphrase");
    let plain = random_bytes(70, 4 * MIB);
    let vol = attached_volume(&dir, "vol", "4096", 2, &key, &plain);
    let before = std::fs::read(&vol).unwrap();
    let header = dir.join("vol.hdr");
    let refused = |what: &str, args: &[&str], needle: &str| {
        let out = rampart(args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(what, &out));
        let err = text(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: not one line: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        assert!(!header.exists(), "{what}: the header file was created");
        assert!(std::fs::read(&vol).unwrap() == before, "{what}: the volume changed");
    };
    let mut args = decrypt_args(&vol, &header, &key);
    args.extend(["--resilience", "none"]);
    refused("resilience none", &args, "checksum or journal");
    // The free keyslots area (under 2 MiB) cannot journal 2 MiB.
    let mut args = decrypt_args(&vol, &header, &key);
    args.extend(["--resilience", "journal"]);
    refused("journal too small", &args, "journal");
    refused("wrong passphrase", &decrypt_args(&vol, &header, &wrong), NO_KEY);
    let mut args = decrypt_args(&vol, &header, &key);
    args.extend(["--cipher", "aes-xts-plain64"]);
    refused("a cipher", &args, "--cipher");
    // As much data as the shift: nothing to move it into.
    let small = attached_volume(&dir, "small", "4096", 2, &key, &random_bytes(71, 2 * MIB));
    let small_before = std::fs::read(&small).unwrap();
    let out = rampart(&decrypt_args(&small, &header, &key));
    assert_eq!(out.status.code(), Some(2), "{}", describe("too small", &out));
    assert!(text(&out.stderr).contains("more data"), "{}", describe("too small", &out));
    assert!(!header.exists() && std::fs::read(&small).unwrap() == small_before);
    // An existing NEWFILE is read as the volume's detached header.
    let junk = dir.file("junk.hdr", &[0u8; 8192]);
    let out = rampart(&decrypt_args(&vol, &junk, &key));
    assert_ne!(out.status.code(), Some(0), "{}", describe("existing file", &out));
    assert!(std::fs::read(&vol).unwrap() == before, "existing file: the volume changed");
}
