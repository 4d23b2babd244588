//! The recent results of one server's active health checks, for the status page.
//!
//! The checker thread is the only writer; the admin thread reads. Results are
//! bits in one atomic word (newest in bit 0) and the last failure's text sits
//! behind an [`ArcSwapOption`], so neither side ever waits for the other.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

/// Checks kept: one bit each in a `u64`.
pub const CHECKS_KEPT: u32 = 64;

/// The last [`CHECKS_KEPT`] check results of one server.
#[derive(Debug, Default)]
pub struct CheckLog {
    /// Bit `i` set: the check `i` checks ago passed.
    bits: AtomicU64,
    /// Checks done so far (saturating), so unset bits of checks never made are
    /// not shown as failures.
    done: AtomicU32,
    /// Checks passed and failed since the group was configured.
    passed: AtomicU64,
    failed: AtomicU64,
    /// Why the last failed check failed.
    last_failure: ArcSwapOption<String>,
}

impl CheckLog {
    /// Records one check (checker thread only: the load-then-store is not atomic
    /// as a whole, and needs not be with one writer).
    pub fn record(&self, result: Result<(), &str>) {
        let bits = (self.bits.load(Ordering::Relaxed) << 1) | u64::from(result.is_ok());
        self.bits.store(bits, Ordering::Relaxed);
        let done = self.done.load(Ordering::Relaxed).saturating_add(1);
        self.done.store(done, Ordering::Relaxed);
        let count = if result.is_ok() {
            &self.passed
        } else {
            &self.failed
        };
        count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if let Err(why) = result {
            self.last_failure.store(Some(Arc::new(why.to_string())));
        }
    }

    /// Checks passed and failed so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.passed.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// Why the newest check failed; `None` once a check passes again, so the
    /// status page stops showing an error for a server that is back.
    pub fn current_failure(&self) -> Option<Arc<String>> {
        let newest_failed =
            self.done.load(Ordering::Relaxed) > 0 && self.bits.load(Ordering::Relaxed) & 1 == 0;
        newest_failed.then(|| self.last_failure()).flatten()
    }

    /// Results oldest first (`true` passed), at most [`CHECKS_KEPT`] of them.
    pub fn recent(&self) -> Vec<bool> {
        let bits = self.bits.load(Ordering::Relaxed);
        let n = self.done.load(Ordering::Relaxed).min(CHECKS_KEPT);
        (0..n).rev().map(|i| bits >> i & 1 == 1).collect()
    }

    /// The text of the last failure, if any check failed yet.
    pub fn last_failure(&self) -> Option<Arc<String>> {
        self.last_failure.load_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_failure_clears_when_a_check_passes() {
        let log = CheckLog::default();
        assert!(log.current_failure().is_none());
        log.record(Err("connection refused"));
        assert_eq!(
            log.current_failure().as_deref().map(String::as_str),
            Some("connection refused")
        );
        log.record(Ok(()));
        assert!(log.current_failure().is_none(), "the server is up again");
        assert!(log.last_failure().is_some(), "the history keeps it");
    }

    #[test]
    fn results_come_back_oldest_first_and_only_those_made() {
        let log = CheckLog::default();
        assert!(log.recent().is_empty());
        log.record(Ok(()));
        log.record(Err("connection refused"));
        log.record(Ok(()));
        assert_eq!(log.recent(), [true, false, true]);
        assert_eq!(log.counts(), (2, 1));
        assert_eq!(
            log.last_failure().as_deref().map(String::as_str),
            Some("connection refused")
        );
    }

    #[test]
    fn only_the_last_sixty_four_are_kept() {
        let log = CheckLog::default();
        log.record(Err("x"));
        for _ in 0..CHECKS_KEPT {
            log.record(Ok(()));
        }
        let recent = log.recent();
        assert_eq!(recent.len(), CHECKS_KEPT as usize);
        assert!(recent.iter().all(|&ok| ok));
    }
}
