//! One client-side HTTP/2 connection as a state machine over bytes, for the
//! proxy's upstream exchange: requests go in through
//! [`ClientConnection::open_stream`] and the `send_*` methods, the origin's
//! frames through [`ClientConnection::receive`], which reports what they
//! mean to a [`ClientEvents`], and the frames to write come out of
//! [`ClientConnection::output`]. Nothing here touches a socket.
//!
//! It is the server's codec in the other role: frames, HPACK, flow control,
//! settings, GOAWAY and the flood budgets are `shared`'s [`ConnCore`], so a
//! hostile origin meets the defences a hostile client does. The client adds
//! stream ids of its own, the request head it encodes, what a response's
//! header block means (`receive.rs`) and the response head
//! (`response_head.rs`).

#[cfg(test)]
mod error_tests;
mod receive;
mod response_head;
#[cfg(test)]
mod settings_tests;
#[cfg(test)]
mod tests;

use std::io::IoSlice;

use bytes::Bytes;

use super::shared::streams::Stream;
use super::shared::{ConnCore, Role};
use super::ErrorCode;

pub use super::shared::{ConnError, ConnLimits, StreamId};
pub use crate::http::field_section::FieldIter;
pub use response_head::ResponseHead;

/// The limits a client connection enforces and announces: the server's
/// [`ConnLimits`], read from the client's side (`max_concurrent_streams` is
/// the most streams it opens at once).
pub type ClientLimits = ConnLimits;

/// The largest stream id (RFC 9113 §5.1.1); a connection that used it up
/// opens no more streams.
const MAX_STREAM_ID: StreamId = (1 << 31) - 1;

/// What the origin's frames mean, reported by [`ClientConnection::receive`].
pub trait ClientEvents {
    /// A response head on `stream`: interim (1xx, [`ResponseHead::is_interim`],
    /// several may come) or final; `end_stream`: there is no body.
    fn response(&mut self, stream: StreamId, head: &ResponseHead, end_stream: bool);
    /// A piece of a response body (never empty unless `end_stream`). The
    /// stream's and the connection's receive windows reopen only as the
    /// caller calls [`ClientConnection::release`].
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool);
    /// The response's trailers, which end it.
    fn trailers(&mut self, stream: StreamId, fields: &ResponseHead);
    /// The stream ended before its exchange was complete: the origin reset
    /// it (its code; NO_ERROR after a complete response asks us to stop
    /// sending the request body, RFC 9113 §8.1), the connection reset it for
    /// the origin's protocol error (a malformed response, a window overrun...),
    /// or a GOAWAY said it was never processed (REFUSED_STREAM: the request
    /// may be retried).
    fn reset(&mut self, stream: StreamId, code: ErrorCode);
    /// The origin sent GOAWAY: no new stream may be opened; streams above
    /// `last_stream` were not processed (each is also reported as a reset
    /// with REFUSED_STREAM), those at or below it may still complete.
    fn goaway(&mut self, last_stream: StreamId, code: ErrorCode);
    /// Send windows grew (a WINDOW_UPDATE, or SETTINGS_INITIAL_WINDOW_SIZE):
    /// streams waiting for [`ClientConnection::send_capacity`] may go on.
    fn send_window(&mut self);
    /// The origin's SETTINGS were applied: [`ClientConnection::available_streams`]
    /// may have changed.
    fn settings(&mut self);
}

/// Why [`ClientConnection::open_stream`] opened nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// As many streams are open as the origin (or our limit) allows; one
    /// may open when a stream ends.
    AtLimit,
    /// A GOAWAY was sent or received: this connection takes no new streams.
    GoingAway,
    /// Every stream id was used: the request needs a new connection.
    StreamIdsExhausted,
    /// The connection ended on an error.
    Closed,
    /// The request head's list size is past the origin's
    /// SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2): it was not sent,
    /// and the connection goes on.
    HeadTooLarge,
    /// An extended CONNECT to an origin whose SETTINGS did not offer
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3), or have not come.
    NoExtendedConnect,
}

/// Where a request goes: its `:scheme`, `:authority` and `:path`.
struct Target<'a> {
    scheme: &'a [u8],
    authority: &'a [u8],
    path: &'a [u8],
}

/// One HTTP/2 connection, client side.
pub struct ClientConnection {
    core: ConnCore,
    /// The head being decoded, reused from stream to stream.
    head: ResponseHead,
    /// The id the next stream opened takes.
    next_stream: StreamId,
}

