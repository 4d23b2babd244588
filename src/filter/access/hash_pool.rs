//! The threads that check passwords: bcrypt and argon2 are slow on purpose
//! (tens of milliseconds to seconds), and a worker that ran one on its event
//! loop would stall every other connection it serves. Workers hand the check
//! to this pool and await the answer; the pool is bounded in threads and in
//! queued checks, so a flood of guesses costs a fixed amount of CPU and memory
//! and is turned away with 503 once the queue is full.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::oneshot;
use tracing::warn;

/// Checks waiting for a thread, across all workers; beyond it a check is refused.
const QUEUE: usize = 256;
/// At most this many threads, fewer on a smaller machine: the workers need
/// the cores too.
const MAX_THREADS: usize = 4;

type HashCheck = Box<dyn FnOnce() + Send>;

/// The process's password-check threads, started on first use.
pub struct HashPool {
    queue: SyncSender<HashCheck>,
}

/// Why a check could not be queued.
#[derive(Debug, PartialEq, Eq)]
pub struct PoolBusy;

impl HashPool {
    /// The pool, started the first time a check is queued.
    pub fn get() -> &'static HashPool {
        static POOL: OnceLock<HashPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let threads = std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, MAX_THREADS);
            HashPool::start(threads, QUEUE)
        })
    }

    fn start(threads: usize, queue: usize) -> HashPool {
        let (tx, rx) = sync_channel::<HashCheck>(queue);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("pier-hash-{i}"))
                .spawn(move || run_jobs(&rx));
            if let Err(e) = spawned {
                warn!(error = %e, "a password-check thread did not start");
            }
        }
        HashPool { queue: tx }
    }

    /// Runs `check` on a pool thread; the answer arrives on the returned
    /// receiver (closed without one if the check panicked).
    pub fn submit<T, F>(&self, check: F) -> Result<oneshot::Receiver<T>, PoolBusy>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: HashCheck = Box::new(move || {
            // The requester may have gone; its answer is then dropped.
            let _ = tx.send(check());
        });
        match self.queue.try_send(job) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(PoolBusy),
        }
    }
}

/// A pool thread: takes the next job while holding the receiver only as long
/// as the take, so the other threads take the jobs after it meanwhile.
fn run_jobs(rx: &Mutex<Receiver<HashCheck>>) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => {
                // A panicking hash crate costs its one answer, not the thread.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn a_full_queue_refuses_and_answers_arrive() {
        let pool = HashPool::start(1, 1);
        let (release, gate) = channel::<()>();
        let gate = Mutex::new(gate);
        // Occupies the one thread until released.
        let first = pool
            .submit(move || {
                let _ = gate.lock().unwrap().recv();
                1
            })
            .unwrap();
        // Wait until the thread has taken the first job, so the next one queues.
        let mut second = None;
        for _ in 0..1000 {
            if let Ok(rx) = pool.submit(|| 2) {
                second = Some(rx);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let second = second.expect("queued");
        let mut refused = false;
        for _ in 0..10 {
            if pool.submit(|| 3).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "a queue of one refuses once full");
        release.send(()).unwrap();
        assert_eq!(first.blocking_recv(), Ok(1));
        assert_eq!(second.blocking_recv(), Ok(2));
    }
}
