#![allow(clippy::unwrap_used)]
//! `rampart reencrypt --encrypt` and `--decrypt` against the real
//! cryptsetup 2.6 and pyca/cryptography: a plain image Rampart encrypts in
//! place (data shifted to make room for the header, with a detached
//! header, or both: a detached header of the shift's size, the data
//! encrypted where it lies, backward) opens in cryptsetup and decrypts, with the volume key
//! cryptsetup prints, to the original data; a detached-header volume
//! Rampart decrypts holds the plaintext; with 4096- and 512-byte sectors.
//! An encryption or decryption Rampart stops or crashes in is finished by
//! cryptsetup, and one cryptsetup initialised or was killed in is finished
//! by Rampart.

use crate::helpers::luks_support as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const MIB: usize = 1 << 20;

/// A plain image of random bytes.
fn image(dir: &TempDir, name: &str, seed: u64, len: usize) -> (PathBuf, Vec<u8>) {
    let data = random_bytes(seed, len);
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

/// cryptsetup's view of a finished encryption: one crypt segment, no
/// reencryption left.
fn assert_encrypted(what: &str, header: &Path, offset: u64, sector: u64) -> SegmentInfo {
    let out = ok(
        &format!("{what}: cryptsetup luksDump --dump-json-metadata"),
        cryptsetup(&["luksDump", "--dump-json-metadata", p(header)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let segs = json["segments"].as_object().unwrap();
    assert_eq!(segs.len(), 1, "{what}: {json}");
    let seg = &json["segments"]["0"];
    assert_eq!(seg["type"], "crypt", "{what}: {json}");
    assert_eq!(seg["size"], "dynamic", "{what}: {json}");
    assert!(seg.get("flags").is_none(), "{what}: {json}");
    assert!(json["config"].get("requirements").is_none(), "{what}: {json}");
    for (id, ks) in json["keyslots"].as_object().unwrap() {
        assert_eq!(ks["type"], "luks2", "{what}: keyslot {id}: {json}");
    }
    let info = SegmentInfo {
        data_offset: seg["offset"].as_str().unwrap().parse().unwrap(),
        cipher: seg["encryption"].as_str().unwrap().to_owned(),
        sector_size: seg["sector_size"].as_u64().unwrap(),
        iv_tweak: seg["iv_tweak"].as_str().unwrap().parse().unwrap(),
    };
    assert_eq!(info.data_offset, offset, "{what}: {json}");
    assert_eq!(info.sector_size, sector, "{what}: {json}");
    info
}

/// Asserts cryptsetup opens the volume and the data decrypts, with the
/// volume key cryptsetup prints, to `want`.
fn assert_plaintext(
    what: &str,
    dir: &TempDir,
    data: &Path,
    header: Option<&Path>,
    key: &Path,
    info: &SegmentInfo,
    want: &[u8],
) {
    assert!(cryptsetup_opens(data, header, key), "{what}: cryptsetup does not open the volume");
    let volume_key = cryptsetup_volume_key(header.unwrap_or(data), key);
    assert_same(what, &python_decrypt(dir, data, info, &volume_key, want.len()), want);
}

fn resume_args<'a>(vol: &'a Path, header: Option<&'a Path>, key: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["reencrypt", "--resume-only", "--force-offline-reencrypt", "-q"];
    if let Some(h) = header {
        args.extend(["--header", p(h)]);
    }
    args.extend(["--key-file", p(key), p(vol)]);
    args
}

/// Finishes, with cryptsetup, a run another process left (recovering an
/// interrupted hotzone with `repair` first, as cryptsetup requires).
fn cryptsetup_finishes(what: &str, vol: &Path, header: Option<&Path>, key: &Path) {
    if has_hotzone(header.unwrap_or(vol)) {
        let mut repair = vec!["repair", "-q"];
        if let Some(h) = header {
            repair.extend(["--header", p(h)]);
        }
        repair.extend(["--key-file", p(key), p(vol)]);
        ok(&format!("{what}: cryptsetup repair"), cryptsetup(&repair));
    }
    ok(
        &format!("{what}: cryptsetup reencrypt --resume-only"),
        cryptsetup(&resume_args(vol, header, key)),
    );
}

#[test]
fn images_encrypted_in_place_with_a_data_shift_open_in_cryptsetup() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-shift");
    let key = dir.file("key", b"encryption passphrase");
    for (sector, reduce, hotzone) in [("4096", "8M", "4M"), ("512", "16M", "2M")] {
        let what = format!("{sector}/{reduce}");
        let (vol, data) = image(&dir, "vol", 21, 40 * MIB);
        let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", reduce];
        args.extend(["--sector-size", sector, "--hotzone-size", hotzone]);
        args.extend_from_slice(PBKDF2);
        args.extend(["--key-file", p(&key), p(&vol), "-q"]);
        ok(&format!("{what}: rampart reencrypt --encrypt"), rampart(&args));
        let shift = if reduce == "8M" { 4 * MIB } else { 8 * MIB };
        let info = assert_encrypted(&what, &vol, shift as u64, sector.parse().unwrap());
        // The data keeps its size less the reduction; the device too.
        assert_eq!(std::fs::metadata(&vol).unwrap().len(), 40 * MIB as u64, "{what}");
        let kept = &data[..40 * MIB - 2 * shift];
        assert_plaintext(&what, &dir, &vol, None, &key, &info, kept);
        let out = ok("rampart dump", rampart(&["dump", "--json", p(&vol)]));
        let dump: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(dump["reencryption"].is_null(), "{what}: {dump}");
    }
}

#[test]
fn images_encrypted_with_a_detached_header_open_in_cryptsetup() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-detached");
    let key = dir.file("key", b"encryption passphrase");
    for (sector, resilience) in [("4096", "checksum"), ("512", "checksum"), ("4096", "journal")] {
        let what = format!("{sector}/{resilience}");
        let (vol, data) = image(&dir, "vol", 22, 24 * MIB);
        let header = dir.join("header");
        let _ = std::fs::remove_file(&header);
        let mut args = vec!["reencrypt", "--encrypt", "--header", p(&header)];
        args.extend(["--sector-size", sector, "--resilience", resilience]);
        args.extend(["--hotzone-size", "4M"]);
        args.extend_from_slice(PBKDF2);
        args.extend(["--key-file", p(&key), p(&vol), "-q"]);
        ok(&format!("{what}: rampart reencrypt --encrypt --header"), rampart(&args));
        let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
        assert_plaintext(&what, &dir, &vol, Some(&header), &key, &info, &data);
    }
}

/// `rampart reencrypt --encrypt --reduce-device-size R --header H` (or,
/// with `tool` "cryptsetup", cryptsetup's own) on `vol`, with `extra`
/// arguments.
fn encrypt_shift_detached(
    tool: &str,
    vol: &Path,
    header: &Path,
    key: &Path,
    (reduce, sector): (&str, &str),
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let _ = std::fs::remove_file(header);
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", reduce];
    args.extend(["--header", p(header), "--sector-size", sector]);
    args.extend_from_slice(PBKDF2);
    args.extend_from_slice(extra);
    args.extend(["--key-file", p(key), p(vol), "-q"]);
    if tool == "cryptsetup" {
        args.extend(["--type", "luks2", "--force-offline-reencrypt"]);
        cryptsetup(&args)
    } else {
        rampart_env(&args, env)
    }
}

/// `rampart reencrypt --resume-only --header`.
fn rampart_resume(
    vol: &Path,
    header: &Path,
    key: &Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let args = ["reencrypt", "--resume-only", "--header", p(header), "--key-file", p(key), p(vol)];
    rampart_env(&[&args[..], &["-q"]].concat(), env)
}

/// The reencryption metadata cryptsetup reads: the non-keyslot parts that
/// must be equal whichever tool initialised the run.
fn shift_layout(header: &Path) -> serde_json::Value {
    let out = ok(
        "cryptsetup luksDump --dump-json-metadata",
        cryptsetup(&["luksDump", "--dump-json-metadata", p(header)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reencrypt = json["keyslots"]
        .as_object()
        .unwrap()
        .values()
        .find(|k| k["type"] == "reencrypt")
        .cloned()
        .unwrap_or_default();
    serde_json::json!({
        "segments": json["segments"],
        "mode": reencrypt["mode"],
        "direction": reencrypt["direction"],
        "area_type": reencrypt["area"]["type"],
        "shift_size": reencrypt["area"]["shift_size"],
        "requirements": json["config"]["requirements"],
        "json_size": json["config"]["json_size"],
        "keyslots_size": json["config"]["keyslots_size"],
    })
}

#[test]
fn images_encrypted_with_a_detached_header_and_a_data_shift_open_in_cryptsetup() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-shift-detached");
    let key = dir.file("key", b"encryption passphrase");
    let header = dir.join("header");
    // 36 MiB: the last hotzone is shorter than the 8 MiB shift.
    for (sector, reduce, shift, len) in
        [("4096", "8M", 8 * MIB, 36 * MIB), ("512", "4M", 4 * MIB, 24 * MIB)]
    {
        let what = format!("{sector}/{reduce}");
        // The layout Rampart initialises is cryptsetup's.
        let (vol, data) = image(&dir, "vol", 31, len);
        let out = encrypt_shift_detached(
            "cryptsetup",
            &vol,
            &header,
            &key,
            (reduce, sector),
            &["--init-only"],
            &[],
        );
        ok(&format!("{what}: cryptsetup --init-only"), out);
        let theirs = shift_layout(&header);
        let out = encrypt_shift_detached(
            "rampart",
            &vol,
            &header,
            &key,
            (reduce, sector),
            &["--init-only"],
            &[],
        );
        ok(&format!("{what}: rampart --init-only"), out);
        let ours = shift_layout(&header);
        assert_eq!(ours, theirs, "{what}");
        assert_eq!(ours["area_type"], "datashift", "{what}: {ours}");
        assert_eq!(ours["direction"], "backward", "{what}: {ours}");
        assert_eq!(ours["shift_size"], shift.to_string(), "{what}: {ours}");
        assert_eq!(ours["segments"]["0"]["type"], "linear", "{what}: {ours}");
        assert_eq!(ours["segments"]["0"]["size"], len.to_string(), "{what}: {ours}");
        assert_eq!(std::fs::metadata(&header).unwrap().len(), shift as u64, "{what}");
        assert_same(&what, &std::fs::read(&vol).unwrap(), &data);
        // cryptsetup finishes the run Rampart initialised: the data is
        // encrypted where it was, at offset 0, whole (not shifted).
        ok(
            &format!("{what}: cryptsetup finishes"),
            cryptsetup(&resume_args(&vol, Some(&header), &key)),
        );
        let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
        assert_plaintext(&what, &dir, &vol, Some(&header), &key, &info, &data);

        // Rampart alone, and cryptsetup alone, leave the same plaintext.
        for tool in ["rampart", "cryptsetup"] {
            let (vol, data) = image(&dir, "vol", 32, len);
            let out = encrypt_shift_detached(tool, &vol, &header, &key, (reduce, sector), &[], &[]);
            ok(&format!("{what}: {tool} reencrypt --encrypt"), out);
            let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
            assert_eq!(std::fs::metadata(&vol).unwrap().len(), len as u64, "{what}");
            assert_plaintext(
                &format!("{what} {tool}"),
                &dir,
                &vol,
                Some(&header),
                &key,
                &info,
                &data,
            );
        }
        // cryptsetup initialises, Rampart runs.
        let (vol, data) = image(&dir, "vol", 33, len);
        let out = encrypt_shift_detached(
            "cryptsetup",
            &vol,
            &header,
            &key,
            (reduce, sector),
            &["--init-only"],
            &[],
        );
        ok(&format!("{what}: cryptsetup --init-only"), out);
        ok(&format!("{what}: rampart --resume-only"), rampart_resume(&vol, &header, &key, &[]));
        let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
        assert_plaintext(&format!("{what} resumed"), &dir, &vol, Some(&header), &key, &info, &data);
    }
}

#[test]
fn shifted_detached_encryptions_cross_resume_both_ways() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-shift-detached-resume");
    let key = dir.file("key", b"passphrase");
    let header = dir.join("header");
    for sector in ["4096", "512"] {
        // Rampart stopped after two hotzones: cryptsetup finishes. (After
        // one, cryptsetup 2.6 refuses to resume, "Device is too small":
        // it wants the plaintext left, a sector and the shift to fit.)
        let what = format!("{sector}: stopped");
        let (vol, data) = image(&dir, "vol", 34, 20 * MIB);
        let stop = [("RAMPART_REENCRYPT_STOP_AFTER", "2")];
        let out =
            encrypt_shift_detached("rampart", &vol, &header, &key, ("4M", sector), &[], &stop);
        ok(&what, out);
        assert!(!has_hotzone(&header), "{what}");
        assert_eq!(
            luks2_json(&header, 0)["segments"]["0"]["size"],
            serde_json::json!((12 * MIB).to_string()),
            "{what}"
        );
        ok(
            &format!("{what}: cryptsetup finishes"),
            cryptsetup(&resume_args(&vol, Some(&header), &key)),
        );
        let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
        assert_plaintext(&what, &dir, &vol, Some(&header), &key, &info, &data);

        // Rampart killed half-way through its second hotzone: Rampart
        // repairs it from its record, does two more and stops, cryptsetup
        // finishes.
        let what = format!("{sector}: crashed");
        let (vol, data) = image(&dir, "vol", 35, 20 * MIB);
        let crash = [("RAMPART_REENCRYPT_CRASH_AFTER", "1")];
        let out =
            encrypt_shift_detached("rampart", &vol, &header, &key, ("4M", sector), &[], &crash);
        assert_eq!(out.status.code(), Some(137), "{}", describe(&what, &out));
        assert!(has_hotzone(&header), "{what}");
        ok(&format!("{what}: rampart recovers"), rampart_resume(&vol, &header, &key, &stop));
        assert!(!has_hotzone(&header), "{what}");
        ok(
            &format!("{what}: cryptsetup finishes"),
            cryptsetup(&resume_args(&vol, Some(&header), &key)),
        );
        let info = assert_encrypted(&what, &header, 0, sector.parse().unwrap());
        assert_plaintext(&what, &dir, &vol, Some(&header), &key, &info, &data);
    }

    // cryptsetup interrupted part-way (SIGINT: it stops at a hotzone
    // boundary): Rampart finishes. 1 MiB hotzones over 200 MiB.
    let (vol, data) = image(&dir, "vol", 36, 200 * MIB);
    let _ = std::fs::remove_file(&header);
    let mut args = vec!["reencrypt", "--encrypt", "--type", "luks2", "--reduce-device-size", "1M"];
    args.extend(["--header", p(&header), "--sector-size", "4096"]);
    args.extend(["--force-offline-reencrypt", "-q"]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol)]);
    let mut child = Command::new(tool("cryptsetup"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = header_json_now(&header)
            .and_then(|j| j["segments"]["0"]["size"].as_str().and_then(|s| s.parse::<u64>().ok()));
        if done.is_some_and(|n| n <= 180 * MIB as u64) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "cryptsetup finished before it was interrupted"
        );
        assert!(Instant::now() < deadline, "cryptsetup made no progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = child.id().to_string();
    ok("kill -INT cryptsetup", run("kill", &["-INT", &pid]));
    child.wait().unwrap();
    assert!(!has_hotzone(&header), "cryptsetup left a hotzone after SIGINT");
    let segs = luks2_json(&header, 0)["segments"].clone();
    assert_eq!(segs["0"]["type"], "linear", "{segs}");
    ok("rampart reencrypt --resume-only", rampart_resume(&vol, &header, &key, &[]));
    let info = assert_encrypted("interrupted", &header, 0, 4096);
    assert_plaintext("interrupted", &dir, &vol, Some(&header), &key, &info, &data);
}

/// A detached-header LUKS2 volume made by cryptsetup holding `data`.
fn detached_volume(dir: &TempDir, sector: &str, key: &Path, data: &[u8]) -> (PathBuf, PathBuf) {
    let vol = dir.join("vol");
    let header = dir.join("header");
    let _ = std::fs::remove_file(&vol);
    let _ = std::fs::remove_file(&header);
    let vol = dir.sparse("vol", data.len() as u64);
    let header = dir.sparse("header", 16 << 20);
    let mut args = vec!["luksFormat", "-q", "--type", "luks2", "--header", p(&header)];
    args.extend(["--sector-size", sector]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(key), p(&vol)]);
    ok("cryptsetup luksFormat --header", cryptsetup(&args));
    let part = dir.file("part", data);
    ok(
        "rampart import",
        rampart(&["import", p(&vol), p(&part), "--header", p(&header), "--key-file", p(key)]),
    );
    (vol, header)
}

/// cryptsetup's view of a finished decryption: one linear segment, no
/// keyslots, digests or reencryption left.
fn assert_decrypted(what: &str, header: &Path) {
    let out = ok(
        &format!("{what}: cryptsetup luksDump --dump-json-metadata"),
        cryptsetup(&["luksDump", "--dump-json-metadata", p(header)]),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["segments"],
        serde_json::json!({"0": {"type": "linear", "offset": "0", "size": "dynamic"}}),
        "{what}: {json}"
    );
    assert_eq!(json["keyslots"], serde_json::json!({}), "{what}: {json}");
    assert_eq!(json["digests"], serde_json::json!({}), "{what}: {json}");
    assert!(json["config"].get("requirements").is_none(), "{what}: {json}");
}

#[test]
fn detached_header_volumes_are_decrypted_in_place() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("decrypt");
    let key = dir.file("key", b"passphrase");
    for (sector, resilience) in [("4096", "checksum"), ("512", "checksum"), ("512", "journal")] {
        let what = format!("{sector}/{resilience}");
        let data = random_bytes(23, 24 * MIB);
        let (vol, header) = detached_volume(&dir, sector, &key, &data);
        let mut args = vec!["reencrypt", "--decrypt", "--header", p(&header)];
        args.extend(["--resilience", resilience, "--hotzone-size", "4M"]);
        args.extend(["--key-file", p(&key), p(&vol), "-q"]);
        ok(&format!("{what}: rampart reencrypt --decrypt"), rampart(&args));
        assert_decrypted(&what, &header);
        assert_same(&what, &std::fs::read(&vol).unwrap(), &data);
    }
}

