//! The receiving side of a [`ClientConnection`]: the shared core applies
//! the origin's frames; what is the client's alone is what a header block
//! means here (an interim or final response head, or trailers, on a stream
//! we opened) and what the origin's GOAWAY does to the streams it did not
//! process.

use std::time::Instant;

use super::response_head::HeadKind;
use super::{ClientConnection, ClientEvents, ConnError, ResponseHead, StreamId};
use crate::http2::shared::{ConnCore, PendingBlock, RoleSide};
use crate::http2::ErrorCode;

/// Interim (1xx) heads one response may have; more is a hostile origin
/// making us decode heads that never end (the stream is reset).
const MAX_INTERIM_HEADS: u8 = 8;

impl ClientConnection {
    /// Reads the origin's bytes: whole frames, its SETTINGS first. Returns
    /// how many bytes were used (a partial frame is left for the next call,
    /// with more bytes after it). `now` times the flood budgets. Replies
    /// the protocol asks for (SETTINGS ack, PING ack, RST_STREAM,
    /// WINDOW_UPDATE) are queued in the output.
    pub fn receive(
        &mut self,
        input: &[u8],
        now: Instant,
        events: &mut dyn ClientEvents,
    ) -> Result<usize, ConnError> {
        let mut side = ClientSide {
            head: &mut self.head,
            events,
        };
        self.core.receive_frames(input, now, &mut side)
    }
}

/// The client's part of receiving: its head and its caller's events.
struct ClientSide<'a> {
    head: &'a mut ResponseHead,
    events: &'a mut dyn ClientEvents,
}

impl ClientSide<'_> {
    /// Decodes a block into the head as `kind`.
    fn decode(
        &mut self,
        core: &mut ConnCore,
        block: &[u8],
        kind: HeadKind,
    ) -> Result<(), ConnError> {
        let head = &mut *self.head;
        head.begin(kind);
        core.decode_block(block, &mut |n, v| head.push(n, v))
    }

    /// A response head, interim or final, on an open stream.
    fn response(
        &mut self,
        core: &mut ConnCore,
        b: PendingBlock,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let id = b.stream;
        self.decode(core, block, HeadKind::Response)?;
        // Malformed (RFC 9113 §8.1.1), or past what we said we take.
        if b.self_dependent || self.head.finish(b.end_stream).is_err() || self.head.oversized() {
            return core.stream_error(id, ErrorCode::ProtocolError, self);
        }
        let Some(s) = core.streams.get_mut(id) else {
            return Ok(());
        };
        let status = self.head.status();
        if self.head.is_interim() {
            s.interim_heads += 1;
            if s.interim_heads > MAX_INTERIM_HEADS {
                return core.stream_error(id, ErrorCode::ProtocolError, self);
            }
            self.events.response(id, self.head, false);
            return Ok(());
        }
        // A response that has no content whatever its content-length says
        // (RFC 9110 §6.4.1) may have no DATA either.
        let expected = if s.head_request || status == 204 || status == 304 {
            Some(0)
        } else {
            self.head.content_length()
        };
        if b.end_stream && expected.is_some_and(|n| n > 0) {
            return core.stream_error(id, ErrorCode::ProtocolError, self);
        }
        s.head_received = true;
        s.content_length = expected;
        s.recv_closed = b.end_stream;
        self.events.response(id, self.head, b.end_stream);
        if b.end_stream {
            core.streams.remove_if_done(id);
        }
        Ok(())
    }

    /// A header block after the final response head: its trailers, which
    /// must end it.
    fn trailers(
        &mut self,
        core: &mut ConnCore,
        b: PendingBlock,
        block: &[u8],
    ) -> Result<(), ConnError> {
        self.decode(core, block, HeadKind::Trailers)?;
        let valid = self.head.finish(true).is_ok() && !self.head.oversized();
        if core.end_with_trailers(b, valid, self)? {
            self.events.trailers(b.stream, self.head);
        }
        Ok(())
    }
}

impl RoleSide for ClientSide<'_> {
    /// A whole header block has arrived: a response head, trailers, or a
    /// block to decode and drop.
    fn header_block(
        &mut self,
        core: &mut ConnCore,
        b: PendingBlock,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let id = b.stream;
        // A stream the origin would have opened (push is off), or a
        // response to a request never sent.
        core.refuse_if(core.is_idle(id), ErrorCode::ProtocolError)?;
        let Some(s) = core.streams.get(id) else {
            // A stream closed: ours to ignore when we ended it, else the
            // origin sends on a stream it ended (RFC 9113 §5.1).
            core.decode_block(block, &mut |_, _| {})?;
            if core.dropped_stream(id) {
                return Ok(());
            }
            return core.stream_error(id, ErrorCode::StreamClosed, self);
        };
        if s.recv_closed {
            core.decode_block(block, &mut |_, _| {})?;
            return core.stream_error(id, ErrorCode::StreamClosed, self);
        }
        if s.head_received {
            return self.trailers(core, b, block);
        }
        self.response(core, b, block)
    }

    /// Streams above `last_stream` were never processed: they end here as
    /// refused, which tells the caller it may retry them elsewhere.
    fn goaway(&mut self, core: &mut ConnCore, last_stream: StreamId, code: ErrorCode) {
        self.events.goaway(last_stream, code);
        let events = &mut *self.events;
        core.streams
            .remove_above(last_stream, |id| events.reset(id, ErrorCode::RefusedStream));
    }

    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        self.events.data(stream, data, end_stream);
    }

    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        self.events.reset(stream, code);
    }

    fn send_window(&mut self) {
        self.events.send_window();
    }

    fn settings(&mut self) {
        self.events.settings();
    }
}
