//! The one IO driver for a downstream connection, plain or TLS: read bytes, run the
//! sans-IO parser, route, let the handler encode into the output buffer, write.
//!
//! Pipelined requests that arrive in one read are answered with one write. An idle
//! keep-alive connection hands its buffers back to the worker's pool, so it costs
//! little more than its socket.

use std::fs::File;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::{timeout, timeout_at, Instant};
use tracing::debug;

use crate::handler::static_files::{Reply, StaticRequest};
use crate::handler::Handler;
use crate::http1::body::BodyDecoder;
use crate::http1::parse::{parse_request, BodyKind, Method, Parsed, Version};
use crate::http1::write::{self, BodyFraming};
use crate::observe::access_log::{Entry, TlsFields, WorkerLog};
use crate::observe::metrics::HandlerKind;
use crate::observe::metrics::ROUTE_NONE;
use crate::tls::stream::ReadAhead;
use crate::worker::{ConnBuffers, WorkerCtx, READ_BUF};

/// Files up to this size are copied into the output buffer (one write with the head,
/// and pipelined responses coalesce); larger ones go by sendfile or bounded chunks.
const INLINE_FILE_MAX: u64 = 64 * 1024;
/// Fixed (`respond`) bodies up to this size are copied into the output buffer;
/// larger ones are written straight from the configuration in bounded chunks, so
/// clients that do not read cannot each pin a copy.
const INLINE_BODY_MAX: usize = 64 * 1024;
/// Output is flushed once this much is pending, bounding memory under pipelining floods.
pub(crate) const WRITE_HIGH_WATER: usize = 64 * 1024;
/// Chunk of a large file per send, so one download cannot monopolise the worker.
const FILE_CHUNK: u64 = 256 * 1024;
/// Lingering close: how long and how much to drain after an error response, so the
/// client reads the response instead of a reset.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 * 1024;

/// A downstream transport: what the driver needs from plain TCP or TLS.
#[allow(async_fn_in_trait)]
pub trait Downstream {
    /// Whether the transport is TLS (for `X-Forwarded-Proto`).
    const SECURE: bool;
    /// The stream itself, for relaying raw bytes after an upgrade.
    type Io: AsyncRead + AsyncWrite + Unpin;
    /// Borrows the stream.
    fn io_mut(&mut self) -> &mut Self::Io;
    /// Waits until a read would make progress, without holding a buffer.
    async fn readable(&mut self) -> io::Result<()>;
    /// Appends what is available to `buf`; `Ok(0)` at end of stream.
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
    /// Writes all of `data`.
    async fn write_all(&mut self, data: &[u8]) -> io::Result<()>;
    /// Sends `len` bytes of `file` from `offset`.
    async fn send_file(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
        write_timeout: Duration,
    ) -> io::Result<()>;
    /// Closes the sending side (FIN, or close_notify then FIN).
    async fn shutdown(&mut self);

    /// Subject (RFC 4514) of the verified client certificate, if one was presented.
    fn peer_subject(&self) -> Option<&str> {
        None
    }

    /// TLS version, cipher and SNI for the access log; `None` on plain TCP.
    fn tls_fields(&self) -> Option<TlsFields<'_>> {
        None
    }
}

/// Plain TCP.
pub struct Plain {
    stream: TcpStream,
}

impl Plain {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream) -> Self {
        Plain { stream }
    }
}

impl Downstream for Plain {
    const SECURE: bool = false;
    type Io = TcpStream;

    fn io_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    async fn readable(&mut self) -> io::Result<()> {
        self.stream.readable().await
    }

    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            let room = buf.capacity() - buf.len();
            match self.stream.try_read_buf(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.readable().await?,
                Ok(n) if n > 0 && n < room => {
                    // A short read drained the socket (as nginx infers on edge-triggered
                    // epoll): forget the readiness so the next wait needs a new edge
                    // instead of costing a read that returns EAGAIN.
                    let _ = self.stream.try_io(Interest::READABLE, || {
                        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
                    });
                    return Ok(n);
                }
                r => return r,
            }
        }
    }

    async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.stream.try_write(data) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stream.writable().await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn send_file(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
        write_timeout: Duration,
    ) -> io::Result<()> {
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let want = (end - pos).min(FILE_CHUNK) as usize;
            let sent = self.stream.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(&self.stream, file, Some(&mut pos), want)
                    .map_err(io::Error::from)
            });
            match sent {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ))
                }
                Ok(_) => tokio::task::yield_now().await,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    timeout(write_timeout, self.stream.writable())
                        .await
                        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timeout"))??;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn shutdown(&mut self) {
        let _ = self.stream.shutdown().await;
    }
}

