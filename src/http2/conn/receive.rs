//! The receiving side of a [`ServerConnection`]: the preface, then each
//! frame checked against RFC 9113 §4–§6 and applied: header blocks decoded
//! into the request head, DATA held to the flow-control windows and the
//! content-length, and the budgets that end a connection whose client floods
//! it with frames that cost the server more than they cost the client.
//!
//! Inert frames (CVE-2019-9513 and 9516's family: PRIORITY, WINDOW_UPDATE,
//! RST_STREAM on a closed stream, acks of nothing, unknown frame types) make
//! no output, so the output limits never stop a client that sends them in a
//! loop: each costs a parse and a stream lookup, forever. They share one
//! token bucket, `max_inert_frames` (2,000 by default, ten times the control
//! frames: browsers send a few PRIORITY frames per page, and some clients a
//! WINDOW_UPDATE per DATA frame), refilled at a tenth a second. A download
//! must never trip it, however long, so the bucket is not the only source:
//! each DATA frame the server writes earns two inert frames (the stream's
//! and the connection's WINDOW_UPDATE that answer it), and each request
//! taken earns one (its PRIORITY, or the RST_STREAM that crosses its
//! answer), spent first. Refilling by work done rather than by noticing
//! which WINDOW_UPDATE "unblocked" something keeps the rule exact for a
//! client that batches or lags its updates, and bounds a flood at two
//! frames per DATA frame the client made the server write. nginx counts
//! PRIORITY frames against a limit that grows with the streams opened, and
//! closes a connection whose input is mostly frames without payload; this
//! is the same idea with the time refill the other budgets use.

use std::time::Instant;

use super::request_head::HeadKind;
use super::streams::Stream;
use super::{ConnError, Events, PendingBlock, ServerConnection, StreamId};
use crate::http2::frame::{self, flag, kind, setting, FrameHead};
use crate::http2::ErrorCode;

/// The smallest limit on a header block's encoded size across
/// CONTINUATION frames, whatever `max_header_list_size` says.
const MIN_BLOCK_LIMIT: usize = 16 * 1024;

