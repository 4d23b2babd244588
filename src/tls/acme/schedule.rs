//! When to renew and when to retry: pure functions of the certificate's dates,
//! the CA's renewal window and the failure count, so they are tested without a CA.

use std::time::{Duration, SystemTime};

/// Longest wait between two attempts after repeated failures.
pub const MAX_BACKOFF: Duration = Duration::from_secs(24 * 3600);
/// Least wait after the CA said it rate-limits us (Let's Encrypt's limits refill hourly).
pub const RATE_LIMITED_BACKOFF: Duration = Duration::from_secs(3600);

/// Two thirds into the certificate's lifetime.
pub fn two_thirds(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    let life = not_after.duration_since(not_before).unwrap_or_default();
    not_before + life * 2 / 3
}

/// When to renew: a point in the CA's suggested window (ARI, RFC 9773) picked
/// by `unit` in [0, 1), but never after two thirds of the lifetime.
pub fn renew_at(
    not_before: SystemTime,
    not_after: SystemTime,
    ari_window: Option<(SystemTime, SystemTime)>,
    unit: f64,
) -> SystemTime {
    let own = two_thirds(not_before, not_after);
    match ari_window {
        Some((start, end)) if end > start => {
            let span = end.duration_since(start).unwrap_or_default();
            let pick = start + span.mul_f64(unit.clamp(0.0, 1.0));
            pick.min(own)
        }
        Some((start, _)) => start.min(own),
        None => own,
    }
}

/// The wait before attempt `failures + 1`: `first` doubled per earlier failure,
/// capped at [`MAX_BACKOFF`], spread by ±20 % (`unit` in [0, 1)) so a fleet
/// does not retry in step.
pub fn backoff(first: Duration, failures: u32, unit: f64) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    let base = first.saturating_mul(1u32 << doublings).min(MAX_BACKOFF);
    base.mul_f64(0.8 + 0.4 * unit.clamp(0.0, 1.0))
}

/// A uniformly random number in [0, 1).
pub fn random_unit() -> f64 {
    use aws_lc_rs::rand::SecureRandom;
    let mut b = [0u8; 8];
    if aws_lc_rs::rand::SystemRandom::new().fill(&mut b).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn at(s: u64) -> SystemTime {
        T0 + Duration::from_secs(s)
    }

    #[test]
    fn renewal_is_two_thirds_in_or_earlier_when_the_ca_says_so() {
        assert_eq!(renew_at(at(0), at(90), None, 0.5), at(60));
        // A window before the two-thirds point is followed.
        assert_eq!(renew_at(at(0), at(90), Some((at(10), at(20))), 0.5), at(15));
        // A window past it does not delay renewal.
        assert_eq!(renew_at(at(0), at(90), Some((at(70), at(80))), 0.0), at(60));
        // A window in the past means now (the caller renews at once).
        assert!(renew_at(at(100), at(190), Some((at(0), at(1))), 0.3) < at(100));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(10), 1, 0.5), s(10));
        assert_eq!(backoff(s(10), 2, 0.5), s(20));
        assert_eq!(backoff(s(10), 4, 0.5), s(80));
        assert_eq!(backoff(s(10), 3, 0.0), s(32));
        assert_eq!(backoff(s(10), 3, 1.0), s(48));
        assert_eq!(backoff(s(3600), 30, 0.5), MAX_BACKOFF);
        let u = random_unit();
        assert!((0.0..1.0).contains(&u));
    }
}