/// TLS over TCP (rustls), reading ahead several records per `read`.
pub struct Tls {
    stream: tokio_rustls::server::TlsStream<ReadAhead>,
    peer_subject: Option<Box<str>>,
}

impl Tls {
    /// Wraps a stream whose handshake is complete.
    pub fn new(mut stream: tokio_rustls::server::TlsStream<ReadAhead>) -> Self {
        // A whole file chunk is encrypted at once and leaves in one `writev` of
        // 16 records; the buffer holds only what the socket has not taken.
        stream
            .get_mut()
            .1
            .set_buffer_limit(Some(FILE_CHUNK as usize));
        let peer_subject = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(crate::tls::subject_of)
            .map(String::into_boxed_str);
        Tls {
            stream,
            peer_subject,
        }
    }
}

impl Downstream for Tls {
    const SECURE: bool = true;
    type Io = tokio_rustls::server::TlsStream<ReadAhead>;

    fn io_mut(&mut self) -> &mut Self::Io {
        &mut self.stream
    }

    async fn readable(&mut self) -> io::Result<()> {
        let (io, session) = self.stream.get_mut();
        if session.wants_read() && io.buffered() == 0 {
            // Idle: the read-ahead buffer goes while nothing is in flight.
            io.release();
            io.tcp().readable().await?;
        }
        Ok(())
    }

    async fn read_into(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.stream.read_buf(buf).await
    }

    async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.stream.write_all(data).await?;
        self.stream.flush().await
    }

    async fn send_file(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
        write_timeout: Duration,
    ) -> io::Result<()> {
        let mut chunk = vec![0u8; FILE_CHUNK.min(len) as usize];
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let want = (end - pos).min(chunk.len() as u64) as usize;
            let n = file.read_at(&mut chunk[..want], pos)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                ));
            }
            timeout(write_timeout, self.write_all(&chunk[..n]))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "write timeout"))??;
            pos += n as u64;
        }
        Ok(())
    }

    async fn shutdown(&mut self) {
        let _ = self.stream.shutdown().await;
    }

    fn peer_subject(&self) -> Option<&str> {
        self.peer_subject.as_deref()
    }

    fn tls_fields(&self) -> Option<TlsFields<'_>> {
        let session = self.stream.get_ref().1;
        Some(TlsFields {
            version: session
                .protocol_version()
                .and_then(crate::tls::names::protocol_name),
            cipher: session
                .negotiated_cipher_suite()
                .and_then(|c| crate::tls::names::cipher_name(c.suite())),
            sni: session.server_name(),
        })
    }
}

/// Runs an IO future under a time limit, arming the timer only if the first poll
/// does not finish it: most writes complete at once, and a timer costs a clock read
/// and a wheel insertion.
pub(crate) async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let mut fut = std::pin::pin!(fut);
    if let Poll::Ready(r) = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
        return r;
    }
    match timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "write timeout")),
    }
}

/// Why a connection ends.
pub(crate) enum Exit {
    /// Nothing more to say: end of stream, idle timeout, shutdown, or `Connection: close` answered.
    Done,
    /// Answer with this status and close, draining the input for a moment.
    Reject(u16),
    /// The socket failed; nothing can be sent.
    Broken,
}

/// One downstream connection's state; the proxy phases drive it too.
pub(crate) struct Conn<'a, D> {
    pub(crate) io: D,
    pub(crate) ctx: &'a WorkerCtx,
    /// Client address (after PROXY protocol, when the listener accepts it).
    pub(crate) peer: SocketAddr,
    pub(crate) bufs: Option<ConnBuffers>,
    /// Start of unconsumed input in `bufs.read`.
    pub(crate) rpos: usize,
    requests: u64,
    /// Bytes written downstream so far, so a log line can tell one response's size.
    pub(crate) sent: u64,
    /// Status of the response being answered, for the access log.
    pub(crate) status: u16,
    /// Upstream server and time to its response head, set by the proxy for the log.
    pub(crate) upstream: Option<(SocketAddr, Duration)>,
    /// Route of the request being answered (`Route::index`), for the metrics.
    route_slot: usize,
    /// Set when the connection ends with input left unread (a request body the
    /// answer made moot): read and drop it for a moment after the last write,
    /// so the client sees the answer rather than a reset.
    pub(crate) linger_on_close: bool,
    /// The request being logged, copied out of the read buffer, which the proxy
    /// consumes; only allocated when the access log is on.
    logged: Option<Box<LoggedRequest>>,
}

