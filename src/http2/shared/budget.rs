//! The budgets that end a connection whose peer floods it with frames
//! that cost this side more than they cost the peer, the same facing a
//! client as facing an origin: PING and SETTINGS (each makes an answer),
//! frames that carry nothing, inert frames, and the streams reset for the
//! peer's protocol errors.
//!
//! Inert frames (CVE-2019-9513 and 9516's family: PRIORITY, WINDOW_UPDATE,
//! RST_STREAM on a closed stream, acks of nothing, unknown frame types) make
//! no output, so the output limits never stop a peer that sends them in a
//! loop: each costs a parse and a stream lookup, forever. They share one
//! token bucket, `max_inert_frames` (2,000 by default, ten times the control
//! frames: browsers send a few PRIORITY frames per page, and some clients a
//! WINDOW_UPDATE per DATA frame), refilled at a tenth a second. A transfer
//! must never trip it, however long, so the bucket is not the only source:
//! each DATA frame this side writes earns two inert frames (the stream's
//! and the connection's WINDOW_UPDATE that answer it), and each stream
//! opened earns one (its PRIORITY, or the RST_STREAM that crosses its
//! answer), spent first. Refilling by work done rather than by noticing
//! which WINDOW_UPDATE "unblocked" something keeps the rule exact for a
//! peer that batches or lags its updates, and bounds a flood at two frames
//! per DATA frame the peer made this side write. nginx counts PRIORITY
//! frames against a limit that grows with the streams opened, and closes a
//! connection whose input is mostly frames without payload; this is the
//! same idea with the time refill the other budgets use.
//!
//! A peer that opens its window a few bytes at a time (CVE-2019-9511,
//! "data dribble") makes this side cut its body into as many tiny DATA
//! frames, each costing a frame head, a write and a wakeup for a few bytes.
//! A DATA frame smaller than [`SMALL_DATA`] that was cut small by the
//! peer's window (more was waiting) spends a small-data credit; the peer
//! starts with [`SMALL_DATA_BURST`] of them and earns one back per
//! [`PROGRESS_PER_CREDIT`] body bytes sent, up to the burst. Past it the
//! connection ends with GOAWAY ENHANCE_YOUR_CALM. A transfer whose windows
//! reopen by more than a kilobyte at a time never comes near it: a small
//! grant happens at most once per window it empties. Waiting instead for a
//! window of at least some size before sending (the other defence) would
//! stall a client whose windows are small by choice, so Pier sends and
//! counts.

use std::time::Instant;

use super::ConnLimits;

/// DATA frames smaller than this, cut small by the peer's window, are
/// counted against the small-data budget.
pub(crate) const SMALL_DATA: usize = 1024;

/// Small DATA frames a peer may cause before it earns more.
const SMALL_DATA_BURST: u64 = 128;

/// Body bytes sent per small DATA frame earned back.
const PROGRESS_PER_CREDIT: u64 = 16 * 1024;

/// The flood budgets of one connection.
#[derive(Debug)]
pub(crate) struct FloodBudgets {
    /// PING and SETTINGS (not acks).
    control: FloodBudget,
    /// Frames that carry nothing.
    empty: FloodBudget,
    /// Frames that make this side do nothing.
    inert: FloodBudget,
    /// Inert frames the peer has earned (see the module doc); spent before
    /// `inert`.
    inert_credits: u64,
    error_resets: usize,
    max_error_resets: usize,
    /// Small DATA frames the peer may still cause (see the module doc).
    small_data_credits: u64,
    /// Body bytes sent towards the next small-data credit.
    progress: u64,
}

impl FloodBudgets {
    /// Full budgets for `limits`.
    pub(crate) fn new(limits: &ConnLimits) -> Self {
        FloodBudgets {
            control: FloodBudget::new(limits.max_control_frames),
            empty: FloodBudget::new(limits.max_empty_frames),
            inert: FloodBudget::new(limits.max_inert_frames),
            inert_credits: 0,
            error_resets: 0,
            max_error_resets: limits.max_error_resets,
            small_data_credits: SMALL_DATA_BURST,
            progress: 0,
        }
    }

    /// Spends a small-data credit on a DATA frame the peer's window cut
    /// below [`SMALL_DATA`]; false when none is left.
    pub(crate) fn small_data(&mut self) -> bool {
        if self.small_data_credits == 0 {
            return false;
        }
        self.small_data_credits -= 1;
        true
    }

    /// `n` body bytes went out: small-data credits earned back.
    pub(crate) fn data_sent(&mut self, n: usize) {
        self.progress += n as u64;
        if self.progress >= PROGRESS_PER_CREDIT {
            let earned = self.progress / PROGRESS_PER_CREDIT;
            self.progress %= PROGRESS_PER_CREDIT;
            self.small_data_credits = (self.small_data_credits + earned).min(SMALL_DATA_BURST);
        }
    }

    /// Spends a PING or SETTINGS token; false past the budget.
    pub(crate) fn control_frame(&mut self, now: Instant) -> bool {
        self.control.take(now)
    }

    /// Spends an empty-frame token; false past the budget.
    pub(crate) fn empty_frame(&mut self, now: Instant) -> bool {
        self.empty.take(now)
    }

    /// Spends an earned credit, else an inert-frame token; false when
    /// neither is left.
    pub(crate) fn inert_frame(&mut self, now: Instant) -> bool {
        if self.inert_credits > 0 {
            self.inert_credits -= 1;
            true
        } else {
            self.inert.take(now)
        }
    }

    /// The peer earned `n` inert frames by work this side asked of it.
    pub(crate) fn earn_inert(&mut self, n: u64) {
        self.inert_credits += n;
    }

    /// Counts a stream reset for the peer's error; false past
    /// `max_error_resets`.
    pub(crate) fn error_reset(&mut self) -> bool {
        self.error_resets += 1;
        self.error_resets <= self.max_error_resets
    }
}

/// A token bucket for frames a peer may send a burst of and then only a
/// few a second: `burst` tokens, refilled at a tenth of `burst` per second.
#[derive(Debug)]
pub(crate) struct FloodBudget {
    /// Tokens, in thousandths.
    milli: u64,
    burst: u64,
    last: Option<Instant>,
}

impl FloodBudget {
    pub(crate) fn new(burst: u32) -> Self {
        FloodBudget {
            milli: u64::from(burst) * 1000,
            burst: u64::from(burst),
            last: None,
        }
    }

    /// Spends one token; false when none is left.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        match self.last {
            None => self.last = Some(now),
            Some(last) => {
                let us = now.saturating_duration_since(last).as_micros() as u64;
                // burst/10 tokens a second = burst/10_000 milli-tokens a µs.
                let refill = us.saturating_mul(self.burst) / 10_000;
                if refill > 0 {
                    self.milli = (self.milli + refill).min(self.burst * 1000);
                    self.last = Some(now);
                }
            }
        }
        if self.milli < 1000 {
            return false;
        }
        self.milli -= 1000;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn budget_refills_a_tenth_a_second() {
        let t = Instant::now();
        let mut b = FloodBudget::new(20);
        assert!((0..20).all(|_| b.take(t)));
        assert!(!b.take(t));
        assert!(
            !b.take(t + Duration::from_millis(400)),
            "0.8 token after 0.4 s"
        );
        assert!(b.take(t + Duration::from_millis(500)));
        assert!(b.take(t + Duration::from_millis(1000)), "two a second");
        assert!(!b.take(t + Duration::from_millis(1000)));
        let later = t + Duration::from_secs(3600);
        assert_eq!(
            (0..100).filter(|_| b.take(later)).count(),
            20,
            "capped at the burst"
        );
    }
}
