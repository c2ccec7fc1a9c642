#![allow(clippy::unwrap_used)]
//! `rampart clone` and `rampart wipe` against the real cryptsetup and
//! pyca/cryptography: a clone opens in cryptsetup with its own passphrase,
//! carries a new volume key and UUID, and decrypts (with the key cryptsetup
//! prints) to the source's plaintext, whether written to a file or to a
//! pipe, from LUKS2 and LUKS1; a wiped volume reads as zeros while its
//! ciphertext stays random-looking; a header wipe leaves no LUKS magic and
//! none of the old keyslot material; a volume being served is refused; a
//! volume with integrity clones in place and wipes to zeros.

use crate::helpers::luks_support as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const MIB: usize = 1 << 20;

fn fmt(dir: &TempDir, name: &str, luks: &str, key: &Path, size: &str) -> PathBuf {
    let vol = dir.join(name);
    let mut args =
        vec!["format", p(&vol), "--size", size, "--type", luks, "--key-file", p(key), "-q"];
    args.extend_from_slice(PBKDF2);
    ok("rampart format", rampart(&args));
    vol
}

/// The plaintext of `vol` decrypted by pyca/cryptography with the volume
/// key cryptsetup prints for `key`.
fn plaintext_by_cryptsetup_key(dir: &TempDir, vol: &Path, key: &Path, len: usize) -> Vec<u8> {
    let volume_key = cryptsetup_volume_key(vol, key);
    let dump = rampart_json(vol, None, None);
    let seg = segment_info(&dump, vol);
    python_decrypt(dir, vol, &seg, &volume_key, len)
}

#[test]
fn clones_open_in_cryptsetup_under_a_new_key() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("clone");
    let key = dir.file("key", b"source passphrase");
    let new_key = dir.file("new", b"clone passphrase");
    let data = random_bytes(7, 12 * MIB);
    for (luks, sector) in [("luks2", "4096"), ("luks2", "512"), ("luks1", "512")] {
        let src = dir.join("src");
        let mut args =
            vec!["format", p(&src), "--size", "32M", "--type", luks, "--key-file", p(&key), "-q"];
        args.extend_from_slice(PBKDF2);
        if luks == "luks2" {
            args.extend(["--sector-size", sector]);
        }
        let _ = std::fs::remove_file(&src);
        ok("rampart format", rampart(&args));
        // The header takes room: import what fits.
        let offset = rampart_json(&src, None, None)["data_offset"].as_u64().unwrap() as usize;
        let len = (32 * MIB - offset).min(data.len());
        let part = dir.file("part", &data[..len]);
        ok("rampart import", rampart(&["import", p(&src), p(&part), "--key-file", p(&key)]));

        // To a file, with a new passphrase.
        let dst = dir.join("dst");
        let _ = std::fs::remove_file(&dst);
        let mut args =
            vec!["clone", p(&src), p(&dst), "--key-file", p(&key), "--new-key-file", p(&new_key)];
        args.extend_from_slice(PBKDF2);
        ok("rampart clone", rampart(&args));
        ok(
            "cryptsetup opens the clone with the new passphrase",
            cryptsetup(&["open", "--test-passphrase", "--key-file", p(&new_key), p(&dst)]),
        );
        assert!(
            !cryptsetup_opens(&dst, None, &key),
            "{luks}/{sector}: the source passphrase opens the clone"
        );
        let (src_key, dst_key) =
            (cryptsetup_volume_key(&src, &key), cryptsetup_volume_key(&dst, &new_key));
        assert_ne!(src_key, dst_key, "{luks}/{sector}: the clone shares the volume key");
        let src_uuid = text(&ok("uuid", rampart(&["uuid", p(&src)])).stdout);
        let dst_uuid = text(&ok("uuid", rampart(&["uuid", p(&dst)])).stdout);
        assert_ne!(src_uuid, dst_uuid);
        let dump = cryptsetup_dump(&dst);
        assert!(dump.contains(if luks == "luks1" {
            "Version:       \t1"
        } else {
            "Version:       \t2"
        }));
        let plain = plaintext_by_cryptsetup_key(&dir, &dst, &new_key, len);
        assert_same(&format!("{luks}/{sector}: clone plaintext"), &plain, &data[..len]);

        // To a pipe, keeping the source passphrase.
        let mut args = vec!["clone", p(&src), "-", "--key-file", p(&key)];
        args.extend_from_slice(PBKDF2);
        let out = ok("rampart clone to standard output", rampart(&args));
        let piped = dir.file("piped", &out.stdout);
        assert_eq!(out.stdout.len() as u64, std::fs::metadata(&src).unwrap().len());
        let plain = plaintext_by_cryptsetup_key(&dir, &piped, &key, len);
        assert_same(&format!("{luks}/{sector}: piped clone plaintext"), &plain, &data[..len]);
        assert_ne!(cryptsetup_volume_key(&piped, &key), src_key);
    }
}

