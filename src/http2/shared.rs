//! What the two roles of an HTTP/2 connection have in common, written once:
//! the state of a connection whichever side opened it ([`ConnCore`]: the
//! HPACK coders, the stream table, the flow-control windows both ways, the
//! peer's settings, the header block being joined, GOAWAY, the flood
//! budgets and the output queue), the frames every role handles the same
//! way (`receive.rs`), and the sending side (`send.rs`), whose send
//! capacity a server shares out by Extensible Priorities (`priority.rs`,
//! `schedule.rs`).
//!
//! A role (`conn` for the server, `client` for the client) owns a
//! `ConnCore` and adds what only it knows: what a header block means (a
//! request or a response), the events it reports, and its public API. The
//! core hands a role its header blocks, GOAWAY and events through
//! [`RoleSide`], as hyper's `role.rs` hands heads to one connection type.
//! Nothing here touches a socket or a clock of its own.

pub(crate) mod budget;
pub(crate) mod output;
mod receive;
pub(crate) mod schedule;
mod send;
pub(crate) mod streams;
#[cfg(test)]
pub(crate) mod test_wire;

use std::time::Instant;

use super::frame::{self, setting};
use super::hpack::{Decoder, Encoder};
use super::ErrorCode;
use crate::http::priority::PendingUpdates;
use budget::FloodBudgets;
use output::Output;
use streams::{RecentResets, StreamTable};

/// The payload of the PING sent with a graceful shutdown's first GOAWAY.
pub(crate) const SHUTDOWN_PING: [u8; 8] = *b"pier-end";

/// A stream's identifier (odd: opened by the client).
pub type StreamId = u32;

/// The limits a connection enforces and announces, in either role: from
/// `[http2]` and `[http]` for the server, from the upstream group for the
/// client.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Server: SETTINGS_MAX_CONCURRENT_STREAMS announced; a stream past it
    /// is refused with RST_STREAM(REFUSED_STREAM). Client: the most streams
    /// it opens at once, whatever larger number the server allows.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE announced: each body's receive window
    /// (the request's on a server, the response's on a client).
    pub initial_stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE
    /// on stream 0 right after the SETTINGS).
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE announced: larger frames are a FRAME_SIZE_ERROR.
    pub max_frame_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE announced for the decoder.
    pub header_table_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE announced: a head whose decoded size
    /// (RFC 9113 §6.5.2) is larger is oversized (a server delivers it marked
    /// and answers 431; a client resets the stream); a header block whose
    /// encoded bytes pass twice this (16 KiB at least), across CONTINUATION
    /// frames, ends the connection (GOAWAY ENHANCE_YOUR_CALM).
    pub max_header_list_size: u32,
    /// Most fields in a head; more is oversized too.
    pub max_header_fields: usize,
    /// PING and SETTINGS frames (not acks) the peer may send at once,
    /// refilled at a tenth of that per second; past it GOAWAY
    /// ENHANCE_YOUR_CALM.
    pub max_control_frames: u32,
    /// Streams the connection resets for the peer's protocol errors before
    /// GOAWAY ENHANCE_YOUR_CALM.
    pub max_error_resets: usize,
    /// Frames that carry nothing (DATA without payload or END_STREAM,
    /// CONTINUATION without payload or END_HEADERS, ...) allowed in a burst,
    /// refilled as for `max_control_frames`; past it GOAWAY ENHANCE_YOUR_CALM.
    pub max_empty_frames: u32,
    /// Frames that make this side do nothing (PRIORITY, WINDOW_UPDATE,
    /// RST_STREAM on a closed stream, unsolicited acks, unknown types)
    /// allowed in a burst, refilled as for `max_control_frames`; a
    /// WINDOW_UPDATE answering DATA this side sent is not counted (see
    /// `budget.rs`). Past it GOAWAY ENHANCE_YOUR_CALM.
    pub max_inert_frames: u32,
    /// Server: SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 is announced and a
    /// request may carry `:protocol` (RFC 8441). Ignored by a client.
    pub enable_connect_protocol: bool,
    /// Server: SETTINGS_NO_RFC7540_PRIORITIES = 1 is announced (RFC 9218
    /// §2.1): streams are scheduled by the `priority` field and
    /// PRIORITY_UPDATE frames, never by PRIORITY. Ignored by a client.
    pub no_rfc7540_priorities: bool,
}

