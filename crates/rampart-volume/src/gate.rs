//! The boundary between the two keys of a volume re-encrypted while it is
//! in use, and the range lock that lets the reencryption move it.
//!
//! Client requests pass through [`ZoneGate::enter`], which records their
//! range for as long as they run and tells them where the boundary is.
//! The reencryption announces each hotzone with [`ZoneGate::begin_zone`]:
//! from then on writes touching the hotzone wait, and the call itself
//! waits until the writes already inside it have finished. The hotzone is
//! then read, its resilience data committed and its new data prepared,
//! while reads of it still go on: nothing on the device has changed yet.
//! [`ZoneGate::close_zone`] then closes it to reads as well, waiting for
//! those inside it, before anything of it is written; [`ZoneGate::end_zone`]
//! moves the boundary past it and lets the waiting requests in — under
//! the new key. Requests elsewhere on the volume never wait.
//!
//! A request is therefore always entirely on one side of every change of
//! the boundary it could observe, a write acknowledged before a hotzone
//! was read is part of what the hotzone re-encrypts, and a read never
//! sees a hotzone half written.

use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The longest pause the reencryption takes between two hotzones to leave
/// the device to its clients.
const MAX_REST: Duration = Duration::from_millis(250);

#[derive(Debug, Default)]
struct GateState {
    boundary: u64,
    /// The hotzone being re-encrypted: `[start, end)`.
    hot: Option<(u64, u64)>,
    /// Whether reads of the hotzone are still let in (until its data is
    /// about to be written).
    hot_readable: bool,
    /// A hotzone whose reencryption failed part-way: its data is partly
    /// under each key until a restart recovers it from the resilience
    /// data, so requests touching it fail instead of reading garbage.
    broken: Option<(u64, u64)>,
    /// Ranges of the requests in progress, and whether each writes.
    inflight: Vec<(u64, u64, Access)>,
    /// Requests that entered since the last hotzone began.
    entered: u64,
    /// How long the last hotzone kept its range closed.
    last_zone: Duration,
    zone_started: Option<Instant>,
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// What a request does to its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Anything that changes the device: writes, zeroes, discards.
    Write,
}

impl GateState {
    fn holds_back(&self, range: (u64, u64), access: Access) -> bool {
        self.hot
            .is_some_and(|h| overlaps(h, range) && (access == Access::Write || !self.hot_readable))
    }
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ZoneGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

/// A request's passage through the gate: while it lives, no hotzone that
/// overlaps the request begins.
#[derive(Debug)]
pub struct Passage<'a> {
    gate: &'a ZoneGate,
    range: (u64, u64),
    access: Access,
    boundary: u64,
}

impl Passage<'_> {
    /// Bytes below this offset are under the new key for the whole
    /// request.
    #[must_use]
    pub fn boundary(&self) -> u64 {
        self.boundary
    }
}

impl Drop for Passage<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        let mine = (self.range.0, self.range.1, self.access);
        if let Some(i) = state.inflight.iter().position(|&r| r == mine) {
            state.inflight.swap_remove(i);
        }
        if state.hot.is_some() {
            self.gate.changed.notify_all();
        }
    }
}

impl ZoneGate {
    #[must_use]
    pub fn new(boundary: u64) -> Self {
        Self {
            state: Mutex::new(GateState { boundary, ..GateState::default() }),
            changed: Condvar::new(),
        }
    }

    // A panic while holding the lock leaves plain numbers behind, which
    // stay meaningful: carry on with them.
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the boundary is now.
    #[must_use]
    pub fn boundary(&self) -> u64 {
        self.lock().boundary
    }

    /// Lets a request for `[offset, offset+len)` in, once no hotzone
    /// closed to it overlaps it.
    pub fn enter(&self, offset: u64, len: u64, access: Access) -> io::Result<Passage<'_>> {
        let range = (offset, offset.saturating_add(len));
        let mut state = self.lock();
        loop {
            if state.broken.is_some_and(|b| overlaps(b, range)) {
                return Err(io::Error::other(
                    "this range was being re-encrypted when the reencryption failed; restart the server to recover it",
                ));
            }
            if !state.holds_back(range, access) {
                break;
            }
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.inflight.push((range.0, range.1, access));
        state.entered += 1;
        Ok(Passage { gate: self, range, access, boundary: state.boundary })
    }

