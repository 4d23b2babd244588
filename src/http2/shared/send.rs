//! The sending side of a connection in either role: header blocks split to
//! the peer's frame size, DATA held to the send windows (copied or queued
//! as owned buffers), trailers, resets, the WINDOW_UPDATEs that reopen our
//! receive windows as the driver consumes bodies, and GOAWAY.

use bytes::Bytes;

use super::budget::{FloodBudgets, SMALL_DATA};
use super::schedule::INCREMENTAL_CHUNK;
use super::streams::Stream;
use super::{ConnCore, Role, StreamId, SHUTDOWN_PING};
use crate::http2::frame;
use crate::http2::hpack::Encoder;
use crate::http2::ErrorCode;

/// The size RFC 9113 §6.5.2 counts for a field in a header list: its
/// name's and value's octets and 32 more.
const FIELD_OVERHEAD: u64 = 32;

/// What a header block's fields go through: the HPACK encoder, and the
/// list size the peer's SETTINGS_MAX_HEADER_LIST_SIZE bounds, summed as
/// they are encoded (one addition a field).
pub(crate) struct BlockEncoder<'a> {
    encoder: &'a mut Encoder,
    out: &'a mut Vec<u8>,
    list_size: u64,
}

impl BlockEncoder<'_> {
    /// Appends `:status`.
    pub(crate) fn status(&mut self, status: u16) {
        self.list_size += (b":status".len() + 3) as u64 + FIELD_OVERHEAD;
        self.encoder.encode_status(status, self.out);
    }

    /// Appends one field; `name` is lowercase.
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        self.list_size += (name.len() + value.len()) as u64 + FIELD_OVERHEAD;
        self.encoder.encode_field(name, value, self.out);
    }
}

impl ConnCore {
    /// Queues a header block on `stream` as HEADERS (plus CONTINUATIONs
    /// past the peer's max frame size); `encode` writes its fields. False,
    /// with nothing queued, when the fields' list size is past the peer's
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the block is dropped and the HPACK
    /// tables are brought back in step at the next block.
    pub(crate) fn write_header_block(
        &mut self,
        stream: StreamId,
        end_stream: bool,
        encode: impl FnOnce(&mut BlockEncoder),
    ) -> bool {
        let out = self.out.frames();
        let at = out.len();
        out.extend_from_slice(&[0; frame::HEAD_LEN]);
        self.encoder.begin_block(out);
        let mut block = BlockEncoder {
            encoder: &mut self.encoder,
            out,
            list_size: 0,
        };
        encode(&mut block);
        if block.list_size > u64::from(self.peer_max_header_list) {
            out.truncate(at);
            self.encoder.discard_block();
            return false;
        }
        let len = out.len() - at - frame::HEAD_LEN;
        if len <= self.peer_max_frame {
            let mut flags = frame::flag::END_HEADERS;
            if end_stream {
                flags |= frame::flag::END_STREAM;
            }
            out[at..at + frame::HEAD_LEN].copy_from_slice(&frame::head_bytes(
                len,
                frame::kind::HEADERS,
                flags,
                stream,
            ));
        } else {
            self.scratch.clear();
            self.scratch.extend_from_slice(&out[at + frame::HEAD_LEN..]);
            out.truncate(at);
            frame::write_header_block(out, stream, &self.scratch, end_stream, self.peer_max_frame);
        }
        if end_stream {
            self.streams.remove_if_done(stream);
        }
        true
    }

    /// The stream when this side may still send on it.
    pub(crate) fn sendable(&mut self, stream: StreamId) -> Option<&mut Stream> {
        if self.dead.is_some() {
            return None;
        }
        self.streams.get_mut(stream).filter(|s| !s.send_closed)
    }

