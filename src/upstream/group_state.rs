//! Each worker's own view of an upstream group: passive health, balancer
//! state, the keep-alive and HTTP/2 pools and the in-flight count. Only that
//! worker touches it, so it needs no lock; the frozen, shared description of
//! the group is [`UpstreamGroup`] in `upstream.rs`.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use super::balance::{Balance, SmoothWrr};
use super::group::UpstreamGroup;
use super::h2_pool::H2Pool;
use super::pool::{Pool, PoolLimits};

/// A worker's state for one server: passive health and open requests.
#[derive(Debug, Default)]
pub struct ServerState {
    /// Consecutive failures seen by this worker.
    pub fails: Cell<u32>,
    /// Down (for this worker) until then, after `max_fails` failures.
    pub down_until: Cell<Option<Instant>>,
    /// Requests in flight on this server from this worker (least_conn).
    pub active: Cell<u32>,
}

/// A worker's state for one group.
pub struct GroupState {
    /// Per-server state, parallel to [`UpstreamGroup::servers`].
    pub servers: Vec<ServerState>,
    /// Keep-alive connections.
    pub pool: Pool,
    /// Multiplexed connections of an h2 group.
    pub h2: H2Pool,
    /// Smooth weighted round-robin state.
    pub wrr: RefCell<SmoothWrr>,
    /// Requests (and tcp streams) this worker has in flight to the group.
    pub in_flight: Cell<u32>,
    /// This worker's share of `max_in_flight` (0: no limit).
    pub max_in_flight: u32,
    /// This worker's per-server counters, parallel to [`UpstreamGroup::servers`].
    pub counters: Arc<[crate::observe::upstream_counters::ServerCounters]>,
}

impl GroupState {
    /// Fresh state for one of `workers` workers: everything up, nothing pooled.
    pub fn new(group: &UpstreamGroup, workers: usize) -> Self {
        GroupState {
            in_flight: Cell::new(0),
            max_in_flight: group.max_in_flight_per_worker(workers),
            servers: group
                .servers
                .iter()
                .map(|_| ServerState::default())
                .collect(),
            pool: Pool::new(group.servers.len(), PoolLimits::of(group)),
            h2: H2Pool::new(group),
            wrr: RefCell::new(SmoothWrr::new(group.servers.iter().map(|s| s.weight))),
            counters: group.counters.register(group.servers.len()),
        }
    }

    /// Whether server `i` may be given requests now.
    pub fn is_up(&self, group: &UpstreamGroup, i: usize, now: Instant) -> bool {
        if !group.servers[i].actively_up() {
            return false;
        }
        match self.servers[i].down_until.get() {
            Some(t) if now < t => false,
            Some(_) => {
                // The down time is over: give it a chance again (nginx's fail_timeout).
                self.servers[i].down_until.set(None);
                self.servers[i].fails.set(0);
                true
            }
            None => true,
        }
    }

    /// Records a failure of server `i`; returns true if it is now marked down.
    /// The only server of a group is never marked down (as in nginx): there is
    /// no other to send its requests to, and each worker marking it down on its
    /// own would make it flap long after a blip.
    pub fn record_failure(&self, group: &UpstreamGroup, i: usize, now: Instant) -> bool {
        let s = &self.servers[i];
        let fails = s.fails.get().saturating_add(1);
        s.fails.set(fails);
        if group.servers.len() > 1
            && group.max_fails > 0
            && fails >= group.max_fails
            && s.down_until.get().is_none()
        {
            s.down_until.set(Some(now + group.fail_timeout));
            if let Some(c) = self.counters.get(i) {
                c.marked_down(now + group.fail_timeout);
            }
            return true;
        }
        false
    }

    /// Records a success of server `i`: it answered, so it is up again even
    /// if it was marked down and tried because every server was.
    pub fn record_success(&self, i: usize) {
        self.servers[i].fails.set(0);
        if self.servers[i].down_until.take().is_some() {
            if let Some(c) = self.counters.get(i) {
                c.marked_up();
            }
        }
    }

    /// Counts one more request in flight to the group while the guard lives, or
    /// `None` when this worker's share of `max_in_flight` is taken.
    pub fn admit(&self) -> Option<GroupAdmission<'_>> {
        let n = self.in_flight.get();
        if self.max_in_flight > 0 && n >= self.max_in_flight {
            return None;
        }
        self.in_flight.set(n + 1);
        Some(GroupAdmission(&self.in_flight))
    }

    /// Picks a server for a request: up, not in `exclude`, by the group's method.
    /// `key` is the request's hash key (used by `hash` only). When every server not
    /// yet tried is down by passive health (failed requests), one of them is tried
    /// anyway, by the same method: a request answered 503 with nothing tried helps
    /// no one, and a server back from a blip is found at once rather than after
    /// `fail_timeout` (nginx likewise forgets its failure counts when all servers of
    /// a group failed). Servers an active health check reports down stay out: that
    /// is the operator's own probe saying so.
    pub fn pick_server(
        &self,
        group: &UpstreamGroup,
        key: u64,
        exclude: &[usize],
        now: Instant,
    ) -> Option<usize> {
        self.pick_among(group, key, |i| {
            !exclude.contains(&i) && self.is_up(group, i, now)
        })
        .or_else(|| {
            self.pick_among(group, key, |i| {
                !exclude.contains(&i) && group.servers[i].actively_up()
            })
        })
    }

    /// The group's method over the servers `eligible` allows.
    fn pick_among(
        &self,
        group: &UpstreamGroup,
        key: u64,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match &group.balance {
            Balance::RoundRobin => self.wrr.borrow_mut().next(eligible),
            Balance::LeastConn => self
                .wrr
                .borrow_mut()
                .least_conn(|i| self.servers[i].active.get(), eligible),
            Balance::Hash(_) => group.ring.as_ref()?.first_eligible(key, eligible),
        }
    }
}

/// A request (or tcp stream) counted in its group's `in_flight` until dropped.
pub struct GroupAdmission<'a>(&'a Cell<u32>);

impl Drop for GroupAdmission<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}