/// A connection error: the GOAWAY is queued in the output; the driver writes
/// it and closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    /// The code the GOAWAY carries.
    pub code: ErrorCode,
}

/// Which side of the connection this is, for the few rules that differ
/// below the head: what is announced, which stream ids the peer may use,
/// and whether the peer may enable push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Streams are opened by the peer.
    Server,
    /// Streams are opened by this side.
    Client,
}

/// A header block spread over HEADERS and CONTINUATION frames, waiting for
/// its END_HEADERS (or complete, handed to the role).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingBlock {
    pub(crate) stream: StreamId,
    pub(crate) end_stream: bool,
    /// The HEADERS' priority made the stream depend on itself.
    pub(crate) self_dependent: bool,
}

/// What a role does with what the core receives: the header blocks whose
/// meaning depends on the role, and the events its driver is told.
pub(crate) trait RoleSide {
    /// A whole header block arrived on `block.stream` (any stream but 0).
    fn header_block(
        &mut self,
        core: &mut ConnCore,
        block: PendingBlock,
        bytes: &[u8],
    ) -> Result<(), ConnError>;
    /// The peer sent GOAWAY: streams above `last_stream` that this side
    /// opened were not processed.
    fn goaway(&mut self, core: &mut ConnCore, last_stream: StreamId, code: ErrorCode);
    /// A piece of a body (never empty unless `end_stream`).
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool);
    /// The stream ended before its exchange was complete.
    fn reset(&mut self, stream: StreamId, code: ErrorCode);
    /// Send windows grew.
    fn send_window(&mut self);
    /// The peer's SETTINGS were applied.
    fn settings(&mut self);
}

/// One HTTP/2 connection's state below the role: everything but what a
/// header block means.
pub(crate) struct ConnCore {
    pub(crate) role: Role,
    pub(crate) limits: ConnLimits,
    pub(crate) decoder: Decoder,
    pub(crate) encoder: Encoder,
    pub(crate) out: Output,
    pub(crate) streams: StreamTable,
    pub(crate) recent_resets: RecentResets,
    /// The joined fragments of a header block split over CONTINUATIONs.
    pub(crate) block: Vec<u8>,
    pub(crate) pending: Option<PendingBlock>,
    /// A header block of ours past the peer's max frame size.
    scratch: Vec<u8>,
    pub(crate) settings_received: bool,
    /// The peer's SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3): it takes
    /// extended CONNECT requests.
    pub(crate) peer_connect_protocol: bool,
    /// The peer acknowledged our SETTINGS, so our INITIAL_WINDOW_SIZE
    /// applies to the streams opened from now on.
    settings_acked: bool,
    /// The highest stream id opened: the highest the client used in
    /// HEADERS (server), the last this side opened (client).
    pub(crate) last_opened: StreamId,
    /// The highest peer-opened stream delivered to the driver, which our
    /// GOAWAY names; a client takes none (push is off), so it names 0.
    pub(crate) last_taken: StreamId,
    /// The last stream id of the GOAWAY we sent.
    pub(crate) goaway_sent: Option<StreamId>,
    /// The last stream id of the peer's latest GOAWAY.
    pub(crate) peer_goaway: Option<StreamId>,
    /// A graceful shutdown began: the first GOAWAY went out with a PING,
    /// whose ack brings the final GOAWAY (RFC 9113 §6.8).
    pub(crate) shutdown_ping: bool,
    /// The connection ended on this error; nothing more is taken.
    pub(crate) dead: Option<ErrorCode>,
    conn_recv_window: i64,
    conn_recv_owed: u64,
    conn_recv_initial: u32,
    conn_send_window: i64,
    pub(crate) peer_initial_window: i64,
    pub(crate) peer_max_frame: usize,
    /// The peer's SETTINGS_MAX_HEADER_LIST_SIZE (unlimited until it says):
    /// a head or trailers of ours past it are not sent.
    pub(crate) peer_max_header_list: u32,
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
    pub(crate) peer_max_concurrent_streams: u32,
    pub(crate) budgets: FloodBudgets,
    /// PINGs sent and not yet acknowledged.
    pub(crate) pings_in_flight: u32,
    /// Server: PRIORITY_UPDATEs for streams not opened yet.
    pub(crate) pending_priorities: PendingUpdates<StreamId>,
    /// Grants of send capacity so far, which order incremental streams'
    /// turns.
    /// Some stream was told to wait for its turn and may still be waiting;
    /// false once a look found none, so a connection whose streams never
    /// wait pays no scan.
    pub(crate) some_waiting: bool,
    pub(crate) send_turns: u64,
}

