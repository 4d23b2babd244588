//! Each worker's own view of an upstream group: passive health, balancer
//! state, the keep-alive and HTTP/2 pools and the in-flight count. Only that
//! worker touches it, so it needs no lock; the shared description of the
//! group is [`UpstreamGroup`] in `group.rs`.
//!
//! The group's servers change as DNS answers change (`discovery.rs`): each
//! pick compares the table's version with the one this worker last saw (one
//! atomic load) and, when it moved, follows it: state for new servers, the
//! balancer's weights and SRV priority tiers again, and the pooled connections
//! of servers that left closed. Per-server state grows and is never removed,
//! so the index a request in flight holds stays valid while its server drains.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use super::balance::{Balance, Ring, SmoothWrr};
use super::group::{ServerOrigin, UpstreamGroup};
use super::h2_pool::H2Pool;
use super::pool::{Pool, PoolLimits};
use crate::observe::upstream_counters::{ServerCounters, WorkerCounters};

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

/// Which servers take requests, as this worker last saw the group.
#[derive(Default)]
struct Membership {
    /// The server table's version this was built from.
    version: u64,
    /// Per server: the SRV priority tier it serves in; `None` when it takes
    /// no new requests (it left the group, or an operator set it aside).
    tier: Vec<Option<u32>>,
    /// The tiers, lowest (most preferred) first.
    tiers: Vec<u32>,
    /// Servers that take requests now.
    listed: usize,
    /// Consistent-hash ring of the servers in the group, for `balance = "hash"`.
    ring: Option<Ring>,
}

/// A worker's state for one group.
pub struct GroupState {
    /// Per-server state, parallel to [`UpstreamGroup::servers`]; grows with it.
    pub servers: boxcar::Vec<ServerState>,
    /// The servers that take requests, by tier.
    membership: RefCell<Membership>,
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
    pub counters: Arc<WorkerCounters>,
}

impl GroupState {
    /// Fresh state for one of `workers` workers: everything up, nothing pooled.
    pub fn new(group: &UpstreamGroup, workers: usize) -> Self {
        let state = GroupState {
            in_flight: Cell::new(0),
            max_in_flight: group.max_in_flight_per_worker(workers),
            servers: boxcar::Vec::new(),
            membership: RefCell::new(Membership {
                version: u64::MAX,
                ..Membership::default()
            }),
            pool: Pool::new(0, PoolLimits::of(group)),
            h2: H2Pool::new(group),
            wrr: RefCell::new(SmoothWrr::new(std::iter::empty())),
            counters: group.counters.register(0),
        };
        state.follow_membership(group);
        state
    }

    /// Catches up with the group's servers if they changed since this
    /// worker last looked: one atomic load when they did not.
    pub fn follow_membership(&self, group: &UpstreamGroup) {
        let version = group.servers.version();
        if self.membership.borrow().version == version {
            return;
        }
        let table = &group.servers;
        let n = table.len();
        while self.servers.count() < n {
            self.servers.push(ServerState::default());
        }
        while self.counters.count() < n {
            self.counters.push(ServerCounters::default());
        }
        let set_aside = |i: usize| i < n && !table[i].takes_requests();
        self.pool.follow(n, set_aside);
        self.h2.follow(n, set_aside);
        self.wrr
            .borrow_mut()
            .set_weights(table.iter().take(n).map(|s| s.weight()));
        let mut m = self.membership.borrow_mut();
        m.version = version;
        m.tier = table
            .iter()
            .take(n)
            .map(|s| s.takes_requests().then(|| s.priority()))
            .collect();
        m.tiers = m.tier.iter().flatten().copied().collect();
        m.tiers.sort_unstable();
        m.tiers.dedup();
        m.listed = m.tier.iter().flatten().count();
        m.ring = matches!(group.balance, Balance::Hash(_)).then(|| {
            // Configured servers are placed by name as written (a reload
            // moves nothing); resolved ones by address, so a name's
            // addresses that stay keep their keys.
            let names: Vec<(usize, String, u32)> = table
                .iter()
                .take(n)
                .enumerate()
                .filter(|(_, s)| s.takes_requests())
                .map(|(i, s)| {
                    let name = match s.origin {
                        ServerOrigin::Configured => s.authority.clone(),
                        _ => s.addr.to_string(),
                    };
                    (i, name, s.weight())
                })
                .collect();
            Ring::new(names.iter().map(|(i, n, w)| (*i, n.as_str(), *w)))
        });
    }

