//! The one deadline mechanism behind every timeout in Pier: a [`Deadline`] that is
//! armed only when the work it bounds has to wait.
//!
//! Most reads and writes on a busy connection finish on their first poll; arming a
//! timer for them costs a clock read and a timer-wheel insertion for nothing. So the
//! future runs first, and only if it is pending is the deadline fixed (from the
//! configured limit, unless a fixed instant was given) and the timer raced against it.
//! A deadline that spans several waits (a response head read in pieces, a request
//! head over several packets) keeps the instant fixed at its first wait.
//!
//! Two helpers keep the per-request cost of time down on a busy connection, as
//! nginx's cached time does: a [`WakeClock`] reads the clock once per wake-up
//! of the worker's work and serves every later use in it (request start and
//! duration, the `Date` field, the next idle deadline), and a [`RollingDeadline`]
//! keeps one timer armed across the waits of a connection, moving its deadline
//! with a store instead of a timer insertion and removal per request.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

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

    /// Joins `thread` from outside any runtime, unless the deadline passes
    /// first: then the thread is left running and this returns false.
    pub fn join_thread<T>(&mut self, thread: std::thread::JoinHandle<T>) -> bool {
        while !thread.is_finished() {
            if self.passed() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = thread.join();
        true
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

/// The time of the current wake-up, read from the clock at its first use and
/// served from memory until [`WakeClock::woke`] says the work waited. Whoever
/// resumes after a wait that may have suspended calls `woke` before using it
/// again; within one synchronous stretch (a read's worth of requests answered)
/// every use sees the same instant, so a request answered without waiting
/// lasts zero by this clock, as by nginx's.
#[derive(Debug, Default)]
pub struct WakeClock {
    now: Cell<Option<Instant>>,
}

impl WakeClock {
    /// The time of this wake-up.
    #[inline]
    pub fn now(&self) -> Instant {
        match self.now.get() {
            Some(t) => t,
            None => {
                let t = Instant::now();
                self.now.set(Some(t));
                t
            }
        }
    }

    /// How long ago `earlier` was, by this wake-up's time: zero, without
    /// the arithmetic, for work begun and ended within one wake-up (most
    /// requests).
    #[inline]
    pub fn since(&self, earlier: Instant) -> Duration {
        let now = self.now();
        if now == earlier {
            Duration::ZERO
        } else {
            now.saturating_duration_since(earlier)
        }
    }

    /// The work waited: the next use reads the clock again.
    #[inline]
    pub fn woke(&self) {
        self.now.set(None);
    }

    /// Awaits `fut`, forgetting the time each time `fut` is resumed after a
    /// wait, so what it reads of this clock is never older than its wake-up.
    pub async fn track<F: Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let mut first = true;
        poll_fn(|cx| {
            if !std::mem::take(&mut first) {
                self.woke();
            }
            fut.as_mut().poll(cx)
        })
        .await
    }
}

/// A deadline for waits that recur on one connection with a limit that starts
/// again each time (the keep-alive idle time): one timer stays armed across
/// them. Each wait states its own instant; the timer is moved only when it is
/// later than that instant, or when it fires before it (then at most once per
/// limit), never per wait.
#[derive(Debug, Default)]
pub struct RollingDeadline {
    sleep: Option<Pin<Box<Sleep>>>,
    /// The last poll was [`RollingDeadline::poll_wait_passed`]'s and left the
    /// timer pending: it holds the waker of the recurring wait.
    armed_for_wait: bool,
}

impl RollingDeadline {
    /// Ready once `at` has passed; otherwise arranges for `cx` to be woken then.
    pub fn poll_passed(&mut self, cx: &mut Context<'_>, at: Instant) -> Poll<()> {
        self.armed_for_wait = false;
        self.poll_sleep(cx, at)
    }

    /// [`RollingDeadline::poll_passed`] for a wait that recurs in one task
    /// (between keep-alive requests), `resumed` false on the wait's first
    /// poll. That first poll leaves alone a timer an earlier such wait left
    /// pending, not yet fired and due no later than `at`: it still holds this
    /// task's waker and wakes it in time, so a busy connection does not poll
    /// its timer once per request. Any other poll in between (a body read's)
    /// makes the next first poll a full one.
    pub fn poll_wait_passed(
        &mut self,
        cx: &mut Context<'_>,
        at: Instant,
        resumed: bool,
    ) -> Poll<()> {
        if !resumed && self.armed_for_wait {
            if let Some(sleep) = &self.sleep {
                if sleep.deadline() <= at && !sleep.is_elapsed() {
                    return Poll::Pending;
                }
            }
        }
        let passed = self.poll_sleep(cx, at);
        self.armed_for_wait = passed.is_pending();
        passed
    }

    fn poll_sleep(&mut self, cx: &mut Context<'_>, at: Instant) -> Poll<()> {
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() > at {
            sleep.as_mut().reset(at);
        }
        loop {
            std::task::ready!(sleep.as_mut().poll(cx));
            if sleep.deadline() >= at {
                return Poll::Ready(());
            }
            // Armed for an earlier wait's deadline: move on to this one.
            sleep.as_mut().reset(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work that waits a little (so it cannot finish on its first poll), then
    /// gives `value`.
    async fn after_a_short_wait<T>(value: T) -> T {
        tokio::time::sleep(Duration::from_millis(5)).await;
        value
    }

    #[tokio::test]
    async fn ready_work_fixes_no_deadline() {
        let mut d = Deadline::after(Duration::from_millis(10));
        assert_eq!(d.run(async { 7 }).await, Ok(7));
        assert_eq!(d.instant(), None, "a ready future fixed the deadline");
    }

    #[tokio::test]
    async fn waiting_work_that_finishes_in_time_is_returned() {
        let mut d = Deadline::after(Duration::from_secs(3600));
        assert_eq!(d.run(after_a_short_wait(8)).await, Ok(8));
        assert!(d.instant().is_some(), "a wait fixes the deadline");
    }

    #[tokio::test]
    async fn work_past_the_deadline_gives_up() {
        let started = Instant::now();
        let r = within(Duration::from_millis(20), std::future::pending::<()>()).await;
        assert_eq!(r, Err(DeadlinePassed));
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[tokio::test]
    async fn a_fixed_deadline_holds_across_waits() {
        let mut d = Deadline::after(Duration::from_millis(30));
        assert_eq!(d.run(after_a_short_wait(())).await, Ok(()));
        let first = d.instant().expect("fixed by the wait");
        // A later wait keeps the instant already fixed and passes it.
        let r = d.run(tokio::time::sleep(Duration::from_secs(3600))).await;
        assert_eq!(r, Err(DeadlinePassed));
        assert_eq!(d.instant(), Some(first));
        // Once passed, even ready work keeps its result: only waits give up.
        assert_eq!(d.run(async { 1 }).await, Ok(1));
        assert!(d.passed());
    }

    #[tokio::test]
    async fn a_deadline_at_an_instant_in_the_past_stops_a_wait_at_once() {
        let mut d = Deadline::at(Instant::now());
        let r = d.run(std::future::pending::<()>()).await;
        assert_eq!(r, Err(DeadlinePassed));
    }

    #[tokio::test]
    async fn io_timeouts_say_what_timed_out() {
        let r = io_within(
            Duration::from_millis(1),
            "write timeout",
            std::future::pending::<io::Result<()>>(),
        )
        .await;
        let e = r.expect_err("a pending write times out");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "write timeout");
    }

    #[test]
    fn remaining_counts_down_to_zero() {
        let mut d = Deadline::after(Duration::from_millis(5));
        assert!(d.remaining() <= Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(6));
        assert_eq!(d.remaining(), Duration::ZERO);
        assert!(d.passed());
    }

    #[tokio::test]
    async fn the_wake_clock_reads_once_until_told_the_work_waited() {
        let clock = WakeClock::default();
        let first = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), first, "read twice within one wake-up");
        clock.woke();
        assert!(clock.now() >= first + Duration::from_millis(2));
    }

    #[tokio::test]
    async fn a_tracked_future_sees_the_time_of_its_own_wake_up() {
        let clock = WakeClock::default();
        let before = clock.now();
        let seen = clock
            .track(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                clock.now()
            })
            .await;
        assert!(
            seen >= before + Duration::from_millis(5),
            "a stale time after a wait"
        );
    }

    #[tokio::test]
    async fn a_rolling_deadline_passes_at_the_instant_of_the_wait() {
        let mut d = RollingDeadline::default();
        let start = Instant::now();
        // A first wait arms the timer early; a later wait with a later
        // instant must not pass at the earlier one.
        let early = start + Duration::from_millis(10);
        let r = poll_fn(|cx| Poll::Ready(d.poll_passed(cx, early))).await;
        assert!(r.is_pending());
        let later = start + Duration::from_millis(40);
        poll_fn(|cx| d.poll_passed(cx, later)).await;
        assert!(Instant::now() >= later);
        // An instant before the armed one moves the timer back.
        let sooner = Instant::now() + Duration::from_millis(5);
        let far = Instant::now() + Duration::from_secs(3600);
        let _ = poll_fn(|cx| Poll::Ready(d.poll_passed(cx, far))).await;
        poll_fn(|cx| d.poll_passed(cx, sooner)).await;
        assert!(Instant::now() >= sooner && Instant::now() < far);
    }

    #[tokio::test]
    async fn a_recurring_wait_is_woken_by_the_timer_an_earlier_wait_left_armed() {
        let mut d = RollingDeadline::default();
        let start = Instant::now();
        let first = start + Duration::from_millis(20);
        let r = poll_fn(|cx| Poll::Ready(d.poll_wait_passed(cx, first, false))).await;
        assert!(r.is_pending());
        // The next wait's first poll leaves the timer alone, yet the wait
        // passes at its own instant, not the earlier one.
        let later = start + Duration::from_millis(40);
        let mut resumed = false;
        poll_fn(|cx| {
            let r = d.poll_wait_passed(cx, later, resumed);
            resumed = true;
            r
        })
        .await;
        assert!(Instant::now() >= later);
        // A timer that fired while nothing waited is seen at the next wait's
        // first poll.
        let soon = Instant::now() + Duration::from_millis(10);
        let r = poll_fn(|cx| Poll::Ready(d.poll_wait_passed(cx, soon, false))).await;
        assert!(r.is_pending());
        tokio::time::sleep(Duration::from_millis(30)).await;
        let r = poll_fn(|cx| Poll::Ready(d.poll_wait_passed(cx, soon, false))).await;
        assert!(r.is_ready(), "a fired timer was left unpolled");
    }
}
