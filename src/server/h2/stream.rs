//! One HTTP/2 stream as a [`Session`]: the request view over the head made
//! by `request.rs`, the request body taken from the connection's table as
//! the codec delivers it (windows released as the handler uses it, so the
//! client's sending follows the handler's reading), and the answer queued
//! through the codec, whose body `send.rs` sizes to the client's windows.

use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use tracing::debug;

use super::streams::{BuiltHead, SharedCell};
use super::ConnFacts;
use crate::http::priority::Priority;
use crate::http::status::has_no_body;
use crate::http::{
    poll_body_once, Body, BodyReadError, RequestRecord, RequestView, ResponseHead, Session,
    TlsFacts,
};
use crate::http1::parse::Method;
use crate::http2::conn::StreamId;
use crate::http2::ErrorCode;
use crate::server::body_send::{finish_pushed, poll_write_pushed, StreamSink};
use crate::server::response_fields::{carried, decimal, lowercase_fields, LoweredFields};
use crate::server::stream_session::{stream_view, PushedBody, ReceivedBody, StreamAnswer};
use crate::server::stream_tunnel::TunnelAnswer;
use crate::worker::WorkerCtx;

/// One request and its answer on an HTTP/2 connection.
pub struct H2Stream<'a> {
    pub(super) ctx: &'a WorkerCtx,
    pub(super) facts: Rc<ConnFacts>,
    pub(super) shared: Rc<SharedCell>,
    pub(super) peer: SocketAddr,
    pub(super) stream_id: StreamId,
    /// The head as HTTP/1 text, and its parse (shared with the streams that
    /// repeat the same request).
    pub(super) built: Rc<BuiltHead>,
    /// DATA received and not yet used.
    pub(super) body: ReceivedBody,
    continued: bool,
    /// The answer's head ended the stream.
    pub(super) ended: bool,
    /// The answer's progress after its head.
    pub(super) answer: StreamAnswer,
    /// The body still to send after the head.
    pending: Option<Body<'a>>,
    /// The request's record: its identifier, trace, status and what the
    /// access log notes.
    pub(super) record: RequestRecord,
    /// The request is an extended CONNECT (RFC 8441): a 101 tunnel is
    /// answered `:status 200` and the stream carries its bytes.
    pub(super) extended_connect: bool,
}