    /// Whether the group has any server now (a name not yet resolved leaves
    /// it with none).
    pub fn has_servers(&self) -> bool {
        self.membership.borrow().listed > 0
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
        if self.membership.borrow().listed > 1
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

    /// Picks a server for a request: in the group, up, not in `exclude`, by
    /// the group's method, from the lowest SRV priority tier that has one.
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
        self.follow_membership(group);
        let m = self.membership.borrow();
        if let [only] = m.tier[..] {
            // One server: nothing to balance, the same answer in one step.
            let takes = only.is_some() && !exclude.contains(&0);
            let up = takes && (self.is_up(group, 0, now) || group.servers[0].actively_up());
            return up.then_some(0);
        }
        let in_tier = |i: usize, t: u32| m.tier.get(i) == Some(&Some(t));
        let retry = !exclude.is_empty();
        m.tiers
            .iter()
            .find_map(|&t| {
                self.pick_among(group, &m, key, retry, |i| {
                    in_tier(i, t) && !exclude.contains(&i) && self.is_up(group, i, now)
                })
            })
            .or_else(|| {
                m.tiers.iter().find_map(|&t| {
                    self.pick_among(group, &m, key, retry, |i| {
                        in_tier(i, t) && !exclude.contains(&i) && group.servers[i].actively_up()
                    })
                })
            })
    }

    /// The group's method over the servers `eligible` allows.
    fn pick_among(
        &self,
        group: &UpstreamGroup,
        m: &Membership,
        key: u64,
        retry: bool,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match &group.balance {
            Balance::RoundRobin => self.wrr.borrow_mut().next(eligible, retry),
            Balance::LeastConn => self
                .wrr
                .borrow_mut()
                .least_conn(|i| self.servers[i].active.get(), eligible),
            Balance::Hash(_) => m.ring.as_ref()?.first_eligible(key, eligible),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::upstream::server_table::{found_for_tests as found, ServerMode};

    #[test]
    fn a_group_of_one_server_picks_it_unless_excluded_set_aside_or_actively_down() {
        let cfg = crate::config::check_text(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n\
             [[upstream]]\nname = \"u\"\nservers = [\"127.0.0.1:9\"]\n",
        )
        .unwrap();
        let group = &cfg.upstreams[0];
        let state = GroupState::new(group, 1);
        let now = Instant::now();
        assert_eq!(state.pick_server(group, 0, &[], now), Some(0));
        assert_eq!(
            state.pick_server(group, 0, &[0], now),
            None,
            "tried already"
        );
        // Marked down by this worker's failures: still taken, as nothing else is.
        state.servers[0]
            .down_until
            .set(Some(now + Duration::from_secs(60)));
        assert_eq!(state.pick_server(group, 0, &[], now), Some(0));
        // Down by its active health check: not taken.
        group.servers[0].active_up.store(false, Ordering::Relaxed);
        assert_eq!(state.pick_server(group, 0, &[], now), None);
        group.servers[0].active_up.store(true, Ordering::Relaxed);
        // Drained by an operator: no new requests.
        group.servers.set_mode(0, ServerMode::Drain);
        assert_eq!(state.pick_server(group, 0, &[], now), None);
        group.servers.set_mode(0, ServerMode::Ready);
        assert_eq!(state.pick_server(group, 0, &[], now), Some(0));
    }

    #[test]
    fn lower_priorities_first_backups_when_they_are_out_and_changes_followed() {
        let cfg = crate::config::check_text(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n\
             [[upstream]]\nname = \"u\"\nsrv = \"_http._tcp.app.test\"\n\
             [resolver]\nnameservers = [\"127.0.0.1:1\"]\ntimeout = \"100ms\"\nattempts = 1\n",
        )
        .unwrap();
        let group = &cfg.upstreams[0];
        let state = GroupState::new(group, 1);
        let now = Instant::now();
        assert!(!state.has_servers());
        assert_eq!(state.pick_server(group, 0, &[], now), None);

        group.servers.replace_source(
            0,
            ServerOrigin::Srv,
            &[
                found("10.0.0.1:80", 3, 10),
                found("10.0.0.2:80", 1, 10),
                found("10.0.0.3:80", 1, 20),
            ],
        );
        let picks: Vec<usize> = (0..8)
            .map(|_| state.pick_server(group, 0, &[], now).unwrap())
            .collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 6, "{picks:?}");
        assert_eq!(picks.iter().filter(|&&i| i == 1).count(), 2, "{picks:?}");
        // Both of priority 10 tried: the backup.
        assert_eq!(state.pick_server(group, 0, &[0, 1], now), Some(2));
        // One drained: the other of its tier takes everything.
        group.servers.set_mode(0, ServerMode::Drain);
        assert!((0..4).all(|_| state.pick_server(group, 0, &[], now) == Some(1)));
        // The tier emptied by DNS: the backup.
        group
            .servers
            .replace_source(0, ServerOrigin::Srv, &[found("10.0.0.3:80", 1, 20)]);
        assert_eq!(state.pick_server(group, 0, &[], now), Some(2));
        assert!(state.has_servers());
    }
}
