//! The UDP sockets of the listeners that serve HTTP/3: bound beside each
//! listener's TCP sockets at start (or taken over from the replaced process
//! after a binary upgrade), and at the reload that adds a listener with
//! HTTP/3 or turns it on for a running one, one socket per worker.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use tracing::info;

use crate::listener_key::ListenerKey;
use crate::quic::socket::WorkerUdp;
use crate::quic::steer::{Predecessor, SteerGroup, Steering};

/// Each worker's UDP sockets, by listener.
pub(super) type PerWorkerQuic = Vec<Vec<(ListenerKey, WorkerUdp)>>;

/// What the process keeps of one listener's UDP sockets: a copy of each,
/// for a binary upgrade to hand over, and the steering its workers share.
pub(super) struct QuicListener {
    pub key: ListenerKey,
    pub sockets: Vec<UdpSocket>,
    pub group: SteerGroup,
}

/// Binds `bound`'s UDP twin for `key` (the same address and port), one
/// socket per worker with SO_REUSEPORT, or takes `handed` (the replaced
/// process's sockets, binding more beside them if there are fewer than
/// workers), and deals them out to `per_worker` with the steering that
/// keeps each connection on its worker.
pub(super) fn bind_quic(
    key: ListenerKey,
    bound: SocketAddr,
    ipv6_only: bool,
    per_worker: &mut PerWorkerQuic,
    mut handed: Vec<UdpSocket>,
    predecessor: Option<Arc<dyn Predecessor>>,
) -> std::io::Result<QuicListener> {
    let workers = per_worker.len().max(1);
    if handed.is_empty() {
        handed = crate::quic::socket::bind_udp_reuseport(bound, ipv6_only, workers)?;
    } else {
        info!(listener = %key, sockets = handed.len(), "using the UDP sockets of the replaced process");
        if handed.len() < workers {
            let more = workers - handed.len();
            handed.extend(crate::quic::socket::bind_udp_reuseport(
                bound, ipv6_only, more,
            )?);
        }
    }
    info!(listener = %bound, udp = %bound, "HTTP/3 over QUIC");
    let sockets = handed
        .iter()
        .map(UdpSocket::try_clone)
        .collect::<std::io::Result<Vec<_>>>()?;
    let (group, steering) = Steering::group(key, handed.len(), predecessor);
    for (i, (socket, steering)) in handed.into_iter().zip(steering).enumerate() {
        per_worker[i % workers].push((key, WorkerUdp { socket, steering }));
    }
    Ok(QuicListener {
        key,
        sockets,
        group,
    })
}
