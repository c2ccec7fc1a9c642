//! The settings of new keyslots and volumes as the flags ask for them:
//! the KDF request's defaults and refusals per LUKS version, and the key
//! sizes each data cipher takes.

use rampart_luks::{DataCipher, Error, HashAlg, LuksVersion, PbkdfChoice, PbkdfKind, PbkdfRequest};

fn refusal(result: Result<PbkdfChoice, Error>) -> String {
    match result {
        Err(Error::InvalidArgument(message)) => message,
        other => panic!("wanted a refusal, got {other:?}"),
    }
}

#[test]
fn an_empty_request_gets_each_versions_default() {
    let luks2 = PbkdfRequest::default().choice(LuksVersion::Luks2).unwrap();
    assert_eq!(
        (luks2.kind, luks2.hash, luks2.iter_time_ms),
        (PbkdfKind::Argon2id, HashAlg::Sha256, 2000)
    );
    assert_eq!(luks2.memory_kib, 1 << 20);
    assert!((1..=4).contains(&luks2.parallel));
    assert_eq!(luks2.forced_iterations, None);
    let luks1 = PbkdfRequest::default().choice(LuksVersion::Luks1).unwrap();
    assert_eq!(luks1.kind, PbkdfKind::Pbkdf2);
}

#[test]
fn what_is_asked_is_kept() {
    let request = PbkdfRequest {
        kind: Some(PbkdfKind::Argon2i),
        hash: Some(HashAlg::Sha512),
        iter_time_ms: Some(300),
        forced_iterations: Some(4),
        memory_kib: Some(65536),
        parallel: Some(2),
    };
    let choice = request.choice(LuksVersion::Luks2).unwrap();
    assert_eq!(choice.kind, PbkdfKind::Argon2i);
    assert_eq!(choice.hash, HashAlg::Sha512);
    assert_eq!((choice.iter_time_ms, choice.forced_iterations), (300, Some(4)));
    assert_eq!((choice.memory_kib, choice.parallel), (65536, 2));
    assert!(!request.is_empty());
    assert!(PbkdfRequest::default().is_empty());
}

#[test]
fn argon2_on_luks1_and_zero_costs_are_refused() {
    let argon2 = PbkdfRequest { kind: Some(PbkdfKind::Argon2id), ..PbkdfRequest::default() };
    assert_eq!(refusal(argon2.choice(LuksVersion::Luks1)), "LUKS1 supports only --pbkdf pbkdf2");
    for zero in [
        PbkdfRequest { iter_time_ms: Some(0), ..PbkdfRequest::default() },
        PbkdfRequest { forced_iterations: Some(0), ..PbkdfRequest::default() },
        PbkdfRequest { parallel: Some(0), ..PbkdfRequest::default() },
    ] {
        assert_eq!(
            refusal(zero.choice(LuksVersion::Luks2)),
            "KDF time, iterations and parallelism must be at least 1"
        );
    }
}

#[test]
fn a_random_secret_gets_the_cheapest_kdf() {
    let choice = PbkdfChoice::for_random_secret(HashAlg::Sha1);
    assert_eq!(
        (choice.kind, choice.hash, choice.forced_iterations),
        (PbkdfKind::Pbkdf2, HashAlg::Sha1, Some(1000))
    );
}

#[test]
fn each_cipher_takes_its_two_key_sizes() {
    assert_eq!(DataCipher::AesXtsPlain64.default_key_bits(), 512);
    assert_eq!(DataCipher::AesCbcEssivSha256.default_key_bits(), 256);
    DataCipher::AesXtsPlain64.check_key_bits(256).unwrap();
    DataCipher::AesCbcPlain64.check_key_bits(128).unwrap();
    match DataCipher::AesCbcPlain64.check_key_bits(512) {
        Err(Error::InvalidArgument(message)) => {
            assert_eq!(message, "--key-size 512 is not valid for aes-cbc-plain64 (use [128, 256])");
        }
        other => panic!("{other:?}"),
    }
}
