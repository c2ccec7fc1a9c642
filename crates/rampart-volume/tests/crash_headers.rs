//! Every LUKS header writer — format, add-key, change-key, remove-key,
//! token add/replace/remove, bind's keyslot-then-token sequence, repair and header restore — run over a simulated disk with a volatile write cache
//! (`rampart_volume::crashsim`) and crashed before each of its writes and
//! flushes, with several seeded draws of which unflushed writes are lost,
//! reordered or torn. After every crash the header loads, holds the old or
//! the new state (the new one once the operation returned), every
//! passphrase of that state opens the volume, and a keyslot is never
//! reachable without its key material.
//!
//! `crates/rampart-luks/tests/crash.rs` complements this with fail-stop,
//! lost-write and torn-write faults injected at each write.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_luks::{
    FormatOptions, HashAlg, Luks, LuksVersion, MemoryIo, MetadataIo, PbkdfChoice, SecretBytes,
};
use rampart_volume::crashsim::CrashSim;
use serde_json::{json, Value};

/// Crash outcomes drawn per crash point.
const SEEDS: u64 = 8;

fn fast() -> PbkdfChoice {
    rampart_test_support::fast_pbkdf2(HashAlg::Sha256)
}

fn options(version: LuksVersion) -> FormatOptions {
    FormatOptions {
        pbkdf: fast(),
        keyslots_size: (version == LuksVersion::Luks2).then_some(1 << 20),
        ..FormatOptions::default_for(version)
    }
}

/// A volume with keyslot 0 ("zero") and keyslot 1 ("one").
fn base(version: LuksVersion) -> (Vec<u8>, SecretBytes) {
    let io = MemoryIo::new(3 << 20);
    let (mut luks, key) = Luks::format(&io, &options(version), b"zero").unwrap();
    luks.add_keyslot(&io, &key, b"one", &fast(), Some(1)).unwrap();
    (io.into_vec(), key)
}

fn load(io: &dyn MetadataIo) -> Luks {
    Luks::load(io).unwrap().0
}

fn opens(luks: &Luks, io: &MemoryIo, pass: &[u8], key: &SecretBytes) -> bool {
    luks.unlock(io, pass, None).is_ok_and(|(_, k)| k == *key)
}

/// Runs `op` crashed before each of its operations (and once after the
/// last), `SEEDS` draws each; `check` sees the image a reboot finds and
/// whether `op` had completed. Returns the number of crashes.
fn crash_everywhere(
    name: &str,
    image: &[u8],
    op: &dyn Fn(&CrashSim) -> rampart_luks::Result<()>,
    check: &dyn Fn(&MemoryIo, bool),
) -> u64 {
    let clean = CrashSim::new(image.to_vec(), 0);
    op(&clean).unwrap_or_else(|e| panic!("{name}: {e}"));
    let total = clean.ops();
    assert!(total > 0, "{name} wrote nothing");
    let mut crashes = 0;
    for at in 0..=total {
        for seed in 0..SEEDS {
            let sim = CrashSim::new(image.to_vec(), seed * 1000 + at);
            sim.crash_at(at);
            op(&sim).unwrap_or_else(|e| panic!("{name}: {e}"));
            let after = MemoryIo::from_vec(sim.crash_image());
            let done = at == total;
            // A panic names the crash point and seed that reproduce it.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check(&after, done);
            }));
            if let Err(panic) = result {
                eprintln!("{name}: crash before operation {at} of {total}, seed {seed}");
                std::panic::resume_unwind(panic);
            }
            crashes += 1;
        }
    }
    crashes
}

fn token(slot: usize) -> Value {
    json!({"type": "rampart-test", "keyslots": [slot.to_string()], "note": "x"})
}

fn token_ids(luks: &Luks) -> Vec<usize> {
    luks.tokens().into_iter().map(|(id, _)| id).collect()
}

