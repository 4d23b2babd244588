//! One HTTP/2 stream as a [`Session`]: the request view over the head made
//! by `request.rs`, the request body taken from the connection's table as
//! the codec delivers it (windows released as the handler uses it, so the
//! client's sending follows the handler's reading), and the answer queued
//! through the codec, whose body `send.rs` sizes to the client's windows.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;
use tracing::debug;

use super::streams::SharedCell;
use super::ConnFacts;
use crate::http::priority::Priority;
use crate::http::status::has_no_body;
use crate::http::{Body, BodyReadError, OwnedField, RequestView, ResponseHead, Session, TlsFacts};
use crate::http1::parse::{Method, RequestHead};
use crate::http2::conn::StreamId;
use crate::http2::ErrorCode;
use crate::server::body_send::{finish_pushed, poll_write_pushed, PushedBody};
use crate::server::response_fields::{carried, decimal, lowercase_fields, LoweredFields};
use crate::server::stream_tunnel::{run_stream_tunnel, TunnelAnswer};
use crate::worker::WorkerCtx;

/// One request and its answer on an HTTP/2 connection.
pub struct H2Stream<'a> {
    pub(super) ctx: &'a WorkerCtx,
    pub(super) facts: Rc<ConnFacts>,
    pub(super) shared: Rc<SharedCell>,
    pub(super) peer: SocketAddr,
    pub(super) stream_id: StreamId,
    /// The head as HTTP/1 text, and its parse.
    pub(super) buf: Vec<u8>,
    pub(super) head: RequestHead,
    /// DATA received and not yet used: `chunk[chunk_pos..]`.
    chunk: Vec<u8>,
    chunk_pos: usize,
    received: u64,
    pub(super) body_done: bool,
    pub(super) body_error: Option<BodyReadError>,
    /// The request's trailers, once the body ended with them.
    trailers: Option<Vec<OwnedField>>,
    continued: bool,
    body_stall: Option<Pin<Box<Sleep>>>,
    /// The answer's status, once given.
    pub(super) status: u16,
    /// The promised length of the answer's body, when one was sent.
    pub(super) length: Option<u64>,
    /// The answer's head ended the stream.
    pub(super) ended: bool,
    /// The body still to send after the head.
    pub(super) pending: Option<Body<'a>>,
    pub(super) push: PushedBody,
    write_stall: Option<Pin<Box<Sleep>>>,
    /// Body bytes queued for this response.
    pub(super) sent: u64,
    pub(super) request_id: crate::http::RequestId,
    /// The stream's trace (off unless tracing is on).
    pub(super) trace: crate::http::RequestTrace,
    pub(super) upstream: Option<(SocketAddr, Duration)>,
    /// How a cache answered, for the access log.
    pub(super) cache: Option<&'static str>,
    /// The request is an extended CONNECT (RFC 8441): a 101 tunnel is
    /// answered `:status 200` and the stream carries its bytes.
    pub(super) extended_connect: bool,
}

impl<'a> H2Stream<'a> {
    /// A stream whose head is parsed into `head` over `buf`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        ctx: &'a WorkerCtx,
        facts: Rc<ConnFacts>,
        shared: Rc<SharedCell>,
        peer: SocketAddr,
        stream_id: StreamId,
        buf: Vec<u8>,
        head: RequestHead,
    ) -> Self {
        let body_done = head.body == crate::http1::parse::BodyKind::None;
        let continued = !head.expect_continue;
        H2Stream {
            ctx,
            facts,
            shared,
            peer,
            stream_id,
            buf,
            head,
            chunk: Vec::new(),
            chunk_pos: 0,
            received: 0,
            body_done,
            body_error: None,
            trailers: None,
            continued,
            body_stall: None,
            status: 0,
            length: None,
            ended: false,
            pending: None,
            push: PushedBody::default(),
            write_stall: None,
            sent: 0,
            request_id: crate::http::RequestId::default(),
            trace: crate::http::RequestTrace::default(),
            upstream: None,
            cache: None,
            extended_connect: false,
        }
    }

    /// Whether the request is a `HEAD`.
    pub(super) fn is_head(&self) -> bool {
        self.head.method == Method::Head
    }

    fn poll_body_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        loop {
            if self.chunk_pos < self.chunk.len() {
                return Poll::Ready(Ok(self.chunk.len() - self.chunk_pos));
            }
            if self.body_done {
                return Poll::Ready(Ok(0));
            }
            if !self.continued {
                self.continued = true;
                if self.status == 0 {
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
                self.chunk.clear();
                std::mem::swap(&mut self.chunk, &mut slot.body);
                drop(sh);
                self.chunk_pos = 0;
                self.body_stall = None;
                let n = self.chunk.len() as u64;
                self.received += n;
                if self.received > self.ctx.config.http.max_body_bytes {
                    return Poll::Ready(Err(BodyReadError::TooLarge));
                }
                continue;
            }
            if slot.reset.is_some() {
                return Poll::Ready(Err(BodyReadError::Closed));
            }
            if slot.body_end {
                self.trailers = slot.trailers.take();
                self.body_done = true;
                continue;
            }
            slot.wait(cx.waker());
            drop(sh);
            let limit = self.ctx.config.http.body_read_timeout;
            let stall = self
                .body_stall
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
            if stall.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(BodyReadError::Timeout));
            }
            return Poll::Pending;
        }
    }

    /// A send waits for the client's window: fails once it waited for the
    /// write timeout, so a client that never reads holds a stream for at most
    /// that long.
    pub(super) fn poll_write_stall(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        let limit = self.ctx.config.http.write_timeout;
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "write timeout",
            )),
            Poll::Pending => Poll::Pending,
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
                        self.write_stall = None;
                        return Poll::Pending;
                    }
                }
            }
            cap
        };
        if granted > 0 {
            self.write_stall = None;
            return Poll::Ready(Ok(granted));
        }
        self.poll_write_stall(cx).map(Err)
    }

    /// Queues `data` (within the capacity just granted).
    pub(super) fn send_data(&mut self, data: &[u8], end: bool) -> std::io::Result<()> {
        let mut sh = self.shared.borrow_mut();
        let taken = sh.conn.send_data(self.stream_id, data, end);
        sh.table.wake_conn();
        drop(sh);
        self.sent += taken as u64;
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
        self.sent += taken as u64;
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

    /// Sends the body kept by `send_response`, then ends the stream; an error
    /// leaves the stream to be reset.
    pub(super) async fn send_pending(&mut self) -> std::io::Result<()> {
        match self.pending.take() {
            None => Ok(()),
            // Kept only for the 101 that opened an extended CONNECT's tunnel.
            Some(Body::Tunnel(tunnel)) => {
                run_stream_tunnel(self, tunnel).await;
                Ok(())
            }
            Some(body) => crate::server::body_send::send_body(self, body).await,
        }
    }

    /// Ends the stream with RST_STREAM: a body that cannot be sent whole must
    /// not look whole.
    pub(super) fn reset(&mut self, code: ErrorCode) {
        let mut sh = self.shared.borrow_mut();
        sh.conn.reset_stream(self.stream_id, code);
        sh.table.wake_conn();
    }
}

