//! The proxy's phases for a `protocol = "h2"` group, one request as one
//! stream: choose a server ([`super::choose_upstream`], the same balancing,
//! passive health and counters as HTTP/1 groups), rewrite the request
//! ([`super::h2_request`]), take a stream on a pooled connection
//! ([`crate::upstream::h2_pool`]), then exchange ([`super::h2_exchange`]) and log.
//!
//! Retries follow [`crate::upstream::retry`]: a failed connect goes to another server;
//! a stream the server refused unprocessed (REFUSED_STREAM, or cut off by a
//! GOAWAY before the server saw it) is sent again while none of its body was
//! taken from the client; a reused connection found dead is retried once on a
//! fresh one. A `grpc-timeout` bounds the whole call: when it passes, the
//! stream is reset upstream and the client gets `DEADLINE_EXCEEDED`.
//!
//! A cache's tap ([`crate::cache::tap`]) rides on these phases as on the
//! HTTP/1 ones: it edits the request before it is built, may answer instead
//! of a failure or of the head, and sees the head and body as they are
//! relayed, so a cached route stores, revalidates and collapses the same in
//! front of an h2 group.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use tracing::debug;

use super::attempts::{DownstreamFailed, Unanswered};
use super::choose_upstream::{balance_key, choose_upstream};
use super::error_page::answer_with_page;
use super::h2_exchange::{ExchangeError, H2Exchange, Limits, Upload};
use super::h2_request::{grpc_timeout, h2_request, is_grpc};
use super::log::{log_failure, log_response, note_failure};
use super::request_filter::take_buffered_body;
use super::request_info::RequestInfo;
use super::rewrite_request::encode_for_server;
use super::{
    answer_unanswered, answered_from_cache, ErrorKind, ProxyBuffers, ProxyError, ProxyRoute,
};
use crate::cache::tap::{ResponseTap, TapHead, UpstreamHead};
use crate::http::{Body, ResponseHead, Session};
use crate::http1::parse::{BodyKind, Method};
use crate::upstream::connect::InFlight;
use crate::upstream::group_state::GroupAdmission;
use crate::upstream::h2_pool::StreamLease;
use crate::upstream::retry::{decide_retry, AttemptFailure, FailedExchange, Retry, RetryBudget};

/// A stream whose server answered with a final head.
struct H2Answered<'a> {
    /// The server's index in its group.
    server: usize,
    /// Counts the request as in flight on the server until the body is relayed.
    in_flight: InFlight<'a>,
    /// The stream's place on its connection, held until the exchange ends.
    _lease: StreamLease,
    /// The body still to relay.
    exchange: H2Exchange,
    /// The response head.
    head: http::response::Parts,
}

/// Serves a request routed to an h2 group: phases 2 to 10, with `tap` on them.
pub(super) async fn forward_h2<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &'h ProxyRoute,
    info: &RequestInfo,
    started: Instant,
    admission: GroupAdmission<'h>,
    tap: &mut T,
) {
    let ctx = session.worker();
    let group = &*route.group;
    let grpc = is_grpc(&session.request());
    let limits = Limits {
        response: group.response_timeout,
        idle: group.read_timeout,
        call: session
            .request()
            .header("grpc-timeout")
            .and_then(grpc_timeout)
            .map(|d| started + d),
    };
    ctx.stats.upstream_requests.add(1);
    let mut encoded = ProxyBuffers::of(ctx).take_buf();
    let attempted = run_h2_attempts(session, route, info, started, limits, &mut encoded, tap).await;
    match attempted {
        // The client failed, or its request cannot be carried: answered.
        Err(DownstreamFailed) => {}
        Ok(Err(failed)) => {
            let status = log_failure(session, group, &failed.error, failed.addr, started);
            answer_unanswered(session, route, tap, status, grpc).await;
        }
        Ok(Ok(answered)) => {
            let head_at = log_response(session, group, answered.server, started, Instant::now());
            let relay = Relay {
                route,
                info,
                limits,
                grpc,
                head_at,
            };
            relay_h2(session, &relay, answered, &mut encoded, tap).await;
        }
    }
    drop(admission);
    ProxyBuffers::of(ctx).give_buf(encoded);
}

