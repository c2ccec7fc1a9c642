//! Reusable request buffers, so that steady-state serving does not allocate
//! per request.

use std::sync::Mutex;

/// Buffers are pooled in power-of-two size classes from 4 KiB to 32 MiB.
const MIN_CLASS: u32 = 12;
const MAX_CLASS: u32 = 25;
const KEEP_PER_CLASS: usize = 16;

#[derive(Debug)]
pub(crate) struct BufferPool {
    classes: Vec<Mutex<Vec<Vec<u8>>>>,
}

impl BufferPool {
    pub(crate) fn new() -> Self {
        Self { classes: (MIN_CLASS..=MAX_CLASS).map(|_| Mutex::new(Vec::new())).collect() }
    }

    fn class(len: usize) -> Option<usize> {
        let bits = len.max(1).next_power_of_two().trailing_zeros().max(MIN_CLASS);
        (bits <= MAX_CLASS).then(|| (bits - MIN_CLASS) as usize)
    }

    /// A buffer of exactly `len` bytes (contents unspecified).
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let mut buffer = Self::class(len)
            .and_then(|class| {
                self.classes[class].lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
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
            let mut free =
                self.classes[class].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if free.len() < KEEP_PER_CLASS {
                free.push(buffer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_size_class() {
        let pool = BufferPool::new();
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
}
