//! Rate limit for warnings that repeat once per request or connection (an
//! upstream that refuses every connection under load would otherwise write tens
//! of thousands of identical lines a second). Each call site of
//! [`warn_limited!`](crate::warn_limited) logs at most [`BURST`] lines per second;
//! the next line it writes after a suppressed stretch says how many were left out
//! (`suppressed = N`). Only the warning path touches the shared atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Lines a call site may write per second.
pub const BURST: u64 = 5;

/// One call site's budget: the current second, lines written in it, and lines
/// left out since the last one written.
#[derive(Debug, Default)]
pub struct LogLimit {
    second: AtomicU64,
    written: AtomicU64,
    suppressed: AtomicU64,
}

impl LogLimit {
    /// A fresh budget, for a `static` at the call site.
    pub const fn new() -> Self {
        LogLimit {
            second: AtomicU64::new(0),
            written: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(n)` with the number of lines
    /// suppressed since the last one written, or `None` to drop this one.
    pub fn allow(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.allow_at(now)
    }

    fn allow_at(&self, now: u64) -> Option<u64> {
        if self.second.swap(now, Ordering::Relaxed) != now {
            self.written.store(0, Ordering::Relaxed);
        }
        if self.written.fetch_add(1, Ordering::Relaxed) < BURST {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// `tracing::warn!` with a per-call-site budget of [`BURST`] lines a second; a
/// line written after some were dropped carries `suppressed = N`.
#[macro_export]
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::observe::log_limit::LogLimit =
            $crate::observe::log_limit::LogLimit::new();
        match LIMIT.allow() {
            Some(0) => ::tracing::warn!($($arg)+),
            Some(suppressed) => ::tracing::warn!(suppressed, $($arg)+),
            None => {}
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_a_burst_per_second_and_counts_the_rest() {
        let l = LogLimit::new();
        let written: Vec<_> = (0..1000).filter_map(|_| l.allow_at(100)).collect();
        assert_eq!(written, vec![0; BURST as usize]);
        // The next second's first line reports what the last second left out.
        assert_eq!(l.allow_at(101), Some(1000 - BURST));
        assert_eq!(l.allow_at(101), Some(0));
        for _ in 2..BURST {
            assert_eq!(l.allow_at(101), Some(0));
        }
        assert_eq!(l.allow_at(101), None);
        assert_eq!(l.allow_at(105), Some(1));
    }
}
