//! Phase 10, logging: statistics, the access log's upstream fields, failures
//! with the upstream address, and passive health. The request's own count and
//! status are the driver's.

use std::net::SocketAddr;
use std::time::Instant;

use tracing::warn;

use super::ProxyError;
use crate::http::Session;
use crate::upstream::group::UpstreamGroup;
use crate::upstream::group_state::GroupState;

/// Counts a failure against a server's passive health, logging when it goes down.
pub(super) fn note_failure(
    group: &UpstreamGroup,
    state: &GroupState,
    server: usize,
    e: &ProxyError,
) {
    if state.record_failure(group, server, std::time::Instant::now()) {
        warn!(
            upstream = %group.servers[server].authority,
            address = %group.servers[server].addr,
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
pub(super) fn log_failure(
    session: &mut dyn Session<'_>,
    group: &UpstreamGroup,
    error: &ProxyError,
    addr: Option<SocketAddr>,
    started: Instant,
) -> u16 {
    session.worker().stats.upstream_errors.add(1);
    let status = error.status();
    let peer = session.request().peer();
    match addr {
        Some(a) => {
            session.note_upstream(a, started.elapsed());
            crate::warn_limited!(upstream = %group.server_name(a), address = %a, group = %group.name, peer = %peer, status, error = %error, "proxy error")
        }
        None => {
            crate::warn_limited!(group = %group.name, peer = %peer, status, error = %error, "proxy error")
        }
    }
    status
}

/// Phase 10 for an answered request, whose head came at `head_at`: counts its
/// latency and fills the access log's upstream fields. Returns `head_at`.
pub(super) fn log_response(
    session: &mut dyn Session<'_>,
    group: &UpstreamGroup,
    server: usize,
    started: Instant,
    head_at: Instant,
) -> Instant {
    let elapsed = head_at.saturating_duration_since(started);
    session.worker().stats.upstream_latency(elapsed);
    session.note_upstream(group.servers[server].addr, elapsed);
    head_at
}
