//! Read-ahead for a download whose file has left the page cache: the reads it
//! will want next are kept in flight while the current region is sent.
//!
//! A disk or a network mount whose every read waits a few milliseconds gives a
//! download `reads in flight × read size / latency`; a send that reads as it
//! goes has one or two reads in flight (the kernel's own read-ahead), so it is
//! the latency, not the disk, that sets its rate. Here one pool job per
//! download asks the kernel for the pages of a window ahead of the send with
//! `posix_fadvise(WILLNEED)`, [`ADVISE_STEP`] at a time: each call starts the
//! reads and returns, so one thread keeps a whole window in flight, the pages
//! land in the page cache (no copy, no buffer of Pier's), and the send finds
//! them there. The window grows with the download, from [`WINDOW_MIN`] to
//! [`WINDOW_MAX`], so a client that stops early cost little.
//!
//! The advice goes through an open file description of its own (reopened from
//! `/proc/self/fd`): FUSE drops read-ahead whose file already has reads of its
//! own under way when the mount is busy, and the send's sequential reads on the
//! shared description would make every advice look like that.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::FileIoPool;

/// Bytes asked for per `posix_fadvise` call: the kernel reads at most the
/// device's read-ahead size (`read_ahead_kb`, 128 KiB by default and on FUSE)
/// per call and drops the rest of a larger one, so the window is asked for in
/// steps of this size.
pub const ADVISE_STEP: u64 = 128 * 1024;

/// Window of a download that has just left the page cache: eight reads of
/// [`ADVISE_STEP`] in flight.
pub const WINDOW_MIN: u64 = 1024 * 1024;

/// Window of a download that has sent this much off the loop already: a long
/// cold download keeps 32 reads of [`ADVISE_STEP`] in flight. This bounds
/// what one connection can make the kernel read ahead of its client; those
/// pages are page cache (shared, reclaimable), not the connection's memory.
pub const WINDOW_MAX: u64 = 4 * 1024 * 1024;

/// One download's read-ahead. Dropping it stops the job at its next step.
pub struct ReadAhead {
    shared: Arc<Shared>,
    /// Where the download left the page cache: how far it has come since sets
    /// the window.
    first: u64,
}

struct Shared {
    /// The send's duplicate of the file.
    file: Arc<File>,
    /// The description the advice goes through, opened on first use.
    own: OnceLock<Option<File>>,
    /// Where the send is now: nothing before it is asked for.
    floor: AtomicU64,
    /// End of the window the job is to ask for.
    target: AtomicU64,
    /// First byte not yet asked for.
    asked: AtomicU64,
    /// A job is queued or running.
    running: AtomicBool,
    /// The download ended.
    cancelled: AtomicBool,
}

impl ReadAhead {
    /// Read-ahead for a send of `file` that left the page cache at `first`.
    pub fn new(file: Arc<File>, first: u64) -> Self {
        ReadAhead {
            shared: Arc::new(Shared {
                file,
                own: OnceLock::new(),
                floor: AtomicU64::new(first),
                target: AtomicU64::new(first),
                asked: AtomicU64::new(first),
                running: AtomicBool::new(false),
                cancelled: AtomicBool::new(false),
            }),
            first,
        }
    }

    /// The send is at `at` of a region ending at `end`: the window ahead of
    /// it is asked for, by the running job or by a new one.
    pub fn advance(&self, pool: &FileIoPool, at: u64, end: u64) {
        let s = &self.shared;
        if s.cancelled.load(Ordering::Acquire) {
            return;
        }
        let to = at.saturating_add(window(at - self.first.min(at))).min(end);
        s.floor.fetch_max(at, Ordering::AcqRel);
        if s.target.fetch_max(to, Ordering::AcqRel) >= to && s.asked.load(Ordering::Acquire) >= to {
            return;
        }
        if s.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let job = s.clone();
        if !pool.run_readahead(move || job.run()) {
            s.running.store(false, Ordering::Release);
        }
    }

    /// First byte not yet asked for.
    pub fn asked(&self) -> u64 {
        self.shared.asked.load(Ordering::Acquire)
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.shared.cancelled.store(true, Ordering::Release);
    }
}

