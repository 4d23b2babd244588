//! Phase 8, relaying the response body: the head goes to the session, then the
//! body is decoded from the upstream's framing and pushed piece by piece (the
//! driver frames it for the client), with backpressure; the upstream
//! connection goes back to the pool when the exchange ended cleanly.

use std::time::Instant;

use super::attempts::{Answered, ExchangeBufs};
use super::h1_attempt::Http1Answer;
use super::request_info::RequestInfo;
use super::rewrite_response::encode_response_fields;
use super::tunnel::UpgradeTunnel;
use super::ProxyRoute;
use crate::cache::tap::{ResponseTap, TapHead, UpstreamHead};
use crate::deadline;
use crate::http::{Body, ResponseHead, Session, SessionExt};
use crate::http1::body::BodyDecoder;
use crate::http1::parse::{BodyKind, Method};
use crate::http1::parse_content_length;
use crate::http1::response::ResponseBody;
use crate::http1::HeaderLines;
use crate::upstream::group_state::GroupAdmission;

/// Upstream read buffer capacity while streaming a body.
pub(super) const UPSTREAM_READ_BUF: usize = 32 * 1024;

/// Phases 7 and 8: answers with the upstream's head, streams the body, and
/// returns the upstream connection to the pool when the exchange ended
/// cleanly. A body cut short is left unfinished: the driver then ends the
/// connection, so the client cannot take it for whole.
#[allow(clippy::too_many_arguments)]
pub(super) async fn relay_response<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &ProxyRoute,
    info: &RequestInfo,
    mut answered: Answered<'h, Http1Answer>,
    bufs: &mut ExchangeBufs,
    head_at: Instant,
    admission: GroupAdmission<'h>,
    tap: &mut T,
) {
    let group = &*route.group;
    let server = answered.server;
    let addr = group.servers[server].addr;
    let resp = &bufs.resp;
    let up_read = &mut bufs.up_read;
    let fields = &mut bufs.up_head;
    fields.clear();

    if resp.status == 101 {
        encode_response_fields(fields, resp, up_read, false, true);
        let head = ResponseHead {
            date: None,
            status: 101,
            fields: &[],
            configured: None,
            field_lines: fields,
        };
        let tunnel = UpgradeTunnel {
            up: answered.upstream.up.stream,
            from_upstream: up_read[resp.head_len..].to_vec(),
            idle: group.read_timeout,
            upstream: group.server_name(addr).into(),
            _admission: admission,
            _in_flight: answered.in_flight,
        };
        session.send_response(&head, Body::Tunnel(Box::new(tunnel)));
        return;
    }

    let (len, mut decoder) = match resp.body {
        // HEAD: the length the upstream gave is the client's too.
        ResponseBody::None if info.method == Method::Head => (
            resp.header(up_read, "content-length")
                .and_then(parse_content_length),
            None,
        ),
        ResponseBody::None => (Some(0), None),
        ResponseBody::Length(n) => (Some(n), Some(BodyDecoder::new(BodyKind::Length(n)))),
        ResponseBody::Chunked => (None, Some(BodyDecoder::new(BodyKind::Chunked))),
        ResponseBody::UntilClose => (None, Some(BodyDecoder::until_close())),
    };
    // A 304's Content-Length describes the body it stands for: kept as sent.
    let keep_length = resp.body == ResponseBody::None && resp.status == 304;
    encode_response_fields(fields, resp, up_read, keep_length, false);
    let tap_head = TapHead {
        head: UpstreamHead::Http1 {
            parsed: resp,
            buf: up_read,
        },
        body_len: len,
    };
    tap.on_head(&session.request(), tap_head, fields);
    let head = ResponseHead {
        date: None,
        status: resp.status,
        fields: &[],
        configured: None,
        field_lines: fields,
    };
    session.send_response(&head, Body::Push(len));

    let mut pos = resp.head_len;
    let mut clean = true;
    // Whether the body took a read after the head (then the connection's idle
    // time starts later than `head_at`).
    let mut read_more = false;
    let mut client_gone = false;
    if let Some(decoder) = decoder.as_mut() {
        loop {
            let step = match decoder.decode(&up_read[pos..]) {
                Ok(s) => s,
                Err(e) => {
                    crate::warn_limited!(upstream = %group.server_name(addr), address = %addr, group = %group.name, error = %e, "upstream response body malformed");
                    return;
                }
            };
            pos += step.consumed;
            if !step.data.is_empty() {
                tap.on_body(step.data);
                // A client gone away while the body is stored for others:
                // the rest is still read and stored.
                if !client_gone && session.write_body(step.data).await.is_err() {
                    if !tap.storing() {
                        return;
                    }
                    client_gone = true;
                }
            }
            if step.done {
                break;
            }
            if step.consumed > 0 && pos < up_read.len() {
                // More chunks already buffered: decode them before reading again.
                continue;
            }
            if pos >= up_read.len() {
                up_read.clear();
                pos = 0;
            } else if pos > 0 {
                up_read.drain(..pos);
                pos = 0;
            }
            if up_read.capacity() - up_read.len() < 4096 {
                up_read.reserve(UPSTREAM_READ_BUF);
            }
            // Backpressure: nothing more is read from the upstream until the
            // client has taken what is pending.
            if !client_gone && session.flush_body().await.is_err() {
                if !tap.storing() {
                    return;
                }
                client_gone = true;
            }
            read_more = true;
            match deadline::within(
                group.read_timeout,
                answered.upstream.up.stream.read_into(up_read),
            )
            .await
            {
                Ok(Ok(0)) => {
                    if decoder.finish().is_ok() {
                        clean = false;
                        break;
                    }
                    crate::warn_limited!(upstream = %group.server_name(addr), address = %addr, group = %group.name, "upstream closed inside the response body");
                    return;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    crate::warn_limited!(upstream = %group.server_name(addr), address = %addr, group = %group.name, error = %e, "upstream failed inside the response body");
                    return;
                }
                Err(_) => {
                    crate::warn_limited!(upstream = %group.server_name(addr), address = %addr, group = %group.name, "upstream response body stalled (read_timeout)");
                    return;
                }
            }
        }
    }
    tap.on_end(true);
    session.finish_body(&[]);
    drop(admission);
    let idle_since = if read_more { Instant::now() } else { head_at };
    let at_end = clean && pos >= up_read.len();
    release_upstream(session, route, answered, bufs, idle_since, at_end);
}

/// Returns the upstream connection to the pool when its exchange ended
/// cleanly: `at_end` says the response was read to its end and nothing
/// follows it. A request cut short by an early answer leaves the connection
/// mid-message: it is not reused. Nor is one of a draining configuration,
/// whose pools are no longer swept.
pub(super) fn release_upstream(
    session: &mut dyn Session<'_>,
    route: &ProxyRoute,
    answered: Answered<'_, Http1Answer>,
    bufs: &ExchangeBufs,
    idle_since: Instant,
    at_end: bool,
) {
    let ctx = session.worker();
    let state = &ctx.upstreams.groups[route.group.index];
    if at_end && answered.upstream.complete && bufs.resp.keep_alive && !ctx.draining.get() {
        state
            .pool
            .checkin_pooled(answered.server, answered.upstream.up, idle_since);
    }
}
