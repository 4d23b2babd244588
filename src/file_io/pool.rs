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

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};
use tracing::warn;

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

/// Threads that may be stuck past the timeout, per configured thread, before
/// the pool stops replacing them (a dead mount must not grow the process without
/// bound; queued work then waits and times out).
const STUCK_PER_THREAD: usize = 4;

struct State {
    queue: VecDeque<Job>,
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
                    busy_since: Vec::new(),
                    next_id: 0,
                    idle: 0,
                    closed: false,
                }),
                work: Condvar::new(),
                room: Notify::new(),
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
        let job = Job {
            since: Instant::now(),
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
        match answered {
            Ok(r) => r,
            Err(_) => {
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

    /// Queues `job`, waiting while the queue is full.
    async fn submit(&self, job: Job) -> Result<(), FileIoError> {
        let mut job = Some(job);
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
        drop(st);
        self.shared.work.notify_all();
        self.shared.room.notify_waiters();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A job runs outside the lock, so a poisoned lock only means a panic in
        // this file's short critical sections; the state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes an idle thread when there are more idle threads than unclaimed
    /// jobs, or else starts one when fewer than `threads` are live and not stuck.
    fn wake_or_start(self: &Arc<Self>, mut st: MutexGuard<'_, State>) -> Result<(), FileIoError> {
        if st.queue.len() <= st.idle {
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
                return Err(FileIoError::Unavailable);
            }
        }
        Ok(())
    }

    /// One pool thread: takes jobs until the pool closes, or leaves when the
    /// queue is empty and more threads live than the pool needs (a stuck thread
    /// that came back after its replacement started).
    fn thread_main(self: Arc<Self>, id: u64) {
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
        let (release, hold) = held();
        on_worker(async {
            assert_eq!(p.run(hold).await, Err(FileIoError::TimedOut));
            // The only configured thread is still stuck, yet new work runs.
            assert_eq!(p.run(|| 7).await, Ok(7));
        });
        release.send(()).unwrap();
    }

    #[test]
    fn stuck_threads_are_capped() {
        let p = pool(1, 64, Duration::from_millis(50));
        let mut releases = Vec::new();
        on_worker(async {
            for _ in 0..(2 + STUCK_PER_THREAD) {
                let (release, hold) = held();
                releases.push(release);
                assert_eq!(p.run(hold).await, Err(FileIoError::TimedOut));
            }
        });
        assert_eq!(p.shared.lock().busy_since.len(), 1 + STUCK_PER_THREAD);
        drop(releases);
    }

    #[test]
    fn a_closed_pool_answers_its_waiters() {
        let p = pool(1, 4, Duration::from_secs(10));
        let (release, hold) = held();
        on_worker(async {
            let first = submit(&p, hold);
            tokio::task::yield_now().await;
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
