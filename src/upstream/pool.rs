//! Per-worker keep-alive pools of upstream connections, one LIFO stack per
//! server. Only the owning worker touches its pools (`RefCell`, no lock), and the
//! most recently used connection is reused first, so the rest age out.
//!
//! A pooled connection that the upstream closed while idle is noticed without a
//! system call when its socket already reported readability (EOF or stray data
//! makes it readable; a healthy idle connection never is); the race where the
//! close is still in flight is covered by the proxy retrying once on a fresh
//! connection when a reused one fails before any response byte.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::deadline::RollingDeadline;
use crate::http1::client::ClientStream;

/// A pooled connection and the timer its response-head waits use: the timer
/// stays armed from one exchange to the next, so a keep-alive exchange moves
/// a deadline rather than inserting and removing a timer.
pub struct Pooled {
    /// The connection.
    pub stream: ClientStream,
    /// Its response-head timer.
    pub timer: RollingDeadline,
}

struct Idle {
    conn: Pooled,
    since: Instant,
}

/// Idle connections of one group, per server.
pub struct Pool {
    idle: RefCell<Vec<Vec<Idle>>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    /// An empty pool for `servers` servers.
    pub fn new(servers: usize, max_idle: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: RefCell::new((0..servers).map(|_| Vec::new()).collect()),
            max_idle,
            idle_timeout,
        }
    }

    /// The most recently returned live connection to `server`, if any; expired
    /// and dead ones met on the way are closed.
    pub fn checkout(&self, server: usize, now: Instant) -> Option<Pooled> {
        let mut idle = self.idle.borrow_mut();
        let stack = idle.get_mut(server)?;
        while let Some(c) = stack.pop() {
            if now.saturating_duration_since(c.since) < self.idle_timeout
                && c.conn.stream.looks_alive()
            {
                return Some(c.conn);
            }
        }
        None
    }

    /// Keeps a connection whose last exchange ended cleanly.
    pub fn checkin(&self, server: usize, stream: ClientStream, now: Instant) {
        self.checkin_pooled(
            server,
            Pooled {
                stream,
                timer: RollingDeadline::default(),
            },
            now,
        );
    }

    /// [`Pool::checkin`] of a connection with its timer.
    pub fn checkin_pooled(&self, server: usize, conn: Pooled, now: Instant) {
        if self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        let Some(stack) = idle.get_mut(server) else {
            return;
        };
        // Oldest first: drop what expired, then make room.
        let expired = stack
            .iter()
            .take_while(|c| now.saturating_duration_since(c.since) >= self.idle_timeout)
            .count();
        stack.drain(..expired);
        if stack.len() >= self.max_idle {
            stack.remove(0);
        }
        stack.push(Idle { conn, since: now });
    }

    /// Closes idle connections past their timeout (run periodically by the worker,
    /// so a quiet worker does not hold upstream sockets forever).
    pub fn sweep(&self, now: Instant) {
        for stack in self.idle.borrow_mut().iter_mut() {
            stack.retain(|c| {
                now.saturating_duration_since(c.since) < self.idle_timeout
                    && c.conn.stream.looks_alive()
            });
        }
    }

    /// Closes every idle connection (the configuration is draining).
    pub fn clear(&self) {
        for stack in self.idle.borrow_mut().iter_mut() {
            stack.clear();
        }
    }

    /// Idle connections held for `server` (tests and stats).
    pub fn idle_count(&self, server: usize) -> usize {
        self.idle.borrow().get(server).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair() -> (ClientStream, tokio::net::TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (up, peer) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        (ClientStream::Plain(up.unwrap()), peer.unwrap().0)
    }

    /// Lets the reactor take in what the peer did.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn checkout_skips_connections_closed_while_pooled() {
        let pool = Pool::new(1, 4, Duration::from_secs(60));
        let (a, peer_a) = pair().await;
        let (b, _peer_b) = pair().await;
        let now = Instant::now();
        pool.checkin(0, b, now);
        pool.checkin(0, a, now);
        drop(peer_a);
        settle().await;
        // `a` is the most recent but closed: `b` comes out, and `a` is gone.
        assert!(pool.checkout(0, Instant::now()).is_some());
        assert_eq!(pool.idle_count(0), 0);
        assert!(pool.checkout(0, Instant::now()).is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn clear_closes_every_idle_connection() {
        use tokio::io::AsyncReadExt;
        let pool = Pool::new(2, 4, Duration::from_secs(60));
        let (a, mut peer_a) = pair().await;
        let (b, mut peer_b) = pair().await;
        pool.checkin(0, a, Instant::now());
        pool.checkin(1, b, Instant::now());
        pool.clear();
        assert_eq!((pool.idle_count(0), pool.idle_count(1)), (0, 0));
        // The upstreams see the close.
        let mut buf = [0u8; 1];
        assert_eq!(peer_a.read(&mut buf).await.unwrap(), 0);
        assert_eq!(peer_b.read(&mut buf).await.unwrap(), 0);
    }
}