impl ClientConnection {
    /// A connection that has queued the client preface, its SETTINGS
    /// (ENABLE_PUSH=0, our windows, frame size and header limits) and the
    /// connection window's WINDOW_UPDATE in the output, to go out before
    /// anything else. Requests may be opened at once, before the origin's
    /// SETTINGS arrive (RFC 9113 §3.4).
    pub fn new(limits: ClientLimits) -> Self {
        ClientConnection {
            head: ResponseHead::new(limits.max_header_list_size, limits.max_header_fields),
            core: ConnCore::new(Role::Client, limits),
            next_stream: 1,
        }
    }

    /// Why a new stream cannot be opened now, if it cannot.
    fn open_refusal(&self) -> Option<OpenError> {
        if self.core.dead.is_some() {
            return Some(OpenError::Closed);
        }
        if self.core.goaway_sent.is_some() || self.core.peer_goaway.is_some() {
            return Some(OpenError::GoingAway);
        }
        if self.next_stream > MAX_STREAM_ID {
            return Some(OpenError::StreamIdsExhausted);
        }
        if self.available_streams() == 0 {
            return Some(OpenError::AtLimit);
        }
        None
    }

    /// Whether [`Self::open_stream`] would open a stream now.
    pub fn can_open(&self) -> bool {
        self.open_refusal().is_none()
    }

    /// How many more streams may be open at once now, by the origin's
    /// SETTINGS_MAX_CONCURRENT_STREAMS and our own limit (0 once the
    /// connection is going away), for a pool choosing a connection.
    pub fn available_streams(&self) -> usize {
        if self.core.dead.is_some()
            || self.core.goaway_sent.is_some()
            || self.core.peer_goaway.is_some()
        {
            return 0;
        }
        let limit = self
            .core
            .peer_max_concurrent_streams
            .min(self.core.limits.max_concurrent_streams) as usize;
        let ids_left = if self.next_stream > MAX_STREAM_ID {
            0
        } else {
            ((MAX_STREAM_ID - self.next_stream) / 2 + 1) as usize
        };
        limit.saturating_sub(self.core.streams.len()).min(ids_left)
    }

