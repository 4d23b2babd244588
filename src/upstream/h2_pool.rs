//! Phase 4 for `protocol = "h2"` groups: per-worker pools of HTTP/2 client
//! connections, each carrying many requests at once as streams. A request
//! takes a stream on the oldest connection to its server that has room (up to
//! the group's `max_streams`, or fewer if the server's SETTINGS say so), and a
//! new connection is opened only when every one is full. Only the owning
//! worker touches its pool (`RefCell`, no lock); each connection's frames are
//! read and written by a task on the worker's runtime.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use super::group::UpstreamGroup;
use super::h2_connection::{client_limits, connect_h2, H2Connection};
use super::h2_stream::StreamLease;

/// A connection kept by the pool; let go (GOAWAY once its streams are
/// done) when the pool drops it.
struct H2Conn {
    conn: H2Connection,
}

impl H2Conn {
    /// Whether it can take one more stream, below `cap` and the server's
    /// limit (while connecting, `cap` alone).
    fn has_room(&self, cap: u32) -> bool {
        let st = self.conn.state();
        if !st.takes_new_streams() {
            return false;
        }
        let server_limit = if st.ready {
            st.conn.open_streams() + st.conn.available_streams()
        } else {
            usize::MAX
        };
        (st.leases as usize) < (cap as usize).min(server_limit)
    }

    /// Whether it is no use to anyone now: ended, or going away with no
    /// stream, or idle past `idle_timeout`.
    fn expired(&self, now: Instant, idle_timeout: Duration) -> bool {
        let st = self.conn.state();
        st.ended.is_some()
            || (st.leases == 0
                && (!st.takes_new_streams()
                    || now.saturating_duration_since(st.idle_since) >= idle_timeout))
    }

    fn idle(&self) -> bool {
        self.conn.state().leases == 0
    }

    fn is_up(&self) -> bool {
        self.conn.state().ready
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.conn.close();
    }
}

/// One worker's h2 connections of a group, per server, oldest first.
pub struct H2Pool {
    servers: RefCell<Vec<Vec<H2Conn>>>,
    /// Streams at most per connection (the group's `max_streams`).
    max_streams: u32,
    /// Connections without a stream kept per server (the group's `max_idle`).
    max_idle: usize,
    /// Lifetime of a connection without a stream.
    idle_timeout: Duration,
}

impl H2Pool {
    /// An empty pool for `group`'s servers.
    pub fn new(group: &UpstreamGroup) -> Self {
        H2Pool {
            servers: RefCell::new((0..group.servers.len()).map(|_| Vec::new()).collect()),
            max_streams: group.max_streams,
            max_idle: group.max_idle,
            idle_timeout: group.idle_timeout,
        }
    }

    /// A stream on a connection to `server` with room for it (one still
    /// connecting counts, so a burst of requests opens one connection per
    /// `max_streams` of them, not one each), and whether that connection was
    /// up already; closed and expired connections met on the way are dropped.
    pub fn checkout(&self, server: usize, now: Instant) -> Option<(StreamLease, bool)> {
        let mut servers = self.servers.borrow_mut();
        let conns = servers.get_mut(server)?;
        conns.retain(|c| !c.expired(now, self.idle_timeout));
        conns
            .iter()
            .find(|c| c.has_room(self.max_streams))
            .map(|c| (StreamLease::new(&c.conn), c.is_up()))
    }

    /// Starts a connection to `server` (its handshake runs as a task of its
    /// own, so requests that join it do not depend on the one that began it),
    /// keeps it, and takes a stream on it.
    pub fn connect(&self, group: &Arc<UpstreamGroup>, server: usize) -> StreamLease {
        let conn = H2Connection::new(client_limits(self.max_streams));
        let lease = StreamLease::new(&conn);
        if let Some(conns) = self.servers.borrow_mut().get_mut(server) {
            conns.push(H2Conn { conn: conn.clone() });
        }
        let group = group.clone();
        tokio::task::spawn_local(async move {
            match connect_h2(&group, server).await {
                Ok(io) => {
                    conn.run(io).await;
                    debug!(upstream = %group.servers[server].authority, "upstream HTTP/2 connection ended");
                }
                Err(e) => conn.fail(e),
            }
        });
        lease
    }

    /// Closes connections that ended, and those idle past the group's
    /// `idle_timeout` or beyond its `max_idle` per server.
    pub fn sweep(&self, now: Instant) {
        for conns in self.servers.borrow_mut().iter_mut() {
            conns.retain(|c| !c.expired(now, self.idle_timeout));
            let mut idle = conns.iter().filter(|c| c.idle()).count();
            conns.retain(|c| {
                if idle > self.max_idle && c.idle() {
                    idle -= 1;
                    return false;
                }
                true
            });
        }
    }

    /// Follows the group's servers: room for `servers` of them, and the
    /// connections of servers that left (`retired(i)`) let go, each closing
    /// once its streams in flight end.
    pub fn follow(&self, servers: usize, retired: impl Fn(usize) -> bool) {
        let mut pools = self.servers.borrow_mut();
        let len = servers.max(pools.len());
        pools.resize_with(len, Vec::new);
        for (i, conns) in pools.iter_mut().enumerate() {
            if retired(i) {
                conns.clear();
            }
        }
    }

    /// Lets every connection go: each closes once its streams in flight end
    /// (the configuration is draining).
    pub fn clear(&self) {
        for conns in self.servers.borrow_mut().iter_mut() {
            conns.clear();
        }
    }

    /// Connections held for `server` (tests and stats).
    pub fn connection_count(&self, server: usize) -> usize {
        self.servers.borrow().get(server).map_or(0, Vec::len)
    }
}
