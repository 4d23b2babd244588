//! One upstream HTTP/2 connection on Pier's own codec in the client role
//! ([`crate::http2::client`]): a task on the worker's runtime owns the socket
//! and moves bytes between it and the codec, as the downstream driver
//! (`server::h2`) does in the other role. What it shares with the streams
//! on it is one [`ConnState`]: the codec, each stream's slot (what the origin
//! sent that the request has not taken yet, and the waker of the request),
//! and how the connection ended. Only the owning worker touches it
//! (`Rc<RefCell<_>>`, no lock); the streams' side is `h2_stream.rs`.
//!
//! Nothing grows without a bound the origin cannot move: a stream's
//! buffered body is held to its receive window (reopened only for bytes the
//! request took), the output to [`MAX_OUTPUT`] (streams wait to send body
//! past it, and the origin is not read), and an idle connection frees its
//! buffers.

use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWrite;
use tracing::debug;

use super::group::UpstreamGroup;
use super::{ErrorKind, ProxyError};
use crate::http1::client::ClientStream;
use crate::http2::client::{ClientConnection, ClientEvents, ClientLimits, ResponseHead, StreamId};
use crate::http2::ErrorCode;

/// Receive window per stream: a streamed response moves at most this far
/// ahead of the client reading it.
const STREAM_WINDOW: u32 = 256 * 1024;
/// Receive window of a connection, shared by its streams.
const CONNECTION_WINDOW: u32 = 2 * 1024 * 1024;
/// Largest response head (decoded) accepted from an upstream.
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Output queued past which streams wait to send request body and the
/// origin is not read (it is not reading what it is sent).
pub(super) const MAX_OUTPUT: usize = 512 * 1024;
/// Most runs of queued output handed to one write.
const WRITE_SLICES: usize = 64;
/// Room kept free in the read buffer before each read.
const READ_ROOM: usize = 16 * 1024;
/// How long a connection without a stream keeps its buffers: a busy one
/// between two requests keeps them, an idle pooled one holds only its
/// HPACK tables.
const RELEASE_AFTER: Duration = Duration::from_millis(200);
/// How long a connection the pool let go, with no stream left, may take to
/// hand its last bytes to a server that does not read them before it is
/// closed anyway.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The limits a proxy connection announces and enforces: at most
/// `max_streams` streams at once (fewer if the origin says so).
pub fn client_limits(max_streams: u32) -> ClientLimits {
    ClientLimits {
        max_concurrent_streams: max_streams.max(1),
        initial_stream_window: STREAM_WINDOW,
        initial_connection_window: CONNECTION_WINDOW,
        max_frame_size: 16 * 1024,
        header_table_size: 4096,
        max_header_list_size: MAX_HEADER_LIST,
        // Every field costs at least 32 bytes of the list: the size bounds
        // the count.
        max_header_fields: (MAX_HEADER_LIST / 32) as usize,
        max_control_frames: 200,
        max_error_resets: 64,
        max_empty_frames: 200,
        max_inert_frames: 2000,
        enable_connect_protocol: false,
        no_rfc7540_priorities: false,
    }
}

/// What the origin sent on one stream that its request has not taken yet.
#[derive(Default)]
pub(super) struct StreamSlot {
    /// Interim (1xx) heads in order (the codec allows 8 per response).
    pub(super) interim: VecDeque<ResponseHead>,
    /// The final head, until taken.
    pub(super) head: Option<ResponseHead>,
    /// Body bytes received and not taken: at most the stream's window.
    pub(super) body: BytesMut,
    /// Body bytes received and not yet released to the windows (taken or
    /// not); released when the stream is dropped.
    pub(super) unreleased: usize,
    /// The trailers, until taken.
    pub(super) trailers: Option<ResponseHead>,
    /// The response is complete (END_STREAM received).
    pub(super) ended: bool,
    /// The stream was reset: by the origin, by the codec for the origin's
    /// protocol error, or as refused by a GOAWAY.
    pub(super) reset: Option<ErrorCode>,
    /// The request waiting on the stream.
    pub(super) waker: Option<Waker>,
}

