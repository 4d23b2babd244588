//! Phase 1, the request filter: the limits a request must meet, and the 503 of
//! a request refused at the group's `max_in_flight`.

use std::task::{Context, Poll, Waker};

use tracing::debug;

use super::error_page::answer_with_page;
use super::request_info::RequestInfo;
use super::ProxyRoute;
use crate::http::Session;
use crate::http1::parse::{BodyKind, Method};

/// Request body bytes dropped at most by [`take_buffered_body`]: a body that
/// is still streaming in is not read to its end on the worker's loop.
const TAKE_BUFFERED_MAX: usize = 64 * 1024;

/// Takes the rest of the request body from the session as far as it is
/// already here (at most [`TAKE_BUFFERED_MAX`]), without waiting; true when
/// that was all of it (the connection can then carry another request). The
/// client is never invited to send a body it holds back for `100 Continue`
/// (`waited`: the invitation went out already).
pub(super) fn take_buffered_body(
    session: &mut dyn Session<'_>,
    info: &RequestInfo,
    waited: bool,
) -> bool {
    if info.body == BodyKind::None {
        return true;
    }
    if info.expect_continue && !waited {
        return false;
    }
    let mut cx = Context::from_waker(Waker::noop());
    let mut taken = 0;
    while taken <= TAKE_BUFFERED_MAX {
        match session.poll_body(&mut cx) {
            Poll::Ready(Ok(0)) => return true,
            Poll::Ready(Ok(n)) => {
                session.consume_body(n);
                taken += n;
            }
            Poll::Ready(Err(_)) | Poll::Pending => return false,
        }
    }
    false
}

/// Answers 503 with `Retry-After` when this worker's share of the group's
/// `max_in_flight` is taken, without touching an upstream. The request's body
/// is dropped when it is already buffered whole (the connection then stays
/// open); otherwise the driver closes after the answer.
pub(super) fn refuse_busy<'h>(
    session: &mut dyn Session<'h>,
    info: &RequestInfo,
    route: &'h ProxyRoute,
) {
    let group = &*route.group;
    session.worker().stats.upstream_rejected.add(1);
    debug!(group = %group.name, peer = %session.request().peer(), "max_in_flight reached: 503");
    take_buffered_body(session, info, false);
    answer_with_page(
        session,
        &route.error_pages,
        503,
        Some(("Retry-After", group.retry_after.as_bytes())),
    );
}

/// Phase 1: refuses what cannot be proxied; false when the request was
/// refused. A body declared larger than `max_body_bytes` is the driver's 413
/// (its body reader refuses it at once), CONNECT a 405: this is not a
/// forward proxy; an extended CONNECT that cannot be relayed a 501, a
/// WebSocket handshake without its key a 400.
pub(super) fn filter_request<'h>(
    session: &mut dyn Session<'h>,
    info: &RequestInfo,
    route: &'h ProxyRoute,
) -> bool {
    if let BodyKind::Length(n) = info.body {
        if n > session.worker().config.http.max_body_bytes {
            let mut cx = Context::from_waker(Waker::noop());
            // Refused before a byte is read; the driver answers 413 and closes.
            let _ = session.poll_body(&mut cx);
            return false;
        }
    }
    if info.method == Method::Connect {
        answer_with_page(session, &route.error_pages, 405, None);
        return false;
    }
    let request = session.request();
    // An HTTP/2 extended CONNECT goes to an HTTP/1.1 upstream as a
    // WebSocket upgrade, the one translation RFC 8441 §5 defines (another
    // protocol is 501), and to an h2 upstream as the extended CONNECT it is.
    if request.is_extended_connect() && info.websocket_key.is_none() && !info.extended_connect {
        answer_with_page(session, &route.error_pages, 501, None);
        return false;
    }
    // An HTTP/1.1 WebSocket handshake carried as an extended CONNECT is
    // answered with the accept value of the client's key: without one,
    // it is no handshake (RFC 6455 §4.2.1).
    if info.extended_connect
        && !request.is_extended_connect()
        && request.header("sec-websocket-key").is_none()
    {
        answer_with_page(session, &route.error_pages, 400, None);
        return false;
    }
    true
}
