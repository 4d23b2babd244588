//! The receiving side of a connection in either role: frames cut from the
//! input and checked against RFC 9113 §4–§6, and every frame applied but
//! what a whole header block means, which goes to the role: DATA held to
//! the flow-control windows and the content-length, header blocks joined
//! across CONTINUATION frames (bounded), SETTINGS, PING, WINDOW_UPDATE,
//! RST_STREAM, PRIORITY, PRIORITY_UPDATE (taken by a server, a connection
//! error to a client), GOAWAY and PUSH_PROMISE, and the flood budgets of
//! `budget.rs` charged as they come.

use std::time::Instant;

use super::{ConnCore, ConnError, PendingBlock, Role, RoleSide, SHUTDOWN_PING};
use crate::http::priority::Priority;
use crate::http2::frame::{self, flag, kind, setting, FrameHead};
use crate::http2::ErrorCode;

/// The smallest limit on a header block's encoded size across
/// CONTINUATION frames, whatever `max_header_list_size` says.
const MIN_BLOCK_LIMIT: usize = 16 * 1024;

impl ConnCore {
    /// Reads whole frames from `input`; returns how many bytes were used (a
    /// partial frame is left for the next call, with more bytes after it).
    /// Replies the protocol asks for (SETTINGS ack, PING ack, RST_STREAM,
    /// WINDOW_UPDATE) are queued in the output.
    pub(crate) fn receive_frames(
        &mut self,
        input: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
    ) -> Result<usize, ConnError> {
        if let Some(code) = self.dead {
            return Err(ConnError { code });
        }
        let mut pos = 0;
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
            self.frame(head, &input[pos + frame::HEAD_LEN..end], now, side)?;
            pos = end;
        }
        Ok(pos)
    }

    fn frame(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        // The peer's preface ends in its SETTINGS (RFC 9113 §3.4).
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
            kind::DATA => self.on_data(h, payload, now, side),
            kind::HEADERS => self.on_headers(h, payload, now, side),
            kind::PRIORITY => self.on_priority(h, payload, now, side),
            kind::RST_STREAM => self.on_rst_stream(h, payload, now, side),
            kind::SETTINGS => self.on_settings(h, payload, now, side),
            // A client never sends it; a server may not, as we turned push
            // off (RFC 9113 §8.4).
            kind::PUSH_PROMISE => Err(self.connection_error(ErrorCode::ProtocolError)),
            kind::PING => self.on_ping(h, payload, now),
            kind::GOAWAY => self.on_goaway(h, payload, side),
            kind::WINDOW_UPDATE => self.on_window_update(h, payload, now, side),
            kind::CONTINUATION => self.on_continuation(h, payload, now, side),
            kind::PRIORITY_UPDATE if self.role == Role::Server => {
                self.on_priority_update(h, payload, now, side)
            }
            // Only a client sends it: one from a server is a connection
            // error (RFC 9218 §7.1).
            kind::PRIORITY_UPDATE => Err(self.connection_error(ErrorCode::ProtocolError)),
            // Unknown types are ignored (RFC 9113 §4.1), so they do no work.
            _ => self.inert_frame(now),
        }
    }

    fn on_data(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
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
            let idle = self.is_idle(id);
            self.refuse_if(idle, ErrorCode::ProtocolError)?;
            self.release_connection(payload.len());
            if self.dropped_stream(id) {
                return Ok(());
            }
            return self.stream_error(id, ErrorCode::StreamClosed, side);
        };
        if s.recv_closed {
            self.release_connection(payload.len());
            return self.stream_error(id, ErrorCode::StreamClosed, side);
        }
        // DATA before the final response head (RFC 9113 §8.1); a server's
        // streams start with their head.
        if !s.head_received {
            self.release_connection(payload.len());
            return self.stream_error(id, ErrorCode::ProtocolError, side);
        }
        if len > s.recv_window {
            self.release_connection(payload.len());
            return self.stream_error(id, ErrorCode::FlowControlError, side);
        }
        s.recv_window -= len;
        s.received += data.len() as u64;
        if let Some(cl) = s.content_length {
            if s.received > cl || (end_stream && s.received != cl) {
                self.release_connection(payload.len());
                return self.stream_error(id, ErrorCode::ProtocolError, side);
            }
        }
        s.recv_closed = end_stream;
        if pad > 0 {
            self.release(id, pad);
        }
        if !data.is_empty() || end_stream {
            side.data(id, data, end_stream);
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
        side: &mut dyn RoleSide,
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
            return side.header_block(self, block, fragment);
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
        side: &mut dyn RoleSide,
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
        let r = side.header_block(self, block, &joined);
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

    fn on_priority(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        // Pier does not schedule by priority (RFC 9113 §5.3.2 deprecates
        // it): a valid PRIORITY frame does nothing.
        self.inert_frame(now)?;
        self.refuse_if(h.stream == 0, ErrorCode::ProtocolError)?;
        if payload.len() != 5 {
            return self.stream_error(h.stream, ErrorCode::FrameSizeError, side);
        }
        if frame::read_u31(payload) == h.stream {
            return self.stream_error(h.stream, ErrorCode::ProtocolError, side);
        }
        Ok(())
    }

    /// RFC 9218 §7.1: a new priority for an open stream, or kept (a few)
    /// for one not opened yet; one for a closed stream is dropped. Counted
    /// as an inert frame, so they cannot come without end.
    fn on_priority_update(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        self.inert_frame(now)?;
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() < 4, ErrorCode::FrameSizeError)?;
        let id = frame::read_u31(payload);
        self.refuse_if(id == 0, ErrorCode::ProtocolError)?;
        let mut priority = Priority::default();
        if id % 2 == 0 || !priority.apply(&payload[4..]) {
            // No push stream exists; a value that is not a dictionary
            // changes nothing.
            return Ok(());
        }
        if self.is_idle(id) {
            self.pending_priorities.keep(id, priority);
        } else if self.set_priority(id, priority) {
            // The order of the streams waiting to send may have changed.
            side.send_window();
        }
        Ok(())
    }

    fn on_rst_stream(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        let idle = h.stream == 0 || self.is_idle(h.stream);
        self.refuse_if(idle, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() != 4, ErrorCode::FrameSizeError)?;
        if self.streams.remove(h.stream).is_some() {
            side.reset(h.stream, ErrorCode::from_u32(frame::read_u32(payload)));
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
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        if h.has(flag::ACK) {
            self.refuse_if(!payload.is_empty(), ErrorCode::FrameSizeError)?;
            if self.settings_acked {
                // Only one SETTINGS of ours was ever sent.
                return self.inert_frame(now);
            }
            self.settings_acked = true;
            // Our HEADER_TABLE_SIZE binds the peer's encoder from now on.
            self.decoder.settings_acknowledged();
            // Streams opened before the acknowledgement were given the
            // default window; our smaller one applies to them now, as the
            // peer applies it (RFC 9113 §6.9.2).
            let shrink = frame::DEFAULT_WINDOW.saturating_sub(self.limits.initial_stream_window);
            for s in self.streams.iter_mut() {
                s.recv_window -= i64::from(shrink);
            }
            return Ok(());
        }
        self.refuse_if(payload.len() % 6 != 0, ErrorCode::FrameSizeError)?;
        let within = self.budgets.control_frame(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)?;
        self.settings_received = true;
        let mut windows_grew = false;
        for s in payload.chunks_exact(6) {
            let value = frame::read_u32(&s[2..]);
            match u16::from_be_bytes([s[0], s[1]]) {
                setting::HEADER_TABLE_SIZE => self.encoder.set_peer_table_size(value),
                // 0 or 1; a server may not turn push on (RFC 9113 §6.5.2).
                setting::ENABLE_PUSH if value > 1 || (value == 1 && self.role == Role::Client) => {
                    return Err(self.connection_error(ErrorCode::ProtocolError));
                }
                // 0 or 1 (RFC 8441 §3); once offered, it is never taken back.
                setting::ENABLE_CONNECT_PROTOCOL
                    if value > 1 || (value == 0 && self.peer_connect_protocol) =>
                {
                    return Err(self.connection_error(ErrorCode::ProtocolError));
                }
                setting::ENABLE_CONNECT_PROTOCOL => self.peer_connect_protocol = value == 1,
                setting::MAX_CONCURRENT_STREAMS => self.peer_max_concurrent_streams = value,
                setting::MAX_HEADER_LIST_SIZE => self.peer_max_header_list = value,
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
        frame::write_settings_ack(self.out.frames());
        if windows_grew {
            side.send_window();
        }
        side.settings();
        Ok(())
    }

    fn on_ping(&mut self, h: FrameHead, payload: &[u8], now: Instant) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() != 8, ErrorCode::FrameSizeError)?;
        if h.has(flag::ACK) {
            if self.shutdown_ping && payload == SHUTDOWN_PING {
                // Every stream the client opened before it saw the first
                // GOAWAY has come: the final one names the last.
                self.goaway(ErrorCode::NoError);
                return Ok(());
            }
            if self.pings_in_flight > 0 {
                self.pings_in_flight -= 1;
                return Ok(());
            }
            // An ack of nothing.
            return self.inert_frame(now);
        }
        let within = self.budgets.control_frame(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)?;
        frame::write_ping_ack(self.out.frames(), payload);
        Ok(())
    }

    fn on_goaway(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        self.refuse_if(h.stream != 0, ErrorCode::ProtocolError)?;
        self.refuse_if(payload.len() < 8, ErrorCode::FrameSizeError)?;
        let last = frame::read_u31(payload);
        let code = ErrorCode::from_u32(frame::read_u32(&payload[4..]));
        // A later GOAWAY may lower the last stream, never raise it
        // (RFC 9113 §6.8).
        let last = self.peer_goaway.map_or(last, |before| before.min(last));
        self.peer_goaway = Some(last);
        side.goaway(self, last, code);
        Ok(())
    }

    fn on_window_update(
        &mut self,
        h: FrameHead,
        payload: &[u8],
        now: Instant,
        side: &mut dyn RoleSide,
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
            side.send_window();
            return Ok(());
        }
        let idle = self.is_idle(h.stream);
        self.refuse_if(idle, ErrorCode::ProtocolError)?;
        if self.dropped_stream(h.stream) {
            return Ok(());
        }
        if inc == 0 {
            return self.stream_error(h.stream, ErrorCode::ProtocolError, side);
        }
        let Some(s) = self.streams.get_mut(h.stream) else {
            return Ok(());
        };
        s.send_window += inc;
        if s.send_window > frame::MAX_WINDOW {
            return self.stream_error(h.stream, ErrorCode::FlowControlError, side);
        }
        side.send_window();
        Ok(())
    }
}
