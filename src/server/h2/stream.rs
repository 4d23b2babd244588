//! One HTTP/2 stream as a [`Session`]: the request view over the head made
//! by `request.rs`, the request body read from the stream's DATA frames
//! (window released as the handler uses it, so the client's sending follows
//! the handler's reading), and the answer as a HEADERS frame whose body
//! `send.rs` writes within the client's flow-control windows.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use tokio::time::Sleep;

use super::{ConnFacts, ConnState};
use crate::http::status::has_no_body;
use crate::http::{Body, BodyReadError, RequestView, ResponseHead, Session, TlsFacts};
use crate::http1::parse::{Method, RequestHead};
use crate::worker::WorkerCtx;

/// Fields that describe a connection, not a message: never sent over HTTP/2
/// (RFC 9113 §8.2.2), whatever a handler or an upstream put in a head.
const CONNECTION_FIELDS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

/// The stream's sending half, shared with the watch for the client's
/// reset, which runs beside the handler; it lives on the stream's stack
/// frame, so a stream costs no allocation for it.
pub(super) struct StreamOut {
    pub(super) respond: SendResponse<Bytes>,
    pub(super) send: Option<SendStream<Bytes>>,
}

/// A pushed body's progress.
#[derive(Default)]
pub(super) struct PushH2 {
    pub(super) active: bool,
    pub(super) finished: bool,
    /// Counted, not sent: `HEAD`, or a status without a body.
    pub(super) drop: bool,
    pub(super) written: u64,
}

/// One request and its answer on an HTTP/2 connection.
pub struct H2Stream<'a, 'o> {
    pub(super) ctx: &'a WorkerCtx,
    pub(super) facts: Rc<ConnFacts>,
    conn: Rc<ConnState>,
    pub(super) peer: SocketAddr,
    pub(super) stream_id: u32,
    /// The head as HTTP/1 text, and its parse.
    pub(super) buf: Vec<u8>,
    pub(super) head: RequestHead,
    pub(super) recv: RecvStream,
    /// DATA received and not yet used: `chunk[chunk_pos..]`.
    chunk: Bytes,
    chunk_pos: usize,
    received: u64,
    pub(super) body_done: bool,
    pub(super) body_error: Option<BodyReadError>,
    /// The request's trailers, once the body ended with them.
    trailers: Option<Box<http::HeaderMap>>,
    continued: bool,
    body_stall: Option<Pin<Box<Sleep>>>,
    pub(super) out: &'o RefCell<StreamOut>,
    /// The answer's status, once given.
    pub(super) status: u16,
    /// The promised length of the answer's body, when one was sent.
    pub(super) length: Option<u64>,
    /// The body still to send after the head.
    pub(super) pending: Option<Body<'a>>,
    pub(super) push: PushH2,
    write_stall: Option<Pin<Box<Sleep>>>,
    /// Body bytes handed to h2 for this response.
    pub(super) sent: u64,
    pub(super) request_id: crate::http::RequestId,
    pub(super) upstream: Option<(SocketAddr, Duration)>,
    /// How a cache answered, for the access log.
    pub(super) cache: Option<&'static str>,
}

