//! `proxy`: HTTP/1.1 reverse proxy. Pingora's shape: the two sides are named
//! *downstream* (the client) and *upstream* (the origin server), errors record
//! which side failed ([`crate::upstream::error`]), and every request goes through the same
//! phases in one fixed order, each a function in a file of its own:
//!
//! 1. **request filter** ([`request_filter`]): refuse what cannot be proxied
//!    (CONNECT, an oversized body), admission under `max_in_flight`;
//! 2. **choose upstream** ([`choose_upstream`]): the hash key, balancing over
//!    the servers that are up ([`crate::upstream::balance`]);
//! 3. **rewrite the upstream request** ([`rewrite_request`]): hop-by-hop fields
//!    dropped, forwarding fields added, framing made unambiguous;
//! 4. **connect** ([`mod@crate::upstream::connect`]): a pooled connection ([`crate::upstream::pool`]) or a new one;
//! 5. **send** ([`send`]): the head and the body, re-framed, with backpressure,
//!    stopping when the upstream answers early;
//! 6. **read the response head** ([`response_head`]), interim heads relayed
//!    to the client ([`interim`]);
//! 7. **rewrite the downstream response** ([`rewrite_response`]);
//! 8. **relay the body** ([`relay_body`]), never holding more than a buffer;
//!    a cleanly finished upstream connection goes back to the pool;
//! 9. **tunnel** ([`tunnel`]) after a 101 (an HTTP/2 extended CONNECT is
//!    relayed as an HTTP/1.1 upgrade, with a key of the proxy's own:
//!    [`websocket_key`]);
//! 10. **log** ([`log`]): statistics, the access-log fields, failures with the
//!     upstream address, passive health.
//!
//! Phases 2 to 6 repeat as the retry policy ([`crate::upstream::retry`], a pure function) says
//! ([`attempts`]). Everything per request lives in buffers reused through the
//! worker, so a warm keep-alive exchange does not allocate.

pub mod attempts;
pub mod cached;
pub mod choose_upstream;
pub mod configure;
pub mod error_page;
pub mod fields;
pub mod h1_attempt;
pub mod h2_attempt;
pub mod h2_exchange;
pub mod h2_forward;
pub mod h2_request;
pub mod interim;
pub mod log;
mod refresh_session;
pub mod relay_body;
pub mod request_filter;
pub mod request_info;
pub mod response_head;
pub mod rewrite_request;
pub mod rewrite_response;
pub mod send;
#[cfg(test)]
mod tests;
pub mod tunnel;
mod websocket_key;

use std::cell::RefCell;
use std::sync::Arc;

use tracing::debug;

use crate::cache::answer::answer_instead;
use crate::cache::tap::{NoTap, ResponseTap, UpstreamHead};
use crate::http::Session;
use crate::upstream::request_head::{FieldList, RequestHeadSink};
use crate::upstream::UpstreamGroup;
pub use crate::upstream::{connect, ErrorKind, ProxyError, Side};
use crate::worker::{WorkerCtx, READ_BUF};
use attempts::{run_attempts, ExchangeBufs};
use error_page::{answer_with_page, body_fully_read};
use h1_attempt::Http1Attempt;
use log::{log_failure, log_response};
use relay_body::relay_response;
use relay_body::release_upstream;
use request_filter::{filter_request, refuse_busy, take_buffered_body};
use request_info::RequestInfo;
use send::BodySend;

/// Which forwarding fields a route adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarding {
    /// `X-Forwarded-For` (appended), `X-Forwarded-Proto`, `X-Forwarded-Host` (replaced).
    pub x_forwarded: bool,
    /// RFC 7239 `Forwarded` (appended).
    pub forwarded: bool,
}

