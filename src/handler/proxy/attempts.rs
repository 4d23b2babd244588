//! Phases 2 to 6 of a proxied request, run again as the retry policy
//! ([`crate::upstream::retry`]) says: choose a server, rewrite the request for it,
//! connect, send, read the response head. What comes out is either an
//! upstream that answered, or the error the client is to be answered with.

use std::net::SocketAddr;

use tracing::debug;

use super::choose_upstream::{balance_key, choose_upstream};
use super::log::note_failure;
use super::request_info::RequestInfo;
use super::rewrite_request::encode_for_server;
use super::{ErrorKind, ProxyBuffers, ProxyError, ProxyRoute, POOLED_BUF_MAX};
use crate::cache::tap::ResponseTap;
use crate::http::Session;
use crate::http1::parse::BodyKind;
use crate::http1::response::ParsedResponseHead;
use crate::observe::upstream_counters::UpstreamFailure;
use crate::upstream::connect::InFlight;
use crate::upstream::request_head::RequestHeadSink;
use crate::upstream::retry::{decide_retry, AttemptFailure, FailedExchange, Retry, RetryBudget};

/// The buffers of one exchange, taken from the worker and given back after it.
pub struct ExchangeBufs {
    /// The upstream request head, encoded once per server it depends on.
    pub(super) up_head: Vec<u8>,
    /// Bytes read from the upstream: the response head, then body bytes.
    pub(super) up_read: Vec<u8>,
    /// Request body bytes gathered for a write; empty for a request without one.
    pub(super) out: Vec<u8>,
    /// The parsed upstream response head.
    pub(super) resp: ParsedResponseHead,
}

impl ExchangeBufs {
    /// Buffers for a request whose body is `body` (none needs no body buffer).
    pub(super) fn take(worker: &ProxyBuffers, body: BodyKind) -> Self {
        let mut bufs = worker.take_exchange().unwrap_or_else(|| ExchangeBufs {
            up_head: worker.take_buf(),
            up_read: worker.take_buf(),
            out: Vec::new(),
            resp: ParsedResponseHead::default(),
        });
        if body != BodyKind::None {
            bufs.out = worker.take_buf();
        }
        bufs
    }

    /// Returns the buffers to the worker for the next request, as one set; a
    /// buffer that grew too large is freed and a fresh one takes its place.
    pub(super) fn give_back(mut self, worker: &ProxyBuffers) {
        worker.give_buf(std::mem::take(&mut self.out));
        for b in [&mut self.up_head, &mut self.up_read] {
            if b.capacity() > POOLED_BUF_MAX {
                *b = worker.take_buf();
            }
            b.clear();
        }
        worker.give_exchange(self);
    }
}

/// A server that answered with a final response head: which one, when, and
/// what its protocol's exchange carries on to the relay (`A`).
pub struct Answered<'a, A> {
    /// The server's index in its group.
    pub(super) server: usize,
    /// When the head came (the worker's wake-up clock, read once for the
    /// server's latency, the access log's and the response's `Date`).
    pub(super) head_at: std::time::Instant,
    /// Counts the request as in flight on the server until the body is relayed.
    pub(super) in_flight: InFlight<'a>,
    /// The exchange, positioned after the head.
    pub(super) upstream: A,
}

/// No upstream answered: the error the client gets.
pub struct Unanswered {
    /// What went wrong, last.
    pub(super) error: ProxyError,
    /// The server it went wrong on, if one was chosen.
    pub(super) addr: Option<SocketAddr>,
}

/// The client failed (or sent a bad body) while the request was sent: the
/// exchange is over, and the driver answers for the client's fault.
pub struct DownstreamFailed;