#[test]
fn cryptsetup_finishes_what_rampart_stopped_or_crashed_in() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-to-cryptsetup");
    let key = dir.file("key", b"passphrase");
    for hook in ["RAMPART_REENCRYPT_STOP_AFTER", "RAMPART_REENCRYPT_CRASH_AFTER"] {
        // Encryption with a data shift.
        for sector in ["4096", "512"] {
            let what = format!("shift/{sector}/{hook}");
            let (vol, data) = image(&dir, "vol", 24, 40 * MIB);
            let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "8M"];
            args.extend(["--sector-size", sector]);
            args.extend_from_slice(PBKDF2);
            args.extend(["--key-file", p(&key), p(&vol), "-q"]);
            let out = rampart_env(&args, &[(hook, "2")]);
            let status = if hook.ends_with("CRASH_AFTER") { 137 } else { 0 };
            assert_eq!(out.status.code(), Some(status), "{}", describe(&what, &out));
            let json = luks2_json(&vol, 0);
            assert_eq!(
                json["config"]["requirements"]["mandatory"],
                serde_json::json!(["online-reencrypt-v2"]),
                "{what}: {json}"
            );
            assert_eq!(has_hotzone(&vol), status == 137, "{what}: {json}");
            cryptsetup_finishes(&what, &vol, None, &key);
            let info = assert_encrypted(&what, &vol, 4 * MIB as u64, sector.parse().unwrap());
            assert_plaintext(&what, &dir, &vol, None, &key, &info, &data[..32 * MIB]);
        }
        // Encryption and decryption with a detached header.
        let what = format!("detached/{hook}");
        let (vol, data) = image(&dir, "vol", 25, 24 * MIB);
        let header = dir.join("header");
        let _ = std::fs::remove_file(&header);
        let mut args = vec!["reencrypt", "--encrypt", "--header", p(&header)];
        args.extend(["--hotzone-size", "4M", "--sector-size", "512"]);
        args.extend_from_slice(PBKDF2);
        args.extend(["--key-file", p(&key), p(&vol), "-q"]);
        let out = rampart_env(&args, &[(hook, "2")]);
        assert!(matches!(out.status.code(), Some(0 | 137)), "{}", describe(&what, &out));
        cryptsetup_finishes(&what, &vol, Some(&header), &key);
        let info = assert_encrypted(&what, &header, 0, 512);
        assert_plaintext(&what, &dir, &vol, Some(&header), &key, &info, &data);

        let mut args = vec!["reencrypt", "--decrypt", "--header", p(&header)];
        args.extend(["--hotzone-size", "4M", "--key-file", p(&key), p(&vol), "-q"]);
        let out = rampart_env(&args, &[(hook, "2")]);
        assert!(matches!(out.status.code(), Some(0 | 137)), "{}", describe(&what, &out));
        cryptsetup_finishes(&format!("{what} decrypt"), &vol, Some(&header), &key);
        assert_decrypted(&what, &header);
        assert_same(&what, &std::fs::read(&vol).unwrap(), &data);
    }
}

