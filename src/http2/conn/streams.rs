//! The per-stream state a connection keeps (RFC 9113 §5.1) for the streams
//! open or half-closed, and the little it remembers of closed ones. A
//! closed stream holds no memory: an id at or under the highest one the
//! client used that is not in the table is closed; only the last few streams
//! the server reset are remembered, so the frames the client sent before it
//! saw the reset are ignored rather than answered.

use std::time::Instant;

use super::StreamId;

/// One open or half-closed stream.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) id: StreamId,
    /// The client sent END_STREAM (half-closed remote).
    pub(super) recv_closed: bool,
    /// The final response head went out (DATA may follow).
    pub(super) head_sent: bool,
    /// The server sent END_STREAM (half-closed local).
    pub(super) send_closed: bool,
    /// What the client may still send before a WINDOW_UPDATE.
    pub(super) recv_window: i64,
    /// Bytes released by the driver and not yet announced.
    pub(super) recv_owed: u32,
    /// What the server may still send (negative after a smaller
    /// SETTINGS_INITIAL_WINDOW_SIZE).
    pub(super) send_window: i64,
    /// `content-length` of the request, held against the DATA received.
    pub(super) content_length: Option<u64>,
    pub(super) received: u64,
}

impl Stream {
    pub(super) fn new(id: StreamId, recv_window: i64, send_window: i64) -> Self {
        Stream {
            id,
            recv_closed: false,
            head_sent: false,
            send_closed: false,
            recv_window,
            recv_owed: 0,
            send_window,
            content_length: None,
            received: 0,
        }
    }
}

/// The open streams: at most `max_concurrent_streams` entries, searched
/// linearly (a handful in practice, where a scan beats hashing).
#[derive(Debug, Default)]
pub(super) struct StreamTable {
    streams: Vec<Stream>,
}

impl StreamTable {
    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }

    pub(super) fn get(&self, id: StreamId) -> Option<&Stream> {
        self.streams.iter().find(|s| s.id == id)
    }

    pub(super) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    pub(super) fn insert(&mut self, s: Stream) {
        self.streams.push(s);
    }

    pub(super) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let i = self.streams.iter().position(|s| s.id == id)?;
        Some(self.streams.swap_remove(i))
    }

    /// Removes `id` when both sides have ended it.
    pub(super) fn remove_if_done(&mut self, id: StreamId) {
        if self.get(id).is_some_and(|s| s.recv_closed && s.send_closed) {
            self.remove(id);
        }
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.streams.iter_mut()
    }

    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.streams.capacity()
    }

    /// Frees the table's allocation when it is empty.
    pub(super) fn release_idle(&mut self) {
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
    }
}

/// How many streams reset by the server are remembered.
const RECENT_RESETS: usize = 16;

/// The last streams the server reset (or refused, or ignored): frames the
/// client sent on them before it learned of it are dropped, not answered.
#[derive(Debug, Default)]
pub(super) struct RecentResets {
    ids: [StreamId; RECENT_RESETS],
    next: usize,
}

impl RecentResets {
    pub(super) fn add(&mut self, id: StreamId) {
        self.ids[self.next] = id;
        self.next = (self.next + 1) % RECENT_RESETS;
    }

    pub(super) fn contains(&self, id: StreamId) -> bool {
        id != 0 && self.ids.contains(&id)
    }
}

/// A token bucket for frames a client may send a burst of and then only a
/// few a second: `burst` tokens, refilled at a tenth of `burst` per second.
#[derive(Debug)]
pub(super) struct FloodBudget {
    /// Tokens, in thousandths.
    milli: u64,
    burst: u64,
    last: Option<Instant>,
}

impl FloodBudget {
    pub(super) fn new(burst: u32) -> Self {
        FloodBudget {
            milli: u64::from(burst) * 1000,
            burst: u64::from(burst),
            last: None,
        }
    }

    /// Spends one token; false when none is left.
    pub(super) fn take(&mut self, now: Instant) -> bool {
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

    #[test]
    fn recent_resets_forget_the_oldest() {
        let mut r = RecentResets::default();
        assert!(!r.contains(0));
        for id in (1..=2 * RECENT_RESETS as u32 + 1).step_by(2) {
            r.add(id);
        }
        assert!(!r.contains(1));
        assert!(r.contains(3) && r.contains(2 * RECENT_RESETS as u32 + 1));
    }
}