    /// How many body bytes `stream` may send now: the smaller of its window
    /// and the connection's; 0 for a stream that cannot send.
    pub(crate) fn send_capacity(&self, stream: StreamId) -> usize {
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

    /// How many of `want` body bytes `stream` may send now, with `room`
    /// left in the output: [`Self::send_capacity`] within both, with the
    /// small-data budget of `budget.rs` charged when the peer's window cuts
    /// the piece below [`SMALL_DATA`]. 0 past that budget, when the
    /// connection has ended with GOAWAY ENHANCE_YOUR_CALM.
    ///
    /// A server with other streams open shares the capacity out by
    /// priority (`priority.rs`): 0 while a stream that goes first wants to
    /// send and can, and an incremental stream's grant is one turn's
    /// worth; a stream told 0 is marked as waiting, so the others see it.
    pub(crate) fn grant_send(&mut self, stream: StreamId, want: usize, room: usize) -> usize {
        let window = self.send_capacity(stream);
        let mut grant = window.min(room).min(want);
        let scheduling = self.scheduling();
        // Only a stream told to wait can go first: while none is, there is
        // nothing to look at.
        if scheduling && grant > 0 && self.some_waiting {
            let (ahead, others_wait) = self.sender_ahead_of(stream);
            if ahead.is_some() {
                grant = 0;
            }
            self.some_waiting = others_wait;
        }
        let cut_by_window = grant > 0 && grant == window && window < want;
        if cut_by_window && window < SMALL_DATA && !self.budgets.small_data() {
            self.connection_error(ErrorCode::EnhanceYourCalm);
            return 0;
        }
        if self.role == Role::Server {
            self.send_turns += 1;
            if let Some(s) = self.streams.get_mut(stream) {
                grant = note_grant(
                    s,
                    grant,
                    scheduling,
                    self.send_turns,
                    &mut self.some_waiting,
                );
            }
        }
        grant
    }

    /// Queues DATA frames of `data` (at most the peer's max frame size
    /// each) within [`Self::send_capacity`]; returns how many bytes were
    /// taken. `end_stream` applies only when all of `data` was taken; empty
    /// `data` with `end_stream` sends an empty DATA frame that ends the stream.
    pub(crate) fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> usize {
        let Some((take, ends)) = self.take_window(stream, data.len(), end_stream) else {
            return 0;
        };
        let mut chunks = data[..take].chunks(self.peer_max_frame).peekable();
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            frame::write_data(self.out.frames(), stream, chunk, ends && last);
            self.budgets.earn_inert(2);
        }
        if ends {
            if take == 0 {
                frame::write_data(self.out.frames(), stream, &[], true);
            }
            self.streams.remove_if_done(stream);
        }
        take
    }

    /// Queues all of `data` as `stream`'s last DATA when its windows, `room`
    /// (what the output may still take) and the schedule let it go at once,
    /// as [`Self::grant_send`] would grant it whole: a small answer's body
    /// then leaves with its head. False, with nothing queued and no budget
    /// charged, when it would be cut or would wait; the caller then sends it
    /// piece by piece as granted.
    pub(crate) fn send_data_at_once(&mut self, stream: StreamId, data: &[u8], room: usize) -> bool {
        let len = data.len();
        // Within the window and the room, and one incremental turn at most:
        // the grant is then all of it or nothing (another stream first),
        // never a cut piece that charges the small-data budget.
        if len == 0
            || len > room
            || len > INCREMENTAL_CHUNK
            || len > self.peer_max_frame
            || self.dead.is_some()
        {
            return false;
        }
        let scheduling = self.scheduling();
        if scheduling && self.some_waiting {
            // A stream told to wait may go first: the schedule decides.
            if self.send_capacity(stream) < len || self.grant_send(stream, len, room) < len {
                return false;
            }
            return self.send_data(stream, data, true) == len;
        }
        // No stream waits, so a grant within the windows is all of it, as
        // `grant_send` gives it: the stream is found once and its one frame
        // written.
        let conn_window = self.conn_send_window;
        let Some(s) = self.streams.get_mut(stream) else {
            return false;
        };
        if !s.head_sent || s.send_closed || s.send_window.min(conn_window) < len as i64 {
            return false;
        }
        if self.role == Role::Server {
            self.send_turns += 1;
            note_grant(s, len, scheduling, self.send_turns, &mut self.some_waiting);
        }
        spend_window(s, &mut self.conn_send_window, &mut self.budgets, len, true);
        let done = s.recv_closed;
        frame::write_data(self.out.frames(), stream, data, true);
        self.budgets.earn_inert(2);
        if done {
            self.streams.remove(stream);
        }
        true
    }

    /// [`Self::send_data`] for a body buffer the connection may keep: the
    /// DATA frames carry slices of `data` itself, written from it without a
    /// copy.
    pub(crate) fn send_data_owned(
        &mut self,
        stream: StreamId,
        data: Bytes,
        end_stream: bool,
    ) -> usize {
        let Some((take, ends)) = self.take_window(stream, data.len(), end_stream) else {
            return 0;
        };
        if take == 0 {
            // Nothing to carry but the end of the stream (an empty frame).
            if ends {
                frame::write_data(self.out.frames(), stream, &[], true);
                self.streams.remove_if_done(stream);
            }
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
            frame::write_head(self.out.frames(), len, frame::kind::DATA, flags, stream);
            self.out.push_owned(data.slice(at..at + len));
            at += len;
            self.budgets.earn_inert(2);
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
        spend_window(s, &mut self.conn_send_window, &mut self.budgets, take, ends);
        Some((take, ends))
    }

    /// Queues trailers on `stream` after its head, which end it. Trailers
    /// past the peer's SETTINGS_MAX_HEADER_LIST_SIZE cannot be sent, and a
    /// message without them would look whole: the stream is reset with
    /// INTERNAL_ERROR instead, and false returned.
    pub(crate) fn send_trailers<'f>(
        &mut self,
        stream: StreamId,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> bool {
        let Some(s) = self.sendable(stream) else {
            return false;
        };
        if !s.head_sent {
            return false;
        }
        s.send_closed = true;
        let sent = self.write_header_block(stream, true, |block| {
            for (name, value) in fields {
                block.field(name, value);
            }
        });
        if !sent {
            self.reset_stream(stream, ErrorCode::InternalError);
        }
        sent
    }

    /// Ends `stream` with RST_STREAM(`code`), unless it is closed already.
    pub(crate) fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        if self.dead.is_some() || self.streams.remove(stream).is_none() {
            return;
        }
        frame::write_rst_stream(self.out.frames(), stream, code.to_u32());
        self.recent_resets.add(stream);
    }

