//! Phases 5 to 8 for `protocol = "h2"` groups, one stream: the request body
//! streamed up within the stream's flow-control window, the response head,
//! then the response body and trailers relayed down, the request body still
//! flowing meanwhile (a gRPC bidirectional call sends and receives at once).
//! Nothing is read from one side faster than the other takes it: a request
//! chunk is taken from the client only once the last one went upstream, and
//! the upstream's window is reopened only for bytes the client was given.

use std::future::Future as _;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use http::HeaderMap;

use crate::cache::tap::ResponseTap;
use crate::deadline::Deadline;
use crate::http::Session;

/// How a stream's exchange stopped short.
#[derive(Debug)]
pub(super) enum ExchangeError {
    /// The client failed, went away, or sent a bad body.
    Downstream,
    /// The upstream reset the stream, or its connection failed.
    Upstream(h2::Error),
    /// Nothing moved for the group's timeout.
    Stalled,
    /// The call's `grpc-timeout` passed.
    DeadlinePassed,
    /// More interim (1xx) heads than [`super::interim::MAX_INTERIM`].
    TooManyInterim,
}

/// The request body on its way up.
pub(super) struct Upload {
    send: SendStream<Bytes>,
    /// Taken from the client, not yet sent (waiting for window).
    pending: Bytes,
    /// Some body byte was taken from the client: the request cannot be sent again.
    pub(super) consumed: bool,
    /// The body was asked for (so a client that waits for `100 Continue` was told to go on).
    pub(super) polled: bool,
    /// END_STREAM was sent, or the upstream stopped taking the body.
    pub(super) finished: bool,
}

impl Upload {
    /// For a stream opened with `send`; `finished` when the request has no body
    /// (END_STREAM went with the head).
    pub(super) fn new(send: SendStream<Bytes>, finished: bool) -> Self {
        Upload {
            send,
            pending: Bytes::new(),
            consumed: false,
            polled: false,
            finished,
        }
    }

    /// Moves body bytes from the client to the upstream until one side has
    /// to wait. `Err(Upstream)` means the upstream stopped taking the body
    /// (it may have answered); the caller reads its answer.
    fn poll_send(
        &mut self,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        activity: &mut u64,
    ) -> Poll<Result<(), ExchangeError>> {
        loop {
            if self.finished {
                return Poll::Ready(Ok(()));
            }
            if !self.pending.is_empty() {
                let cap = self.send.capacity();
                if cap == 0 {
                    self.send.reserve_capacity(self.pending.len());
                    match ready!(self.send.poll_capacity(cx)) {
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => return self.stopped(ExchangeError::Upstream(e)),
                        None => {
                            return self.stopped(ExchangeError::Upstream(h2::Error::from(
                                h2::Reason::STREAM_CLOSED,
                            )))
                        }
                    }
                }
                let piece = self.pending.split_to(cap.min(self.pending.len()));
                if let Err(e) = self.send.send_data(piece, false) {
                    return self.stopped(ExchangeError::Upstream(e));
                }
                *activity += 1;
                continue;
            }
            self.polled = true;
            match ready!(session.poll_body(cx)) {
                Ok(0) => {
                    self.finished = true;
                    let sent = match relayed_trailers(session) {
                        Some(trailers) => self.send.send_trailers(trailers),
                        None => self.send.send_data(Bytes::new(), true),
                    };
                    if let Err(e) = sent {
                        return Poll::Ready(Err(ExchangeError::Upstream(e)));
                    }
                    *activity += 1;
                }
                Ok(n) => {
                    self.pending = Bytes::copy_from_slice(&session.body_chunk()[..n]);
                    session.consume_body(n);
                    self.consumed = true;
                    self.send.reserve_capacity(n);
                    *activity += 1;
                }
                Err(_) => return Poll::Ready(Err(ExchangeError::Downstream)),
            }
        }
    }

    fn stopped(&mut self, e: ExchangeError) -> Poll<Result<(), ExchangeError>> {
        self.finished = true;
        self.pending = Bytes::new();
        Poll::Ready(Err(e))
    }

    /// Resets the stream upstream (RST_STREAM CANCEL): the client went away,
    /// or the call's deadline passed.
    pub(super) fn cancel(&mut self) {
        self.send.send_reset(h2::Reason::CANCEL);
    }
}

/// The request's trailers as they go up (a HEADERS frame ending the
/// stream), when it has any to relay.
fn relayed_trailers(session: &dyn Session<'_>) -> Option<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, value) in session.request_trailers() {
        if !super::fields::relayed_trailer(name) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    (!map.is_empty()).then_some(map)
}

