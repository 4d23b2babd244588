//! The per-stream state a connection keeps (RFC 9113 §5.1) for the streams
//! open or half-closed, and the little it remembers of closed ones, in
//! either role. A closed stream holds no memory: an id at or under the
//! highest one opened that is not in the table is closed; only the last few
//! streams this side reset are remembered, so the frames the peer sent
//! before it saw the reset are ignored rather than answered.

use super::StreamId;
use crate::http::priority::Priority;

/// One open or half-closed stream.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) id: StreamId,
    /// The peer sent END_STREAM (half-closed remote).
    pub(crate) recv_closed: bool,
    /// Our final head went out (DATA may follow): the response head on a
    /// server, the request head (at once) on a client.
    pub(crate) head_sent: bool,
    /// The peer's final head arrived, so DATA and trailers may follow: the
    /// request head (the stream's first frame) on a server, the final
    /// response head on a client.
    pub(crate) head_received: bool,
    /// We sent END_STREAM (half-closed local).
    pub(crate) send_closed: bool,
    /// What the peer may still send before a WINDOW_UPDATE.
    pub(crate) recv_window: i64,
    /// Bytes released by the driver and not yet announced.
    pub(crate) recv_owed: u32,
    /// What we may still send (negative after a smaller
    /// SETTINGS_INITIAL_WINDOW_SIZE).
    pub(crate) send_window: i64,
    /// `content-length` of the peer's head, held against the DATA received.
    pub(crate) content_length: Option<u64>,
    pub(crate) received: u64,
    /// Client: the request was HEAD, so the response carries no content
    /// whatever its content-length says (RFC 9110 §6.4.1).
    pub(crate) head_request: bool,
    /// Client: interim (1xx) response heads received, which are bounded.
    pub(crate) interim_heads: u8,
    /// Server: the request's priority (RFC 9218), as its field or a
    /// PRIORITY_UPDATE said, or the response's field.
    pub(crate) priority: Priority,
    /// The driver asked to send on it and was told to wait.
    pub(crate) wants_send: bool,
    /// When an incremental stream last had its turn (a connection-wide
    /// count of grants).
    pub(crate) send_turn: u64,
}

impl Stream {
    pub(crate) fn new(id: StreamId, recv_window: i64, send_window: i64) -> Self {
        Stream {
            id,
            recv_closed: false,
            head_sent: false,
            head_received: false,
            send_closed: false,
            recv_window,
            recv_owed: 0,
            send_window,
            content_length: None,
            received: 0,
            head_request: false,
            interim_heads: 0,
            priority: Priority::default(),
            wants_send: false,
            send_turn: 0,
        }
    }
}

/// The open streams: at most `max_concurrent_streams` entries, searched
/// linearly (a handful in practice, where a scan beats hashing).
#[derive(Debug, Default)]
pub(crate) struct StreamTable {
    streams: Vec<Stream>,
}

impl StreamTable {
    pub(crate) fn len(&self) -> usize {
        self.streams.len()
    }

    pub(crate) fn get(&self, id: StreamId) -> Option<&Stream> {
        self.streams.iter().find(|s| s.id == id)
    }

    pub(crate) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    pub(crate) fn insert(&mut self, s: Stream) {
        self.streams.push(s);
    }

    pub(crate) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let i = self.streams.iter().position(|s| s.id == id)?;
        Some(self.streams.swap_remove(i))
    }

    /// Removes `id` when both sides have ended it.
    pub(crate) fn remove_if_done(&mut self, id: StreamId) {
        if self.get(id).is_some_and(|s| s.recv_closed && s.send_closed) {
            self.remove(id);
        }
    }

    /// Removes the streams above `last`, telling `removed` each id.
    pub(crate) fn remove_above(&mut self, last: StreamId, mut removed: impl FnMut(StreamId)) {
        self.streams.retain(|s| {
            let keep = s.id <= last;
            if !keep {
                removed(s.id);
            }
            keep
        });
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Stream> {
        self.streams.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.streams.iter_mut()
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.streams.capacity()
    }

    /// Frees the table's allocation when it is empty.
    pub(crate) fn release_idle(&mut self) {
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
    }
}

/// How many streams reset by this side are remembered at the least.
const RECENT_RESETS: usize = 16;

/// The last streams this side reset (or refused, or ignored): frames the
/// peer sent on them before it learned of it are dropped, not answered.
#[derive(Debug)]
pub(crate) struct RecentResets {
    ids: Box<[StreamId]>,
    next: usize,
}

impl Default for RecentResets {
    fn default() -> Self {
        RecentResets::remembering(RECENT_RESETS)
    }
}

impl RecentResets {
    /// Remembers the last `n` resets (at least [`RECENT_RESETS`]). A client
    /// remembers as many as it has streams open at once: a pooled upstream
    /// connection whose client went away may see all of them cancelled
    /// within one round trip, with the origin's frames for each in flight.
    pub(crate) fn remembering(n: usize) -> Self {
        RecentResets {
            ids: vec![0; n.max(RECENT_RESETS)].into_boxed_slice(),
            next: 0,
        }
    }

    pub(crate) fn add(&mut self, id: StreamId) {
        self.ids[self.next] = id;
        self.next = (self.next + 1) % self.ids.len();
    }

    pub(crate) fn contains(&self, id: StreamId) -> bool {
        id != 0 && self.ids.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_resets_forget_the_oldest() {
        let mut r = RecentResets::default();
        assert!(!r.contains(0));
        for id in (1..=2 * RECENT_RESETS as u32 + 1).step_by(2) {
            r.add(id);
        }
        assert!(!r.contains(1));
        assert!(r.contains(3) && r.contains(2 * RECENT_RESETS as u32 + 1));
        let mut r = RecentResets::remembering(100);
        for id in (1..=199).step_by(2) {
            r.add(id);
        }
        assert!(r.contains(1) && r.contains(199));
        r.add(201);
        assert!(!r.contains(1));
    }
}
