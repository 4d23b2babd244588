//! The blocking pool: a few threads shared by every worker of the process that
//! run the file work which may wait on a disk (an open of an uncached path, a
//! read of pages not in the page cache, a directory listing).
//!
//! It is Pier's own rather than tokio's `spawn_blocking` because each worker
//! runs its own runtime, so tokio would give every worker a pool of up to 512
//! threads with an unbounded queue, and a runtime waits for its blocking
//! threads when it shuts down, so one hung network mount would hang a drain or
//! a reload. Here the thread count and the queue are bounded for the whole
//! process (how many requests a disk serves at once does not grow with the
//! number of cores), a connection whose job finds the queue full waits for
//! room instead of adding a thread, and every job is bounded in time: a waiter
//! gives up after the timeout, and a thread still busy past it stops counting
//! against the pool, so a replacement may start (up to a fixed cap of stuck
//! threads). Threads start on first use and end with the pool.
//!
//! Read-ahead jobs (pages a download will want next, read in parallel so a
//! slow disk's latency is paid once per window instead of once per chunk)
//! nobody waits for: they queue apart, run only while no caller's job waits,
//! and take at most half the threads, so opens and sends always find one.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};
use tracing::warn;

use super::pool_metrics::{self, PoolCounters, PoolGauges};
use crate::deadline::Deadline;

/// Sizes of the pool, from `[server]` `file_io_threads`, `file_io_queue` and
/// `file_io_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIoSettings {
    /// Threads that run file work at once (not counting stuck ones).
    pub threads: usize,
    /// Jobs waiting for a thread; beyond this a connection waits for room.
    pub queue: usize,
    /// Longest wait for one job, queueing included; a thread busy this long
    /// counts as stuck.
    pub timeout: Duration,
}

impl Default for FileIoSettings {
    fn default() -> Self {
        FileIoSettings {
            threads: 16,
            queue: 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a job gave no answer; the caller ends its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileIoError {
    /// The job did not finish within the timeout (a hung mount, a dead disk).
    TimedOut,
    /// The pool was shut down or could not start a thread.
    Unavailable,
}

impl fmt::Display for FileIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileIoError::TimedOut => "the file system did not answer in time",
            FileIoError::Unavailable => "no thread could take the file operation",
        })
    }
}

impl std::error::Error for FileIoError {}

/// A queued piece of work, with when its caller started waiting: a thread
/// running it counts as stuck from the moment that caller gave up.
struct Job {
    since: Instant,
    work: Box<dyn FnOnce() + Send>,
}

/// Nice steps a pool thread runs below the worker that started it. A worker's
/// event loop serves every connection of its core and a pool thread one job,
/// so where they share a busy core the loop goes first and file work (most of
/// it waiting on the disk anyway) takes the gaps: a download's sends must not
/// delay the small replies beside them (bench/slow_disk).
const POOL_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority by [`POOL_NICE`]; a thread
/// may always lower its own, and where it cannot the pool runs as it is.
fn lower_priority() {
    let tid = rustix::thread::gettid();
    if let Ok(nice) = rustix::process::getpriority_process(Some(tid)) {
        let _ = rustix::process::setpriority_process(Some(tid), (nice + POOL_NICE).min(19));
    }
}

/// Threads that may be stuck past the timeout, per configured thread, before
/// the pool stops replacing them (a dead mount must not grow the process without
/// bound; queued work then waits and times out).
const STUCK_PER_THREAD: usize = 4;

struct State {
    queue: VecDeque<Job>,
    /// Read-ahead jobs, run when `queue` is empty.
    background: VecDeque<Job>,
    /// Read-ahead jobs running now.
    background_running: usize,
    /// Each live thread by id, with when the caller of its current job
    /// started waiting (`None` while idle).
    busy_since: Vec<(u64, Option<Instant>)>,
    /// Id of the next thread started.
    next_id: u64,
    /// Threads waiting for work.
    idle: usize,
    /// Set when the pool is dropped: threads finish and leave.
    closed: bool,
}

impl State {
    /// Queued jobs a thread may take now.
    fn runnable(&self, background_limit: usize) -> usize {
        let room = background_limit.saturating_sub(self.background_running);
        self.queue.len() + self.background.len().min(room)
    }

    fn mark(&mut self, id: u64, since: Option<Instant>) {
        if let Some(entry) = self.busy_since.iter_mut().find(|(i, _)| *i == id) {
            entry.1 = since;
        }
    }
}

