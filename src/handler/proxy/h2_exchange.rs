//! Phases 5 to 8 for `protocol = "h2"` groups, one stream: the request body
//! streamed up within the stream's flow-control window, the response head,
//! then the response body and trailers relayed down, the request body still
//! flowing meanwhile (a gRPC bidirectional call sends and receives at once).
//! Nothing is read from one side faster than the other takes it: a request
//! chunk is taken from the client only once the last one went upstream, and
//! the upstream's window is reopened only for bytes the client was given.

use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};

use crate::cache::tap::ResponseTap;
use crate::deadline::Deadline;
use crate::http::Session;
use crate::http2::client::ResponseHead;
use crate::upstream::h2_stream::{H2Stream, ResponseEvent, StreamError};

/// How a stream's exchange stopped short.
#[derive(Debug)]
pub(super) enum ExchangeError {
    /// The client failed, went away, or sent a bad body.
    Downstream,
    /// The upstream reset the stream, or its connection failed.
    Upstream(StreamError),
    /// Nothing moved for the group's timeout.
    Stalled,
    /// The call's `grpc-timeout` passed.
    DeadlinePassed,
    /// More interim (1xx) heads than [`super::interim::MAX_INTERIM`].
    TooManyInterim,
}

/// The request body on its way up.
pub(super) struct Upload {
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
    /// For a stream just opened; `finished` when the request has no body
    /// (END_STREAM went with the head).
    pub(super) fn new(finished: bool) -> Self {
        Upload {
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
        stream: &H2Stream,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        activity: &mut u64,
    ) -> Poll<Result<(), ExchangeError>> {
        loop {
            if self.finished {
                return Poll::Ready(Ok(()));
            }
            if !self.pending.is_empty() {
                let cap = match ready!(stream.poll_send_capacity(cx)) {
                    Ok(cap) => cap,
                    Err(e) => return self.stopped(ExchangeError::Upstream(e)),
                };
                let piece = self.pending.slice(..cap.min(self.pending.len()));
                let sent = stream.send_data(piece, false);
                self.pending.advance(sent);
                *activity += 1;
                continue;
            }
            self.polled = true;
            match ready!(session.poll_body(cx)) {
                Ok(0) => {
                    self.finished = true;
                    let trailers = relayed_trailers(session);
                    if trailers.is_empty() {
                        stream.send_data(Bytes::new(), true);
                    } else {
                        stream.send_trailers(&mut trailers.iter().map(|(n, v)| (&n[..], *v)));
                    }
                    *activity += 1;
                }
                Ok(n) => {
                    self.pending = Bytes::copy_from_slice(&session.body_chunk()[..n]);
                    session.consume_body(n);
                    self.consumed = true;
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
}

/// The request's trailers as they go up (a HEADERS frame ending the
/// stream): those relayed, names in lowercase, values HTTP/2 carries;
/// empty when there are none.
fn relayed_trailers<'s>(session: &'s dyn Session<'_>) -> Vec<(Vec<u8>, &'s [u8])> {
    session
        .request_trailers()
        .into_iter()
        .filter(|&(name, value)| {
            super::fields::relayed_trailer(name)
                && !value.iter().any(|&c| c == 0 || c == b'\r' || c == b'\n')
        })
        .map(|(name, value)| (name.as_bytes().to_ascii_lowercase(), value))
        .collect()
}

/// The response body on its way down.
pub(super) struct Download {
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
    pub(super) fn new() -> Self {
        Download {
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
        stream: &H2Stream,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        activity: &mut u64,
        tap: &mut T,
    ) -> Poll<Result<Option<ResponseHead>, ExchangeError>> {
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
                stream.release(self.taken);
                self.taken = 0;
            }
            match stream.poll_response(cx) {
                Poll::Ready(Ok(ResponseEvent::Data(data))) => {
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
                Poll::Ready(Ok(ResponseEvent::End(trailers))) => return Poll::Ready(Ok(trailers)),
                // A head after the final one: the codec allows none.
                Poll::Ready(Ok(ResponseEvent::Interim(_) | ResponseEvent::Head(_))) => {
                    return Poll::Ready(Err(ExchangeError::Upstream(StreamError::Reset(
                        crate::http2::ErrorCode::ProtocolError,
                    ))))
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(ExchangeError::Upstream(e))),
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
    /// The stream; dropped before its end, it is reset upstream.
    pub(super) stream: H2Stream,
    pub(super) upload: Upload,
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
    /// A stream whose head went, its body (if any) still to send.
    pub(super) fn new(stream: H2Stream, upload: Upload) -> Self {
        H2Exchange {
            stream,
            upload,
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
    ) -> Result<ResponseHead, ExchangeError> {
        self.run_step(session, limits, true, Self::poll_head).await
    }

    /// Resets the stream upstream (RST_STREAM CANCEL): the client went away,
    /// the call's deadline passed, or the answer is not relayed.
    pub(super) fn cancel(&mut self) {
        self.upload.finished = true;
        self.stream.cancel();
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
    ) -> Poll<Result<ResponseHead, ExchangeError>> {
        if let Poll::Ready(Err(ExchangeError::Downstream)) =
            self.upload
                .poll_send(&self.stream, session, cx, &mut self.activity)
        {
            return Poll::Ready(Err(ExchangeError::Downstream));
        }
        // Interim heads first, relayed as they come; an upstream that
        // stopped taking the body says why through the response (an early
        // answer, or the reset).
        loop {
            let event = match self.stream.poll_response(cx) {
                Poll::Ready(event) => event,
                Poll::Pending => {
                    if self.interim_unflushed {
                        // A client gone shows when the answer is given.
                        if session.poll_flush_body(cx).is_ready() {
                            self.interim_unflushed = false;
                        }
                    }
                    return Poll::Pending;
                }
            };
            match event {
                Ok(ResponseEvent::Interim(head)) => {
                    if self.interim >= super::interim::MAX_INTERIM {
                        return Poll::Ready(Err(ExchangeError::TooManyInterim));
                    }
                    self.interim += 1;
                    self.activity += 1;
                    super::interim::send_h2_head(session, &head);
                    self.interim_unflushed = true;
                }
                Ok(ResponseEvent::Head(head)) => {
                    self.download = Some(Download::new());
                    return Poll::Ready(Ok(head));
                }
                // Body before a head: the codec lets none through.
                Ok(ResponseEvent::Data(_) | ResponseEvent::End(_)) => {
                    return Poll::Ready(Err(ExchangeError::Upstream(StreamError::Reset(
                        crate::http2::ErrorCode::ProtocolError,
                    ))))
                }
                Err(e) => return Poll::Ready(Err(ExchangeError::Upstream(e))),
            }
        }
    }

    /// Whether the response ended with its head (no body, no trailers).
    pub(super) fn body_is_empty(&self) -> bool {
        self.download.is_none() || self.stream.body_is_empty()
    }

    /// Relays the response body (the request body still flowing up), each
    /// piece shown to `tap` as it comes; the trailers once it ended.
    pub(super) async fn relay<T: ResponseTap>(
        &mut self,
        session: &mut dyn Session<'_>,
        limits: Limits,
        tap: &mut T,
    ) -> Result<Option<ResponseHead>, ExchangeError> {
        self.run_step(session, limits, false, |x, s, cx| x.poll_relay(s, cx, tap))
            .await
    }

    fn poll_relay<T: ResponseTap>(
        &mut self,
        session: &mut dyn Session<'_>,
        cx: &mut Context<'_>,
        tap: &mut T,
    ) -> Poll<Result<Option<ResponseHead>, ExchangeError>> {
        if let Poll::Ready(Err(ExchangeError::Downstream)) =
            self.upload
                .poll_send(&self.stream, session, cx, &mut self.activity)
        {
            return Poll::Ready(Err(ExchangeError::Downstream));
        }
        match self.download.as_mut() {
            Some(d) => d.poll_relay(&self.stream, session, cx, &mut self.activity, tap),
            None => Poll::Ready(Ok(None)),
        }
    }
}