/// Phases 2 to 6, repeated as the retry policy says, until a server answers
/// with a head. `Err` when the client failed, or when its request cannot be
/// sent over HTTP/2 (then answered with a 400): the exchange is over.
async fn run_h2_attempts<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &'h ProxyRoute,
    info: &RequestInfo,
    started: Instant,
    limits: Limits,
    encoded: &mut Vec<u8>,
    tap: &mut T,
) -> Result<Result<H2Answered<'h>, Unanswered>, DownstreamFailed> {
    let ctx = session.worker();
    let group = &*route.group;
    let state = &ctx.upstreams.groups[group.index];
    let key = balance_key(group, &session.request());
    let mut tried: Vec<usize> = Vec::new();
    let mut budget = RetryBudget::new(group.retries);
    let mut fresh_only = false;
    let mut last_failure: Option<(ProxyError, SocketAddr)> = None;
    let mut first_attempt = Some(started);
    // The rewrite depends on the server only when Host is replaced: the head
    // (and the tap's edit of it) is made again only then.
    let mut encoded_for = None;
    let unanswered = |error, addr| Ok(Err(Unanswered { error, addr }));

    loop {
        let now = first_attempt.take().unwrap_or_else(Instant::now);
        // Phase 2: choose upstream.
        let server = match choose_upstream(group, state, key, &tried, now, &mut last_failure) {
            Ok(s) => s,
            Err((e, addr)) => return unanswered(e, addr),
        };
        let addr = group.servers[server].addr;
        let in_flight = InFlight::new(state, server, now);

        // Phase 3: the request for this server.
        if encoded_for.is_none() || (!route.preserve_host && encoded_for != Some(server)) {
            encoded.clear();
            encode_for_server(encoded, session, route, server, info);
            tap.edit_upstream_head(encoded);
            encoded_for = Some(server);
        }
        let request = match h2_request(encoded, &session.request(), group.tls.is_some()) {
            Ok(r) => r,
            Err(e) => {
                debug!(group = %group.name, peer = %session.request().peer(), cause = e.0, "request cannot be sent over HTTP/2");
                answer_with_page(session, &route.error_pages, 400, None);
                return Err(DownstreamFailed);
            }
        };

        // Phase 4: a stream on a pooled connection, or on a new one.
        let pooled = if std::mem::take(&mut fresh_only) {
            None
        } else {
            state.h2.checkout(server, now)
        };
        let (lease, reused) =
            pooled.unwrap_or_else(|| (state.h2.connect(&route.group, server), false));
        let send = match lease.sender().await {
            Ok(send) => send,
            Err(e) => {
                in_flight.attempt.failed(&e, true);
                note_failure(group, state, server, &e);
                if decide_retry(&mut budget, AttemptFailure::Connect, info.idempotent()).retry
                    == Retry::Another
                {
                    tried.push(server);
                    last_failure = Some((e, addr));
                    continue;
                }
                return unanswered(e, Some(addr));
            }
        };

        // Phase 5 and 6: the head, the body, the response head.
        let no_body = info.body == BodyKind::None;
        let attempt = open_stream(send, &lease, request, no_body).await;
        let result = match attempt {
            Ok((upload, response)) => {
                let mut exchange = H2Exchange::new(Upload::new(upload, no_body), response);
                match exchange.head(session, limits).await {
                    Ok(head) => Ok((exchange, head)),
                    Err(e) => Err((e, exchange.upload.consumed, Some(exchange))),
                }
            }
            Err(e) => Err((ExchangeError::Upstream(e), false, None)),
        };
        let (error, consumed, exchange) = match result {
            Ok((exchange, head)) => {
                in_flight.attempt.answered(head.status.as_u16());
                state.record_success(server);
                return Ok(Ok(H2Answered {
                    server,
                    in_flight,
                    _lease: lease,
                    exchange,
                    head,
                }));
            }
            Err(e) => e,
        };
        let mut exchange = exchange;
        // Interim heads came (and went on to the client): the request is not
        // sent again.
        let interim = exchange.as_ref().is_some_and(|x| x.interim > 0);
        let error = match error {
            ExchangeError::Downstream => {
                // The client went away or sent a bad body: the driver answers
                // for it, and the upstream hears of it.
                if let Some(x) = exchange.as_mut() {
                    x.upload.cancel();
                }
                return Err(DownstreamFailed);
            }
            ExchangeError::DeadlinePassed => {
                if let Some(x) = exchange.as_mut() {
                    x.upload.cancel();
                }
                let e = ProxyError::upstream(ErrorKind::Timeout, "grpc-timeout passed");
                in_flight.attempt.failed(&e, false);
                return unanswered(e, Some(addr));
            }
            ExchangeError::Stalled => {
                if let Some(x) = exchange.as_mut() {
                    x.upload.cancel();
                }
                ProxyError::upstream(ErrorKind::Timeout, "no response head in time")
            }
            ExchangeError::TooManyInterim => {
                if let Some(x) = exchange.as_mut() {
                    x.upload.cancel();
                }
                ProxyError::upstream(ErrorKind::Malformed, super::interim::InterimError::TooMany)
            }
            ExchangeError::Upstream(e) => {
                if e.is_io() || e.is_go_away() || e.is_library() {
                    lease.connection().close();
                }
                let refused = e.reason() == Some(h2::Reason::REFUSED_STREAM)
                    || (e.is_go_away() && e.is_remote());
                if refused && !consumed && !interim {
                    // Not processed (RFC 9113 §8.7): safe to send again, the
                    // pool's other connections or a new one.
                    debug!(upstream = %addr, error = %e, "stream refused unprocessed; sending it again");
                    fresh_only = true;
                    continue;
                }
                ProxyError::upstream(ErrorKind::Reset, format!("HTTP/2: {e}"))
            }
        };
        let timed_out = error.kind == ErrorKind::Timeout;
        let failure = FailedExchange {
            reused,
            replayable: !consumed,
            interim,
            write: None,
            head: Some((error.kind, !timed_out)),
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
        match decision.retry {
            Retry::Fresh => fresh_only = true,
            Retry::Another => {
                tried.push(server);
                last_failure = Some((error, addr));
            }
            Retry::GiveUp => return unanswered(error, Some(addr)),
        }
    }
}

