//! TCP/TLS stream forwarding: a `kind = "tcp"` listener (plain or TLS-terminating)
//! relays each connection to a server of an upstream group, with the same
//! balancing, retries on connect failure and passive health as the HTTP proxy,
//! then copies bytes both ways with [`byte_relay`], which the HTTP proxy's
//! upgrade tunnel uses too.

pub mod byte_relay;

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, warn};

use crate::config::TcpForward;
use crate::handler::proxy::{connect, ErrorKind};
use crate::observe::metrics::Counter;
use crate::observe::upstream_counters::ServerAttempt;
use crate::proxy_protocol::{self, ProxyVersion};
use crate::upstream::balance::{hash64, Balance, HashKey};
use crate::upstream::group_state::GroupState;
use byte_relay::relay;

/// What a TLS listener learned in the handshake, for PROXY v2 TLVs.
#[derive(Debug, Default, Clone)]
pub struct TlsInfo {
    /// Negotiated ALPN protocol.
    pub alpn: Option<Vec<u8>>,
    /// SNI the client sent.
    pub sni: Option<String>,
}

/// Forwards one accepted stream to the listener's upstream group; `state` is
/// this worker's view of that group, and `rejected` counts the streams its
/// `max_in_flight` turns away.
pub async fn relay_stream<S>(
    state: &GroupState,
    rejected: &Counter,
    fwd: &TcpForward,
    mut downstream: S,
    peer: SocketAddr,
    local: SocketAddr,
    tls: Option<TlsInfo>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let group = &*fwd.group;
    // A stream counts against the group's max_in_flight while it lasts; over
    // the limit it is closed at once (there is no status to send).
    let Some(_admission) = state.admit() else {
        rejected.add(1);
        crate::warn_limited!(group = %group.name, %peer, "tcp: max_in_flight reached; stream closed");
        return;
    };
    let key = match &group.balance {
        Balance::Hash(HashKey::ClientIp) => match peer.ip() {
            std::net::IpAddr::V4(v4) => hash64(&v4.octets()),
            std::net::IpAddr::V6(v6) => hash64(&v6.octets()),
        },
        _ => 0,
    };
    let mut tried = Vec::new();
    let mut retries_left = group.retries;
    // The attempt counts in the server's counters (in flight until the stream ends).
    let (server, mut upstream, _attempt) = loop {
        let now = std::time::Instant::now();
        let Some(server) = state.pick_server(group, key, &tried, now) else {
            crate::warn_limited!(group = %group.name, %peer, "tcp: no server is up");
            return;
        };
        let attempt = ServerAttempt::start(state.counters.get(server), now);
        match connect(group, server).await {
            Ok(s) => break (server, s, attempt),
            Err(e) => {
                attempt.failed(&e, true);
                let addr = group.servers[server].addr;
                if state.record_failure(group, server, now) {
                    warn!(upstream = %group.servers[server].authority, address = %addr, group = %group.name, "upstream marked down");
                }
                crate::warn_limited!(upstream = %group.servers[server].authority, address = %addr, group = %group.name, %peer, error = %e, status = if e.kind == ErrorKind::Timeout { 504 } else { 502 }, "tcp: connect failed");
                if retries_left == 0 {
                    return;
                }
                retries_left -= 1;
                tried.push(server);
            }
        }
    };
    state.record_success(server);
    let addr = group.servers[server].addr;
    if let Some(version) = fwd.send_proxy_protocol {
        let mut header = Vec::with_capacity(64);
        match version {
            ProxyVersion::V1 => proxy_protocol::encode_v1(&mut header, peer, local),
            ProxyVersion::V2 => {
                let info = tls.unwrap_or_default();
                proxy_protocol::encode_v2(
                    &mut header,
                    peer,
                    local,
                    info.alpn.as_deref(),
                    info.sni.as_deref().map(str::as_bytes),
                )
            }
        }
        if let Err(e) = upstream.write_all(&header).await {
            crate::warn_limited!(upstream = %group.servers[server].authority, address = %addr, error = %e, "tcp: sending the PROXY header failed");
            return;
        }
    }
    let active = &state.servers[server].active;
    active.set(active.get() + 1);
    let r = relay(&mut downstream, &mut upstream, fwd.idle_timeout).await;
    active.set(active.get().saturating_sub(1));
    match r {
        Ok((up, down)) => {
            debug!(upstream = %group.servers[server].authority, %peer, up, down, "tcp stream ended")
        }
        Err(e) => {
            debug!(upstream = %group.servers[server].authority, %peer, error = %e, "tcp stream ended")
        }
    }
}