impl<'a> H2Stream<'a> {
    /// A stream whose head is `built`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        ctx: &'a WorkerCtx,
        facts: Rc<ConnFacts>,
        shared: Rc<SharedCell>,
        peer: SocketAddr,
        stream_id: StreamId,
        built: Rc<BuiltHead>,
    ) -> Self {
        let body = ReceivedBody::new(built.head.body == crate::http1::parse::BodyKind::None);
        let continued = !built.head.expect_continue;
        H2Stream {
            ctx,
            facts,
            shared,
            peer,
            stream_id,
            built,
            body,
            continued,
            ended: false,
            answer: StreamAnswer::default(),
            pending: None,
            record: RequestRecord::default(),
            extended_connect: false,
        }
    }

    /// Whether the request is a `HEAD`.
    pub(super) fn is_head(&self) -> bool {
        self.built.head.method == Method::Head
    }

    fn poll_body_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        loop {
            if let Some(n) = self.body.ready() {
                return Poll::Ready(Ok(n));
            }
            if !self.continued {
                self.continued = true;
                if self.record.status == 0 {
                    let mut sh = self.shared.borrow_mut();
                    sh.conn
                        .send_headers(self.stream_id, 100, &mut std::iter::empty(), false);
                    sh.table.wake_conn();
                }
            }
            let mut sh = self.shared.borrow_mut();
            let Some(slot) = sh.table.slot_mut(self.stream_id) else {
                return Poll::Ready(Err(BodyReadError::Closed));
            };
            if !slot.body.is_empty() {
                let took = self
                    .body
                    .take(&mut slot.body, self.ctx.config.http.max_body_bytes);
                drop(sh);
                if let Err(e) = took {
                    return Poll::Ready(Err(e));
                }
                continue;
            }
            if slot.reset.is_some() {
                return Poll::Ready(Err(BodyReadError::Closed));
            }
            if slot.body_end {
                self.body.end(slot.trailers.take());
                continue;
            }
            slot.wait(cx.waker());
            drop(sh);
            let limit = self.ctx.config.http.body_read_timeout;
            if self.body.poll_stall(cx, limit).is_ready() {
                return Poll::Ready(Err(BodyReadError::Timeout));
            }
            return Poll::Pending;
        }
    }

    /// Room to send up to `want` body bytes: `Ok(n)` with `0 < n <= want`,
    /// within the client's windows, the connection's queued output and the
    /// codec's budget of DATA frames tiny windows cut small.
    pub(super) fn poll_send_capacity(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
    ) -> Poll<std::io::Result<usize>> {
        if want == 0 {
            return Poll::Ready(Ok(0));
        }
        let granted = {
            let mut sh = self.shared.borrow_mut();
            let sh = &mut *sh;
            let Some(slot) = sh.table.slot_mut(self.stream_id) else {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            };
            if slot.reset.is_some() {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            }
            let high = self.ctx.config.http2.max_send_buffer;
            let room = high.saturating_sub(sh.conn.output_len());
            let cap = sh.conn.grant_send(self.stream_id, want, room);
            if cap == 0 {
                if sh.conn.error().is_some() {
                    // The client's tiny windows spent the small-data budget:
                    // the connection ends with its GOAWAY.
                    sh.table.wake_conn();
                    return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
                }
                slot.wait(cx.waker());
                sh.table.output_waiters |= room == 0;
                if room > 0 {
                    // Another stream goes first (RFC 9218), or this one's
                    // window is shut and the next may send: that one is
                    // woken. Waiting for a turn is no stall of the client's.
                    if let Some(next) = sh.conn.next_sender() {
                        if next != self.stream_id {
                            sh.table.wake_stream(next);
                        }
                    }
                    if sh.conn.send_capacity(self.stream_id) > 0 {
                        self.answer.no_stall();
                        return Poll::Pending;
                    }
                }
            }
            cap
        };
        if granted > 0 {
            self.answer.no_stall();
            return Poll::Ready(Ok(granted));
        }
        let limit = self.ctx.config.http.write_timeout;
        self.answer.poll_write_stall(cx, limit).map(Err)
    }

    /// Queues a body held in memory right behind its head, with the end of
    /// the stream, when the windows and the output let all of it go at once
    /// (a small answer: one append, no steps of its own); false, with
    /// nothing queued, when it must be sent as granted.
    fn send_at_once(&mut self, data: &[u8]) -> bool {
        let mut sh = self.shared.borrow_mut();
        let high = self.ctx.config.http2.max_send_buffer;
        let room = high.saturating_sub(sh.conn.output_len());
        if !sh.conn.send_data_at_once(self.stream_id, data, room) {
            return false;
        }
        drop(sh);
        self.answer.no_stall();
        self.answer.sent += data.len() as u64;
        true
    }

    /// Queues `data` (within the capacity just granted).
    pub(super) fn send_data(&mut self, data: &[u8], end: bool) -> std::io::Result<()> {
        let mut sh = self.shared.borrow_mut();
        let taken = sh.conn.send_data(self.stream_id, data, end);
        sh.table.wake_conn();
        drop(sh);
        self.answer.sent += taken as u64;
        if taken < data.len() {
            return Err(std::io::Error::other("DATA past the send window"));
        }
        Ok(())
    }

    /// Queues `data` (within the capacity just granted) without copying it.
    pub(super) fn send_data_owned(&mut self, data: bytes::Bytes, end: bool) -> std::io::Result<()> {
        let len = data.len();
        let mut sh = self.shared.borrow_mut();
        let taken = sh.conn.send_data_owned(self.stream_id, data, end);
        sh.table.wake_conn();
        drop(sh);
        self.answer.sent += taken as u64;
        if taken < len {
            return Err(std::io::Error::other("DATA past the send window"));
        }
        Ok(())
    }

    /// Ends the response body, with trailers when there are any.
    pub(super) fn end_body(&mut self, trailers: &[(&str, &[u8])]) -> std::io::Result<()> {
        if trailers.is_empty() {
            return self.send_data(&[], true);
        }
        let lowered = lowercase_fields(trailers.iter().copied());
        let mut sh = self.shared.borrow_mut();
        let mut fields = lowered.iter().map(|(n, v)| (n.as_slice(), *v));
        let sent = sh.conn.send_trailers(self.stream_id, &mut fields);
        sh.table.wake_conn();
        if !sent {
            return Err(std::io::Error::other(
                "the response trailers are past the client's header list limit",
            ));
        }
        Ok(())
    }

    /// Ends the stream with RST_STREAM: a body that cannot be sent whole must
    /// not look whole.
    pub(super) fn reset(&mut self, code: ErrorCode) {
        let mut sh = self.shared.borrow_mut();
        sh.conn.reset_stream(self.stream_id, code);
        sh.table.wake_conn();
    }
}

