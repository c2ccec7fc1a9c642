//! A simulated disk with a volatile write cache, for crash tests.
//!
//! **A test and simulation layer: it holds everything in memory and never
//! touches a real device.** It implements both [`BlockDevice`] (for the
//! data path: crypt layer, NBD server) and the LUKS [`MetadataIo`] (for the
//! header writers), so every writer Rampart has can run over it.
//!
//! Reads see every write at once, as through a drive's cache. What the
//! medium holds is another matter: a write reaches it only when a later
//! flush (`flush`, `sync`) completes. At a simulated crash, each write made
//! since the last flush is, chosen by a seeded RNG, lost, kept, or torn
//! (each `tear`-byte sector of it kept or lost on its own), and those that
//! are kept land in a random order, so a later write to the same sector
//! may be overtaken by an earlier one. A crash therefore leaves exactly
//! what a drive that honours flushes but nothing else may leave.
//!
//! A crash is scheduled with [`CrashSim::crash_at`]: it happens just before
//! the given operation (writes, flushes, discards and zeroings are counted
//! from 0). The medium is frozen there; the code under test goes on
//! running against the cache (as a process does for a moment after the
//! power is cut, with nobody left to see it), and [`CrashSim::crash_image`]
//! returns the medium as a reboot finds it.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rampart_luks::MetadataIo;

use crate::{check_range, BlockDevice};

/// A handle to one simulated disk; clones share it.
#[derive(Clone)]
pub struct CrashSim {
    state: Arc<Mutex<State>>,
    len: u64,
    tear: u64,
}

impl std::fmt::Debug for CrashSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("CrashSim")
            .field("len", &self.len)
            .field("ops", &state.ops)
            .field("pending_writes", &state.pending.len())
            .field("crashed", &state.frozen.is_some())
            .finish_non_exhaustive()
    }
}

struct State {
    /// What reads return.
    cache: Vec<u8>,
    /// What the medium holds.
    durable: Vec<u8>,
    /// Writes since the last flush, in the order they were made.
    pending: Vec<(u64, Vec<u8>)>,
    /// Operations so far.
    ops: u64,
    crash_at: Option<u64>,
    /// The medium at the crash, once it has happened.
    frozen: Option<Vec<u8>>,
    rng: SplitMix64,
}

impl CrashSim {
    /// A disk holding `image` (durable, nothing cached), whose crash
    /// outcomes are drawn from `seed`, torn at 512-byte sectors.
    #[must_use]
    pub fn new(image: Vec<u8>, seed: u64) -> Self {
        Self::with_tear(image, seed, 512)
    }

    /// Like [`CrashSim::new`], torn at `tear`-byte sectors (the medium's
    /// atomic write unit).
    ///
    /// # Panics
    /// If `tear` is 0.
    #[must_use]
    pub fn with_tear(image: Vec<u8>, seed: u64, tear: u64) -> Self {
        assert!(tear > 0, "the tear unit must be at least one byte");
        let len = image.len() as u64;
        Self {
            state: Arc::new(Mutex::new(State {
                cache: image.clone(),
                durable: image,
                pending: Vec::new(),
                ops: 0,
                crash_at: None,
                frozen: None,
                rng: SplitMix64(seed),
            })),
            len,
            tear,
        }
    }

    /// Schedules the crash just before operation `op` (0 = before anything
    /// is written). A crash already past is not undone.
    pub fn crash_at(&self, op: u64) {
        let mut state = self.lock();
        state.crash_at = Some(op);
        if state.frozen.is_none() && state.ops >= op {
            self.freeze(&mut state);
        }
    }

    /// Writes, flushes, discards and zeroings so far.
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Whether the scheduled crash has happened.
    #[must_use]
    pub fn has_crashed(&self) -> bool {
        self.lock().frozen.is_some()
    }

    /// What a reboot finds on the medium: the image frozen at the crash, or,
    /// when no crash has happened yet, the outcome of a crash now.
    #[must_use]
    pub fn crash_image(&self) -> Vec<u8> {
        let mut state = self.lock();
        if state.frozen.is_none() {
            self.freeze(&mut state);
        }
        state.frozen.clone().unwrap_or_default()
    }