/// What the access log needs of a request, kept across the awaits that answer it.
#[derive(Default)]
struct LoggedRequest {
    /// A request is between `begin_log` and its line.
    active: bool,
    started: Option<Instant>,
    /// `sent` plus pending output when the request began.
    out_mark: u64,
    /// Output offset (as `out_mark`) up to which response heads were looked for,
    /// and whether the final (non-1xx) head ended there: the body starts there.
    head_end: u64,
    head_done: bool,
    method: Vec<u8>,
    target: Vec<u8>,
    protocol: &'static str,
    /// Reused across the connection's requests, so logging does not allocate per line.
    referer: Vec<u8>,
    user_agent: Vec<u8>,
    has_referer: bool,
    has_user_agent: bool,
}

/// Finds where the response head of the logged request ends in the output not
/// yet sent (`pending`, which starts at offset `sent`), so the log can count body
/// bytes only. Interim 1xx heads (100 Continue) are skipped; a 101 is final, the
/// tunnelled bytes after it being its body. Looked at before each flush, while
/// the head is still in the buffer; a head is a few hundred bytes to scan.
fn note_head(l: &mut LoggedRequest, sent: u64, pending: &[u8]) {
    while !l.head_done {
        let Some(from) = l.head_end.checked_sub(sent) else {
            return;
        };
        let Some(rest) = pending.get(from as usize..) else {
            return;
        };
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            return;
        };
        l.head_end += end as u64 + 4;
        let interim = rest.get(9) == Some(&b'1') && rest.get(9..12) != Some(b"101");
        l.head_done = !interim;
    }
}

/// Serves one downstream connection until it closes.
pub async fn serve<D: Downstream>(io: D, ctx: &WorkerCtx, peer: SocketAddr) {
    let mut conn = Conn {
        io,
        ctx,
        peer,
        bufs: None,
        rpos: 0,
        requests: 0,
        sent: 0,
        status: 0,
        upstream: None,
        route_slot: ROUTE_NONE,
        linger_on_close: false,
        logged: None,
    };
    let exit = conn.run().await;
    match exit {
        Exit::Done => {
            let flushed = conn.flush().await.is_ok();
            conn.io.shutdown().await;
            if flushed && conn.linger_on_close {
                conn.linger().await;
            }
        }
        Exit::Reject(status) => {
            debug!(peer = %conn.peer, status, "rejecting request");
            ctx.stats.request(HandlerKind::Error, status);
            if ctx.access_log.is_some() && !conn.logged.as_ref().is_some_and(|l| l.active) {
                // Refused before it was routed: a line without a request.
                conn.begin_log(false);
            }
            let b = conn.bufs.get_or_insert_with(|| ctx.take_buffers());
            write::write_error(&mut b.write, status, ctx.date.borrow_mut().get());
            let flushed = conn.flush().await.is_ok();
            if let Some(log) = &ctx.access_log {
                conn.status = status;
                conn.end_log(log);
            }
            if flushed {
                conn.io.shutdown().await;
                conn.linger().await;
            }
        }
        Exit::Broken => {}
    }
    if let Some(b) = conn.bufs.take() {
        ctx.give_buffers(b);
    }
}

