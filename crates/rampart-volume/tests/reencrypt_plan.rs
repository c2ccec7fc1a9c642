//! The rules a reencryption's start and resume are planned by
//! (`rampart_volume::reencrypt_plan`): each refusal, and the ranges of
//! `--reduce-device-size` with an attached and a detached header.

use std::path::Path;

use rampart_luks::{
    DataCipher, HashAlg, ReencryptDirection, ReencryptMode, ReencryptSide, ReencryptState,
    Resilience, Segment,
};
use rampart_volume::reencrypt_plan::{
    checksum_block, NewKey, PlanError, ReencryptSettings, ResilienceMode,
};

const MIB: u64 = 1 << 20;

fn data() -> &'static Path {
    Path::new("vol.img")
}

fn refused<T: std::fmt::Debug>(result: Result<T, PlanError>, wanted: &str) {
    match result {
        Err(PlanError(message)) => assert_eq!(message, wanted),
        Ok(planned) => panic!("planned {planned:?}, wanted the refusal '{wanted}'"),
    }
}

fn segment(cipher: DataCipher, key_bytes: usize, sector_size: u32) -> Segment {
    Segment { offset: 16 * MIB, size: None, cipher, key_bytes, sector_size, iv_tweak: 0 }
}

fn side(sector_size: u32, offset: u64) -> ReencryptSide {
    ReencryptSide {
        cipher: Some(DataCipher::AesXtsPlain64),
        key_bytes: 64,
        sector_size,
        offset,
        iv_tweak: 0,
    }
}

fn state(mode: ReencryptMode, resilience: Resilience) -> ReencryptState {
    ReencryptState {
        mode,
        direction: ReencryptDirection::Forward,
        resilience,
        keyslot: 2,
        area_offset: 0,
        area_size: 0,
        old: side(512, 16 * MIB),
        new: side(4096, 16 * MIB),
        done: 0,
        complete: false,
        hotzone: None,
        fixed_size: None,
        old_keyslots: vec![0],
        new_keyslots: vec![1],
        moved: None,
        shift: 0,
        previous_size: None,
        layout: Vec::new(),
    }
}

fn checksum(hash: HashAlg, block_size: u32) -> Resilience {
    Resilience::Checksum { hash, block_size }
}

fn datashift() -> Resilience {
    Resilience::Datashift { kind: "datashift".into(), shift: MIB, checksum: None }
}

#[test]
fn checksum_blocks_are_the_device_block_when_the_data_is_made_of_them() {
    assert_eq!(checksum_block(64 * MIB, 512), 4096);
    assert_eq!(checksum_block(64 * MIB, 4096), 4096);
    assert_eq!(checksum_block(64 * MIB + 512, 512), 512);
    assert_eq!(checksum_block(64 * MIB + 2048, 2048), 2048);
}

#[test]
fn resilience_defaults_to_sha256_checksums_and_refuses_what_does_not_fit() {
    let settings = ReencryptSettings::default();
    assert_eq!(settings.resilience(4096), Ok(checksum(HashAlg::Sha256, 4096)));
    let hashed = ReencryptSettings {
        resilience_hash: Some(HashAlg::Sha512),
        ..ReencryptSettings::default()
    };
    assert_eq!(hashed.resilience(512), Ok(checksum(HashAlg::Sha512, 512)));
    for (mode, planned) in
        [(ResilienceMode::Journal, Resilience::Journal), (ResilienceMode::None, Resilience::None)]
    {
        let settings = ReencryptSettings { resilience: Some(mode), ..ReencryptSettings::default() };
        assert_eq!(settings.resilience(4096), Ok(planned));
        let hashed = ReencryptSettings { resilience_hash: Some(HashAlg::Sha1), ..settings };
        refused(hashed.resilience(4096), "--resilience-hash goes with --resilience checksum");
    }
    let shift = ReencryptSettings {
        resilience: Some(ResilienceMode::Datashift),
        ..ReencryptSettings::default()
    };
    refused(
        shift.resilience(4096),
        "unknown --resilience 'datashift' (expected checksum, journal or none)",
    );
}

