//! The HTTP/3 state of one QUIC connection, shared by its task and its
//! request streams' tasks: the QUIC state machine, our control and QPACK
//! streams, the peer's, and a slot per request stream. The connection task
//! calls [`H3Conn::step`] after every wake-up: it takes QUIC's events,
//! reads the streams that have data (a request stream only while its
//! handler keeps up, so the client's sending follows the handler's
//! reading), decodes request heads with QPACK, and writes what the request
//! tasks queued as far as QUIC's flow control lets it, in the order the
//! requests' priorities ask ([`super::send_order`]).

use std::collections::{HashMap, HashSet};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{Connection, Dir, Event, StreamEvent, StreamId, VarInt};
use tracing::debug;

use super::send_order::{send_priority, OWN_STREAMS};
use crate::config::Config;
use crate::http::priority::{PendingUpdates, Priority};
use crate::http::request_fields::RequestHead as DecodedHead;
use crate::http::OwnedField;
use crate::http1::parse::{Limits, RequestHead};
use crate::http3::control::{ControlEvent, ControlStream};
use crate::http3::frame;
use crate::http3::frame_budget::{FrameBudget, UNKNOWN_STREAM_COST};
use crate::http3::frame_reader::FrameLimits;
use crate::http3::message::{RequestEvent, RequestStream};
use crate::http3::qpack::{Decoder, Encoder};
use crate::http3::request_head::{
    decode_request_head, decode_trailers, new_request_head, HeadOutcome,
};
use crate::http3::settings::Settings;
use crate::http3::uni_stream::{PeerUniStreams, StreamTypeReader, UniStreamType};
use crate::http3::{Error, ErrorCode, Role, Scope};
use crate::server::pseudo_head::read_pseudo_head;

/// Request body bytes held for a handler before the stream is read no more.
const BODY_HIGH: usize = 64 * 1024;

/// The largest client-initiated bidirectional stream id (2^62 - 4): a
/// GOAWAY naming it refuses nothing.
const LAST_REQUEST_ID: u64 = (1 << 62) - 4;

/// The least time between the first GOAWAY and the final one: a request
/// the client sent just before it read the first still arrives in it.
const GOAWAY_GRACE: Duration = Duration::from_millis(250);
/// Response bytes a request may queue before it waits for QUIC to take them
/// (and the connection's `queue_budget` bounds all of them together).
pub(super) const OUT_HIGH: usize = 256 * 1024;
/// The most read from one stream in one go.
const READ_CHUNK: usize = 64 * 1024;

/// Where a request stream's head is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeadState {
    /// Not received yet.
    Waiting,
    /// Waiting on QPACK inserts.
    Blocked,
    /// Decoded, not yet handed to a task.
    Decoded,
    /// Too large to hold: answered 431.
    TooLarge,
    /// A task serves it.
    Dispatched,
}

/// One request stream.
pub(super) struct RequestSlot {
    reader: RequestStream,
    decoded: DecodedHead,
    head: HeadState,
    /// Content received and not yet taken by the handler.
    pub(super) body: Vec<u8>,
    /// The client ended its side of the stream.
    pub(super) body_end: bool,
    /// The request's trailers, once decoded.
    pub(super) trailers: Option<Vec<OwnedField>>,
    /// The trailers wait on QPACK inserts: the body is not over before they
    /// are decoded.
    pub(super) trailers_blocked: bool,
    /// The client reset or stopped the stream (or it broke the rules).
    pub(super) reset: bool,
    /// Framed response bytes not yet taken by QUIC.
    pub(super) out: Vec<u8>,
    /// The response ends once `out` is written.
    pub(super) fin: bool,
    fin_sent: bool,
    /// The answer's QUIC send priority ([`super::send_order`]).
    order: i32,
    /// Answer bytes QUIC took so far.
    written: u64,
    /// The request's task ended.
    pub(super) done: bool,
    /// The request's task, waiting for body, room or a reset.
    pub(super) waker: Option<Waker>,
}

