//! A worker thread's life: its own current-thread runtime, the generations of
//! configuration it switches between on reload, the timers of each (idle
//! upstream connections, the access log), and the drain at shutdown.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, warn};

use super::accept::{accept_loop, Current};
use crate::deadline;
use crate::observe::metrics::WorkerStats;
use crate::worker::{new_ctx, ConnLimit, Generation, WorkerCtx, WorkerShared};

/// Runs one worker until shutdown has drained (or the drain deadline passed).
pub fn run_worker(
    id: usize,
    first: Generation,
    mut reloads: mpsc::UnboundedReceiver<Generation>,
    mut shutdown: watch::Receiver<bool>,
    stats: Arc<WorkerStats>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(61)
        .build()?;
    let local = tokio::task::LocalSet::new();
    let shared = WorkerShared::new(id, &first.config, stats);
    local.block_on(&rt, async move {
        let current = Rc::new(Current {
            ctx: RefCell::new(new_ctx(&shared, &first)),
            serial: Cell::new(0),
            changed: Notify::new(),
        });
        start_generation(&current, first)?;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                next = reloads.recv() => match next {
                    Some(mut g) => {
                        let applied = g.applied.take();
                        let old = current.ctx.replace(new_ctx(&shared, &g));
                        current.serial.set(current.serial.get() + 1);
                        shared.conn_limit.set(ConnLimit::new(g.config.max_connections_per_worker()));
                        start_generation(&current, g)?;
                        tokio::task::spawn_local(retire(old));
                        current.changed.notify_waiters();
                        shared.capacity_signal.notify_waiters();
                        debug!(worker = id, "switched to the reloaded configuration");
                        if let Some(applied) = applied {
                            let _ = applied.send(());
                        }
                    }
                    None => break,
                },
            }
        }
        let ctx = current.ctx.borrow().clone();
        shared.stopping.set(true);
        shared.stop_signal.notify_waiters();
        ctx.start_draining();
        let drained = async {
            while shared.active.get() > 0 {
                let idle = shared.idle_signal.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if shared.active.get() == 0 {
                    break;
                }
                idle.await;
            }
        };
        if deadline::within(ctx.config.drain_timeout, drained)
            .await
            .is_err()
        {
            warn!(
                worker = id,
                open = shared.active.get(),
                "drain timeout; closing remaining connections"
            );
        }
        if let Some(log) = &ctx.access_log {
            log.flush();
        }
        debug!(
            worker = id,
            accepted = shared.stats.accepted.get(),
            requests = shared.stats.requests_total(),
            shed_pauses = shared.stats.shed.get(),
            "worker stopped"
        );
        Ok::<(), io::Error>(())
    })
}

/// A replaced generation keeps its connections as they are for one
/// `keepalive_timeout` (a request begun on it, or a client reusing its
/// connection at once, is served as before), then drains: in-flight requests
/// finish with `Connection: close` and idle connections close, so a busy
/// keep-alive connection cannot keep an old configuration alive for ever.
/// Shutdown drains it at once.
async fn retire(ctx: Rc<WorkerCtx>) {
    tokio::select! {
        biased;
        _ = ctx.stopped() => {}
        _ = tokio::time::sleep(ctx.config.http.keepalive_timeout) => {}
    }
    ctx.start_draining();
}

/// Starts the accept loops of the generation's new listeners and its timers.
fn start_generation(current: &Rc<Current>, g: Generation) -> io::Result<()> {
    for (key, std_listener) in g.listeners {
        let listener = TcpListener::from_std(std_listener)?;
        tokio::task::spawn_local(accept_loop(current.clone(), listener, key));
    }
    for (key, udp) in g.quic {
        tokio::task::spawn_local(super::h3::quic_listener(current.clone(), udp, key));
    }
    let ctx = current.ctx.borrow().clone();
    if !ctx.config.upstreams.is_empty() {
        tokio::task::spawn_local(sweep_pools(ctx.clone()));
    }
    if ctx.access_log.is_some() {
        tokio::task::spawn_local(flush_access_log(ctx));
    }
    Ok(())
}

/// Closes idle upstream connections past their timeout once a second, and
/// all of them once the configuration drains.
async fn sweep_pools(ctx: Rc<WorkerCtx>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ctx.draining() => {
                ctx.upstreams.close_idle();
                return;
            }
            _ = tick.tick() => ctx.upstreams.sweep(),
        }
    }
}

/// Hands the partial access-log buffer to the writer every `flush_interval`, so
/// lines from a quiet server do not wait for the buffer to fill.
async fn flush_access_log(ctx: Rc<WorkerCtx>) {
    let Some(log) = &ctx.access_log else { return };
    let mut tick = tokio::time::interval(log.flush_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ctx.draining() => return,
            _ = tick.tick() => log.flush(),
        }
    }
}
