//! The proxy's phases for a `protocol = "h2"` group, one request as one
//! stream: phases 2 to 6 in the one attempts loop ([`super::attempts`]) over
//! [`super::h2_attempt`], then the relay of the answered stream's head, body
//! and trailers ([`super::h2_exchange`]) and the log. A `grpc-timeout`
//! bounds the whole call: when it passes, the stream is reset upstream and
//! the client gets `DEADLINE_EXCEEDED`.
//!
//! A cache's tap ([`crate::cache::tap`]) rides on these phases as on the
//! HTTP/1 ones: it edits the request before it is built, may answer instead
//! of a failure or of the head, and sees the head and body as they are
//! relayed, so a cached route stores, revalidates and collapses the same in
//! front of an h2 group.

use std::time::Instant;

use tracing::debug;

use super::attempts::{run_attempts, Answered, DownstreamFailed};
use super::error_page::answer_with_page;
use super::h2_attempt::{H2Answer, H2Attempt};
use super::h2_exchange::{ExchangeError, Limits};
use super::h2_request::{grpc_timeout, is_grpc};
use super::log::{log_failure, log_response};
use super::request_filter::take_buffered_body;
use super::request_info::RequestInfo;
use super::tunnel::UpgradeTunnel;
use super::websocket_key::accept_value;
use super::{answer_unanswered, answered_from_cache, ProxyBuffers, ProxyRoute};
use crate::cache::tap::{ResponseTap, TapHead, UpstreamHead};
use crate::http::{Body, Session, Tunnel};
use crate::http1::parse::Method;
use crate::http2::client::ResponseHead;
use crate::upstream::group_state::GroupAdmission;
use crate::upstream::h2_tunnel::H2TunnelIo;

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
    let buffers = ProxyBuffers::of(ctx);
    let mut encoded = buffers.take_buf();
    let mut head = buffers.take_field_list();
    let state = &ctx.upstreams.groups[group.index];
    let mut exchange = H2Attempt {
        route,
        state,
        info,
        limits,
        head: &mut head,
        refusals: 0,
    };
    let attempted = run_attempts(session, route, info, started, &mut exchange, tap).await;
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
            relay_h2(session, &relay, answered, &mut encoded, admission, tap).await;
        }
    }
    // The admission, where no tunnel took it, ends here.
    buffers.give_buf(encoded);
    buffers.give_field_list(head);
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
    answered: Answered<'h, H2Answer>,
    fields: &mut Vec<u8>,
    admission: GroupAdmission<'h>,
    tap: &mut T,
) {
    let Answered {
        server,
        in_flight,
        upstream: H2Answer { mut exchange, head },
        ..
    } = answered;
    let Relay {
        route,
        info,
        limits,
        grpc,
        head_at,
    } = *relay;
    let group = &*route.group;
    let status = head.status();
    if info.extended_connect && (200..300).contains(&status) {
        let tunnel = UpgradeTunnel {
            up: H2TunnelIo::new(exchange.stream),
            from_upstream: Vec::new(),
            idle: group.read_timeout,
            upstream: group.server_name(group.servers[server].addr).into(),
            _admission: admission,
            _in_flight: in_flight,
        };
        answer_tunnel(session, &head, fields, Box::new(tunnel));
        return;
    }
    let upstream_head = UpstreamHead::H2 { head: &head };

    // Phase 7: the response head.
    if answered_from_cache(session, tap, upstream_head, head_at).await {
        // A 304 to a revalidation, or a 5xx while stale may answer: the
        // stored response went out, the upstream's body never does.
        exchange.cancel();
        take_buffered_body(session, info, exchange.upload.polled);
        return;
    }
    if !grpc && route.error_pages.intercepts(status) {
        // The upstream's body is replaced, never relayed: its stream is reset.
        answer_with_page(session, &route.error_pages, status, None);
        exchange.cancel();
        take_buffered_body(session, info, exchange.upload.polled);
        return;
    }
    encode_h2_fields(fields, &head, status == 304);
    let len = head.content_length();
    let tap_head = TapHead {
        head: upstream_head,
        body_len: len,
    };
    tap.on_head(&session.request(), tap_head, fields);
    let response_head = crate::http::ResponseHead {
        date: None,
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
                    .flat_map(|t| t.fields())
                    .filter_map(|(n, v)| Some((std::str::from_utf8(n).ok()?, v)))
                    .collect();
                session.finish_body(&list);
            }
            if !exchange.upload.finished {
                // The upstream answered before the whole request body came:
                // what is already here is dropped, else the driver closes.
                exchange.cancel();
                take_buffered_body(session, info, exchange.upload.polled);
            }
        }
        Err(ExchangeError::DeadlinePassed) if grpc => {
            tap.on_end(false);
            exchange.cancel();
            let (code, message) = super::h2_request::grpc_status_for(504);
            session.finish_body(&[("grpc-status", code), ("grpc-message", message)]);
        }
        Err(e) => {
            // The body stays unfinished: the driver resets the client's
            // stream (or closes its connection), so it cannot take a cut
            // body for whole.
            tap.on_end(false);
            exchange.cancel();
            let addr = group.servers[server].addr;
            match e {
                ExchangeError::Downstream => {
                    debug!(upstream = %group.server_name(addr), "client went away; upstream stream reset")
                }
                e => {
                    crate::warn_limited!(upstream = %group.server_name(addr), address = %addr, group = %group.name, error = ?e, "upstream HTTP/2 response body cut short")
                }
            }
        }
    }
    drop(in_flight);
    drop(admission);
}

/// Phase 7 for an HTTP/2 head: its end-to-end fields as `name: value\r\n`
/// lines into `fields`, without `Date`, `Server`, framing and
/// connection-specific fields; `keep_length` passes `content-length`
/// through (a 304's).
fn encode_h2_fields(fields: &mut Vec<u8>, head: &ResponseHead, keep_length: bool) {
    fields.clear();
    for (name, value) in head.fields() {
        let keep = match name {
            b"content-length" => keep_length,
            b"date" | b"server" | b"connection" | b"keep-alive" | b"proxy-connection"
            | b"transfer-encoding" | b"upgrade" | b"te" | b"trailer" => false,
            _ => true,
        };
        if keep {
            fields.extend_from_slice(name);
            fields.extend_from_slice(b": ");
            fields.extend_from_slice(value);
            fields.extend_from_slice(b"\r\n");
        }
    }
}

/// Phase 9 for an extended CONNECT the upstream accepted with a 2xx: the
/// client gets its 101 with the upstream's fields (its subprotocol and
/// extensions), which an HTTP/2 client's stream answers as `:status 200`;
/// an HTTP/1.1 client's handshake is completed with `Upgrade` and the
/// accept value of its own key, which the upstream never saw (RFC 8441
/// §5). The tunnel then relays the stream's DATA both ways.
fn answer_tunnel<'h>(
    session: &mut dyn Session<'h>,
    head: &ResponseHead,
    fields: &mut Vec<u8>,
    tunnel: Box<dyn Tunnel + 'h>,
) {
    encode_h2_fields(fields, head, false);
    let request = session.request();
    if !request.is_extended_connect() {
        let key = request.header("sec-websocket-key").unwrap_or_default();
        fields.extend_from_slice(b"Upgrade: websocket\r\nSec-WebSocket-Accept: ");
        fields.extend_from_slice(&accept_value(key));
        fields.extend_from_slice(b"\r\n");
    }
    let head = crate::http::ResponseHead {
        date: None,
        status: 101,
        fields: &[],
        configured: None,
        field_lines: fields,
    };
    session.send_response(&head, Body::Tunnel(tunnel));
}
