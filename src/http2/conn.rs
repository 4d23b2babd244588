//! One server-side HTTP/2 connection as a state machine over bytes: the
//! client's frames go in through [`ServerConnection::receive`], which reports
//! what they mean to an [`Events`]; the driver's answers go in through the
//! `send_*` methods; the frames to write come out of
//! [`ServerConnection::output`].
//!
//! API CONTRACT (the driver in `server::h2` is written against it).

use std::time::Instant;

use super::ErrorCode;

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
    /// whose encoded bytes pass twice this, across CONTINUATION frames, ends
    /// the connection (GOAWAY ENHANCE_YOUR_CALM).
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
}

/// A connection error: the GOAWAY is queued in the output; the driver writes
/// it and closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    /// The code the GOAWAY carries.
    pub code: ErrorCode,
}

/// A request head, decoded and checked (RFC 9113 §8.1.2, §8.3.1): pseudo
/// fields present and valid, no connection-specific field, names lowercase.
/// Malformed heads never reach the driver: the stream is reset with
/// PROTOCOL_ERROR instead.
pub struct RequestHead {
    // private: the decoded bytes and the spans of each field
}

impl RequestHead {
    /// `:method`.
    pub fn method(&self) -> &[u8] {
        &[]
    }
    /// `:scheme` (absent for CONNECT).
    pub fn scheme(&self) -> Option<&[u8]> {
        None
    }
    /// `:authority`.
    pub fn authority(&self) -> Option<&[u8]> {
        None
    }
    /// `:path` (absent for CONNECT).
    pub fn path(&self) -> Option<&[u8]> {
        None
    }
    /// The regular fields in the order received (`cookie` fields as sent,
    /// one per crumb or not: joining them is the reader's business).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        std::iter::empty()
    }
    /// `content-length`, when the request gave one (already checked to be a
    /// number, and the DATA frames are held to it).
    pub fn content_length(&self) -> Option<u64> {
        None
    }
    /// The head passed `max_header_list_size` or `max_header_fields`; its
    /// fields are not kept (pseudo fields are, when they fit).
    pub fn oversized(&self) -> bool {
        false
    }
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

/// One HTTP/2 connection, server side.
pub struct ServerConnection {}

impl ServerConnection {
    /// A connection that has queued its SETTINGS (and the connection window's
    /// WINDOW_UPDATE) in the output, to go out before anything else.
    pub fn new(limits: ConnLimits) -> Self {
        let _ = limits;
        ServerConnection {}
    }

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
        let _ = (input, now, events);
        Ok(0)
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
        let _ = (stream, status, fields, end_stream);
    }

    /// How many body bytes `stream` may send now: the smaller of its window
    /// and the connection's; 0 for a stream that cannot send.
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        let _ = stream;
        0
    }

    /// Queues DATA frames of `data` (at most the client's max frame size
    /// each) within [`Self::send_capacity`]; returns how many bytes were
    /// taken. `end_stream` applies only when all of `data` was taken; empty
    /// `data` with `end_stream` sends an empty DATA frame that ends the stream.
    pub fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> usize {
        let _ = (stream, data, end_stream);
        0
    }

    /// Queues the response trailers, which end the stream.
    pub fn send_trailers<'f>(
        &mut self,
        stream: StreamId,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) {
        let _ = (stream, fields);
    }

    /// Ends `stream` with RST_STREAM(`code`), unless it is closed already.
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        let _ = (stream, code);
    }

    /// The driver used `n` body bytes of `stream` (or dropped them): its
    /// window and the connection's reopen, with WINDOW_UPDATE frames once
    /// enough is owed (half the window).
    pub fn release(&mut self, stream: StreamId, n: usize) {
        let _ = (stream, n);
    }

    /// Queues GOAWAY naming the last stream this connection took. With
    /// NO_ERROR the streams in flight go on and new ones are refused; the
    /// driver closes when they are done.
    pub fn goaway(&mut self, code: ErrorCode) {
        let _ = code;
    }

    /// Streams open or half-closed (counted against max_concurrent_streams).
    pub fn open_streams(&self) -> usize {
        0
    }

    /// The frames queued to write.
    pub fn output(&self) -> &[u8] {
        &[]
    }

    /// The first `n` bytes of [`Self::output`] were written.
    pub fn consume_output(&mut self, n: usize) {
        let _ = n;
    }

    /// Frees the output buffer when nothing waits in it, so an idle
    /// connection holds no buffer.
    pub fn release_idle_buffers(&mut self) {}
}
