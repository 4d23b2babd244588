//! One HTTP/3 request stream as a [`Session`]: the request view over the
//! head made from its QPACK-decoded fields, the request body taken from the
//! connection's slot as QUIC delivers it (the stream is read further only
//! as the handler uses it), and the answer framed as HEADERS and DATA into
//! the slot, which the connection task writes within QUIC's flow control.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use quinn_proto::StreamId;
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::conn::{H3Conn, OUT_HIGH};
use super::ConnFacts;
use crate::http::priority::Priority;
use crate::http::status::has_no_body;
use crate::http::{Body, BodyReadError, OwnedField, RequestView, ResponseHead, Session, TlsFacts};
use crate::http1::parse::{Method, RequestHead};
use crate::http3::frame;
use crate::http3::ErrorCode;
use crate::server::body_send::{finish_pushed, poll_write_pushed, PushedBody, StreamSink};
use crate::server::response_fields::{carried, decimal, lowercase_fields};
use crate::server::stream_tunnel::{run_stream_tunnel, TunnelAnswer, TunnelStream};
use crate::worker::WorkerCtx;

/// One request and its answer on an HTTP/3 connection.
pub struct H3Stream<'a> {
    pub(super) ctx: &'a WorkerCtx,
    pub(super) facts: Rc<ConnFacts>,
    pub(super) conn: Rc<RefCell<H3Conn>>,
    /// Wakes the connection task to write what was queued.
    pub(super) wake: Rc<Notify>,
    pub(super) peer: SocketAddr,
    pub(super) id: StreamId,
    pub(super) buf: Vec<u8>,
    pub(super) head: RequestHead,
    /// The request is an extended CONNECT (RFC 9220): a 101 tunnel is
    /// answered 200 and relayed over the stream.
    pub(super) extended_connect: bool,
    chunk: Vec<u8>,
    chunk_pos: usize,
    received: u64,
    body_done: bool,
    /// The request's trailers, once the body ended with them.
    trailers: Option<Vec<OwnedField>>,
    pub(super) body_error: Option<BodyReadError>,
    body_stall: Option<Pin<Box<Sleep>>>,
    write_stall: Option<Pin<Box<Sleep>>>,
    pub(super) status: u16,
    pub(super) length: Option<u64>,
    pub(super) pending: Option<Body<'a>>,
    pub(super) push: PushedBody,
    pub(super) sent: u64,
    pub(super) request_id: crate::http::RequestId,
    pub(super) trace: crate::http::RequestTrace,
    pub(super) upstream: Option<(SocketAddr, Duration)>,
    pub(super) cache: Option<&'static str>,
    /// The request came in 0-RTT, before the handshake ended.
    pub(super) early_data: bool,
}

