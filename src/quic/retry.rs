//! When a new QUIC client must prove its address before the server does any
//! work for it: above a rate of new handshakes on one worker's endpoint
//! (a flood, perhaps from spoofed addresses) each client is sent a Retry
//! (RFC 9000 §8.1.2) and only those that come back with its token are
//! taken. Below it, handshakes go on at once, saving the client a round
//! trip. Clients that follow a Retry are not counted again.

use std::time::{Duration, Instant};

/// The rate is counted over windows of this length.
const WINDOW: Duration = Duration::from_secs(1);

/// The rate of new handshakes on one endpoint.
#[derive(Debug)]
pub struct HandshakeRate {
    window_start: Instant,
    this_window: u32,
    last_window: u32,
}

impl HandshakeRate {
    /// No handshakes yet.
    pub fn new(now: Instant) -> HandshakeRate {
        HandshakeRate {
            window_start: now,
            this_window: 0,
            last_window: 0,
        }
    }

    /// Counts a client at `now` whose address is not validated yet, and
    /// says whether it must prove it first: always when `retry_above` is 0,
    /// else once the handshakes of this window or the last pass it (so a
    /// flood is not let through each time a window begins).
    pub fn demands_retry(&mut self, retry_above: u32, now: Instant) -> bool {
        let since = now.saturating_duration_since(self.window_start);
        if since >= WINDOW {
            self.last_window = if since < 2 * WINDOW {
                self.this_window
            } else {
                0
            };
            self.this_window = 0;
            self.window_start = now;
        }
        self.this_window = self.this_window.saturating_add(1);
        retry_above == 0 || self.this_window.max(self.last_window) > retry_above
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_begins_past_the_rate_and_ends_a_quiet_window_later() {
        let t = Instant::now();
        let mut rate = HandshakeRate::new(t);
        let asked: Vec<bool> = (0..5).map(|_| rate.demands_retry(3, t)).collect();
        assert_eq!(asked, [false, false, false, true, true]);
        // The next window still remembers the flood.
        assert!(rate.demands_retry(3, t + Duration::from_millis(1500)));
        // A window later with one client in between: quiet again.
        assert!(!rate.demands_retry(3, t + Duration::from_millis(2600)));
        // After a long silence, the past is forgotten.
        let mut rate = HandshakeRate::new(t);
        (0..10).for_each(|_| {
            rate.demands_retry(3, t);
        });
        assert!(!rate.demands_retry(3, t + Duration::from_secs(5)));
    }

    #[test]
    fn zero_always_retries() {
        let t = Instant::now();
        let mut rate = HandshakeRate::new(t);
        assert!(rate.demands_retry(0, t));
    }
}