#[test]
fn rampart_finishes_what_cryptsetup_initialised() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-from-init");
    let key = dir.file("key", b"passphrase");
    for sector in ["4096", "512"] {
        let what = format!("shift/{sector}");
        let (vol, data) = image(&dir, "vol", 26, 40 * MIB);
        let mut init = vec!["reencrypt", "--encrypt", "--type", "luks2", "--init-only"];
        init.extend(["--reduce-device-size", "8M", "--sector-size", sector]);
        init.extend(["--force-offline-reencrypt", "-q"]);
        init.extend_from_slice(PBKDF2);
        init.extend(["--key-file", p(&key), p(&vol)]);
        ok(&format!("{what}: cryptsetup reencrypt --encrypt --init-only"), cryptsetup(&init));
        let out = ok("rampart dump", rampart(&["dump", p(&vol)]));
        let dump = text(&out.stdout);
        assert!(dump.contains("encrypt") && dump.contains("datashift"), "{dump}");
        ok(
            &format!("{what}: rampart reencrypt --resume-only"),
            rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key), "-q"]),
        );
        let info = assert_encrypted(&what, &vol, 4 * MIB as u64, sector.parse().unwrap());
        assert_plaintext(&what, &dir, &vol, None, &key, &info, &data[..32 * MIB]);
    }
    // A decryption cryptsetup initialised on a detached header.
    let data = random_bytes(27, 16 * MIB);
    let (vol, header) = detached_volume(&dir, "4096", &key, &data);
    let mut init = vec!["reencrypt", "--decrypt", "--init-only", "--header", p(&header)];
    init.extend(["--force-offline-reencrypt", "-q", "--key-file", p(&key), p(&vol)]);
    ok("cryptsetup reencrypt --decrypt --init-only", cryptsetup(&init));
    // The passphrase is tested as cryptsetup tests it during a decryption:
    // against the old key (the final side, plaintext, has none).
    let wrong = dir.file("wrong", b"not the passphrase");
    for (passphrase, code) in [(&key, 0), (&wrong, 2)] {
        let mut test = vec!["open", "--test-passphrase", "--header", p(&header)];
        test.extend(["--key-file", p(passphrase), p(&vol)]);
        assert_eq!(cryptsetup(&test).status.code(), Some(code), "cryptsetup --test-passphrase");
        let out =
            rampart(&["test-key", "--header", p(&header), p(&vol), "--key-file", p(passphrase)]);
        assert_eq!(out.status.code(), Some(code), "rampart test-key: {}", text(&out.stderr));
    }
    ok(
        "rampart reencrypt --resume-only (decrypt)",
        rampart(&[
            "reencrypt",
            "--resume-only",
            "--header",
            p(&header),
            p(&vol),
            "--key-file",
            p(&key),
            "-q",
        ]),
    );
    assert_decrypted("decrypt", &header);
    assert_same("decrypt", &std::fs::read(&vol).unwrap(), &data);
}

