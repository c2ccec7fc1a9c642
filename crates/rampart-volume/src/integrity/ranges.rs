//! Block-range locks: a read never sees a block's data and tag while a
//! write of that block is between them, and a partial-block write's
//! read-modify-write holds its block throughout (dm-integrity's
//! `add_new_range` serves the same purpose).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
pub(crate) struct RangeLocks {
    held: Mutex<Vec<Held>>,
    released: Condvar,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    start: u64,
    end: u64,
    exclusive: bool,
    id: u64,
}

/// A held range; released on drop.
#[derive(Debug)]
pub(crate) struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    id: u64,
}

impl RangeLocks {
    fn state(&self) -> MutexGuard<'_, Vec<Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no conflicting range is held, then holds blocks
    /// `start..end` (shared ranges conflict only with exclusive ones).
    pub(crate) fn lock(&self, start: u64, end: u64, exclusive: bool) -> RangeGuard<'_> {
        let mut held = self.state();
        loop {
            let conflict = held.iter().any(|h| {
                (exclusive || h.exclusive) && h.start < end && start < h.end && start < end
            });
            if !conflict {
                let id = held.iter().map(|h| h.id).max().map_or(0, |m| m + 1);
                held.push(Held { start, end, exclusive, id });
                return RangeGuard { locks: self, id };
            }
            held = self.released.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.locks.state();
        held.retain(|h| h.id != self.id);
        drop(held);
        self.locks.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn exclusive_ranges_wait_for_overlaps_only() {
        let locks = Arc::new(RangeLocks::default());
        let a = locks.lock(0, 10, false);
        let _b = locks.lock(5, 15, false);
        let _c = locks.lock(15, 20, true);
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (locks, done) = (Arc::clone(&locks), Arc::clone(&done));
            std::thread::spawn(move || {
                let _d = locks.lock(9, 10, true);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst));
        drop(a);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "still overlaps 5..15");
        drop(_b);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }
}
