//! Phase 1, the request filter: the limits a request must meet, and the 503 of
//! a request refused at the group's `max_in_flight`.

use tracing::debug;

use super::request_info::RequestInfo;

use super::upstream::UpstreamGroup;
use crate::config::HttpConfig;
use crate::http1::body::BodyDecoder;
use crate::http1::parse::{BodyKind, Method};
use crate::http1::write::{self, ConnectionHeader};
use crate::observe::metrics::HandlerKind;
use crate::server::h1::{Downstream, Exit, Http1Conn};

/// The decoder of a request's body, bounded by `max_body_bytes`.
pub(super) fn decoder_for(info: &RequestInfo, http: &HttpConfig) -> BodyDecoder {
    BodyDecoder::new(info.body).with_max_body(http.max_body_bytes)
}

/// Runs `decoder` over the body bytes already buffered from `conn.rpos`; true,
/// with `conn.rpos` past the body, when they hold the rest of it.
pub(super) fn consume_buffered_body<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    decoder: &mut BodyDecoder,
) -> bool {
    let Some(b) = conn.bufs.as_ref() else {
        return false;
    };
    loop {
        if decoder.is_done() {
            return true;
        }
        let Ok(step) = decoder.decode(&b.read[conn.rpos..]) else {
            return false;
        };
        conn.rpos += step.consumed;
        if step.done {
            return true;
        }
        if step.consumed == 0 || conn.rpos >= b.read.len() {
            return false;
        }
    }
}

/// Answers 503 with `Retry-After` when this worker's share of the group's
/// `max_in_flight` is taken, without touching an upstream. The connection stays
/// open when the request's body (if any) is already buffered whole, which is
/// then dropped; otherwise it closes after the answer.
pub(super) fn refuse_busy<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    info: &RequestInfo,
    group: &UpstreamGroup,
) -> bool {
    let ctx = conn.ctx;
    let mut decoder = decoder_for(info, &ctx.config.http);
    ctx.stats.upstream_rejected.add(1);
    ctx.stats.request(HandlerKind::Proxy, 503);
    conn.status = 503;
    debug!(group = %group.name, peer = %conn.peer, "max_in_flight reached: 503");
    let b = conn.bufs.as_ref().expect("buffers held while handling");
    conn.rpos += b.head.head_len;
    let complete = consume_buffered_body(conn, &mut decoder);
    if !complete {
        conn.linger_on_close = true;
    }
    let keep_alive = info.keep_alive && complete && !ctx.draining.get();
    let b = conn.bufs.as_mut().expect("buffers held while handling");
    let mut date = ctx.date.borrow_mut();
    let retry_after = [("Retry-After", group.retry_after.as_bytes())];
    // The route's response filters see the proxy's own answers too.
    let edited = conn
        .response_filters
        .as_deref()
        .map(|f| f.own_answer(&conn.request_id, 503, &retry_after));
    let connection = ConnectionHeader::choose(keep_alive, info.version);
    let is_head = info.method == Method::Head;
    match &edited {
        Some(e) => write::write_status_body(
            &mut b.write,
            503,
            date.get(),
            connection,
            e.fields(),
            is_head,
        ),
        None => write::write_status_body(
            &mut b.write,
            503,
            date.get(),
            connection,
            retry_after,
            is_head,
        ),
    }
    keep_alive
}

/// Phase 1: refuses what cannot be proxied: a body declared larger than
/// `max_body_bytes` (413), and CONNECT (405: this is not a forward proxy).
pub(super) fn filter_request(info: &RequestInfo, http: &HttpConfig) -> Result<(), Exit> {
    if let BodyKind::Length(n) = info.body {
        if n > http.max_body_bytes {
            return Err(Exit::Reject(413));
        }
    }
    if info.method == Method::Connect {
        return Err(Exit::Reject(405));
    }
    Ok(())
}