/// What one attempt on a server (phases 4 to 6) came to.
pub(super) enum Attempt<A> {
    /// The server answered with a final head (`status`) at `head_at`.
    Answered {
        /// The exchange, carried on to the relay.
        upstream: A,
        /// The final status.
        status: u16,
        /// When the head came.
        head_at: std::time::Instant,
    },
    /// No connection (or no stream on one): nothing was sent, so any method
    /// may go to another server.
    ConnectFailed(ProxyError),
    /// The exchange failed once the request was on its way: the retry policy
    /// decides from `failure`.
    Failed {
        /// What the retry policy goes by.
        failure: FailedExchange,
        /// What the client is told if nothing else answers.
        error: ProxyError,
    },
    /// The server refused the request unprocessed (HTTP/2 REFUSED_STREAM, or
    /// a GOAWAY before the server saw it, RFC 9113 §8.7): it goes again on a
    /// fresh connection, not counted against the server.
    Refused,
    /// No retry can help (a gRPC deadline passed): the client gets this error.
    Final(ProxyError),
    /// The client failed, or its request cannot be carried (and was
    /// answered): the exchange is over.
    Downstream,
}

/// One upstream protocol's phases 4 to 6 on a chosen server, for the one
/// attempts loop ([`run_attempts`]): HTTP/1 (`h1_attempt.rs`) and
/// HTTP/2 (`h2_attempt.rs`) alike.
pub(super) trait UpstreamExchange<'h> {
    /// What an answered attempt carries on to the relay.
    type Answer;

    /// Where phase 3 writes the request head in this protocol's form.
    type Head<'a>: RequestHeadSink
    where
        Self: 'a;

    /// The request head, rewritten for a server only when it depends on the
    /// server.
    fn head(&mut self) -> Self::Head<'_>;

    /// Phases 4 to 6 on `server`: a connection (a pooled one unless
    /// `fresh_only`), the request, the response head.
    async fn attempt(
        &mut self,
        session: &mut dyn Session<'h>,
        server: usize,
        fresh_only: bool,
        now: std::time::Instant,
    ) -> Attempt<Self::Answer>;
}