#[test]
fn a_new_key_keeps_the_volume_shape_unless_told_and_takes_only_valid_sizes() {
    let current = segment(DataCipher::AesXtsPlain64, 32, 512);
    let settings = ReencryptSettings::default();
    assert_eq!(
        settings.new_key(Some(&current)),
        Ok(NewKey { cipher: DataCipher::AesXtsPlain64, key_bits: 256, sector_size: 512 })
    );
    assert_eq!(
        settings.new_key(None),
        Ok(NewKey { cipher: DataCipher::AesXtsPlain64, key_bits: 512, sector_size: 4096 })
    );
    let cbc = ReencryptSettings {
        cipher: Some("aes-cbc-essiv:sha256".into()),
        ..ReencryptSettings::default()
    };
    let planned = cbc.new_key(Some(&current)).unwrap();
    assert_eq!((planned.cipher, planned.key_bits), (DataCipher::AesCbcEssivSha256, 256));
    let unknown =
        ReencryptSettings { cipher: Some("serpent".into()), ..ReencryptSettings::default() };
    let message = unknown.new_key(None).unwrap_err().0;
    assert_eq!(message, DataCipher::from_spec("serpent").unwrap_err().to_string());
    let bad_size = ReencryptSettings { key_bits: Some(384), ..ReencryptSettings::default() };
    refused(
        bad_size.new_key(Some(&current)),
        "--key-size 384 is not valid for aes-xts-plain64 (use [256, 512])",
    );
    let bad_cbc = ReencryptSettings { key_bits: Some(512), ..cbc };
    refused(
        bad_cbc.new_key(None),
        "--key-size 512 is not valid for aes-cbc-essiv:sha256 (use [128, 256])",
    );
    for sector in [300, 256, 8192] {
        let settings =
            ReencryptSettings { sector_size: Some(sector), ..ReencryptSettings::default() };
        refused(
            settings.new_key(Some(&current)),
            &format!("--sector-size {sector} must be 512, 1024, 2048 or 4096"),
        );
    }
}

#[test]
fn a_reencryption_needs_whole_sectors_and_hashes_device_blocks() {
    let current = segment(DataCipher::AesXtsPlain64, 64, 512);
    let settings = ReencryptSettings::default();
    let key = settings.new_key(Some(&current)).unwrap();
    let planned = settings.reencrypt_start(&current, key, 80 * MIB).unwrap();
    assert_eq!(planned.resilience, checksum(HashAlg::Sha256, 4096));
    let planned = settings.reencrypt_start(&current, key, 80 * MIB + 512).unwrap();
    assert_eq!(planned.resilience, checksum(HashAlg::Sha256, 512));
    let larger = ReencryptSettings { sector_size: Some(4096), ..ReencryptSettings::default() };
    let key = larger.new_key(Some(&current)).unwrap();
    refused(
        larger.reencrypt_start(&current, key, 80 * MIB + 512),
        &format!(
            "the data area ({} bytes) is not a multiple of the 4096-byte sector size",
            64 * MIB + 512
        ),
    );
    let fixed = Segment { size: Some(64 * MIB), ..current };
    assert!(larger.reencrypt_start(&fixed, key, 80 * MIB + 512).is_ok());
}

#[test]
fn resuming_takes_no_start_options() {
    let recorded = state(ReencryptMode::Reencrypt, checksum(HashAlg::Sha256, 4096));
    let wanted = "vol.img is already being re-encrypted (checksum resilience); resume it without --cipher, --key-size, --sector-size, --new-key-file or --reduce-device-size";
    assert!(ReencryptSettings::default().check_resume(data(), &recorded).is_ok());
    for settings in [
        ReencryptSettings {
            cipher: Some("aes-xts-plain64".into()),
            ..ReencryptSettings::default()
        },
        ReencryptSettings { key_bits: Some(256), ..ReencryptSettings::default() },
        ReencryptSettings { sector_size: Some(512), ..ReencryptSettings::default() },
        ReencryptSettings { new_passphrase: true, ..ReencryptSettings::default() },
        ReencryptSettings { reduce_device_size: Some(MIB), ..ReencryptSettings::default() },
    ] {
        refused(settings.check_resume(data(), &recorded), wanted);
    }
}

#[test]
fn init_only_refuses_a_run_in_progress_and_resume_only_a_start() {
    let recorded = state(ReencryptMode::Reencrypt, checksum(HashAlg::Sha256, 4096));
    let init_only = ReencryptSettings { init_only: true, ..ReencryptSettings::default() };
    refused(
        init_only.check_resume(data(), &recorded),
        "the reencryption of vol.img is already initialised",
    );
    assert!(init_only.check_start(data(), false).is_ok());
    let resume_only = ReencryptSettings { resume_only: true, ..ReencryptSettings::default() };
    assert!(resume_only.check_resume(data(), &recorded).is_ok());
    refused(
        resume_only.check_start(data(), false),
        "vol.img is not being re-encrypted: nothing to resume",
    );
    refused(
        resume_only.check_start(data(), true),
        "vol.img is not being encrypted: nothing to resume",
    );
    assert!(ReencryptSettings::default().check_start(data(), true).is_ok());
}