/// The response body on its way down.
pub(super) struct Download {
    recv: RecvStream,
    /// Received, not yet fully handed to the client.
    out: Bytes,
    /// Bytes handed to the client since the window was last reopened.
    taken: usize,
    /// Bytes handed to the client since the last flush.
    unflushed: bool,
    /// The client went away while the body is stored for others: the rest
    /// is read for the cache alone.
    client_gone: bool,
}

impl Download {
    /// For the body of a response whose head came.
    pub(super) fn new(recv: RecvStream) -> Self {
        Download {
            recv,
            out: Bytes::new(),
            taken: 0,
            unflushed: false,
            client_gone: false,
        }
    }

    /// Relays DATA frames to the client until the body ends, each shown to
    /// `tap` first; then the trailers, if any.
    fn poll_relay<T: ResponseTap>(
        &mut self,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        activity: &mut u64,
        tap: &mut T,
    ) -> Poll<Result<Option<HeaderMap>, ExchangeError>> {
        loop {
            while !self.out.is_empty() {
                match ready!(session.poll_write_body(cx, &self.out)) {
                    Ok(n) => {
                        self.out.advance(n);
                        self.taken += n;
                        self.unflushed = true;
                        *activity += 1;
                    }
                    // Others wait on the body being stored: it is still
                    // read to its end, and what the client missed is dropped.
                    Err(_) if tap.storing() => {
                        self.client_gone = true;
                        self.taken += self.out.len();
                        self.out = Bytes::new();
                    }
                    Err(_) => return Poll::Ready(Err(ExchangeError::Downstream)),
                }
            }
            if self.taken > 0 {
                // The client took them: the upstream may send as much again.
                let _ = self.recv.flow_control().release_capacity(self.taken);
                self.taken = 0;
            }
            match self.recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    tap.on_body(&data);
                    *activity += 1;
                    if !self.client_gone {
                        self.out = data;
                    } else if tap.storing() {
                        self.taken += data.len();
                    } else {
                        // The cache gave up on it too: nobody wants the rest.
                        return Poll::Ready(Err(ExchangeError::Downstream));
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(ExchangeError::Upstream(e))),
                Poll::Ready(None) => {
                    return self.recv.poll_trailers(cx).map_err(ExchangeError::Upstream)
                }
                Poll::Pending => {
                    // A slow source's bytes are not held back while it is quiet.
                    if self.unflushed && !self.client_gone {
                        match session.poll_flush_body(cx) {
                            Poll::Ready(Ok(())) => self.unflushed = false,
                            Poll::Ready(Err(_)) => {
                                return Poll::Ready(Err(ExchangeError::Downstream))
                            }
                            Poll::Pending => {}
                        }
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// One stream's exchange after its head was sent.
pub(super) struct H2Exchange {
    pub(super) upload: Upload,
    response: Option<ResponseFuture>,
    download: Option<Download>,
    /// Counts every move of bytes, so a stall is told from a slow exchange.
    activity: u64,
    /// Interim (1xx) heads from the upstream, each relayed to the client
    /// where it can go: once there is one, the request is never sent again.
    pub(super) interim: u32,
    /// An interim head was given to the session and not yet flushed.
    interim_unflushed: bool,
}

/// Timeouts of one exchange.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The group's `response_timeout`: the head after the whole request went.
    pub(super) response: Duration,
    /// The group's `read_timeout`: the longest time nothing moves.
    pub(super) idle: Duration,
    /// The call's deadline (`grpc-timeout`).
    pub(super) call: Option<Instant>,
}

impl Limits {
    /// The deadline of the next wait: `limit` from now, or the call's
    /// deadline if that comes first.
    fn next(&self, limit: Duration) -> (Deadline, ExchangeError) {
        let at = Instant::now() + limit;
        match self.call {
            Some(call) if call <= at => (Deadline::at(call.into()), ExchangeError::DeadlinePassed),
            _ => (Deadline::at(at.into()), ExchangeError::Stalled),
        }
    }
}

impl H2Exchange {
    /// A stream whose head went with `send`, answered through `response`.
    pub(super) fn new(upload: Upload, response: ResponseFuture) -> Self {
        H2Exchange {
            upload,
            response: Some(response),
            download: None,
            activity: 0,
            interim: 0,
            interim_unflushed: false,
        }
    }

    /// Sends the body while waiting for the response head; returns it, with
    /// the body to relay kept for [`H2Exchange::relay`].
    pub(super) async fn head(
        &mut self,
        session: &mut dyn Session<'_>,
        limits: Limits,
    ) -> Result<http::response::Parts, ExchangeError> {
        self.run_step(session, limits, true, Self::poll_head).await
    }

    /// Polls `step` (the head, or the relay of the body) to its end under
    /// the idle deadline, which starts again whenever a byte moves either
    /// way; once the request body is all sent, under the response deadline
    /// instead when `response` says so.
    async fn run_step<R>(
        &mut self,
        session: &mut dyn Session<'_>,
        limits: Limits,
        response: bool,
        mut step: impl FnMut(
            &mut H2Exchange,
            &mut dyn Session<'_>,
            &mut Context<'_>,
        ) -> Poll<Result<R, ExchangeError>>,
    ) -> Result<R, ExchangeError> {
        loop {
            let limit = if response && self.upload.finished {
                limits.response
            } else {
                limits.idle
            };
            let (mut deadline, stall) = limits.next(limit);
            let before = self.activity;
            let polled = deadline
                .run(std::future::poll_fn(|cx| match step(self, session, cx) {
                    Poll::Pending if self.activity != before => Poll::Ready(None),
                    r => r.map(Some),
                }))
                .await;
            match polled {
                Err(_) => return Err(stall),
                Ok(None) => {}
                Ok(Some(r)) => return r,
            }
        }
    }

    fn poll_head(
        &mut self,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<http::response::Parts, ExchangeError>> {
        if let Poll::Ready(Err(ExchangeError::Downstream)) =
            self.upload.poll_send(session, cx, &mut self.activity)
        {
            return Poll::Ready(Err(ExchangeError::Downstream));
        }
        // An upstream that stopped taking the body says why through the
        // response (an early answer, or the reset).
        let Some(response) = self.response.as_mut() else {
            return Poll::Ready(Err(ExchangeError::Upstream(h2::Error::from(
                h2::Reason::INTERNAL_ERROR,
            ))));
        };
        // Interim heads first, relayed as they come (the h2 crate keeps them
        // apart from the final head).
        while let Poll::Ready(Some(interim)) = response.poll_informational(cx) {
            let interim = match interim {
                Ok(interim) => interim,
                Err(e) => return Poll::Ready(Err(ExchangeError::Upstream(e))),
            };
            if self.interim >= super::interim::MAX_INTERIM {
                return Poll::Ready(Err(ExchangeError::TooManyInterim));
            }
            self.interim += 1;
            self.activity += 1;
            super::interim::send_h2_head(session, &interim);
            self.interim_unflushed = true;
        }
        if self.interim_unflushed {
            // A client gone shows when the answer is given.
            if session.poll_flush_body(cx).is_ready() {
                self.interim_unflushed = false;
            }
        }
        let head = ready!(std::pin::Pin::new(response).poll(cx));
        self.response = None;
        match head {
            Ok(resp) => {
                let (parts, body) = resp.into_parts();
                self.download = Some(Download::new(body));
                Poll::Ready(Ok(parts))
            }
            Err(e) => Poll::Ready(Err(ExchangeError::Upstream(e))),
        }
    }

    /// Whether the response ended with its head (no body, no trailers).
    pub(super) fn body_is_empty(&self) -> bool {
        self.download
            .as_ref()
            .is_none_or(|d| d.recv.is_end_stream())
    }

    /// Relays the response body (the request body still flowing up), each
    /// piece shown to `tap` as it comes; the trailers once it ended.
    pub(super) async fn relay<T: ResponseTap>(
        &mut self,
        session: &mut dyn Session<'_>,
        limits: Limits,
        tap: &mut T,
    ) -> Result<Option<HeaderMap>, ExchangeError> {
        self.run_step(session, limits, false, |x, s, cx| x.poll_relay(s, cx, tap))
            .await
    }

    fn poll_relay<T: ResponseTap>(
        &mut self,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        tap: &mut T,
    ) -> Poll<Result<Option<HeaderMap>, ExchangeError>> {
        if let Poll::Ready(Err(ExchangeError::Downstream)) =
            self.upload.poll_send(session, cx, &mut self.activity)
        {
            return Poll::Ready(Err(ExchangeError::Downstream));
        }
        match self.download.as_mut() {
            Some(d) => d.poll_relay(session, cx, &mut self.activity, tap),
            None => Poll::Ready(Ok(None)),
        }
    }
}