impl<'a> H3Stream<'a> {
    /// A stream whose head is parsed into `head` over `buf`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        ctx: &'a WorkerCtx,
        facts: Rc<ConnFacts>,
        conn: Rc<RefCell<H3Conn>>,
        wake: Rc<Notify>,
        peer: SocketAddr,
        id: StreamId,
        buf: Vec<u8>,
        head: RequestHead,
    ) -> Self {
        let body_done = head.body == crate::http1::parse::BodyKind::None;
        H3Stream {
            ctx,
            facts,
            conn,
            wake,
            peer,
            id,
            buf,
            head,
            extended_connect: false,
            chunk: Vec::new(),
            chunk_pos: 0,
            received: 0,
            body_done,
            trailers: None,
            body_error: None,
            body_stall: None,
            write_stall: None,
            early_data: false,
            status: 0,
            length: None,
            pending: None,
            push: PushedBody::default(),
            sent: 0,
            request_id: crate::http::RequestId::default(),
            trace: crate::http::RequestTrace::default(),
            upstream: None,
            cache: None,
        }
    }

    fn is_head(&self) -> bool {
        self.head.method == Method::Head
    }

    /// Appends framed bytes to the stream's output, ending it with `end`.
    fn queue(&mut self, write: impl FnOnce(&mut Vec<u8>), end: bool) -> std::io::Result<()> {
        let mut c = self.conn.borrow_mut();
        let Some(slot) = c.requests.get_mut(&self.id) else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        if slot.reset {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let before = slot.out.len();
        write(&mut slot.out);
        slot.fin |= end;
        let added = slot.out.len() - before;
        c.queued += added;
        drop(c);
        self.wake.notify_one();
        Ok(())
    }

    /// Queues a HEADERS frame with `fields` (`:status` first, names
    /// lowercase).
    fn queue_headers<'f>(
        &mut self,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        end: bool,
    ) -> std::io::Result<()> {
        let mut section = Vec::new();
        {
            let mut c = self.conn.borrow_mut();
            c.encoder
                .encode_section(u64::from(self.id), fields, &mut section);
            c.flush_encoder();
        }
        self.queue(|out| frame::write_headers(&section, out), end)
    }

    /// Resets the stream: a body that cannot be sent whole must not look
    /// whole.
    pub(super) fn reset(&mut self, code: ErrorCode) {
        self.conn.borrow_mut().reset_stream(self.id, code);
        self.wake.notify_one();
    }

    fn poll_write_stall(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
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

    fn poll_body_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        loop {
            if self.chunk_pos < self.chunk.len() {
                return Poll::Ready(Ok(self.chunk.len() - self.chunk_pos));
            }
            if self.body_done {
                return Poll::Ready(Ok(0));
            }
            let mut c = self.conn.borrow_mut();
            let Some(slot) = c.requests.get_mut(&self.id) else {
                return Poll::Ready(Err(BodyReadError::Closed));
            };
            if !slot.body.is_empty() {
                self.chunk.clear();
                std::mem::swap(&mut self.chunk, &mut slot.body);
                drop(c);
                // Room in the slot: the stream is read further.
                self.wake.notify_one();
                self.chunk_pos = 0;
                self.body_stall = None;
                self.received += self.chunk.len() as u64;
                if self.received > self.ctx.config.http.max_body_bytes {
                    return Poll::Ready(Err(BodyReadError::TooLarge));
                }
                continue;
            }
            if slot.reset {
                return Poll::Ready(Err(BodyReadError::Closed));
            }
            if slot.body_end && !slot.trailers_blocked {
                self.body_done = true;
                self.trailers = slot.trailers.take();
                continue;
            }
            slot.wait(cx.waker());
            drop(c);
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

    /// Sends the body kept by `send_response`, then ends the stream.
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
}

impl<'a> StreamSink<'a> for H3Stream<'a> {
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
        if want == 0 {
            return Poll::Ready(Ok(0));
        }
        let room = {
            let mut c = self.conn.borrow_mut();
            let Some(slot) = c.requests.get_mut(&self.id) else {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            };
            if slot.reset {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            }
            // Within the stream's share and the connection's: a client
            // that reads nothing holds at most the latter queued.
            let room = OUT_HIGH
                .saturating_sub(slot.out.len())
                .min(c.queue_budget.saturating_sub(c.queued));
            if room == 0 {
                if let Some(slot) = c.requests.get_mut(&self.id) {
                    slot.wait(cx.waker());
                }
            }
            room
        };
        if room > 0 {
            self.write_stall = None;
            return Poll::Ready(Ok(room.min(want)));
        }
        self.poll_write_stall(cx).map(Err)
    }

    fn send_data(&mut self, data: &[u8], end: bool) -> std::io::Result<()> {
        let r = self.queue(
            |out| {
                if !data.is_empty() {
                    frame::write_data_header(data.len() as u64, out);
                    out.extend_from_slice(data);
                }
            },
            end,
        );
        if r.is_ok() {
            self.sent += data.len() as u64;
        }
        r
    }

    fn send_data_owned(&mut self, data: bytes::Bytes, end: bool) -> std::io::Result<()> {
        self.send_data(&data, end)
    }

    fn end_body(&mut self, trailers: &[(&str, &[u8])]) -> std::io::Result<()> {
        if trailers.is_empty() {
            return self.send_data(&[], true);
        }
        let lowered = lowercase_fields(trailers.iter().copied());
        let mut fields = lowered.iter().map(|(n, v)| (n.as_slice(), *v));
        let mut section = Vec::new();
        {
            let mut c = self.conn.borrow_mut();
            c.encoder
                .encode_section(u64::from(self.id), &mut fields, &mut section);
            c.flush_encoder();
        }
        self.queue(|out| frame::write_headers(&section, out), true)
    }
}

