//! The unlock order: tokens first, a failed token costs one warning and
//! then the passphrase, tokens only refuses instead, no bundle skips
//! tokens silently.

use std::path::Path;

use rampart_kms::client::KmsClient;
use rampart_luks::Luks;
use rampart_unlock::{bind_volume, Binding, KeySettings, KeySource, Kms};

use crate::common::{fast_pbkdf, volume, KeyServer, Recorder};

const WHAT: &str = "/dev/test-volume";

/// A volume with a passphrase in keyslot 0 and a binding to key `vol` in
/// keyslot 1.
fn bound_volume(server: &KeyServer) -> (rampart_luks::MemoryIo, Luks) {
    let (io, mut luks, key) = volume();
    let kms = Kms::connect(Some(&server.bundle("host"))).unwrap();
    let binding =
        Binding { key_name: "vol", pbkdf: fast_pbkdf(), slot: None, token_id: None, bundle: None };
    let token = bind_volume(&kms, &io, &mut luks, &key, &binding).unwrap();
    assert_eq!((token.id, token.slot, token.key_version), (0, 1, 1));
    (io, luks)
}

fn source(bundle: Option<&Path>, token_only: bool) -> (KeySource<Recorder>, Recorder) {
    let recorder = Recorder::default();
    let settings =
        KeySettings { bundle: bundle.map(Path::to_owned), token_only, ..KeySettings::default() };
    (KeySource::new(settings, recorder.clone()), recorder)
}

#[test]
fn a_token_opens_the_volume_before_any_passphrase_is_asked() {
    let server = KeyServer::start("token-first");
    let (io, luks) = bound_volume(&server);
    let (mut source, asked) = source(Some(&server.bundle("host")), false);
    let (slot, _) = source.unlock(&luks, &io, Path::new(WHAT)).unwrap();
    assert_eq!(slot, 1);
    assert_eq!(source.unlocked_by().map(|t| t.slot), Some(1));
    assert!(source.passphrase().is_none());
    assert_eq!(asked.0.borrow().passphrases, 0);
    assert!(asked.0.borrow().warnings.is_empty());
}

#[test]
fn a_failing_token_costs_one_warning_then_the_passphrase() {
    let server = KeyServer::start("fallback");
    let (io, luks) = bound_volume(&server);
    let (mut source, asked) = source(Some(&server.bundle("stranger")), false);
    let (slot, _) = source.unlock(&luks, &io, Path::new(WHAT)).unwrap();
    assert_eq!(slot, 0);
    assert!(source.unlocked_by().is_none());
    assert!(source.passphrase().is_some());
    // A second volume reuses the passphrase and warns again for itself.
    source.unlock(&luks, &io, Path::new(WHAT)).unwrap();
    let asked = asked.0.borrow();
    assert_eq!(asked.passphrases, 1);
    assert_eq!(asked.warnings.len(), 2);
    let (volume, failure, usage) = &asked.warnings[0];
    assert_eq!(volume, Path::new(WHAT));
    assert!(failure.starts_with("token 0 (key vol version 1, keyslot 1): forbidden"), "{failure}");
    assert!(failure.contains("HTTP 403"), "{failure}");
    assert!(usage, "a refusal is the user's to fix");
}

#[test]
fn tokens_only_refuses_instead_of_asking_for_a_passphrase() {
    let server = KeyServer::start("token-only");
    let (io, luks) = bound_volume(&server);
    let (mut source, asked) = source(Some(&server.bundle("stranger")), true);
    let error = source.unlock(&luks, &io, Path::new(WHAT)).unwrap_err();
    assert!(error.is_usage());
    assert!(
        error.chain().starts_with("no token unlocked /dev/test-volume: token 0"),
        "{}",
        error.chain()
    );
    assert_eq!(asked.0.borrow().passphrases, 0);
    assert!(asked.0.borrow().warnings.is_empty());

    // Without any token, tokens only cannot even start.
    let (io, luks, _) = volume();
    let error = source.unlock(&luks, &io, Path::new(WHAT)).unwrap_err();
    assert_eq!(error.chain(), "/dev/test-volume has no rampart-kms token (see rampart bind)");
    assert!(error.is_usage());

    // Without a bundle, tokens only says how to give one.
    let (mut source, _) = self::source(None, true);
    let (io, luks) = bound_volume(&server);
    let error = source.unlock(&luks, &io, Path::new(WHAT)).unwrap_err();
    assert_eq!(error.chain(), "no client bundle: give --kms BUNDLE or set RAMPART_KMS");
}

#[test]
fn without_a_bundle_tokens_are_skipped_silently() {
    let server = KeyServer::start("no-bundle");
    let (io, luks) = bound_volume(&server);
    let (mut source, asked) = source(None, false);
    assert_eq!(source.unlock(&luks, &io, Path::new(WHAT)).unwrap().0, 0);
    assert_eq!(asked.0.borrow().passphrases, 1);
    assert!(asked.0.borrow().warnings.is_empty());
}

#[test]
fn a_given_passphrase_can_be_checked_alone() {
    let server = KeyServer::start("given");
    let (io, luks) = bound_volume(&server);
    let bundle = server.bundle("host");
    let (mut source, asked) = source(Some(&bundle), false);
    source.settings_mut().passphrase_given = true;
    // Given, the passphrase still comes after the tokens ...
    assert_eq!(source.unlock(&luks, &io, Path::new(WHAT)).unwrap().0, 1);
    // ... unless it is the one being checked.
    source.settings_mut().passphrase_only_when_given = true;
    assert_eq!(source.unlock(&luks, &io, Path::new(WHAT)).unwrap().0, 0);
    assert_eq!(asked.0.borrow().passphrases, 1);
}

#[test]
fn a_wrong_passphrase_is_the_users_to_fix() {
    struct Wrong;
    impl rampart_unlock::Prompter for Wrong {
        fn passphrase(&mut self) -> Result<rampart_crypto::SecretBytes, rampart_unlock::Error> {
            Ok(rampart_crypto::SecretBytes::from_slice(b"wrong"))
        }
        fn token_failed(&mut self, _: &Path, _: rampart_unlock::Error) {}
    }
    let (io, luks, _) = volume();
    let mut source = KeySource::new(KeySettings::default(), Wrong);
    let error = source.unlock(&luks, &io, Path::new(WHAT)).unwrap_err();
    assert!(error.is_usage());
    assert_eq!(error.chain(), "no key available with this passphrase");
}

#[test]
fn a_revoked_key_falls_back_to_the_passphrase() {
    let server = KeyServer::start("revoked");
    let (io, luks) = bound_volume(&server);
    server.admin(|admin: KmsClient| async move {
        admin.revoke_key("vol", "compromised", None).await.unwrap();
    });
    let (mut source, asked) = source(Some(&server.bundle("host")), false);
    assert_eq!(source.unlock(&luks, &io, Path::new(WHAT)).unwrap().0, 0);
    assert_eq!(asked.0.borrow().warnings.len(), 1);
}
