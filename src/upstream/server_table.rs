//! The servers of a group as they are now: the addresses configured, and those
//! DNS (A/AAAA) and SRV records give, which change while the group runs.
//!
//! A server's identity is its address together with the entry that produced it
//! (the name as configured, or the SRV target): the same identity keeps the
//! same slot, so its active health, check history and counters survive every
//! re-resolution that still lists it. Slots are never removed while the group
//! lives, only unlisted (the server drains: no new requests, those in flight
//! finish on it) and listed again if the address comes back, so a worker's
//! index of a server stays valid for every request it has in flight.
//!
//! Readers take no lock: the table is an append-only vector whose elements
//! never move (`boxcar`), each server's changing state is atomics, and a
//! version number tells workers when to look again (`GroupState` rebuilds its
//! balancer then). Writers (the resolver thread) take a short lock among
//! themselves, never shared with the request path.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::observe::status::checks::CheckLog;

/// Where a server came from, for the status page and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerOrigin {
    /// An address written in the configuration.
    Configured,
    /// An A or AAAA record of a name written in the configuration.
    Dns,
    /// An SRV record's target.
    Srv,
    /// Added through the admin API (until the next reload).
    Runtime,
}

impl ServerOrigin {
    /// The word the status page and `/status.json` use.
    pub fn label(self) -> &'static str {
        match self {
            ServerOrigin::Configured => "configured",
            ServerOrigin::Dns => "dns",
            ServerOrigin::Srv => "srv",
            ServerOrigin::Runtime => "runtime",
        }
    }
}

/// What an operator set for a server through the admin API; it lasts until
/// the next reload or restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ServerMode {
    /// Takes requests as its health allows.
    Ready = 0,
    /// No new requests; those in flight finish. Health checks go on.
    Drain = 1,
    /// No requests and no health checks, as for work on the server.
    Maintenance = 2,
}

impl ServerMode {
    /// The word the API and the status page use.
    pub fn label(self) -> &'static str {
        match self {
            ServerMode::Ready => "ready",
            ServerMode::Drain => "drain",
            ServerMode::Maintenance => "maintenance",
        }
    }

    fn of(v: u8) -> ServerMode {
        match v {
            1 => ServerMode::Drain,
            2 => ServerMode::Maintenance,
            _ => ServerMode::Ready,
        }
    }
}

/// One server of a group.
#[derive(Debug)]
pub struct Server {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The `host:port` as written (or an SRV target and port), for logs,
    /// metric labels and the default SNI / Host.
    pub authority: String,
    /// What produced it.
    pub origin: ServerOrigin,
    /// The entry of the group's discovery list that produced it; `None` for
    /// an address written in the configuration.
    pub source: Option<usize>,
    /// Relative share of requests, as configured or resolved.
    weight: AtomicU32,
    /// The weight an operator set through the API (0: none), which a
    /// resolution does not undo.
    weight_set: AtomicU32,
    /// A [`ServerMode`] an operator set.
    mode: AtomicU8,
    /// SRV priority: servers of a higher number are used only while every
    /// server of a lower number is down. 0 for every other server.
    priority: AtomicU32,
    /// Whether the last resolution listed it; an unlisted server drains.
    listed: AtomicBool,
    /// Published by the active health checker; always true without one.
    pub active_up: AtomicBool,
    /// Recent active check results, for the status page.
    pub checks: CheckLog,
}

impl Server {
    /// A server that takes requests now, as the configuration or a resolution gives it.
    pub fn new(
        addr: SocketAddr,
        authority: String,
        origin: ServerOrigin,
        source: Option<usize>,
        weight: u32,
        priority: u32,
    ) -> Self {
        Server {
            addr,
            authority,
            origin,
            source,
            weight: AtomicU32::new(weight),
            weight_set: AtomicU32::new(0),
            mode: AtomicU8::new(ServerMode::Ready as u8),
            priority: AtomicU32::new(priority),
            listed: AtomicBool::new(true),
            active_up: AtomicBool::new(true),
            checks: CheckLog::default(),
        }
    }

    /// Whether the active health check (if any) currently passes.
    pub fn actively_up(&self) -> bool {
        self.active_up.load(Ordering::Relaxed)
    }

    /// Relative share of requests: what an operator set, else what the
    /// configuration or the last resolution gave.
    pub fn weight(&self) -> u32 {
        match self.weight_set.load(Ordering::Relaxed) {
            0 => self.weight.load(Ordering::Relaxed),
            set => set,
        }
    }

    /// The weight an operator set through the API, if any.
    pub fn weight_set(&self) -> Option<u32> {
        Some(self.weight_set.load(Ordering::Relaxed)).filter(|&w| w != 0)
    }

