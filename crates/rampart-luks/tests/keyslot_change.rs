//! Changing a keyslot's passphrase (`Luks::change_keyslot`): a new
//! keyslot first and the old one removed after, or in place (and said
//! first) when every keyslot is in use.

use std::cell::Cell;

use rampart_crypto::SecretBytes;
use rampart_luks::{
    FormatOptions, HashAlg, Luks, LuksVersion, MemoryIo, PbkdfChoice, RemovalRefused,
};

/// A LUKS1 volume in memory whose keyslot 0 opens with `old`.
fn volume() -> (MemoryIo, Luks, SecretBytes, PbkdfChoice) {
    let io = MemoryIo::new(4 << 20);
    let opts = FormatOptions {
        pbkdf: rampart_test_support::fast_pbkdf2(HashAlg::Sha256),
        ..FormatOptions::default_for(LuksVersion::Luks1)
    };
    let (luks, key) = Luks::format(&io, &opts, b"old").unwrap();
    (io, luks, key, opts.pbkdf)
}

fn opens(luks: &Luks, io: &MemoryIo, passphrase: &[u8]) -> Option<usize> {
    luks.unlock(io, passphrase, None).ok().map(|(slot, _)| slot)
}

#[test]
fn a_new_keyslot_takes_the_key_before_the_old_one_goes() {
    let (io, mut luks, key, pbkdf) = volume();
    let told = Cell::new(false);
    let slot = luks.change_keyslot(&io, &key, 0, b"new", &pbkdf, || told.set(true)).unwrap();
    assert_eq!(slot, 1);
    assert!(!told.get(), "a free keyslot needs no change in place");
    assert_eq!(luks.active_keyslots(), [1]);
    assert_eq!(opens(&luks, &io, b"new"), Some(1));
    assert_eq!(opens(&luks, &io, b"old"), None);
}

#[test]
fn with_every_keyslot_in_use_the_change_is_made_in_place() {
    let (io, mut luks, key, pbkdf) = volume();
    for n in 1..8 {
        luks.add_keyslot(&io, &key, format!("other {n}").as_bytes(), &pbkdf, None).unwrap();
    }
    let told = Cell::new(false);
    let slot = luks.change_keyslot(&io, &key, 3, b"new", &pbkdf, || told.set(true)).unwrap();
    assert_eq!(slot, 3);
    assert!(told.get(), "the change in place is said before it is made");
    assert_eq!(luks.active_keyslots().len(), 8);
    assert_eq!(opens(&luks, &io, b"new"), Some(3));
    assert_eq!(opens(&luks, &io, b"other 3"), None);
    assert_eq!(opens(&luks, &io, b"old"), Some(0));
}

#[test]
fn a_keyslot_is_removed_only_while_in_use_and_the_last_only_when_allowed() {
    let (io, mut luks, key, pbkdf) = volume();
    assert_eq!(luks.check_removal(3, true), Err(RemovalRefused::NotActive));
    assert_eq!(luks.check_removal(0, false), Err(RemovalRefused::Last));
    assert_eq!(luks.check_removal(0, true), Ok(()));
    let second = luks.add_keyslot(&io, &key, b"second", &pbkdf, None).unwrap();
    assert_eq!(luks.check_removal(0, false), Ok(()));
    luks.remove_keyslot(&io, second).unwrap();
    assert_eq!(luks.check_removal(second, true), Err(RemovalRefused::NotActive));
}