    /// Opens a stream with a request head: the pseudo fields, then `fields`
    /// (names lowercase, connection-specific fields already left out;
    /// cookies and credentials are never indexed by HPACK), split into
    /// CONTINUATION frames past the origin's max frame size. `end_stream`:
    /// there is no body.
    pub fn open_stream<'f>(
        &mut self,
        method: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
    ) -> Result<StreamId, OpenError> {
        let target = Target {
            scheme,
            authority,
            path,
        };
        self.open(method, None, target, fields, end_stream)
    }

    /// Whether the origin's SETTINGS came, so what it offers is known.
    pub fn settings_received(&self) -> bool {
        self.core.settings_received
    }

    /// Opens an extended CONNECT (RFC 8441 §4): `:method CONNECT` with
    /// `:protocol` (`websocket`), the stream's DATA then the tunnel's bytes
    /// both ways. Only once the origin's SETTINGS offered
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL; before they came, or without it,
    /// [`OpenError::NoExtendedConnect`] and nothing is sent.
    pub fn open_extended_connect<'f>(
        &mut self,
        protocol: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<StreamId, OpenError> {
        if !self.core.peer_connect_protocol {
            return Err(self.open_refusal().unwrap_or(OpenError::NoExtendedConnect));
        }
        let target = Target {
            scheme,
            authority,
            path,
        };
        self.open(b"CONNECT", Some(protocol), target, fields, false)
    }

    /// Opens a stream with its head; `protocol`: an extended CONNECT's.
    fn open<'f>(
        &mut self,
        method: &[u8],
        protocol: Option<&[u8]>,
        Target {
            scheme,
            authority,
            path,
        }: Target<'_>,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
    ) -> Result<StreamId, OpenError> {
        if let Some(refusal) = self.open_refusal() {
            return Err(refusal);
        }
        let id = self.next_stream;
        let core = &mut self.core;
        let last_opened = core.last_opened;
        core.last_opened = id;
        let mut s = Stream::new(id, core.new_stream_recv_window(), core.peer_initial_window);
        s.head_sent = true;
        s.send_closed = end_stream;
        s.head_request = method == b"HEAD";
        core.streams.insert(s);
        // Its answer may cross a reset of ours, or come with a PRIORITY.
        core.budgets.earn_inert(1);
        let sent = core.write_header_block(id, end_stream, |block| {
            block.field(b":method", method);
            if let Some(protocol) = protocol {
                block.field(b":protocol", protocol);
            }
            block.field(b":scheme", scheme);
            block.field(b":authority", authority);
            block.field(b":path", path);
            for (name, value) in fields {
                block.field(name, value);
            }
        });
        if !sent {
            // The id never went on the wire: the next stream takes it.
            core.streams.remove(id);
            core.last_opened = last_opened;
            return Err(OpenError::HeadTooLarge);
        }
        self.next_stream += 2;
        Ok(id)
    }

    /// How many request body bytes `stream` may send now: the smaller of
    /// its window and the connection's; 0 for a stream that cannot send.
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        self.core.send_capacity(stream)
    }

    /// Queues DATA frames of `data` (at most the origin's max frame size
    /// each) within [`Self::send_capacity`]; returns how many bytes were
    /// taken. `end_stream` applies only when all of `data` was taken; empty
    /// `data` with `end_stream` sends an empty DATA frame that ends the
    /// request.
    pub fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> usize {
        self.core.send_data(stream, data, end_stream)
    }

    /// [`Self::send_data`] for a body buffer the connection may keep: the
    /// DATA frames carry slices of `data` itself, written without a copy.
    pub fn send_data_owned(&mut self, stream: StreamId, data: Bytes, end_stream: bool) -> usize {
        self.core.send_data_owned(stream, data, end_stream)
    }

    /// Queues the request trailers, which end the request; false when
    /// they are past the origin's SETTINGS_MAX_HEADER_LIST_SIZE, and the
    /// stream was reset with INTERNAL_ERROR instead.
    pub fn send_trailers<'f>(
        &mut self,
        stream: StreamId,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> bool {
        self.core.send_trailers(stream, fields)
    }

    /// Ends `stream` with RST_STREAM(`code`) (CANCEL when the response is
    /// no longer wanted), unless it is closed already.
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        self.core.reset_stream(stream, code);
    }

    /// The caller used `n` response body bytes of `stream` (or dropped
    /// them): its window and the connection's reopen, with WINDOW_UPDATE
    /// frames once enough is owed (half the window).
    pub fn release(&mut self, stream: StreamId, n: usize) {
        self.core.release(stream, n);
    }

    /// Queues GOAWAY: no new stream is opened; with NO_ERROR the streams in
    /// flight go on, and the driver closes when they are done.
    pub fn goaway(&mut self, code: ErrorCode) {
        self.core.goaway(code);
    }

    /// Queues a PING, whose ack the origin owes (a liveness check of an
    /// idle pooled connection).
    pub fn ping(&mut self, payload: [u8; 8]) {
        if self.core.dead.is_none() {
            crate::http2::frame::write_ping(self.core.out.frames(), &payload);
            self.core.pings_in_flight += 1;
        }
    }

    /// PINGs sent and not acknowledged yet.
    pub fn pings_in_flight(&self) -> u32 {
        self.core.pings_in_flight
    }

    /// Streams open or half-closed.
    pub fn open_streams(&self) -> usize {
        self.core.streams.len()
    }

    /// The error this side ended the connection on (its GOAWAY is in the
    /// output); an origin's GOAWAY is reported by [`ClientEvents::goaway`].
    pub fn error(&self) -> Option<ErrorCode> {
        self.core.dead
    }

    /// Nothing more will happen on this connection: it ended on an error,
    /// or a GOAWAY went either way and no stream is left. The driver writes
    /// the output and closes.
    pub fn is_closed(&self) -> bool {
        self.core.dead.is_some()
            || ((self.core.goaway_sent.is_some() || self.core.peer_goaway.is_some())
                && self.core.streams.len() == 0)
    }

    /// The first run of queued output (all of it, unless bodies were queued
    /// with [`Self::send_data_owned`]: see [`Self::output_slices`]).
    pub fn output(&self) -> &[u8] {
        self.core.out.first()
    }

    /// Bytes queued to write.
    pub fn output_len(&self) -> usize {
        self.core.out.len()
    }

    /// Fills `dst` with the queued output in order, as many runs as fit;
    /// returns how many it filled.
    pub fn output_slices<'s>(&'s self, dst: &mut [IoSlice<'s>]) -> usize {
        self.core.out.slices(dst)
    }

    /// The first `n` bytes of the queued output were written.
    pub fn consume_output(&mut self, n: usize) {
        self.core.out.consume(n);
    }

    /// Frees the buffers nothing waits in, so an idle pooled connection
    /// holds none but its HPACK tables.
    pub fn release_idle_buffers(&mut self) {
        if self.core.release_idle_buffers() {
            self.head.list.release_buffers();
        }
    }
}