    /// The driver used `n` body bytes of `stream` (or dropped them): its
    /// window and the connection's reopen, with WINDOW_UPDATE frames once
    /// enough is owed (half the window).
    pub(crate) fn release(&mut self, stream: StreamId, n: usize) {
        if self.dead.is_some() || n == 0 {
            return;
        }
        let half = (self.limits.initial_stream_window / 2).max(1);
        if let Some(s) = self.streams.get_mut(stream).filter(|s| !s.recv_closed) {
            s.recv_owed = s.recv_owed.saturating_add(n as u32);
            if s.recv_owed >= half {
                let inc = i64::from(s.recv_owed).min(frame::MAX_WINDOW - s.recv_window);
                if inc > 0 {
                    frame::write_window_update(self.out.frames(), stream, inc as u32);
                    s.recv_window += inc;
                }
                s.recv_owed = 0;
            }
        }
        self.release_connection(n);
    }

    /// Reopens the connection's receive window by `n` bytes.
    pub(crate) fn release_connection(&mut self, n: usize) {
        self.conn_recv_owed += n as u64;
        if self.conn_recv_owed >= u64::from(self.conn_recv_initial / 2) {
            let inc = (self.conn_recv_owed as i64).min(frame::MAX_WINDOW - self.conn_recv_window);
            if inc > 0 {
                frame::write_window_update(self.out.frames(), 0, inc as u32);
                self.conn_recv_window += inc;
            }
            self.conn_recv_owed = 0;
        }
    }

    /// Begins a graceful shutdown (RFC 9113 §6.8): a GOAWAY naming the
    /// highest stream id, so a stream the client opened before it saw the
    /// GOAWAY is still taken, and a PING. The PING's ack, which the client
    /// sends after every frame it wrote before, brings the final GOAWAY
    /// naming the last stream taken; a driver whose client does not answer
    /// in time calls [`Self::goaway`] itself.
    pub(crate) fn goaway_gracefully(&mut self) {
        if self.dead.is_some() || self.goaway_sent.is_some() || self.shutdown_ping {
            return;
        }
        frame::write_goaway(
            self.out.frames(),
            frame::MAX_STREAM_ID,
            ErrorCode::NoError.to_u32(),
        );
        frame::write_ping(self.out.frames(), &SHUTDOWN_PING);
        self.shutdown_ping = true;
    }

    /// Queues GOAWAY naming the last peer-opened stream taken. With
    /// NO_ERROR the streams in flight go on and new ones are refused; the
    /// driver closes when they are done.
    pub(crate) fn goaway(&mut self, code: ErrorCode) {
        if self.dead.is_some() {
            return;
        }
        frame::write_goaway(self.out.frames(), self.last_taken, code.to_u32());
        self.goaway_sent = Some(self.last_taken);
        self.shutdown_ping = false;
        if code != ErrorCode::NoError {
            self.dead = Some(code);
        }
    }
}

/// What a server's stream keeps of a grant of its send capacity: told to
/// wait (so the other streams see it), or its incremental turn taken and
/// the grant cut to one turn's worth. Returns the grant.
fn note_grant(
    s: &mut Stream,
    grant: usize,
    scheduling: bool,
    turn: u64,
    some_waiting: &mut bool,
) -> usize {
    s.wants_send = grant == 0;
    if grant == 0 {
        *some_waiting = true;
    }
    if scheduling && grant > 0 && s.priority.incremental {
        s.send_turn = turn;
        return grant.min(INCREMENTAL_CHUNK);
    }
    grant
}

/// Takes `take` body bytes of a stream's and the connection's send windows
/// (counted as progress for the small-data budget); `ends` closes the
/// stream's sending side.
fn spend_window(
    s: &mut Stream,
    conn_window: &mut i64,
    budgets: &mut FloodBudgets,
    take: usize,
    ends: bool,
) {
    budgets.data_sent(take);
    s.send_window -= take as i64;
    *conn_window -= take as i64;
    if ends {
        s.send_closed = true;
    }
}
