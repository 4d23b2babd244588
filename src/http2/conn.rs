//! One server-side HTTP/2 connection as a state machine over bytes: the
//! client's frames go in through [`ServerConnection::receive`], which reports
//! what they mean to an [`Events`]; the driver's answers go in through the
//! `send_*` methods; the frames to write come out of
//! [`ServerConnection::output`].
//!
//! The receiving side (frames, header blocks, flow control, the abuse
//! budgets) is in `receive.rs`; what is kept per stream in `streams.rs`; the
//! request head in `request_head.rs`. This file holds the state and the
//! sending side.

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod h2spec_harness;
mod receive;
mod request_head;
mod streams;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::Bytes;

use super::frame::{self, setting};
use super::hpack::{Decoder, Encoder};
use super::ErrorCode;
use streams::{FloodBudget, RecentResets, StreamTable};

pub use request_head::RequestHead;

/// A stream's identifier (odd: opened by the client).
pub type StreamId = u32;

/// The limits a connection enforces and announces, from `[http2]` and
/// `[http]`.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced; a stream past it is refused
    /// with RST_STREAM(REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE announced: each request body's window.
    pub initial_stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE
    /// on stream 0 right after the SETTINGS).
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE announced: larger frames are a FRAME_SIZE_ERROR.
    pub max_frame_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE announced for the decoder.
    pub header_table_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE announced: a head whose decoded size
    /// (RFC 9113 §6.5.2) is larger is delivered with
    /// [`RequestHead::oversized`] set (the driver answers 431); a header block
    /// whose encoded bytes pass twice this (16 KiB at least), across
    /// CONTINUATION frames, ends the connection (GOAWAY ENHANCE_YOUR_CALM).
    pub max_header_list_size: u32,
    /// Most fields in a head; more is `oversized` too.
    pub max_header_fields: usize,
    /// PING and SETTINGS frames (not acks) the client may send at once,
    /// refilled at a tenth of that per second; past it GOAWAY
    /// ENHANCE_YOUR_CALM.
    pub max_control_frames: u32,
    /// Streams the connection resets for the client's protocol errors before
    /// GOAWAY ENHANCE_YOUR_CALM.
    pub max_error_resets: usize,
    /// Frames that carry nothing (DATA without payload or END_STREAM,
    /// CONTINUATION without payload or END_HEADERS, ...) allowed in a burst,
    /// refilled as for `max_control_frames`; past it GOAWAY ENHANCE_YOUR_CALM.
    pub max_empty_frames: u32,
    /// Frames that make the server do nothing (PRIORITY, WINDOW_UPDATE,
    /// RST_STREAM on a closed stream, unsolicited acks, unknown types)
    /// allowed in a burst, refilled as for `max_control_frames`; a
    /// WINDOW_UPDATE answering DATA the server sent is not counted (see
    /// `receive.rs`). Past it GOAWAY ENHANCE_YOUR_CALM.
    pub max_inert_frames: u32,
}

/// A connection error: the GOAWAY is queued in the output; the driver writes
/// it and closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    /// The code the GOAWAY carries.
    pub code: ErrorCode,
}

/// What the client's frames mean, reported by [`ServerConnection::receive`].
pub trait Events {
    /// A new stream's request head; `end_stream`: there is no body.
    fn request(&mut self, stream: StreamId, head: &RequestHead, end_stream: bool);
    /// A piece of a request body (never empty unless `end_stream`). The
    /// stream's and the connection's receive windows reopen only as the driver
    /// calls [`ServerConnection::release`].
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool);
    /// The request's trailers, which end its body.
    fn trailers(&mut self, stream: StreamId, fields: &RequestHead);
    /// The stream ended before its exchange was complete: the client reset it
    /// (its code), or the connection reset it for a protocol error (a body
    /// longer or shorter than its content-length, a window overrun...).
    fn reset(&mut self, stream: StreamId, code: ErrorCode);
    /// Send windows grew (a WINDOW_UPDATE, or SETTINGS_INITIAL_WINDOW_SIZE):
    /// streams waiting for [`ServerConnection::send_capacity`] may go on.
    fn send_window(&mut self);
}