    /// Everything written so far, as reads see it.
    #[must_use]
    pub fn cached_image(&self) -> Vec<u8> {
        self.lock().cache.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements: a panicking test
        // thread cannot leave it half-updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Draws the fate of every pending write and stores the result.
    fn freeze(&self, state: &mut State) {
        let mut medium = state.durable.clone();
        let mut order: Vec<usize> = (0..state.pending.len()).collect();
        // Fisher-Yates: kept writes land in any order.
        for i in (1..order.len()).rev() {
            let j = (state.rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        for index in order {
            let (offset, data) = &state.pending[index];
            let fate = state.rng.next_u64() % 3;
            if fate == 0 {
                continue; // lost
            }
            let mut at = *offset;
            let end = offset + data.len() as u64;
            while at < end {
                // Pieces end at the medium's sector boundaries.
                let piece_end = ((at / self.tear + 1) * self.tear).min(end);
                if fate == 1 || state.rng.next_u64() % 2 == 0 {
                    let src = (at - offset) as usize..(piece_end - offset) as usize;
                    medium[at as usize..piece_end as usize].copy_from_slice(&data[src]);
                }
                at = piece_end;
            }
        }
        state.frozen = Some(medium);
    }

    /// Counts one operation, crashing first when it is the scheduled one.
    /// Returns whether the operation still reaches the medium.
    fn begin(&self, state: &mut State) -> bool {
        if state.frozen.is_none() && state.crash_at.is_some_and(|op| state.ops >= op) {
            self.freeze(state);
        }
        state.ops += 1;
        state.frozen.is_none()
    }

    fn write(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let mut state = self.lock();
        let start = offset as usize;
        state.cache[start..start + buf.len()].copy_from_slice(buf);
        if self.begin(&mut state) {
            state.pending.push((offset, buf.to_vec()));
        }
        Ok(())
    }

    fn sync_all(&self) {
        let mut state = self.lock();
        if self.begin(&mut state) {
            let State { durable, pending, .. } = &mut *state;
            for (offset, data) in pending.drain(..) {
                let start = offset as usize;
                durable[start..start + data.len()].copy_from_slice(&data);
            }
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let state = self.lock();
        let start = offset as usize;
        buf.copy_from_slice(&state.cache[start..start + buf.len()]);
        Ok(())
    }
}

impl BlockDevice for CrashSim {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read(offset, buf)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write(offset, buf)
    }

    fn flush(&self) -> io::Result<()> {
        self.sync_all();
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, len, self.len)?;
        self.write(offset, &vec![0; len as usize])
    }
}

impl MetadataIo for CrashSim {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write(offset, buf)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_all();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }
}

/// A small, seedable generator (SplitMix64): crash outcomes and the
/// workloads of crash tests only need to be varied and reproducible, not
/// unpredictable.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0; the slight modulo bias does not matter
    /// here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushed_writes_survive_and_unflushed_ones_may_not() {
        let mut lost = 0;
        let mut kept = 0;
        let mut torn = 0;
        for seed in 0..200 {
            let sim = CrashSim::new(vec![0; 8192], seed);
            BlockDevice::write_at(&sim, &[1; 1024], 0).unwrap();
            BlockDevice::flush(&sim).unwrap();
            BlockDevice::write_at(&sim, &[2; 1024], 4096).unwrap();
            let image = sim.crash_image();
            assert_eq!(&image[..1024], &[1; 1024], "a flushed write was lost");
            match (image[4096] == 2, image[4096 + 512] == 2) {
                (false, false) => lost += 1,
                (true, true) => kept += 1,
                _ => torn += 1,
            }
            // Reads always saw the cache.
            let mut back = [0; 1];
            BlockDevice::read_at(&sim, &mut back, 4096).unwrap();
            assert_eq!(back, [2]);
        }
        assert!(lost > 0 && kept > 0 && torn > 0, "{lost} {kept} {torn}");
    }

    #[test]
    fn the_crash_freezes_the_medium_at_the_scheduled_operation() {
        let sim = CrashSim::new(vec![0; 4096], 7);
        sim.crash_at(2);
        BlockDevice::write_at(&sim, &[1; 512], 0).unwrap();
        BlockDevice::flush(&sim).unwrap();
        assert!(!sim.has_crashed());
        BlockDevice::write_at(&sim, &[2; 512], 512).unwrap();
        BlockDevice::flush(&sim).unwrap();
        assert!(sim.has_crashed());
        let image = sim.crash_image();
        assert_eq!(&image[..512], &[1; 512]);
        assert_eq!(&image[512..1024], &[0; 512], "written after the crash");
        assert_eq!(sim.ops(), 4);
    }

    #[test]
    fn reordered_writes_can_leave_the_older_data() {
        let mut older = 0;
        for seed in 0..100 {
            let sim = CrashSim::new(vec![0; 512], seed);
            BlockDevice::write_at(&sim, &[1; 512], 0).unwrap();
            BlockDevice::write_at(&sim, &[2; 512], 0).unwrap();
            let image = sim.crash_image();
            assert!([0, 1, 2].contains(&image[0]));
            older += usize::from(image[0] == 1);
        }
        assert!(older > 0);
    }
}