impl<'a> Session<'a> for H3Stream<'a> {
    fn request(&self) -> RequestView<'_> {
        let tls = TlsFacts {
            version: Some("TLSv1_3"),
            cipher: None,
            sni: self.facts.sni.as_deref(),
            client_subject: None,
            early_data: self.early_data,
        };
        let mut view = RequestView::http1(&self.head, &self.buf, self.peer, Some(tls))
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
        self.chunk_pos += n.min(self.chunk.len() - self.chunk_pos);
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
        if matches!(shape, TunnelAnswer::NotTaken | TunnelAnswer::Stray) {
            // No tunnel but by extended CONNECT, and none without one.
            crate::service::send_status(self, 501);
            return;
        }
        let opens_tunnel = shape == TunnelAnswer::Opens;
        let status = shape.status(head.status);
        self.status = status;
        let bodiless = has_no_body(status);
        let length = if bodiless || opens_tunnel {
            None
        } else {
            body.len()
        };
        let end = !opens_tunnel && (self.is_head() || bodiless || length == Some(0));
        self.length = length;
        let date = match head.date {
            Some(kept) => kept.to_vec(),
            None => self
                .ctx
                .date
                .borrow_mut()
                .get_at(self.ctx.clock.now())
                .to_vec(),
        };
        let mut digits = [0u8; 20];
        let length_field = self
            .length
            .map(|n| (&b"content-length"[..], decimal(n, &mut digits)));
        let given = head.all_fields().filter(|(n, _)| {
            !n.eq_ignore_ascii_case("content-length") && carried(n) && shape.carries(n)
        });
        if let Some(priority) = Priority::of_answer(head.all_fields()) {
            self.conn.borrow_mut().set_priority(self.id, priority);
        }
        let lowered = lowercase_fields(given);
        let mut status_digits = [0u8; 20];
        let status_field = (
            &b":status"[..],
            decimal(u64::from(status), &mut status_digits),
        );
        let mut fields = [
            status_field,
            (&b"server"[..], &b"pier"[..]),
            (&b"date"[..], &date[..]),
        ]
        .into_iter()
        .chain(length_field)
        .chain(lowered.iter().map(|(n, v)| (n.as_slice(), *v)));
        if self.queue_headers(&mut fields, end).is_err() {
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
        if self.status != 0 || !crate::http::status::is_interim(status) || status == 100 {
            return;
        }
        let lowered = lowercase_fields(fields.iter().copied());
        let mut digits = [0u8; 20];
        let status_field = (&b":status"[..], decimal(u64::from(status), &mut digits));
        let mut fields =
            std::iter::once(status_field).chain(lowered.iter().map(|(n, v)| (n.as_slice(), *v)));
        let _ = self.queue_headers(&mut fields, false);
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
        // Queued frames go out as the connection task writes.
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

/// The stream as a tunnel's byte stream (RFC 9220): the client's DATA as the
/// tunnel takes them (the connection reads the stream further as room
/// frees), its FIN as end of file, its reset as an error.
impl<'a> TunnelStream<'a> for H3Stream<'a> {
    fn poll_tunnel_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut c = self.conn.borrow_mut();
        let Some(slot) = c.requests.get_mut(&self.id) else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        if !slot.body.is_empty() {
            let n = slot.body.len().min(buf.remaining());
            buf.put_slice(&slot.body[..n]);
            slot.body.drain(..n);
            drop(c);
            self.wake.notify_one();
            return Poll::Ready(Ok(()));
        }
        if slot.reset {
            return Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()));
        }
        if slot.body_end {
            return Poll::Ready(Ok(()));
        }
        slot.wait(cx.waker());
        Poll::Pending
    }

    fn cancel_tunnel(&mut self) {
        // The tunnel's connection broke (RFC 9114 §4.4).
        self.reset(ErrorCode::ConnectError);
    }
}