#[test]
fn clone_refuses_its_own_source_and_a_full_file_without_asking() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("clone-refuse");
    let key = dir.file("key", b"source passphrase");
    let src = fmt(&dir, "src", "luks2", &key, "20M");
    let out = rampart(&["clone", p(&src), p(&src), "--key-file", p(&key)]);
    let err = fails("clone onto itself", &out, Some(2));
    assert!(err.contains("DST is SRC"), "{err}");
    let other = dir.file("other", b"precious bytes");
    let out = rampart(&["clone", p(&src), p(&other), "--key-file", p(&key)]);
    let err = fails("clone over a non-empty file", &out, Some(2));
    assert!(err.contains("--batch-mode"), "{err}");
    assert_eq!(std::fs::read(&other).unwrap(), b"precious bytes");
    let wrong = dir.file("wrong", b"wrong");
    let out = rampart(&["clone", p(&src), p(&dir.join("new")), "--key-file", p(&wrong)]);
    fails_no_key("clone with a wrong passphrase", &out);
}

#[test]
fn wipe_zeroes_the_plaintext_and_leaves_noise_on_disk() {
    require(&["cryptsetup", "python3"]);
    let dir = TempDir::new("wipe");
    let key = dir.file("key", b"wipe passphrase");
    let vol = fmt(&dir, "vol", "luks2", &key, "24M");
    let data = random_bytes(3, 8 * MIB);
    let input = dir.file("data", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&input), "--key-file", p(&key)]));
    let header_before = std::fs::read(&vol).unwrap()[..4096].to_vec();
    ok("rampart wipe", rampart(&["wipe", p(&vol), "--key-file", p(&key), "-q"]));
    let out = ok("rampart export", rampart(&["export", p(&vol), "-", "--key-file", p(&key)]));
    assert!(out.stdout.iter().all(|&b| b == 0), "the plaintext is not all zeros");
    assert_eq!(out.stdout.len(), 8 * MIB);
    let plain = plaintext_by_cryptsetup_key(&dir, &vol, &key, 8 * MIB);
    assert!(plain.iter().all(|&b| b == 0), "cryptsetup's key does not read zeros");
    let image = std::fs::read(&vol).unwrap();
    assert_eq!(&image[..4096], &header_before[..], "the header changed");
    let offset = cryptsetup_data_offset(&cryptsetup_dump(&vol)) as usize;
    let zero_blocks = image[offset..].chunks(512).filter(|c| c.iter().all(|&b| b == 0)).count();
    assert_eq!(zero_blocks, 0, "ciphertext sectors of zeros");
    ok(
        "cryptsetup still opens the wiped volume",
        cryptsetup(&["open", "--test-passphrase", "--key-file", p(&key), p(&vol)]),
    );

    // format --wipe: zeros from the start.
    let fresh = dir.join("fresh");
    let mut args =
        vec!["format", p(&fresh), "--size", "20M", "--key-file", p(&key), "-q", "--wipe"];
    args.extend_from_slice(PBKDF2);
    ok("rampart format --wipe", rampart(&args));
    let out = ok("rampart export", rampart(&["export", p(&fresh), "-", "--key-file", p(&key)]));
    assert!(!out.stdout.is_empty() && out.stdout.iter().all(|&b| b == 0));
}

