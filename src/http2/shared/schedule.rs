//! Which stream's DATA goes next on a server (RFC 9218 §10): the driver
//! asks for send capacity stream by stream, and is told to wait only when
//! another stream that wants to send, and could, goes first: lower urgency
//! first; at one urgency, non-incremental streams one after another in
//! stream-id order, then incremental ones in turns of
//! [`INCREMENTAL_CHUNK`]. A stream told to wait is marked, so the others
//! see it, and the driver wakes [`ConnCore::next_sender`] when a turn may
//! have passed. With one stream open nothing is looked at; with more, each
//! decision is one pass over the open streams.

use super::streams::Stream;
use super::{ConnCore, Role, StreamId};
use crate::http::priority::Priority;

/// What an incremental stream sends before the next one of its urgency
/// has its turn.
pub(crate) const INCREMENTAL_CHUNK: usize = 16 * 1024;

/// Orders streams for sending: lower first.
fn rank(s: &Stream) -> (u8, bool, u64, StreamId) {
    let turn = if s.priority.incremental {
        s.send_turn
    } else {
        0
    };
    (s.priority.urgency, s.priority.incremental, turn, s.id)
}

impl ConnCore {
    /// Whether send capacity is shared out by priority: on a server with
    /// more than one stream.
    pub(crate) fn scheduling(&self) -> bool {
        self.role == Role::Server && self.streams.len() > 1
    }

    /// The stream that wants to send, could, and goes before `stream`;
    /// and whether any stream but `stream` waits for its turn at all.
    pub(crate) fn sender_ahead_of(&self, stream: StreamId) -> (Option<StreamId>, bool) {
        let Some(me) = self.streams.get(stream) else {
            return (None, true);
        };
        let mine = rank(me);
        let others_wait = self.streams.iter().any(|s| s.id != stream && s.wants_send);
        let ahead = self
            .ready_senders()
            .filter(|s| s.id != stream && rank(s) < mine)
            .min_by_key(|s| rank(s))
            .map(|s| s.id);
        (ahead, others_wait)
    }

    /// The stream whose turn it is among those that asked to send and
    /// were told to wait, when one could send now (the last one left too:
    /// it may have waited for one that just ended).
    pub(crate) fn next_sender(&self) -> Option<StreamId> {
        if self.role != Role::Server || !self.some_waiting {
            return None;
        }
        self.ready_senders().min_by_key(|s| rank(s)).map(|s| s.id)
    }

    fn ready_senders(&self) -> impl Iterator<Item = &Stream> {
        let conn_open = self.conn_send_window > 0 && self.dead.is_none();
        self.streams
            .iter()
            .filter(move |s| conn_open && s.wants_send && s.head_sent && !s.send_closed)
            .filter(|s| s.send_window > 0)
    }

    /// Sets `stream`'s priority; false when it is not open.
    pub(crate) fn set_priority(&mut self, stream: StreamId, priority: Priority) -> bool {
        match self.streams.get_mut(stream) {
            Some(s) => {
                s.priority = priority;
                true
            }
            None => false,
        }
    }
}