impl<'a> StreamSink<'a> for H2Stream<'a> {
    fn answer(&self) -> &StreamAnswer {
        &self.answer
    }

    fn answer_mut(&mut self) -> &mut StreamAnswer {
        &mut self.answer
    }

    fn take_pending(&mut self) -> Option<Body<'a>> {
        self.pending.take()
    }

    fn poll_send_capacity(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
    ) -> Poll<std::io::Result<usize>> {
        H2Stream::poll_send_capacity(self, cx, want)
    }

    fn send_data(&mut self, data: &[u8], end: bool) -> std::io::Result<()> {
        H2Stream::send_data(self, data, end)
    }

    fn send_data_owned(&mut self, data: bytes::Bytes, end: bool) -> std::io::Result<()> {
        H2Stream::send_data_owned(self, data, end)
    }

    fn end_body(&mut self, trailers: &[(&str, &[u8])]) -> std::io::Result<()> {
        H2Stream::end_body(self, trailers)
    }
}

impl<'a> Session<'a> for H2Stream<'a> {
    fn request(&self) -> RequestView<'_> {
        let tls = self.facts.secure.then(|| TlsFacts {
            version: self.facts.version,
            cipher: self.facts.cipher,
            sni: self.facts.sni.as_deref(),
            client_subject: self.facts.client_subject.as_deref(),
            early_data: false,
        });
        let view = RequestView::http1(&self.built.head, &self.built.buf, self.peer, tls)
            .on_listener(self.facts.listener);
        stream_view(
            view,
            self.extended_connect,
            self.facts.client_address.as_deref(),
        )
    }

    fn worker(&self) -> &'a WorkerCtx {
        self.ctx
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        poll_body_once(self, cx, Self::poll_body_inner)
    }

    fn body_chunk(&self) -> &[u8] {
        self.body.chunk()
    }

    fn consume_body(&mut self, n: usize) {
        let n = self.body.consume(n);
        // The window opens as the handler uses the bytes, not as they arrive.
        let mut sh = self.shared.borrow_mut();
        sh.conn.release(self.stream_id, n);
        sh.table.wake_conn();
    }

    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        self.body.trailers()
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'a>) {
        if self.record.status != 0 {
            return;
        }
        let tunnel = matches!(body, Body::Tunnel(_));
        let shape = TunnelAnswer::of(self.extended_connect, head.status, tunnel);
        if shape == TunnelAnswer::NotTaken {
            crate::service::send_status(self, 501);
            return;
        }
        let opens_tunnel = shape == TunnelAnswer::Opens;
        let status = shape.status(head.status);
        self.record.status = status;
        let bodiless = has_no_body(status);
        let length = if bodiless || tunnel { None } else { body.len() };
        let drop_body = self.is_head() || bodiless || (tunnel && !opens_tunnel);
        let end = drop_body || length == Some(0);
        self.answer.length = length;
        self.ended = end;
        {
            let mut date = [0u8; 40];
            let date = match head.date {
                Some(kept) => kept,
                None => {
                    let mut cache = self.ctx.date.borrow_mut();
                    let now = cache.get_at(self.ctx.clock.now());
                    let n = now.len().min(date.len());
                    date[..n].copy_from_slice(&now[..n]);
                    &date[..n]
                }
            };
            let mut digits = [0u8; 20];
            // The driver's fields, in a list walked as a slice.
            let mut own: [(&[u8], &[u8]); 4] = [
                (b"server", b"pier"),
                (b"date", date),
                (b"content-length", b""),
                (b"alt-svc", b""),
            ];
            let mut count = 2;
            if let Some(length) = length {
                own[count] = (b"content-length", decimal(length, &mut digits));
                count += 1;
            }
            if let Some(alt_svc) = self.facts.alt_svc.as_deref() {
                own[count] = (b"alt-svc", alt_svc);
                count += 1;
            }
            let mut own = own[..count].iter().copied();
            let given = || {
                head.all_fields()
                    .filter(|(n, _)| !n.eq_ignore_ascii_case("content-length") && shape.carries(n))
            };
            let mut sh = self.shared.borrow_mut();
            let sent = if !head.has_fields() {
                // A bare answer (a `respond` route's): the driver's fields
                // alone, with no field to look at for a priority or case.
                sh.conn.send_headers(self.stream_id, status, &mut own, end)
            } else {
                if let Some(priority) = Priority::of_answer(head.all_fields()) {
                    sh.conn.set_response_priority(self.stream_id, priority);
                }
                if given().all(|(n, _)| !n.bytes().any(|b| b.is_ascii_uppercase())) {
                    let mut fields = own.chain(
                        given()
                            .filter(|(n, _)| carried(n))
                            .map(|(n, v)| (n.as_bytes(), v)),
                    );
                    sh.conn
                        .send_headers(self.stream_id, status, &mut fields, end)
                } else {
                    let lowered = LoweredFields::of(given());
                    let mut fields = own.chain(lowered.iter());
                    sh.conn
                        .send_headers(self.stream_id, status, &mut fields, end)
                }
            };
            sh.table.wake_conn();
            if !sent {
                // Past the client's SETTINGS_MAX_HEADER_LIST_SIZE: the codec
                // answered a bare 500 (or reset the stream) instead, and
                // nothing more goes on the stream.
                debug!(peer = %self.peer, stream = self.stream_id, status, "response head past the client's header list limit: 500");
                self.record.status = 500;
                self.answer.length = None;
                self.ended = true;
                if let Body::Push(_) = body {
                    self.answer.push = PushedBody::started(true);
                }
                return;
            }
        }
        if opens_tunnel {
            self.pending = Some(body);
            return;
        }
        if shape == TunnelAnswer::Stray {
            self.reset(ErrorCode::InternalError);
            return;
        }
        if let Body::Push(_) = body {
            self.answer.push = PushedBody::started(end);
            return;
        }
        if !end {
            let whole = match &body {
                Body::Bytes(data) => Some(*data),
                Body::Owned(data) => Some(&data[..]),
                _ => None,
            };
            if whole.is_some_and(|data| self.send_at_once(data)) {
                return;
            }
            self.pending = Some(body);
        }
    }

    fn responded(&self) -> bool {
        self.record.status != 0
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        if self.record.status != 0 || !crate::http::status::is_interim(status) {
            return;
        }
        if status == 100 {
            if self.continued {
                return;
            }
            self.continued = true;
        }
        // A HEADERS frame without END_STREAM (RFC 9113 §8.1); the final head
        // follows on the same stream.
        let lowered = lowercase_fields(fields.iter().copied());
        let mut fields = lowered.iter().map(|(n, v)| (n.as_slice(), *v));
        let mut sh = self.shared.borrow_mut();
        sh.conn
            .send_headers(self.stream_id, status, &mut fields, false);
        sh.table.wake_conn();
    }

    fn record(&self) -> &RequestRecord {
        &self.record
    }

    fn record_mut(&mut self) -> &mut RequestRecord {
        &mut self.record
    }

    fn poll_write_body(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        poll_write_pushed(self, cx, data)
    }

    fn poll_flush_body(&mut self, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Queued DATA goes out as the connection task writes; what it holds
        // is bounded by the windows and `[http2] max_send_buffer`.
        Poll::Ready(Ok(()))
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        finish_pushed(self, trailers)
    }
}