/// A `proxy` route: the group and how requests are rewritten for it.
#[derive(Debug)]
pub struct ProxyRoute {
    /// Where requests go.
    pub group: Arc<UpstreamGroup>,
    /// Forwarding fields added.
    pub forwarding: Forwarding,
    /// Add `Via: 1.1 pier`.
    pub via: bool,
    /// Send the client's Host (else the server's `host:port`).
    pub preserve_host: bool,
    /// Header set to the client address; incoming copies are removed.
    pub client_addr_header: Option<Box<str>>,
    /// Header set to the client certificate's subject; incoming copies are removed.
    pub client_cert_header: Option<Box<str>>,
    /// The route's `request_headers` rules for the request sent upstream.
    pub request_rules: Option<crate::filter::headers::HeaderRules>,
    /// Pages sent instead of upstream 5xx answers and Pier's own 502/503/504.
    pub error_pages: error_page::ProxyErrorPages,
    /// The cache zone that stores this route's responses, if any.
    pub cache: Option<Arc<crate::cache::zone::CacheZone>>,
}

/// A worker's proxy buffers, reused from request to request: its slot of
/// handler state ([`crate::worker::HandlerSlots`]).
#[derive(Default)]
pub struct ProxyBuffers {
    bufs: RefCell<Vec<Vec<u8>>>,
    /// Whole sets of an exchange's buffers: one pop and one push per request.
    exchanges: RefCell<Vec<ExchangeBufs>>,
    /// Request heads as field lists, for HTTP/2 upstreams.
    field_lists: RefCell<Vec<FieldList>>,
}

/// Buffers kept for reuse per worker.
const POOLED_BUFS: usize = 256;
/// A buffer that grew beyond this is freed rather than pooled.
const POOLED_BUF_MAX: usize = 128 * 1024;

impl ProxyBuffers {
    /// The buffers of the worker (and generation) `ctx`.
    pub(super) fn of(ctx: &WorkerCtx) -> &ProxyBuffers {
        ctx.handlers.get()
    }

    pub(super) fn take_buf(&self) -> Vec<u8> {
        self.bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUF))
    }

    pub(super) fn give_buf(&self, mut b: Vec<u8>) {
        if b.capacity() > POOLED_BUF_MAX || b.capacity() == 0 {
            return;
        }
        b.clear();
        let mut bufs = self.bufs.borrow_mut();
        if bufs.len() < POOLED_BUFS {
            bufs.push(b);
        }
    }

    /// A request head as a field list, empty.
    pub(super) fn take_field_list(&self) -> FieldList {
        self.field_lists.borrow_mut().pop().unwrap_or_default()
    }

    /// Returns a field list for the next request; one that grew too large is freed.
    pub(super) fn give_field_list(&self, mut list: FieldList) {
        if list.capacity() > POOLED_BUF_MAX {
            return;
        }
        list.clear();
        let mut lists = self.field_lists.borrow_mut();
        if lists.len() < POOLED_BUFS {
            lists.push(list);
        }
    }

    fn take_exchange(&self) -> Option<ExchangeBufs> {
        self.exchanges.borrow_mut().pop()
    }

    fn give_exchange(&self, b: ExchangeBufs) {
        let mut sets = self.exchanges.borrow_mut();
        // Two buffers a set: as many buffers held as the loose ones.
        if sets.len() < POOLED_BUFS / 2 {
            sets.push(b);
        }
    }
}

/// Serves a request routed to a proxy: the phases in order, through the
/// session alone (the driver frames, keeps alive and logs).
pub(crate) async fn forward<'h>(session: &mut dyn Session<'h>, route: &'h ProxyRoute) {
    forward_with(session, route, &mut NoTap).await;
}

