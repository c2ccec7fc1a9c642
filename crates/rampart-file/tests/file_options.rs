//! The rules of a file operation's options: the segment sizes a new file
//! may have, the `openssl enc` key derivations and ciphers, and the output
//! written under a temporary name and renamed only on success.

use rampart_file::openssl::{Cipher, Kdf, Md};
use rampart_file::output::{Output, OutputError};
use rampart_file::{new_segment_size, stream::MAX_SEGMENT_SIZE, Summary, MIN_SEGMENT_SIZE};

#[test]
fn segment_sizes_lie_from_the_minimum_to_the_stream_maximum() {
    assert_eq!(new_segment_size(4096), Some(4096));
    assert_eq!(new_segment_size(u64::from(MAX_SEGMENT_SIZE)), Some(MAX_SEGMENT_SIZE));
    for refused in [0, u64::from(MIN_SEGMENT_SIZE) - 1, u64::from(MAX_SEGMENT_SIZE) + 1, 1 << 40] {
        assert_eq!(new_segment_size(refused), None, "{refused}");
    }
}

#[test]
fn summaries_give_plaintext_mib_per_second() {
    let summary = Summary { plaintext_bytes: 3 << 20, ciphertext_bytes: 0, segments: 3 };
    assert!((summary.mib_per_second(2.0) - 1.5).abs() < 1e-9);
    assert!(summary.mib_per_second(0.0) == 0.0);
}

#[test]
fn openssl_key_derivations_follow_openssl_enc_defaults() {
    assert_eq!(Kdf::from_options(None, false, None), Ok(Kdf::BytesToKey { md: Md::Sha256 }));
    assert_eq!(Kdf::from_options(Some("MD5"), false, None), Ok(Kdf::BytesToKey { md: Md::Md5 }));
    assert_eq!(
        Kdf::from_options(None, true, None),
        Ok(Kdf::Pbkdf2 { md: Md::Sha256, iterations: 10_000 })
    );
    assert_eq!(
        Kdf::from_options(Some("sha512"), false, Some(99)),
        Ok(Kdf::Pbkdf2 { md: Md::Sha512, iterations: 99 })
    );
    assert_eq!(
        Kdf::from_options(Some("sha3"), true, None),
        Err("unknown --md 'sha3' (expected md5, sha1, sha256 or sha512)".to_owned())
    );
    assert_eq!(Kdf::from_options(None, true, Some(0)), Err("--iter must be at least 1".to_owned()));
    assert_eq!(Cipher::parse("AES-256-CBC"), Ok(Cipher::Aes256Cbc));
    assert_eq!(
        Cipher::parse("des"),
        Err("unsupported --openssl cipher 'des' (expected aes-128-cbc, aes-256-cbc, aes-128-ctr or aes-256-ctr)".to_owned())
    );
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("rampart-file-output-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn output_replaces_a_file_only_on_success() {
    let dir = scratch("replace");
    let target = dir.join("out");
    std::fs::write(&target, b"before").unwrap();
    let failed: Result<(), OutputError> = Output::create(&target).unwrap().run(|out| {
        out.write_all(b"partial").unwrap();
        Err(OutputError::Sync(std::io::Error::other("refused")))
    });
    assert!(failed.is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"before");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the temporary file stayed");
    let output = Output::create(&target).unwrap();
    assert!(output.is_file());
    output.run(|out| out.write_all(b"after").map_err(OutputError::Sync)).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"after");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "the temporary file stayed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_refuses_a_path_that_names_no_file() {
    let dir = scratch("no-name");
    let nameless = dir.join("missing").join("..");
    let error = Output::create(&nameless).unwrap_err();
    assert!(matches!(error, OutputError::NotAFileName(_)), "{error:?}");
    assert_eq!(error.to_string(), format!("{} is not a file name", nameless.display()));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!Output::create(std::path::Path::new("-")).unwrap().is_file());
}