/// A header block spread over HEADERS and CONTINUATION frames, waiting for
/// its END_HEADERS.
#[derive(Clone, Copy, Debug)]
struct PendingBlock {
    stream: StreamId,
    end_stream: bool,
    /// The HEADERS' priority made the stream depend on itself.
    self_dependent: bool,
}

/// One HTTP/2 connection, server side.
pub struct ServerConnection {
    limits: ConnLimits,
    decoder: Decoder,
    encoder: Encoder,
    /// Frames to write, after `pieces`: `out[out_pos..]` (`out_pos` is 0
    /// while pieces wait).
    out: Vec<u8>,
    out_pos: usize,
    /// Output written before `out`: body buffers queued without a copy
    /// ([`Self::send_data_owned`]), each after the frames cut off from `out`
    /// before it, so the order holds.
    pieces: VecDeque<Bytes>,
    /// Bytes of `pieces.front()` already written.
    piece_pos: usize,
    /// Bytes in `pieces`, written ones included.
    pieces_len: usize,
    streams: StreamTable,
    recent_resets: RecentResets,
    /// The head being decoded, reused from stream to stream.
    head: RequestHead,
    /// The joined fragments of a header block split over CONTINUATIONs.
    block: Vec<u8>,
    pending: Option<PendingBlock>,
    /// A header block of the server's past the client's max frame size.
    scratch: Vec<u8>,
    preface_done: bool,
    settings_received: bool,
    /// The client acknowledged our SETTINGS, so our INITIAL_WINDOW_SIZE
    /// applies to the streams it opens.
    settings_acked: bool,
    /// The highest stream id the client used in HEADERS.
    max_seen: StreamId,
    /// The highest stream delivered to the driver.
    last_taken: StreamId,
    /// The last stream id of the GOAWAY we sent.
    goaway_sent: Option<StreamId>,
    peer_goaway: bool,
    /// The connection ended on this error; nothing more is taken.
    dead: Option<ErrorCode>,
    conn_recv_window: i64,
    conn_recv_owed: u64,
    conn_recv_initial: u32,
    conn_send_window: i64,
    peer_initial_window: i64,
    peer_max_frame: usize,
    control_budget: FloodBudget,
    empty_budget: FloodBudget,
    inert_budget: FloodBudget,
    /// Inert frames the client has earned: two per DATA frame the server
    /// wrote (the WINDOW_UPDATEs of its stream and of the connection that
    /// answer it) and one per request taken; spent before `inert_budget`.
    inert_credits: u64,
    error_resets: usize,
}

impl ServerConnection {
    /// A connection that has queued its SETTINGS (and the connection window's
    /// WINDOW_UPDATE) in the output, to go out before anything else.
    pub fn new(mut limits: ConnLimits) -> Self {
        limits.max_frame_size = limits
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        limits.initial_stream_window = limits.initial_stream_window.min(frame::MAX_WINDOW as u32);
        let conn_window = limits
            .initial_connection_window
            .clamp(frame::DEFAULT_WINDOW, frame::MAX_WINDOW as u32);
        let mut out = Vec::with_capacity(64);
        let settings = [
            (
                setting::MAX_CONCURRENT_STREAMS,
                limits.max_concurrent_streams,
            ),
            (setting::INITIAL_WINDOW_SIZE, limits.initial_stream_window),
            (setting::MAX_FRAME_SIZE, limits.max_frame_size),
            (setting::MAX_HEADER_LIST_SIZE, limits.max_header_list_size),
            (setting::HEADER_TABLE_SIZE, limits.header_table_size),
        ];
        let n = if limits.header_table_size == 4096 {
            4
        } else {
            5
        };
        frame::write_settings(&mut out, &settings[..n]);
        if conn_window > frame::DEFAULT_WINDOW {
            frame::write_window_update(&mut out, 0, conn_window - frame::DEFAULT_WINDOW);
        }
        ServerConnection {
            decoder: Decoder::new(limits.header_table_size),
            encoder: Encoder::default(),
            out,
            out_pos: 0,
            pieces: VecDeque::new(),
            piece_pos: 0,
            pieces_len: 0,
            streams: StreamTable::default(),
            recent_resets: RecentResets::default(),
            head: RequestHead::new(limits.max_header_list_size, limits.max_header_fields),
            block: Vec::new(),
            pending: None,
            scratch: Vec::new(),
            preface_done: false,
            settings_received: false,
            settings_acked: false,
            max_seen: 0,
            last_taken: 0,
            goaway_sent: None,
            peer_goaway: false,
            dead: None,
            conn_recv_window: i64::from(conn_window),
            conn_recv_owed: 0,
            conn_recv_initial: conn_window,
            conn_send_window: i64::from(frame::DEFAULT_WINDOW),
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            control_budget: FloodBudget::new(limits.max_control_frames),
            empty_budget: FloodBudget::new(limits.max_empty_frames),
            inert_budget: FloodBudget::new(limits.max_inert_frames),
            inert_credits: 0,
            error_resets: 0,
            limits,
        }
    }

