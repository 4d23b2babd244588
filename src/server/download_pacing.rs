//! A worker's downloads take turns on the blocking pool while the worker has
//! other requests to answer.
//!
//! A download whose file system cannot say what it caches (FUSE, some network
//! mounts) is sent by pool threads: the worker only starts each send and waits
//! for it (see `file_region`). The bytes still cost CPU where those threads
//! run: the copy into the socket, on loopback the receive as well, and the
//! threads' wake-ups. With a worker pinned to a core, that is its core. The
//! yield after every chunk orders the worker's own turns, but it cannot stop
//! four downloads from keeping four pool threads sending at once, each thread
//! a claim on the core the small replies need (bench/slow_disk: small-file
//! throughput beside four slow downloads fell to 0.47 of its value alone while
//! the downloads ran at three times nginx's rate).
//!
//! So while the worker answers other requests, its downloads keep at most
//! [`DOWNLOAD_BUDGET`] bytes of sends on the pool at once and take turns, first
//! come first served. The worker counts as busy when it answered any request
//! since its last pool send ended; when nothing else was answered meanwhile,
//! every download sends at once as before, so a worker serving only downloads
//! loses nothing. The rule counts requests and bytes, never time: it needs no
//! tuning per machine, and it holds the same on a loaded one.

use std::cell::Cell;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::observe::metrics::Counter;

/// Bytes of download sends a busy worker keeps on the pool at once: one pool
/// send of the largest size. A second download's send starts when the first
/// has ended, so the downloads of a busy worker move about one send's bytes
/// per pool round trip instead of one per download.
pub(crate) const DOWNLOAD_BUDGET: u64 = 1024 * 1024;

/// Budget is handed out in units of this many bytes.
const UNIT: u64 = 64 * 1024;

/// One worker's pacing of its downloads' pool sends; held by the worker, used
/// only from its thread.
pub struct DownloadPacer {
    /// The budget, in [`UNIT`]s; fair, so waiting downloads go in order.
    budget: Semaphore,
    /// The worker's answered requests when its last pool send ended.
    answered_at_last_send: Cell<u64>,
}

impl Default for DownloadPacer {
    fn default() -> Self {
        DownloadPacer {
            budget: Semaphore::new((DOWNLOAD_BUDGET / UNIT) as usize),
            answered_at_last_send: Cell::new(0),
        }
    }
}

/// A download's turn on the pool: held while its send runs; dropping it ends
/// the send for the pacer (the next download in line may start).
pub struct PoolSendTurn<'p> {
    pacer: &'p DownloadPacer,
    _budget: Option<SemaphorePermit<'p>>,
    answered: u64,
}

impl DownloadPacer {
    /// Waits until a send of `want` bytes may go to the pool. `answered` is the
    /// worker's count of answered requests now; the turn must be ended with
    /// [`PoolSendTurn::end`] and the count then. A send that has to wait
    /// counts in `waited`.
    pub async fn turn(&self, want: u64, answered: u64, waited: &Counter) -> PoolSendTurn<'_> {
        let budget = if must_take_turns(answered, self.answered_at_last_send.get()) {
            let units = units_for(want);
            match self.budget.try_acquire_many(units) {
                Ok(permit) => Some(permit),
                Err(_) => {
                    waited.add(1);
                    // The semaphore is never closed, so this only fails if it
                    // were; the send then goes unpaced.
                    self.budget.acquire_many(units).await.ok()
                }
            }
        } else {
            None
        };
        PoolSendTurn {
            pacer: self,
            _budget: budget,
            answered,
        }
    }
}

impl PoolSendTurn<'_> {
    /// The send ended with the worker's answered-request count at `answered`.
    pub fn end(self, answered: u64) {
        self.pacer
            .answered_at_last_send
            .set(answered.max(self.answered));
    }
}

/// Whether downloads must keep to the budget: the worker answered other
/// requests since its last pool send ended.
fn must_take_turns(answered_now: u64, answered_at_last_send: u64) -> bool {
    answered_now != answered_at_last_send
}

/// Units of the budget a send of `want` bytes holds: at least one, at most the
/// whole budget (a larger send runs alone).
fn units_for(want: u64) -> u32 {
    want.div_ceil(UNIT).clamp(1, DOWNLOAD_BUDGET / UNIT) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_worker_that_answered_nothing_else_lets_every_download_send_at_once() {
        let pacer = DownloadPacer::default();
        let waited = Counter::default();
        let first = pacer.turn(DOWNLOAD_BUDGET, 0, &waited);
        let Poll::Ready(first) = poll_once(pin!(first)) else {
            panic!("the first send waited");
        };
        first.end(4);
        // Four downloads' requests were answered before that send ended and
        // nothing since: all four send at once.
        let turns: Vec<_> = (0..4)
            .map(
                |_| match poll_once(pin!(pacer.turn(DOWNLOAD_BUDGET, 4, &waited))) {
                    Poll::Ready(t) => t,
                    Poll::Pending => panic!("an idle worker held a download back"),
                },
            )
            .collect();
        assert_eq!(turns.len(), 4);
        assert_eq!(waited.get(), 0);
    }

    #[test]
    fn a_busy_worker_keeps_one_budget_of_sends_on_the_pool_and_serves_them_in_order() {
        let pacer = DownloadPacer::default();
        let waited = Counter::default();
        // Small requests were answered since the last send: turns.
        let Poll::Ready(a) = poll_once(pin!(pacer.turn(DOWNLOAD_BUDGET, 10, &waited))) else {
            panic!("the first send waited");
        };
        let mut b = pin!(pacer.turn(DOWNLOAD_BUDGET, 10, &waited));
        let mut c = pin!(pacer.turn(DOWNLOAD_BUDGET, 10, &waited));
        assert!(poll_once(b.as_mut()).is_pending(), "two full sends at once");
        assert!(
            poll_once(c.as_mut()).is_pending(),
            "three full sends at once"
        );
        assert_eq!(waited.get(), 2);
        a.end(20);
        // The budget goes to the one that asked first, not to whoever polls.
        assert!(
            poll_once(c.as_mut()).is_pending(),
            "the later send jumped the line"
        );
        let Poll::Ready(b) = poll_once(b.as_mut()) else {
            panic!("the next send in line did not start");
        };
        assert!(poll_once(c.as_mut()).is_pending());
        b.end(30);
        assert!(poll_once(c.as_mut()).is_ready());
    }

    #[test]
    fn smaller_sends_share_the_budget() {
        let pacer = DownloadPacer::default();
        let waited = Counter::default();
        let quarter = DOWNLOAD_BUDGET / 4;
        let held: Vec<_> = (0..4)
            .map(|_| match poll_once(pin!(pacer.turn(quarter, 1, &waited))) {
                Poll::Ready(t) => t,
                Poll::Pending => panic!("four quarter sends fit the budget"),
            })
            .collect();
        assert!(
            poll_once(pin!(pacer.turn(1, 1, &waited))).is_pending(),
            "past the budget"
        );
        drop(held);
    }

    #[test]
    fn the_budget_decision() {
        assert!(
            !must_take_turns(7, 7),
            "nothing answered since the last send"
        );
        assert!(
            must_take_turns(8, 7),
            "a request answered since the last send"
        );
        assert_eq!(units_for(0), 1);
        assert_eq!(units_for(UNIT + 1), 2);
        assert_eq!(units_for(u64::MAX), (DOWNLOAD_BUDGET / UNIT) as u32);
    }
}
