//! A request's side of an upstream HTTP/2 connection ([`super::h2_connection`]):
//! a lease on the connection (counted by the pool until dropped), the stream
//! it opens, and the poll functions an exchange drives it with: send
//! capacity and body, trailers, the next response event (interim head,
//! final head, body, end), and the release of the body bytes used, which
//! alone reopens the origin's windows. A stream dropped before its
//! exchange is complete is reset (RST_STREAM CANCEL).

use std::fmt;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::h2_connection::{H2Connection, StreamSlot, MAX_OUTPUT};
use super::ProxyError;
use crate::http2::client::{ClientConnection, OpenError, ResponseHead, StreamId};
use crate::http2::ErrorCode;

/// Why a stream stopped short.
#[derive(Debug, Clone)]
pub enum StreamError {
    /// The stream was reset: by the origin, by the codec for the origin's
    /// protocol error, or as refused (REFUSED_STREAM, or above a GOAWAY's
    /// last stream: never processed, RFC 9113 §8.7).
    Reset(ErrorCode),
    /// The connection ended.
    Connection(ProxyError),
}

impl StreamError {
    /// The origin did not process the request: it may go again.
    pub fn refused(&self) -> bool {
        matches!(self, StreamError::Reset(ErrorCode::RefusedStream))
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Reset(code) => write!(f, "stream reset ({code:?})"),
            StreamError::Connection(e) => write!(f, "{}", e.cause),
        }
    }
}

/// Why no stream was opened.
#[derive(Debug)]
pub enum OpenFailed {
    /// The connection never came up.
    Connect(ProxyError),
    /// The connection takes no new stream (it is going away, used up its
    /// stream ids, or ended): nothing was sent.
    NotOpened(OpenError),
}

/// The next thing the origin said on a stream.
#[derive(Debug)]
pub enum ResponseEvent {
    /// An interim (1xx) head; the final one is still to come.
    Interim(ResponseHead),
    /// The final response head.
    Head(ResponseHead),
    /// A piece of the body.
    Data(Bytes),
    /// The response is complete, with its trailers if it had any.
    End(Option<ResponseHead>),
}

/// A request's hold on a connection, counted by the pool as a stream until
/// dropped (while it waits for the connection, and while its stream is
/// open).
pub struct StreamLease {
    conn: H2Connection,
}

impl StreamLease {
    /// Takes a place on `conn`.
    pub fn new(conn: &H2Connection) -> Self {
        conn.state().leases += 1;
        StreamLease { conn: conn.clone() }
    }

    /// The connection the lease is on.
    pub fn connection(&self) -> &H2Connection {
        &self.conn
    }

    /// Opens a stream with the request head once the connection is up and
    /// has room (waiting for both): the pseudo fields, then `fields` (names
    /// lowercase, no connection-specific field). `end_stream`: the request
    /// has no body.
    pub async fn open<'f>(
        self,
        method: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
    ) -> Result<H2Stream, OpenFailed> {
        self.open_with(false, |conn| {
            conn.open_stream(method, scheme, authority, path, fields, end_stream)
        })
        .await
    }

    /// Opens an extended CONNECT with `protocol` (RFC 8441 §4) once the
    /// connection is up, the origin's SETTINGS came and a stream has room;
    /// [`OpenError::NoExtendedConnect`] when the origin does not offer it.
    pub async fn open_tunnel<'f>(
        self,
        protocol: &[u8],
        scheme: &[u8],
        authority: &[u8],
        path: &[u8],
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<H2Stream, OpenFailed> {
        self.open_with(true, |conn| {
            conn.open_extended_connect(protocol, scheme, authority, path, fields)
        })
        .await
    }

    /// Opens a stream by `open` once the connection is up (and, with
    /// `after_settings`, once the origin's SETTINGS came) and has room.
    async fn open_with(
        self,
        after_settings: bool,
        mut open: impl FnMut(&mut ClientConnection) -> Result<StreamId, OpenError>,
    ) -> Result<H2Stream, OpenFailed> {
        let id = std::future::poll_fn(|cx| {
            let mut st = self.conn.state();
            let st = &mut *st;
            if let Some(e) = &st.ended {
                return Poll::Ready(Err(if st.ready {
                    OpenFailed::NotOpened(OpenError::Closed)
                } else {
                    OpenFailed::Connect(e.clone())
                }));
            }
            if !st.ready || (after_settings && !st.conn.settings_received()) {
                st.wait_to_open(cx.waker());
                return Poll::Pending;
            }
            match open(&mut st.conn) {
                Ok(id) => {
                    st.slots.insert(id, StreamSlot::default());
                    st.wake_driver();
                    Poll::Ready(Ok(id))
                }
                Err(OpenError::AtLimit) => {
                    st.wait_to_open(cx.waker());
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(OpenFailed::NotOpened(e))),
            }
        })
        .await?;
        Ok(H2Stream { lease: self, id })
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        if let Some(mut st) = self.conn.try_state() {
            st.leases = st.leases.saturating_sub(1);
            if st.leases == 0 {
                st.idle_since = std::time::Instant::now();
                st.wake_driver();
            }
        }
    }
}

