//! The blocking pool's counters, for `/metrics`: how much file work leaves the
//! event loop, how long connections wait for it, and whether the pool is the
//! bottleneck (a queue that fills, jobs that time out, threads stuck on a
//! dead mount). Counters belong to one pool, so a reload that builds a new
//! pool starts them again from zero, as a restarted process would.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::observe::exposition::family_head;

/// Counters updated by the pool; read without a lock when scraped.
#[derive(Debug, Default)]
pub(super) struct PoolCounters {
    /// Jobs whose caller waited for the result.
    pub(super) jobs: AtomicU64,
    /// Read-ahead jobs queued (nobody waits for them).
    pub(super) readahead_jobs: AtomicU64,
    /// Read-ahead jobs dropped because their queue was full.
    pub(super) readahead_dropped: AtomicU64,
    /// Callers that found the queue full and waited for room.
    pub(super) queue_full_waits: AtomicU64,
    /// Jobs whose caller gave up after the timeout.
    pub(super) timeouts: AtomicU64,
    /// Microseconds callers spent waiting for results, queueing included.
    pub(super) wait_us: AtomicU64,
}

impl PoolCounters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A moment's view of the pool's gauges, taken under its lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolGauges {
    /// Jobs waiting for a thread, callers' and read-ahead.
    pub queued: usize,
    /// Threads alive, stuck ones included.
    pub threads: usize,
    /// Threads running a job now.
    pub busy: usize,
    /// Threads whose job has run past the timeout.
    pub stuck: usize,
}

/// Appends the pool's series in the Prometheus text format.
pub(super) fn render(out: &mut String, c: &PoolCounters, g: PoolGauges, limits: (usize, usize)) {
    let mut metric = |name: &str, kind: &str, help: &str, v: String| {
        family_head(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    };
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    metric(
        "pier_file_io_threads",
        "gauge",
        "Threads of the file IO pool alive now, stuck ones included.",
        g.threads.to_string(),
    );
    metric(
        "pier_file_io_threads_limit",
        "gauge",
        "Threads the file IO pool runs at once (server.file_io_threads).",
        limits.0.to_string(),
    );
    metric(
        "pier_file_io_threads_busy",
        "gauge",
        "File IO threads running a job now.",
        g.busy.to_string(),
    );
    metric(
        "pier_file_io_threads_stuck",
        "gauge",
        "File IO threads whose job has run past server.file_io_timeout.",
        g.stuck.to_string(),
    );
    metric(
        "pier_file_io_queue_depth",
        "gauge",
        "File IO jobs waiting for a thread.",
        g.queued.to_string(),
    );
    metric(
        "pier_file_io_queue_limit",
        "gauge",
        "Jobs the file IO queue holds before callers wait (server.file_io_queue).",
        limits.1.to_string(),
    );
    metric(
        "pier_file_io_jobs_total",
        "counter",
        "File IO jobs a connection waited for (opens, cold reads and sends, listings).",
        n(&c.jobs),
    );
    metric(
        "pier_file_io_wait_seconds_total",
        "counter",
        "Time connections waited for file IO jobs, queueing included.",
        format!("{}", c.wait_us.load(Ordering::Relaxed) as f64 / 1e6),
    );
    metric(
        "pier_file_io_queue_full_waits_total",
        "counter",
        "File IO jobs whose connection found the queue full and waited for room.",
        n(&c.queue_full_waits),
    );
    metric(
        "pier_file_io_timeouts_total",
        "counter",
        "File IO jobs given up after server.file_io_timeout; each ended its response.",
        n(&c.timeouts),
    );
    metric(
        "pier_file_io_readahead_jobs_total",
        "counter",
        "Read-ahead jobs queued for downloads from file systems that cannot say what they cache.",
        n(&c.readahead_jobs),
    );
    metric(
        "pier_file_io_readahead_dropped_total",
        "counter",
        "Read-ahead jobs not queued because the pool was busy.",
        n(&c.readahead_dropped),
    );
}