#[test]
fn decryption_takes_no_new_key_options() {
    let wanted = "--decrypt takes no --cipher, --key-size, --sector-size or --new-key-file";
    assert!(ReencryptSettings::default().check_decrypt().is_ok());
    let current = segment(DataCipher::AesXtsPlain64, 64, 512);
    for settings in [
        ReencryptSettings {
            cipher: Some("aes-xts-plain64".into()),
            ..ReencryptSettings::default()
        },
        ReencryptSettings { key_bits: Some(256), ..ReencryptSettings::default() },
        ReencryptSettings { sector_size: Some(512), ..ReencryptSettings::default() },
        ReencryptSettings { new_passphrase: true, ..ReencryptSettings::default() },
    ] {
        refused(settings.check_decrypt(), wanted);
    }
    let planned =
        ReencryptSettings::default().decrypt_resilience(&current, 16 * MIB + 512).unwrap();
    assert_eq!(planned, checksum(HashAlg::Sha256, 512));
    let moved = ReencryptSettings::default().moved_decrypt_resilience().unwrap();
    assert_eq!(moved, checksum(HashAlg::Sha256, 4096));
}

#[test]
fn a_resume_changes_resilience_among_checksum_journal_and_none_only() {
    let recorded = state(ReencryptMode::Reencrypt, checksum(HashAlg::Sha256, 4096));
    let same = ReencryptSettings {
        resilience: Some(ResilienceMode::Checksum),
        resilience_hash: Some(HashAlg::Sha256),
        ..ReencryptSettings::default()
    };
    assert!(!same.changes_resilience(&recorded));
    assert!(!ReencryptSettings::default().changes_resilience(&recorded));
    let other_hash =
        ReencryptSettings { resilience_hash: Some(HashAlg::Sha1), ..ReencryptSettings::default() };
    assert!(other_hash.changes_resilience(&recorded));
    let journal = ReencryptSettings {
        resilience: Some(ResilienceMode::Journal),
        ..ReencryptSettings::default()
    };
    assert!(journal.changes_resilience(&recorded));
    assert!(journal.check_resilience_change(data(), &recorded).is_ok());
    assert_eq!(journal.changed_resilience(&recorded, 80 * MIB), Ok(Resilience::Journal));
    let recorded_journal = state(ReencryptMode::Reencrypt, Resilience::Journal);
    assert!(other_hash.changes_resilience(&recorded_journal));
    assert_eq!(
        other_hash.changed_resilience(&recorded_journal, 80 * MIB + 512),
        Ok(checksum(HashAlg::Sha1, 4096))
    );
    for (mode, doing) in [
        (ReencryptMode::Encrypt, "encrypted"),
        (ReencryptMode::Decrypt, "decrypted"),
        (ReencryptMode::Reencrypt, "re-encrypted"),
    ] {
        refused(
            journal.check_resilience_change(data(), &state(mode, datashift())),
            &format!("vol.img is being {doing} with resilience datashift: a data shift keeps its resilience to the end, as in cryptsetup"),
        );
    }
    let to_shift = ReencryptSettings {
        resilience: Some(ResilienceMode::Datashift),
        ..ReencryptSettings::default()
    };
    refused(
        to_shift.check_resilience_change(data(), &recorded),
        "vol.img is being re-encrypted with resilience checksum: a data shift keeps its resilience to the end, as in cryptsetup",
    );
}

fn reduce(bytes: u64) -> ReencryptSettings {
    ReencryptSettings { reduce_device_size: Some(bytes), ..ReencryptSettings::default() }
}

#[test]
fn an_encryption_needs_room_for_its_header() {
    refused(
        ReencryptSettings::default().encrypt_start(data(), 64 * MIB, false),
        "--encrypt needs room for the header: --reduce-device-size SIZE (the data moves up) or --header FILE (a detached header)",
    );
    let planned = ReencryptSettings::default().encrypt_start(data(), 64 * MIB, true).unwrap();
    assert_eq!((planned.shift, planned.moved_chunk()), (None, None));
    assert_eq!(planned.resilience, checksum(HashAlg::Sha256, 4096));
    let options = planned.format_options(rampart_luks::PbkdfChoice::default());
    assert_eq!(
        (options.data_offset, options.metadata_size, options.keyslots_size),
        (Some(0), None, None)
    );
    assert!(options.detached_header);
    let journal = ReencryptSettings {
        resilience: Some(ResilienceMode::Journal),
        ..ReencryptSettings::default()
    };
    let planned = journal.encrypt_start(data(), 64 * MIB, true).unwrap();
    assert_eq!(planned.encrypt_plan().resilience, Resilience::Journal);
    refused(
        ReencryptSettings { sector_size: Some(4096), ..ReencryptSettings::default() }
            .encrypt_start(data(), 64 * MIB + 512, true),
        &format!(
            "the data ({} bytes) is not a multiple of the 4096-byte sector size",
            64 * MIB + 512
        ),
    );
}

