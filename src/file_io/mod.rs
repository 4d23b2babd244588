//! File work off the event loop when it would wait for a disk: a slow disk or
//! a network mount must never stall every connection of a worker.
//!
//! Each piece of file work first asks the kernel whether it can be done from
//! memory ([`residency`]); if so it runs inline at no extra cost, and if not it
//! runs on the process's bounded blocking pool ([`pool`]) while the worker
//! serves its other connections. The pool's gauges and counters are on
//! `/metrics` ([`pool_metrics`]).

pub mod pool;
pub mod pool_metrics;
pub mod residency;

pub use pool::{FileIoError, FileIoPool, FileIoSettings};