/// What the relay of an answered stream goes by.
struct Relay<'h, 'r> {
    route: &'h ProxyRoute,
    info: &'r RequestInfo,
    limits: Limits,
    /// A gRPC call: its failures are gRPC statuses, its errors never pages.
    grpc: bool,
    /// When the head came.
    head_at: Instant,
}

/// Phases 7 to 10 of an answered stream: answers with the upstream's head
/// (or what stands in for it), then relays the body and trailers. `fields`
/// is a buffer for the head.
async fn relay_h2<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    relay: &Relay<'h, '_>,
    answered: H2Answered<'_>,
    fields: &mut Vec<u8>,
    tap: &mut T,
) {
    let H2Answered {
        server,
        in_flight,
        _lease,
        mut exchange,
        head,
    } = answered;
    let Relay {
        route,
        info,
        limits,
        grpc,
        head_at,
    } = *relay;
    let group = &*route.group;
    let status = head.status.as_u16();
    let upstream_head = UpstreamHead::H2 {
        status,
        fields: &head.headers,
    };

    // Phase 7: the response head.
    if answered_from_cache(session, tap, upstream_head, head_at).await {
        // A 304 to a revalidation, or a 5xx while stale may answer: the
        // stored response went out, the upstream's body never does.
        exchange.upload.cancel();
        take_buffered_body(session, info, exchange.upload.polled);
        return;
    }
    if !grpc && route.error_pages.intercepts(status) {
        // The upstream's body is replaced, never relayed: its stream is reset.
        answer_with_page(session, &route.error_pages, status, None);
        exchange.upload.cancel();
        take_buffered_body(session, info, exchange.upload.polled);
        return;
    }
    fields.clear();
    let keep_length = status == 304;
    for (name, value) in &head.headers {
        let keep = match name.as_str() {
            "content-length" => keep_length,
            "date" | "server" | "connection" | "keep-alive" | "proxy-connection"
            | "transfer-encoding" | "upgrade" | "te" | "trailer" => false,
            _ => true,
        };
        if keep {
            fields.extend_from_slice(name.as_str().as_bytes());
            fields.extend_from_slice(b": ");
            fields.extend_from_slice(value.as_bytes());
            fields.extend_from_slice(b"\r\n");
        }
    }
    let len = head
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let tap_head = TapHead {
        head: upstream_head,
        body_len: len,
    };
    tap.on_head(&session.request(), tap_head, fields);
    let response_head = ResponseHead {
        status,
        fields: &[],
        configured: None,
        field_lines: fields,
    };
    let ends_at_head = exchange.body_is_empty() && info.method != Method::Head;
    if ends_at_head {
        // No body and no trailers (a gRPC trailers-only answer among them):
        // the head alone ends the response.
        session.send_response(&response_head, Body::Empty);
    } else {
        session.send_response(&response_head, Body::Push(len));
    }

    // Phase 8: the body, the trailers.
    let relayed = if ends_at_head {
        Ok(None)
    } else {
        exchange.relay(session, limits, tap).await
    };
    match relayed {
        Ok(trailers) => {
            // Stored without its trailers, as a body from an HTTP/1
            // upstream is: the cache keeps a head and a body.
            tap.on_end(true);
            if !ends_at_head {
                let list: Vec<(&str, &[u8])> = trailers
                    .iter()
                    .flatten()
                    .map(|(n, v)| (n.as_str(), v.as_bytes()))
                    .collect();
                session.finish_body(&list);
            }
            if !exchange.upload.finished {
                // The upstream answered before the whole request body came:
                // what is already here is dropped, else the driver closes.
                exchange.upload.cancel();
                take_buffered_body(session, info, exchange.upload.polled);
            }
        }
        Err(ExchangeError::DeadlinePassed) if grpc => {
            tap.on_end(false);
            exchange.upload.cancel();
            let (code, message) = super::h2_request::grpc_status_for(504);
            session.finish_body(&[("grpc-status", code), ("grpc-message", message)]);
        }
        Err(e) => {
            // The body stays unfinished: the driver resets the client's
            // stream (or closes its connection), so it cannot take a cut
            // body for whole.
            tap.on_end(false);
            exchange.upload.cancel();
            let addr = group.servers[server].addr;
            match e {
                ExchangeError::Downstream => {
                    debug!(upstream = %addr, "client went away; upstream stream reset")
                }
                e => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, error = ?e, "upstream HTTP/2 response body cut short")
                }
            }
        }
    }
    drop(in_flight);
}

/// Waits for room for a new stream on the connection, then opens it with the
/// request head (END_STREAM with it when there is no body).
async fn open_stream(
    mut send: SendRequest<Bytes>,
    lease: &StreamLease,
    request: http::Request<()>,
    no_body: bool,
) -> Result<(h2::SendStream<Bytes>, h2::client::ResponseFuture), h2::Error> {
    let opened = async {
        std::future::poll_fn(|cx| send.poll_ready(cx)).await?;
        let (response, upload) = send.send_request(request, no_body)?;
        Ok((upload, response))
    }
    .await;
    if let Err(e) = &opened {
        let e: &h2::Error = e;
        if e.is_io() || e.is_go_away() || e.is_library() {
            lease.connection().close();
        }
    }
    opened
}
