//! Phases 2 to 6 of a proxied request, run again as the retry policy
//! ([`crate::upstream::retry`]) says: choose a server, rewrite the request for it,
//! connect, send, read the response head. What comes out is either an
//! upstream that answered, or the error the client is to be answered with.

use std::net::SocketAddr;

use tracing::debug;

use super::choose_upstream::{balance_key, choose_upstream};
use super::log::note_failure;
use super::request_info::RequestInfo;
use super::response_head::read_response_head;
use super::rewrite_request::encode_for_server;
use super::send::{send_request, Answer, BodySend, SendError};
use super::{ErrorKind, ProxyBuffers, ProxyError, ProxyRoute, POOLED_BUF_MAX};
use crate::cache::tap::ResponseTap;
use crate::http::Session;
use crate::http1::parse::BodyKind;
use crate::http1::response::ParsedResponseHead;
use crate::upstream::connect::{connect_upstream, InFlight};
use crate::upstream::pool::Pooled;
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

/// An upstream that sent a final response head (in the exchange's buffers).
pub struct Answered<'a> {
    /// The server's index in its group.
    pub(super) server: usize,
    /// The connection, positioned after the head, with its timer.
    pub(super) up: Pooled,
    /// When the head came (the worker's wake-up clock, read once for the
    /// server's latency, the access log's and the response's `Date`).
    pub(super) head_at: std::time::Instant,
    /// Counts the request as in flight on the server until the body is relayed.
    pub(super) in_flight: InFlight<'a>,
    /// The whole request was sent (not cut short by an early answer).
    pub(super) complete: bool,
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

/// Runs phases 2 to 6 until an upstream answers or the retry policy gives up.
/// `Err` when the client failed (or sent a bad body): the exchange is over.
pub(super) async fn run_attempts<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &ProxyRoute,
    info: &RequestInfo,
    started: std::time::Instant,
    bufs: &mut ExchangeBufs,
    body: &mut BodySend,
    tap: &mut T,
) -> Result<Result<Answered<'h>, Unanswered>, DownstreamFailed> {
    let ctx = session.worker();
    let http = &ctx.config.http;
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
        // still holds the whole request.
        if encoded_for.is_none() || (!route.preserve_host && encoded_for != Some(server)) {
            bufs.up_head.clear();
            encode_for_server(&mut bufs.up_head, session, route, server, info);
            tap.edit_upstream_head(&mut bufs.up_head);
            encoded_for = Some(server);
        }

        // Phase 4: connect. Nothing has been sent on a failed connect, so any
        // method may go to another server.
        let fresh = std::mem::take(&mut fresh_only);
        let (mut up, reused) = match connect_upstream(group, state, server, fresh, now).await {
            Ok(c) => c,
            Err(e) => {
                in_flight.attempt.failed(&e, true);
                note_failure(group, state, server, &e);
                let idempotent = info.idempotent();
                if decide_retry(&mut budget, AttemptFailure::Connect, idempotent).retry
                    == Retry::Another
                {
                    tried.push(server);
                    last_failure = Some((e, addr));
                    continue;
                }
                return Ok(Err(unanswered(e, Some(addr))));
            }
        };

        // Phase 5: send the head and body, watching for an early answer.
        bufs.up_read.clear();
        // Interim heads from the upstream: once one came (and went on to the
        // client), the request is never sent again.
        let mut interim = 0;
        let sent = send_request(
            session,
            &mut up.stream,
            &bufs.up_head,
            &mut bufs.out,
            body,
            group.read_timeout,
            Answer {
                buf: &mut bufs.up_read,
                head: &mut bufs.resp,
                method: info.method,
                limits: &http.limits,
                interim: &mut interim,
            },
        )
        .await;
        // Whether the whole request went out; if not, the upstream answered
        // first, or a write failed, perhaps because the upstream answered and
        // closed without taking the whole body: either way its answer is read.
        let (replayable, complete, write_error) = match sent {
            Ok(s) => (s.replayable, !s.answered_early, None),
            Err(SendError::Downstream) => return Err(DownstreamFailed),
            Err(SendError::Upstream(e, replayable)) => (replayable, false, Some(e)),
        };

        // Phase 6: the response head, unless the write timed out.
        let write = write_error.as_ref().map(|e| e.kind);
        let (head, head_error) = if write == Some(ErrorKind::Timeout) {
            (None, None)
        } else {
            match read_response_head(
                session,
                &mut up,
                &mut bufs.up_read,
                &mut bufs.resp,
                &mut interim,
                info,
                group,
                http,
                &ctx.clock,
            )
            .await
            {
                Ok(()) => {
                    let head_at = ctx.clock.now().into_std();
                    in_flight.attempt.answered_at(bufs.resp.status, head_at);
                    state.record_success(server);
                    return Ok(Ok(Answered {
                        server,
                        up,
                        head_at,
                        in_flight,
                        complete,
                    }));
                }
                Err(h) => (Some((h.error.kind, h.nothing_received)), Some(h.error)),
            }
        };
        let failure = FailedExchange {
            reused,
            replayable,
            interim: interim > 0,
            write,
            head,
        };
        let decision = decide_retry(
            &mut budget,
            AttemptFailure::Exchange(failure),
            info.idempotent(),
        );
        // Unanswered, the failed write is what went wrong first; otherwise
        // what the upstream sent (or did not send in time) is.
        let error = if failure.unanswered() {
            write_error.or(head_error)
        } else {
            head_error.or(write_error)
        };
        let error =
            error.unwrap_or_else(|| ProxyError::upstream(ErrorKind::Reset, "exchange failed"));
        if decision.count_failure {
            in_flight.attempt.failed(&error, false);
            note_failure(group, state, server, &error);
        }
        match decision.retry {
            Retry::Fresh => {
                fresh_only = true;
                debug!(upstream = %addr, error = %error, "pooled connection was dead; retrying on a fresh one");
            }
            Retry::Another => {
                tried.push(server);
                last_failure = Some((error, addr));
            }
            Retry::GiveUp => return Ok(Err(unanswered(error, Some(addr)))),
        }
    }
}
