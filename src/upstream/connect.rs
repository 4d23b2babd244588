//! Phase 4, connecting: a pooled connection or a new one through the shared
//! client transport, within the group's connect timeout; and the in-flight
//! count `least_conn` balances on.

use super::dial::connect;
use super::group::UpstreamGroup;
use super::group_state::GroupState;
use super::pool::Pooled;
use super::ProxyError;
use crate::http1::client::ClientStream;
use crate::observe::upstream_counters::ServerAttempt;

/// Counts a request as in flight on a server while alive: in this worker's
/// count (least_conn) and in its per-server counters (`/metrics`, status page).
pub(crate) struct InFlight<'a> {
    active: &'a std::cell::Cell<u32>,
    /// The attempt in the per-server counters: ended with [`InFlight::answered`]
    /// or [`InFlight::failed`].
    pub(crate) attempt: ServerAttempt<'a>,
}

impl<'a> InFlight<'a> {
    /// An attempt on `server` starts at `now`.
    pub(crate) fn new(state: &'a GroupState, server: usize, now: std::time::Instant) -> Self {
        let active = &state.servers[server].active;
        active.set(active.get() + 1);
        InFlight {
            active,
            attempt: ServerAttempt::start(state.counters.get(server), now),
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.active.set(self.active.get().saturating_sub(1));
    }
}

/// Phase 4: a pooled connection to `server` (unless `fresh_only`), else a new
/// one; with whether it was reused. The requests in flight on the server, this
/// one included, are the pool's measure of how many connections to keep.
/// Dialling (a TCP connect, perhaps a TLS handshake) is a large state machine
/// and the rare case under keep-alive: it is boxed, so every request's future
/// stays small enough for the allocator's fast path.
pub(crate) async fn connect_upstream(
    group: &UpstreamGroup,
    state: &GroupState,
    server: usize,
    fresh_only: bool,
    now: std::time::Instant,
) -> Result<(Pooled, bool), ProxyError> {
    let in_use = state.servers.get(server).map_or(0, |s| s.active.get());
    state.pool.note_in_use(server, in_use as usize, now);
    let pooled = if fresh_only {
        None
    } else {
        state.pool.checkout(server, now)
    };
    match pooled {
        Some(c) => Ok((c, true)),
        None => Box::pin(connect(group, server))
            .await
            .map(|stream: ClientStream| {
                (
                    Pooled {
                        stream,
                        timer: Default::default(),
                    },
                    false,
                )
            }),
    }
}
