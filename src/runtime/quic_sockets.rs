//! The UDP sockets of the listeners that serve HTTP/3: bound beside each
//! listener's TCP sockets at start, and at the reload that adds a listener
//! with HTTP/3 or turns it on for a running one, one socket per worker.

use std::net::SocketAddr;

use tracing::info;

use crate::listener_key::ListenerKey;
use crate::quic::socket::WorkerUdp;
use crate::quic::steer::Steering;

/// Each worker's UDP sockets, by listener.
pub(super) type PerWorkerQuic = Vec<Vec<(ListenerKey, WorkerUdp)>>;

/// Binds `bound`'s UDP twin for `key` (the same address and port), one
/// socket per worker with SO_REUSEPORT, and deals them out to `per_worker`
/// with the steering that keeps each connection on its worker.
pub(super) fn bind_quic(
    key: ListenerKey,
    bound: SocketAddr,
    ipv6_only: bool,
    per_worker: &mut PerWorkerQuic,
) -> std::io::Result<()> {
    let workers = per_worker.len().max(1);
    let udp = crate::quic::socket::bind_udp_reuseport(bound, ipv6_only, workers)?;
    info!(listener = %bound, udp = %bound, "HTTP/3 over QUIC");
    let steering = Steering::group(udp.len());
    for (i, (socket, steering)) in udp.into_iter().zip(steering).enumerate() {
        per_worker[i % workers].push((key, WorkerUdp { socket, steering }));
    }
    Ok(())
}