/// One open stream of a request.
pub struct H2Stream {
    lease: StreamLease,
    id: StreamId,
}

impl H2Stream {
    /// The stream's id on its connection.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// How many request body bytes may go now (the stream's and the
    /// connection's windows, and room in the output); waits while none.
    /// `Err` once the stream or the connection ended.
    pub fn poll_send_capacity(&self, cx: &mut Context<'_>) -> Poll<Result<usize, StreamError>> {
        let mut st = self.lease.conn.state();
        let st = &mut *st;
        let ended = st.ended.clone();
        let Some(slot) = st.slots.get_mut(&self.id) else {
            return Poll::Ready(Err(StreamError::Reset(ErrorCode::Cancel)));
        };
        if let Some(code) = slot.reset {
            return Poll::Ready(Err(StreamError::Reset(code)));
        }
        if let Some(e) = ended {
            return Poll::Ready(Err(StreamError::Connection(e)));
        }
        let room = MAX_OUTPUT.saturating_sub(st.conn.output_len());
        let capacity = st.conn.send_capacity(self.id).min(room);
        if capacity > 0 {
            return Poll::Ready(Ok(capacity));
        }
        slot.waker = Some(cx.waker().clone());
        if room == 0 {
            st.output_waiters = true;
        }
        Poll::Pending
    }

    /// Queues request body bytes (within [`Self::poll_send_capacity`]);
    /// returns how many were taken. `end_stream` ends the request once all
    /// of `data` was taken.
    pub fn send_data(&self, data: Bytes, end_stream: bool) -> usize {
        let mut st = self.lease.conn.state();
        let n = st.conn.send_data_owned(self.id, data, end_stream);
        st.wake_driver();
        if end_stream {
            st.wake_openers();
        }
        n
    }

