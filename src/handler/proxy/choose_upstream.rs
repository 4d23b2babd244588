//! Phase 2, choosing the upstream: the request's hash key (for `balance =
//! "hash"`) and the pick among the servers that are up
//! ([`GroupState::pick_server`]).

use std::net::{IpAddr, SocketAddr};

use super::{ErrorKind, ProxyError};
use crate::http::RequestView;
use crate::upstream::balance::{hash64, hash64_parts, Balance, HashKey};
use crate::upstream::group::UpstreamGroup;
use crate::upstream::group_state::GroupState;

/// The balancing key of a request (for `balance = "hash"`).
pub(super) fn hash_key(key: &HashKey, request: &RequestView<'_>) -> u64 {
    match key {
        HashKey::ClientIp => match request.peer().ip() {
            IpAddr::V4(v4) => hash64(&v4.octets()),
            IpAddr::V6(v6) => hash64(&v6.octets()),
        },
        HashKey::Path => hash64(request.path()),
        HashKey::Uri => match request.query() {
            Some(q) => hash64_parts(&[request.path(), b"?", q]),
            None => hash64(request.path()),
        },
        HashKey::Header(name) => hash64(request.header(name).unwrap_or(b"")),
    }
}

/// The balancing key of a request: 0 unless the group balances by hash.
pub(super) fn balance_key(group: &UpstreamGroup, request: &RequestView<'_>) -> u64 {
    match &group.balance {
        Balance::Hash(k) => hash_key(k, request),
        _ => 0,
    }
}

/// Phase 2: the server for this attempt, among those up and not yet `tried`.
/// When every server was tried, the error is the last one's failure
/// (`last_failure`: a refused connect is 502), not "no server".
pub(super) fn choose_upstream(
    group: &UpstreamGroup,
    state: &GroupState,
    key: u64,
    tried: &[usize],
    now: std::time::Instant,
    last_failure: &mut Option<(ProxyError, SocketAddr)>,
) -> Result<usize, (ProxyError, Option<SocketAddr>)> {
    state
        .pick_server(group, key, tried, now)
        .ok_or_else(|| match last_failure.take() {
            Some((e, addr)) => (e, Some(addr)),
            None => (
                ProxyError::upstream(
                    ErrorKind::NoServer,
                    if state.has_servers() {
                        "its active health checks report every server down"
                    } else {
                        "its names have not resolved to any address yet"
                    },
                ),
                None,
            ),
        })
}
