//! One worker: a thread with its own current-thread runtime, its own listening
//! sockets and its own state (buffers, `Date` cache, counters). Workers share only
//! the frozen config and a shutdown signal that is read once, off the request path.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tracing::{debug, warn};

use crate::config::{Config, ListenerConfig};
use crate::conn::{self, Downstream, Plain, Tls};
use crate::http1::parse::RequestHead;
use crate::http1::write::DateCache;
use crate::tls::stream::ReadAhead;

/// Buffers a connection holds only while it is working; idle connections give them back.
#[derive(Default)]
pub struct ConnBuffers {
    /// Bytes read from downstream, not yet consumed.
    pub read: Vec<u8>,
    /// Encoded responses not yet written.
    pub write: Vec<u8>,
    /// Parsed request head (spans into `read`).
    pub head: RequestHead,
}

/// Capacity a pooled read buffer starts with.
pub const READ_BUF: usize = 8 * 1024;
/// Buffers larger than this are freed instead of pooled, so one big request
/// does not pin memory for the life of the worker.
const POOL_MAX_CAPACITY: usize = 64 * 1024;
/// Pooled buffer sets kept per worker.
const POOL_MAX_SETS: usize = 256;

/// Per-worker counters, read when the worker stops.
#[derive(Default, Debug)]
pub struct Counters {
    /// Connections accepted.
    pub accepted: Cell<u64>,
    /// Requests answered.
    pub requests: Cell<u64>,
}

/// Everything a connection task of this worker can reach.
pub struct WorkerCtx {
    /// Worker index.
    pub id: usize,
    /// Frozen configuration.
    pub config: Arc<Config>,
    /// Cached `Date` value.
    pub date: RefCell<DateCache>,
    pool: RefCell<Vec<ConnBuffers>>,
    /// Open connections.
    pub active: Cell<usize>,
    /// Set once shutdown starts: finish in-flight requests, close idle ones.
    pub draining: Cell<bool>,
    /// Wakes idle connections and accept loops when shutdown starts.
    pub drain_signal: Notify,
    /// Wakes the drain wait when the last connection closes.
    idle_signal: Notify,
    /// Counters.
    pub counters: Counters,
}

impl WorkerCtx {
    /// Takes a buffer set from the pool, or makes one.
    pub fn take_buffers(&self) -> ConnBuffers {
        self.pool.borrow_mut().pop().unwrap_or_else(|| ConnBuffers {
            read: Vec::with_capacity(READ_BUF),
            write: Vec::with_capacity(READ_BUF),
            head: RequestHead::default(),
        })
    }

    /// Returns a buffer set; callers have consumed everything in it.
    pub fn give_buffers(&self, mut b: ConnBuffers) {
        if b.read.capacity() > POOL_MAX_CAPACITY || b.write.capacity() > POOL_MAX_CAPACITY {
            return;
        }
        b.read.clear();
        b.write.clear();
        b.head.clear();
        let mut pool = self.pool.borrow_mut();
        if pool.len() < POOL_MAX_SETS {
            pool.push(b);
        }
    }

    /// Resolves once shutdown has started.
    pub async fn draining(&self) {
        let notified = self.drain_signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.draining.get() {
            return;
        }
        notified.await;
    }
}

/// Counts a connection as open until dropped.
pub struct ActiveGuard(Rc<WorkerCtx>);

impl ActiveGuard {
    /// Registers one more open connection.
    pub fn new(ctx: Rc<WorkerCtx>) -> Self {
        ctx.active.set(ctx.active.get() + 1);
        ActiveGuard(ctx)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let n = self.0.active.get() - 1;
        self.0.active.set(n);
        if n == 0 {
            self.0.idle_signal.notify_waiters();
        }
    }
}

/// A worker's listening sockets: (index into config.listeners, socket).
pub type WorkerListeners = Vec<(usize, std::net::TcpListener)>;

/// Runs one worker until shutdown has drained (or the drain deadline passed).
pub fn run(
    id: usize,
    config: Arc<Config>,
    listeners: WorkerListeners,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(61)
        .build()?;
    let local = tokio::task::LocalSet::new();
    let ctx = Rc::new(WorkerCtx {
        id,
        config: config.clone(),
        date: RefCell::new(DateCache::default()),
        pool: RefCell::new(Vec::new()),
        active: Cell::new(0),
        draining: Cell::new(false),
        drain_signal: Notify::new(),
        idle_signal: Notify::new(),
        counters: Counters::default(),
    });
    local.block_on(&rt, async move {
        for (index, std_listener) in listeners {
            let listener = TcpListener::from_std(std_listener)?;
            let lc = config.listeners[index].clone();
            tokio::task::spawn_local(accept_loop(ctx.clone(), listener, lc));
        }
        let _ = shutdown.wait_for(|s| *s).await;
        ctx.draining.set(true);
        ctx.drain_signal.notify_waiters();
        let drained = async {
            while ctx.active.get() > 0 {
                let idle = ctx.idle_signal.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if ctx.active.get() == 0 {
                    break;
                }
                idle.await;
            }
        };
        if tokio::time::timeout(config.drain_timeout, drained)
            .await
            .is_err()
        {
            warn!(
                worker = id,
                open = ctx.active.get(),
                "drain timeout; closing remaining connections"
            );
        }
        debug!(
            worker = id,
            accepted = ctx.counters.accepted.get(),
            requests = ctx.counters.requests.get(),
            "worker stopped"
        );
        Ok::<(), io::Error>(())
    })
}

async fn accept_loop(ctx: Rc<WorkerCtx>, listener: TcpListener, lc: ListenerConfig) {
    let mut tls = lc.tls.as_ref().map(|t| t.listener.worker());
    let handshake_timeout = lc
        .tls
        .as_ref()
        .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = ctx.draining() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                if is_fd_exhaustion(&e) {
                    warn!(worker = ctx.id, error = %e, "accept: out of file descriptors; backing off");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    debug!(worker = ctx.id, error = %e, "accept failed");
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        ctx.counters.accepted.set(ctx.counters.accepted.get() + 1);
        let guard = ActiveGuard::new(ctx.clone());
        let ctx = ctx.clone();
        match tls.as_mut().map(|t| t.acceptor()) {
            None => {
                tokio::task::spawn_local(async move {
                    conn::serve(Plain::new(stream), &ctx, peer).await;
                    drop(guard);
                });
            }
            Some(acceptor) => {
                tokio::task::spawn_local(async move {
                    let handshake = tokio::select! {
                        biased;
                        _ = ctx.draining() => None,
                        r = tokio::time::timeout(handshake_timeout, acceptor.accept(ReadAhead::new(stream))) => Some(r),
                    };
                    match handshake {
                        Some(Ok(Ok(tls))) => {
                            let tls = Tls::new(tls);
                            if let Some(subject) = tls.peer_subject() {
                                debug!(%peer, subject, "TLS client certificate verified");
                            }
                            conn::serve(tls, &ctx, peer).await
                        }
                        Some(Ok(Err(e))) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Some(Err(_)) => debug!(%peer, "TLS handshake timed out"),
                        None => {}
                    }
                    drop(guard);
                });
            }
        }
    }
    debug!(worker = ctx.id, addr = %lc.addr, "stopped accepting");
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == rustix::io::Errno::MFILE.raw_os_error() || code == rustix::io::Errno::NFILE.raw_os_error() || code == rustix::io::Errno::NOBUFS.raw_os_error() || code == rustix::io::Errno::NOMEM.raw_os_error())
}
