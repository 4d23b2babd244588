//! `rate_limit`: requests per second with a burst, per client address (or per
//! value of a named header), answered with 429 and `Retry-After` past it.
//!
//! # Design: one atomic GCRA cell per key, in a fixed table shared by workers
//!
//! The limit must hold for a client however its connections spread over the
//! workers, so every worker must see the same count for a key; and it must
//! cost no lock shared between workers. Giving each worker a share of the rate
//! that it rebalances is accurate only for clients that stay long enough to be
//! rebalanced, and wrong for a burst that lands on one worker. Instead each
//! key's whole state is one `u64`, the theoretical arrival time of GCRA
//! (the generic cell rate algorithm, the leaky bucket as a meter): a request at
//! `now` is allowed when `max(tat, now) - now <= tolerance`, and then moves
//! `tat` one emission interval later. That update is a single compare-and-swap,
//! so workers answering the same client at once each see and move the same
//! cell: the limit is exact across workers, and workers answering different
//! clients touch different cache lines. A refused request writes nothing.
//!
//! The table is allocated once, at its configured size, and never grows:
//! `max_keys` slots in buckets of four (one cache line), the bucket chosen by
//! a keyed hash of the key (foldhash, seeded at random per table, so clients
//! cannot aim their keys at one bucket without knowing the seed; a few
//! multiplications where SipHash costs a hundred instructions and more). A new
//! key takes an empty slot of its bucket, or one whose `tat` has passed (such
//! a key is indistinguishable from a new one), or else the slot with the
//! earliest `tat`: the client that owes least is forgotten first, so a flood
//! of new addresses evicts its own entries before it evicts a client held at
//! its limit. Memory is 16 bytes a slot whatever the traffic. Time is the
//! worker's time of its current wake-up, read once for every request answered
//! in it, as nginx's cached time.
//!
//! Approximations, all on the side of letting a request through: two keys
//! whose 64-bit keyed hashes are equal share a cell; when a slot changes hands,
//! a worker that matched the old key a moment earlier may move the new key's
//! cell once; a bucket contended past a few retries lets the request through.
//! A reload keeps the table of a rule it finds unchanged (`rate_reload.rs`).

use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use foldhash::quality::FoldHasher;
use foldhash::SharedSeed;

use super::Refusal;
use crate::filter::{RouteFilter, Verdict};
use crate::http::{RequestView, Session};

/// Slots per bucket: 4 × 16 bytes, one cache line.
const WAYS: usize = 4;

/// What requests are counted by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateKey {
    /// The client address (after the PROXY protocol and trusted proxies).
    ClientAddress,
    /// The value of this request header; requests without it are counted by
    /// client address, so leaving it out gains nothing.
    Header(Box<str>),
}

/// A route's limit: its settings and its table.
#[derive(Debug)]
pub struct RateLimit {
    key: RateKey,
    table: Arc<GcraTable>,
}

impl RateLimit {
    /// A limit counting requests by `key` in `table`, which holds the
    /// emission interval (one second over the rate), the burst and the key
    /// bound; the configuration finds the table by its rule, so a reload
    /// that leaves the rule unchanged keeps its counts (`rate_reload.rs`).
    pub(super) fn new(key: RateKey, table: Arc<GcraTable>) -> Self {
        RateLimit { key, table }
    }
}

impl RateKey {
    /// Feeds what `request` is counted by to `h`: the named header's value,
    /// or the client address (tagged apart, so no value stands for an address).
    pub(super) fn feed(&self, request: &RequestView<'_>, h: &mut impl Hasher) {
        match self {
            RateKey::Header(name) => match request.header(name) {
                Some(value) => {
                    1u8.hash(h);
                    value.hash(h);
                }
                None => hash_addr(h, request.client()),
            },
            RateKey::ClientAddress => hash_addr(h, request.client()),
        }
    }

    /// How the key is written in the configuration.
    pub(super) fn name(&self) -> String {
        match self {
            RateKey::ClientAddress => "remote_addr".into(),
            RateKey::Header(name) => format!("header:{}", name.to_ascii_lowercase()),
        }
    }
}

impl RateLimit {
    /// Counts the session's request in this instance's table.
    pub(super) fn decide_locally(&self, session: &mut dyn Session<'_>) -> Result<(), Duration> {
        let key = {
            let mut h = self.table.hasher();
            self.key.feed(&session.request(), &mut h);
            h.finish()
        };
        // The worker's time of this wake-up: what every request answered in
        // it reads, as nginx's cached time, instead of a clock read each.
        let now = self.table.nanos_at(session.worker().clock.now().into_std());
        self.table.acquire(key, now)
    }

    /// What requests are counted by.
    pub(super) fn key(&self) -> &RateKey {
        &self.key
    }
}

