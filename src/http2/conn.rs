//! One server-side HTTP/2 connection as a state machine over bytes: the
//! client's frames go in through [`ServerConnection::receive`], which reports
//! what they mean to an [`Events`]; the driver's answers go in through the
//! `send_*` methods; the frames to write come out of
//! [`ServerConnection::output`].
//!
//! What both roles share (frames, flow control, settings, GOAWAY, the flood
//! budgets, header-block joining, the output queue) is `shared`'s
//! [`ConnCore`]; the server adds the client preface, what a request's
//! header block means (`receive.rs`), the request head
//! (`crate::http::request_fields`, shared with HTTP/3) and the response head it sends.

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod h2spec_harness;
#[cfg(test)]
mod priority_tests;
mod receive;
#[cfg(test)]
mod settings_tests;
#[cfg(test)]
mod tests;

use std::io::IoSlice;

use bytes::Bytes;

use super::shared::{ConnCore, Role};
use super::ErrorCode;
use crate::http::priority::Priority;

pub use super::shared::{ConnError, ConnLimits, StreamId};
pub use crate::http::request_fields::RequestHead;

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
pub struct ServerConnection {
    core: ConnCore,
    /// The head being decoded, reused from stream to stream.
    head: RequestHead,
    preface_done: bool,
}

impl ServerConnection {
    /// A connection that has queued its SETTINGS (and the connection window's
    /// WINDOW_UPDATE) in the output, to go out before anything else.
    pub fn new(limits: ConnLimits) -> Self {
        ServerConnection {
            head: RequestHead::new(
                limits.max_header_list_size,
                limits.max_header_fields,
                limits.enable_connect_protocol,
            ),
            core: ConnCore::new(Role::Server, limits),
            preface_done: false,
        }
    }