    /// The weight the configuration or the last resolution gave.
    pub fn weight_given(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// What an operator set.
    pub fn mode(&self) -> ServerMode {
        ServerMode::of(self.mode.load(Ordering::Relaxed))
    }

    /// Whether new requests may go to it: in the group and not set aside.
    pub fn takes_requests(&self) -> bool {
        self.listed() && self.mode() == ServerMode::Ready
    }

    /// SRV priority (0 outside SRV).
    pub fn priority(&self) -> u32 {
        self.priority.load(Ordering::Relaxed)
    }

    /// Whether the last resolution listed it (always, for a configured address).
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }
}

/// What one resolution found for one entry: a server to have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundServer {
    /// Its address.
    pub addr: SocketAddr,
    /// Its name: the configured `host:port`, or an SRV target and port.
    pub authority: String,
    /// Its weight.
    pub weight: u32,
    /// Its SRV priority (0 otherwise).
    pub priority: u32,
}

/// What a resolution changed, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MembershipChange {
    /// Servers listed now that were not.
    pub added: Vec<SocketAddr>,
    /// Servers listed before that are not now (they drain).
    pub removed: Vec<SocketAddr>,
    /// Whether anything changed, weights and priorities included.
    pub changed: bool,
}

/// Slots a group may have, every address ever listed counted: a name whose
/// addresses churn past this keeps its last set until a reload starts afresh.
pub const MAX_SERVER_SLOTS: usize = 4096;

/// The servers of one group, growing as resolutions find new addresses.
#[derive(Debug, Default)]
pub struct ServerTable {
    slots: boxcar::Vec<Server>,
    /// Bumped after every change; workers compare it with the one they saw.
    version: AtomicU64,
    /// Serialises writers; readers never take it.
    edit: Mutex<()>,
}

impl ServerTable {
    /// A table of the configured servers.
    pub fn new(servers: impl IntoIterator<Item = Server>) -> Self {
        let table = ServerTable::default();
        for s in servers {
            table.slots.push(s);
        }
        table
    }

    /// Slots, listed or not: every index below it is valid.
    pub fn len(&self) -> usize {
        self.slots.count()
    }

    /// Whether the group has never had a server.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The server in slot `i`.
    pub fn get(&self, i: usize) -> Option<&Server> {
        self.slots.get(i)
    }

    /// Every slot, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Server> + '_ {
        self.slots.iter().map(|(_, s)| s)
    }

    /// Changes so far; a worker that saw an older number looks again.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Whether any server is listed now.
    pub fn any_listed(&self) -> bool {
        self.iter().any(Server::listed)
    }

    /// Makes the servers of entry `source` exactly `found`: addresses that
    /// stay keep their slots (weight and priority updated), new ones get a
    /// slot or their old one back, missing ones are unlisted and drain.
    pub fn replace_source(
        &self,
        source: usize,
        origin: ServerOrigin,
        found: &[FoundServer],
    ) -> MembershipChange {
        let _edit = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        let mut change = MembershipChange::default();
        let mut seen = vec![false; found.len()];
        for (_, s) in self.slots.iter().filter(|(_, s)| s.source == Some(source)) {
            let now = found
                .iter()
                .position(|f| f.addr == s.addr && f.authority == s.authority);
            match now {
                Some(j) if !seen[j] => {
                    seen[j] = true;
                    let f = &found[j];
                    if !s.listed.swap(true, Ordering::Relaxed) {
                        change.added.push(s.addr);
                    }
                    if (s.weight.swap(f.weight, Ordering::Relaxed) != f.weight
                        && s.weight_set.load(Ordering::Relaxed) == 0)
                        || s.priority.swap(f.priority, Ordering::Relaxed) != f.priority
                    {
                        change.changed = true;
                    }
                }
                _ => {
                    if s.listed.swap(false, Ordering::Relaxed) {
                        change.removed.push(s.addr);
                    }
                }
            }
        }
        for (f, _) in found.iter().zip(&seen).filter(|(_, seen)| !**seen) {
            if self.slots.count() >= MAX_SERVER_SLOTS {
                break;
            }
            // Two records for one address and name are one server.
            if self
                .iter()
                .any(|s| s.source == Some(source) && s.addr == f.addr && s.authority == f.authority)
            {
                continue;
            }
            self.slots.push(Server::new(
                f.addr,
                f.authority.clone(),
                origin,
                Some(source),
                f.weight,
                f.priority,
            ));
            change.added.push(f.addr);
        }
        change.changed |= !change.added.is_empty() || !change.removed.is_empty();
        if change.changed {
            self.version.fetch_add(1, Ordering::Release);
        }
        change
    }
}