#[test]
fn reduce_device_size_with_an_attached_header_moves_the_data_up_by_half() {
    let planned = reduce(32 * MIB).encrypt_start(data(), 64 * MIB, false).unwrap();
    assert_eq!((planned.shift, planned.moved_chunk()), (Some(16 * MIB), Some(16 * MIB)));
    assert_eq!(planned.resilience, Resilience::None);
    let options = planned.format_options(rampart_luks::PbkdfChoice::default());
    assert_eq!(
        (options.data_offset, options.metadata_size, options.keyslots_size),
        (Some(16 * MIB), None, None)
    );
    assert!(!options.detached_header);
    assert_eq!(planned.encrypt_plan().shift, Some(16 * MIB));
    // A multiple of twice the sector size, from its smallest to 1 GiB.
    let small = ReencryptSettings { sector_size: Some(512), ..reduce(1024) };
    assert_eq!(small.encrypt_start(data(), 64 * MIB, false).unwrap().shift, Some(512));
    assert_eq!(
        reduce(1 << 30).encrypt_start(data(), 2 << 30, false).unwrap().shift,
        Some(512 * MIB)
    );
    for bytes in [0, 4096, 8192 + 4096] {
        refused(
            reduce(bytes).encrypt_start(data(), 64 * MIB, false),
            &format!("--reduce-device-size {bytes} must be a non-zero multiple of twice the 4096-byte sector size (8192 bytes)"),
        );
    }
    let over = (1 << 30) + 8192;
    refused(
        reduce(over).encrypt_start(data(), 4 << 30, false),
        &format!("--reduce-device-size {over} is larger than 1 GiB, cryptsetup's limit"),
    );
    // The device holds the header, the data and the moved chunk.
    assert!(reduce(2 * MIB).encrypt_start(data(), 3 * MIB, false).is_ok());
    refused(
        reduce(2 * MIB).encrypt_start(data(), 3 * MIB - 4096, false),
        &format!(
            "vol.img has {} bytes: encrypting it with --reduce-device-size {} needs at least {}",
            3 * MIB - 4096,
            2 * MIB,
            3 * MIB
        ),
    );
    for mode in [ResilienceMode::Checksum, ResilienceMode::Journal, ResilienceMode::None] {
        let settings = ReencryptSettings { resilience: Some(mode), ..reduce(2 * MIB) };
        refused(
            settings.encrypt_start(data(), 64 * MIB, false),
            "encryption with --reduce-device-size has resilience datashift, as in cryptsetup",
        );
    }
    let shift =
        ReencryptSettings { resilience: Some(ResilienceMode::Datashift), ..reduce(2 * MIB) };
    assert!(shift.encrypt_start(data(), 64 * MIB, false).is_ok());
}

#[test]
fn reduce_device_size_with_a_detached_header_sizes_the_header_file() {
    let planned = reduce(4 * MIB).encrypt_start(data(), 64 * MIB, true).unwrap();
    assert_eq!((planned.shift, planned.moved_chunk()), (Some(4 * MIB), None));
    assert_eq!(planned.resilience, Resilience::None);
    let options = planned.format_options(rampart_luks::PbkdfChoice::default());
    assert_eq!(
        (options.data_offset, options.metadata_size, options.keyslots_size),
        (Some(0), Some(16 << 10), Some(4 * MIB - (32 << 10)))
    );
    // From 1 MiB to 128 MiB + 32 KiB, a multiple of 4096 and the sector.
    let (low, high) = (MIB, 128 * MIB + (32 << 10));
    for bytes in [low, high] {
        assert_eq!(
            reduce(bytes).encrypt_start(data(), 256 * MIB, true).unwrap().shift,
            Some(bytes)
        );
    }
    for bytes in [low - 4096, high + 4096] {
        refused(
            reduce(bytes).encrypt_start(data(), 256 * MIB, true),
            &format!("--reduce-device-size {bytes} with --header must be from 1 MiB to 128 MiB + 32 KiB (the header file: two 16 KiB metadata copies and a keyslots area of at most 128 MiB)"),
        );
    }
    for bytes in [0, MIB + 512] {
        refused(
            reduce(bytes).encrypt_start(data(), 256 * MIB, true),
            &format!("--reduce-device-size {bytes} with --header must be a non-zero multiple of 4096 bytes (4096 and the sector size)"),
        );
    }
    let small_sectors = ReencryptSettings { sector_size: Some(512), ..reduce(MIB + 512) };
    refused(
        small_sectors.encrypt_start(data(), 256 * MIB, true),
        &format!("--reduce-device-size {} with --header must be a non-zero multiple of 4096 bytes (4096 and the sector size)", MIB + 512),
    );
    assert!(reduce(2 * MIB).encrypt_start(data(), 2 * MIB, true).is_ok());
    refused(
        reduce(2 * MIB).encrypt_start(data(), 2 * MIB - 4096, true),
        &format!(
            "vol.img has {} bytes: encrypting it with --reduce-device-size {} needs at least {}",
            2 * MIB - 4096,
            2 * MIB,
            2 * MIB
        ),
    );
}
