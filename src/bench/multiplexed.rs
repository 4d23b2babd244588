//! What `--h2` and `--h3` connections share: a connection carries `--streams`
//! stream loops at once, each sending one request and reading its response to
//! the end before the next, polled beside the connection's own driver in the
//! slot's task (so the watchdog, aborting the slot, ends all of them). The
//! protocol clients (`http_h2`, `http_h3`) bring the
//! request itself and say what each of their errors means.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{sleep, sleep_until, Instant};

use super::http_conn::{Slot, ThreadCtx, MAX_CONNECT_FAILURES};
use super::stats::FailureKind;

/// One stream loop of a connection, polled beside the others.
pub(super) type StreamLoop<'a> = Pin<Box<dyn Future<Output = Result<(), FailureKind>> + 'a>>;

/// What a failed request means for its stream loop and connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StreamFailure {
    /// The server said it did not process it (a graceful GOAWAY above it, a
    /// refused stream): it is given back to go on the next connection, as RFC
    /// 9113 §8.7 and RFC 9114 §4.1.1 allow and browsers do, and this loop
    /// ends while the connection's other streams run to their end.
    Unprocessed,
    /// The server reset this stream only: counted, and the loop goes on.
    StreamReset,
    /// The connection failed: counted, and the connection ends.
    Connection(FailureKind),
}

/// What a slot does after a connect and handshake.
pub(super) enum ConnectAttempt<T> {
    /// Connected: run the streams on it.
    Ready(T),
    /// Failed: try again.
    Retry,
    /// Failed too often in a `-n` run: the slot gives up its share.
    GiveUp,
}

/// Counts a connect and handshake that started at `connect_start`: its time
/// when it succeeded; when it failed, one failed request, and after
/// [`MAX_CONNECT_FAILURES`] in a row in a `-n` run the slot's whole share,
/// counted as failed, so the run ends (as h2load does). Otherwise a failure
/// waits a growing pause (closed loop) before the next attempt.
pub(super) async fn after_connect<T>(
    ctx: &ThreadCtx,
    slot: &Slot,
    outcome: Result<T, FailureKind>,
    connect_start: Instant,
    failures: &mut u32,
) -> ConnectAttempt<T> {
    let kind = match outcome {
        Ok(c) => {
            *failures = 0;
            ctx.stats
                .borrow_mut()
                .record_connect(connect_start.elapsed());
            return ConnectAttempt::Ready(c);
        }
        Err(kind) => kind,
    };
    slot.busy_since.set(None);
    slot.take(1);
    ctx.stats.borrow_mut().errors.add(kind, 1);
    *failures += 1;
    if ctx.plan.requests.is_some() && *failures >= MAX_CONNECT_FAILURES {
        let rest = slot.remaining.get();
        slot.take(rest);
        ctx.stats.borrow_mut().errors.add(kind, rest);
        return ConnectAttempt::GiveUp;
    }
    if ctx.plan.rate.is_none() {
        sleep(Duration::from_millis(10 << (*failures).min(5))).await;
    }
    ConnectAttempt::Retry
}

/// Settles a slot's counts once a connection has ended: requests taken by
/// loops still waiting for their send time were never sent and go on the
/// next connection; a failure counts what was in flight.
pub(super) fn connection_ended(
    ctx: &ThreadCtx,
    slot: &Slot,
    waiting: &Cell<u64>,
    ended: Result<(), FailureKind>,
) {
    slot.give_back(waiting.replace(0));
    if let Err(kind) = ended {
        slot.fail(ctx, kind);
    }
    slot.in_flight.set(0);
    slot.busy_since.set(None);
}

/// Polls the connection's driver and its stream loops together until every
/// loop is done, or the connection or a loop fails. `poll_driver` is ready
/// with `Ok` when the connection ended cleanly.
pub(super) async fn connection_lifetime(
    mut poll_driver: impl FnMut(&mut Context<'_>) -> Poll<Result<(), FailureKind>>,
    mut streams: Vec<StreamLoop<'_>>,
) -> Result<(), FailureKind> {
    let mut driver_done = false;
    std::future::poll_fn(|cx| {
        if !driver_done {
            match poll_driver(cx) {
                Poll::Ready(Ok(())) => driver_done = true,
                Poll::Ready(Err(kind)) => return Poll::Ready(Err(kind)),
                Poll::Pending => {}
            }
        }
        let mut i = 0;
        while i < streams.len() {
            match streams[i].as_mut().poll(cx) {
                Poll::Ready(Ok(())) => {
                    drop(streams.swap_remove(i));
                }
                Poll::Ready(Err(kind)) => return Poll::Ready(Err(kind)),
                Poll::Pending => i += 1,
            }
        }
        if streams.is_empty() {
            return Poll::Ready(Ok(()));
        }
        if driver_done {
            return Poll::Ready(Err(FailureKind::Closed));
        }
        Poll::Pending
    })
    .await
}

/// One stream slot of a connection: a request (by `one_request`, which
/// answers the response's status), its whole response, the next; open loop
/// waits for each request's due time first, counting it in `waiting`
/// meanwhile so the slot can take back what was never sent. `judge` says
/// what an error means.
pub(super) async fn stream_loop<E, Fut>(
    ctx: &ThreadCtx,
    slot: &Slot,
    waiting: &Cell<u64>,
    mut one_request: impl FnMut() -> Fut,
    judge: impl Fn(&E) -> StreamFailure,
) -> Result<(), FailureKind>
where
    Fut: Future<Output = Result<u16, E>>,
{
    loop {
        if slot.remaining.get() == 0 || ctx.expired(Instant::now()) {
            return Ok(());
        }
        let k = slot.next.get();
        slot.take(1);
        let origin = match &slot.schedule {
            Some(s) => {
                let due = s.intended(k);
                waiting.set(waiting.get() + 1);
                sleep_until(due).await;
                waiting.set(waiting.get() - 1);
                due
            }
            None => Instant::now(),
        };
        slot.in_flight.set(slot.in_flight.get() + 1);
        if slot.busy_since.get().is_none() {
            slot.busy_since.set(Some(Instant::now()));
        }
        let outcome = one_request().await;
        slot.in_flight.set(slot.in_flight.get().saturating_sub(1));
        let now = Instant::now();
        slot.busy_since
            .set((slot.in_flight.get() > 0).then_some(now));
        match outcome {
            Ok(status) => {
                ctx.stats.borrow_mut().record(status, now - origin);
                ctx.progress.fetch_add(1, Ordering::Relaxed);
                if ctx.plan.new_conn {
                    // `--new-conn` (HTTP/3): one request, then a new
                    // connection with a full handshake.
                    return Ok(());
                }
            }
            Err(e) => match judge(&e) {
                StreamFailure::Unprocessed => {
                    slot.give_back(1);
                    return Ok(());
                }
                StreamFailure::StreamReset => {
                    ctx.stats.borrow_mut().errors.add(FailureKind::Reset, 1);
                }
                StreamFailure::Connection(kind) => {
                    ctx.stats.borrow_mut().errors.add(kind, 1);
                    return Err(kind);
                }
            },
        }
    }
}

/// Body bytes read between two marks of progress for the watchdog (and, for
/// `--h3`, two readings of the connection's byte counts).
pub(super) const PROGRESS_EVERY: usize = 1024 * 1024;

/// Records the time to a connection's first response byte, once: `start` is
/// taken on the first call.
pub(super) fn record_first_byte(ctx: &ThreadCtx, start: &Cell<Option<Instant>>) {
    if let Some(start) = start.take() {
        ctx.stats.borrow_mut().record_first_byte(start.elapsed());
    }
}
