//! Reusable request buffers, so that steady-state serving does not allocate
//! per request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Buffers are pooled in power-of-two size classes from 4 KiB to 32 MiB.
const MIN_CLASS: u32 = 12;
const MAX_CLASS: u32 = 25;

/// Idle buffers are kept up to a byte budget, not a count: a client with 256
/// requests of 256 KiB in flight must find its buffers here on the next
/// pass, or every request pays for fresh pages and for zeroing them.
#[derive(Debug)]
pub(crate) struct BufferPool {
    classes: Vec<Mutex<Vec<Vec<u8>>>>,
    kept_bytes: AtomicUsize,
    keep_limit: usize,
}

impl BufferPool {
    /// A pool that keeps at most `keep_limit` bytes of idle buffers.
    pub(crate) fn new(keep_limit: usize) -> Self {
        Self {
            classes: (MIN_CLASS..=MAX_CLASS).map(|_| Mutex::new(Vec::new())).collect(),
            kept_bytes: AtomicUsize::new(0),
            keep_limit,
        }
    }

    fn class(len: usize) -> Option<usize> {
        let bits = len.max(1).next_power_of_two().trailing_zeros().max(MIN_CLASS);
        (bits <= MAX_CLASS).then(|| (bits - MIN_CLASS) as usize)
    }

    /// A buffer of exactly `len` bytes (contents unspecified).
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let mut buffer = Self::class(len)
            .and_then(|class| {
                let buffer = self.classes[class]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .pop()?;
                self.kept_bytes.fetch_sub(buffer.capacity(), Ordering::Relaxed);
                Some(buffer)
            })
            .unwrap_or_else(|| {
                Vec::with_capacity(Self::class(len).map_or(len, |c| 1 << (c as u32 + MIN_CLASS)))
            });
        buffer.resize(len, 0);
        buffer
    }

    pub(crate) fn give(&self, buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if !capacity.is_power_of_two() {
            return;
        }
        if let Some(class) = Self::class(capacity) {
            if 1usize << (class as u32 + MIN_CLASS) != capacity {
                return;
            }
            let kept = self.kept_bytes.fetch_add(capacity, Ordering::Relaxed);
            if kept + capacity > self.keep_limit {
                self.kept_bytes.fetch_sub(capacity, Ordering::Relaxed);
                return;
            }
            self.classes[class]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_size_class() {
        let pool = BufferPool::new(1 << 20);
        let a = pool.take(5000);
        assert_eq!(a.len(), 5000);
        assert_eq!(a.capacity(), 8192);
        let ptr = a.as_ptr();
        pool.give(a);
        let b = pool.take(8000);
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!(b.len(), 8000);
        let tiny = pool.take(1);
        assert_eq!(tiny.capacity(), 4096);
    }

    #[test]
    fn idle_buffers_are_kept_up_to_the_byte_limit() {
        let pool = BufferPool::new(3 * 4096);
        let buffers: Vec<_> = (0..5).map(|_| pool.take(4096)).collect();
        let ptrs: Vec<_> = buffers.iter().map(|b| b.as_ptr()).collect();
        for buffer in buffers {
            pool.give(buffer);
        }
        assert_eq!(pool.kept_bytes.load(Ordering::Relaxed), 3 * 4096);
        let again: Vec<_> = (0..3).map(|_| pool.take(4096)).collect();
        assert!(again.iter().all(|b| ptrs.contains(&b.as_ptr())));
        assert_eq!(pool.kept_bytes.load(Ordering::Relaxed), 0);
    }
}