/// The phases with a cache's `tap` on them ([`crate::cache::tap`]); with
/// [`NoTap`] they compile to the plain proxy. The tap goes with the request
/// whichever protocol its group speaks, so a cache stores, revalidates and
/// collapses in front of HTTP/1 and HTTP/2 upstreams alike.
pub(crate) async fn forward_with<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &'h ProxyRoute,
    tap: &mut T,
) {
    let ctx = session.worker();
    let group = &*route.group;
    let state = &ctx.upstreams.groups[group.index];
    let h2_upstream = group.protocol == crate::upstream::group::UpstreamProtocol::H2;
    let info = RequestInfo::new(&session.request(), h2_upstream);
    // The driver read the wake-up clock for the request's start already.
    let started = ctx.clock.now().into_std();

    // Phase 1: request filter. The admission is held until the response is
    // relayed (or the tunnel closes): the request is in flight until then.
    if !filter_request(session, &info, route) {
        return;
    }
    let Some(admission) = state.admit() else {
        refuse_busy(session, &info, route);
        return;
    };

    if h2_upstream {
        h2_forward::forward_h2(session, route, &info, started, admission, tap).await;
        return;
    }

    // Phases 2 to 6, repeated as the retry policy says.
    let mut bufs = ExchangeBufs::take(ProxyBuffers::of(ctx), info.body);
    let mut body = BodySend::new(info.body);
    let mut exchange = Http1Attempt {
        group,
        state,
        info: &info,
        bufs: &mut bufs,
        body: &mut body,
    };
    let result = run_attempts(session, route, &info, started, &mut exchange, tap).await;

    // Phases 7 to 10.
    ctx.stats.upstream_requests.add(1);
    match result {
        // The client failed: the driver answers for it.
        Err(_) => {}
        Ok(Err(failed)) => {
            let status = log_failure(session, group, &failed.error, failed.addr, started);
            answer_unanswered(session, route, tap, status, false).await;
        }
        Ok(Ok(answered)) => {
            let head_at = log_response(session, group, answered.server, started, answered.head_at);
            let head = UpstreamHead::Http1 {
                parsed: &bufs.resp,
                buf: &bufs.up_read,
            };
            if answered_from_cache(session, tap, head, head_at).await {
                // A 304 to a revalidation, or a 5xx when stale may answer:
                // the stored response went out, the upstream's body never
                // does; the connection is kept when that body was read.
                let reusable = body_fully_read(&bufs);
                drop(admission);
                release_upstream(session, route, answered, &bufs, head_at, reusable);
                bufs.give_back(ProxyBuffers::of(ctx));
                return;
            }
            if !answered.upstream.complete && !take_buffered_body(session, &info, body.waited) {
                // The upstream answered before the whole body came (nginx does the
                // same): the answer is relayed, and since the rest of the body is
                // unread, the driver closes the client's connection after it.
                debug!(upstream = %group.servers[answered.server].authority, peer = %session.request().peer(), status = bufs.resp.status, "upstream answered before the whole request body");
            }
            if route.error_pages.intercepts(bufs.resp.status) {
                // The upstream's body is replaced, never relayed.
                let reusable = body_fully_read(&bufs);
                answer_with_page(session, &route.error_pages, bufs.resp.status, None);
                drop(admission);
                release_upstream(session, route, answered, &bufs, head_at, reusable);
                bufs.give_back(ProxyBuffers::of(ctx));
                return;
            }
            relay_response(
                session, route, &info, answered, &mut bufs, head_at, admission, tap,
            )
            .await;
        }
    }
    bufs.give_back(ProxyBuffers::of(ctx));
}

/// Phase 10 when no upstream answered: a stored response when the cache lets
/// one stand in for the failure (stale-if-error), else Pier's own answer for
/// `status`: a gRPC status to a gRPC call, the route's error page otherwise.
async fn answer_unanswered<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    route: &'h ProxyRoute,
    tap: &mut T,
    status: u16,
    grpc: bool,
) {
    match tap.instead_of_error() {
        Some(instead) => answer_instead(session, instead, std::time::Instant::now()).await,
        None if grpc => h2_request::answer_grpc_error(session, status),
        None => answer_with_page(session, &route.error_pages, status, None),
    }
}

/// Phase 7 with a cache: whether the cache answered instead of the upstream's
/// `head` (a 304 to its revalidation, a 5xx while a stale response may stand
/// in), sending the stored response. The caller then drops the upstream's
/// body, in the way its protocol allows.
async fn answered_from_cache<'h, T: ResponseTap>(
    session: &mut dyn Session<'h>,
    tap: &mut T,
    head: UpstreamHead<'_>,
    at: std::time::Instant,
) -> bool {
    match tap.instead_of_head(head) {
        Some(instead) => {
            answer_instead(session, instead, at).await;
            true
        }
        None => false,
    }
}