    /// Queues the response head of `stream`: `:status` then `fields` (names
    /// lowercase, connection-specific fields already left out), split into
    /// CONTINUATION frames past the client's max frame size. A 1xx status
    /// may come before the final one.
    ///
    /// False when the head was not sent as given: its list size is past the
    /// client's SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2, §10.5.1).
    /// An interim head is then left out; a final head is replaced by a bare
    /// 500 that ends the stream (the client gets an answer it can take, and
    /// the connection goes on), or, when even that is too large, the
    /// stream is reset with INTERNAL_ERROR. Either way nothing more is sent
    /// on the stream.
    pub fn send_headers<'f>(
        &mut self,
        stream: StreamId,
        status: u16,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
    ) -> bool {
        let interim = status < 200;
        let Some(s) = self.core.sendable(stream) else {
            return false;
        };
        if s.head_sent {
            return false;
        }
        let end_stream = end_stream && !interim;
        if !interim {
            s.head_sent = true;
            s.send_closed = end_stream;
        }
        let sent = self.core.write_header_block(stream, end_stream, |block| {
            block.status(status);
            for (name, value) in fields {
                block.field(name, value);
            }
        });
        if sent || interim {
            return sent;
        }
        if let Some(s) = self.core.streams.get_mut(stream) {
            s.send_closed = true;
        }
        if !self
            .core
            .write_header_block(stream, true, |block| block.status(500))
        {
            self.core.reset_stream(stream, ErrorCode::InternalError);
        }
        false
    }

    /// Queues all of `data` as `stream`'s last DATA when the windows, `room`
    /// in the output and the priority schedule let it go at once; false, with
    /// nothing queued, when it has to wait or be cut.
    pub fn send_data_at_once(&mut self, stream: StreamId, data: &[u8], room: usize) -> bool {
        self.core.send_data_at_once(stream, data, room)
    }

    /// How many body bytes `stream` may send now: the smaller of its window
    /// and the connection's; 0 for a stream that cannot send.
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        self.core.send_capacity(stream)
    }

    /// How many of `want` body bytes `stream` may send now, `room` being
    /// what the driver lets the output grow by: within the windows, and
    /// within the budget of DATA frames a client's tiny window updates may
    /// cut small (CVE-2019-9511). 0 also once that budget is spent and the
    /// connection ended with GOAWAY ENHANCE_YOUR_CALM ([`Self::error`]).
    pub fn grant_send(&mut self, stream: StreamId, want: usize, room: usize) -> usize {
        self.core.grant_send(stream, want, room)
    }

    /// The stream to wake when send capacity may be free for it: the first
    /// by priority (RFC 9218) of those that were told to wait and could
    /// send now. None with one stream open.
    pub fn next_sender(&self) -> Option<StreamId> {
        self.core.next_sender()
    }

    /// Gives `stream` the priority its response names for itself
    /// ([`Priority::of_answer`]).
    pub fn set_response_priority(&mut self, stream: StreamId, priority: Priority) {
        self.core.set_priority(stream, priority);
    }

    /// The error this side ended the connection on, its GOAWAY queued.
    pub fn error(&self) -> Option<ErrorCode> {
        self.core.dead
    }

    /// Queues DATA frames of `data` (at most the client's max frame size
    /// each) within [`Self::send_capacity`]; returns how many bytes were
    /// taken. `end_stream` applies only when all of `data` was taken; empty
    /// `data` with `end_stream` sends an empty DATA frame that ends the stream.
    pub fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> usize {
        self.core.send_data(stream, data, end_stream)
    }

    /// [`Self::send_data`] for a body buffer the connection may keep: the
    /// DATA frames carry slices of `data` itself, written from it without a
    /// copy (a file chunk goes from its read straight to the socket, or to
    /// TLS encryption).
    pub fn send_data_owned(&mut self, stream: StreamId, data: Bytes, end_stream: bool) -> usize {
        self.core.send_data_owned(stream, data, end_stream)
    }

    /// Queues the response trailers, which end the stream; false when
    /// they are past the client's SETTINGS_MAX_HEADER_LIST_SIZE, and the
    /// stream was reset with INTERNAL_ERROR instead.
    pub fn send_trailers<'f>(
        &mut self,
        stream: StreamId,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> bool {
        self.core.send_trailers(stream, fields)
    }

    /// Ends `stream` with RST_STREAM(`code`), unless it is closed already.
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        self.core.reset_stream(stream, code);
    }

    /// The driver used `n` body bytes of `stream` (or dropped them): its
    /// window and the connection's reopen, with WINDOW_UPDATE frames once
    /// enough is owed (half the window).
    pub fn release(&mut self, stream: StreamId, n: usize) {
        self.core.release(stream, n);
    }

    /// Queues GOAWAY naming the last stream this connection took. With
    /// NO_ERROR the streams in flight go on and new ones are refused; the
    /// driver closes when they are done.
    pub fn goaway(&mut self, code: ErrorCode) {
        self.core.goaway(code);
    }

    /// Begins a graceful shutdown: streams the client opened before it saw
    /// the first GOAWAY are still taken; the final GOAWAY goes out when the
    /// client acknowledges the PING sent with it (see
    /// [`Self::shutdown_complete`]), or when the driver calls [`Self::goaway`].
    pub fn goaway_gracefully(&mut self) {
        self.core.goaway_gracefully();
    }

    /// The final GOAWAY was sent (or the connection ended on an error): no
    /// stream is taken any more.
    pub fn shutdown_complete(&self) -> bool {
        self.core.goaway_sent.is_some() || self.core.dead.is_some()
    }

    /// Streams open or half-closed (counted against max_concurrent_streams).
    pub fn open_streams(&self) -> usize {
        self.core.streams.len()
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

    /// Frees the output buffer when nothing waits in it, so an idle
    /// connection holds no buffer (and the head and block buffers when no
    /// stream is open).
    pub fn release_idle_buffers(&mut self) {
        if self.core.release_idle_buffers() {
            // The decoder forgets the block whose fields the head held.
            self.core.decoder.release_idle();
            self.head.list.release_buffers();
        }
    }
}
