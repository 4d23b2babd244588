//! The buckets every latency histogram of `/metrics` and the status page
//! shares, and how a duration is counted into them.

use std::time::Duration;

/// Upper bounds (seconds) of every latency histogram's buckets (request
/// durations, upstream latency); one more bucket is `+Inf`.
pub const LATENCY_BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
/// `LATENCY_BOUNDS[0]` as a duration.
const FIRST_LATENCY_BOUND: Duration = Duration::from_millis(1);

/// The [`LATENCY_BOUNDS`] bucket of `elapsed` (`LATENCY_BOUNDS.len()`: `+Inf`).
#[inline]
pub fn latency_bucket(elapsed: Duration) -> usize {
    // Most answers take under the first bound (1 ms): no float, no search.
    if elapsed < FIRST_LATENCY_BOUND {
        return 0;
    }
    let secs = elapsed.as_secs_f64();
    LATENCY_BOUNDS
        .iter()
        .position(|&b| secs <= b)
        .unwrap_or(LATENCY_BOUNDS.len())
}

/// `elapsed` in whole microseconds, for the histograms' sums.
#[inline]
pub fn whole_micros(elapsed: Duration) -> u64 {
    if elapsed < FIRST_LATENCY_BOUND {
        u64::from(elapsed.subsec_micros())
    } else {
        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_falls_in_the_first_bucket_whose_bound_it_does_not_pass() {
        assert_eq!(latency_bucket(Duration::ZERO), 0);
        assert_eq!(latency_bucket(Duration::from_micros(999)), 0);
        assert_eq!(
            latency_bucket(Duration::from_millis(1)),
            0,
            "bounds are inclusive"
        );
        assert_eq!(latency_bucket(Duration::from_micros(1001)), 1);
        assert_eq!(latency_bucket(Duration::from_millis(30)), 5);
        assert_eq!(latency_bucket(Duration::from_secs(5)), 11);
        assert_eq!(
            latency_bucket(Duration::from_secs(60)),
            LATENCY_BOUNDS.len()
        );
    }

    #[test]
    fn sums_count_whole_microseconds_on_both_sides_of_the_fast_path() {
        assert_eq!(whole_micros(Duration::from_nanos(999_999)), 999);
        assert_eq!(whole_micros(Duration::from_millis(1)), 1000);
        assert_eq!(whole_micros(Duration::from_secs(60)), 60_000_000);
    }
}