impl<'a, 'o> H2Stream<'a, 'o> {
    /// A stream whose head is parsed into `head` over `buf`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        ctx: &'a WorkerCtx,
        facts: Rc<ConnFacts>,
        conn: Rc<ConnState>,
        peer: SocketAddr,
        buf: Vec<u8>,
        head: RequestHead,
        recv: RecvStream,
        out: &'o RefCell<StreamOut>,
    ) -> Self {
        let stream_id = u32::from(out.borrow().respond.stream_id());
        let body_done = head.body == crate::http1::parse::BodyKind::None;
        let continued = !head.expect_continue;
        H2Stream {
            ctx,
            facts,
            conn,
            peer,
            stream_id,
            buf,
            head,
            recv,
            chunk: Bytes::new(),
            chunk_pos: 0,
            received: 0,
            body_done,
            body_error: None,
            trailers: None,
            continued,
            body_stall: None,
            out,
            status: 0,
            length: None,
            pending: None,
            push: PushH2::default(),
            write_stall: None,
            sent: 0,
            request_id: crate::http::RequestId::default(),
            upstream: None,
            cache: None,
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
                    let interim = http::Response::builder()
                        .status(100)
                        .body(())
                        .expect("a valid interim head");
                    let _ = self.out.borrow_mut().respond.send_informational(interim);
                }
            }
            match self.recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    self.body_stall = None;
                    self.received += data.len() as u64;
                    if self.received > self.ctx.config.http.max_body_bytes {
                        return Poll::Ready(Err(BodyReadError::TooLarge));
                    }
                    self.ctx.stats.bytes_in.add(data.len() as u64);
                    self.chunk = data;
                    self.chunk_pos = 0;
                }
                Poll::Ready(Some(Err(_))) => return Poll::Ready(Err(BodyReadError::Closed)),
                Poll::Ready(None) => {
                    // Trailers, if any, are what ended the data.
                    match self.recv.poll_trailers(cx) {
                        Poll::Ready(Ok(Some(map))) => self.trailers = Some(Box::new(map)),
                        Poll::Ready(Ok(None)) => {}
                        Poll::Ready(Err(_)) => return Poll::Ready(Err(BodyReadError::Closed)),
                        Poll::Pending => return Poll::Pending,
                    }
                    self.body_done = true;
                }
                Poll::Pending => {
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

    /// Capacity to send up to `want` bytes: `Ok(n)` with `0 < n <= want`.
    pub(super) fn poll_send_capacity(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
    ) -> Poll<std::io::Result<usize>> {
        let mut out = self.out.borrow_mut();
        let Some(send) = out.send.as_mut() else {
            return Poll::Ready(Err(std::io::Error::other("no response body is open")));
        };
        send.reserve_capacity(want);
        loop {
            let cap = send.capacity();
            if cap > 0 {
                drop(out);
                self.write_stall = None;
                return Poll::Ready(Ok(cap.min(want)));
            }
            match send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(std::io::Error::other(e))),
                Poll::Ready(None) => {
                    return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
                }
                Poll::Pending => {
                    drop(out);
                    return self.poll_write_stall(cx).map(Err);
                }
            }
        }
    }

    /// Hands `data` (within the capacity just granted) to h2.
    pub(super) fn send_data(&mut self, data: Bytes, end: bool) -> std::io::Result<()> {
        let n = data.len() as u64;
        let mut out = self.out.borrow_mut();
        let send = out
            .send
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no response body is open"))?;
        send.send_data(data, end).map_err(std::io::Error::other)?;
        self.sent += n;
        self.ctx.stats.bytes_out.add(n);
        Ok(())
    }

    /// Ends the response body, with trailers when there are any.
    pub(super) fn end_body(&mut self, trailers: &[(&str, &[u8])]) -> std::io::Result<()> {
        if trailers.is_empty() {
            return self.send_data(Bytes::new(), true);
        }
        let mut map = http::HeaderMap::new();
        for (name, value) in trailers {
            if let Some((n, v)) = h2_field(name, value) {
                map.append(n, v);
            }
        }
        let mut out = self.out.borrow_mut();
        let send = out
            .send
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no response body is open"))?;
        send.send_trailers(map).map_err(std::io::Error::other)
    }

    /// Ends the stream with RST_STREAM: a body that cannot be sent whole must
    /// not look whole.
    pub(super) fn reset(&mut self, reason: h2::Reason) {
        let mut out = self.out.borrow_mut();
        match out.send.as_mut() {
            Some(s) => s.send_reset(reason),
            None => out.respond.send_reset(reason),
        }
    }
}

/// A field as h2 takes it: the name lowercased; `None` for a field HTTP/2
/// does not carry (connection-specific) or that is not valid.
fn h2_field(name: &str, value: &[u8]) -> Option<(http::HeaderName, http::HeaderValue)> {
    if CONNECTION_FIELDS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
    {
        return None;
    }
    let name = http::HeaderName::from_bytes(name.as_bytes()).ok()?;
    let value = http::HeaderValue::from_bytes(value).ok()?;
    Some((name, value))
}

