//! A cache zone: its tiers ([`super::tier`]: memory, then disk when it has
//! one), the fills in progress and the counters of the requests it served.
//!
//! The zone is what the proxy and the admin listener speak to: a lookup asks
//! each tier in turn, a stored response goes to memory and through it to
//! disk, and a purge reaches every tier. Fills in progress are a small map
//! under its own lock, taken only by misses.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::disk::DiskTier;
use super::entry::StoredResponse;
use super::fill::{Fill, FillEnd};
use super::memory::MemoryTier;
use super::tier::{CacheTier, Lookup};
use crate::http::request::RequestView;

/// A zone's settings, from its `[cache.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSettings {
    /// Bytes of memory for stored responses (keys, heads, bodies).
    pub memory: usize,
    /// Largest response kept in memory.
    pub max_object: usize,
    /// Largest response written to disk (the same as `max_object` unless
    /// set); only read when the zone has a disk tier.
    pub disk_max_object: usize,
    /// How long followers wait for a leader's response head before they go
    /// to the origin themselves.
    pub lock_timeout: Duration,
    /// How long a response found uncacheable lets requests for its key go
    /// straight to the origin, without collapsing.
    pub hit_for_miss: Duration,
    /// How long past freshness a stored response may answer when the origin
    /// fails, for responses without `stale-if-error`.
    pub stale_if_error: Duration,
    /// What names a stored response.
    pub key: super::key::KeySpec,
    /// The disk tier, when the zone has one.
    pub disk: Option<super::disk::DiskSettings>,
    /// The zone's own targeted cache-control field (RFC 9213 §2.1),
    /// lowercase: read before `CDN-Cache-Control` and `Cache-Control`.
    pub targeted_field: Option<Box<str>>,
}

impl Default for ZoneSettings {
    fn default() -> Self {
        ZoneSettings {
            memory: 64 << 20,
            max_object: 8 << 20,
            disk_max_object: 8 << 20,
            lock_timeout: Duration::from_secs(5),
            hit_for_miss: Duration::from_secs(120),
            stale_if_error: Duration::ZERO,
            key: super::key::KeySpec::default(),
            disk: None,
            targeted_field: None,
        }
    }
}

/// Counters of the requests a zone served, for `/metrics` (each tier
/// keeps its own figures: [`CacheTier::stats`]).
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Answered from a fresh stored response.
    pub hits: AtomicU64,
    /// Went to the origin (including revalidations and hit-for-miss).
    pub misses: AtomicU64,
    /// Answered from a stale stored response (stale-while-revalidate,
    /// max-stale, stale-if-error, origin down).
    pub stale: AtomicU64,
    /// Conditional requests sent to refresh a stored response.
    pub revalidations: AtomicU64,
    /// Of those, answered 304 (the stored body was reused).
    pub revalidated: AtomicU64,
    /// Misses that followed another request's fetch instead of their own.
    pub collapsed: AtomicU64,
    /// Responses removed by purge or invalidation.
    pub purged: AtomicU64,
    /// Requests answered from the disk tier (fresh or stale).
    pub disk_hits: AtomicU64,
    /// Disk objects brought back to memory after more than one hit.
    pub promotions: AtomicU64,
}

/// Whether this request fetches the key or follows another's fetch.
pub enum FillRole {
    /// Fetch it; the guard ends the fill when dropped.
    Leader(FillGuard),
    /// Follow this fill.
    Follower(Arc<Fill>),
}

/// A named cache shared by the routes that name it, on every worker.
pub struct CacheZone {
    /// Its name in the configuration.
    pub name: String,
    /// Its settings.
    pub settings: ZoneSettings,
    /// Its counters.
    pub stats: CacheStats,
    /// The first tier: every lookup starts here, and fills reserve their
    /// bytes from its budget.
    memory: MemoryTier,
    /// The tier below, when the zone has one: every response memory keeps is
    /// also written there.
    disk: Option<Arc<DiskTier>>,
    fills: Mutex<HashMap<Box<[u8]>, Arc<Fill>>>,
}

