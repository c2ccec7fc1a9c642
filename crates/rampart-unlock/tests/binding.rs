//! Binding enrolment: the key manager wraps before anything is written,
//! a token that cannot be stored takes its keyslot back, unbinding never
//! locks the volume out, rewrapping moves a token to the newest key
//! version.

use std::path::Path;

use rampart_kms::client::KmsClient;
use rampart_unlock::{
    bind_volume, bound_tokens, rewrap, token_passphrase, unbind, Binding, Kms, Rewrap,
};

use crate::common::{fast_pbkdf, volume, KeyServer};

const HEADER: &str = "/dev/test-volume";

fn binding(key_name: &str) -> Binding<'_> {
    Binding { key_name, pbkdf: fast_pbkdf(), slot: None, token_id: None, bundle: None }
}

#[test]
fn a_refused_wrap_writes_nothing() {
    let server = KeyServer::start("refused");
    let (io, mut luks, key) = volume();
    let before = io.to_vec();
    let kms = Kms::connect(Some(&server.bundle("stranger"))).unwrap();
    let error = bind_volume(&kms, &io, &mut luks, &key, &binding("vol")).unwrap_err();
    assert!(error.is_usage());
    assert!(
        error.chain().starts_with("the key manager did not wrap with key vol: "),
        "{}",
        error.chain()
    );
    assert_eq!(io.to_vec(), before);
    assert_eq!(luks.active_keyslots(), vec![0]);
}

#[test]
fn a_token_that_cannot_be_stored_takes_its_keyslot_back() {
    let server = KeyServer::start("rollback");
    let (io, mut luks, key) = volume();
    let kms = Kms::connect(Some(&server.bundle("host"))).unwrap();
    // A token too large for the header's JSON area.
    let huge = format!("/{}", "b".repeat(64 << 10));
    let too_big = Binding { bundle: Some(&huge), ..binding("vol") };
    let error = bind_volume(&kms, &io, &mut luks, &key, &too_big).unwrap_err();
    assert!(
        error
            .chain()
            .starts_with("the binding's token cannot be stored (keyslot 1 was removed again): "),
        "{}",
        error.chain()
    );
    assert_eq!(luks.active_keyslots(), vec![0]);
    assert!(luks.tokens().is_empty());
    let (reloaded, _) = rampart_luks::Luks::load(&io).unwrap();
    assert_eq!(reloaded.active_keyslots(), vec![0]);
    assert!(reloaded.tokens().is_empty());
}

#[test]
fn taken_ids_are_refused_before_the_key_manager_is_asked() {
    let server = KeyServer::start("ids");
    let (io, mut luks, key) = volume();
    let kms = Kms::connect(Some(&server.bundle("stranger"))).unwrap();
    let taken = Binding { slot: Some(0), ..binding("vol") };
    let error = bind_volume(&kms, &io, &mut luks, &key, &taken).unwrap_err();
    assert_eq!(error.chain(), "keyslot 0 is already in use");
    let out_of_range = Binding { token_id: Some(32), ..binding("vol") };
    let error = bind_volume(&kms, &io, &mut luks, &key, &out_of_range).unwrap_err();
    assert_eq!(error.chain(), "token 32 is out of range (0..=31)");
}

#[test]
fn unbinding_removes_the_token_and_its_keyslot_but_never_the_only_way_in() {
    let server = KeyServer::start("unbind");
    let (io, mut luks, key) = volume();
    let kms = Kms::connect(Some(&server.bundle("host"))).unwrap();
    bind_volume(&kms, &io, &mut luks, &key, &binding("vol")).unwrap();
    let (slot, id, _) = token_passphrase(&kms, &io, &luks, Path::new(HEADER), None).unwrap();
    assert_eq!((slot, id), (1, 0));

    // With the passphrase keyslot gone, the binding is the only way in.
    luks.remove_keyslot(&io, 0).unwrap();
    let error = unbind(&io, &mut luks, Path::new(HEADER), None).unwrap_err();
    assert!(error.chain().starts_with("token 0 opens the only keyslot of /dev/test-volume"));
    luks.add_keyslot(&io, &key, b"again", &fast_pbkdf(), Some(0)).unwrap();

    assert_eq!(unbind(&io, &mut luks, Path::new(HEADER), None).unwrap(), (0, vec![1]));
    assert!(bound_tokens(&luks).is_empty());
    assert_eq!(luks.active_keyslots(), vec![0]);
    let error = unbind(&io, &mut luks, Path::new(HEADER), Some(0)).unwrap_err();
    assert_eq!(error.chain(), "token 0 does not exist");
    let error = unbind(&io, &mut luks, Path::new(HEADER), None).unwrap_err();
    assert_eq!(
        error.chain(),
        "/dev/test-volume is not bound to a key manager (it has no rampart-kms token)"
    );
}

#[test]
fn rewrapping_moves_a_token_to_the_newest_key_version() {
    let server = KeyServer::start("rewrap");
    let (io, mut luks, key) = volume();
    let kms = Kms::connect(Some(&server.bundle("host"))).unwrap();
    bind_volume(&kms, &io, &mut luks, &key, &binding("vol")).unwrap();
    let mut done = Vec::new();
    rewrap(&kms, &io, &mut luks, Path::new(HEADER), None, |r| {
        done.push(r.clone());
        Ok(())
    })
    .unwrap();
    assert_eq!(done, vec![Rewrap::Newest { id: 0, key: "vol".into(), version: 1 }]);

    server.admin(|admin: KmsClient| async move {
        admin.rotate_key("vol").await.unwrap();
    });
    done.clear();
    rewrap(&kms, &io, &mut luks, Path::new(HEADER), Some(0), |r| {
        done.push(r.clone());
        Ok(())
    })
    .unwrap();
    assert_eq!(done, vec![Rewrap::Rewrapped { id: 0, key: "vol".into(), from: 1, to: 2 }]);
    let tokens = bound_tokens(&luks);
    assert_eq!(tokens[0].1.as_ref().unwrap().key_version, 2);
    let (slot, _, _) = token_passphrase(&kms, &io, &luks, Path::new(HEADER), None).unwrap();
    assert_eq!(slot, 1);
}
