//! Per-worker keep-alive pools of upstream connections, one LIFO stack per
//! server. Only the owning worker touches its pools (`RefCell`, no lock), and the
//! most recently used connection is reused first, so the rest age out.
//!
//! A pooled connection that the upstream closed while idle is noticed without a
//! system call when its socket already reported readability (EOF or stray data
//! makes it readable; a healthy idle connection never is); the race where the
//! close is still in flight is covered by the proxy retrying once on a fresh
//! connection when a reused one fails before any response byte.
//!
//! How many idle connections a server keeps follows its load. A fixed limit
//! below the requests in flight makes a pool churn: every request that finds
//! no idle connection dials one, and every connection it then gives back to
//! a full pool is closed, thousands a second under multiplexed downstream
//! load. So each server's limit is at least `max_idle`, and rises to the most
//! requests recently in flight on the server at once (up to `max_idle_peak`):
//! what a burst needed is kept for the next one. The estimate is held for
//! `idle_peak_window`, then halves each window down to what the load still
//! needs (HAProxy sizes its idle connections likewise, from the most used
//! during each purge period), and the periodic sweep closes the oldest idle
//! connections above it, so a server gone quiet falls back to `max_idle`.

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

/// A pool's settings, from its group's keys.
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// Idle connections a server may always keep (`max_idle`); 0 turns
    /// keep-alive off, whatever the load.
    pub max_idle: usize,
    /// The most idle connections a server may keep when its recent load
    /// needed more than `max_idle` (`max_idle_peak`); at or below `max_idle`
    /// the limit is fixed at `max_idle`.
    pub max_idle_peak: usize,
    /// How long a peak is held before the estimate halves (`idle_peak_window`).
    pub peak_window: Duration,
    /// Lifetime of an idle connection (`idle_timeout`).
    pub idle_timeout: Duration,
}

impl PoolLimits {
    /// The limits `group` configures.
    pub fn of(group: &super::group::UpstreamGroup) -> Self {
        PoolLimits {
            max_idle: group.max_idle,
            max_idle_peak: group.max_idle_peak,
            peak_window: group.idle_peak_window,
            idle_timeout: group.idle_timeout,
        }
    }

    /// Idle connections allowed for a server whose load needs `need`.
    fn idle_limit(&self, need: usize) -> usize {
        if self.max_idle == 0 {
            return 0;
        }
        self.max_idle.max(need.min(self.max_idle_peak))
    }
}

/// How many connections one server needed lately: the most requests in
/// flight on it at once, held for a window and then halved each window, never
/// below what the window itself saw. A steady load keeps its estimate; a
/// burst is remembered for a few windows; a quiet server's estimate falls to
/// nothing in a few more.
#[derive(Debug, Default, Clone, Copy)]
struct Demand {
    /// Most requests in flight at once since `window_start`.
    peak: usize,
    /// The estimate: never below `peak`.
    need: usize,
    /// Start of the current window (`None` until first seen).
    window_start: Option<Instant>,
}

impl Demand {
    /// `in_use` requests are in flight now.
    fn note(&mut self, in_use: usize, now: Instant, window: Duration) {
        self.roll(in_use, now, window);
        self.peak = self.peak.max(in_use);
        self.need = self.need.max(in_use);
    }

    /// Ends the windows that have passed by `now`: the first ended with its
    /// own peak, any after it were quiet but for the `in_use` requests in
    /// flight now (a request that outlives windows is still counted).
    fn roll(&mut self, in_use: usize, now: Instant, window: Duration) {
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if elapsed < window {
            return;
        }
        let windows = elapsed
            .as_nanos()
            .checked_div(window.as_nanos())
            .unwrap_or(u128::MAX)
            .min(u128::from(usize::BITS));
        let first = self.peak.max(self.need / 2);
        let quiet = u32::try_from(windows.saturating_sub(1)).unwrap_or(usize::BITS);
        self.need = first.checked_shr(quiet).unwrap_or(0).max(in_use);
        self.peak = in_use;
        self.window_start = Some(now);
    }
}

/// One server's idle connections and its recent demand.
#[derive(Default)]
struct ServerPool {
    /// Oldest first; checkout takes from the end.
    idle: Vec<Idle>,
    demand: Demand,
    /// The server left the group (it drains): connections coming back close.
    retired: bool,
}

/// Idle connections of one group, per server.
pub struct Pool {
    servers: RefCell<Vec<ServerPool>>,
    limits: PoolLimits,
}

impl Pool {
    /// An empty pool for `servers` servers.
    pub fn new(servers: usize, limits: PoolLimits) -> Self {
        Pool {
            servers: RefCell::new((0..servers).map(|_| ServerPool::default()).collect()),
            limits,
        }
    }