impl<'a> Session<'a> for H2Stream<'a, '_> {
    fn request(&self) -> RequestView<'_> {
        let tls = self.facts.secure.then(|| TlsFacts {
            version: self.facts.version,
            cipher: self.facts.cipher,
            sni: self.facts.sni.as_deref(),
            client_subject: self.facts.client_subject.as_deref(),
        });
        let view = RequestView::http1(&self.head, &self.buf, self.peer, tls);
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
        let _ = self.recv.flow_control().release_capacity(n);
    }

    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        self.trailers.as_deref().map_or_else(Vec::new, |map| {
            map.iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes()))
                .collect()
        })
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'a>) {
        if self.status != 0 {
            return;
        }
        let status = if (200..=999).contains(&head.status) {
            head.status
        } else {
            500
        };
        self.status = status;
        let bodiless = has_no_body(status);
        let tunnel = matches!(body, Body::Tunnel(_));
        let length = if bodiless || tunnel { None } else { body.len() };
        let mut response = http::Response::new(());
        *response.status_mut() =
            http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        {
            let headers = response.headers_mut();
            let reuse = &self.conn.reuse;
            headers.insert(http::header::SERVER, http::HeaderValue::from_static("pier"));
            if let Some(v) = reuse.date(self.ctx) {
                headers.insert(http::header::DATE, v);
            }
            if let Some(n) = length {
                headers.insert(http::header::CONTENT_LENGTH, reuse.length(n));
            }
            for (name, value) in head.all_fields() {
                if name.eq_ignore_ascii_case("content-length") {
                    continue;
                }
                if let Some((n, v)) = h2_field(name, value) {
                    headers.append(n, v);
                }
            }
        }
        let drop_body = self.is_head() || bodiless || tunnel;
        let end = drop_body || length == Some(0);
        self.length = length;
        let sent = {
            let mut out = self.out.borrow_mut();
            let r = out.respond.send_response(response, end);
            r.map(|s| out.send = Some(s))
        };
        if sent.is_err() {
            return;
        }
        if tunnel {
            // No upgrade over HTTP/2 (the Upgrade field is refused): end here.
            self.reset(h2::Reason::INTERNAL_ERROR);
            return;
        }
        if let Body::Push(_) = body {
            self.push = PushH2 {
                active: true,
                finished: false,
                drop: drop_body,
                written: 0,
            };
            self.push.drop = end;
            return;
        }
        if !end {
            self.pending = Some(body);
        }
    }

    fn responded(&self) -> bool {
        self.status != 0
    }

    fn request_id(&self) -> &crate::http::RequestId {
        &self.request_id
    }

    fn poll_write_body(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if !self.push.active || self.push.finished {
            return Poll::Ready(Err(std::io::Error::other("no pushed body is being sent")));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.push.drop {
            self.push.written += data.len() as u64;
            return Poll::Ready(Ok(data.len()));
        }
        if let Some(len) = self.length {
            if self.push.written + data.len() as u64 > len {
                return Poll::Ready(Err(std::io::Error::other(
                    "pushed body longer than its length",
                )));
            }
        }
        let n = std::task::ready!(self.poll_send_capacity(cx, data.len()))?;
        self.send_pieces(Bytes::copy_from_slice(&data[..n]), false)?;
        self.push.written += n as u64;
        Poll::Ready(Ok(n))
    }

    fn poll_flush_body(&mut self, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Data handed to h2 goes out as the connection task writes; what it
        // buffers is bounded by the capacity it granted.
        Poll::Ready(Ok(()))
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        if !self.push.active || self.push.finished {
            return;
        }
        if self.push.drop {
            self.push.finished = true;
            return;
        }
        if self.length.is_some_and(|n| n != self.push.written) {
            return;
        }
        if self.end_body(trailers).is_ok() {
            self.push.finished = true;
        }
    }

    fn note_upstream(&mut self, addr: SocketAddr, elapsed: Duration) {
        self.upstream = Some((addr, elapsed));
    }

    fn note_cache(&mut self, outcome: &'static str) {
        self.cache = Some(outcome);
    }
}
