//! The receiving side of a [`ServerConnection`]: the client's preface, then
//! the frames, which the shared core applies; what is the server's alone is
//! what a header block means here: a new request (refused past the stream
//! limit or after GOAWAY), its trailers, or a block decoded only to keep
//! the HPACK table in step.

use std::time::Instant;

use super::{ConnError, Events, RequestHead, ServerConnection, StreamId};
use crate::http::priority::Priority;
use crate::http::request_fields::HeadKind;
use crate::http2::frame;
use crate::http2::shared::streams::Stream;
use crate::http2::shared::{ConnCore, PendingBlock, RoleSide};
use crate::http2::ErrorCode;

impl ServerConnection {
    /// Reads the client's bytes: first the preface, then whole frames.
    /// Returns how many bytes were used (a partial frame is left for the next
    /// call, with more bytes after it). `now` times the flood budgets.
    /// Replies the protocol asks for (SETTINGS ack, PING ack, RST_STREAM,
    /// WINDOW_UPDATE) are queued in the output.
    pub fn receive(
        &mut self,
        input: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<usize, ConnError> {
        if let Some(code) = self.core.dead {
            return Err(ConnError { code });
        }
        let mut pos = 0;
        if !self.preface_done {
            let n = input.len().min(frame::PREFACE.len());
            if input[..n] != frame::PREFACE[..n] {
                // Not HTTP/2 at all: no GOAWAY, the driver just closes.
                self.core.dead = Some(ErrorCode::ProtocolError);
                return Err(ConnError {
                    code: ErrorCode::ProtocolError,
                });
            }
            if n < frame::PREFACE.len() {
                return Ok(0);
            }
            self.preface_done = true;
            pos = n;
        }
        let mut side = ServerSide {
            head: &mut self.head,
            events,
        };
        let used = self.core.receive_frames(&input[pos..], now, &mut side)?;
        Ok(pos + used)
    }
}

/// The server's part of receiving: its head and its driver's events.
struct ServerSide<'a> {
    head: &'a mut RequestHead,
    events: &'a mut dyn Events,
}

impl ServerSide<'_> {
    /// Decodes a block into the head as `kind`. A request block that is the
    /// last request block again (clients repeat a head of indices) leaves
    /// the head as that one made it, marked [`RequestHead::repeated`].
    fn decode(
        &mut self,
        core: &mut ConnCore,
        block: &[u8],
        kind: HeadKind,
    ) -> Result<(), ConnError> {
        let head = &mut *self.head;
        if kind == HeadKind::Trailers {
            head.begin(kind);
            return core.decode_block(block, &mut |n, v| head.push(n, v));
        }
        // Only request blocks are decoded with the memo, and nothing but
        // this decodes into the head, so a repeat finds the head as the
        // remembered block left it.
        let mut fresh = false;
        let repeated = core.decode_block_unless_repeated(block, &mut |n, v| {
            if !fresh {
                head.begin(kind);
                fresh = true;
            }
            head.push(n, v);
        })?;
        if !repeated && !fresh {
            // An empty block: no field was pushed.
            head.begin(kind);
        }
        head.set_repeated(repeated);
        Ok(())
    }

    /// A second header block on an open stream: its trailers, which must
    /// end it.
    fn trailers(
        &mut self,
        core: &mut ConnCore,
        b: PendingBlock,
        block: &[u8],
    ) -> Result<(), ConnError> {
        self.decode(core, block, HeadKind::Trailers)?;
        let valid = self.head.finish(true).is_ok();
        if core.end_with_trailers(b, valid, self)? {
            self.events.trailers(b.stream, self.head);
        }
        Ok(())
    }
}

impl RoleSide for ServerSide<'_> {
    /// A whole header block has arrived: a new request, trailers, or a
    /// block to decode and drop.
    fn header_block(
        &mut self,
        core: &mut ConnCore,
        b: PendingBlock,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let id = b.stream;
        core.refuse_if(id % 2 == 0, ErrorCode::ProtocolError)?;
        if let Some(s) = core.streams.get(id) {
            if s.recv_closed {
                core.decode_block(block, &mut |_, _| {})?;
                return core.stream_error(id, ErrorCode::StreamClosed, self);
            }
            return self.trailers(core, b, block);
        }
        if id <= core.last_opened {
            if core.dropped_stream(id) {
                return core.decode_block(block, &mut |_, _| {});
            }
            // The stream that was just closed, or one skipped over (which
            // RFC 9113 §5.1.1 makes a PROTOCOL_ERROR).
            let code = if id == core.last_opened {
                ErrorCode::StreamClosed
            } else {
                ErrorCode::ProtocolError
            };
            return Err(core.connection_error(code));
        }
        core.last_opened = id;
        // After our GOAWAY, or past the stream limit: refused, which tells
        // the client it may retry the request on another connection.
        if core.goaway_sent.is_some()
            || core.peer_goaway.is_some()
            || core.streams.len() >= core.limits.max_concurrent_streams as usize
        {
            core.decode_block(block, &mut |_, _| {})?;
            frame::write_rst_stream(core.out.frames(), id, ErrorCode::RefusedStream.to_u32());
            core.recent_resets.add(id);
            return Ok(());
        }
        self.decode(core, block, HeadKind::Request)?;
        if b.self_dependent || self.head.finish(b.end_stream).is_err() {
            // Not delivered: the driver's last built head is not this one's.
            core.decoder.forget_last();
            return core.stream_error(id, ErrorCode::ProtocolError, self);
        }
        let mut s = Stream::new(id, core.new_stream_recv_window(), core.peer_initial_window);
        s.head_received = true;
        s.recv_closed = b.end_stream;
        s.content_length = self.head.content_length();
        // A PRIORITY_UPDATE that came first wins over the field (RFC 9218 §7).
        s.priority = core.pending_priorities.take(id).unwrap_or_else(|| {
            if !self.head.has_priority() {
                return Priority::default();
            }
            Priority::from_field_lines(
                self.head
                    .fields()
                    .filter(|(name, _)| *name == b"priority")
                    .map(|(_, value)| value),
            )
        });
        core.streams.insert(s);
        core.last_taken = id;
        core.budgets.earn_inert(1);
        self.events.request(id, self.head, b.end_stream);
        Ok(())
    }

    /// A server acts on the client's GOAWAY by refusing new streams, which
    /// `header_block` reads from the core.
    fn goaway(&mut self, _: &mut ConnCore, _: StreamId, _: ErrorCode) {}

    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        self.events.data(stream, data, end_stream);
    }

    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        self.events.reset(stream, code);
    }

    fn send_window(&mut self) {
        self.events.send_window();
    }

    /// Nothing in a client's SETTINGS changes what the driver does.
    fn settings(&mut self) {}
}