impl std::fmt::Debug for CacheZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheZone")
            .field("name", &self.name)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl CacheZone {
    /// An empty zone.
    pub fn new(name: &str, settings: ZoneSettings) -> Self {
        CacheZone {
            name: name.to_string(),
            memory: MemoryTier::new(settings.memory, settings.max_object),
            disk: settings.disk.as_ref().map(DiskTier::for_dir),
            settings,
            stats: CacheStats::default(),
            fills: Mutex::new(HashMap::new()),
        }
    }

    /// Its tiers, in the order lookups ask them.
    pub fn tiers(&self) -> impl Iterator<Item = &dyn CacheTier> {
        let memory: &dyn CacheTier = &self.memory;
        let disk = self.disk.as_deref().map(|d| d as &dyn CacheTier);
        std::iter::once(memory).chain(disk)
    }

    /// Whether the zone has a disk tier.
    pub fn has_disk(&self) -> bool {
        self.disk.is_some()
    }

    /// A hash of `key` for the eviction ghost list.
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        self.memory.key_hash(key)
    }

    /// Finds the stored response for `key` whose `Vary` matches `request`,
    /// asking each tier in turn until one knows the key. Takes no lock.
    pub fn lookup(&self, key: &[u8], request: &RequestView<'_>, now: Instant) -> Lookup {
        for tier in self.tiers() {
            match tier.lookup(key, request, now) {
                Lookup::Miss => continue,
                known => return known,
            }
        }
        Lookup::Miss
    }

    /// Stores `entry` in each tier that keeps a response its size: memory
    /// (where `reserved` bytes of its fill move to the stored count) up to
    /// `max_object`, disk up to `disk_max_object`. Returns whether memory
    /// kept it.
    pub fn insert(&self, entry: Arc<StoredResponse>, reserved: usize) -> bool {
        let in_memory = self.memory.store(&entry, reserved);
        if let Some(disk) = &self.disk {
            if entry.body_len <= self.settings.disk_max_object as u64 {
                disk.store(&entry, 0);
            }
        }
        in_memory
    }

    /// The largest response some tier keeps: a fill stops storing past it.
    pub fn largest_object(&self) -> u64 {
        let disk = if self.disk.is_some() {
            self.settings.disk_max_object
        } else {
            0
        };
        self.settings.max_object.max(disk) as u64
    }

    /// Brings `entry`, read back from a disk object hit more than once, to
    /// memory (within its budget and `max_object`); counted when kept.
    pub fn promote(&self, entry: Arc<StoredResponse>) -> bool {
        let kept = self.memory.store(&entry, 0);
        if kept {
            self.stats.promotions.fetch_add(1, Ordering::Relaxed);
        }
        kept
    }

    /// A 304 refreshed the disk object `old` to the head `meta` (see
    /// [`DiskTier::refresh`]); `false` when it left the disk meanwhile.
    pub fn refresh_on_disk(
        &self,
        old: &Arc<super::disk_object::DiskObject>,
        meta: StoredResponse,
    ) -> bool {
        self.disk.as_ref().is_some_and(|d| d.refresh(old, meta))
    }

    /// Removes every stored response of `key`, from every tier; returns how
    /// many (a tier below holds the same objects, written through, or after a
    /// restart ones memory has not seen again: the larger count).
    pub fn purge(&self, key: &[u8]) -> usize {
        let n = self.tiers().map(|t| t.purge(key)).max().unwrap_or(0);
        self.stats.purged.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Removes every stored response whose key starts with `prefix`, from
    /// every tier; returns how many, as [`CacheZone::purge`].
    pub fn purge_prefix(&self, prefix: &[u8]) -> usize {
        let n = self
            .tiers()
            .map(|t| t.purge_prefix(prefix))
            .max()
            .unwrap_or(0);
        self.stats.purged.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Makes `bytes` of room in memory for a fill in progress; `false` when
    /// the budget cannot hold them (the fill then stops storing).
    pub fn reserve(&self, bytes: usize) -> bool {
        self.memory.reserve(bytes)
    }

    /// Gives back bytes a fill reserved and did not store.
    pub fn release(&self, bytes: usize) {
        self.memory.release(bytes)
    }

    /// Leads the fetch of `key`, or follows the one in progress.
    pub fn begin_fill(self: &Arc<Self>, key: &[u8]) -> FillRole {
        let mut fills = self.fills.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = fills.get(key) {
            if f.ended() == FillEnd::Open {
                return FillRole::Follower(f.clone());
            }
        }
        let fill = Arc::new(Fill::new());
        fills.insert(key.into(), fill.clone());
        FillRole::Leader(FillGuard {
            zone: self.clone(),
            key: key.into(),
            fill,
        })
    }
}

/// A leader's hold on a fill: dropped without [`FillGuard::finish`], the fill
/// is abandoned (followers fetch on their own); either way the key's fill
/// slot is freed.
pub struct FillGuard {
    zone: Arc<CacheZone>,
    key: Box<[u8]>,
    /// The fill followers watch.
    pub fill: Arc<Fill>,
}

impl FillGuard {
    /// Ends the fill as `end`.
    pub fn finish(self, end: FillEnd) {
        self.fill.end(end);
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        self.fill.end(FillEnd::Abandoned);
        let mut fills = self.zone.fills.lock().unwrap_or_else(|e| e.into_inner());
        if fills
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.fill))
        {
            fills.remove(&self.key);
        }
    }
}

/// Starts the disk tiers of `zones` (the server calls this at start and
/// after a reload; `pier check` does not, so it touches no directory).
pub fn start_disk_tiers(zones: &[Arc<CacheZone>]) {
    for z in zones {
        if let Some(d) = &z.disk {
            d.start();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tier::Found;
    use crate::http1::parse::{parse_request, RequestHead};
    use crate::http1::Limits;

    #[test]
    fn a_zone_stores_through_its_tiers_and_counts_what_a_purge_removed() {
        let zone = CacheZone::new("t", ZoneSettings::default());
        let entry = StoredResponse {
            lifetime: Duration::from_secs(60),
            ..StoredResponse::new(b"http://a/x".as_slice().into(), 0, 200, Box::default())
        };
        assert!(zone.insert(Arc::new(entry), 0));
        let raw = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut head = RequestHead::default();
        assert!(parse_request(raw, &Limits::default(), &mut head).is_ok());
        let request = RequestView::http1(&head, raw, "192.0.2.1:4000".parse().unwrap(), None);
        let found = zone.lookup(b"http://a/x", &request, Instant::now());
        assert!(matches!(found, Lookup::Found(Found::Memory(_))));
        let memory = zone.tiers().next().map(|t| t.stats()).unwrap_or_default();
        assert_eq!((memory.stored, memory.objects), (1, 1));
        assert_eq!(zone.purge_prefix(b"http://a/"), 1);
        assert_eq!(zone.stats.purged.load(Ordering::Relaxed), 1);
        let found = zone.lookup(b"http://a/x", &request, Instant::now());
        assert!(matches!(found, Lookup::Miss));
    }
}