impl StreamSlot {
    pub(super) fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// What the connection task and the streams on the connection share.
pub struct ConnState {
    /// The codec.
    pub(super) conn: ClientConnection,
    /// The streams opened and not dropped.
    pub(super) slots: HashMap<StreamId, StreamSlot>,
    /// Streams leased from the pool: open, or waiting to open.
    pub(super) leases: u32,
    /// When the last lease ended; idle time is counted from here.
    pub(super) idle_since: Instant,
    /// The socket is up: streams may open.
    pub(super) ready: bool,
    /// Why the connection ended (or never came up).
    pub(super) ended: Option<ProxyError>,
    /// The pool let the connection go: GOAWAY once no lease is left.
    pub(super) closing: bool,
    /// The origin sent GOAWAY: no new stream goes on this connection.
    pub(super) goaway_received: bool,
    /// Our GOAWAY is queued.
    goaway_sent: bool,
    /// Some stream waits for the output to drain below half of
    /// [`MAX_OUTPUT`].
    pub(super) output_waiters: bool,
    /// Data that came for streams already dropped, to release.
    unclaimed: Vec<(StreamId, usize)>,
    /// The connection task.
    driver: Option<Waker>,
    /// Requests waiting for the connection to come up, or for room to
    /// open a stream.
    openers: Vec<Waker>,
}

impl ConnState {
    /// Wakes the connection task: a stream queued output, or a lease ended.
    pub(super) fn wake_driver(&mut self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    /// Wakes the requests waiting to open a stream.
    pub(super) fn wake_openers(&mut self) {
        for w in self.openers.drain(..) {
            w.wake();
        }
    }

    /// Keeps `waker` to be woken when a stream may open.
    pub(super) fn wait_to_open(&mut self, waker: &Waker) {
        if !self.openers.iter().any(|w| w.will_wake(waker)) {
            self.openers.push(waker.clone());
        }
    }

    /// Wakes every stream's request.
    fn wake_streams(&mut self) {
        for slot in self.slots.values_mut() {
            slot.wake();
        }
    }

    /// The connection ended (or never came up) for `why`: every request on
    /// it hears, and the pool sees it closed.
    pub(super) fn fail(&mut self, why: ProxyError) {
        if self.ended.is_none() {
            self.ended = Some(why);
        }
        self.wake_streams();
        self.wake_openers();
    }

    /// Whether a new stream may go on this connection now or once it is up.
    pub(super) fn takes_new_streams(&self) -> bool {
        self.ended.is_none()
            && !self.closing
            && !self.goaway_received
            && !self.goaway_sent
            && self.conn.error().is_none()
    }
}

/// One upstream HTTP/2 connection: its shared state, held by the pool, its
/// task and its streams.
#[derive(Clone)]
pub struct H2Connection(Rc<RefCell<ConnState>>);

impl H2Connection {
    /// A connection not yet up, with `limits`; its preface and SETTINGS are
    /// queued to go first.
    pub fn new(limits: ClientLimits) -> Self {
        H2Connection(Rc::new(RefCell::new(ConnState {
            conn: ClientConnection::new(limits),
            slots: HashMap::new(),
            leases: 0,
            idle_since: Instant::now(),
            ready: false,
            ended: None,
            closing: false,
            goaway_received: false,
            goaway_sent: false,
            output_waiters: false,
            unclaimed: Vec::new(),
            driver: None,
            openers: Vec::new(),
        })))
    }

    /// The shared state.
    pub(super) fn state(&self) -> RefMut<'_, ConnState> {
        self.0.borrow_mut()
    }

    /// The shared state, unless it is borrowed (a drop while the
    /// connection task holds it).
    pub(super) fn try_state(&self) -> Option<RefMut<'_, ConnState>> {
        self.0.try_borrow_mut().ok()
    }

    /// Lets the connection go: it takes no new lease, sends GOAWAY once
    /// the streams it carries are done, and closes.
    pub fn close(&self) {
        if let Some(mut st) = self.try_state() {
            st.closing = true;
            st.wake_driver();
        }
    }

    /// Connecting failed: the requests waiting for the connection hear why.
    pub fn fail(&self, why: ProxyError) {
        self.state().fail(why);
    }