struct Shared {
    settings: FileIoSettings,
    state: Mutex<State>,
    /// Wakes an idle thread.
    work: Condvar,
    /// Wakes a connection waiting for room in the queue.
    room: Notify,
    counters: PoolCounters,
}

/// The process's blocking pool for one configuration generation: held by the
/// frozen configuration, so every worker reaches it and a reload may resize it.
pub struct FileIoPool {
    shared: Arc<Shared>,
}

impl fmt::Debug for FileIoPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileIoPool")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

impl Default for FileIoPool {
    fn default() -> Self {
        FileIoPool::new(FileIoSettings::default())
    }
}

impl FileIoPool {
    /// A pool that starts its threads on first use.
    pub fn new(settings: FileIoSettings) -> Self {
        let settings = FileIoSettings {
            threads: settings.threads.max(1),
            queue: settings.queue.max(1),
            ..settings
        };
        FileIoPool {
            shared: Arc::new(Shared {
                settings,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    background: VecDeque::new(),
                    background_running: 0,
                    busy_since: Vec::new(),
                    next_id: 0,
                    idle: 0,
                    closed: false,
                }),
                work: Condvar::new(),
                room: Notify::new(),
                counters: PoolCounters::default(),
            }),
        }
    }

    /// The sizes this pool was built with.
    pub fn settings(&self) -> FileIoSettings {
        self.shared.settings
    }

    /// Runs `job` on a pool thread and waits for its result without blocking
    /// the caller's thread; waits for room first when the queue is full. The
    /// whole wait is bounded by the pool's timeout.
    pub async fn run<R, F>(&self, job: F) -> Result<R, FileIoError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let since = Instant::now();
        let counters = &self.shared.counters;
        PoolCounters::add(&counters.jobs, 1);
        let job = Job {
            since,
            work: Box::new(move || {
                let _ = tx.send(job());
            }),
        };
        let mut deadline = Deadline::after(self.shared.settings.timeout);
        deadline.fix();
        let answered = deadline
            .run(async {
                self.submit(job).await?;
                rx.await.map_err(|_| FileIoError::Unavailable)
            })
            .await;
        PoolCounters::add(&counters.wait_us, since.elapsed().as_micros() as u64);
        match answered {
            Ok(r) => r,
            Err(_) => {
                PoolCounters::add(&counters.timeouts, 1);
                warn!(
                    timeout = ?self.shared.settings.timeout,
                    "a file operation did not finish in time; its response ends"
                );
                // The thread running it (if any) counts as stuck from now on,
                // so work queued behind it may get a thread of its own.
                let st = self.shared.lock();
                if !st.queue.is_empty() {
                    let _ = self.shared.wake_or_start(st);
                }
                Err(FileIoError::TimedOut)
            }
        }
    }

    /// Queues read-ahead work nobody waits for: it runs when no caller's job
    /// is queued, on at most half the threads, and is dropped (it is only
    /// advice) when the pool is busy or closed; whether it was queued.
    pub fn run_readahead(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let counters = &self.shared.counters;
        let mut st = self.shared.lock();
        let full = st.background.len() >= self.shared.settings.queue;
        if st.closed || full || self.shared.background_limit() == 0 {
            PoolCounters::add(&counters.readahead_dropped, 1);
            return false;
        }
        PoolCounters::add(&counters.readahead_jobs, 1);
        st.background.push_back(Job {
            since: Instant::now(),
            work: Box::new(job),
        });
        self.shared.wake_or_start(st).is_ok()
    }

    /// The pool's gauges now.
    pub fn gauges(&self) -> PoolGauges {
        let st = self.shared.lock();
        let now = Instant::now();
        let timeout = self.shared.settings.timeout;
        PoolGauges {
            queued: st.queue.len() + st.background.len(),
            threads: st.busy_since.len(),
            busy: st.busy_since.iter().filter(|(_, b)| b.is_some()).count(),
            stuck: st
                .busy_since
                .iter()
                .filter(|(_, b)| b.is_some_and(|t| now.duration_since(t) >= timeout))
                .count(),
        }
    }

    /// Appends the pool's gauges and counters to a Prometheus exposition.
    pub fn render_prometheus(&self, out: &mut String) {
        let s = self.shared.settings;
        pool_metrics::render(
            out,
            &self.shared.counters,
            self.gauges(),
            (s.threads, s.queue),
        );
    }

    /// Queues `job`, waiting while the queue is full.
    async fn submit(&self, job: Job) -> Result<(), FileIoError> {
        let mut job = Some(job);
        let mut counted = false;
        loop {
            let room = self.shared.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            {
                let mut st = self.shared.lock();
                if st.closed {
                    return Err(FileIoError::Unavailable);
                }
                if st.queue.len() < self.shared.settings.queue {
                    st.queue.extend(job.take());
                    return self.shared.wake_or_start(st);
                }
            }
            if !counted {
                counted = true;
                PoolCounters::add(&self.shared.counters.queue_full_waits, 1);
            }
            room.await;
        }
    }
}

