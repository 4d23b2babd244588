//! The one deadline mechanism behind every timeout in Pier: a [`Deadline`] that is
//! armed only when the work it bounds has to wait.
//!
//! Most reads and writes on a busy connection finish on their first poll; arming a
//! timer for them costs a clock read and a timer-wheel insertion for nothing. So the
//! future runs first, and only if it is pending is the deadline fixed (from the
//! configured limit, unless a fixed instant was given) and the timer raced against it.
//! A deadline that spans several waits (a response head read in pieces, a request
//! head over several packets) keeps the instant fixed at its first wait.

use std::future::{poll_fn, Future};
use std::io;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

/// The deadline passed before the work it bounded finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the time limit passed")
    }
}

impl std::error::Error for DeadlinePassed {}

/// A point in time work must finish by: either fixed, or `limit` from the first
/// moment the work has to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Option<Instant>,
    limit: Duration,
}

impl Deadline {
    /// A deadline `limit` after the first wait of the work it bounds (work that
    /// never waits reads no clock).
    pub fn after(limit: Duration) -> Self {
        Deadline { at: None, limit }
    }

    /// A deadline at a fixed instant.
    pub fn at(at: Instant) -> Self {
        Deadline {
            at: Some(at),
            limit: Duration::ZERO,
        }
    }

    /// The instant, once fixed (by [`Deadline::at`] or by a first wait).
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    /// Fixes the instant now if no wait has fixed it yet, and returns it.
    pub fn fix(&mut self) -> Instant {
        let limit = self.limit;
        *self.at.get_or_insert_with(|| Instant::now() + limit)
    }

    /// Time left before the deadline (fixing it now if it was not yet fixed);
    /// zero once it has passed. For blocking waits outside a runtime.
    pub fn remaining(&mut self) -> Duration {
        self.fix().saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed (fixing it now if it was not yet fixed).
    pub fn passed(&mut self) -> bool {
        self.remaining().is_zero()
    }

    /// Awaits `fut`, or gives up with [`DeadlinePassed`] at the deadline. `fut` is
    /// polled once before any timer is armed; while waiting it is polled once per
    /// wake-up.
    pub async fn run<F: Future>(&mut self, fut: F) -> Result<F::Output, DeadlinePassed> {
        let mut fut = std::pin::pin!(fut);
        if let Poll::Ready(r) = poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
            return Ok(r);
        }
        let at = self.fix();
        let mut sleep = std::pin::pin!(tokio::time::sleep_until(at));
        // `fut` has just registered this task's waker: the first poll only arms the timer.
        let mut polled = true;
        poll_fn(|cx| {
            if !std::mem::take(&mut polled) {
                if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Ok(r));
                }
            }
            sleep.as_mut().poll(cx).map(|()| Err(DeadlinePassed))
        })
        .await
    }

    /// [`Deadline::run`] for IO: a passed deadline becomes an `io::ErrorKind::TimedOut`
    /// error saying `what` timed out.
    pub async fn run_io<T>(
        &mut self,
        what: &'static str,
        fut: impl Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        match self.run(fut).await {
            Ok(r) => r,
            Err(DeadlinePassed) => Err(io::Error::new(io::ErrorKind::TimedOut, what)),
        }
    }
}

/// Awaits `fut` for at most `limit` from its first wait.
pub async fn within<F: Future>(limit: Duration, fut: F) -> Result<F::Output, DeadlinePassed> {
    Deadline::after(limit).run(fut).await
}

/// Awaits IO for at most `limit` from its first wait; a passed deadline is an
/// `io::ErrorKind::TimedOut` error saying `what` timed out.
pub async fn io_within<T>(
    limit: Duration,
    what: &'static str,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    Deadline::after(limit).run_io(what, fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    #[test]
    fn ready_work_fixes_no_deadline() {
        runtime().block_on(async {
            let mut d = Deadline::after(Duration::from_millis(10));
            assert_eq!(d.run(async { 7 }).await, Ok(7));
            assert_eq!(d.instant(), None, "a ready future fixed the deadline");
        });
    }

    #[test]
    fn waiting_work_that_finishes_in_time_is_returned() {
        runtime().block_on(async {
            let mut d = Deadline::after(Duration::from_secs(3600));
            let r = d
                .run(async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    8
                })
                .await;
            assert_eq!(r, Ok(8));
            assert!(d.instant().is_some(), "a wait fixes the deadline");
        });
    }

    #[test]
    fn work_past_the_deadline_gives_up() {
        runtime().block_on(async {
            let started = Instant::now();
            let r = within(Duration::from_millis(20), std::future::pending::<()>()).await;
            assert_eq!(r, Err(DeadlinePassed));
            assert!(started.elapsed() >= Duration::from_millis(20));
        });
    }

    #[test]
    fn a_fixed_deadline_holds_across_waits() {
        runtime().block_on(async {
            let mut d = Deadline::after(Duration::from_millis(30));
            let r = d
                .run(async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                })
                .await;
            assert_eq!(r, Ok(()));
            let first = d.instant().expect("fixed by the wait");
            // A later wait keeps the instant already fixed and passes it.
            let r = d.run(tokio::time::sleep(Duration::from_secs(3600))).await;
            assert_eq!(r, Err(DeadlinePassed));
            assert_eq!(d.instant(), Some(first));
            // Once passed, even ready work keeps its result: only waits give up.
            assert_eq!(d.run(async { 1 }).await, Ok(1));
            assert!(d.passed());
        });
    }

    #[test]
    fn a_deadline_at_an_instant_in_the_past_stops_a_wait_at_once() {
        runtime().block_on(async {
            let mut d = Deadline::at(Instant::now());
            let r = d.run(std::future::pending::<()>()).await;
            assert_eq!(r, Err(DeadlinePassed));
        });
    }

    #[test]
    fn io_timeouts_say_what_timed_out() {
        runtime().block_on(async {
            let r = io_within(
                Duration::from_millis(1),
                "write timeout",
                std::future::pending::<io::Result<()>>(),
            )
            .await;
            let e = r.expect_err("a pending write times out");
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert_eq!(e.to_string(), "write timeout");
        });
    }

    #[test]
    fn remaining_counts_down_to_zero() {
        let mut d = Deadline::after(Duration::from_millis(5));
        assert!(d.remaining() <= Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(6));
        assert_eq!(d.remaining(), Duration::ZERO);
        assert!(d.passed());
    }
}