impl RequestSlot {
    /// Keeps the request's trailers as decoded, or notes that they wait on
    /// QPACK inserts. Trailers past the field section limit are dropped.
    fn keep_trailers(&mut self, outcome: HeadOutcome, fields: &DecodedHead) {
        self.trailers_blocked = outcome == HeadOutcome::Blocked;
        if outcome == HeadOutcome::Ready {
            self.trailers = Some(fields.owned_fields());
        }
        self.wake();
    }

    /// Wakes the request's task.
    pub(super) fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Registers the request's task to be woken.
    pub(super) fn wait(&mut self, waker: &Waker) {
        match &self.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.waker = Some(waker.clone()),
        }
    }
}

/// A request ready for a task: its id and its head as HTTP/1, or the status
/// that refuses it.
pub(super) struct Fresh {
    pub(super) id: StreamId,
    pub(super) buf: Vec<u8>,
    pub(super) head: RequestHead,
    pub(super) parsed: Result<(), u16>,
    /// An extended CONNECT (RFC 9220), read as the upgrade it stands for.
    pub(super) extended_connect: bool,
    /// The head came in 0-RTT early data, before the handshake ended.
    pub(super) early_data: bool,
}

/// A unidirectional stream the peer opened.
enum PeerUni {
    /// Its type is not read yet.
    Typing(StreamTypeReader),
    Control(Box<ControlStream>),
    Encoder,
    Decoder,
    /// An unknown type: not read.
    Ignored,
}

/// Our unidirectional streams and what is owed on each.
struct OwnUni {
    id: StreamId,
    out: Vec<u8>,
}

/// The HTTP/3 connection.
pub(super) struct H3Conn {
    pub(super) quic: Connection,
    pub(super) encoder: Encoder,
    decoder: Decoder,
    control: Option<OwnUni>,
    encoder_stream: Option<OwnUni>,
    decoder_stream: Option<OwnUni>,
    peer_streams: PeerUniStreams,
    peer_uni: HashMap<StreamId, PeerUni>,
    pub(super) requests: HashMap<StreamId, RequestSlot>,
    /// Streams that may have data to read.
    readable: HashSet<StreamId>,
    pub(super) fresh: Vec<Fresh>,
    frame_limits: FrameLimits,
    max_section: u64,
    limits: Limits,
    /// The first request stream id not served, once the final GOAWAY was
    /// sent.
    pub(super) goaway: Option<u64>,
    /// When the first GOAWAY (naming every stream) went out, the final one
    /// is due: streams the client opened before it saw the first are still
    /// taken until then.
    pub(super) goaway_due: Option<Instant>,
    /// The next request stream id the client may open.
    next_request: u64,
    /// The connection ended (closed by either side, or lost).
    pub(super) lost: bool,
    /// PRIORITY_UPDATE frames for requests not handed to a task yet.
    pending_priorities: PendingUpdates<u64>,
    /// The request streams in the order their answers take QUIC's flow
    /// control credit, kept to be sorted again each turn.
    write_order: Vec<(i32, std::cmp::Reverse<u64>, StreamId)>,
    /// Response bytes queued in all request slots, not yet taken by QUIC.
    pub(super) queued: usize,
    /// The most `queued` may reach: requests wait past it.
    pub(super) queue_budget: usize,
    /// Request streams the client reset or stopped before their answer.
    client_resets: u32,
    /// How many of those close the connection.
    max_client_resets: u32,
    /// The connection was closed for resetting too many streams.
    pub(super) reset_flood: bool,
    /// What small and unknown frames may still cost.
    frame_budget: FrameBudget,
    /// The connection was closed for small or unknown frames past its
    /// allowance.
    pub(super) frame_flood: bool,
}

