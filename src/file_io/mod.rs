//! File work off the event loop when it would wait for a disk: a slow disk or
//! a network mount must never stall every connection of a worker.
//!
//! Each piece of file work first asks the kernel whether it can be done from
//! memory ([`residency`]); if so it runs inline at no extra cost, and if not it
//! runs on the process's bounded blocking pool ([`pool`]) while the worker
//! serves its other connections; a download that left the page cache keeps
//! the reads it will want next in flight ([`readahead`]). The pool's gauges
//! and counters are on `/metrics` ([`pool_metrics`]).

pub mod mounts;
pub mod pool;
pub mod pool_metrics;
pub mod readahead;
pub mod residency;

pub use pool::{FileIoError, FileIoPool, FileIoSettings};

/// On a pool thread: reads up to `want` bytes at `pos` into `buf`, stopping
/// early only at end of file; gives the buffer back either way, so a caller
/// that moved it into the job keeps it.
pub fn read_up_to(
    file: &std::fs::File,
    mut buf: Vec<u8>,
    pos: u64,
    want: usize,
) -> (Vec<u8>, std::io::Result<usize>) {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < want {
        match file.read_at(&mut buf[done..want], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (buf, Err(e)),
        }
    }
    (buf, Ok(done))
}
