//! A new volume's request (`rampart_volume::format`): cryptsetup's
//! defaults, refusals in the check's own words, missing files created
//! (a detached header owner-only), and no volume without room for data.

use std::os::unix::fs::PermissionsExt;

use rampart_crypto::HashAlg;
use rampart_luks::{
    DataCipher, FormatOptions, IntegrityKind, Luks, LuksVersion, PbkdfKind, PbkdfRequest,
};
use rampart_test_support::TempDir;
use rampart_volume::format::{self, FormatError, FormatRequest};
use rampart_volume::VolumePaths;

const MIB: u64 = 1 << 20;

fn request(version: LuksVersion, cipher: &str) -> FormatRequest<'_> {
    FormatRequest {
        version,
        cipher,
        key_bits: None,
        sector_size: None,
        pbkdf: PbkdfRequest::default(),
        label: None,
        subsystem: None,
        metadata_size: None,
        keyslots_size: None,
        data_offset_sectors: None,
        uuid: None,
        integrity: None,
        integrity_no_journal: false,
    }
}

fn refused<T: std::fmt::Debug>(result: Result<T, FormatError>) -> String {
    match result {
        Err(FormatError::Refused(message)) => message,
        other => panic!("wanted a refusal, got {other:?}"),
    }
}

#[test]
fn defaults_are_cryptsetups_for_each_version() {
    let paths = VolumePaths::new(std::path::Path::new("/dev/null"), None);
    let luks2 = request(LuksVersion::Luks2, "aes-xts-plain64").options(&paths).unwrap();
    assert_eq!((luks2.key_bytes, luks2.sector_size), (64, 4096));
    assert_eq!(luks2.pbkdf.kind, PbkdfKind::Argon2id);
    assert!(!luks2.detached_header);
    let luks1 = request(LuksVersion::Luks1, "aes-cbc-essiv:sha256").options(&paths).unwrap();
    assert_eq!(luks1.cipher, DataCipher::AesCbcEssivSha256);
    assert_eq!(luks1.sector_size, 512);
    assert_eq!(luks1.pbkdf.kind, PbkdfKind::Pbkdf2);

    let detached =
        VolumePaths::new(std::path::Path::new("/dev/null"), Some(std::path::Path::new("/tmp/h")));
    let asked = FormatRequest {
        key_bits: Some(256),
        data_offset_sectors: Some(4096),
        ..request(LuksVersion::Luks2, "aes-xts-plain64")
    };
    let options = asked.options(&detached).unwrap();
    assert_eq!((options.key_bytes, options.data_offset), (32, Some(2 * MIB)));
    assert!(options.detached_header);
}

#[test]
fn ciphers_key_sizes_and_kdfs_not_supported_are_refused() {
    let paths = VolumePaths::new(std::path::Path::new("/dev/null"), None);
    let message = refused(request(LuksVersion::Luks2, "serpent-xts-plain64").options(&paths));
    assert!(!message.is_empty());
    let odd =
        FormatRequest { key_bits: Some(384), ..request(LuksVersion::Luks2, "aes-xts-plain64") };
    let message = refused(odd.options(&paths));
    assert!(message.starts_with("--key-size 384 is not valid for"), "{message}");
    let argon_luks1 = FormatRequest {
        pbkdf: PbkdfRequest { kind: Some(PbkdfKind::Argon2id), ..PbkdfRequest::default() },
        ..request(LuksVersion::Luks1, "aes-xts-plain64")
    };
    match argon_luks1.options(&paths) {
        Err(FormatError::Volume(rampart_volume::VolumeError::Luks(e))) => {
            assert_eq!(e.to_string(), "invalid argument: LUKS1 supports only --pbkdf pbkdf2");
        }
        other => panic!("argon2 on LUKS1: {other:?}"),
    }
}

#[test]
fn integrity_adds_its_key_and_takes_only_the_ciphers_it_authenticates() {
    let paths = VolumePaths::new(std::path::Path::new("/dev/null"), None);
    let with = |cipher, integrity: &str, key_bits| FormatRequest {
        key_bits,
        integrity: Some(IntegrityKind::from_option(integrity).unwrap()),
        ..request(LuksVersion::Luks2, cipher)
    };
    // cryptsetup's --key-size counts the cipher's key; the HMAC key follows.
    let hmac = with("aes-xts-plain64", "hmac-sha256", None).options(&paths).unwrap();
    assert_eq!((hmac.key_bytes, hmac.integrity), (96, Some(IntegrityKind::HmacSha256)));
    let sha512 = with("aes-xts-plain64", "hmac-sha512", Some(256)).options(&paths).unwrap();
    assert_eq!(sha512.key_bytes, 32 + 64);
    let aead = with("aes-gcm-random", "aead", None).options(&paths).unwrap();
    assert_eq!(aead.key_bytes, 32);
    assert_eq!(with("aes-gcm-random", "aead", Some(128)).options(&paths).unwrap().key_bytes, 16);

    let message = refused(with("aes-xts-plain64", "aead", None).options(&paths));
    assert!(message.starts_with("integrity aead needs --cipher aes-gcm-random"), "{message}");
    let message = refused(with("aes-cbc-essiv:sha256", "hmac-sha256", None).options(&paths));
    assert_eq!(
        message,
        "integrity hmac(sha256) goes with aes-xts-plain64, not aes-cbc-essiv:sha256"
    );
    let message = refused(with("aes-gcm-random", "aead", Some(512)).options(&paths));
    assert_eq!(message, "aes-gcm-random with a 512-bit key (supported: 128 or 256 bits)");
}

#[test]
fn missing_files_are_created_and_a_full_header_leaves_no_room_for_data() {
    let dir = TempDir::new("format-files");
    let data = dir.path().join("vol.img");
    let header = dir.path().join("vol.hdr");
    let attached = VolumePaths::new(&data, None);
    let message = refused(format::create_files(&attached, None));
    assert_eq!(message, format!("{} does not exist; give --size to create it", data.display()));
    assert!(!data.exists());

    let detached = VolumePaths::new(&data, Some(&header));
    format::create_files(&detached, Some(MIB)).unwrap();
    assert_eq!(std::fs::metadata(&data).unwrap().len(), MIB);
    let mode = std::fs::metadata(&header).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "a detached header is key material");

    // 1 MiB holds no LUKS2 header and data both.
    let opts = FormatOptions {
        pbkdf: rampart_test_support::fast_pbkdf2(HashAlg::Sha256),
        detached_header: true,
        ..FormatOptions::default()
    };
    let (luks, _) = Luks::format(&detached.open_header(true).unwrap(), &opts, b"pass").unwrap();
    format::check_data_room(&detached, &luks).unwrap();
    match format::check_data_room(&attached, &luks) {
        Err(error @ FormatError::NoRoomForData { .. }) => {
            assert!(error.to_string().ends_with("-byte header; give a larger --size"), "{error}")
        }
        other => panic!("a header with no data after it: {other:?}"),
    }
}