impl H3Conn {
    /// A connection just accepted: our control stream (with SETTINGS) and
    /// QPACK streams are opened at once, to go out with the handshake.
    pub(super) fn new(quic: Connection, config: &Config) -> H3Conn {
        let limits = config.http.limits;
        let decoder_limits = config.http3.decoder_limits(&config.http);
        let mut conn = H3Conn {
            quic,
            encoder: Encoder::new(),
            decoder: Decoder::new(decoder_limits),
            control: None,
            encoder_stream: None,
            decoder_stream: None,
            peer_streams: PeerUniStreams::new(Role::Server),
            peer_uni: HashMap::new(),
            requests: HashMap::new(),
            readable: HashSet::new(),
            fresh: Vec::new(),
            frame_limits: FrameLimits::default(),
            max_section: decoder_limits.max_field_section_size,
            limits,
            goaway: None,
            goaway_due: None,
            next_request: 0,
            lost: false,
            pending_priorities: PendingUpdates::default(),
            write_order: Vec::new(),
            queued: 0,
            queue_budget: usize::try_from(config.http3.max_send_buffer).unwrap_or(usize::MAX),
            client_resets: 0,
            max_client_resets: config.http3.max_client_resets,
            reset_flood: false,
            frame_budget: FrameBudget::new(config.http3.frame_allowance),
            frame_flood: false,
        };
        let settings = Settings {
            qpack_max_table_capacity: decoder_limits.max_table_capacity,
            max_field_section_size: Some(decoder_limits.max_field_section_size),
            qpack_blocked_streams: decoder_limits.max_blocked_streams as u64,
            // WebSockets over HTTP/3 (RFC 9220), relayed by the proxy.
            enable_connect_protocol: true,
            ..Settings::default()
        };
        let mut control = Vec::new();
        UniStreamType::Control.write(&mut control);
        frame::write_settings(&settings, &mut control);
        conn.control = conn.open_uni(control);
        let mut enc = Vec::new();
        UniStreamType::QpackEncoder.write(&mut enc);
        conn.encoder_stream = conn.open_uni(enc);
        let mut dec = Vec::new();
        UniStreamType::QpackDecoder.write(&mut dec);
        conn.decoder_stream = conn.open_uni(dec);
        conn
    }

    fn open_uni(&mut self, out: Vec<u8>) -> Option<OwnUni> {
        let id = self.quic.streams().open(Dir::Uni)?;
        let _ = self.quic.send_stream(id).set_priority(OWN_STREAMS);
        Some(OwnUni { id, out })
    }

    /// Moves what the QPACK encoder owes the client onto our encoder stream.
    pub(super) fn flush_encoder(&mut self) {
        if let Some(e) = &mut self.encoder_stream {
            self.encoder.write_encoder_stream(&mut e.out);
        }
    }

    /// Sends GOAWAY naming the first request stream not yet opened: the
    /// client retries later requests elsewhere, and those already sent are
    /// answered.
    /// Starts a graceful GOAWAY (RFC 9114 §5.2), in two steps as HTTP/2's
    /// (RFC 9113 §6.8): first one that names the largest request stream id,
    /// so the client stops opening streams without losing one already on
    /// its way; two round trips later (at least [`GOAWAY_GRACE`]) the final
    /// one, naming the first stream not taken ([`Self::final_goaway`]).
    pub(super) fn goaway(&mut self, now: Instant) {
        if self.goaway.is_some() || self.goaway_due.is_some() {
            return;
        }
        if let Some(c) = &mut self.control {
            frame::write_goaway(LAST_REQUEST_ID, &mut c.out);
        }
        let grace = (self.quic.rtt() * 2).clamp(GOAWAY_GRACE, Duration::from_secs(1));
        self.goaway_due = Some(now + grace);
    }

    /// Sends the final GOAWAY once it is due: the streams past it are
    /// refused with H3_REQUEST_REJECTED, and the connection closes once
    /// those it took are answered.
    pub(super) fn final_goaway(&mut self, now: Instant) {
        if self.goaway.is_some() || self.goaway_due.is_none_or(|due| now < due) {
            return;
        }
        let id = self.next_request;
        self.goaway = Some(id);
        if let Some(c) = &mut self.control {
            frame::write_goaway(id, &mut c.out);
        }
    }