/// How a header block's fields are used once decoded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockUse {
    /// A new stream's request head.
    Request,
    /// The trailers of an open stream.
    Trailers,
    /// Decoded only to keep the HPACK table in step.
    Discard,
}

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
        if let Some(code) = self.dead {
            return Err(ConnError { code });
        }
        let mut pos = 0;
        if !self.preface_done {
            let n = input.len().min(frame::PREFACE.len());
            if input[..n] != frame::PREFACE[..n] {
                // Not HTTP/2 at all: no GOAWAY, the driver just closes.
                self.dead = Some(ErrorCode::ProtocolError);
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
        while input.len() - pos >= frame::HEAD_LEN {
            let head = FrameHead::parse(&input[pos..]);
            self.refuse_if(
                head.len > self.limits.max_frame_size as usize,
                ErrorCode::FrameSizeError,
            )?;
            let end = pos + frame::HEAD_LEN + head.len;
            if end > input.len() {
                break;
            }
            self.frame(head, &input[pos + frame::HEAD_LEN..end], now, events)?;
            pos = end;
        }
        Ok(pos)
    }

    fn frame(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(
            !self.settings_received && (h.kind != kind::SETTINGS || h.has(flag::ACK)),
            ErrorCode::ProtocolError,
        )?;
        if let Some(p) = self.pending {
            self.refuse_if(
                h.kind != kind::CONTINUATION || h.stream != p.stream,
                ErrorCode::ProtocolError,
            )?;
        }
        match h.kind {
            kind::DATA => self.on_data(h, payload, now, events),
            kind::HEADERS => self.on_headers(h, payload, now, events),
            kind::PRIORITY => self.on_priority(h, payload, now, events),
            kind::RST_STREAM => self.on_rst_stream(h, payload, now, events),
            kind::SETTINGS => self.on_settings(h, payload, now, events),
            kind::PUSH_PROMISE => Err(self.connection_error(ErrorCode::ProtocolError)),
            kind::PING => self.on_ping(h, payload, now),
            kind::GOAWAY => self.on_goaway(h, payload),
            kind::WINDOW_UPDATE => self.on_window_update(h, payload, now, events),
            kind::CONTINUATION => self.on_continuation(h, payload, now, events),
            // Unknown types are ignored (RFC 9113 §4.1), so they do no work.
            _ => self.inert_frame(now),
        }
    }

    /// Counts a frame that carries nothing against its budget.
    fn empty_frame(&mut self, now: Instant) -> Result<(), ConnError> {
        if self.empty_budget.take(now) {
            Ok(())
        } else {
            Err(self.connection_error(ErrorCode::EnhanceYourCalm))
        }
    }

    /// Counts a frame that makes no output and changes nothing the client
    /// waits for: an earned credit first, then the bucket.
    fn inert_frame(&mut self, now: Instant) -> Result<(), ConnError> {
        if self.inert_credits > 0 {
            self.inert_credits -= 1;
            Ok(())
        } else if self.inert_budget.take(now) {
            Ok(())
        } else {
            Err(self.connection_error(ErrorCode::EnhanceYourCalm))
        }
    }

    /// Resets `stream` for the client's error: RST_STREAM, the driver told
    /// when it knew the stream, and the reset counted against
    /// `max_error_resets`.
    fn stream_error(
        &mut self,
        stream: StreamId,
        code: ErrorCode,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        frame::write_rst_stream(&mut self.out, stream, code.to_u32());
        if self.streams.remove(stream).is_some() {
            events.reset(stream, code);
        }
        self.recent_resets.add(stream);
        self.error_resets += 1;
        self.refuse_if(
            self.error_resets > self.limits.max_error_resets,
            ErrorCode::EnhanceYourCalm,
        )?;
        Ok(())
    }

    /// Frames on a stream not in the table and at or under the highest id
    /// used are on a closed stream; these are dropped when the server ended
    /// the stream (the client may not have known yet).
    fn dropped_stream(&self, id: StreamId) -> bool {
        self.recent_resets.contains(id) || self.goaway_sent.is_some_and(|last| id > last)
    }

    fn on_data(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(h.stream == 0, ErrorCode::ProtocolError)?;
        let Some((data, pad)) = frame::unpad(h.has(flag::PADDED), payload) else {
            return Err(self.connection_error(ErrorCode::ProtocolError));
        };
        let end_stream = h.has(flag::END_STREAM);
        // Padding alone carries nothing either.
        if data.is_empty() && !end_stream {
            self.empty_frame(now)?;
        }
        let len = payload.len() as i64;
        self.refuse_if(len > self.conn_recv_window, ErrorCode::FlowControlError)?;
        self.conn_recv_window -= len;
        let id = h.stream;
        let Some(s) = self.streams.get_mut(id) else {
            self.refuse_if(id > self.max_seen, ErrorCode::ProtocolError)?;
            self.release_connection(payload.len());
            if self.dropped_stream(id) {
                return Ok(());
            }
            return self.stream_error(id, ErrorCode::StreamClosed, events);
        };
        if s.recv_closed {
            self.release_connection(payload.len());
            return self.stream_error(id, ErrorCode::StreamClosed, events);
        }
        if len > s.recv_window {
            self.release_connection(payload.len());
            return self.stream_error(id, ErrorCode::FlowControlError, events);
        }
        s.recv_window -= len;
        s.received += data.len() as u64;
        if let Some(cl) = s.content_length {
            if s.received > cl || (end_stream && s.received != cl) {
                self.release_connection(payload.len());
                return self.stream_error(id, ErrorCode::ProtocolError, events);
            }
        }
        s.recv_closed = end_stream;
        if pad > 0 {
            self.release(id, pad);
        }
        if !data.is_empty() || end_stream {
            events.data(id, data, end_stream);
        }
        if end_stream {
            self.streams.remove_if_done(id);
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(h.stream == 0, ErrorCode::ProtocolError)?;
        let Some((mut fragment, _)) = frame::unpad(h.has(flag::PADDED), payload) else {
            return Err(self.connection_error(ErrorCode::ProtocolError));
        };
        let mut self_dependent = false;
        if h.has(flag::PRIORITY) {
            self.refuse_if(fragment.len() < 5, ErrorCode::FrameSizeError)?;
            self_dependent = frame::read_u31(fragment) == h.stream;
            fragment = &fragment[5..];
        }
        let block = PendingBlock {
            stream: h.stream,
            end_stream: h.has(flag::END_STREAM),
            self_dependent,
        };
        if h.has(flag::END_HEADERS) {
            return self.header_block(block, fragment, events);
        }
        if fragment.is_empty() && !block.end_stream {
            self.empty_frame(now)?;
        }
        self.block.clear();
        self.pending = Some(block);
        self.append_fragment(fragment)
    }

    fn on_continuation(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        // A CONTINUATION of another stream was refused in `frame`.
        let Some(block) = self.pending else {
            return Err(self.connection_error(ErrorCode::ProtocolError));
        };
        if payload.is_empty() && !h.has(flag::END_HEADERS) {
            self.empty_frame(now)?;
        }
        self.append_fragment(payload)?;
        if !h.has(flag::END_HEADERS) {
            return Ok(());
        }
        self.pending = None;
        let joined = std::mem::take(&mut self.block);
        let r = self.header_block(block, &joined, events);
        self.block = joined;
        self.block.clear();
        r
    }

    /// Adds a fragment to the header block being joined, which may not grow
    /// past twice `max_header_list_size` (a CONTINUATION flood otherwise).
    fn append_fragment(&mut self, fragment: &[u8]) -> Result<(), ConnError> {
        let limit = (2 * self.limits.max_header_list_size as usize).max(MIN_BLOCK_LIMIT);
        self.refuse_if(
            self.block.len() + fragment.len() > limit,
            ErrorCode::EnhanceYourCalm,
        )?;
        self.block.extend_from_slice(fragment);
        Ok(())
    }

    /// Decodes a whole header block, into the head or only to keep the
    /// HPACK table in step; a decoding error is a connection error.
    fn decode_block(&mut self, block: &[u8], use_: BlockUse) -> Result<(), ConnError> {
        let result = match use_ {
            BlockUse::Discard => self.decoder.decode(block, &mut |_, _| {}),
            BlockUse::Request | BlockUse::Trailers => {
                let head = &mut self.head;
                head.begin(if use_ == BlockUse::Request {
                    HeadKind::Request
                } else {
                    HeadKind::Trailers
                });
                self.decoder.decode(block, &mut |n, v| head.push(n, v))
            }
        };
        result.map_err(|_| self.connection_error(ErrorCode::CompressionError))
    }

    /// A whole header block has arrived: a new request, trailers, or a
    /// block to decode and drop.
    fn header_block(
        &mut self,
        b: PendingBlock,
        block: &[u8],
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        let id = b.stream;
        self.refuse_if(id % 2 == 0, ErrorCode::ProtocolError)?;
        if let Some(s) = self.streams.get(id) {
            if s.recv_closed {
                self.decode_block(block, BlockUse::Discard)?;
                return self.stream_error(id, ErrorCode::StreamClosed, events);
            }
            return self.trailers(b, block, events);
        }
        if id <= self.max_seen {
            if self.dropped_stream(id) {
                return self.decode_block(block, BlockUse::Discard);
            }
            // The stream that was just closed, or one skipped over (which
            // RFC 9113 §5.1.1 makes a PROTOCOL_ERROR).
            let code = if id == self.max_seen {
                ErrorCode::StreamClosed
            } else {
                ErrorCode::ProtocolError
            };
            return Err(self.connection_error(code));
        }
        self.max_seen = id;
        // After our GOAWAY, or past the stream limit: refused, which tells
        // the client it may retry the request on another connection.
        if self.goaway_sent.is_some()
            || self.peer_goaway
            || self.streams.len() >= self.limits.max_concurrent_streams as usize
        {
            self.decode_block(block, BlockUse::Discard)?;
            frame::write_rst_stream(&mut self.out, id, ErrorCode::RefusedStream.to_u32());
            self.recent_resets.add(id);
            return Ok(());
        }
        self.decode_block(block, BlockUse::Request)?;
        if b.self_dependent || self.head.finish(b.end_stream).is_err() {
            return self.stream_error(id, ErrorCode::ProtocolError, events);
        }
        // Until the client acknowledges our SETTINGS it may assume the
        // default window.
        let recv_window = if self.settings_acked {
            self.limits.initial_stream_window
        } else {
            self.limits.initial_stream_window.max(frame::DEFAULT_WINDOW)
        };
        let mut s = Stream::new(id, i64::from(recv_window), self.peer_initial_window);
        s.recv_closed = b.end_stream;
        s.content_length = self.head.content_length();
        self.streams.insert(s);
        self.last_taken = id;
        self.inert_credits += 1;
        events.request(id, &self.head, b.end_stream);
        Ok(())
    }

    /// A second header block on an open stream: its trailers, which must
    /// end it.
    fn trailers(
        &mut self,
        b: PendingBlock,
        block: &[u8],
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        let id = b.stream;
        self.decode_block(block, BlockUse::Trailers)?;
        if !b.end_stream || b.self_dependent || self.head.finish(true).is_err() {
            return self.stream_error(id, ErrorCode::ProtocolError, events);
        }
        let Some(s) = self.streams.get_mut(id) else {
            return Ok(());
        };
        if s.content_length.is_some_and(|cl| cl != s.received) {
            return self.stream_error(id, ErrorCode::ProtocolError, events);
        }
        s.recv_closed = true;
        events.trailers(id, &self.head);
        self.streams.remove_if_done(id);
        Ok(())
    }

    fn on_priority(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        // Pier does not schedule by priority (RFC 9113 §5.3.2 deprecates
        // it): a valid PRIORITY frame does nothing.
        self.inert_frame(now)?;
        self.refuse_if(h.stream == 0, ErrorCode::ProtocolError)?;
        if payload.len() != 5 {
            return self.stream_error(h.stream, ErrorCode::FrameSizeError, events);
        }
        if frame::read_u31(payload) == h.stream {
            return self.stream_error(h.stream, ErrorCode::ProtocolError, events);
        }
        Ok(())
    }

    fn on_rst_stream(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(
            h.stream == 0 || h.stream > self.max_seen,
            ErrorCode::ProtocolError,
        )?;
        self.refuse_if(payload.len() != 4, ErrorCode::FrameSizeError)?;
        if self.streams.remove(h.stream).is_some() {
            events.reset(h.stream, ErrorCode::from_u32(frame::read_u32(payload)));
            return Ok(());
        }
        // A stream already closed: nothing to do.
        self.inert_frame(now)
    }

    fn on_settings(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        if h.has(flag::ACK) {
            self.refuse_if(!payload.is_empty(), ErrorCode::FrameSizeError)?;
            if self.settings_acked {
                // Only one SETTINGS of ours was ever sent.
                return self.inert_frame(now);
            }
            self.settings_acked = true;
            // Streams opened before the acknowledgement were given the
            // default window; our smaller one applies to them now, as the
            // client applies it (RFC 9113 §6.9.2).
            let shrink = frame::DEFAULT_WINDOW.saturating_sub(self.limits.initial_stream_window);
            for s in self.streams.iter_mut() {
                s.recv_window -= i64::from(shrink);
            }
            return Ok(());
        }
        self.refuse_if(payload.len() % 6 != 0, ErrorCode::FrameSizeError)?;
        let within = self.control_budget.take(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)?;
        self.settings_received = true;
        let mut windows_grew = false;
        for s in payload.chunks_exact(6) {
            let value = frame::read_u32(&s[2..]);
            match u16::from_be_bytes([s[0], s[1]]) {
                setting::HEADER_TABLE_SIZE => self.encoder.set_peer_table_size(value),
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(self.connection_error(ErrorCode::ProtocolError));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    let value = i64::from(value);
                    self.refuse_if(value > frame::MAX_WINDOW, ErrorCode::FlowControlError)?;
                    let delta = value - self.peer_initial_window;
                    self.peer_initial_window = value;
                    let mut overflow = false;
                    for s in self.streams.iter_mut() {
                        s.send_window += delta;
                        overflow |= s.send_window > frame::MAX_WINDOW;
                    }
                    self.refuse_if(overflow, ErrorCode::FlowControlError)?;
                    windows_grew |= delta > 0;
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(self.connection_error(ErrorCode::ProtocolError));
                    }
                    self.peer_max_frame = value as usize;
                }
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.out);
        if windows_grew {
            events.send_window();
        }
        Ok(())
    }

    fn on_ping(&mut self, h: FrameHead, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() != 8, ErrorCode::FrameSizeError)?;
        if h.has(flag::ACK) {
            // The server sends no PING: an ack of nothing.
            return self.inert_frame(now);
        }
        let within = self.control_budget.take(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)?;
        frame::write_ping_ack(&mut self.out, payload);
        Ok(())
    }

    fn on_goaway(&mut self, h: FrameHead, payload: &[u8]) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() < 8, ErrorCode::FrameSizeError)?;
        self.peer_goaway = true;
        Ok(())
    }

    fn on_window_update(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        events: &mut dyn Events,
    ) -> Result<(), ConnError> {
        self.refuse_if(payload.len() != 4, ErrorCode::FrameSizeError)?;
        self.inert_frame(now)?;
        let inc = i64::from(frame::read_u31(payload));
        if h.stream == 0 {
            self.refuse_if(inc == 0, ErrorCode::ProtocolError)?;
            self.conn_send_window += inc;
            self.refuse_if(
                self.conn_send_window > frame::MAX_WINDOW,
                ErrorCode::FlowControlError,
            )?;
            events.send_window();
            return Ok(());
        }
        self.refuse_if(h.stream > self.max_seen, ErrorCode::ProtocolError)?;
        if self.dropped_stream(h.stream) {
            return Ok(());
        }
        if inc == 0 {
            return self.stream_error(h.stream, ErrorCode::ProtocolError, events);
        }
        let Some(s) = self.streams.get_mut(h.stream) else {
            return Ok(());
        };
        s.send_window += inc;
        if s.send_window > frame::MAX_WINDOW {
            return self.stream_error(h.stream, ErrorCode::FlowControlError, events);
        }
        events.send_window();
        Ok(())
    }
}
