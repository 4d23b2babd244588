//! The streams of one connection as the connection task and the stream
//! tasks share them: the codec, and per stream the request body received and
//! not yet read, its trailers, a reset, and the waker of the task that waits
//! on any of those or on the send window. The connection task fills the
//! table from the codec's [`Events`]; a stream task takes its body from it
//! and queues its answer through the codec; nothing here blocks or locks
//! (one thread, one `RefCell`, borrowed for a step at a time).

use std::cell::RefCell;
use std::rc::Rc;
use std::task::Waker;

use crate::http::OwnedField;
use crate::http1::parse::{Limits, RequestHead};
use crate::http2::conn::{Events, RequestHead as DecodedHead, ServerConnection, StreamId};
use crate::http2::ErrorCode;
use crate::server::pseudo_head::read_pseudo_head;

/// Spare head buffers kept: enough for the streams started in one read.
const SPARE_HEADS: usize = 16;

/// A spare head buffer larger than this is dropped rather than kept, so one
/// large head does not pin its memory for the connection's life.
const SPARE_HEAD_BYTES: usize = 4096;

/// The codec and the streams' side of it.
pub(super) struct Shared {
    pub(super) conn: ServerConnection,
    pub(super) table: StreamTable,
}

/// The shared state of one connection.
pub(super) type SharedCell = RefCell<Shared>;

/// What a stream task reads from and waits on.
pub(super) struct Slot {
    id: StreamId,
    /// Body bytes received and not yet taken by the stream.
    pub(super) body: Vec<u8>,
    /// The body ended (END_STREAM, or trailers).
    pub(super) body_end: bool,
    pub(super) trailers: Option<Vec<OwnedField>>,
    /// The stream was reset by the client or for its protocol error.
    pub(super) reset: Option<ErrorCode>,
    waker: Option<Waker>,
}

impl Slot {
    fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// The stream's task waits on this slot.
    pub(super) fn wait(&mut self, waker: &Waker) {
        match &mut self.waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
    }
}

/// A request head as handlers read it: HTTP/1 text and its parse, built
/// from a decoded HTTP/2 head. Read-only once built, so the streams that
/// repeat one request share it.
#[derive(Clone, Default)]
pub(super) struct BuiltHead {
    pub(super) buf: Vec<u8>,
    pub(super) head: RequestHead,
}

/// A request that arrived in the last read, to be started.
pub(super) struct Fresh {
    pub(super) id: StreamId,
    pub(super) head: Rc<BuiltHead>,
    /// `Err(status)` when the head is refused (431 too large, 400...).
    pub(super) parsed: Result<(), u16>,
    /// An extended CONNECT (RFC 8441), read as the upgrade it stands for.
    pub(super) extended_connect: bool,
}

/// The last request head built, for the next request whose decoded head is
/// the same one again ([`DecodedHead::repeated`]).
struct LastBuilt {
    head: Rc<BuiltHead>,
    parsed: Result<(), u16>,
    extended_connect: bool,
    end_stream: bool,
}

/// The streams being answered, and the requests to start.
pub(super) struct StreamTable {
    slots: Vec<Slot>,
    pub(super) fresh: Vec<Fresh>,
    limits: Limits,
    /// Heads no stream holds any more, their buffers kept for the next.
    spare: Vec<Rc<BuiltHead>>,
    /// Built from the codec's last request head; `None` until one is.
    last_built: Option<LastBuilt>,
    /// Body bytes that arrived for streams already answered and gone, to be
    /// released so the connection window stays open.
    pub(super) unclaimed: Vec<(StreamId, usize)>,
    /// Streams wait for the output to drain.
    pub(super) output_waiters: bool,
    conn_waker: Option<Waker>,
}

impl StreamTable {
    /// An empty table whose heads are held to `limits`.
    pub(super) fn new(limits: Limits) -> Self {
        StreamTable {
            slots: Vec::new(),
            fresh: Vec::new(),
            limits,
            spare: Vec::new(),
            last_built: None,
            unclaimed: Vec::new(),
            output_waiters: false,
            conn_waker: None,
        }
    }