#[test]
fn rampart_finishes_what_a_killed_cryptsetup_left() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-from-kill");
    let key = dir.file("key", b"passphrase");

    // Encryption with a data shift: 1 MiB hotzones (the shift) over
    // 300 MiB, killed once some data is encrypted and much is not.
    let (vol, data) = image(&dir, "vol", 28, 302 * MIB);
    let mut args = vec!["reencrypt", "--encrypt", "--type", "luks2"];
    args.extend(["--reduce-device-size", "2M", "--sector-size", "4096"]);
    args.extend(["--force-offline-reencrypt", "-q"]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol)]);
    kill_cryptsetup_when("shift", &args, &vol, |json| {
        let segs: Vec<&serde_json::Value> = json["segments"]
            .as_object()
            .map(|s| s.values().collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|s| {
                !s["flags"].as_array().is_some_and(|f| {
                    f.iter().any(|f| f.as_str().unwrap_or("").starts_with("backup-"))
                })
            })
            .collect();
        let crypt: u64 = segs
            .iter()
            .filter(|s| s["type"] == "crypt")
            .filter_map(|s| s["size"].as_str()?.parse::<u64>().ok())
            .sum();
        crypt >= 16 * MIB as u64 && segs.iter().any(|s| s["type"] == "linear")
    });
    let state = {
        let out = ok("rampart dump --json", rampart(&["dump", "--json", p(&vol)]));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["reencryption"].clone()
    };
    assert_eq!(state["mode"], "encrypt", "{state}");
    assert_eq!(state["direction"], "backward", "{state}");
    ok(
        "shift: rampart reencrypt --resume-only",
        rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key), "--json"]),
    );
    let info = assert_encrypted("shift", &vol, MIB as u64, 4096);
    assert_plaintext("shift", &dir, &vol, None, &key, &info, &data[..300 * MIB]);

    // Decryption of a detached header, backward, 1 MiB hotzones.
    let data = random_bytes(29, 200 * MIB);
    let (vol, header) = detached_volume(&dir, "512", &key, &data);
    let mut args = vec!["reencrypt", "--decrypt", "--header", p(&header)];
    args.extend(["--hotzone-size", "1M", "--force-offline-reencrypt", "-q"]);
    args.extend(["--key-file", p(&key), p(&vol)]);
    kill_cryptsetup_when("decrypt", &args, &header, |json| {
        json["segments"]["0"]["size"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|n| n <= 180 * MIB as u64)
    });
    ok(
        "decrypt: rampart reencrypt --resume-only",
        rampart(&[
            "reencrypt",
            "--resume-only",
            "--header",
            p(&header),
            p(&vol),
            "--key-file",
            p(&key),
            "-q",
        ]),
    );
    assert_decrypted("decrypt", &header);
    assert_same("decrypt", &std::fs::read(&vol).unwrap(), &data);
}