    /// Whether every stream the connection took is answered and its answer
    /// acknowledged by the client (closing drops what QUIC has not
    /// delivered). Our control and QPACK streams stay open for the
    /// connection's life.
    pub(super) fn idle(&mut self) -> bool {
        let own = [&self.control, &self.encoder_stream, &self.decoder_stream]
            .iter()
            .filter(|s| s.is_some())
            .count();
        self.requests.is_empty() && self.quic.streams().send_streams() <= own
    }

    /// Closes the connection with `code`.
    pub(super) fn close(&mut self, now: Instant, code: ErrorCode, reason: &str) {
        let code = VarInt::from_u64(code.to_u64()).unwrap_or(VarInt::from_u32(0x102));
        self.quic
            .close(now, code, Bytes::copy_from_slice(reason.as_bytes()));
    }

    /// One turn: QUIC's events, reads, writes.
    pub(super) fn step(&mut self, now: Instant) {
        while let Some(event) = self.quic.poll() {
            match event {
                Event::Stream(StreamEvent::Readable { id }) => {
                    self.readable.insert(id);
                }
                Event::Stream(StreamEvent::Stopped { id, .. }) => {
                    if let Some(slot) = self.requests.get_mut(&id) {
                        if !slot.reset && !slot.fin {
                            self.client_resets += 1;
                        }
                        slot.reset = true;
                        slot.wake();
                    }
                }
                Event::ConnectionLost { reason } => {
                    debug!(peer = %self.quic.remote_address(), %reason, "QUIC connection closed");
                    self.lost = true;
                    for slot in self.requests.values_mut() {
                        slot.reset = true;
                        slot.wake();
                    }
                }
                _ => {}
            }
        }
        self.accept_streams();
        let stats = self.quic.stats();
        self.frame_budget
            .observe_transport(stats.frame_rx.stream, stats.udp_rx.bytes);
        if let Err(e) = self.read_streams() {
            debug!(peer = %self.quic.remote_address(), error = %e, "HTTP/3 connection error");
            self.close(now, e.code, e.reason);
            return;
        }
        if self.client_resets > self.max_client_resets && !self.reset_flood {
            // Each reset stream cost a request's start for nothing: the
            // QUIC form of rapid reset (CVE-2023-44487).
            debug!(peer = %self.quic.remote_address(), "too many streams reset by the client: closed");
            self.reset_flood = true;
            self.close(now, ErrorCode::ExcessiveLoad, "too many streams reset");
            return;
        }
        if let Err(e) = self.frame_budget.check() {
            if !self.frame_flood {
                debug!(peer = %self.quic.remote_address(), error = %e, "HTTP/3 frame flood: closed");
                self.frame_flood = true;
                self.close(now, e.code, "too many small or unknown frames");
            }
            return;
        }
        self.write_streams();
    }

    fn accept_streams(&mut self) {
        while let Some(id) = self.quic.streams().accept(Dir::Bi) {
            let n = u64::from(id);
            self.next_request = self.next_request.max(n + 4);
            if self.goaway.is_some_and(|g| n >= g) {
                // Past our GOAWAY: the client may retry it elsewhere.
                let code = VarInt::from_u64(ErrorCode::RequestRejected.to_u64()).expect("small");
                let _ = self.quic.recv_stream(id).stop(code);
                let _ = self.quic.send_stream(id).reset(code);
                continue;
            }
            self.requests.insert(
                id,
                RequestSlot {
                    reader: RequestStream::new(self.frame_limits),
                    decoded: new_request_head(self.max_section, self.limits.max_headers, true),
                    head: HeadState::Waiting,
                    body: Vec::new(),
                    body_end: false,
                    trailers: None,
                    trailers_blocked: false,
                    reset: false,
                    out: Vec::new(),
                    fin: false,
                    fin_sent: false,
                    order: 0,
                    written: 0,
                    done: false,
                    waker: None,
                },
            );
            self.readable.insert(id);
        }
        while let Some(id) = self.quic.streams().accept(Dir::Uni) {
            self.peer_uni
                .insert(id, PeerUni::Typing(StreamTypeReader::default()));
            self.readable.insert(id);
        }
    }