    /// The slot of a stream being answered.
    pub(super) fn slot_mut(&mut self, id: StreamId) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }

    /// Forgets a stream whose task ended; returns how many body bytes it
    /// left unread, for the connection's window.
    pub(super) fn remove(&mut self, id: StreamId) -> usize {
        match self.slots.iter().position(|s| s.id == id) {
            Some(i) => self.slots.swap_remove(i).body.len(),
            None => 0,
        }
    }

    /// Keeps a finished stream's head buffers for the next stream, unless
    /// another stream (or the last built head) still shares the head.
    pub(super) fn give_head(&mut self, mut head: Rc<BuiltHead>) {
        if self.spare.len() >= SPARE_HEADS {
            return;
        }
        if let Some(built) = Rc::get_mut(&mut head) {
            if built.buf.capacity() <= SPARE_HEAD_BYTES {
                built.buf.clear();
                self.spare.push(head);
            }
        }
    }

    /// Drops the spare head buffers and the empty lists (the connection
    /// is idle).
    pub(super) fn release_idle(&mut self) {
        self.spare = Vec::new();
        self.last_built = None;
        if self.slots.is_empty() {
            self.slots = Vec::new();
        }
        if self.fresh.is_empty() {
            self.fresh = Vec::new();
        }
    }

    /// Wakes every stream task: the send window grew or the output drained.
    pub(super) fn wake_all(&mut self) {
        for s in &mut self.slots {
            s.wake();
        }
    }

    /// Wakes one stream's task: its turn to send came.
    pub(super) fn wake_stream(&mut self, id: StreamId) {
        if let Some(slot) = self.slot_mut(id) {
            slot.wake();
        }
    }

    /// The connection task, to be woken when a stream queued output.
    pub(super) fn set_conn_waker(&mut self, waker: &Waker) {
        match &mut self.conn_waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
    }

    /// A request to start: its slot, and its head for the connection task.
    fn start(
        &mut self,
        id: StreamId,
        head: Rc<BuiltHead>,
        parsed: Result<(), u16>,
        extended_connect: bool,
        end_stream: bool,
    ) {
        self.slots.push(Slot {
            id,
            body: Vec::new(),
            body_end: end_stream,
            trailers: None,
            reset: None,
            waker: None,
        });
        self.fresh.push(Fresh {
            id,
            head,
            parsed,
            extended_connect,
        });
    }

    /// Lets the connection task write what a stream queued.
    pub(super) fn wake_conn(&self) {
        if let Some(w) = &self.conn_waker {
            w.wake_by_ref();
        }
    }
}

