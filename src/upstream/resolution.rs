//! What a group resolves and how it went: its names and SRV record sets with
//! their TTL bounds, the `[resolver]` settings, and the counts `/metrics` and
//! the status page show. The resolving itself is `discovery.rs`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::server_table::ServerOrigin;
use crate::observe::metrics::Counter;
use crate::observe::upstream_counters::epoch_ms;

/// `[resolver]`: where and how names are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverSettings {
    /// Name servers to ask; empty: those of `/etc/resolv.conf`.
    pub nameservers: Vec<SocketAddr>,
    /// Deadline of one query.
    pub timeout: Duration,
    /// Queries sent before a lookup fails.
    pub attempts: u32,
}

impl Default for ResolverSettings {
    fn default() -> Self {
        ResolverSettings {
            nameservers: Vec::new(),
            timeout: Duration::from_secs(2),
            attempts: 2,
        }
    }
}

/// What one entry of a group asks DNS for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoveryKind {
    /// A and AAAA records of `host`; every address a server on `port`.
    Name {
        /// The name.
        host: String,
        /// The port every address gets.
        port: u16,
    },
    /// SRV records of this name: each target a server (resolved in turn) on
    /// the record's port, with its priority and weight.
    Srv(String),
}

/// One name or SRV record set of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryEntry {
    /// What to look up.
    pub kind: DiscoveryKind,
    /// As written (`app.internal:8080`, or the SRV name): the servers' name
    /// for a `Name`, and what logs call the entry.
    pub written: String,
    /// The weight of each address of a name (SRV records carry their own).
    pub weight: u32,
}

impl DiscoveryEntry {
    /// What the servers it gives are called on the status page.
    pub fn origin(&self) -> ServerOrigin {
        match self.kind {
            DiscoveryKind::Name { .. } => ServerOrigin::Dns,
            DiscoveryKind::Srv(_) => ServerOrigin::Srv,
        }
    }
}

/// A group's names and SRV record sets and how long their answers are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The entries, in config order.
    pub entries: Vec<DiscoveryEntry>,
    /// An answer is kept at least this long, whatever its TTL says.
    pub min_ttl: Duration,
    /// An answer is kept at most this long, whatever its TTL says.
    pub max_ttl: Duration,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            entries: Vec::new(),
            min_ttl: Duration::from_secs(1),
            max_ttl: Duration::from_secs(300),
        }
    }
}

/// How a resolution ended: the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolutionResult {
    /// An answer with at least one address.
    Ok,
    /// An answer with no address (NXDOMAIN, no records).
    Empty,
    /// No answer (timeout, refused, server failure).
    Failed,
}

impl ResolutionResult {
    /// Every result, in label order.
    pub const ALL: [ResolutionResult; 3] = [
        ResolutionResult::Ok,
        ResolutionResult::Empty,
        ResolutionResult::Failed,
    ];

    /// The Prometheus label value.
    pub fn label(self) -> &'static str {
        match self {
            ResolutionResult::Ok => "ok",
            ResolutionResult::Empty => "empty",
            ResolutionResult::Failed => "failed",
        }
    }
}

/// A group's resolutions, counted for `/metrics` and the status page.
#[derive(Debug, Default)]
pub struct ResolutionStats {
    results: [Counter; 3],
    /// Per entry, when it last resolved, as `epoch_ms` (0: never).
    last_ok_ms: Vec<AtomicU64>,
}

impl ResolutionStats {
    /// Stats for a group of `entries` entries.
    pub fn new(entries: usize) -> Self {
        ResolutionStats {
            results: Default::default(),
            last_ok_ms: (0..entries).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a resolution of entry `entry` that ended with `result`.
    pub fn record(&self, entry: usize, result: ResolutionResult) {
        self.results[result as usize].add(1);
        if result == ResolutionResult::Ok {
            if let Some(t) = self.last_ok_ms.get(entry) {
                t.store(epoch_ms(Instant::now()), Ordering::Relaxed);
            }
        }
    }

    /// Resolutions that ended with `result`.
    pub fn count(&self, result: ResolutionResult) -> u64 {
        self.results[result as usize].get()
    }

    /// Seconds since the entry resolved longest ago last did; `None` without
    /// entries or while one never resolved.
    pub fn oldest_age(&self) -> Option<f64> {
        let oldest = self
            .last_ok_ms
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .min()?;
        (oldest > 0).then(|| epoch_ms(Instant::now()).saturating_sub(oldest) as f64 / 1000.0)
    }
}