/// Runs phases 2 to 6 until an upstream answers or the retry policy gives up,
/// whatever the protocol `exchange` speaks. `Err` when the client failed (or
/// sent a bad body): the exchange is over.
pub(super) async fn run_attempts<'h, X: UpstreamExchange<'h>, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &ProxyRoute,
    info: &RequestInfo,
    started: std::time::Instant,
    exchange: &mut X,
    tap: &mut T,
) -> Result<Result<Answered<'h, X::Answer>, Unanswered>, DownstreamFailed> {
    let ctx = session.worker();
    let group = &*route.group;
    let state = &ctx.upstreams.groups[group.index];
    let key = balance_key(group, &session.request());
    // The rewrite depends on the server only when Host is replaced, so the head is
    // encoded once, and again for another server only in that case.
    let mut encoded_for = None;
    let mut tried: Vec<usize> = Vec::new();
    let mut budget = RetryBudget::new(group.retries);
    let mut fresh_only = false;
    let unanswered = |error, addr| Unanswered { error, addr };

    // The first attempt reuses the start time: one clock read fewer per request.
    let mut first_attempt = Some(started);
    // The failure of the last server tried, for when no other is left.
    let mut last_failure: Option<(ProxyError, SocketAddr)> = None;
    let traced = session.trace().is_on();
    // Only a recording trace has client spans to end and events to note.
    let recording = session.trace().is_recording();
    loop {
        let now = first_attempt.take().unwrap_or_else(std::time::Instant::now);
        // Phase 2: choose upstream.
        let server = match choose_upstream(group, state, key, &tried, now, &mut last_failure) {
            Ok(s) => s,
            Err((e, addr)) => return Ok(Err(unanswered(e, addr))),
        };
        let addr = group.servers[server].addr;
        // In flight on the server from here until the response is relayed.
        let in_flight = InFlight::new(state, server, now);

        // Phase 3: rewrite the request. Retries happen only while the buffer
        // still holds the whole request. A recording trace gives each attempt
        // a client span of its own, named as the parent in the head, so each
        // attempt's head is written anew; one that records nothing names the
        // server span every time.
        let encode = recording
            || encoded_for.is_none()
            || (!route.preserve_host && encoded_for != Some(server));
        if encode {
            let traceparent = traced.then(|| session.trace().start_attempt(addr, now));
            let mut head = exchange.head();
            head.clear();
            let parent = traceparent.as_ref();
            encode_for_server(&mut head, session, route, server, parent, info, tap);
            encoded_for = Some(server);
        }

        // Phases 4 to 6.
        let fresh = std::mem::take(&mut fresh_only);
        let (failure, error) = match exchange.attempt(session, server, fresh, now).await {
            Attempt::Answered {
                upstream,
                status,
                head_at,
            } => {
                end_span(session, recording, status, None, Some(head_at));
                in_flight.attempt.answered_at(status, head_at);
                state.record_success(server);
                return Ok(Ok(Answered {
                    server,
                    head_at,
                    in_flight,
                    upstream,
                }));
            }
            Attempt::ConnectFailed(e) => {
                // Nothing has been sent on a failed connect, so any method
                // may go to another server.
                in_flight.attempt.failed(&e, true);
                note_failure(group, state, server, &e);
                end_span(session, recording, 0, Some((&e, true)), None);
                let idempotent = info.idempotent();
                if decide_retry(&mut budget, AttemptFailure::Connect, idempotent).retry
                    == Retry::Another
                {
                    note_retry(session, recording, error_type(&e, true));
                    tried.push(server);
                    last_failure = Some((e, addr));
                    continue;
                }
                return Ok(Err(unanswered(e, Some(addr))));
            }
            Attempt::Refused => {
                debug!(upstream = %group.server_name(addr), "request refused unprocessed; sending it again");
                if recording {
                    let now = std::time::Instant::now();
                    session.trace().end_attempt(0, Some("refused"), false, now);
                    session.trace().note_retry("refused");
                }
                fresh_only = true;
                continue;
            }
            Attempt::Final(e) => {
                end_span(session, recording, 0, Some((&e, false)), None);
                in_flight.attempt.failed(&e, false);
                return Ok(Err(unanswered(e, Some(addr))));
            }
            Attempt::Downstream => {
                if recording {
                    let now = std::time::Instant::now();
                    session
                        .trace()
                        .end_attempt(0, Some("downstream"), false, now);
                }
                return Err(DownstreamFailed);
            }
            Attempt::Failed { failure, error } => {
                end_span(session, recording, 0, Some((&error, false)), None);
                (failure, error)
            }
        };
        let decision = decide_retry(
            &mut budget,
            AttemptFailure::Exchange(failure),
            info.idempotent(),
        );
        if decision.count_failure {
            in_flight.attempt.failed(&error, false);
            note_failure(group, state, server, &error);
        }
        if decision.retry != Retry::GiveUp {
            note_retry(session, recording, error_type(&error, false));
        }
        match decision.retry {
            Retry::Fresh => {
                fresh_only = true;
                debug!(upstream = %group.server_name(addr), error = %error, "pooled connection was dead; retrying on a fresh one");
            }
            Retry::Another => {
                tried.push(server);
                last_failure = Some((error, addr));
            }
            Retry::GiveUp => return Ok(Err(unanswered(error, Some(addr)))),
        }
    }
}

/// Ends the attempt's client span with the upstream's `status` (0 for none),
/// or the error it failed with (and whether it failed connecting), at `at`
/// when the caller has the time (the answer's head), else now.
fn end_span(
    session: &dyn Session<'_>,
    recording: bool,
    status: u16,
    error: Option<(&ProxyError, bool)>,
    at: Option<std::time::Instant>,
) {
    if recording {
        let timeout = error.is_some_and(|(e, _)| e.kind == ErrorKind::Timeout);
        let error = error.map(|(e, connecting)| error_type(e, connecting));
        let at = at.unwrap_or_else(std::time::Instant::now);
        session.trace().end_attempt(status, error, timeout, at);
    }
}

/// Notes on the server span that the request is tried again after `error`.
fn note_retry(session: &dyn Session<'_>, recording: bool, error: &'static str) {
    if recording {
        session.trace().note_retry(error);
    }
}

/// The error type a client span and a retry event carry for `e`: the cause
/// the upstream counters use (`connect`, `timeout`, `reset`, ...).
fn error_type(e: &ProxyError, connecting: bool) -> &'static str {
    UpstreamFailure::of(e, connecting).label()
}