    /// Records that `in_use` requests are in flight on `server` now (each
    /// holding or about to take a connection): the pool keeps that many idle
    /// connections when they come back, within its limits.
    pub fn note_in_use(&self, server: usize, in_use: usize, now: Instant) {
        if let Some(s) = self.servers.borrow_mut().get_mut(server) {
            s.demand.note(in_use, now, self.limits.peak_window);
        }
    }

    /// The most recently returned live connection to `server`, if any; expired
    /// and dead ones met on the way are closed.
    pub fn checkout(&self, server: usize, now: Instant) -> Option<Pooled> {
        let mut servers = self.servers.borrow_mut();
        let stack = &mut servers.get_mut(server)?.idle;
        while let Some(c) = stack.pop() {
            if now.saturating_duration_since(c.since) < self.limits.idle_timeout
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

    /// [`Pool::checkin`] of a connection with its timer. Over the server's
    /// limit, the oldest idle connections are closed to make room.
    pub fn checkin_pooled(&self, server: usize, conn: Pooled, now: Instant) {
        let mut servers = self.servers.borrow_mut();
        let Some(s) = servers.get_mut(server) else {
            return;
        };
        let limit = self.limits.idle_limit(s.demand.need);
        if limit == 0 || s.retired {
            return;
        }
        let stack = &mut s.idle;
        // Oldest first: drop what expired, then make room.
        let expired = stack
            .iter()
            .take_while(|c| now.saturating_duration_since(c.since) >= self.limits.idle_timeout)
            .count();
        // A drain costs even when empty: the usual check-in drains nothing.
        if expired > 0 {
            stack.drain(..expired);
        }
        let over = (stack.len() + 1).saturating_sub(limit);
        if over > 0 {
            stack.drain(..over);
        }
        stack.push(Idle { conn, since: now });
    }

    /// Closes idle connections past their timeout, and the oldest of a server
    /// above the limit its recent load sets (run periodically by the worker,
    /// so a quiet worker does not hold upstream sockets forever). `in_use`
    /// gives the requests in flight on each server now.
    pub fn sweep(&self, now: Instant, in_use: impl Fn(usize) -> usize) {
        for (i, s) in self.servers.borrow_mut().iter_mut().enumerate() {
            s.demand.roll(in_use(i), now, self.limits.peak_window);
            s.idle.retain(|c| {
                now.saturating_duration_since(c.since) < self.limits.idle_timeout
                    && c.conn.stream.looks_alive()
            });
            let over = s
                .idle
                .len()
                .saturating_sub(self.limits.idle_limit(s.demand.need));
            s.idle.drain(..over);
        }
    }

    /// Follows the group's servers: room for `servers` of them, and servers
    /// that left (`retired(i)`) close their idle connections and keep none
    /// that come back; one that returns pools again.
    pub fn follow(&self, servers: usize, retired: impl Fn(usize) -> bool) {
        let mut pools = self.servers.borrow_mut();
        let len = servers.max(pools.len());
        pools.resize_with(len, ServerPool::default);
        for (i, s) in pools.iter_mut().enumerate() {
            s.retired = retired(i);
            if s.retired {
                s.idle.clear();
            }
        }
    }

    /// Closes every idle connection (the configuration is draining).
    pub fn clear(&self) {
        for s in self.servers.borrow_mut().iter_mut() {
            s.idle.clear();
        }
    }

    /// Idle connections held for `server` (tests and stats).
    pub fn idle_count(&self, server: usize) -> usize {
        self.servers
            .borrow()
            .get(server)
            .map_or(0, |s| s.idle.len())
    }

    /// Idle connections `server` may keep now (tests and stats).
    pub fn idle_limit(&self, server: usize) -> usize {
        self.servers
            .borrow()
            .get(server)
            .map_or(0, |s| self.limits.idle_limit(s.demand.need))
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

    /// A pool keeping `max_idle` whatever the load, idle for a minute.
    fn fixed(max_idle: usize) -> PoolLimits {
        PoolLimits {
            max_idle,
            max_idle_peak: 0,
            peak_window: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
        }
    }

    /// Lets the reactor take in what the peer did.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn checkout_skips_connections_closed_while_pooled() {
        let pool = Pool::new(1, fixed(4));
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
        let pool = Pool::new(2, fixed(4));
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

    /// A pool whose limit follows the load between `max_idle` and
    /// `max_idle_peak`, with 5 s windows and a minute's idle timeout.
    fn following(max_idle: usize, max_idle_peak: usize) -> PoolLimits {
        PoolLimits {
            max_idle_peak,
            ..fixed(max_idle)
        }
    }

    /// `n` upstream connections, and their peers to keep them open.
    async fn pairs(n: usize) -> (Vec<ClientStream>, Vec<tokio::net::TcpStream>) {
        let mut ups = Vec::new();
        let mut peers = Vec::new();
        for _ in 0..n {
            let (up, peer) = pair().await;
            ups.push(up);
            peers.push(peer);
        }
        (ups, peers)
    }

    /// `n` requests in flight at once on server 0 at `now`, each with a
    /// connection it then gives back.
    async fn burst(pool: &Pool, n: usize, now: Instant) -> Vec<tokio::net::TcpStream> {
        let (ups, peers) = pairs(n).await;
        for in_use in 1..=n {
            pool.note_in_use(0, in_use, now);
        }
        for up in ups {
            pool.checkin(0, up, now);
        }
        peers
    }

    #[tokio::test(flavor = "current_thread")]
    async fn connections_a_recent_peak_needed_stay_pooled() {
        // Six requests were in flight at once: all six connections wait for
        // the next burst, though max_idle is two (a fixed limit kept two and
        // closed four, to be dialled again).
        let pool = Pool::new(1, following(2, 8));
        let now = Instant::now();
        let _peers = burst(&pool, 6, now).await;
        assert_eq!(pool.idle_count(0), 6);
        assert_eq!(pool.idle_limit(0), 6);
        for _ in 0..6 {
            assert!(pool.checkout(0, now).is_some());
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_followed_peak_is_capped_at_max_idle_peak() {
        let pool = Pool::new(1, following(2, 4));
        let _peers = burst(&pool, 6, Instant::now()).await;
        assert_eq!(pool.idle_count(0), 4);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_fixed_pool_keeps_max_idle_whatever_the_load() {
        let pool = Pool::new(1, fixed(2));
        let _peers = burst(&pool, 6, Instant::now()).await;
        assert_eq!(pool.idle_count(0), 2);
        // max_idle = 0 is no keep-alive, however many were in flight.
        let off = Pool::new(1, following(0, 8));
        let _peers = burst(&off, 3, Instant::now()).await;
        assert_eq!(off.idle_count(0), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_quiet_server_falls_back_to_max_idle() {
        use tokio::io::AsyncReadExt;
        let pool = Pool::new(1, following(2, 16));
        let t0 = Instant::now();
        let mut peers = burst(&pool, 8, t0).await;
        let quiet = |_| 0;
        let at = |secs| t0 + Duration::from_secs(secs);
        // The window that saw the peak holds it, however quiet the next.
        pool.sweep(at(4), quiet);
        assert_eq!(pool.idle_count(0), 8);
        pool.sweep(at(5), quiet);
        assert_eq!(pool.idle_count(0), 8);
        // Then it halves each quiet window, the oldest idle connections
        // closed above it, down to max_idle, well before the idle timeout.
        pool.sweep(at(10), quiet);
        assert_eq!(pool.idle_count(0), 4);
        pool.sweep(at(15), quiet);
        assert_eq!(pool.idle_count(0), 2);
        pool.sweep(at(40), quiet);
        assert_eq!((pool.idle_count(0), pool.idle_limit(0)), (2, 2));
        // The first four checked in are the ones closed.
        let mut buf = [0u8; 1];
        for peer in &mut peers[..4] {
            assert_eq!(peer.read(&mut buf).await.unwrap(), 0);
        }
        // The idle timeout still closes the rest.
        pool.sweep(at(61), quiet);
        assert_eq!(pool.idle_count(0), 0);
    }

    #[test]
    fn demand_holds_under_steady_load_and_decays_when_quiet() {
        let window = Duration::from_secs(5);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut d = Demand::default();
        // A load of 100 at once, seen in every window, keeps its estimate.
        for w in 0..10 {
            d.note(100, at(w * 5000), window);
            d.note(1, at(w * 5000 + 10), window);
            assert_eq!(d.need, 100, "window {w}");
        }
        // Quiet from then on: held through the window that saw 100, then
        // halved per window; windows passed while nothing looked count too.
        d.roll(0, at(50_000), window);
        assert_eq!(d.need, 100);
        d.roll(0, at(55_000), window);
        assert_eq!(d.need, 50);
        d.roll(0, at(70_000), window);
        assert_eq!(d.need, 6);
        d.roll(0, at(1_000_000), window);
        assert_eq!(d.need, 0);
        // A burst raises it at once.
        d.note(40, at(1_000_001), window);
        assert_eq!(d.need, 40);
    }

    #[test]
    fn requests_still_in_flight_keep_their_share_of_the_demand() {
        // Thirty long requests that outlive many windows: when they end,
        // their connections are still wanted.
        let window = Duration::from_secs(5);
        let t0 = Instant::now();
        let mut d = Demand::default();
        d.note(30, t0, window);
        d.roll(30, t0 + Duration::from_secs(60), window);
        assert_eq!(d.need, 30);
    }
}