impl<D: Downstream> Conn<'_, D> {
    fn unread(&self) -> usize {
        self.bufs.as_ref().map_or(0, |b| b.read.len() - self.rpos)
    }

    /// Writes out everything pending in the output buffer.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        let Some(b) = self.bufs.as_mut() else {
            return Ok(());
        };
        if b.write.is_empty() {
            return Ok(());
        }
        if let Some(l) = self.logged.as_deref_mut().filter(|l| l.active) {
            note_head(l, self.sent, &b.write);
        }
        let r = within(
            self.ctx.config.http.write_timeout,
            self.io.write_all(&b.write),
        )
        .await;
        if r.is_ok() {
            self.ctx.stats.bytes_out.add(b.write.len() as u64);
            self.sent += b.write.len() as u64;
        }
        b.write.clear();
        r
    }

    /// Reads more input, keeping unconsumed bytes and leaving room for at least a few KiB.
    async fn read_more(&mut self, deadline: Instant) -> Result<usize, Exit> {
        let b = self.bufs.as_mut().expect("buffers held while reading");
        if self.rpos > 0 {
            b.read.drain(..self.rpos);
            self.rpos = 0;
        }
        if b.read.capacity() - b.read.len() < 2048 {
            b.read.reserve(READ_BUF);
        }
        match timeout_at(deadline, self.io.read_into(&mut b.read)).await {
            Ok(Ok(n)) => {
                self.ctx.stats.bytes_in.add(n as u64);
                Ok(n)
            }
            Ok(Err(_)) => Err(Exit::Broken),
            Err(_) => Err(Exit::Reject(408)),
        }
    }

    async fn run(&mut self) -> Exit {
        let http = &self.ctx.config.http;
        let accepted = Instant::now();
        loop {
            // Idle between requests: give the buffers back and wait for bytes.
            if self.unread() == 0 {
                if self.flush().await.is_err() {
                    return Exit::Broken;
                }
                if let Some(b) = self.bufs.take() {
                    self.ctx.give_buffers(b);
                }
                self.rpos = 0;
                // A drain closes connections between requests, not before the
                // first: its client has reused nothing and would not retry. That
                // first request waits at most `header_read_timeout`.
                if self.requests > 0 && self.ctx.draining.get() {
                    return Exit::Done;
                }
                let idle = if self.requests == 0 {
                    http.header_read_timeout
                } else {
                    http.keepalive_timeout
                };
                tokio::select! {
                    biased;
                    r = timeout(idle, self.io.readable()) => match r {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return Exit::Broken,
                        Err(_) => return Exit::Done,
                    },
                    _ = self.ctx.draining(), if self.requests > 0 => return Exit::Done,
                }
                self.bufs = Some(self.ctx.take_buffers());
            }
            // The head deadline starts with the connection for its first request, and
            // with the first incomplete read for later ones; a head that is already
            // buffered whole needs no clock read at all.
            let mut head_deadline =
                (self.requests == 0).then(|| accepted + http.header_read_timeout);
            // Read until a whole head is buffered.
            loop {
                let b = self.bufs.as_mut().expect("buffers held while parsing");
                match parse_request(&b.read[self.rpos..], &http.limits, &mut b.head) {
                    Ok(Parsed::Complete) => break,
                    Ok(Parsed::Partial) => {
                        if self.flush().await.is_err() {
                            return Exit::Broken;
                        }
                        let had = self.unread();
                        let deadline = *head_deadline
                            .get_or_insert_with(|| Instant::now() + http.header_read_timeout);
                        match self.read_more(deadline).await {
                            Ok(0) => return Exit::Done,
                            Ok(_) => {}
                            Err(Exit::Reject(408)) if had == 0 => return Exit::Done,
                            Err(e) => return e,
                        }
                    }
                    Err(e) => return Exit::Reject(e.status()),
                }
            }

            let keep_alive = match self.handle().await {
                Ok(k) => k,
                Err(e) => return e,
            };
            self.requests += 1;
            self.ctx
                .counters
                .requests
                .set(self.ctx.counters.requests.get() + 1);
            if !keep_alive {
                return Exit::Done;
            }
            if self
                .bufs
                .as_ref()
                .is_some_and(|b| b.write.len() >= WRITE_HIGH_WATER)
                && self.flush().await.is_err()
            {
                return Exit::Broken;
            }
        }
    }

    /// Answers the parsed request, logging it when the access log is on.
    async fn handle(&mut self) -> Result<bool, Exit> {
        let ctx = self.ctx;
        let started = Instant::now();
        self.route_slot = ROUTE_NONE;
        let Some(log) = &ctx.access_log else {
            let r = self.answer().await;
            if self.status != 0 {
                ctx.stats
                    .request_duration(self.route_slot, self.status, started.elapsed());
            }
            return r;
        };
        self.begin_log(true);
        let r = self.answer().await;
        if self.status != 0 {
            ctx.stats
                .request_duration(self.route_slot, self.status, started.elapsed());
        }
        // A refused request is logged once its error response is written.
        if !matches!(r, Err(Exit::Reject(_))) && self.status != 0 {
            self.end_log(log);
        }
        r
    }

    /// Starts a log line: copies what the line needs out of the read buffer
    /// (`parsed`: a request head is there) and marks the time and output so far.
    fn begin_log(&mut self, parsed: bool) {
        let l = self.logged.get_or_insert_with(Box::default);
        l.active = true;
        l.started = Some(Instant::now());
        l.method.clear();
        l.target.clear();
        l.referer.clear();
        l.user_agent.clear();
        l.has_referer = false;
        l.has_user_agent = false;
        self.status = 0;
        self.upstream = None;
        l.out_mark = self.sent + self.bufs.as_ref().map_or(0, |b| b.write.len() as u64);
        l.head_end = l.out_mark;
        l.head_done = false;
        let Some(b) = self.bufs.as_ref().filter(|_| parsed) else {
            return;
        };
        let req = &b.read[self.rpos..self.rpos + b.head.head_len];
        l.method.extend_from_slice(b.head.method_token(req));
        l.target.extend_from_slice(b.head.target(req));
        l.protocol = match b.head.version {
            Version::Http10 => "HTTP/1.0",
            _ => "HTTP/1.1",
        };
        if let Some(v) = b.head.header(req, "referer") {
            l.referer.extend_from_slice(v);
            l.has_referer = true;
        }
        if let Some(v) = b.head.header(req, "user-agent") {
            l.user_agent.extend_from_slice(v);
            l.has_user_agent = true;
        }
    }

    /// Formats the line of the request begun by `begin_log`.
    fn end_log(&mut self, log: &WorkerLog) {
        let Some(l) = self.logged.as_mut() else {
            return;
        };
        if !l.active {
            return;
        }
        l.active = false;
        note_head(
            l,
            self.sent,
            self.bufs.as_ref().map_or(&[], |b| &b.write[..]),
        );
        let pending = self.bufs.as_ref().map_or(0, |b| b.write.len() as u64);
        log.record(&Entry {
            client: self.peer,
            method: &l.method,
            target: &l.target,
            protocol: l.protocol,
            status: self.status,
            body_bytes: (self.sent + pending).saturating_sub(l.head_end),
            duration: l.started.map_or(Duration::ZERO, |t| t.elapsed()),
            referer: l.has_referer.then_some(&l.referer[..]),
            user_agent: l.has_user_agent.then_some(&l.user_agent[..]),
            tls: self.io.tls_fields(),
            upstream: self.upstream.map(|u| u.0),
            upstream_time: self.upstream.map(|u| u.1),
        });
    }

    /// Routes the parsed request and answers it; returns whether the connection
    /// stays open. Proxied requests stream their body upstream; the others have
    /// it consumed and dropped (their handlers never need it).
    async fn answer(&mut self) -> Result<bool, Exit> {
        let ctx = self.ctx;
        let http = &ctx.config.http;
        let b = self.bufs.as_ref().expect("buffers held while handling");
        let (body, expect_continue, head_len) =
            (b.head.body, b.head.expect_continue, b.head.head_len);
        let req = &b.read[self.rpos..self.rpos + head_len];
        // ACME HTTP-01 validations go ahead of every route.
        let challenge = match b.head.path(req) {
            p if p.starts_with(crate::tls::acme::http01::CHALLENGE_PREFIX) => {
                crate::tls::acme::http01::answer(p).await.map(|body| {
                    Handler::Respond(crate::handler::respond::Respond::new(
                        200,
                        body,
                        &[("Content-Type".into(), "text/plain".into())],
                    ))
                })
            }
            _ => None,
        };
        let b = self.bufs.as_ref().expect("buffers held while handling");
        let req = &b.read[self.rpos..self.rpos + head_len];
        let route = match challenge {
            Some(_) => None,
            None => ctx
                .config
                .routes
                .find_route(b.head.host_name(req), b.head.path(req)),
        };
        self.route_slot = route.map_or(ROUTE_NONE, |r| r.index);
        let handler = match &challenge {
            Some(h) => Some(h),
            None => route.map(|r| &r.handler),
        };
        if let Some(Handler::Proxy(route)) = handler {
            // Boxed: the proxy's state machine is large, and inlining it would grow
            // every connection's future, static and fixed responses included.
            return Box::pin(crate::handler::proxy::serve(self, route)).await;
        }
        match body {
            BodyKind::None => {}
            BodyKind::Length(n) if n > http.max_body_bytes => return Err(Exit::Reject(413)),
            _ => self.discard_body(body, expect_continue, head_len).await?,
        }

        let b = self.bufs.as_mut().expect("buffers held while handling");
        let (keep_alive, rest, status) = encode_response(ctx, b, self.rpos, head_len, handler);
        self.status = status;
        self.rpos += head_len;
        match rest {
            None => {}
            Some(BodyRest::File((file, offset, len))) => {
                let write_timeout = http.write_timeout;
                if self.flush().await.is_err() {
                    return Err(Exit::Broken);
                }
                if let Err(e) = self.io.send_file(&file, offset, len, write_timeout).await {
                    debug!(peer = %self.peer, error = %e, "file send failed");
                    return Err(Exit::Broken);
                }
                ctx.stats.bytes_out.add(len);
                self.sent += len;
            }
            Some(BodyRest::Bytes(body)) => {
                if self.flush().await.is_err() {
                    return Err(Exit::Broken);
                }
                // Chunk by chunk, each under the write timeout: a stall is what
                // ends the connection, not a slow but steady reader.
                for chunk in body.chunks(FILE_CHUNK as usize) {
                    if let Err(e) = within(http.write_timeout, self.io.write_all(chunk)).await {
                        debug!(peer = %self.peer, error = %e, "body send failed");
                        return Err(Exit::Broken);
                    }
                    ctx.stats.bytes_out.add(chunk.len() as u64);
                    self.sent += chunk.len() as u64;
                }
            }
        }
        Ok(keep_alive)
    }

    /// Reads and drops a request body, keeping the head in place in front of it.
    async fn discard_body(
        &mut self,
        kind: BodyKind,
        expect_continue: bool,
        head_len: usize,
    ) -> Result<(), Exit> {
        let http = &self.ctx.config.http;
        let body_start = self.rpos + head_len;
        // The limit goes into the decoder so a chunk whose size line alone exceeds
        // it is refused at once, not after the client has trickled its data.
        let mut decoder = BodyDecoder::new(kind).with_max_body(http.max_body_bytes);
        let mut continued = !expect_continue;
        loop {
            let b = self
                .bufs
                .as_mut()
                .expect("buffers held while reading a body");
            let step = decoder
                .decode(&b.read[body_start..])
                .map_err(|e| Exit::Reject(e.status()))?;
            let (consumed, done) = (step.consumed, step.done);
            b.read.drain(body_start..body_start + consumed);
            if done {
                return Ok(());
            }
            if consumed > 0 && b.read.len() > body_start {
                continue;
            }
            if !continued {
                continued = true;
                b.write.extend_from_slice(write::CONTINUE);
                if self.flush().await.is_err() {
                    return Err(Exit::Broken);
                }
            }
            let b = self
                .bufs
                .as_mut()
                .expect("buffers held while reading a body");
            if b.read.capacity() - b.read.len() < 2048 {
                b.read.reserve(READ_BUF);
            }
            match timeout(http.body_read_timeout, self.io.read_into(&mut b.read)).await {
                Ok(Ok(0)) => return Err(Exit::Done),
                Ok(Ok(n)) => self.ctx.stats.bytes_in.add(n as u64),
                Ok(Err(_)) => return Err(Exit::Broken),
                Err(_) => return Err(Exit::Reject(408)),
            }
        }
    }

    /// After an error response: stop sending, then read and drop input for a
    /// moment so the peer sees the response rather than a reset.
    async fn linger(&mut self) {
        let Some(b) = self.bufs.as_mut() else { return };
        let deadline = Instant::now() + LINGER_TIME;
        let mut seen = 0;
        while seen < LINGER_BYTES {
            b.read.clear();
            b.read.reserve(READ_BUF);
            match timeout_at(deadline, self.io.read_into(&mut b.read)).await {
                Ok(Ok(n)) if n > 0 => seen += n,
                _ => break,
            }
        }
        b.read.clear();
    }
}