#[test]
fn format_leaves_no_header_without_its_keyslot() {
    for version in [LuksVersion::Luks2, LuksVersion::Luks1] {
        // A disk holding random bytes, as a reused disk does.
        let mut image = vec![0u8; 3 << 20];
        rampart_crypto::fill_random(&mut image).unwrap();
        let n = crash_everywhere(
            &format!("format {version:?}"),
            &image,
            &|io| Luks::format(io, &options(version), b"zero").map(drop),
            &|after, done| match Luks::load(after) {
                // Whatever header is found opens with its passphrase.
                Ok((luks, _)) => {
                    let (slot, key) = luks.unlock(after, b"zero", None).unwrap();
                    assert_eq!(slot, 0);
                    assert!(luks.verify_volume_key(&key).unwrap());
                }
                Err(e) => assert!(!done, "format returned but the header does not load: {e}"),
            },
        );
        eprintln!("format {version:?}: {n} crashes");
    }
}

#[test]
fn add_key_happens_entirely_or_not_at_all() {
    for version in [LuksVersion::Luks2, LuksVersion::Luks1] {
        let (image, key) = base(version);
        let n = crash_everywhere(
            &format!("add-key {version:?}"),
            &image,
            &|io| {
                let mut luks = load(io);
                let (_, k) = luks.unlock(io, b"zero", None)?;
                luks.add_keyslot(io, &k, b"two", &fast(), None).map(drop)
            },
            &|after, done| {
                let luks = load(after);
                let slots = luks.active_keyslots();
                assert!(opens(&luks, after, b"zero", &key) && opens(&luks, after, b"one", &key));
                if slots == [0, 1, 2] {
                    assert!(opens(&luks, after, b"two", &key), "keyslot 2 is half written");
                } else {
                    assert_eq!(slots, [0, 1]);
                    assert!(!done, "add-key returned but keyslot 2 is missing");
                }
            },
        );
        eprintln!("add-key {version:?}: {n} crashes");
    }
}

#[test]
fn change_key_never_loses_both_passphrases() {
    for version in [LuksVersion::Luks2, LuksVersion::Luks1] {
        let (image, key) = base(version);
        // rampart change-key: the new keyslot first, then the old one goes.
        let n = crash_everywhere(
            &format!("change-key {version:?}"),
            &image,
            &|io| {
                let mut luks = load(io);
                let (old, k) = luks.unlock(io, b"zero", None)?;
                luks.add_keyslot(io, &k, b"new", &fast(), None)?;
                luks.remove_keyslot(io, old)
            },
            &|after, done| {
                let luks = load(after);
                let (zero, new) =
                    (opens(&luks, after, b"zero", &key), opens(&luks, after, b"new", &key));
                assert!(opens(&luks, after, b"one", &key));
                assert!(zero || new, "neither the old nor the new passphrase opens");
                match luks.active_keyslots().as_slice() {
                    [0, 1] => assert!(zero && !done),
                    // Removing keyslot 0 wipes its material before the
                    // header drops it (as cryptsetup does: a removed
                    // passphrase must not survive a crash), so from then on
                    // "zero" may fail while keyslot 0 is still listed.
                    [0, 1, 2] => assert!(new && !done),
                    [1, 2] => assert!(new && !zero),
                    other => panic!("unexpected keyslots {other:?}"),
                }
            },
        );
        eprintln!("change-key {version:?}: {n} crashes");
    }
}

#[test]
fn remove_key_happens_entirely_or_not_at_all() {
    for version in [LuksVersion::Luks2, LuksVersion::Luks1] {
        let (image, key) = base(version);
        let n = crash_everywhere(
            &format!("remove-key {version:?}"),
            &image,
            &|io| load(io).remove_keyslot(io, 1),
            &|after, done| {
                let luks = load(after);
                assert!(opens(&luks, after, b"zero", &key));
                match luks.active_keyslots().as_slice() {
                    [0] => assert!(!opens(&luks, after, b"one", &key)),
                    // The material is wiped (and synced) before the header
                    // drops the keyslot: "one" may already fail here.
                    [0, 1] => assert!(!done),
                    other => panic!("unexpected keyslots {other:?}"),
                }
            },
        );
        eprintln!("remove-key {version:?}: {n} crashes");
    }
}