    /// Queues the request's trailers, which end it; trailers past the
    /// origin's SETTINGS_MAX_HEADER_LIST_SIZE reset the stream instead
    /// (INTERNAL_ERROR), which the response side then reports.
    pub fn send_trailers<'f>(&self, fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>) {
        let mut st = self.lease.conn.state();
        let st = &mut *st;
        if !st.conn.send_trailers(self.id, fields) {
            if let Some(slot) = st.slots.get_mut(&self.id) {
                slot.reset.get_or_insert(ErrorCode::InternalError);
                slot.wake();
            }
        }
        st.wake_driver();
        st.wake_openers();
    }

    /// The next thing the origin said: interim heads, the final head, body
    /// pieces, the end (with trailers) in that order; a reset or the
    /// connection's end once what came before it was taken.
    pub fn poll_response(&self, cx: &mut Context<'_>) -> Poll<Result<ResponseEvent, StreamError>> {
        let mut st = self.lease.conn.state();
        let st = &mut *st;
        let Some(slot) = st.slots.get_mut(&self.id) else {
            return Poll::Ready(Err(StreamError::Reset(ErrorCode::Cancel)));
        };
        if let Some(head) = slot.interim.pop_front() {
            return Poll::Ready(Ok(ResponseEvent::Interim(head)));
        }
        if let Some(head) = slot.head.take() {
            return Poll::Ready(Ok(ResponseEvent::Head(head)));
        }
        if !slot.body.is_empty() {
            return Poll::Ready(Ok(ResponseEvent::Data(slot.body.split().freeze())));
        }
        if slot.ended {
            return Poll::Ready(Ok(ResponseEvent::End(slot.trailers.take())));
        }
        if let Some(code) = slot.reset {
            return Poll::Ready(Err(StreamError::Reset(code)));
        }
        if let Some(e) = &st.ended {
            return Poll::Ready(Err(StreamError::Connection(e.clone())));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Reads response body bytes into `buf` as a tunnel's byte stream
    /// (an extended CONNECT's, after its head was taken), releasing them
    /// to the windows as they are taken; `Ok` with nothing read at the
    /// end of the stream (trailers, if any, are dropped).
    pub fn poll_read_tunnel(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<Result<(), StreamError>> {
        let mut st = self.lease.conn.state();
        let st = &mut *st;
        let Some(slot) = st.slots.get_mut(&self.id) else {
            return Poll::Ready(Err(StreamError::Reset(ErrorCode::Cancel)));
        };
        if !slot.body.is_empty() {
            let n = slot.body.len().min(buf.remaining());
            buf.put_slice(&slot.body.split_to(n));
            slot.unreleased -= n.min(slot.unreleased);
            let before = st.conn.output_len();
            st.conn.release(self.id, n);
            if st.conn.output_len() != before {
                st.wake_driver();
            }
            return Poll::Ready(Ok(()));
        }
        if slot.ended {
            return Poll::Ready(Ok(()));
        }
        if let Some(code) = slot.reset {
            return Poll::Ready(Err(StreamError::Reset(code)));
        }
        if let Some(e) = &st.ended {
            return Poll::Ready(Err(StreamError::Connection(e.clone())));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Whether nothing but the end is left of the response (no body byte,
    /// no trailers): for after the final head was taken.
    pub fn body_is_empty(&self) -> bool {
        let st = self.lease.conn.state();
        st.slots
            .get(&self.id)
            .is_some_and(|s| s.ended && s.body.is_empty() && s.trailers.is_none())
    }

    /// The request used (or dropped) `n` body bytes: the origin may send
    /// as much again.
    pub fn release(&self, n: usize) {
        let mut st = self.lease.conn.state();
        let st = &mut *st;
        let Some(slot) = st.slots.get_mut(&self.id) else {
            return;
        };
        let n = n.min(slot.unreleased);
        slot.unreleased -= n;
        let before = st.conn.output_len();
        st.conn.release(self.id, n);
        if st.conn.output_len() != before {
            st.wake_driver();
        }
    }

    /// Resets the stream (RST_STREAM CANCEL) unless it is closed already:
    /// the response is no longer wanted, or the request body will not come.
    pub fn cancel(&self) {
        let mut st = self.lease.conn.state();
        let before = st.conn.output_len();
        st.conn.reset_stream(self.id, ErrorCode::Cancel);
        if st.conn.output_len() != before {
            st.wake_driver();
            st.wake_openers();
        }
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        let Some(mut st) = self.lease.conn.try_state() else {
            return;
        };
        let st = &mut *st;
        // Whatever is not complete is cancelled, and the body bytes that
        // came and were never released go back to the connection's window.
        st.conn.reset_stream(self.id, ErrorCode::Cancel);
        if let Some(slot) = st.slots.remove(&self.id) {
            st.conn.release(self.id, slot.unreleased);
        }
        st.wake_driver();
        st.wake_openers();
    }
}
