//! Crash safety: a header update interrupted after any number of device
//! writes (the device failing, silently losing writes, or tearing the write
//! in progress) always leaves one valid header with the old or the new
//! content.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::cell::Cell;
use std::io;

use common::fast_pbkdf2;
use rampart_luks::{FormatOptions, HashAlg, Luks, MemoryIo, MetadataIo, SecretBytes};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every write after the budget fails.
    FailStop,
    /// Every write after the budget is silently lost (power cut before the
    /// cache reached the disk).
    Lose,
    /// The first write after the budget is half written, then all fail.
    Tear,
}

struct FaultyIo<'a> {
    inner: &'a MemoryIo,
    budget: Cell<usize>,
    writes: Cell<usize>,
    tripped: Cell<bool>,
    mode: Mode,
}

impl<'a> FaultyIo<'a> {
    fn new(inner: &'a MemoryIo, budget: usize, mode: Mode) -> Self {
        Self {
            inner,
            budget: Cell::new(budget),
            writes: Cell::new(0),
            tripped: Cell::new(false),
            mode,
        }
    }
}

impl MetadataIo for FaultyIo<'_> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.writes.set(self.writes.get() + 1);
        if self.budget.get() > 0 {
            self.budget.set(self.budget.get() - 1);
            return self.inner.write_at(offset, buf);
        }
        let first = !self.tripped.replace(true);
        match self.mode {
            Mode::FailStop => Err(io::Error::other("injected write failure")),
            Mode::Lose => Ok(()),
            Mode::Tear if first => {
                self.inner.write_at(offset, &buf[..buf.len() / 2])?;
                Err(io::Error::other("injected torn write"))
            }
            Mode::Tear => Err(io::Error::other("injected write failure")),
        }
    }

    fn sync(&self) -> io::Result<()> {
        if self.tripped.get() && self.mode == Mode::FailStop {
            return Err(io::Error::other("injected sync failure"));
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

fn base() -> (Vec<u8>, SecretBytes) {
    let io = MemoryIo::new(3 << 20);
    let opts = FormatOptions {
        pbkdf: fast_pbkdf2(HashAlg::Sha256),
        keyslots_size: Some(1 << 20),
        ..FormatOptions::default()
    };
    let (mut luks, key) = Luks::format(&io, &opts, b"zero").unwrap();
    luks.add_keyslot(&io, &key, b"one", &fast_pbkdf2(HashAlg::Sha256), Some(1)).unwrap();
    (io.into_vec(), key)
}

/// What a recovered header holds.
#[derive(Debug, PartialEq, Eq)]
struct State {
    keyslots: Vec<usize>,
    tokens: Vec<usize>,
}

fn state_of(luks: &Luks) -> State {
    State {
        keyslots: luks.active_keyslots(),
        tokens: luks.tokens().into_iter().map(|(id, _)| id).collect(),
    }
}

/// Runs `op` against every fault point and mode, checking that the device
/// always loads with either `old` or `new` state and that `check` holds.
fn exercise(
    name: &str,
    image: &[u8],
    old: &State,
    new: &State,
    op: &dyn Fn(&mut Luks, &dyn MetadataIo) -> rampart_luks::Result<()>,
    check: &dyn Fn(&Luks, &MemoryIo, bool),
) {
    for mode in [Mode::FailStop, Mode::Lose, Mode::Tear] {
        let mut saw_old = false;
        let mut saw_new = false;
        for budget in 0.. {
            let mem = MemoryIo::from_vec(image.to_vec());
            let (mut luks, _) = Luks::load(&mem).unwrap();
            let faulty = FaultyIo::new(&mem, budget, mode);
            let result = op(&mut luks, &faulty);
            let completed = !faulty.tripped.get();
            let (after, report) = Luks::load(&mem).unwrap_or_else(|e| {
                panic!("{name} {mode:?} after {budget} writes: no valid header: {e}")
            });
            let state = state_of(&after);
            let is_new = state == *new;
            assert!(
                is_new || state == *old,
                "{name} {mode:?} after {budget} writes: unexpected state {state:?}"
            );
            check(&after, &mem, is_new);
            saw_old |= !is_new;
            saw_new |= is_new;
            if completed {
                result.unwrap_or_else(|e| panic!("{name}: clean run failed: {e}"));
                assert!(is_new, "{name}: clean run did not apply");
                assert!(report.warnings.is_empty(), "{name}: {:?}", report.warnings);
                // The other copy was written too: both load.
                assert!(!report.used_secondary);
                break;
            }
            if mode == Mode::FailStop {
                assert!(result.is_err(), "{name}: a failed write must be reported");
            }
            // The next update, on a healthy device, succeeds and heals
            // any damaged copy.
            let (mut again, _) = Luks::load(&mem).unwrap();
            again.write(&mem).unwrap();
            let (healed, report) = Luks::load(&mem).unwrap();
            assert!(report.warnings.is_empty(), "{name}: not healed: {:?}", report.warnings);
            assert_eq!(state_of(&healed), state);
            assert!(budget < 64, "{name}: runaway");
        }
        assert!(saw_old && saw_new, "{name} {mode:?}: both outcomes must be exercised");
    }
}

#[test]
fn token_update_is_atomic() {
    let (image, _) = base();
    let old = State { keyslots: vec![0, 1], tokens: vec![] };
    let new = State { keyslots: vec![0, 1], tokens: vec![4] };
    exercise(
        "add_token",
        &image,
        &old,
        &new,
        &|luks, io| {
            luks.add_token(io, json!({"type": "t", "keyslots": ["1"]}), Some(4)).map(|_| ())
        },
        &|_, _, _| {},
    );
}

#[test]
fn keyslot_addition_is_atomic() {
    let (image, key) = base();
    let old = State { keyslots: vec![0, 1], tokens: vec![] };
    let new = State { keyslots: vec![0, 1, 2], tokens: vec![] };
    let k = key.clone();
    exercise(
        "add_keyslot",
        &image,
        &old,
        &new,
        &move |luks, io| {
            luks.add_keyslot(io, &k, b"two", &fast_pbkdf2(HashAlg::Sha256), None).map(|_| ())
        },
        &|luks, io, is_new| {
            assert_eq!(luks.unlock(io, b"zero", None).unwrap().1, key);
            if is_new {
                assert_eq!(luks.unlock(io, b"two", None).unwrap().1, key);
            }
        },
    );
}

#[test]
fn keyslot_removal_is_atomic() {
    let (image, key) = base();
    let old = State { keyslots: vec![0, 1], tokens: vec![] };
    let new = State { keyslots: vec![0], tokens: vec![] };
    exercise(
        "remove_keyslot",
        &image,
        &old,
        &new,
        &|luks, io| luks.remove_keyslot(io, 1),
        &|luks, io, _| {
            assert_eq!(luks.unlock(io, b"zero", None).unwrap().1, key);
        },
    );
}

#[test]
fn update_from_the_secondary_copy_is_atomic() {
    // The primary is damaged: the update must write it first, so that the
    // secondary keeps the old state until the primary holds the new one.
    let (mut image, _) = base();
    image[4096 + 3] ^= 1;
    let old = State { keyslots: vec![0, 1], tokens: vec![] };
    let new = State { keyslots: vec![0, 1], tokens: vec![2] };
    let mem = MemoryIo::from_vec(image.clone());
    let (_, report) = Luks::load(&mem).unwrap();
    assert!(report.used_secondary);
    exercise(
        "add_token from secondary",
        &image,
        &old,
        &new,
        &|luks, io| luks.add_token(io, json!({"type": "t", "keyslots": []}), Some(2)).map(|_| ()),
        &|_, _, _| {},
    );
}

#[test]
fn write_order_is_secondary_first_when_both_are_valid() {
    let (image, _) = base();
    let mem = MemoryIo::from_vec(image);
    let (mut luks, _) = Luks::load(&mem).unwrap();
    struct Recorder<'a> {
        inner: &'a MemoryIo,
        offsets: std::cell::RefCell<Vec<(u64, usize)>>,
    }
    impl MetadataIo for Recorder<'_> {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.inner.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
            self.offsets.borrow_mut().push((offset, buf.len()));
            self.inner.write_at(offset, buf)
        }
        fn sync(&self) -> io::Result<()> {
            self.offsets.borrow_mut().push((u64::MAX, 0));
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
    }
    let rec = Recorder { inner: &mem, offsets: Default::default() };
    luks.write(&rec).unwrap();
    let sync = (u64::MAX, 0);
    assert_eq!(
        rec.offsets.into_inner(),
        vec![(16384 + 4096, 12288), (16384, 4096), sync, (4096, 12288), (0, 4096), sync]
    );
}