impl Drop for FileIoPool {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.closed = true;
        // Queued jobs are dropped: their waiters see the pool gone.
        st.queue.clear();
        st.background.clear();
        drop(st);
        self.shared.work.notify_all();
        self.shared.room.notify_waiters();
    }
}

impl Shared {
    /// Read-ahead jobs that may run at once: half the threads (none for a
    /// pool of one thread, which opens and sends must have to themselves).
    fn background_limit(&self) -> usize {
        self.settings.threads / 2
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A job runs outside the lock, so a poisoned lock only means a panic in
        // this file's short critical sections; the state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes an idle thread when there are more idle threads than unclaimed
    /// jobs, or else starts one when fewer than `threads` are live and not stuck.
    fn wake_or_start(self: &Arc<Self>, mut st: MutexGuard<'_, State>) -> Result<(), FileIoError> {
        if st.runnable(self.background_limit()) <= st.idle {
            drop(st);
            self.work.notify_one();
            return Ok(());
        }
        let now = Instant::now();
        let timeout = self.settings.timeout;
        let stuck = st
            .busy_since
            .iter()
            .filter(|(_, b)| b.is_some_and(|t| now.duration_since(t) >= timeout))
            .count();
        let live = st.busy_since.len();
        let cap = self.settings.threads * (1 + STUCK_PER_THREAD);
        if live - stuck >= self.settings.threads || live >= cap {
            // Every counted thread is busy: the job waits its turn in the queue.
            return Ok(());
        }
        let id = st.next_id;
        st.next_id += 1;
        st.busy_since.push((id, None));
        drop(st);
        let shared = self.clone();
        let started = std::thread::Builder::new()
            .name("pier-file-io".into())
            .spawn(move || shared.thread_main(id));
        if let Err(e) = started {
            warn!(error = %e, "could not start a file IO thread");
            let mut st = self.lock();
            st.busy_since.retain(|(i, _)| *i != id);
            if st.busy_since.is_empty() {
                st.queue.clear();
                st.background.clear();
                return Err(FileIoError::Unavailable);
            }
        }
        Ok(())
    }

    /// One pool thread: takes jobs until the pool closes, or leaves when the
    /// queue is empty and more threads live than the pool needs (a stuck thread
    /// that came back after its replacement started).
    fn thread_main(self: Arc<Self>, id: u64) {
        lower_priority();
        let mut st = self.lock();
        loop {
            if let Some(job) = st.queue.pop_front() {
                st.mark(id, Some(job.since));
                drop(st);
                self.room.notify_one();
                (job.work)();
                st = self.lock();
                st.mark(id, None);
                continue;
            }
            if st.background_running < self.background_limit() {
                if let Some(job) = st.background.pop_front() {
                    st.mark(id, Some(job.since));
                    st.background_running += 1;
                    drop(st);
                    (job.work)();
                    st = self.lock();
                    st.background_running -= 1;
                    st.mark(id, None);
                    continue;
                }
            }
            if st.closed || st.busy_since.len() > self.settings.threads {
                st.busy_since.retain(|(i, _)| *i != id);
                return;
            }
            st.idle += 1;
            st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
            st.idle -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use tokio::task::{spawn_local, JoinHandle, LocalSet};

    fn pool(threads: usize, queue: usize, timeout: Duration) -> Rc<FileIoPool> {
        Rc::new(FileIoPool::new(FileIoSettings {
            threads,
            queue,
            timeout,
        }))
    }

    /// Runs `f` on a single-threaded runtime, as a worker runs.
    fn on_worker<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        LocalSet::new().block_on(&rt, f)
    }

    /// Submits `job` from a task of its own, so several wait at once.
    fn submit<R: Send + 'static>(
        p: &Rc<FileIoPool>,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<Result<R, FileIoError>> {
        let p = p.clone();
        spawn_local(async move { p.run(job).await })
    }

    /// A job that waits until the returned sender is used or dropped.
    fn held() -> (mpsc::Sender<()>, impl FnOnce() + Send + 'static) {
        let (release, gate) = mpsc::channel::<()>();
        (release, move || {
            let _ = gate.recv();
        })
    }

    /// Runs a held job until the pool gives up on it; returns what releases
    /// its thread.
    fn time_out_one(p: &FileIoPool) -> mpsc::Sender<()> {
        let (release, hold) = held();
        on_worker(async {
            assert_eq!(p.run(hold).await, Err(FileIoError::TimedOut));
        });
        release
    }

    /// Submits a held job and waits until a thread runs it (on a busy machine
    /// a thread may take a while to start), so that the next job queues.
    async fn occupy(p: &Rc<FileIoPool>) -> (mpsc::Sender<()>, JoinHandle<Result<(), FileIoError>>) {
        let (release, hold) = held();
        let started = Arc::new(AtomicUsize::new(0));
        let started_in_job = started.clone();
        let job = submit(p, move || {
            started_in_job.store(1, Ordering::SeqCst);
            hold()
        });
        while started.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (release, job)
    }

    #[test]
    fn jobs_run_off_the_calling_thread_and_at_most_threads_at_once() {
        let p = pool(2, 16, Duration::from_secs(10));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let caller = std::thread::current().id();
        on_worker(async {
            let tasks: Vec<_> = (0..6)
                .map(|i| {
                    let (running, most) = (running.clone(), most.clone());
                    submit(&p, move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        (i, std::thread::current().id())
                    })
                })
                .collect();
            for (i, t) in tasks.into_iter().enumerate() {
                let (n, thread) = t.await.unwrap().expect("job ran");
                assert_eq!(n, i);
                assert_ne!(thread, caller);
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2, "threads used at once");
    }

    #[test]
    fn a_full_queue_makes_the_caller_wait_not_fail() {
        let p = pool(1, 1, Duration::from_secs(10));
        let (release, hold) = held();
        on_worker(async {
            let first = submit(&p, hold);
            tokio::task::yield_now().await;
            let second = submit(&p, || 2);
            let third = submit(&p, || 3);
            // The first job holds the only thread and the second fills the
            // queue: the third waits for room, and nothing fails.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(!third.is_finished() && !second.is_finished());
            assert_eq!(p.shared.lock().queue.len(), 1);
            release.send(()).unwrap();
            assert_eq!(first.await.unwrap(), Ok(()));
            assert_eq!(second.await.unwrap(), Ok(2));
            assert_eq!(third.await.unwrap(), Ok(3));
        });
    }

    #[test]
    fn a_stuck_job_times_out_and_its_thread_is_replaced() {
        let p = pool(1, 4, Duration::from_millis(150));
        let release = time_out_on_a_thread(&p);
        // The only configured thread is still stuck, yet new work runs.
        on_worker(async {
            assert_eq!(p.run(|| 7).await, Ok(7));
        });
        release.send(()).unwrap();
    }

    /// Like [`time_out_one`], and then waits until a thread runs the job (on
    /// a busy machine a new thread may take longer to start than the
    /// timeout), so that the thread counts as stuck when the next job comes.
    fn time_out_on_a_thread(p: &FileIoPool) -> mpsc::Sender<()> {
        let (release, hold) = held();
        let (started, running) = mpsc::channel();
        on_worker(async {
            let job = move || {
                let _ = started.send(());
                hold()
            };
            assert_eq!(p.run(job).await, Err(FileIoError::TimedOut));
        });
        running
            .recv_timeout(Duration::from_secs(30))
            .expect("a thread ran the job");
        release
    }

    #[test]
    fn stuck_threads_are_capped() {
        let p = pool(1, 64, Duration::from_millis(50));
        let mut releases: Vec<_> = (0..(1 + STUCK_PER_THREAD))
            .map(|_| time_out_on_a_thread(&p))
            .collect();
        assert_eq!(p.shared.lock().busy_since.len(), 1 + STUCK_PER_THREAD);
        // Every thread is stuck and the cap is reached: the next job waits in
        // the queue and no thread is started for it.
        releases.push(time_out_one(&p));
        assert_eq!(p.shared.lock().busy_since.len(), 1 + STUCK_PER_THREAD);
        assert_eq!(p.shared.lock().queue.len(), 1);
        drop(releases);
    }

    fn render(p: &FileIoPool) -> String {
        let mut text = String::new();
        p.render_prometheus(&mut text);
        text
    }

    #[test]
    fn counters_and_gauges_show_jobs_queue_and_waits() {
        let p = pool(1, 1, Duration::from_secs(10));
        on_worker(async {
            assert_eq!(p.run(|| 1).await, Ok(1));
            let (release, first) = occupy(&p).await;
            let queued = submit(&p, || 2);
            let waiting = submit(&p, || 3);
            tokio::time::sleep(Duration::from_millis(150)).await;
            let g = p.gauges();
            assert_eq!((g.threads, g.busy, g.queued, g.stuck), (1, 1, 1, 0));
            release.send(()).unwrap();
            assert_eq!(first.await.unwrap(), Ok(()));
            assert_eq!(queued.await.unwrap(), Ok(2));
            assert_eq!(waiting.await.unwrap(), Ok(3));
        });
        let text = render(&p);
        for line in [
            "pier_file_io_jobs_total 4\n",
            "pier_file_io_timeouts_total 0\n",
            "pier_file_io_queue_full_waits_total 1\n",
            "pier_file_io_threads_limit 1\n",
            "pier_file_io_queue_limit 1\n",
            "# TYPE pier_file_io_queue_depth gauge\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        let waited: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("pier_file_io_wait_seconds_total "))
            .and_then(|v| v.parse().ok())
            .expect("a wait sum");
        assert!(waited >= 0.3, "three jobs waited 150 ms each: {waited}");
    }

    #[test]
    fn a_timed_out_job_is_counted_and_its_thread_shown_stuck() {
        let p = pool(1, 4, Duration::from_millis(100));
        let release = time_out_on_a_thread(&p);
        let g = p.gauges();
        assert_eq!((g.threads, g.busy, g.stuck), (1, 1, 1));
        assert!(render(&p).contains("pier_file_io_timeouts_total 1\n"));
        release.send(()).unwrap();
    }

    #[test]
    fn read_ahead_waits_for_callers_jobs_and_takes_half_the_threads() {
        let p = pool(4, 16, Duration::from_secs(10));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (release, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        for _ in 0..6 {
            let (running, most, gate) = (running.clone(), most.clone(), gate.clone());
            assert!(p.run_readahead(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let _ = gate.lock().unwrap().recv();
                running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(running.load(Ordering::SeqCst), 2, "half of four threads");
        on_worker(async {
            // Read-ahead holds two threads; a caller's job still runs at once.
            let t = Instant::now();
            assert_eq!(p.run(|| 5).await, Ok(5));
            assert!(t.elapsed() < Duration::from_secs(2));
        });
        drop(release);
        for _ in 0..100 {
            if p.gauges().queued == 0 && running.load(Ordering::SeqCst) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(p.gauges().queued, 0, "every read-ahead job ran");
        assert_eq!(most.load(Ordering::SeqCst), 2);
        let text = render(&p);
        assert!(
            text.contains("pier_file_io_readahead_jobs_total 6\n"),
            "{text}"
        );

        // A pool of one thread keeps it for callers: read-ahead is dropped.
        let single = pool(1, 16, Duration::from_secs(10));
        assert!(!single.run_readahead(|| {}));
        let text = render(&single);
        assert!(
            text.contains("pier_file_io_readahead_dropped_total 1\n"),
            "{text}"
        );
    }

    #[test]
    fn a_closed_pool_answers_its_waiters() {
        let p = pool(1, 4, Duration::from_secs(10));
        on_worker(async {
            let (release, first) = occupy(&p).await;
            let queued = submit(&p, || 1);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!queued.is_finished());
            // What Drop does, while this test still holds the pool.
            p.shared.lock().closed = true;
            p.shared.lock().queue.clear();
            assert_eq!(queued.await.unwrap(), Err(FileIoError::Unavailable));
            assert_eq!(
                p.run(|| 2).await,
                Err(FileIoError::Unavailable),
                "a closed pool takes no work"
            );
            release.send(()).unwrap();
            assert_eq!(first.await.unwrap(), Ok(()));
        });
    }
}
