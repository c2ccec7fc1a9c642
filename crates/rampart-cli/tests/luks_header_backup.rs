#![allow(clippy::unwrap_used)]
//! Header backup and restore, across Rampart and
//! cryptsetup. `rampart header backup`, then zeroing the header area, makes
//! the volume unopenable; `rampart header restore` brings it back with its
//! data intact; `cryptsetup luksHeaderRestore` accepts Rampart's backup and
//! Rampart accepts `cryptsetup luksHeaderBackup`'s; a backup of another
//! volume is refused without `--batch-mode`.

use crate::helpers::luks_support as support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::*;

fn zero_prefix(path: &Path, len: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&vec![0u8; usize::try_from(len).unwrap()], 0).unwrap();
    file.sync_all().unwrap();
}

fn export(dir: &TempDir, volume: &Path, key: &Path, len: usize) -> Vec<u8> {
    let out = dir.join("export.bin");
    let len = len.to_string();
    ok("rampart export", rampart(&["export", p(volume), p(&out), "--length", &len, "-d", p(key)]));
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    bytes
}

fn backup_restore(tag: &str, luks_type: &str) {
    require(&["cryptsetup"]);
    let dir = TempDir::new(tag);
    let volume = dir.join("volume.img");
    let key = dir.file("key", b"header backup test");
    let mut args = vec!["format", p(&volume), "--type", luks_type, "--size", "20M", "-d", p(&key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let data = random_bytes(5, 300_001);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&volume), p(&data_file), "-d", p(&key)]));
    let data_offset = rampart_json(&volume, None, None)["data_offset"].as_u64().unwrap();
    let original = std::fs::read(&volume).unwrap();

    // Rampart's backup: the header area, owner-only like cryptsetup's.
    let backup = dir.join("rampart.hdr");
    ok("rampart header backup", rampart(&["header", "backup", p(&volume), p(&backup)]));
    let backup_bytes = std::fs::read(&backup).unwrap();
    assert_eq!(backup_bytes.len() as u64, data_offset, "backup size");
    assert_same("backup contents", &backup_bytes, &original[..backup_bytes.len()]);
    let mode = std::fs::metadata(&backup).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "header backup is readable by others: {mode:o}");
    // Never overwrites an existing file.
    fails(
        "header backup onto an existing file",
        &rampart(&["header", "backup", p(&volume), p(&backup)]),
        None,
    );

    // cryptsetup's backup of the same header: the same leading bytes.
    let cs_backup = dir.join("cryptsetup.hdr");
    ok(
        "cryptsetup luksHeaderBackup",
        cryptsetup(&["luksHeaderBackup", "--header-backup-file", p(&cs_backup), p(&volume)]),
    );
    let cs_bytes = std::fs::read(&cs_backup).unwrap();
    let common = cs_bytes.len().min(backup_bytes.len());
    assert!(common as u64 >= data_offset.min(2_000_000), "cryptsetup backup is {common} bytes");
    assert_same("Rampart's and cryptsetup's backups", &backup_bytes[..common], &cs_bytes[..common]);

    // Zeroed header: nothing opens.
    zero_prefix(&volume, data_offset);
    let line = fails(
        "test-key on a zeroed header",
        &rampart(&["test-key", p(&volume), "-d", p(&key)]),
        None,
    );
    assert!(line.contains("LUKS"), "{line}");
    assert!(!cryptsetup_opens(&volume, None, &key));

    // rampart header restore brings it all back.
    ok("rampart header restore", rampart(&["header", "restore", p(&volume), p(&backup)]));
    assert_same("volume after restore", &std::fs::read(&volume).unwrap(), &original);
    ok("test-key after restore", rampart(&["test-key", p(&volume), "-d", p(&key)]));
    assert_same("data after restore", &export(&dir, &volume, &key, data.len()), &data);
    assert!(cryptsetup_opens(&volume, None, &key));

    // cryptsetup restores Rampart's backup.
    zero_prefix(&volume, data_offset);
    ok(
        "cryptsetup luksHeaderRestore of Rampart's backup",
        cryptsetup(&[
            "luksHeaderRestore",
            "--batch-mode",
            "--header-backup-file",
            p(&backup),
            p(&volume),
        ]),
    );
    ok("test-key after cryptsetup's restore", rampart(&["test-key", p(&volume), "-d", p(&key)]));
    assert_same("data after cryptsetup's restore", &export(&dir, &volume, &key, data.len()), &data);

    // Rampart restores cryptsetup's backup.
    zero_prefix(&volume, data_offset);
    ok(
        "rampart header restore of cryptsetup's backup",
        rampart(&["header", "restore", p(&volume), p(&cs_backup)]),
    );
    ok(
        "test-key after restoring cryptsetup's backup",
        rampart(&["test-key", p(&volume), "-d", p(&key)]),
    );
    assert_same(
        "data after restoring cryptsetup's backup",
        &export(&dir, &volume, &key, data.len()),
        &data,
    );
    assert!(cryptsetup_opens(&volume, None, &key));

    // Another volume's backup: refused without --batch-mode, volume unchanged.
    let other = dir.join("other.img");
    let other_key = dir.file("other-key", b"other volume");
    let mut args =
        vec!["format", p(&other), "--type", luks_type, "--size", "20M", "-d", p(&other_key)];
    args.extend(PBKDF2);
    ok("rampart format", rampart(&args));
    let other_backup = dir.join("other.hdr");
    ok("rampart header backup", rampart(&["header", "backup", p(&other), p(&other_backup)]));
    let before = std::fs::read(&volume).unwrap();
    let line = fails(
        "restore of another volume's header",
        &rampart(&["header", "restore", p(&volume), p(&other_backup)]),
        Some(2),
    );
    assert!(line.contains("--batch-mode"), "{line}");
    assert_same("volume after a refused restore", &std::fs::read(&volume).unwrap(), &before);

    // Not a backup at all: refused, volume unchanged.
    let junk = dir.file("junk.hdr", &random_bytes(9, 1 << 20));
    fails(
        "restore of random bytes",
        &rampart(&["header", "restore", p(&volume), p(&junk)]),
        Some(2),
    );
    let empty = dir.file("empty.hdr", b"");
    fails(
        "restore of an empty file",
        &rampart(&["header", "restore", p(&volume), p(&empty)]),
        Some(2),
    );
    let short = dir.file("short.hdr", &backup_bytes[..100_000]);
    fails(
        "restore of a truncated backup",
        &rampart(&["header", "restore", p(&volume), p(&short)]),
        None,
    );
    assert_same("volume after refused restores", &std::fs::read(&volume).unwrap(), &before);

    // With --batch-mode it is replaced: the other volume's key now opens it.
    ok(
        "restore --batch-mode",
        rampart(&["header", "restore", p(&volume), p(&other_backup), "--batch-mode"]),
    );
    ok("test-key with the other key", rampart(&["test-key", p(&volume), "-d", p(&other_key)]));
    fails_no_key("test-key with the old key", &rampart(&["test-key", p(&volume), "-d", p(&key)]));
}

