//! Phase 10, logging: statistics, the access log's status and upstream
//! fields, failures with the upstream address, and passive health.

use std::net::SocketAddr;
use std::time::Instant;

use tracing::warn;

use super::upstream::{GroupState, UpstreamGroup};
use super::ProxyError;
use crate::observe::metrics::HandlerKind;
use crate::server::h1::{Downstream, Http1Conn};

/// Counts a failure against a server's passive health, logging when it goes down.
pub(super) fn note_failure(
    group: &UpstreamGroup,
    state: &GroupState,
    server: usize,
    e: &ProxyError,
) {
    if state.record_failure(group, server, std::time::Instant::now()) {
        warn!(
            upstream = %group.servers[server].addr,
            group = %group.name,
            fails = group.max_fails,
            down_for = ?group.fail_timeout,
            error = %e,
            "upstream marked down"
        );
    }
}

/// Phase 10 for a request no upstream answered: counts it, fills the access
/// log's upstream fields, logs the failure; returns the status to answer with.
pub(super) fn log_failure<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    group: &UpstreamGroup,
    error: &ProxyError,
    addr: Option<SocketAddr>,
    started: Instant,
) -> u16 {
    conn.ctx.stats.upstream_errors.add(1);
    let status = error.status();
    conn.upstream = addr.map(|a| (a, started.elapsed()));
    match addr {
        Some(a) => {
            crate::warn_limited!(upstream = %a, group = %group.name, peer = %conn.peer, status, error = %error, "proxy error")
        }
        None => {
            crate::warn_limited!(group = %group.name, peer = %conn.peer, status, error = %error, "proxy error")
        }
    }
    status
}

/// Phase 10 for an answered request, taken when its head came: counts it and
/// fills the access log's status and upstream fields. Returns when the head came.
pub(super) fn log_response<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    group: &UpstreamGroup,
    server: usize,
    status: u16,
    started: Instant,
) -> Instant {
    let ctx = conn.ctx;
    let head_at = Instant::now();
    let elapsed = head_at.saturating_duration_since(started);
    ctx.stats.upstream_latency(elapsed);
    ctx.stats.request(HandlerKind::Proxy, status);
    conn.status = status;
    conn.upstream = Some((group.servers[server].addr, elapsed));
    head_at
}