    /// Queues the response head of `stream`: `:status` then `fields` (names
    /// lowercase, connection-specific fields already left out), split into
    /// CONTINUATION frames past the client's max frame size. A 1xx status
    /// may come before the final one.
    pub fn send_headers<'f>(
        &mut self,
        stream: StreamId,
        status: u16,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
    ) {
        let interim = status < 200;
        let Some(s) = self.sendable(stream) else {
            return;
        };
        if s.head_sent {
            return;
        }
        let end_stream = end_stream && !interim;
        if !interim {
            s.head_sent = true;
            s.send_closed = end_stream;
        }
        let at = self.out.len();
        self.out.extend_from_slice(&[0; frame::HEAD_LEN]);
        self.encoder.begin_block(&mut self.out);
        self.encoder.encode_status(status, &mut self.out);
        for (name, value) in fields {
            self.encoder.encode_field(name, value, &mut self.out);
        }
        self.finish_header_block(at, stream, end_stream);
    }

    /// Turns the header block written after a placeholder frame head at
    /// `at` into HEADERS (plus CONTINUATIONs when it is too large).
    fn finish_header_block(&mut self, at: usize, stream: StreamId, end_stream: bool) {
        let len = self.out.len() - at - frame::HEAD_LEN;
        if len <= self.peer_max_frame {
            let mut flags = frame::flag::END_HEADERS;
            if end_stream {
                flags |= frame::flag::END_STREAM;
            }
            self.out[at..at + frame::HEAD_LEN].copy_from_slice(&frame::head_bytes(
                len,
                frame::kind::HEADERS,
                flags,
                stream,
            ));
        } else {
            self.scratch.clear();
            self.scratch
                .extend_from_slice(&self.out[at + frame::HEAD_LEN..]);
            self.out.truncate(at);
            frame::write_header_block(
                &mut self.out,
                stream,
                &self.scratch,
                end_stream,
                self.peer_max_frame,
            );
        }
        if end_stream {
            self.streams.remove_if_done(stream);
        }
    }

    /// The stream when the server may still send on it.
    fn sendable(&mut self, stream: StreamId) -> Option<&mut streams::Stream> {
        if self.dead.is_some() {
            return None;
        }
        self.streams.get_mut(stream).filter(|s| !s.send_closed)
    }

    /// How many body bytes `stream` may send now: the smaller of its window
    /// and the connection's; 0 for a stream that cannot send.
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        if self.dead.is_some() {
            return 0;
        }
        match self.streams.get(stream) {
            Some(s) if s.head_sent && !s.send_closed => {
                s.send_window.min(self.conn_send_window).max(0) as usize
            }
            _ => 0,
        }
    }

    /// Queues DATA frames of `data` (at most the client's max frame size
    /// each) within [`Self::send_capacity`]; returns how many bytes were
    /// taken. `end_stream` applies only when all of `data` was taken; empty
    /// `data` with `end_stream` sends an empty DATA frame that ends the stream.
    pub fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> usize {
        let Some((take, ends)) = self.take_window(stream, data.len(), end_stream) else {
            return 0;
        };
        let mut chunks = data[..take].chunks(self.peer_max_frame).peekable();
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            frame::write_data(&mut self.out, stream, chunk, ends && last);
            self.inert_credits += 2;
        }
        if ends {
            if take == 0 {
                frame::write_data(&mut self.out, stream, &[], true);
            }
            self.streams.remove_if_done(stream);
        }
        take
    }

    /// [`Self::send_data`] for a body buffer the connection may keep: the
    /// DATA frames carry slices of `data` itself, written from it without a
    /// copy (a file chunk goes from its read straight to the socket, or to
    /// TLS encryption).
    pub fn send_data_owned(&mut self, stream: StreamId, data: Bytes, end_stream: bool) -> usize {
        let Some((take, ends)) = self.take_window(stream, data.len(), end_stream) else {
            return 0;
        };
        if take == 0 {
            return 0;
        }
        let mut at = 0;
        while at < take {
            let len = (take - at).min(self.peer_max_frame);
            let last = at + len == take;
            let flags = if ends && last {
                frame::flag::END_STREAM
            } else {
                0
            };
            frame::write_head(&mut self.out, len, frame::kind::DATA, flags, stream);
            self.cut_out();
            self.pieces_len += len;
            self.pieces.push_back(data.slice(at..at + len));
            at += len;
            self.inert_credits += 2;
        }
        if ends {
            self.streams.remove_if_done(stream);
        }
        take
    }

    /// Takes up to `len` bytes of `stream`'s and the connection's send
    /// windows for DATA: how many, and whether they end the stream; `None`
    /// when the stream cannot send (no head yet, ended, gone, or the
    /// connection is).
    fn take_window(
        &mut self,
        stream: StreamId,
        len: usize,
        end_stream: bool,
    ) -> Option<(usize, bool)> {
        let room = self.send_capacity(stream);
        if self.dead.is_some() {
            return None;
        }
        let s = self.streams.get_mut(stream)?;
        if !s.head_sent || s.send_closed {
            return None;
        }
        let take = len.min(room);
        let ends = end_stream && take == len;
        s.send_window -= take as i64;
        self.conn_send_window -= take as i64;
        if ends {
            s.send_closed = true;
        }
        Some((take, ends))
    }

    /// Queues the response trailers, which end the stream.
    pub fn send_trailers<'f>(
        &mut self,
        stream: StreamId,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) {
        let Some(s) = self.sendable(stream) else {
            return;
        };
        if !s.head_sent {
            return;
        }
        s.send_closed = true;
        let at = self.out.len();
        self.out.extend_from_slice(&[0; frame::HEAD_LEN]);
        self.encoder.begin_block(&mut self.out);
        for (name, value) in fields {
            self.encoder.encode_field(name, value, &mut self.out);
        }
        self.finish_header_block(at, stream, true);
    }

    /// Ends `stream` with RST_STREAM(`code`), unless it is closed already.
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        if self.dead.is_some() || self.streams.remove(stream).is_none() {
            return;
        }
        frame::write_rst_stream(&mut self.out, stream, code.to_u32());
        self.recent_resets.add(stream);
    }

    /// The driver used `n` body bytes of `stream` (or dropped them): its
    /// window and the connection's reopen, with WINDOW_UPDATE frames once
    /// enough is owed (half the window).
    pub fn release(&mut self, stream: StreamId, n: usize) {
        if self.dead.is_some() || n == 0 {
            return;
        }
        let half = (self.limits.initial_stream_window / 2).max(1);
        if let Some(s) = self.streams.get_mut(stream).filter(|s| !s.recv_closed) {
            s.recv_owed = s.recv_owed.saturating_add(n as u32);
            if s.recv_owed >= half {
                let inc = i64::from(s.recv_owed).min(frame::MAX_WINDOW - s.recv_window);
                if inc > 0 {
                    frame::write_window_update(&mut self.out, stream, inc as u32);
                    s.recv_window += inc;
                }
                s.recv_owed = 0;
            }
        }
        self.release_connection(n);
    }

    /// Reopens the connection's receive window by `n` bytes.
    fn release_connection(&mut self, n: usize) {
        self.conn_recv_owed += n as u64;
        if self.conn_recv_owed >= u64::from(self.conn_recv_initial / 2) {
            let inc = (self.conn_recv_owed as i64).min(frame::MAX_WINDOW - self.conn_recv_window);
            if inc > 0 {
                frame::write_window_update(&mut self.out, 0, inc as u32);
                self.conn_recv_window += inc;
            }
            self.conn_recv_owed = 0;
        }
    }

    /// Queues GOAWAY naming the last stream this connection took. With
    /// NO_ERROR the streams in flight go on and new ones are refused; the
    /// driver closes when they are done.
    pub fn goaway(&mut self, code: ErrorCode) {
        if self.dead.is_some() {
            return;
        }
        frame::write_goaway(&mut self.out, self.last_taken, code.to_u32());
        self.goaway_sent = Some(self.last_taken);
        if code != ErrorCode::NoError {
            self.dead = Some(code);
        }
    }

    /// Streams open or half-closed (counted against max_concurrent_streams).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The first run of queued output (all of it, unless bodies were queued
    /// with [`Self::send_data_owned`]: see [`Self::output_slices`]).
    pub fn output(&self) -> &[u8] {
        match self.pieces.front() {
            Some(p) => &p[self.piece_pos..],
            None => &self.out[self.out_pos..],
        }
    }

    /// Bytes queued to write.
    pub fn output_len(&self) -> usize {
        self.pieces_len - self.piece_pos + self.out.len() - self.out_pos
    }

    /// Fills `dst` with the queued output in order, as many runs as fit;
    /// returns how many it filled.
    pub fn output_slices<'s>(&'s self, dst: &mut [IoSlice<'s>]) -> usize {
        let mut n = 0;
        let runs = self
            .pieces
            .iter()
            .enumerate()
            .map(|(i, p)| if i == 0 { &p[self.piece_pos..] } else { &p[..] })
            .chain(std::iter::once(&self.out[self.out_pos..]))
            .filter(|run| !run.is_empty());
        for (slot, run) in dst.iter_mut().zip(runs) {
            *slot = IoSlice::new(run);
            n += 1;
        }
        n
    }

    /// The first `n` bytes of the queued output were written.
    pub fn consume_output(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.pieces.front() else {
                break;
            };
            let left = front.len() - self.piece_pos;
            if n < left {
                self.piece_pos += n;
                return;
            }
            n -= left;
            self.pieces_len -= front.len();
            self.piece_pos = 0;
            self.pieces.pop_front();
        }
        self.out_pos = (self.out_pos + n).min(self.out.len());
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.out_pos >= 64 * 1024 && self.out_pos * 2 >= self.out.len() {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
    }

    /// Moves what `out` holds into the pieces, so a body buffer can follow it.
    fn cut_out(&mut self) {
        if self.out_pos < self.out.len() {
            let mut run = std::mem::take(&mut self.out);
            run.drain(..self.out_pos);
            self.out_pos = 0;
            self.pieces_len += run.len();
            self.pieces.push_back(Bytes::from(run));
        }
    }

    /// Frees the output buffer when nothing waits in it, so an idle
    /// connection holds no buffer (and the head and block buffers when no
    /// stream is open).
    pub fn release_idle_buffers(&mut self) {
        if self.pieces.is_empty() {
            self.pieces = VecDeque::new();
        }
        if self.out_pos == self.out.len() {
            self.out = Vec::new();
            self.out_pos = 0;
        }
        self.scratch = Vec::new();
        if self.streams.len() == 0 && self.pending.is_none() {
            self.head.release_buffers();
            self.block = Vec::new();
            self.streams.release_idle();
        }
    }

    /// A connection error of `code` when `broken` (a rule of RFC 9113 the
    /// client broke), else nothing.
    fn refuse_if(&mut self, broken: bool, code: ErrorCode) -> Result<(), ConnError> {
        if broken {
            return Err(self.connection_error(code));
        }
        Ok(())
    }

    /// Queues GOAWAY for a connection error and ends the connection.
    fn connection_error(&mut self, code: ErrorCode) -> ConnError {
        if self.dead.is_none() {
            frame::write_goaway(&mut self.out, self.last_taken, code.to_u32());
            self.dead = Some(code);
        }
        ConnError { code }
    }
}
