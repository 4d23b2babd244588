//! One client thread's state for `pier bench http`: the thread context its
//! connections share, each connection slot, and the per-connection response
//! parser that counts what arrives. Both engines (tokio and the plain epoll
//! loop) drive these same pieces.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::http_plan::{HttpPlan, Schedule};
use super::io::ThreadTls;
use super::stats::{FailureKind, Stats};
use crate::http1::body::BodyDecoder;
use crate::http1::client::parse_final_head;
use crate::http1::parse::{BodyKind, Limits, Method};
use crate::http1::response::{ParsedResponseHead, ResponseBody};

/// Read buffer per connection; grows only for a response head that does not fit.
const READ_BUF: usize = 16 * 1024;
/// Response heads are parsed with generous limits: the server is measured, not judged.
const LIMITS: Limits = Limits {
    max_head_bytes: 64 * 1024,
    max_headers: 256,
    max_uri_bytes: 8192,
};
/// Consecutive failed connects after which a `-n` connection gives up its share.
pub(super) const MAX_CONNECT_FAILURES: u32 = 3;

/// State of one client thread, shared by its connections (never across threads).
pub(super) struct ThreadCtx {
    pub(super) plan: Arc<HttpPlan>,
    pub(super) tls: Option<ThreadTls>,
    pub(super) stats: RefCell<Stats>,
    pub(super) deadline: Option<Instant>,
    pub(super) progress: Arc<AtomicU64>,
    pub(super) slot_ended: Notify,
}

impl ThreadCtx {
    pub(super) fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }
}

/// One of the `-c` connections: it outlives the TCP connections it opens one
/// after another, and the watchdog reads its progress.
pub(super) struct Slot {
    /// Requests not yet sent (`u64::MAX` when the run is bounded by time).
    pub(super) remaining: Cell<u64>,
    /// Sent and not yet answered.
    pub(super) in_flight: Cell<u64>,
    /// Last progress while something is awaited (connect, handshake, response).
    pub(super) busy_since: Cell<Option<Instant>>,
    /// Open-loop send times.
    pub(super) schedule: Option<Schedule>,
    /// Requests consumed so far: the schedule index of the next one.
    pub(super) next: Cell<u64>,
}

impl Slot {
    /// Uses up `n` requests of this connection's share (sent or failed).
    pub(super) fn take(&self, n: u64) {
        self.remaining.set(self.remaining.get().saturating_sub(n));
        self.next.set(self.next.get() + n);
    }

    /// Returns `n` requests to the share: the server did not process them, so
    /// they are sent again.
    pub(super) fn give_back(&self, n: u64) {
        self.remaining.set(self.remaining.get().saturating_add(n));
    }

    /// A long response is still arriving: the watchdog's clock starts again,
    /// so only a stall, not a large body, counts as a timeout.
    pub(super) fn progressed(&self) {
        if self.in_flight.get() > 0 {
            self.busy_since.set(Some(Instant::now()));
        }
    }

    /// Counts everything in flight as failed with `kind`.
    pub(super) fn fail(&self, ctx: &ThreadCtx, kind: FailureKind) {
        let n = self.in_flight.replace(0);
        if n > 0 {
            ctx.stats.borrow_mut().errors.add(kind, n);
        }
        self.busy_since.set(None);
    }
}

/// Where the parser is in the current response.
#[derive(Debug)]
enum Phase {
    /// Waiting for (the rest of) a head.
    Head,
    /// Skipping this many body bytes.
    Skip(u64),
    /// Decoding a chunked body.
    Chunked(BodyDecoder),
    /// Body runs to the end of the connection.
    UntilClose,
}

/// What one parse pass over the read buffer found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ParseStep {
    /// Every complete response counted; more bytes are needed.
    More,
    /// A response said the connection ends after it.
    Close,
    /// A response that does not parse, or one nobody asked for.
    Malformed,
}

/// Per-connection buffers, reused across the TCP connections of a slot.
pub(super) struct ConnState {
    pub(super) buf: Vec<u8>,
    pos: usize,
    head: ParsedResponseHead,
    phase: Phase,
    status: u16,
    keep_alive: bool,
    /// Latency origin of each request in flight, oldest first.
    pub(super) sent: VecDeque<Instant>,
    /// When the current TCP connection's connect started: the origin of its
    /// connect time and its time to first byte.
    connect_start: Option<Instant>,
    /// Connected, and no response byte read yet.
    awaiting_first_byte: bool,
}

impl ConnState {
    pub(super) fn new(depth: usize) -> ConnState {
        ConnState {
            buf: Vec::with_capacity(READ_BUF),
            pos: 0,
            head: ParsedResponseHead::new(),
            phase: Phase::Head,
            status: 0,
            keep_alive: true,
            sent: VecDeque::with_capacity(depth),
            connect_start: None,
            awaiting_first_byte: false,
        }
    }