/// Answers 429 with a `Retry-After` of `wait` in whole seconds (RFC 9110),
/// rounded up, at least one.
pub(super) fn refuse(session: &mut dyn Session<'_>, wait: Duration) {
    let secs = wait.as_nanos().div_ceil(1_000_000_000).max(1);
    Refusal {
        status: 429,
        field: Some(("Retry-After", Cow::Owned(secs.to_string().into_bytes()))),
    }
    .answer(session);
}

impl RouteFilter for RateLimit {
    fn decides_at_once(&self) -> bool {
        true
    }

    fn request_filter<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Verdict<'s> {
        match self.decide_locally(session) {
            Ok(()) => Verdict::Continue,
            Err(wait) => {
                refuse(session, wait);
                Verdict::Answered
            }
        }
    }
}

/// Hashes a client address as one 128-bit number, an IPv4 address as the
/// IPv6 address it maps to (the same client either way), after a tag that
/// keeps it apart from a header value.
fn hash_addr(h: &mut impl Hasher, addr: IpAddr) {
    let bits = match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v6) => v6.to_bits(),
    };
    h.write_u8(0);
    h.write_u128(bits);
}

/// One key's state: the keyed hash that owns the slot (0: free) and its
/// theoretical arrival time in nanoseconds since the table's epoch.
#[derive(Debug, Default)]
struct GcraSlot {
    key: AtomicU64,
    tat: AtomicU64,
}

/// One cache line of slots.
#[derive(Debug, Default)]
#[repr(align(64))]
struct GcraBucket {
    slots: [GcraSlot; WAYS],
}

/// The fixed-size table of GCRA cells.
#[derive(Debug)]
pub(super) struct GcraTable {
    buckets: Box<[GcraBucket]>,
    /// foldhash's two seeds, drawn from the system's randomness (through
    /// std's keyed SipHash state) when the table is made: foldhash's own
    /// random state is seeded from addresses and the time, which is not
    /// enough for keys chosen by clients.
    seed: u64,
    shared_seed: SharedSeed,
    epoch: Instant,
    /// Nanoseconds between two requests at the steady rate.
    interval: u64,
    /// How far ahead of now `tat` may be for a request to pass: (burst - 1)
    /// intervals, so `burst` requests pass at once.
    tolerance: u64,
}

impl GcraTable {
    pub(super) fn new(per_request: Duration, burst: u32, max_keys: usize) -> Self {
        let buckets = max_keys.div_ceil(WAYS).next_power_of_two().max(1);
        let interval = (per_request.as_nanos() as u64).max(1);
        let random = std::collections::hash_map::RandomState::new();
        GcraTable {
            buckets: (0..buckets).map(|_| GcraBucket::default()).collect(),
            seed: random.hash_one(0u8),
            shared_seed: SharedSeed::from_u64(random.hash_one(1u8)),
            epoch: Instant::now(),
            interval,
            tolerance: interval.saturating_mul(u64::from(burst.max(1) - 1)),
        }
    }

