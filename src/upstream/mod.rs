//! Upstreams: the origin servers Pier forwards to, as every user of them sees
//! them (the `proxy` handler, `tcp` listeners, metrics and the status page).
//! Pingora keeps the same machinery in crates of its own
//! (`pingora-load-balancing`, `pingora-pool`).
//!
//! - [`group`]: a configured group and its servers (frozen, shared by workers);
//! - [`group_state`]: one worker's view of a group (pools, balancer, in flight);
//! - [`balance`]: choosing a server; [`retry`]: whether to try another;
//! - [`dial`], [`connect`], [`pool`], [`h2_pool`]: connections, new and reused;
//! - [`h2_connection`], [`h2_stream`]: an HTTP/2 connection on Pier's own
//!   codec in the client role, and a request's stream on it; [`h2_tunnel`]:
//!   an extended CONNECT's stream as a tunnel's byte stream;
//! - [`health`]: active checks off the workers' event loops;
//! - [`server_table`]: a group's servers as they are now, growing as DNS
//!   answers change; [`discovery`]: resolving names and SRV records again
//!   as their TTLs say; [`resolution`]: what a group resolves, and how it went;
//! - [`request_head`]: the upstream request head, as HTTP/1 bytes or fields;
//! - [`error`]: which side failed, and how.

pub mod balance;
pub mod connect;
pub mod dial;
pub mod discovery;
pub mod error;
pub mod group;
pub mod group_state;
pub mod h2_connection;
pub mod h2_pool;
pub mod h2_stream;
pub mod h2_tunnel;
pub mod health;
pub mod pool;
pub mod request_head;
pub mod resolution;
pub mod retry;
pub mod server_table;

use crate::config::Config;
pub use dial::connect;
pub use error::{ErrorKind, ProxyError, Side};
pub use group::UpstreamGroup;
use group_state::GroupState;

/// A worker's upstream state: one [`GroupState`] per configured group.
pub struct UpstreamWorker {
    /// Indexed by [`UpstreamGroup::index`].
    pub groups: Vec<GroupState>,
    /// The groups themselves, so the periodic sweep can follow their
    /// servers on a worker that gets no requests.
    shared: Vec<std::sync::Arc<UpstreamGroup>>,
}

impl UpstreamWorker {
    /// State for every group of `config`.
    pub fn new(config: &Config) -> Self {
        UpstreamWorker {
            groups: config
                .upstreams
                .iter()
                .map(|g| GroupState::new(g, config.workers))
                .collect(),
            shared: config.upstreams.clone(),
        }
    }

    /// Closes expired idle upstream connections of every group, and those
    /// of servers that left or were set aside since the last request.
    pub fn sweep(&self) {
        let now = std::time::Instant::now();
        for (g, shared) in self.groups.iter().zip(&self.shared) {
            g.follow_membership(shared);
            g.pool.sweep(now, |i| {
                g.servers.get(i).map_or(0, |s| s.active.get() as usize)
            });
            g.h2.sweep(now);
        }
    }

    /// Closes every idle upstream connection: the configuration drains, and
    /// nothing will check them out or sweep them again.
    pub fn close_idle(&self) {
        for g in &self.groups {
            g.pool.clear();
            g.h2.clear();
        }
    }
}
