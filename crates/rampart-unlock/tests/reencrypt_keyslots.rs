//! A reencryption's new keyslots: a twin of each keyslot the passphrase
//! opens, a refusal rather than a keyslot silently lost, and every binding
//! moved to the new key with a fresh wrap before anything is written.

use std::path::Path;

use rampart_crypto::{random_secret, SecretBytes};
use rampart_luks::{DataCipher, Luks, Resilience};
use rampart_unlock::{
    bind_volume, bound_tokens, plan_keyslots, start_reencryption, Binding, Kms, NewKeyShape,
    NewKeyslots,
};

use crate::common::{fast_pbkdf, volume, volume_with_keyslots, KeyServer, PASSPHRASE};

const VOLUME: &str = "/dev/test-volume";

fn shape(pbkdf: &rampart_luks::PbkdfChoice) -> NewKeyShape<'_> {
    NewKeyShape {
        cipher: DataCipher::AesXtsPlain64,
        sector_size: 4096,
        resilience: Resilience::Journal,
        pbkdf,
        bound_pbkdf: pbkdf,
    }
}

fn passphrase(bytes: &[u8]) -> SecretBytes {
    SecretBytes::from_slice(bytes)
}

#[test]
fn keyslots_whose_passphrase_was_not_given_are_refused_not_lost() {
    let (io, mut luks, key) = volume();
    let other = passphrase(b"another passphrase");
    luks.add_keyslot(&io, &key, other.expose(), &fast_pbkdf(), Some(3)).unwrap();
    let request = NewKeyslots { key_slot: None, passphrase: None, new_passphrase: None };
    let error = plan_keyslots(&luks, &io, Path::new(VOLUME), &request).unwrap_err();
    assert!(error.is_usage());
    assert_eq!(
        error.chain(),
        "keyslot(s) 0, 3 of /dev/test-volume would no longer open it after the reencryption \
         (their passphrase was not given): give it with --key-file to keep it under the new key, \
         or remove the keyslot first (rampart kill-slot)"
    );
    // One chosen keyslot, or a new passphrase, is a complete answer.
    let chosen = NewKeyslots { key_slot: Some(0), ..request };
    plan_keyslots(&luks, &io, Path::new(VOLUME), &chosen).unwrap();
    let new = passphrase(b"new");
    let replaced = NewKeyslots { new_passphrase: Some(&new), ..request };
    plan_keyslots(&luks, &io, Path::new(VOLUME), &replaced).unwrap();
}

#[test]
fn each_keyslot_the_passphrase_opens_gets_a_twin_under_the_new_key() {
    let (io, mut luks, old_key) = volume_with_keyslots(4 << 20);
    let given = passphrase(PASSPHRASE);
    luks.add_keyslot(&io, &old_key, PASSPHRASE, &fast_pbkdf(), Some(2)).unwrap();
    luks.add_keyslot(&io, &old_key, b"not given", &fast_pbkdf(), Some(5)).unwrap();
    let request = NewKeyslots { key_slot: None, passphrase: Some(&given), new_passphrase: None };
    let plan = plan_keyslots(&luks, &io, Path::new(VOLUME), &request).unwrap();
    assert!(plan.bindings().is_empty());
    let new_key = random_secret(64).unwrap();
    let pbkdf = fast_pbkdf();
    let started = start_reencryption(
        &plan,
        None,
        &io,
        &mut luks,
        Path::new(VOLUME),
        &old_key,
        &new_key,
        &shape(&pbkdf),
    )
    .unwrap();
    // The lowest free ids, one per keyslot the passphrase opened.
    assert_eq!(started.slots, vec![1, 3]);
    assert!(started.rebound.is_empty());
    let (reloaded, _) = Luks::load(&io).unwrap();
    assert!(reloaded.reencrypt_state().unwrap().is_some());
    for slot in [1, 3] {
        let (_, key) = reloaded.unlock(&io, PASSPHRASE, Some(slot)).unwrap();
        assert_eq!(key, new_key, "keyslot {slot} holds the new key");
    }
}

#[test]
fn a_binding_moves_to_the_new_key_only_with_a_key_manager() {
    let server = KeyServer::start("rebind");
    let (io, mut luks, old_key) = volume();
    let kms = Kms::connect(Some(&server.bundle("host"))).unwrap();
    let binding =
        Binding { key_name: "vol", pbkdf: fast_pbkdf(), slot: None, token_id: None, bundle: None };
    let old = bind_volume(&kms, &io, &mut luks, &old_key, &binding).unwrap();
    let given = passphrase(PASSPHRASE);
    let request = NewKeyslots { key_slot: None, passphrase: Some(&given), new_passphrase: None };
    let plan = plan_keyslots(&luks, &io, Path::new(VOLUME), &request).unwrap();
    assert_eq!(plan.bindings().len(), 1);
    let new_key = random_secret(64).unwrap();
    let pbkdf = fast_pbkdf();
    let before = io.to_vec();
    let error = start_reencryption(
        &plan,
        None,
        &io,
        &mut luks,
        Path::new(VOLUME),
        &old_key,
        &new_key,
        &shape(&pbkdf),
    )
    .unwrap_err();
    assert!(error.is_usage());
    assert!(
        error.chain().starts_with("/dev/test-volume is bound to the key manager ("),
        "{}",
        error.chain()
    );
    assert_eq!(io.to_vec(), before, "a refusal writes nothing");

    let started = start_reencryption(
        &plan,
        Some(&kms),
        &io,
        &mut luks,
        Path::new(VOLUME),
        &old_key,
        &new_key,
        &shape(&pbkdf),
    )
    .unwrap();
    assert_eq!(started.slots, vec![2, 3], "the passphrase's twin, then the binding's keyslot");
    let [moved] = started.rebound.as_slice() else { panic!("{:?}", started.rebound) };
    assert_eq!((moved.old.slot, moved.new.slot), (old.slot, 3));
    assert_eq!(moved.new.key, "vol");
    assert_ne!(moved.new.wrapped, old.wrapped, "a fresh secret, wrapped again");
    // The new token, as stored, opens its keyslot with the new key.
    let (reloaded, _) = Luks::load(&io).unwrap();
    let stored: Vec<_> = bound_tokens(&reloaded).into_iter().filter_map(|(_, t)| t.ok()).collect();
    let token = stored.iter().find(|t| t.slot == 3).expect("the new binding's token");
    let (key, _) = kms.open_token(&reloaded, &io, token).unwrap();
    assert_eq!(key, new_key);
}
