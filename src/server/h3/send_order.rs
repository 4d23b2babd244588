//! The send order of an HTTP/3 connection's responses (RFC 9218 §10), as
//! QUIC's per-stream send priority: quinn-proto fills each packet from the
//! stream of highest priority that has data, and round-robins streams of
//! equal priority. Urgency levels go in order; within one, responses that
//! are not incremental go one after another in the order of their streams
//! (each its own priority, the earlier higher), ahead of the incremental
//! ones, which share one priority and so take turns. Our control and QPACK
//! streams go before any response.

use crate::http::priority::Priority;

/// The priority of our control and QPACK streams: above every response.
pub(super) const OWN_STREAMS: i32 = i32::MAX;

/// The width of one urgency level's band of priorities.
const BAND: i32 = 1 << 24;
/// Within a band, where the non-incremental responses start.
const SEQUENTIAL: i32 = 1 << 23;

/// The QUIC send priority of request stream `stream` (its id) answering
/// with `priority`.
pub(super) fn send_priority(priority: Priority, stream: u64) -> i32 {
    let level = 7 - i32::from(priority.urgency.min(7));
    let base = level * BAND;
    if priority.incremental {
        return base;
    }
    // Request streams are every fourth id: the earlier, the higher.
    let index = i32::try_from((stream / 4) % (SEQUENTIAL as u64)).unwrap_or(0);
    base + SEQUENTIAL + (SEQUENTIAL - 1 - index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::priority::tests::p;

    #[test]
    fn urgency_first_then_sequential_responses_in_stream_order_then_incremental_ones() {
        // Lower urgency values go first, whatever the stream.
        assert!(send_priority(p(0, true), 400) > send_priority(p(1, false), 0));
        assert!(send_priority(p(6, false), 0) > send_priority(p(7, false), 0));
        // Within a level: the earlier non-incremental stream, then the later.
        assert!(send_priority(p(3, false), 0) > send_priority(p(3, false), 4));
        assert!(send_priority(p(3, false), 400) > send_priority(p(3, true), 0));
        // Incremental responses of a level share one priority: they take turns.
        assert_eq!(send_priority(p(5, true), 4), send_priority(p(5, true), 40));
        // Every value stays below our own streams', and apart from 0..7 levels.
        assert!(send_priority(p(0, false), 0) < OWN_STREAMS);
        assert!(send_priority(p(7, true), 0) >= 0);
        assert!(send_priority(p(0, false), u64::MAX - 3) > send_priority(p(1, false), 0));
    }
}