impl ConnCore {
    /// A connection of `role` that has queued its opening (the client's
    /// preface, our SETTINGS and the connection window's WINDOW_UPDATE) in
    /// the output, to go out before anything else.
    pub(crate) fn new(role: Role, mut limits: ConnLimits) -> Self {
        limits.max_frame_size = limits
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        limits.initial_stream_window = limits.initial_stream_window.min(frame::MAX_WINDOW as u32);
        let conn_window = limits
            .initial_connection_window
            .clamp(frame::DEFAULT_WINDOW, frame::MAX_WINDOW as u32);
        let mut out = Vec::with_capacity(if role == Role::Client { 128 } else { 64 });
        // A server says how many streams the client may open; a client
        // turns push off (RFC 9113 §8.4), which also keeps the server from
        // opening any.
        let first = match role {
            Role::Server => (
                setting::MAX_CONCURRENT_STREAMS,
                limits.max_concurrent_streams,
            ),
            Role::Client => {
                out.extend_from_slice(frame::PREFACE);
                (setting::ENABLE_PUSH, 0)
            }
        };
        let announced = [
            Some(first),
            Some((setting::INITIAL_WINDOW_SIZE, limits.initial_stream_window)),
            Some((setting::MAX_FRAME_SIZE, limits.max_frame_size)),
            Some((setting::MAX_HEADER_LIST_SIZE, limits.max_header_list_size)),
            (limits.header_table_size != 4096)
                .then_some((setting::HEADER_TABLE_SIZE, limits.header_table_size)),
            (role == Role::Server && limits.enable_connect_protocol)
                .then_some((setting::ENABLE_CONNECT_PROTOCOL, 1)),
            // RFC 9218 §2.1: a server schedules by Extensible Priorities.
            (role == Role::Server && limits.no_rfc7540_priorities)
                .then_some((setting::NO_RFC7540_PRIORITIES, 1)),
        ];
        let mut settings = [(0, 0); 7];
        let mut n = 0;
        for s in announced.into_iter().flatten() {
            settings[n] = s;
            n += 1;
        }
        frame::write_settings(&mut out, &settings[..n]);
        if conn_window > frame::DEFAULT_WINDOW {
            frame::write_window_update(&mut out, 0, conn_window - frame::DEFAULT_WINDOW);
        }
        ConnCore {
            role,
            decoder: Decoder::announcing(limits.header_table_size),
            encoder: Encoder::default(),
            out: Output::new(out),
            streams: StreamTable::default(),
            // A client's streams may all be cancelled at once (capped: the
            // origin's SETTINGS cannot make this grow).
            recent_resets: match role {
                Role::Client => {
                    RecentResets::remembering(limits.max_concurrent_streams.min(1024) as usize)
                }
                Role::Server => RecentResets::default(),
            },
            block: Vec::new(),
            pending: None,
            scratch: Vec::new(),
            settings_received: false,
            peer_connect_protocol: false,
            settings_acked: false,
            last_opened: 0,
            last_taken: 0,
            goaway_sent: None,
            peer_goaway: None,
            shutdown_ping: false,
            dead: None,
            conn_recv_window: i64::from(conn_window),
            conn_recv_owed: 0,
            conn_recv_initial: conn_window,
            conn_send_window: i64::from(frame::DEFAULT_WINDOW),
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            peer_max_header_list: u32::MAX,
            peer_max_concurrent_streams: u32::MAX,
            budgets: FloodBudgets::new(&limits),
            pings_in_flight: 0,
            pending_priorities: PendingUpdates::default(),
            send_turns: 0,
            some_waiting: false,
            limits,
        }
    }

    /// The receive window a new stream starts with: until the peer
    /// acknowledges our SETTINGS it may assume the default window.
    pub(crate) fn new_stream_recv_window(&self) -> i64 {
        i64::from(if self.settings_acked {
            self.limits.initial_stream_window
        } else {
            self.limits.initial_stream_window.max(frame::DEFAULT_WINDOW)
        })
    }

    /// A stream the peer may not have used yet: above the highest opened,
    /// or, facing a server, one it would have had to open (push is off).
    pub(crate) fn is_idle(&self, id: StreamId) -> bool {
        id > self.last_opened || (self.role == Role::Client && id % 2 == 0)
    }