impl<'a> crate::server::body_send::StreamSink<'a> for H2Stream<'a> {
    fn pushed(&mut self) -> &mut PushedBody {
        &mut self.push
    }

    fn worker_ctx(&self) -> &'a WorkerCtx {
        self.ctx
    }

    fn promised_length(&self) -> Option<u64> {
        self.length
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
        let mut view = RequestView::http1(&self.head, &self.buf, self.peer, tls)
            .on_listener(self.facts.listener);
        if self.extended_connect {
            view = view.from_extended_connect();
        }
        match self.facts.client_address.as_deref() {
            Some(trusted) => view.with_client_address(trusted),
            None => view,
        }
    }

    fn worker(&self) -> &'a WorkerCtx {
        self.ctx
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        if let Some(e) = self.body_error {
            return Poll::Ready(Err(e));
        }
        let r = self.poll_body_inner(cx);
        if let Poll::Ready(Err(e)) = r {
            self.body_error = Some(e);
        }
        r
    }

    fn body_chunk(&self) -> &[u8] {
        &self.chunk[self.chunk_pos.min(self.chunk.len())..]
    }

    fn consume_body(&mut self, n: usize) {
        let n = n.min(self.chunk.len() - self.chunk_pos);
        self.chunk_pos += n;
        // The window opens as the handler uses the bytes, not as they arrive.
        let mut sh = self.shared.borrow_mut();
        sh.conn.release(self.stream_id, n);
        sh.table.wake_conn();
    }

    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        let trailers = self.trailers.as_deref().unwrap_or_default();
        trailers.iter().map(OwnedField::pair).collect()
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'a>) {
        if self.status != 0 {
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
        self.status = status;
        let bodiless = has_no_body(status);
        let length = if bodiless || tunnel { None } else { body.len() };
        let drop_body = self.is_head() || bodiless || (tunnel && !opens_tunnel);
        let end = drop_body || length == Some(0);
        self.length = length;
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
            let length_field = length.map(|n| (&b"content-length"[..], decimal(n, &mut digits)));
            let alt_svc = self.facts.alt_svc.as_deref().map(|v| (&b"alt-svc"[..], v));
            let own = [(&b"server"[..], &b"pier"[..]), (&b"date"[..], date)]
                .into_iter()
                .chain(length_field)
                .chain(alt_svc);
            let given = || {
                head.all_fields()
                    .filter(|(n, _)| !n.eq_ignore_ascii_case("content-length") && shape.carries(n))
            };
            let mut sh = self.shared.borrow_mut();
            if let Some(priority) = Priority::of_answer(head.all_fields()) {
                sh.conn.set_response_priority(self.stream_id, priority);
            }
            let sent = if given().all(|(n, _)| !n.bytes().any(|b| b.is_ascii_uppercase())) {
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
            };
            sh.table.wake_conn();
            if !sent {
                // Past the client's SETTINGS_MAX_HEADER_LIST_SIZE: the codec
                // answered a bare 500 (or reset the stream) instead, and
                // nothing more goes on the stream.
                debug!(peer = %self.peer, stream = self.stream_id, status, "response head past the client's header list limit: 500");
                self.status = 500;
                self.length = None;
                self.ended = true;
                if let Body::Push(_) = body {
                    self.push = PushedBody::started(true);
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
            self.push = PushedBody::started(end);
            return;
        }
        if !end {
            self.pending = Some(body);
        }
    }

    fn responded(&self) -> bool {
        self.status != 0
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        if self.status != 0 || !crate::http::status::is_interim(status) {
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

    fn request_id(&self) -> &crate::http::RequestId {
        &self.request_id
    }

    fn trace(&self) -> &crate::http::RequestTrace {
        &self.trace
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

    fn note_upstream(&mut self, addr: SocketAddr, elapsed: Duration) {
        self.upstream = Some((addr, elapsed));
    }

    fn note_cache(&mut self, outcome: &'static str) {
        self.cache = Some(outcome);
    }
}