#[test]
fn header_backup_restore_luks2() {
    backup_restore("hdr-luks2", "luks2");
}

#[test]
fn header_backup_restore_luks1() {
    backup_restore("hdr-luks1", "luks1");
}

/// A detached header: backup and restore act on the header file.
#[test]
fn header_backup_restore_detached() {
    require(&["cryptsetup"]);
    let dir = TempDir::new("hdr-detached");
    let data = dir.sparse("data.img", 4 << 20);
    let header = dir.join("header.img");
    let key = dir.file("key", b"detached header");
    let mut args = vec!["luksFormat", "--batch-mode", "--type", "luks2", "--header", p(&header)];
    args.extend(PBKDF2);
    args.extend(["--key-file", p(&key), p(&data)]);
    ok("cryptsetup luksFormat", cryptsetup(&args));
    let plain = random_bytes(11, 1 << 20);
    let plain_file = dir.file("plain.bin", &plain);
    ok(
        "rampart import",
        rampart(&["import", p(&data), "--header", p(&header), p(&plain_file), "-d", p(&key)]),
    );
    let backup = dir.join("backup.hdr");
    ok(
        "rampart header backup --header",
        rampart(&["header", "backup", p(&data), "--header", p(&header), p(&backup)]),
    );
    let header_len = std::fs::metadata(&header).unwrap().len();
    assert_eq!(std::fs::metadata(&backup).unwrap().len(), header_len);
    let data_before = std::fs::read(&data).unwrap();
    zero_prefix(&header, header_len);
    fails(
        "test-key with a zeroed header",
        &rampart(&["test-key", p(&data), "--header", p(&header), "-d", p(&key)]),
        None,
    );
    ok(
        "rampart header restore --header",
        rampart(&["header", "restore", p(&data), "--header", p(&header), p(&backup)]),
    );
    assert_same("data device untouched", &std::fs::read(&data).unwrap(), &data_before);
    assert!(cryptsetup_opens(&data, Some(&header), &key));
    let out = dir.join("out.bin");
    ok(
        "rampart export",
        rampart(&["export", p(&data), "--header", p(&header), p(&out), "-d", p(&key)]),
    );
    assert_same("data after restore", &std::fs::read(&out).unwrap()[..plain.len()], &plain);
}