    /// A connect starts at `at`.
    pub(super) fn connect_started(&mut self, at: Instant) {
        self.connect_start = Some(at);
        self.awaiting_first_byte = false;
    }

    /// The connection became usable at `at` (with TLS: handshake done).
    pub(super) fn connected(&mut self, stats: &mut Stats, at: Instant) {
        if let Some(start) = self.connect_start {
            stats.record_connect(at.saturating_duration_since(start));
            self.awaiting_first_byte = true;
        }
    }

    /// Bytes arrived at `at`: the first of a connection give its time to first byte.
    pub(super) fn bytes_arrived(&mut self, stats: &mut Stats, at: Instant) {
        if let (true, Some(start)) = (self.awaiting_first_byte, self.connect_start) {
            self.awaiting_first_byte = false;
            stats.record_first_byte(at.saturating_duration_since(start));
        }
    }

    pub(super) fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.phase = Phase::Head;
        self.sent.clear();
    }

    /// Keeps room to read into: drops consumed bytes, grows only for a big head.
    pub(super) fn make_room(&mut self) {
        if self.buf.capacity() - self.buf.len() >= 2048 {
            return;
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos.., 0);
            self.buf.truncate(self.buf.len() - self.pos);
            self.pos = 0;
        }
        if self.buf.capacity() - self.buf.len() < 2048 {
            self.buf.reserve(self.buf.len().max(READ_BUF));
        }
    }

    /// Counts every response complete in the buffer, all received at `now`.
    pub(super) fn parse(
        &mut self,
        method: Method,
        stats: &mut Stats,
        now: Instant,
        slot: &Slot,
    ) -> ParseStep {
        let step = loop {
            let avail = self.buf.get(self.pos..).unwrap_or(&[]);
            let body_done = match &mut self.phase {
                Phase::Head => {
                    if avail.is_empty() {
                        break ParseStep::More;
                    }
                    let Ok(found) = parse_final_head(avail, &LIMITS, method, &mut self.head) else {
                        break ParseStep::Malformed;
                    };
                    self.pos += found.interim;
                    if !found.complete {
                        break ParseStep::More;
                    }
                    self.pos += self.head.head_len;
                    let status = self.head.status;
                    self.status = status;
                    self.keep_alive = self.head.keep_alive && status != 101;
                    match self.head.body {
                        ResponseBody::None | ResponseBody::Length(0) => true,
                        ResponseBody::Length(n) => {
                            self.phase = Phase::Skip(n);
                            false
                        }
                        ResponseBody::Chunked => {
                            self.phase = Phase::Chunked(BodyDecoder::new(BodyKind::Chunked));
                            false
                        }
                        ResponseBody::UntilClose => {
                            self.phase = Phase::UntilClose;
                            false
                        }
                    }
                }
                Phase::Skip(rem) => {
                    let take = (*rem).min(avail.len() as u64);
                    self.pos += take as usize;
                    *rem -= take;
                    if *rem > 0 {
                        break ParseStep::More;
                    }
                    true
                }
                // The decoder hands out one data run per call: keep calling
                // while it makes progress, or a response of several chunks
                // that arrived in one read waits for bytes already here.
                Phase::Chunked(dec) => match dec.decode(avail) {
                    Err(_) => break ParseStep::Malformed,
                    Ok(d) if d.done => {
                        self.pos += d.consumed;
                        true
                    }
                    Ok(d) if d.consumed > 0 && d.consumed < avail.len() => {
                        self.pos += d.consumed;
                        continue;
                    }
                    Ok(d) => {
                        self.pos += d.consumed;
                        break ParseStep::More;
                    }
                },
                Phase::UntilClose => {
                    self.pos = self.buf.len();
                    break ParseStep::More;
                }
            };
            if body_done {
                self.phase = Phase::Head;
                if !self.complete(stats, now, slot) {
                    break ParseStep::Malformed;
                }
                if !self.keep_alive {
                    break ParseStep::Close;
                }
            }
        };
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        step
    }

    /// At end of stream: true if that ends a body delimited by the close, which
    /// is then a complete response to record.
    pub(super) fn ends_at_close(&mut self) -> bool {
        let ends = matches!(self.phase, Phase::UntilClose);
        if ends {
            self.phase = Phase::Head;
        }
        ends
    }

    /// Records the response just finished; false if no request was waiting for it.
    pub(super) fn complete(&mut self, stats: &mut Stats, now: Instant, slot: &Slot) -> bool {
        let Some(origin) = self.sent.pop_front() else {
            return false;
        };
        slot.in_flight.set(slot.in_flight.get().saturating_sub(1));
        stats.record(self.status, now.saturating_duration_since(origin));
        true
    }
}