    /// A hasher for one key.
    fn hasher(&self) -> FoldHasher<'_> {
        FoldHasher::with_seed(self.seed, &self.shared_seed)
    }

    /// Nanoseconds from the epoch to `at` (0 before it), plus one: never 0,
    /// so a fresh slot reads as passed.
    fn nanos_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64 + 1
    }

    /// [`GcraTable::nanos_at`] the clock's present.
    #[cfg(test)]
    fn now(&self) -> u64 {
        self.nanos_at(Instant::now())
    }

    /// Counts one request of `key` at `now`, or says how long until one would pass.
    fn acquire(&self, key: u64, now: u64) -> Result<(), Duration> {
        let key = key.max(1);
        let bucket = &self.buckets[(key as usize) & (self.buckets.len() - 1)];
        for _ in 0..4 {
            if let Some(slot) = bucket
                .slots
                .iter()
                .find(|s| s.key.load(Ordering::Relaxed) == key)
            {
                return self.meter(&slot.tat, now);
            }
            // A new key: a free slot, one whose time has passed, or the one
            // that owes least.
            let victim = bucket
                .slots
                .iter()
                .min_by_key(|s| match s.key.load(Ordering::Relaxed) {
                    0 => 0,
                    _ => s.tat.load(Ordering::Relaxed).max(1),
                })
                .expect("a bucket has slots");
            let old = victim.key.load(Ordering::Relaxed);
            if old == key {
                continue;
            }
            if victim
                .key
                .compare_exchange(old, key, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // The first request of a key always passes.
                victim.tat.store(now + self.interval, Ordering::Release);
                return Ok(());
            }
        }
        Ok(())
    }

    /// GCRA on one cell: one compare-and-swap when the request passes.
    fn meter(&self, cell: &AtomicU64, now: u64) -> Result<(), Duration> {
        let mut seen = cell.load(Ordering::Acquire);
        loop {
            let tat = seen.max(now);
            let ahead = tat - now;
            if ahead > self.tolerance {
                return Err(Duration::from_nanos(ahead - self.tolerance));
            }
            match cell.compare_exchange_weak(
                seen,
                tat + self.interval,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(current) => seen = current,
            }
        }
    }

    /// Keys holding a slot, for tests.
    #[cfg(test)]
    fn occupied(&self) -> usize {
        self.buckets
            .iter()
            .flat_map(|b| b.slots.iter())
            .filter(|s| s.key.load(Ordering::Relaxed) != 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn table(per_request_ms: u64, burst: u32, max_keys: usize) -> GcraTable {
        GcraTable::new(Duration::from_millis(per_request_ms), burst, max_keys)
    }

    #[test]
    fn a_burst_passes_at_once_then_the_rate_holds() {
        // 10 per second, burst 3.
        let t = table(100, 3, 64);
        let start = 1_000 * MS;
        for _ in 0..3 {
            assert_eq!(t.acquire(7, start), Ok(()));
        }
        let wait = t.acquire(7, start).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        // One interval later exactly one more passes.
        assert_eq!(t.acquire(7, start + 100 * MS), Ok(()));
        assert!(t.acquire(7, start + 100 * MS).is_err());
        // Another key has its own cell.
        assert_eq!(t.acquire(8, start), Ok(()));
    }

    #[test]
    fn the_long_run_count_is_rate_times_time_plus_burst() {
        // 100 per second, burst 5, offered 400 per second for 10 s.
        let t = table(10, 5, 64);
        let passed = (0..4000u64)
            .filter(|i| t.acquire(42, 1 + i * 2_500_000).is_ok())
            .count();
        // 10 s × 100/s + 5, give or take the last interval.
        assert!((1004..=1006).contains(&passed), "{passed}");
    }

    #[test]
    fn a_flood_of_keys_stays_in_the_table_and_spares_a_held_client() {
        let t = table(1000, 2, 64);
        let slots = t.buckets.len() * WAYS;
        assert_eq!(slots, 64);
        let now = 1_000 * MS;
        let held = 0xdead_beef_u64;
        assert!(t.acquire(held, now).is_ok());
        assert!(t.acquire(held, now).is_ok());
        assert!(t.acquire(held, now).is_err());
        for k in 1..100_000u64 {
            let key = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            assert!(t.acquire(key, now + k).is_ok(), "a new key passes");
        }
        assert!(t.occupied() <= slots);
        // The flood evicted its own entries, which owe less than the held client.
        assert!(t.acquire(held, now + 100_000).is_err());
    }

    #[test]
    fn a_client_is_one_key_in_either_address_form_and_tables_differ() {
        let t = table(1, 1, 64);
        let other = table(1, 1, 64);
        let key = |t: &GcraTable, a: &str| {
            let mut h = t.hasher();
            hash_addr(&mut h, a.parse().unwrap());
            h.finish()
        };
        assert_eq!(key(&t, "192.0.2.1"), key(&t, "::ffff:192.0.2.1"));
        assert_ne!(key(&t, "192.0.2.1"), key(&t, "192.0.2.2"));
        assert_ne!(key(&t, "::1"), key(&t, "::2"));
        // A header value with an address's bytes is another key.
        let mut h = t.hasher();
        1u8.hash(&mut h);
        b"\0\0\0\0\0\0\0\0\0\0\xff\xff\xc0\0\x02\x01"[..].hash(&mut h);
        assert_ne!(h.finish(), key(&t, "192.0.2.1"));
        // Each table has its own seeds.
        assert_ne!(key(&t, "192.0.2.1"), key(&other, "192.0.2.1"));
    }

    #[test]
    fn the_worker_clock_reads_as_nanoseconds_from_the_epoch() {
        let t = table(1, 1, 64);
        assert_eq!(t.nanos_at(t.epoch + Duration::from_millis(3)), 3 * MS + 1);
        // An instant read before the table was made counts as its epoch.
        assert_eq!(t.nanos_at(t.epoch - Duration::from_millis(3)), 1);
    }

    #[test]
    fn workers_at_once_share_one_count() {
        use std::sync::Arc;
        // 1 per hour, burst 100: exactly 100 pass however many threads try.
        let t = Arc::new(table(3_600_000, 100, 64));
        let now = t.now();
        let passed: usize = (0..4)
            .map(|_| {
                let t = Arc::clone(&t);
                std::thread::spawn(move || (0..1000).filter(|_| t.acquire(5, now).is_ok()).count())
            })
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(passed, 100);
    }
}