    /// Closes `[start, start+len)` to new writes and waits for those
    /// inside it to finish; reads of it go on until [`Self::close_zone`].
    /// When clients were busy during the previous hotzone, first rests
    /// for two fifths of the time that hotzone took (at most
    /// [`MAX_REST`]): a longer rest starved the reencryption and a shorter
    /// one the clients (BENCHMARKS.md, "Online re-encryption").
    pub fn begin_zone(&self, start: u64, len: u64) {
        let rest = {
            let state = self.lock();
            if state.entered > 0 {
                (state.last_zone * 2 / 5).min(MAX_REST)
            } else {
                Duration::ZERO
            }
        };
        if !rest.is_zero() {
            std::thread::sleep(rest);
        }
        let zone = (start, start.saturating_add(len));
        let mut state = self.lock();
        state.hot = Some(zone);
        state.hot_readable = true;
        state.entered = 0;
        state.zone_started = Some(Instant::now());
        while state
            .inflight
            .iter()
            .any(|&(a, b, access)| access == Access::Write && overlaps((a, b), zone))
        {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Closes the hotzone to reads too, and waits for those inside it to
    /// finish: called before any of its data is written.
    pub fn close_zone(&self) {
        let mut state = self.lock();
        state.hot_readable = false;
        let Some(zone) = state.hot else { return };
        while state.inflight.iter().any(|&(a, b, _)| overlaps((a, b), zone)) {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The hotzone is done: the boundary moves to `boundary` and the
    /// waiting requests go on.
    pub fn end_zone(&self, boundary: u64) {
        let mut state = self.lock();
        state.boundary = boundary;
        // A failed hotzone recovered (the same range, done again).
        if let (Some(hot), Some(broken)) = (state.hot, state.broken) {
            if hot.0 <= broken.0 && broken.1 <= hot.1 {
                state.broken = None;
            }
        }
        state.hot = None;
        if let Some(started) = state.zone_started.take() {
            state.last_zone = started.elapsed();
        }
        self.changed.notify_all();
    }

    /// The hotzone failed part-way: requests touching it fail from now on;
    /// the rest of the volume stays in service.
    pub fn fail_zone(&self) {
        let mut state = self.lock();
        state.broken = state.hot.take();
        state.zone_started = None;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_write_inside_the_hotzone_waits_for_its_end_and_sees_the_new_boundary() {
        let gate = Arc::new(ZoneGate::new(0));
        gate.begin_zone(0, 4096);
        let entered = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
            std::thread::spawn(move || {
                let passage = gate.enter(1024, 512, Access::Write).unwrap();
                entered.store(true, Ordering::SeqCst);
                passage.boundary()
            })
        };
        // Elsewhere on the volume nothing waits.
        assert_eq!(gate.enter(8192, 4096, Access::Write).unwrap().boundary(), 0);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst));
        gate.end_zone(4096);
        assert_eq!(waiter.join().unwrap(), 4096);
    }

    #[test]
    fn a_hotzone_waits_for_the_writes_already_inside_it() {
        let gate = Arc::new(ZoneGate::new(0));
        let passage = gate.enter(0, 512, Access::Write).unwrap();
        let begun = Arc::new(AtomicBool::new(false));
        let zone = {
            let (gate, begun) = (Arc::clone(&gate), Arc::clone(&begun));
            std::thread::spawn(move || {
                gate.begin_zone(0, 4096);
                begun.store(true, Ordering::SeqCst);
                gate.end_zone(4096);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!begun.load(Ordering::SeqCst));
        drop(passage);
        zone.join().unwrap();
        assert_eq!(gate.boundary(), 4096);
    }

    #[test]
    fn a_failed_hotzone_refuses_requests_that_touch_it_only() {
        let gate = ZoneGate::new(0);
        gate.begin_zone(4096, 4096);
        gate.fail_zone();
        assert!(gate.enter(4000, 200, Access::Read).is_err());
        assert!(gate.enter(4000, 200, Access::Write).is_err());
        assert!(gate.enter(0, 4096, Access::Write).is_ok());
        assert!(gate.enter(8192, 4096, Access::Read).is_ok());
    }

    #[test]
    fn reads_of_the_hotzone_go_on_until_it_is_closed_and_closing_waits_for_them() {
        let gate = Arc::new(ZoneGate::new(0));
        gate.begin_zone(0, 4096);
        // Nothing of the hotzone is written yet: reads pass, with the old
        // boundary.
        let reading = gate.enter(1024, 512, Access::Read).unwrap();
        assert_eq!(reading.boundary(), 0);
        let closed = Arc::new(AtomicBool::new(false));
        let closer = {
            let (gate, closed) = (Arc::clone(&gate), Arc::clone(&closed));
            std::thread::spawn(move || {
                gate.close_zone();
                closed.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!closed.load(Ordering::SeqCst), "closing waits for the read inside");
        drop(reading);
        closer.join().unwrap();
        // Closed: a read of the hotzone now waits for its end.
        let entered = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
            std::thread::spawn(move || {
                let passage = gate.enter(0, 512, Access::Read).unwrap();
                entered.store(true, Ordering::SeqCst);
                passage.boundary()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst));
        gate.end_zone(4096);
        assert_eq!(waiter.join().unwrap(), 4096);
    }

    #[test]
    fn a_hotzone_does_not_wait_for_reads_inside_it_to_begin() {
        let gate = ZoneGate::new(0);
        let reading = gate.enter(0, 512, Access::Read).unwrap();
        gate.begin_zone(0, 4096);
        drop(reading);
        gate.close_zone();
        gate.end_zone(4096);
        assert_eq!(gate.boundary(), 4096);
    }
}