impl Events for StreamTable {
    fn request(&mut self, stream: StreamId, head: &DecodedHead, end_stream: bool) {
        if let Some(last) = &self.last_built {
            // The same fields as the last request's, with the same end of
            // stream: the same head, built and judged once, shared.
            if head.repeated() && last.end_stream == end_stream {
                let (built, parsed, connect) =
                    (last.head.clone(), last.parsed, last.extended_connect);
                return self.start(stream, built, parsed, connect, end_stream);
            }
        }
        let mut built = self.spare.pop().unwrap_or_default();
        // A spare is held by nothing else, so this never copies.
        let fresh = Rc::make_mut(&mut built);
        let parsed = read_pseudo_head(
            head,
            end_stream,
            &self.limits,
            &mut fresh.buf,
            &mut fresh.head,
        );
        let extended_connect = parsed.is_ok() && head.protocol().is_some();
        // A large head is not kept for the connection's life; a repeat of
        // it is built again.
        let kept = (fresh.buf.len() <= SPARE_HEAD_BYTES).then(|| LastBuilt {
            head: built.clone(),
            parsed,
            extended_connect,
            end_stream,
        });
        if let Some(old) = std::mem::replace(&mut self.last_built, kept) {
            self.give_head(old.head);
        }
        self.start(stream, built, parsed, extended_connect, end_stream);
    }

    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        match self.slot_mut(stream) {
            Some(slot) => {
                slot.body.extend_from_slice(data);
                slot.body_end |= end_stream;
                slot.wake();
            }
            None => self.unclaimed.push((stream, data.len())),
        }
    }

    fn trailers(&mut self, stream: StreamId, fields: &DecodedHead) {
        if let Some(slot) = self.slot_mut(stream) {
            slot.trailers = Some(fields.owned_fields());
            slot.body_end = true;
            slot.wake();
        }
    }

    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        if let Some(slot) = self.slot_mut(stream) {
            slot.reset = Some(code);
            slot.wake();
        }
    }

    fn send_window(&mut self) {
        self.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::http1::parse::BodyKind;
    use crate::http1::HeaderLines;
    use crate::http2::frame::{flag, kind, PREFACE};
    use crate::http2::test_wire::{block, data, frame, headers, hpack_int, limits, settings};

    /// The requests `blocks` (stream, block, END_STREAM) start, as the
    /// connection task would take them.
    fn started(blocks: &[(StreamId, &[u8], bool)]) -> Vec<Fresh> {
        let frames: Vec<Vec<u8>> = blocks
            .iter()
            .map(|(id, b, end)| headers(*id, b, *end))
            .collect();
        started_from_frames(&frames)
    }

    /// The requests `frames` start after the preface and SETTINGS.
    fn started_from_frames(frames: &[Vec<u8>]) -> Vec<Fresh> {
        let mut l = limits();
        l.max_concurrent_streams = 100;
        let mut conn = ServerConnection::new(l);
        let mut table = StreamTable::new(Limits::default());
        let now = Instant::now();
        let mut wire = PREFACE.to_vec();
        wire.extend(settings(&[]));
        wire.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
        for f in frames {
            wire.extend_from_slice(f);
        }
        assert_eq!(conn.receive(&wire, now, &mut table), Ok(wire.len()));
        std::mem::take(&mut table.fresh)
    }

    /// HEADERS with the PRIORITY flag, depending on `dep`.
    fn headers_dep(stream: u32, dep: u32, b: &[u8], end_stream: bool) -> Vec<u8> {
        let mut payload = dep.to_be_bytes().to_vec();
        payload.push(15);
        payload.extend_from_slice(b);
        let flags =
            flag::END_HEADERS | flag::PRIORITY | if end_stream { flag::END_STREAM } else { 0 };
        frame(kind::HEADERS, flags, stream, &payload)
    }

    #[test]
    fn a_repeated_head_is_the_same_request_with_its_own_end_of_stream() {
        let get = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com:8080"),
            (":path", "/a?b=1"),
            ("user-agent", "t"),
        ]);
        let ends = [true, true, false, false, true, true];
        let list: Vec<_> = ends
            .iter()
            .enumerate()
            .map(|(i, &end)| (2 * i as u32 + 1, &get[..], end))
            .collect();
        let fresh = started(&list);
        assert_eq!(fresh.len(), ends.len());
        for (f, &end) in fresh.iter().zip(&ends) {
            assert_eq!(f.parsed, Ok(()));
            assert!(!f.extended_connect);
            assert_eq!(f.head.head.path(&f.head.buf), b"/a");
            assert_eq!(f.head.head.query(&f.head.buf), Some(&b"b=1"[..]));
            assert_eq!(
                f.head.head.host(&f.head.buf),
                Some(&b"example.com:8080"[..])
            );
            assert_eq!(
                f.head.head.header(&f.head.buf, "user-agent"),
                Some(&b"t"[..])
            );
            let body = if end {
                BodyKind::None
            } else {
                BodyKind::Chunked
            };
            assert_eq!(f.head.head.body, body, "stream {}", f.id);
        }
    }

    #[test]
    fn repeated_heads_share_one_built_head_and_only_unshared_heads_are_reused() {
        let get = |path: &str| {
            block(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "example.com"),
                (":path", path),
            ])
        };
        let (a, b) = (get("/a"), get("/b"));
        let fresh = started(&[(1, &a, true), (3, &a, true), (5, &a, true), (7, &b, true)]);
        assert!(Rc::ptr_eq(&fresh[0].head, &fresh[1].head));
        assert!(Rc::ptr_eq(&fresh[1].head, &fresh[2].head));
        assert!(!Rc::ptr_eq(&fresh[2].head, &fresh[3].head));
        assert_eq!(fresh[3].head.head.path(&fresh[3].head.buf), b"/b");

        let mut table = StreamTable::new(Limits::default());
        let heads: Vec<_> = fresh.into_iter().map(|f| f.head).collect();
        let (first, last) = (heads[0].clone(), heads[3].clone());
        for h in heads {
            table.give_head(h);
        }
        // Still held here: neither `/a` (three streams and `first`) nor
        // `/b` is a spare, so no stream's head is overwritten under it.
        assert!(table.spare.is_empty());
        table.give_head(first);
        assert_eq!(table.spare.len(), 1);
        assert!(table.spare[0].buf.is_empty(), "a spare's text is cleared");
        assert!(table.spare.iter().all(|h| Rc::strong_count(h) == 1));
        drop(last);
    }

    #[test]
    fn a_large_head_is_not_kept_and_its_repeat_is_built_again() {
        let small = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/small"),
        ]);
        let long = "v".repeat(SPARE_HEAD_BYTES);
        let large = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/large"),
            ("x-long", &long),
        ]);
        // A short block for a large head: the long value inserted into the
        // HPACK table once, then named by its index (62).
        let indexed_long = "w".repeat(4050);
        let mut inserting = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/indexed"),
        ]);
        let mut by_index = inserting.clone();
        inserting.push(0x40);
        hpack_int(&mut inserting, 0, 7, 6);
        inserting.extend_from_slice(b"x-long");
        hpack_int(&mut inserting, 0, 7, indexed_long.len());
        inserting.extend_from_slice(indexed_long.as_bytes());
        by_index.push(0x80 | 62);
        let fresh = started(&[
            (1, &small, true),
            (3, &small, true),
            (5, &large, true),
            (7, &large, true),
            (9, &small, true),
            (11, &small, true),
            (13, &inserting, true),
            (15, &by_index, true),
            (17, &by_index, true),
            (19, &by_index, true),
        ]);
        let paths: Vec<_> = fresh
            .iter()
            .map(|f| f.head.head.path(&f.head.buf).to_vec())
            .collect();
        let want: [&[u8]; 10] = [
            b"/small",
            b"/small",
            b"/large",
            b"/large",
            b"/small",
            b"/small",
            b"/indexed",
            b"/indexed",
            b"/indexed",
            b"/indexed",
        ];
        assert_eq!(paths, want);
        for f in &fresh[2..4] {
            assert_eq!(
                f.head.head.header(&f.head.buf, "x-long"),
                Some(long.as_bytes())
            );
        }
        for f in &fresh[6..] {
            let value = f.head.head.header(&f.head.buf, "x-long");
            assert_eq!(value, Some(indexed_long.as_bytes()), "stream {}", f.id);
        }
    }

    #[test]
    fn a_repeated_head_http1_refuses_is_refused_each_time() {
        // DEL in a value: HTTP/2's rules let it through, HTTP/1's do not.
        let bad = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/"),
            ("x-odd", "a\u{7f}b"),
        ]);
        let good = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/"),
        ]);
        let fresh = started(&[
            (1, &bad, true),
            (3, &bad, true),
            (5, &good, true),
            (7, &bad, true),
            (9, &bad, true),
        ]);
        let parsed: Vec<_> = fresh.iter().map(|f| f.parsed).collect();
        assert_eq!(parsed, [Err(400), Err(400), Ok(()), Err(400), Err(400)]);
    }

    /// A block refused for per-stream reasons (a self-dependent PRIORITY)
    /// is not the decoder's remembered block, so its repeat is built as
    /// itself, not copied from the table's last built head (the previous
    /// request's: another path, and a framing the codec does not enforce).
    #[test]
    fn a_block_refused_once_is_not_served_as_the_previous_request_when_repeated() {
        let b = block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/b"),
            ("content-length", "10"),
        ]);
        let a = block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/a"),
        ]);
        let fresh = started_from_frames(&[
            headers(1, &b, false),
            // Refused with a stream error (PROTOCOL_ERROR).
            headers_dep(3, 3, &a, false),
            headers(5, &a, false),
            // No content-length in `a`: the codec takes any body.
            data(5, &[b'x'; 40], true),
        ]);
        assert_eq!(fresh.len(), 2);
        let f = &fresh[1];
        assert_eq!(f.id, 5);
        assert_eq!(
            f.head.head.path(&f.head.buf),
            b"/a",
            "stream 5 is its own request"
        );
        assert_eq!(f.head.head.body, BodyKind::Chunked);
    }

    /// The same with content-length and END_STREAM: refused with
    /// END_STREAM, repeated without.
    #[test]
    fn a_block_refused_for_its_content_length_is_built_as_itself_when_repeated() {
        let b = block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/b"),
        ]);
        let a = block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "example.com"),
            (":path", "/a"),
            ("content-length", "5"),
        ]);
        let fresh = started_from_frames(&[
            headers(1, &b, false),
            headers(3, &a, true),
            headers(5, &a, false),
        ]);
        assert_eq!(fresh.len(), 2);
        let f = &fresh[1];
        assert_eq!(
            f.head.head.path(&f.head.buf),
            b"/a",
            "stream 5 is its own request"
        );
        assert_eq!(f.head.head.body, BodyKind::Length(5));
    }
}