#[test]
fn bad_encryption_requests_are_refused_and_change_nothing() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("encrypt-bad");
    let key = dir.file("key", b"passphrase");
    let (plain, _) = image(&dir, "plain", 30, 8 * MIB);
    let before = std::fs::read(&plain).unwrap();
    let refused = |what: &str, args: &[&str], needle: &str| {
        let out = rampart(args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(what, &out));
        let err = text(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: not one line: {err}");
        assert!(err.contains(needle), "{what}: {err}");
    };
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "1000000"];
    args.extend(["--key-file", p(&key), p(&plain)]);
    refused("reduce not a sector multiple", &args, "multiple");
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "2M"];
    args.extend(["--sector-size", "4096", "--resilience", "journal"]);
    args.extend(["--key-file", p(&key), p(&plain)]);
    refused("journal with a data shift", &args, "datashift");
    let args = vec!["reencrypt", "--encrypt", "--key-file", p(&key), p(&plain)];
    refused("no room for a header", &args, "--reduce-device-size");
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "8M"];
    args.extend(["--key-file", p(&key), p(&plain)]);
    refused("a device too small", &args, "at least");
    // With a detached header: the header file is SIZE bytes.
    let hdr = dir.join("shift-header");
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "1026K"];
    args.extend(["--header", p(&hdr), "--sector-size", "512"]);
    args.extend(["--key-file", p(&key), p(&plain)]);
    refused("detached shift not a 4096 multiple", &args, "multiple of 4096");
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "512K"];
    args.extend(["--header", p(&hdr), "--key-file", p(&key), p(&plain)]);
    refused("detached shift too small", &args, "from 1 MiB");
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "16M"];
    args.extend(["--header", p(&hdr), "--key-file", p(&key), p(&plain)]);
    refused("detached shift beyond the device", &args, "at least");
    assert!(!hdr.exists(), "a refused request wrote a header");
    assert!(std::fs::read(&plain).unwrap() == before, "a refused request changed the image");

    // Something already LUKS.
    let vol = dir.sparse("luks", 20 << 20);
    let mut format = vec!["luksFormat", "-q", "--type", "luks2"];
    format.extend_from_slice(PBKDF2);
    format.extend(["--key-file", p(&key), p(&vol)]);
    ok("cryptsetup luksFormat", cryptsetup(&format));
    let before = std::fs::read(&vol).unwrap();
    let mut args = vec!["reencrypt", "--encrypt", "--reduce-device-size", "2M"];
    args.extend(["--key-file", p(&key), p(&vol)]);
    refused("already LUKS", &args, "already holds a LUKS header");
    // Decryption of an attached header: cryptsetup 2.6 needs --header.
    let args = vec!["reencrypt", "--decrypt", "--key-file", p(&key), p(&vol)];
    refused("decrypt attached", &args, "--header");
    assert!(std::fs::read(&vol).unwrap() == before, "a refused request changed the volume");
}