#[test]
fn header_wipe_leaves_nothing_to_open() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("wipe-header");
    let key = dir.file("key", b"wipe passphrase");
    for luks in ["luks2", "luks1"] {
        let vol = fmt(&dir, luks, luks, &key, "20M");
        let second = dir.file("second", b"second passphrase");
        let mut args =
            vec!["add-key", p(&vol), "--key-file", p(&key), "--new-key-file", p(&second)];
        args.extend_from_slice(PBKDF2);
        ok("rampart add-key", rampart(&args));
        let before = std::fs::read(&vol).unwrap();
        let offset = cryptsetup_data_offset(&cryptsetup_dump(&vol)) as usize;
        let data_before = before[offset..].to_vec();
        ok("rampart wipe --header", rampart(&["wipe", "--header", p(&vol), "-q"]));
        let after = std::fs::read(&vol).unwrap();
        assert_eq!(&after[offset..], &data_before[..], "{luks}: data outside the header changed");
        let head = &after[..offset];
        for magic in [&b"LUKS\xba\xbe"[..], &b"SKUL\xba\xbe"[..]] {
            assert!(!head.windows(6).any(|w| w == magic), "{luks}: a LUKS magic survived");
        }
        // No 512-byte block of the old header area (keyslot material
        // included) is left, and no block of zeros.
        let old: std::collections::HashSet<&[u8]> =
            before[..offset].chunks(512).filter(|c| c.iter().any(|&b| b != 0)).collect();
        assert!(head.chunks(512).all(|c| !old.contains(c)), "{luks}: old header blocks survived");
        assert!(head.chunks(512).all(|c| c.iter().any(|&b| b != 0)), "{luks}: zero blocks");
        let dump = cryptsetup(&["luksDump", p(&vol)]);
        assert!(!dump.status.success(), "{luks}: cryptsetup still reads a header");
        let out = rampart(&["test-key", p(&vol), "--key-file", p(&key)]);
        assert!(!out.status.success());
    }
}

#[test]
fn wiping_a_served_volume_is_refused() {
    require(&["nbdinfo"]);
    let dir = TempDir::new("wipe-served");
    let key = dir.file("key", b"wipe passphrase");
    let vol = fmt(&dir, "vol", "luks2", &key, "20M");
    let socket = dir.join("s.sock");
    let mut server = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["serve", p(&vol), "--key-file", p(&key), "--socket", p(&socket)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !socket.exists() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(socket.exists(), "serve did not start");
    let before = std::fs::read(&vol).unwrap();
    for (what, args) in [
        ("wipe", vec!["wipe", p(&vol), "--key-file", p(&key), "-q"]),
        ("wipe --header", vec!["wipe", "--header", p(&vol), "-q"]),
    ] {
        let out = rampart(&args);
        assert!(!out.status.success(), "{what} of a served volume succeeded");
        assert!(
            text(&out.stderr).contains("in use")
                || text(&out.stderr).contains("writing the volume"),
            "{what}: {}",
            text(&out.stderr)
        );
    }
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(std::fs::read(&vol).unwrap() == before, "a refused wipe changed the volume");
}

#[test]
fn volumes_with_integrity_clone_in_place_and_wipe_to_zeros() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("integrity-clone");
    let key = dir.file("key", b"integrity passphrase");
    let source = dir.join("source");
    let mut args = vec!["format", p(&source), "--size", "40M", "--key-file", p(&key), "-q"];
    args.extend_from_slice(PBKDF2);
    args.extend(["--integrity", "hmac-sha256", "--sector-size", "4096"]);
    ok("rampart format --integrity", rampart(&args));
    let data = random_bytes(5, 6 * MIB);
    let input = dir.file("data", &data);
    ok("rampart import", rampart(&["import", p(&source), p(&input), "--key-file", p(&key)]));

    // A stream has no room for the tags between the data.
    let out = rampart(&["clone", p(&source), "-", "--key-file", p(&key)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cloned in place"), "{}", text(&out.stderr));

    let clone = dir.join("clone");
    let mut args = vec!["clone", p(&source), p(&clone), "--key-file", p(&key), "-q"];
    args.extend_from_slice(PBKDF2);
    ok("rampart clone", rampart(&args));
    assert_ne!(cryptsetup_volume_key(&clone, &key), cryptsetup_volume_key(&source, &key));
    let dump = text(&ok("cryptsetup luksDump", cryptsetup(&["luksDump", p(&clone)])).stdout);
    assert!(dump.contains("integrity: hmac(sha256)"), "{dump}");
    let whole = ok("rampart export", rampart(&["export", p(&clone), "-", "--key-file", p(&key)]));
    assert!(whole.stdout[..data.len()] == data[..], "the clone's plaintext differs");
    assert!(whole.stdout[data.len()..].iter().all(|&b| b == 0), "the clone's tail is not zeros");

    ok("rampart wipe", rampart(&["wipe", p(&clone), "--key-file", p(&key), "-q"]));
    let wiped = ok("rampart export", rampart(&["export", p(&clone), "-", "--key-file", p(&key)]));
    assert_eq!(wiped.stdout.len(), whole.stdout.len());
    assert!(wiped.stdout.iter().all(|&b| b == 0), "the wiped clone is not all zeros");
}
