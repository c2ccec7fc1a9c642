//! A header backup (`rampart_volume::backup_header`): the whole header
//! area, read-only and owner-only, never over an existing file, and no
//! backup of a header its device is too small to hold.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rampart_crypto::HashAlg;
use rampart_luks::{FormatOptions, Luks, MemoryIo};
use rampart_test_support::TempDir;
use rampart_volume::{backup_header, BackupError, HeaderBackup, VolumeError};

const MIB: usize = 1 << 20;

fn header(len: usize) -> (MemoryIo, Luks) {
    let io = MemoryIo::new(len);
    let opts = FormatOptions {
        pbkdf: rampart_test_support::fast_pbkdf2(HashAlg::Sha256),
        keyslots_size: Some(1 << 20),
        data_offset: Some(2 << 20),
        ..FormatOptions::default()
    };
    let (luks, _) = Luks::format(&io, &opts, b"pass").unwrap();
    (io, luks)
}

/// A 4 MiB header and its backup in `dir`.
fn backed_up(dir: &TempDir) -> (MemoryIo, Luks, std::path::PathBuf) {
    let (io, luks) = header(4 * MIB);
    let file = dir.path().join("vol.backup");
    backup_header(&io, &luks, Path::new("/dev/vol"), &file).unwrap();
    (io, luks, file)
}

#[test]
fn a_backup_holds_the_header_area_read_only_and_never_overwrites() {
    let dir = TempDir::new("header-backup");
    let (io, luks, file) = backed_up(&dir);
    let backup = std::fs::read(&file).unwrap();
    assert_eq!(backup.len() as u64, luks.header_bytes());
    let (restored, _) = Luks::load(&MemoryIo::from_vec(backup)).unwrap();
    assert_eq!(restored.uuid(), luks.uuid());
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o400);

    match backup_header(&io, &luks, Path::new("/dev/vol"), &file) {
        Err(BackupError::Volume(error @ VolumeError::Io { .. })) => {
            assert_eq!(error.to_string(), format!("cannot create {}", file.display()));
        }
        other => panic!("an existing backup was overwritten: {other:?}"),
    }
}

#[test]
fn a_header_larger_than_its_device_is_not_backed_up() {
    let dir = TempDir::new("header-backup-short");
    let (io, luks) = header(4 * MIB);
    let short = MemoryIo::new(MIB);
    let file = dir.path().join("vol.backup");
    match backup_header(&short, &luks, Path::new("/dev/vol"), &file) {
        Err(error @ BackupError::TooLarge { .. }) => assert_eq!(
            error.to_string(),
            format!(
                "the header ({} bytes) is larger than /dev/vol ({MIB} bytes)",
                luks.header_bytes()
            )
        ),
        other => panic!("a short device was backed up: {other:?}"),
    }
    assert!(!file.exists());
    drop(io);
}

#[test]
fn a_backup_restores_over_a_damaged_header_and_a_bad_one_is_refused() {
    let dir = TempDir::new("header-restore");
    let (_, luks, file) = backed_up(&dir);
    let backup = HeaderBackup::read(&file).unwrap();
    assert_eq!(backup.uuid(), luks.uuid());

    let damaged = MemoryIo::from_vec(vec![0; 4 * MIB]);
    backup.restore(&damaged, Path::new("/dev/vol")).unwrap();
    let (restored, _) = Luks::load(&damaged).unwrap();
    assert_eq!(restored.uuid(), luks.uuid());

    match backup.restore(&MemoryIo::new(MIB), Path::new("/dev/small")) {
        Err(error @ BackupError::BackupTooLarge { .. }) => assert_eq!(
            error.to_string(),
            format!("the header backup ({} bytes) is larger than /dev/small", luks.header_bytes())
        ),
        other => panic!("a backup larger than its target was restored: {other:?}"),
    }

    let garbage = dir.file("garbage.backup", &[7; 8192]);
    match HeaderBackup::read(&garbage) {
        Err(BackupError::Refused(message)) => assert!(
            message.starts_with(&format!("{} is not a valid header backup: ", garbage.display())),
            "{message}"
        ),
        other => panic!("garbage read as a backup: {other:?}"),
    }
}