impl ServerTable {
    /// Sets the mode of server `i` (the admin API); workers follow at their
    /// next pick or pool sweep.
    pub fn set_mode(&self, i: usize, mode: ServerMode) {
        let _edit = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.get(i) {
            s.mode.store(mode as u8, Ordering::Relaxed);
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// Adds a server at `addr` (the admin API), or lists again the one an
    /// operator added there before; `None` when the group has no slot left.
    pub fn add_runtime(&self, addr: SocketAddr, weight: u32) -> Option<usize> {
        let _edit = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        let i = match self
            .slots
            .iter()
            .find(|(_, s)| s.origin == ServerOrigin::Runtime && s.addr == addr)
        {
            Some((i, s)) => {
                s.weight.store(weight, Ordering::Relaxed);
                s.weight_set.store(0, Ordering::Relaxed);
                s.mode.store(ServerMode::Ready as u8, Ordering::Relaxed);
                s.listed.store(true, Ordering::Relaxed);
                i
            }
            None if self.slots.count() >= MAX_SERVER_SLOTS => return None,
            None => self.slots.push(Server::new(
                addr,
                addr.to_string(),
                ServerOrigin::Runtime,
                None,
                weight,
                0,
            )),
        };
        self.version.fetch_add(1, Ordering::Release);
        Some(i)
    }

    /// Takes server `i` out of the group (the admin API): it drains, as a
    /// server whose address left a DNS answer does, until the next reload
    /// (or, for a resolved server, the next answer that lists it).
    pub fn remove(&self, i: usize) {
        let _edit = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.get(i) {
            s.listed.store(false, Ordering::Relaxed);
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// Sets the weight of server `i` (the admin API), kept across
    /// resolutions until the next reload.
    pub fn set_weight(&self, i: usize, weight: u32) {
        let _edit = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.get(i) {
            s.weight_set.store(weight, Ordering::Relaxed);
            self.version.fetch_add(1, Ordering::Release);
        }
    }
}

impl std::ops::Index<usize> for ServerTable {
    type Output = Server;

    fn index(&self, i: usize) -> &Server {
        &self.slots[i]
    }
}

/// A server of `app.test:80` at `addr`, for tests.
#[cfg(test)]
pub fn found_for_tests(addr: &str, weight: u32, priority: u32) -> FoundServer {
    FoundServer {
        addr: addr.parse().unwrap(),
        authority: "app.test:80".into(),
        weight,
        priority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::found_for_tests as found;

    #[test]
    fn addresses_that_stay_keep_their_slot_and_state() {
        let table = ServerTable::new([Server::new(
            "10.0.0.9:80".parse().unwrap(),
            "10.0.0.9:80".into(),
            ServerOrigin::Configured,
            None,
            1,
            0,
        )]);
        let v0 = table.version();
        let c = table.replace_source(
            0,
            ServerOrigin::Dns,
            &[found("10.0.0.1:80", 1, 0), found("10.0.0.2:80", 1, 0)],
        );
        assert_eq!(c.added.len(), 2);
        assert!(table.version() > v0);
        assert_eq!(table.len(), 3);
        table[1].active_up.store(false, Ordering::Relaxed);

        // 10.0.0.1 goes, 10.0.0.3 comes: 10.0.0.2 keeps slot 2 and its state.
        let v1 = table.version();
        let c = table.replace_source(
            0,
            ServerOrigin::Dns,
            &[found("10.0.0.2:80", 1, 0), found("10.0.0.3:80", 1, 0)],
        );
        assert_eq!(c.added, ["10.0.0.3:80".parse().unwrap()]);
        assert_eq!(c.removed, ["10.0.0.1:80".parse().unwrap()]);
        assert!(table.version() > v1);
        assert!(!table[1].listed() && table[2].listed() && table[3].listed());
        assert!(table[0].listed(), "another entry's server is untouched");

        // 10.0.0.1 comes back into its own slot, still down by its check.
        table.replace_source(
            0,
            ServerOrigin::Dns,
            &[found("10.0.0.1:80", 1, 0), found("10.0.0.2:80", 1, 0)],
        );
        assert_eq!(table.len(), 4);
        assert!(table[1].listed() && !table[1].actively_up());
        assert!(!table[3].listed());
    }

    #[test]
    fn a_runtime_server_comes_back_into_its_own_slot() {
        let table = ServerTable::default();
        let addr = "10.0.0.5:80".parse().unwrap();
        assert_eq!(table.add_runtime(addr, 2), Some(0));
        table.remove(0);
        assert!(!table[0].listed());
        let v = table.version();
        assert_eq!(table.add_runtime(addr, 4), Some(0));
        assert!(table[0].listed() && table.version() > v);
        assert_eq!((table.len(), table[0].weight()), (1, 4));
        assert_eq!(table[0].origin, ServerOrigin::Runtime);
    }

    #[test]
    fn the_same_answer_changes_nothing_and_a_weight_change_is_a_change() {
        let table = ServerTable::default();
        table.replace_source(0, ServerOrigin::Srv, &[found("10.0.0.1:80", 5, 1)]);
        let v = table.version();
        let c = table.replace_source(0, ServerOrigin::Srv, &[found("10.0.0.1:80", 5, 1)]);
        assert!(!c.changed);
        assert_eq!(table.version(), v);
        let c = table.replace_source(0, ServerOrigin::Srv, &[found("10.0.0.1:80", 7, 1)]);
        assert!(c.changed && c.added.is_empty() && c.removed.is_empty());
        assert_eq!(table[0].weight(), 7);
        assert!(table.version() > v);
    }
}