#[test]
fn token_changes_are_atomic() {
    let (image, key) = base(LuksVersion::Luks2);
    let with_token = {
        let io = MemoryIo::from_vec(image.clone());
        load(&io).add_token(&io, token(1), Some(3)).unwrap();
        io.into_vec()
    };
    type Op = dyn Fn(&CrashSim) -> rampart_luks::Result<()>;
    let cases: [(&str, &[u8], &Op, Value, Value); 3] = [
        (
            "token add",
            &image,
            &|io| load(io).add_token(io, token(1), Some(3)).map(drop),
            json!(null),
            token(1),
        ),
        (
            "token replace",
            &with_token,
            &|io| load(io).replace_token(io, 3, token(0)),
            token(1),
            token(0),
        ),
        ("token remove", &with_token, &|io| load(io).remove_token(io, 3), token(1), json!(null)),
    ];
    for (name, image, op, old, new) in cases {
        let n = crash_everywhere(name, image, op, &|after, done| {
            let luks = load(after);
            assert_eq!(luks.active_keyslots(), [0, 1]);
            assert!(opens(&luks, after, b"zero", &key));
            let found =
                luks.tokens().into_iter().find(|(id, _)| *id == 3).map_or(json!(null), |t| t.1);
            assert!(found == new || (found == old && !done), "{name}: token 3 is {found}");
        });
        eprintln!("{name}: {n} crashes");
    }
}

#[test]
fn bind_never_leaves_a_token_without_its_keyslot() {
    // rampart bind: a keyslot for a random passphrase, then the token that
    // names it.
    let (image, key) = base(LuksVersion::Luks2);
    let n = crash_everywhere(
        "bind",
        &image,
        &|io| {
            let mut luks = load(io);
            let (_, k) = luks.unlock(io, b"zero", None)?;
            luks.add_keyslot(io, &k, b"bound-passphrase", &fast(), Some(5))?;
            luks.add_token(io, token(5), Some(0)).map(drop)
        },
        &|after, done| {
            let luks = load(after);
            assert!(opens(&luks, after, b"zero", &key));
            let slots = luks.active_keyslots();
            if slots.contains(&5) {
                assert!(
                    opens(&luks, after, b"bound-passphrase", &key),
                    "keyslot 5 is half written"
                );
            }
            match token_ids(&luks).as_slice() {
                [0] => assert!(slots.contains(&5), "the token names a missing keyslot"),
                [] => assert!(!done),
                other => panic!("unexpected tokens {other:?}"),
            }
        },
    );
    eprintln!("bind: {n} crashes");
}

#[test]
fn repair_rewrites_the_damaged_copy_atomically() {
    let (mut image, key) = base(LuksVersion::Luks2);
    image[4096 + 3] ^= 1; // the primary's JSON area
    let n = crash_everywhere(
        "repair",
        &image,
        &|io| {
            let (mut luks, report) = Luks::load(io)?;
            assert!(report.used_secondary);
            luks.write(io)
        },
        &|after, done| {
            let (luks, report) = Luks::load(after).unwrap();
            assert_eq!(luks.active_keyslots(), [0, 1]);
            assert!(opens(&luks, after, b"zero", &key));
            if done {
                assert!(report.warnings.is_empty() && !report.used_secondary, "{report:?}");
            }
        },
    );
    eprintln!("repair: {n} crashes");
}

#[test]
fn header_restore_leaves_the_old_or_the_backup_header() {
    // rampart header restore of a backup that predates a token import,
    // onto a volume whose primary copy, secondary copy or neither is
    // damaged.
    let (image, key) = base(LuksVersion::Luks2);
    let backup = MemoryIo::from_vec(image.clone());
    let restored = load(&backup);
    let size = restored.header_bytes().min(image.len() as u64);
    let with_token = {
        let io = MemoryIo::from_vec(image);
        load(&io).add_token(&io, token(1), Some(2)).unwrap();
        io.into_vec()
    };
    for damage in [None, Some(4096 + 10), Some(16384 + 4096 + 10)] {
        let mut current = with_token.clone();
        if let Some(at) = damage {
            current[at] ^= 0x40;
        }
        let name = format!("header restore, damage at {damage:?}");
        let n = crash_everywhere(
            &name,
            &current,
            &|io| Ok(rampart_volume::restore_header(&backup, &restored, io, size)?),
            &|after, done| {
                let luks = load(after);
                assert_eq!(luks.active_keyslots(), [0, 1]);
                assert!(opens(&luks, after, b"zero", &key) && opens(&luks, after, b"one", &key));
                let tokens = token_ids(&luks);
                assert!(tokens.is_empty() || (tokens == [2] && !done), "tokens {tokens:?}");
            },
        );
        eprintln!("{name}: {n} crashes");
    }
}