    /// Reads what `id` holds now: the pieces, and whether the stream ended
    /// (`Err(code)`: the peer reset it). Stops at `max` bytes.
    fn read_stream(&mut self, id: StreamId, max: usize) -> (Vec<Bytes>, Result<bool, u64>) {
        let mut pieces = Vec::new();
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return (pieces, Ok(false));
        };
        let mut taken = 0;
        let end = loop {
            if taken >= max {
                break Ok(false);
            }
            match chunks.next(max - taken) {
                Ok(Some(chunk)) => {
                    taken += chunk.bytes.len();
                    pieces.push(chunk.bytes);
                }
                Ok(None) => break Ok(true),
                Err(quinn_proto::ReadError::Blocked) => break Ok(false),
                Err(quinn_proto::ReadError::Reset(code)) => break Err(code.into_inner()),
            }
        };
        // Flow-control credit goes out with the next packet either way.
        let _ = chunks.finalize();
        (pieces, end)
    }

    fn read_streams(&mut self) -> Result<(), Error> {
        let ids: Vec<StreamId> = self.readable.iter().copied().collect();
        for id in ids {
            if self.peer_uni.contains_key(&id) {
                self.readable.remove(&id);
                self.read_uni(id)?;
            } else if let Some(slot) = self.requests.get(&id) {
                let room = BODY_HIGH.saturating_sub(slot.body.len());
                if room == 0 || slot.done || slot.reset {
                    if slot.done || slot.reset {
                        self.readable.remove(&id);
                    }
                    continue;
                }
                let (pieces, end) = self.read_stream(id, room.min(READ_CHUNK));
                let more = pieces.iter().map(Bytes::len).sum::<usize>() >= room;
                if !more {
                    self.readable.remove(&id);
                }
                self.read_request(id, &pieces, end)?;
            } else {
                self.readable.remove(&id);
            }
        }
        self.take_unblocked()?;
        self.dispatch();
        if let Some(d) = &mut self.decoder_stream {
            self.decoder.write_decoder_stream(&mut d.out);
        }
        Ok(())
    }

    fn read_uni(&mut self, id: StreamId) -> Result<(), Error> {
        let (pieces, end) = self.read_stream(id, usize::MAX);
        for piece in &pieces {
            let mut data: &[u8] = piece;
            while !data.is_empty() {
                let Some(state) = self.peer_uni.get_mut(&id) else {
                    return Ok(());
                };
                match state {
                    PeerUni::Typing(reader) => {
                        let (ty, n) = reader.read(data);
                        data = &data[n..];
                        let Some(ty) = ty else { continue };
                        *state = match ty {
                            _ if !self.peer_streams.accept(ty)? => {
                                self.frame_budget.spend(UNKNOWN_STREAM_COST);
                                let code =
                                    VarInt::from_u64(ErrorCode::StreamCreationError.to_u64())
                                        .expect("small");
                                let _ = self.quic.recv_stream(id).stop(code);
                                PeerUni::Ignored
                            }
                            UniStreamType::Control => PeerUni::Control(Box::new(
                                ControlStream::new(Role::Server, self.frame_limits),
                            )),
                            UniStreamType::QpackEncoder => PeerUni::Encoder,
                            UniStreamType::QpackDecoder => PeerUni::Decoder,
                            _ => PeerUni::Ignored,
                        };
                    }
                    PeerUni::Control(control) => {
                        let (n, event) = control.read(data)?;
                        data = &data[n..];
                        self.frame_budget.spend(control.take_spent());
                        match event {
                            // Dynamic entries only where the client lets a
                            // section wait for them.
                            Some(ControlEvent::Settings(s)) if s.qpack_blocked_streams > 0 => {
                                self.encoder
                                    .set_peer_max_table_capacity(s.qpack_max_table_capacity);
                            }
                            Some(ControlEvent::PriorityUpdate(stream, priority)) => {
                                self.priority_update(stream, priority);
                            }
                            _ => {}
                        }
                    }
                    PeerUni::Encoder => {
                        self.decoder.read_encoder_stream(data)?;
                        data = &[];
                    }
                    PeerUni::Decoder => {
                        self.encoder.read_decoder_stream(data)?;
                        data = &[];
                    }
                    PeerUni::Ignored => data = &[],
                }
            }
        }
        if !matches!(end, Ok(false)) {
            match self.peer_uni.get(&id) {
                Some(PeerUni::Control(c)) => return Err(c.finished()),
                Some(PeerUni::Encoder) => return Err(self.decoder.encoder_stream_finished()),
                Some(PeerUni::Decoder) => return Err(self.encoder.decoder_stream_finished()),
                _ => {}
            }
            self.peer_uni.remove(&id);
        }
        Ok(())
    }

    fn read_request(
        &mut self,
        id: StreamId,
        pieces: &[Bytes],
        end: Result<bool, u64>,
    ) -> Result<(), Error> {
        let sid = u64::from(id);
        let Some(slot) = self.requests.get_mut(&id) else {
            return Ok(());
        };
        let mut failed: Option<Error> = None;
        let mut client_reset = false;
        'pieces: for piece in pieces {
            let mut data: &[u8] = piece;
            while !data.is_empty() {
                let (n, event) = match slot.reader.read(data) {
                    Ok(r) => r,
                    Err(e) => {
                        failed = Some(e);
                        break 'pieces;
                    }
                };
                data = &data[n..];
                let outcome = match event {
                    None => continue,
                    Some(RequestEvent::Head(section)) => {
                        self.frame_budget.earn_request();
                        decode_request_head(
                            &mut self.decoder,
                            sid,
                            section,
                            &mut slot.decoded,
                            false,
                        )
                    }
                    Some(RequestEvent::HeadTooLarge) => {
                        self.frame_budget.earn_request();
                        self.decoder.stream_cancelled(sid);
                        Ok(HeadOutcome::TooLarge)
                    }
                    Some(RequestEvent::Data(d)) => {
                        slot.body.extend_from_slice(d);
                        continue;
                    }
                    Some(RequestEvent::Trailers(section)) => {
                        // Apart from the head, which may not be handed on yet.
                        let mut fields =
                            new_request_head(self.max_section, self.limits.max_headers, false);
                        match decode_trailers(&mut self.decoder, sid, section, &mut fields) {
                            Ok(outcome) => {
                                slot.keep_trailers(outcome, &fields);
                                continue;
                            }
                            Err(e) => Err(e),
                        }
                    }
                };
                match outcome {
                    Ok(HeadOutcome::Ready) => {
                        slot.head = HeadState::Decoded;
                        let length = slot.decoded.content_length();
                        if let Err(e) = slot.reader.set_content_length(length) {
                            failed = Some(e);
                            break 'pieces;
                        }
                    }
                    Ok(HeadOutcome::Blocked) => slot.head = HeadState::Blocked,
                    Ok(HeadOutcome::TooLarge) => slot.head = HeadState::TooLarge,
                    Err(e) => {
                        failed = Some(e);
                        break 'pieces;
                    }
                }
            }
        }
        self.frame_budget.spend(slot.reader.take_spent());
        if failed.is_none() {
            match end {
                Ok(true) => match slot.reader.finish() {
                    Ok(()) => slot.body_end = true,
                    Err(e) => failed = Some(e),
                },
                Ok(false) => {}
                Err(_) => {
                    client_reset = !slot.reset && !slot.fin;
                    slot.reset = true;
                    self.decoder.stream_cancelled(sid);
                }
            }
        }
        slot.wake();
        let undispatched = slot.head != HeadState::Dispatched;
        if client_reset {
            self.client_resets += 1;
            if undispatched {
                // No task will end it: the slot goes now, and our side of
                // the stream with it, so the client's stream credit returns.
                self.reset_stream(id, ErrorCode::RequestCancelled);
            }
        }
        match failed {
            None => Ok(()),
            Some(e) if e.scope == Scope::Connection => Err(e),
            Some(e) => {
                debug!(stream = sid, error = %e, "HTTP/3 request stream error");
                self.reset_stream(id, e.code);
                Ok(())
            }
        }
    }

    /// The client's PRIORITY_UPDATE for request stream `stream`: applied to
    /// a request being served, kept for one whose head is not read yet
    /// (RFC 9218 §7.1: it wins over the request's `priority` field),
    /// dropped for one that is over.
    fn priority_update(&mut self, stream: u64, priority: Priority) {
        let Ok(id) = VarInt::from_u64(stream).map(StreamId::from) else {
            return;
        };
        match self.requests.get(&id) {
            Some(slot) if slot.head == HeadState::Dispatched => self.set_priority(id, priority),
            Some(_) => self.pending_priorities.keep(stream, priority),
            None if stream >= self.next_request => self.pending_priorities.keep(stream, priority),
            None => {}
        }
    }

    /// Sends request stream `id`'s answer with `priority`.
    pub(super) fn set_priority(&mut self, id: StreamId, priority: Priority) {
        let order = send_priority(priority, u64::from(id));
        if let Some(slot) = self.requests.get_mut(&id) {
            slot.order = order;
        }
        let _ = self.quic.send_stream(id).set_priority(order);
    }

    /// Ends both sides of a request stream with `code`.
    pub(super) fn reset_stream(&mut self, id: StreamId, code: ErrorCode) {
        let code = VarInt::from_u64(code.to_u64()).expect("small");
        let _ = self.quic.recv_stream(id).stop(code);
        let _ = self.quic.send_stream(id).reset(code);
        if let Some(slot) = self.requests.get_mut(&id) {
            slot.reset = true;
            slot.fin_sent = true;
            self.queued = self.queued.saturating_sub(slot.out.len());
            slot.out.clear();
            slot.wake();
            if slot.head != HeadState::Dispatched {
                self.requests.remove(&id);
            }
        }
    }

    fn take_unblocked(&mut self) -> Result<(), Error> {
        while let Some((sid, section)) = self.decoder.take_unblocked() {
            let Ok(id) = VarInt::from_u64(sid).map(StreamId::from) else {
                continue;
            };
            let Some(slot) = self.requests.get_mut(&id) else {
                continue;
            };
            if matches!(slot.head, HeadState::Decoded | HeadState::Dispatched) {
                // The head came before: this section is the trailers.
                let mut fields = new_request_head(self.max_section, self.limits.max_headers, false);
                match decode_trailers(&mut self.decoder, sid, &section, &mut fields) {
                    Ok(outcome) => slot.keep_trailers(outcome, &fields),
                    Err(e) if e.scope == Scope::Connection => return Err(e),
                    Err(e) => self.reset_stream(id, e.code),
                }
                continue;
            }
            match decode_request_head(&mut self.decoder, sid, &section, &mut slot.decoded, false) {
                Ok(HeadOutcome::Ready) => slot.head = HeadState::Decoded,
                Ok(HeadOutcome::Blocked) => {}
                Ok(HeadOutcome::TooLarge) => slot.head = HeadState::TooLarge,
                Err(e) if e.scope == Scope::Connection => return Err(e),
                Err(e) => self.reset_stream(id, e.code),
            }
        }
        Ok(())
    }

    /// Hands each request whose head is decoded to a task. A head decoded
    /// before the handshake ended came in 0-RTT (a server reads nothing else
    /// before the client's Finished); one from 0-RTT read after the Finished
    /// can no longer be a replay, and is served as any other.
    fn dispatch(&mut self) {
        let early_data = self.quic.is_handshaking();
        for (id, slot) in self.requests.iter_mut() {
            let parsed_status = match slot.head {
                HeadState::Decoded => None,
                HeadState::TooLarge => Some(431),
                _ => continue,
            };
            slot.head = HeadState::Dispatched;
            let sid = u64::from(*id);
            let priority = self.pending_priorities.take(sid).unwrap_or_else(|| {
                let lines = slot.decoded.fields().filter(|(n, _)| *n == b"priority");
                Priority::from_field_lines(lines.map(|(_, v)| v))
            });
            slot.order = send_priority(priority, sid);
            let _ = self.quic.send_stream(*id).set_priority(slot.order);
            let mut buf = Vec::new();
            let mut head = RequestHead::default();
            let parsed = match parsed_status {
                Some(status) => Err(status),
                None => {
                    // No content at all when the stream ended with the head.
                    let bodiless = slot.body_end && slot.reader.received() == 0;
                    read_pseudo_head(&slot.decoded, bodiless, &self.limits, &mut buf, &mut head)
                }
            };
            self.fresh.push(Fresh {
                id: *id,
                buf,
                head,
                extended_connect: parsed.is_ok() && slot.decoded.protocol().is_some(),
                parsed,
                early_data,
            });
        }
    }

    fn write_streams(&mut self) {
        for own in [
            &mut self.control,
            &mut self.encoder_stream,
            &mut self.decoder_stream,
        ]
        .into_iter()
        .flatten()
        {
            if !own.out.is_empty() {
                if let Ok(n) = self.quic.send_stream(own.id).write(&own.out) {
                    own.out.drain(..n);
                }
            }
        }
        // Flow control credit goes to the most urgent answers first, and
        // among answers of one priority to the one that has had least;
        // QUIC then fills packets by the same priorities.
        let mut order = std::mem::take(&mut self.write_order);
        order.clear();
        order.extend(
            self.requests
                .iter()
                .map(|(id, s)| (s.order, std::cmp::Reverse(s.written), *id)),
        );
        order.sort_unstable_by(|a, b| b.cmp(a));
        let mut ended = Vec::new();
        let queued_before = self.queued;
        for &(_, _, id) in &order {
            let Some(slot) = self.requests.get_mut(&id) else {
                continue;
            };
            if !slot.out.is_empty() {
                let before = slot.out.len();
                match self.quic.send_stream(id).write(&slot.out) {
                    Ok(n) => {
                        slot.out.drain(..n);
                        slot.written += n as u64;
                    }
                    Err(quinn_proto::WriteError::Blocked) => {}
                    Err(_) => {
                        slot.reset = true;
                        slot.out.clear();
                    }
                }
                self.queued = self.queued.saturating_sub(before - slot.out.len());
                if before >= OUT_HIGH / 2 && slot.out.len() < OUT_HIGH / 2 {
                    slot.wake();
                }
            }
            if slot.out.is_empty() && slot.fin && !slot.fin_sent {
                let _ = self.quic.send_stream(id).finish();
                slot.fin_sent = true;
            }
            if slot.done && (slot.fin_sent || slot.reset) {
                ended.push(id);
            }
        }
        self.write_order = order;
        if queued_before >= self.queue_budget / 2 && self.queued < self.queue_budget / 2 {
            // Requests waiting on the connection's budget may go on.
            self.requests.values_mut().for_each(RequestSlot::wake);
        }
        for id in ended {
            if let Some(slot) = self.requests.remove(&id) {
                if slot.reset && !slot.fin_sent {
                    // The client gave up on it: our side ends too, so the
                    // stream is freed and its credit returns.
                    let code =
                        VarInt::from_u64(ErrorCode::RequestCancelled.to_u64()).expect("small");
                    let _ = self.quic.send_stream(id).reset(code);
                }
                if !slot.body_end && !slot.reset {
                    // The answer is whole: the rest of the request is not needed.
                    let code = VarInt::from_u64(ErrorCode::NoError.to_u64()).expect("small");
                    let _ = self.quic.recv_stream(id).stop(code);
                }
            }
            self.readable.remove(&id);
        }
    }
}