/// A file region still to send after the head: (file, offset, length).
type FileRegion = (Rc<File>, u64, u64);

/// A large body still to send after the head, which is in the output buffer.
enum BodyRest<'a> {
    /// Part of a file, by sendfile (or read in chunks under TLS).
    File(FileRegion),
    /// A fixed body held by the configuration.
    Bytes(&'a [u8]),
}

/// Encodes the response of a routed (non-proxy) request into the output buffer.
/// Returns whether the connection stays open, a large body still to send, and
/// the status.
fn encode_response<'a>(
    ctx: &WorkerCtx,
    b: &mut ConnBuffers,
    rpos: usize,
    head_len: usize,
    handler: Option<&'a Handler>,
) -> (bool, Option<BodyRest<'a>>, u16) {
    let req = &b.read[rpos..rpos + head_len];
    let head = &b.head;
    let keep_alive = head.keep_alive && !ctx.draining.get();
    let conn_header = if !keep_alive {
        write::ConnectionHeader::Close
    } else if head.version == Version::Http10 {
        write::ConnectionHeader::KeepAlive
    } else {
        write::ConnectionHeader::Omit
    };
    let is_head = head.method == Method::Head;
    let out = &mut b.write;
    let mut date_cache = ctx.date.borrow_mut();
    let date = date_cache.get();
    let mut rest = None;
    let status = match handler {
        None => {
            ctx.stats.request(HandlerKind::NoRoute, 404);
            write::write_status_body(out, 404, date, conn_header, std::iter::empty(), is_head);
            404
        }
        Some(Handler::Respond(r)) => {
            ctx.stats.request(HandlerKind::Respond, r.status());
            write::write_head_block(
                out,
                r.status(),
                date,
                BodyFraming::Length(r.body().len() as u64),
                conn_header,
                r.header_block(),
            );
            if !is_head && r.body().len() > INLINE_BODY_MAX {
                rest = Some(BodyRest::Bytes(r.body()));
            } else if !is_head {
                out.extend_from_slice(r.body());
            }
            r.status()
        }
        Some(Handler::Static(files)) => {
            let sreq = StaticRequest {
                is_head,
                method_allowed: matches!(head.method, Method::Get | Method::Head),
                path: head.path(req),
                if_none_match: head.header(req, "if-none-match"),
                if_modified_since: head.header(req, "if-modified-since"),
                range: head.header(req, "range"),
                if_range: head.header(req, "if-range"),
            };
            let reply = files.serve(&sreq);
            let status = reply.status();
            ctx.stats.request(HandlerKind::Static, status);
            rest = write_static(out, reply, date, conn_header, is_head).map(BodyRest::File);
            status
        }
        // Routed to the proxy before the body was consumed; never reaches here.
        Some(Handler::Proxy(_)) => {
            write::write_status_body(out, 500, date, conn_header, std::iter::empty(), is_head);
            500
        }
    };
    (keep_alive, rest, status)
}