    /// Frames on a stream not in the table and not idle are on a closed
    /// stream; these are dropped when this side ended the stream (the peer
    /// may not have known yet).
    pub(crate) fn dropped_stream(&self, id: StreamId) -> bool {
        self.recent_resets.contains(id) || self.goaway_sent.is_some_and(|last| id > last)
    }

    /// A connection error of `code` when `broken` (a rule of RFC 9113 the
    /// peer broke), else nothing.
    pub(crate) fn refuse_if(&mut self, broken: bool, code: ErrorCode) -> Result<(), ConnError> {
        if broken {
            return Err(self.connection_error(code));
        }
        Ok(())
    }

    /// Queues GOAWAY for a connection error and ends the connection.
    pub(crate) fn connection_error(&mut self, code: ErrorCode) -> ConnError {
        if self.dead.is_none() {
            frame::write_goaway(self.out.frames(), self.last_taken, code.to_u32());
            self.dead = Some(code);
        }
        ConnError { code }
    }

    /// Resets `stream` for the peer's error: RST_STREAM, the role told when
    /// it knew the stream, and the reset counted against
    /// `max_error_resets`.
    pub(crate) fn stream_error(
        &mut self,
        stream: StreamId,
        code: ErrorCode,
        side: &mut dyn RoleSide,
    ) -> Result<(), ConnError> {
        frame::write_rst_stream(self.out.frames(), stream, code.to_u32());
        if self.streams.remove(stream).is_some() {
            side.reset(stream, code);
        }
        self.recent_resets.add(stream);
        let within = self.budgets.error_reset();
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)
    }

    /// Decodes a whole header block, handing each field to `field` (which
    /// may drop them: the HPACK table is kept in step either way); a
    /// decoding error is a connection error.
    pub(crate) fn decode_block(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), ConnError> {
        self.decoder
            .decode(block, field)
            .map_err(|_| self.connection_error(ErrorCode::CompressionError))
    }

    /// [`Self::decode_block`] for a block whose fields the caller keeps
    /// until the next block: `Ok(true)`, with `field` not called, when the
    /// block is the last one decoded here again over the same table (see
    /// [`crate::http2::hpack::Decoder::decode_unless_repeated`]).
    pub(crate) fn decode_block_unless_repeated(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool, ConnError> {
        self.decoder
            .decode_unless_repeated(block, field)
            .map_err(|_| self.connection_error(ErrorCode::CompressionError))
    }

    /// Ends a stream with the trailers its role decoded (`valid`: they
    /// passed the role's checks): they must end the stream, and the body
    /// before them must match its content-length; else the stream is reset
    /// for a PROTOCOL_ERROR. True when the role reports them.
    pub(crate) fn end_with_trailers(
        &mut self,
        b: PendingBlock,
        valid: bool,
        side: &mut dyn RoleSide,
    ) -> Result<bool, ConnError> {
        let id = b.stream;
        if !b.end_stream || b.self_dependent || !valid {
            self.stream_error(id, ErrorCode::ProtocolError, side)?;
            return Ok(false);
        }
        let Some(s) = self.streams.get_mut(id) else {
            return Ok(false);
        };
        if s.content_length.is_some_and(|cl| cl != s.received) {
            self.stream_error(id, ErrorCode::ProtocolError, side)?;
            return Ok(false);
        }
        s.recv_closed = true;
        self.streams.remove_if_done(id);
        Ok(true)
    }

    /// Counts a frame that makes no output and changes nothing the peer
    /// waits for: an earned credit first, then the bucket.
    pub(crate) fn inert_frame(&mut self, now: Instant) -> Result<(), ConnError> {
        let within = self.budgets.inert_frame(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)
    }

    /// Counts a frame that carries nothing against its budget.
    pub(crate) fn empty_frame(&mut self, now: Instant) -> Result<(), ConnError> {
        let within = self.budgets.empty_frame(now);
        self.refuse_if(!within, ErrorCode::EnhanceYourCalm)
    }

    /// Frees the buffers nothing waits in, so an idle connection holds none;
    /// true when no stream is open and no block is being joined (the role
    /// may free its head then).
    pub(crate) fn release_idle_buffers(&mut self) -> bool {
        self.out.release_idle();
        self.scratch = Vec::new();
        if self.streams.len() == 0 && self.pending.is_none() {
            self.block = Vec::new();
            self.streams.release_idle();
            return true;
        }
        false
    }
}
