//! Phase 4 for `protocol = "h2"` groups: per-worker pools of HTTP/2 client
//! connections, each carrying many requests at once as streams. A request
//! takes a stream on the oldest connection to its server that has room (up to
//! the group's `max_streams`, or fewer if the server's SETTINGS say so), and a
//! new connection is opened only when every one is full. Only the owning
//! worker touches its pool (`RefCell`, no lock); each connection's frames are
//! read and written by a task on the worker's runtime.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tracing::debug;

use super::group::UpstreamGroup;
use super::{ErrorKind, ProxyError};
use crate::deadline;
use crate::http1::client::ClientStream;

/// Receive window per stream: a streamed response moves at most this far ahead
/// of the client reading it.
const STREAM_WINDOW: u32 = 256 * 1024;
/// Receive window of a connection, shared by its streams.
const CONNECTION_WINDOW: u32 = 2 * 1024 * 1024;
/// Largest response head (decoded) accepted from an upstream.
const MAX_HEADER_LIST: u32 = 64 * 1024;

/// What a connection's task and its streams share with the pool.
pub struct H2Shared {
    /// Streams open (or waiting for the connection) from this worker's requests.
    open: Cell<u32>,
    /// The connection ended (closed, failed, or told to go away).
    closed: Cell<bool>,
    /// When the last stream ended; idle time is counted from here.
    idle_since: Cell<Instant>,
    /// The handle streams are opened through, once the handshake is done.
    send: RefCell<Option<SendRequest<Bytes>>>,
    /// Why connecting failed, for the requests that waited for it.
    failure: RefCell<Option<ProxyError>>,
    /// Wakes the requests waiting for the handshake.
    ready: tokio::sync::Notify,
}

impl H2Shared {
    fn new() -> Self {
        H2Shared {
            open: Cell::new(0),
            closed: Cell::new(false),
            idle_since: Cell::new(Instant::now()),
            send: RefCell::new(None),
            failure: RefCell::new(None),
            ready: tokio::sync::Notify::new(),
        }
    }

    /// Marks the connection unusable for new streams.
    pub fn close(&self) {
        self.closed.set(true);
        self.send.borrow_mut().take();
        self.ready.notify_waiters();
    }
}

/// A stream's hold on its connection: counted as open until dropped.
pub struct StreamLease(Rc<H2Shared>);

impl StreamLease {
    /// The connection the stream is on, to mark it dead after a failure.
    pub fn connection(&self) -> &H2Shared {
        &self.0
    }

    /// The handle to open the stream with, once the connection is up; the
    /// connect failure if it never came up.
    pub async fn sender(&self) -> Result<SendRequest<Bytes>, ProxyError> {
        loop {
            let notified = self.0.ready.notified();
            if let Some(send) = self.0.send.borrow().as_ref() {
                return Ok(send.clone());
            }
            if self.0.closed.get() {
                return Err(self.0.failure.borrow().clone().unwrap_or_else(|| {
                    ProxyError::upstream(ErrorKind::Reset, "HTTP/2 connection closed")
                }));
            }
            notified.await;
        }
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        let open = self.0.open.get().saturating_sub(1);
        self.0.open.set(open);
        if open == 0 {
            self.0.idle_since.set(Instant::now());
        }
    }
}

struct H2Conn {
    shared: Rc<H2Shared>,
}

impl H2Conn {
    /// Whether it can take one more stream, below `cap` and the server's
    /// limit (while connecting, `cap` alone).
    fn has_room(&self, cap: u32) -> bool {
        let server_limit = self
            .shared
            .send
            .borrow()
            .as_ref()
            .map_or(usize::MAX, SendRequest::current_max_send_streams);
        (self.shared.open.get() as usize) < (cap as usize).min(server_limit)
    }

    fn expired(&self, now: Instant, idle_timeout: Duration) -> bool {
        self.shared.closed.get()
            || (self.shared.open.get() == 0
                && now.saturating_duration_since(self.shared.idle_since.get()) >= idle_timeout)
    }

    fn lease(&self) -> StreamLease {
        self.shared.open.set(self.shared.open.get() + 1);
        StreamLease(self.shared.clone())
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
            .map(|c| (c.lease(), c.shared.send.borrow().is_some()))
    }

    /// Starts a connection to `server` (its handshake runs as a task of its
    /// own, so requests that join it do not depend on the one that began it),
    /// keeps it, and takes a stream on it.
    pub fn connect(&self, group: &Arc<UpstreamGroup>, server: usize) -> StreamLease {
        let shared = Rc::new(H2Shared::new());
        let conn = H2Conn {
            shared: shared.clone(),
        };
        let lease = conn.lease();
        if let Some(conns) = self.servers.borrow_mut().get_mut(server) {
            conns.push(conn);
        }
        let group = group.clone();
        tokio::task::spawn_local(async move {
            match connect_h2(&group, server).await {
                Ok((send, connection)) => {
                    *shared.send.borrow_mut() = Some(send);
                    shared.ready.notify_waiters();
                    if let Err(e) = connection.await {
                        debug!(upstream = %group.servers[server].authority, error = %e, "upstream HTTP/2 connection ended");
                    }
                }
                Err(e) => *shared.failure.borrow_mut() = Some(e),
            }
            shared.close();
        });
        lease
    }

    /// Closes connections that ended, and those idle past the group's
    /// `idle_timeout` or beyond its `max_idle` per server.
    pub fn sweep(&self, now: Instant) {
        for conns in self.servers.borrow_mut().iter_mut() {
            conns.retain(|c| !c.expired(now, self.idle_timeout));
            let mut idle = conns.iter().filter(|c| c.shared.open.get() == 0).count();
            conns.retain(|c| {
                if idle > self.max_idle && c.shared.open.get() == 0 {
                    idle -= 1;
                    c.shared.close();
                    return false;
                }
                true
            });
        }
    }

    /// Lets every connection go: each closes once its streams in flight end
    /// (the configuration is draining).
    pub fn clear(&self) {
        for conns in self.servers.borrow_mut().iter_mut() {
            for c in conns.drain(..) {
                c.shared.close();
            }
        }
    }

    /// Connections held for `server` (tests and stats).
    pub fn connection_count(&self, server: usize) -> usize {
        self.servers.borrow().get(server).map_or(0, Vec::len)
    }
}

/// A client connection's frame driver: polled until the connection ends.
pub type H2Driver = h2::client::Connection<ClientStream, Bytes>;

/// Opens an HTTP/2 connection to server `i` of `group`: TCP (and TLS, where
/// the server must pick `h2` by ALPN), the client preface and SETTINGS. The
/// caller polls the returned driver (as a task of its own) until it ends.
pub async fn connect_h2(
    group: &UpstreamGroup,
    i: usize,
) -> Result<(SendRequest<Bytes>, H2Driver), ProxyError> {
    let stream = super::dial::connect(group, i).await?;
    if let ClientStream::Tls(tls) = &stream {
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(ProxyError::upstream(
                ErrorKind::Connect,
                "the server did not agree to HTTP/2 (no h2 in its ALPN answer)",
            ));
        }
    }
    let handshake = h2::client::Builder::new()
        .enable_push(false)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Bytes>(stream);
    match deadline::within(group.connect_timeout, handshake).await {
        Ok(Ok(pair)) => Ok(pair),
        Ok(Err(e)) => Err(ProxyError::upstream(
            ErrorKind::Connect,
            format!("HTTP/2 handshake failed: {e}"),
        )),
        Err(_) => Err(ProxyError::upstream(
            ErrorKind::Timeout,
            "connect timed out",
        )),
    }
}