#[test]
fn the_resilience_mode_changes_on_resume_as_cryptsetup_allows() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("encrypt-resilience");
    let key = dir.file("key", b"passphrase");
    // Detached-header encryption: checksum, then journal (Rampart), then
    // cryptsetup finishes, which checks the new reencryption digest.
    let (vol, data) = image(&dir, "vol", 31, 24 * MIB);
    let header = dir.join("header");
    let mut args = vec!["reencrypt", "--encrypt", "--header", p(&header)];
    args.extend(["--hotzone-size", "4M", "--sector-size", "4096"]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol), "-q"]);
    ok(
        "rampart reencrypt --encrypt (stopped)",
        rampart_env(&args, &[("RAMPART_REENCRYPT_STOP_AFTER", "1")]),
    );
    let mut args = vec!["reencrypt", "--resume-only", "--header", p(&header)];
    args.extend(["--resilience", "journal", "--hotzone-size", "4M"]);
    args.extend_from_slice(PBKDF2);
    args.extend(["--key-file", p(&key), p(&vol), "-q"]);
    ok(
        "rampart --resume-only --resilience journal",
        rampart_env(&args, &[("RAMPART_REENCRYPT_STOP_AFTER", "1")]),
    );
    let json = luks2_json(&header, 0);
    let area = json["keyslots"]
        .as_object()
        .unwrap()
        .values()
        .find(|k| k["type"] == "reencrypt")
        .map(|k| k["area"].clone())
        .unwrap();
    assert_eq!(area["type"], "journal", "{json}");
    cryptsetup_finishes("journal", &vol, Some(&header), &key);
    let info = assert_encrypted("journal", &header, 0, 4096);
    assert_plaintext("journal", &dir, &vol, Some(&header), &key, &info, &data);

    // A data shift keeps its resilience, as in cryptsetup.
    let (vol, data) = image(&dir, "vol", 32, 40 * MIB);
    let before_args = {
        let mut a = vec!["reencrypt", "--encrypt", "--reduce-device-size", "8M"];
        a.extend_from_slice(PBKDF2);
        a.extend(["--key-file", p(&key), p(&vol), "-q"]);
        a
    };
    ok(
        "rampart --encrypt (stopped)",
        rampart_env(&before_args, &[("RAMPART_REENCRYPT_STOP_AFTER", "1")]),
    );
    let snapshot = std::fs::read(&vol).unwrap();
    let args = vec![
        "reencrypt",
        "--resume-only",
        "--resilience",
        "checksum",
        "--key-file",
        p(&key),
        p(&vol),
    ];
    let out = rampart(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe("datashift change", &out));
    assert!(text(&out.stderr).contains("data shift"), "{}", describe("datashift change", &out));
    assert!(std::fs::read(&vol).unwrap() == snapshot, "a refused change altered the volume");
    ok(
        "rampart --resume-only",
        rampart(&["reencrypt", "--resume-only", "--key-file", p(&key), p(&vol), "-q"]),
    );
    let info = assert_encrypted("shift", &vol, 4 * MIB as u64, 4096);
    assert_plaintext("shift", &dir, &vol, None, &key, &info, &data[..32 * MIB]);
}