/// How far ahead a download reads once it has sent `sent` bytes off the loop.
fn window(sent: u64) -> u64 {
    sent.clamp(WINDOW_MIN, WINDOW_MAX)
}

impl Shared {
    /// On a pool thread: asks for the window step by step until it is all
    /// asked for (a call waits while the device's queue is full), then lets a
    /// later advance start a new job.
    fn run(&self) {
        loop {
            self.ask_window();
            self.running.store(false, Ordering::Release);
            // A window raised between the last look and the store above would
            // otherwise wait for the next advance.
            if self.cancelled.load(Ordering::Acquire)
                || self.next() >= self.target.load(Ordering::Acquire)
                || self.running.swap(true, Ordering::AcqRel)
            {
                return;
            }
        }
    }

    fn next(&self) -> u64 {
        self.asked
            .load(Ordering::Acquire)
            .max(self.floor.load(Ordering::Acquire))
    }

    fn ask_window(&self) {
        let Some(file) = self.own_file() else {
            return;
        };
        loop {
            if self.cancelled.load(Ordering::Acquire) {
                return;
            }
            let at = self.next();
            let to = self.target.load(Ordering::Acquire);
            if at >= to {
                return;
            }
            let len = (to - at).min(ADVISE_STEP);
            let advised = rustix::fs::fadvise(
                file,
                at,
                std::num::NonZeroU64::new(len),
                rustix::fs::Advice::WillNeed,
            );
            if advised.is_err() {
                // Advice the file cannot take: the send reads as it goes.
                self.cancelled.store(true, Ordering::Release);
                return;
            }
            self.asked.fetch_max(at + len, Ordering::AcqRel);
        }
    }

    /// The file's own open file description, or the shared one where
    /// `/proc` cannot give one.
    fn own_file(&self) -> Option<&File> {
        let own = self.own.get_or_init(|| {
            let path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
            let flags = rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::NOCTTY
                | rustix::fs::OFlags::CLOEXEC;
            rustix::fs::open(path.as_str(), flags, rustix::fs::Mode::empty())
                .ok()
                .map(File::from)
        });
        Some(own.as_ref().unwrap_or(&self.file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_io::FileIoSettings;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn the_window_grows_with_the_download_and_is_bounded() {
        assert_eq!(window(0), WINDOW_MIN);
        assert_eq!(window(3 * WINDOW_MIN / 2), 3 * WINDOW_MIN / 2);
        assert_eq!(window(u64::MAX / 2), WINDOW_MAX);
    }

    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < end, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_window_ahead_of_the_send_is_asked_for_and_no_further() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![1u8; 16 << 20]).unwrap();
        let file = Arc::new(File::open(f.path()).unwrap());
        let pool = FileIoPool::new(FileIoSettings {
            threads: 4,
            ..FileIoSettings::default()
        });
        let end = 16 << 20;
        let ra = ReadAhead::new(file, 1 << 20);
        ra.advance(&pool, 1 << 20, end);
        wait_for("the first window", || ra.asked() == (1 << 20) + WINDOW_MIN);
        // Three MiB sent since the file left the cache: three MiB ahead.
        ra.advance(&pool, 4 << 20, end);
        wait_for("a larger window", || ra.asked() == 7 << 20);
        // Never past the region's end.
        ra.advance(&pool, 15 << 20, end);
        wait_for("the end", || ra.asked() == end);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ra.asked(), end);
        assert!(!ra.shared.running.load(Ordering::Acquire), "the job ended");
    }

    #[test]
    fn a_dropped_download_stops_its_job() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let file = Arc::new(File::open(f.path()).unwrap());
        // A pool of one thread takes no read-ahead: nothing is asked for,
        // and a later advance may try again.
        let single = FileIoPool::new(FileIoSettings {
            threads: 1,
            ..FileIoSettings::default()
        });
        let ra = ReadAhead::new(file, 0);
        ra.advance(&single, 0, 1 << 30);
        assert!(!ra.shared.running.load(Ordering::Acquire));
        let shared = ra.shared.clone();
        drop(ra);
        assert!(shared.cancelled.load(Ordering::Acquire));
        shared.running.store(true, Ordering::Release);
        shared.run();
        assert_eq!(shared.asked.load(Ordering::Acquire), 0, "nothing asked");
    }
}
