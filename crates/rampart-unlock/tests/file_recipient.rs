//! The key manager as a file recipient: a file wrapped for a key opens
//! with a client the key allows, another client's refusal is the user's
//! to fix, no server at all is a runtime failure; and a file passphrase's
//! cost is Argon2 only.

use rampart_crypto::{Argon2Variant, HashAlg};
use rampart_file::{Identity, Recipient};
use rampart_luks::{PbkdfChoice, PbkdfKind};
use rampart_unlock::{passphrase_cost, KmsKey};

use crate::common::KeyServer;

const SEGMENT: u32 = 64 * 1024;

fn encrypted(recipient: &KmsKey, plaintext: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let refs: [&dyn Recipient; 1] = [recipient];
    rampart_file::encrypt(&mut &plaintext[..], &mut out, &refs, SEGMENT, &|_| {}).unwrap();
    out
}

fn decrypted(identity: &KmsKey, ciphertext: &[u8]) -> rampart_file::Result<(Vec<u8>, String)> {
    let refs: [&dyn Identity; 1] = [identity];
    let mut input = ciphertext;
    let opened = rampart_file::open(&mut input, &refs)?;
    let mut out = Vec::new();
    opened.decrypt(&mut input, &mut out, &|_| {})?;
    Ok((out, opened.opened_by))
}

#[test]
fn a_file_for_a_key_opens_with_a_client_it_allows_and_no_other() {
    let server = KeyServer::start("file-kms");
    let recipient = KmsKey::recipient(Some(server.bundle("host")), "vol");
    assert_eq!(Recipient::describe(&recipient), "kms:vol");
    let plaintext = vec![7u8; 3 * SEGMENT as usize + 5];
    let file = encrypted(&recipient, &plaintext);

    let (out, opened_by) =
        decrypted(&KmsKey::identity(Some(server.bundle("host"))), &file).unwrap();
    assert_eq!(out, plaintext);
    assert_eq!(opened_by, "key manager");

    match decrypted(&KmsKey::identity(Some(server.bundle("stranger"))), &file) {
        Err(rampart_file::Error::NoKey { reasons, runtime }) => {
            assert!(!runtime, "a refusal is the user's to fix: {reasons}");
            assert!(reasons.contains("key vol version 1"), "{reasons}");
        }
        other => panic!("a stranger opened the file: {:?}", other.map(|(_, by)| by)),
    }
}

#[test]
fn a_key_the_client_may_not_use_wraps_nothing() {
    let server = KeyServer::start("file-kms-refused");
    let recipient = KmsKey::recipient(Some(server.bundle("stranger")), "vol");
    let refs: [&dyn Recipient; 1] = [&recipient];
    let mut out = Vec::new();
    match rampart_file::encrypt(&mut &b"data"[..], &mut out, &refs, SEGMENT, &|_| {}) {
        Err(rampart_file::Error::NoKey { reasons, runtime }) => {
            assert!(!runtime, "{reasons}");
            assert!(
                reasons.starts_with("the key manager did not wrap with key vol: "),
                "{reasons}"
            );
        }
        other => panic!("wrapped for a stranger: {other:?}"),
    }
    assert!(out.is_empty(), "a refusal writes nothing");
}

#[test]
fn no_bundle_or_a_foreign_stanza_is_refused_before_any_server_is_asked() {
    let recipient = KmsKey::recipient(None, "vol");
    match recipient.wrap(&rampart_crypto::SecretBytes::from_slice(&[0; 32]), b"ctx") {
        Err(rampart_file::Error::NoKey { reasons, runtime }) => {
            assert!(runtime);
            assert_eq!(reasons, rampart_unlock::NO_BUNDLE);
        }
        other => panic!("wrapped without a bundle: {other:?}"),
    }
    let identity = KmsKey::identity(None);
    let failure = identity.unwrap(&[0xff, 0xfe], b"ctx").unwrap_err();
    assert!(!failure.runtime);
    assert_eq!(failure.message, "the stanza is not a key-manager ciphertext");
    let failure = identity.unwrap(b"not a header", b"ctx").unwrap_err();
    assert!(!failure.runtime);
    assert!(failure.message.starts_with("the stanza: "), "{}", failure.message);
}

#[test]
fn a_file_passphrase_costs_argon2_as_asked_and_never_pbkdf2() {
    let forced = |kind| PbkdfChoice {
        kind,
        forced_iterations: Some(4),
        memory_kib: 1024,
        parallel: 1,
        ..PbkdfChoice::default()
    };
    let cost = passphrase_cost(&forced(PbkdfKind::Argon2i)).unwrap();
    assert_eq!(cost.variant, Argon2Variant::Argon2i);
    assert_eq!((cost.time, cost.memory_kib, cost.parallelism), (4, 1024, 1));
    assert_eq!(
        passphrase_cost(&forced(PbkdfKind::Argon2id)).unwrap().variant,
        Argon2Variant::Argon2id
    );

    let refused = passphrase_cost(&PbkdfChoice::for_random_secret(HashAlg::Sha256)).unwrap_err();
    assert!(refused.is_usage());
    assert_eq!(refused.to_string(), "file passphrases use Argon2: --pbkdf argon2id or argon2i");
}
