//! One HTTP/3 request stream as a [`Session`]: the request view over the
//! head made from its QPACK-decoded fields, the request body taken from the
//! connection's slot as QUIC delivers it (the stream is read further only
//! as the handler uses it), and the answer framed as HEADERS and DATA into
//! the slot, which the connection task writes within QUIC's flow control.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll};

use quinn_proto::StreamId;
use tokio::sync::Notify;

use super::conn::{H3Conn, OUT_HIGH};
use super::ConnFacts;
use crate::http::priority::Priority;
use crate::http::status::has_no_body;
use crate::http::{
    poll_body_once, Body, BodyReadError, RequestRecord, RequestView, ResponseHead, Session,
    TlsFacts,
};
use crate::http1::parse::{Method, RequestHead};
use crate::http3::frame;
use crate::http3::ErrorCode;
use crate::server::body_send::{finish_pushed, poll_write_pushed, StreamSink};
use crate::server::response_fields::{carried, decimal, lowercase_fields};
use crate::server::stream_session::{stream_view, PushedBody, ReceivedBody, StreamAnswer};
use crate::server::stream_tunnel::{TunnelAnswer, TunnelStream};
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
    /// The request body as QUIC delivered it, not yet used.
    body: ReceivedBody,
    /// The answer's progress after its head.
    pub(super) answer: StreamAnswer,
    /// The body still to send after the head.
    pending: Option<Body<'a>>,
    /// The request's record: its identifier, trace, status and what the
    /// access log notes.
    pub(super) record: RequestRecord,
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
        let body = ReceivedBody::new(head.body == crate::http1::parse::BodyKind::None);
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
            body,
            early_data: false,
            answer: StreamAnswer::default(),
            pending: None,
            record: RequestRecord::default(),
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

    fn poll_body_inner(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        loop {
            if let Some(n) = self.body.ready() {
                return Poll::Ready(Ok(n));
            }
            let mut c = self.conn.borrow_mut();
            let Some(slot) = c.requests.get_mut(&self.id) else {
                return Poll::Ready(Err(BodyReadError::Closed));
            };
            if !slot.body.is_empty() {
                let took = self
                    .body
                    .take(&mut slot.body, self.ctx.config.http.max_body_bytes);
                drop(c);
                // Room in the slot: the stream is read further.
                self.wake.notify_one();
                if let Err(e) = took {
                    return Poll::Ready(Err(e));
                }
                continue;
            }
            if slot.reset {
                return Poll::Ready(Err(BodyReadError::Closed));
            }
            if slot.body_end && !slot.trailers_blocked {
                self.body.end(slot.trailers.take());
                continue;
            }
            slot.wait(cx.waker());
            drop(c);
            let limit = self.ctx.config.http.body_read_timeout;
            if self.body.poll_stall(cx, limit).is_ready() {
                return Poll::Ready(Err(BodyReadError::Timeout));
            }
            return Poll::Pending;
        }
    }
}

impl<'a> StreamSink<'a> for H3Stream<'a> {
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
            self.answer.no_stall();
            return Poll::Ready(Ok(room.min(want)));
        }
        let limit = self.ctx.config.http.write_timeout;
        self.answer.poll_write_stall(cx, limit).map(Err)
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
            self.answer.sent += data.len() as u64;
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
        let view = RequestView::http1(&self.head, &self.buf, self.peer, Some(tls))
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
        self.body.consume(n);
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
        if matches!(shape, TunnelAnswer::NotTaken | TunnelAnswer::Stray) {
            // No tunnel but by extended CONNECT, and none without one.
            crate::service::send_status(self, 501);
            return;
        }
        let opens_tunnel = shape == TunnelAnswer::Opens;
        let status = shape.status(head.status);
        self.record.status = status;
        let bodiless = has_no_body(status);
        let length = if bodiless || opens_tunnel {
            None
        } else {
            body.len()
        };
        let end = !opens_tunnel && (self.is_head() || bodiless || length == Some(0));
        self.answer.length = length;
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
            .answer
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
            self.answer.push = PushedBody::started(end);
            return;
        }
        if !end {
            self.pending = Some(body);
        }
    }

    fn responded(&self) -> bool {
        self.record.status != 0
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        if self.record.status != 0 || !crate::http::status::is_interim(status) || status == 100 {
            return;
        }
        let lowered = lowercase_fields(fields.iter().copied());
        let mut digits = [0u8; 20];
        let status_field = (&b":status"[..], decimal(u64::from(status), &mut digits));
        let mut fields =
            std::iter::once(status_field).chain(lowered.iter().map(|(n, v)| (n.as_slice(), *v)));
        let _ = self.queue_headers(&mut fields, false);
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
        // Queued frames go out as the connection task writes.
        Poll::Ready(Ok(()))
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        finish_pushed(self, trailers)
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
