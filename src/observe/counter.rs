//! The single-writer counter every per-worker figure is kept in.

use std::sync::atomic::{AtomicU64, Ordering};

/// One monotonic counter (or gauge) with a single writer.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker calls this, so load-then-store loses nothing
    /// and avoids a locked instruction.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Sets the value (for gauges such as open connections).
    #[inline]
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    /// Reads the value; any thread may.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