/// Encodes a static-file reply; returns the file region still to send when it is
/// too large to inline.
fn write_static(
    out: &mut Vec<u8>,
    reply: Reply,
    date: &[u8],
    conn: write::ConnectionHeader,
    is_head: bool,
) -> Option<FileRegion> {
    let status = reply.status();
    match reply {
        Reply::File(f) => {
            write::write_head_fields(
                out,
                status,
                date,
                BodyFraming::Length(f.len),
                conn,
                f.headers(),
            );
            if is_head || f.len == 0 {
                return None;
            }
            if let Some(bytes) = f.content.as_deref() {
                let region = usize::try_from(f.offset)
                    .ok()
                    .and_then(|start| bytes.get(start..start + f.len as usize));
                if let Some(region) = region {
                    out.extend_from_slice(region);
                    return None;
                }
            }
            if f.len > INLINE_FILE_MAX {
                return Some((f.file, f.offset, f.len));
            }
            let start = out.len();
            out.resize(start + f.len as usize, 0);
            match f.file.read_exact_at(&mut out[start..], f.offset) {
                Ok(()) => None,
                Err(_) => {
                    // Shrunk since it was opened: the promised length cannot be kept.
                    out.truncate(start);
                    Some((f.file, f.offset, f.len))
                }
            }
        }
        Reply::NotModified { .. } => {
            write::write_head_fields(out, status, date, BodyFraming::None, conn, reply.headers());
            None
        }
        Reply::Listing { ref body } => {
            write::write_head_fields(
                out,
                status,
                date,
                BodyFraming::Length(body.len() as u64),
                conn,
                reply.headers(),
            );
            if !is_head {
                out.extend_from_slice(body);
            }
            None
        }
        Reply::Redirect { .. } | Reply::RangeNotSatisfiable { .. } | Reply::Error(_) => {
            write::write_status_body(out, status, date, conn, reply.headers(), is_head);
            None
        }
    }
}