    /// Runs the connection over `io` until it ends: the streams waiting for
    /// it may open at once, before the origin's SETTINGS (RFC 9113 §3.4).
    pub async fn run(self, mut io: ClientStream) {
        {
            let mut st = self.state();
            st.ready = true;
            st.wake_openers();
        }
        let mut rbuf: Vec<u8> = Vec::new();
        let mut unflushed = false;
        // Buffers are held (since the last read) and not yet freed.
        let mut holding = true;
        let far = tokio::time::Instant::now() + Duration::from_secs(1 << 30);
        let timer = tokio::time::sleep_until(far);
        tokio::pin!(timer);
        let close_timer = tokio::time::sleep_until(far);
        tokio::pin!(close_timer);
        let mut close_by: Option<tokio::time::Instant> = None;
        let why = loop {
            if close_by.is_none() {
                let st = self.0.borrow();
                if st.closing && st.leases == 0 {
                    let at = tokio::time::Instant::now() + CLOSE_GRACE;
                    close_by = Some(at);
                    close_timer.as_mut().reset(at);
                }
            }
            let release_at = {
                let st = self.0.borrow();
                (holding && st.leases == 0).then(|| st.idle_since + RELEASE_AFTER)
            };
            let at = release_at.map_or(far, tokio::time::Instant::from_std);
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
            tokio::select! {
                biased;
                event = std::future::poll_fn(|cx| self.poll_io(cx, &mut io, &mut rbuf, &mut unflushed)) => match event {
                    IoEvent::Read => {
                        holding = true;
                        if let Err(why) = self.receive(&mut rbuf) {
                            break why;
                        }
                    }
                    IoEvent::Closed(why) => break why,
                    IoEvent::Done => break ProxyError::upstream(ErrorKind::Reset, "HTTP/2 connection closed"),
                },
                () = &mut close_timer, if close_by.is_some() => {
                    break ProxyError::upstream(ErrorKind::Timeout, "the server did not take the connection's last bytes in time");
                }
                () = &mut timer, if release_at.is_some() => {
                    let mut st = self.state();
                    if st.leases == 0 {
                        st.conn.release_idle_buffers();
                        st.slots.shrink_to_fit();
                        st.unclaimed = Vec::new();
                        if rbuf.is_empty() {
                            rbuf = Vec::new();
                        }
                        holding = false;
                    }
                }
            }
        };
        self.state().fail(why);
        // The last frames (a GOAWAY) go out if the socket takes them soon.
        let flush = std::future::poll_fn(|cx| self.poll_write(cx, &mut io, &mut unflushed));
        let _ = tokio::time::timeout(Duration::from_millis(100), flush).await;
        self.state().driver = None;
    }

    /// Writes what the codec queued (and flushes TLS records): `Ready` once
    /// all of it went, `Ready(Err)` when the socket failed.
    fn poll_write(
        &self,
        cx: &mut Context<'_>,
        io: &mut ClientStream,
        unflushed: &mut bool,
    ) -> Poll<Result<(), ProxyError>> {
        let mut st = self.state();
        let st = &mut *st;
        let failed = |e: &str| Poll::Ready(Err(ProxyError::upstream(ErrorKind::Reset, e)));
        while st.conn.output_len() > 0 {
            let mut slices = [IoSlice::new(&[]); WRITE_SLICES];
            let n = st.conn.output_slices(&mut slices);
            match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    return failed("HTTP/2 connection: write failed")
                }
                Poll::Ready(Ok(n)) => {
                    st.conn.consume_output(n);
                    *unflushed = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        if *unflushed {
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => *unflushed = false,
                Poll::Ready(Err(_)) => return failed("HTTP/2 connection: write failed"),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Writes what the codec queued, then reads unless the output is
    /// backed up; `Done` once the codec has nothing more to do.
    fn poll_io(
        &self,
        cx: &mut Context<'_>,
        io: &mut ClientStream,
        rbuf: &mut Vec<u8>,
        unflushed: &mut bool,
    ) -> Poll<IoEvent> {
        {
            let mut st = self.state();
            let st = &mut *st;
            if !st.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                st.driver = Some(cx.waker().clone());
            }
            if st.closing && st.leases == 0 && !st.goaway_sent {
                st.goaway_sent = true;
                st.conn.goaway(ErrorCode::NoError);
            }
        }
        let written = self.poll_write(cx, io, unflushed);
        if let Poll::Ready(Err(why)) = written {
            return Poll::Ready(IoEvent::Closed(why));
        }
        {
            let mut st = self.state();
            let out = st.conn.output_len();
            if st.output_waiters && out < MAX_OUTPUT / 2 {
                st.output_waiters = false;
                st.wake_streams();
            }
            if st.conn.is_closed() && out == 0 {
                return Poll::Ready(IoEvent::Done);
            }
            if out >= MAX_OUTPUT {
                // An origin that does not read what it is sent is not read.
                return Poll::Pending;
            }
        }
        if rbuf.capacity() - rbuf.len() < READ_ROOM / 4 {
            rbuf.reserve(READ_ROOM);
        }
        match io.poll_read_into(cx, rbuf) {
            Poll::Ready(Ok(0)) => Poll::Ready(IoEvent::Closed(ProxyError::upstream(
                ErrorKind::Reset,
                "HTTP/2 connection closed by the server",
            ))),
            Poll::Ready(Err(e)) => Poll::Ready(IoEvent::Closed(ProxyError::upstream(
                ErrorKind::Reset,
                format!("HTTP/2 connection: {e}"),
            ))),
            Poll::Ready(Ok(_)) => Poll::Ready(IoEvent::Read),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Hands the bytes read to the codec, which reports what they mean to
    /// the streams' slots; `Err` when the connection ended on the origin's
    /// error (the codec queued its GOAWAY).
    fn receive(&self, rbuf: &mut Vec<u8>) -> Result<(), ProxyError> {
        let mut st = self.state();
        let st = &mut *st;
        let mut events = Deliver {
            slots: &mut st.slots,
            unclaimed: &mut st.unclaimed,
            goaway: &mut st.goaway_received,
            send_window: false,
        };
        let received = st.conn.receive(rbuf, Instant::now(), &mut events);
        let send_window = events.send_window;
        for (id, n) in st.unclaimed.drain(..) {
            st.conn.release(id, n);
        }
        if send_window {
            st.wake_streams();
        }
        // Streams may have ended, or the origin's SETTINGS changed how many
        // may be open.
        st.wake_openers();
        match received {
            Ok(n) => {
                rbuf.drain(..n.min(rbuf.len()));
                Ok(())
            }
            Err(e) => {
                debug!(code = ?e.code, "upstream HTTP/2 connection error: GOAWAY");
                Err(ProxyError::upstream(
                    ErrorKind::Malformed,
                    format!("HTTP/2 connection error: {:?}", e.code),
                ))
            }
        }
    }
}

/// What the socket did.
enum IoEvent {
    /// Bytes arrived (in the read buffer).
    Read,
    /// The origin closed, or the socket failed.
    Closed(ProxyError),
    /// The codec is done (GOAWAY went either way, no stream is left) and
    /// its output is written.
    Done,
}

/// The codec's events, delivered to the streams' slots.
struct Deliver<'a> {
    slots: &'a mut HashMap<StreamId, StreamSlot>,
    unclaimed: &'a mut Vec<(StreamId, usize)>,
    goaway: &'a mut bool,
    /// Send windows grew: streams waiting to send may go on.
    send_window: bool,
}

impl ClientEvents for Deliver<'_> {
    fn response(&mut self, stream: StreamId, head: &ResponseHead, end_stream: bool) {
        let Some(slot) = self.slots.get_mut(&stream) else {
            return;
        };
        if head.is_interim() {
            slot.interim.push_back(head.clone());
        } else {
            slot.head = Some(head.clone());
            slot.ended |= end_stream;
        }
        slot.wake();
    }

    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        let Some(slot) = self.slots.get_mut(&stream) else {
            self.unclaimed.push((stream, data.len()));
            return;
        };
        slot.body.extend_from_slice(data);
        slot.unreleased += data.len();
        slot.ended |= end_stream;
        slot.wake();
    }

    fn trailers(&mut self, stream: StreamId, fields: &ResponseHead) {
        if let Some(slot) = self.slots.get_mut(&stream) {
            slot.trailers = Some(fields.clone());
            slot.ended = true;
            slot.wake();
        }
    }

    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        if let Some(slot) = self.slots.get_mut(&stream) {
            slot.reset.get_or_insert(code);
            slot.wake();
        }
    }

    fn goaway(&mut self, _last_stream: StreamId, _code: ErrorCode) {
        *self.goaway = true;
    }

    fn send_window(&mut self) {
        self.send_window = true;
    }

    fn settings(&mut self) {}
}

/// Opens the socket of an HTTP/2 connection to server `i` of `group`: TCP,
/// and TLS where the server must pick `h2` by ALPN (prior knowledge on
/// plain TCP).
pub async fn connect_h2(group: &UpstreamGroup, i: usize) -> Result<ClientStream, ProxyError> {
    let stream = super::dial::connect(group, i).await?;
    if let ClientStream::Tls(tls) = &stream {
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(ProxyError::upstream(
                ErrorKind::Connect,
                "the server did not agree to HTTP/2 (no h2 in its ALPN answer)",
            ));
        }
    }
    Ok(stream)
}
