//! A cache zone: the index every worker reads, the byte budget, the eviction
//! queues, the fills in progress and the counters.
//!
//! How shared state is read: the index is a `papaya` map, whose reads take no
//! lock (an epoch guard, then an atomic load); a hit then clones the stored
//! response's `Arc` and bumps its eviction counter with a relaxed atomic, so a
//! hit on one worker never waits for another. Every change to the index
//! (store, replace, evict, purge) is made under the zone's one writer lock,
//! held for the few map operations it takes, which also keeps the byte count
//! exact. Fills in progress are a second small map under its own lock, taken
//! only by misses.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::entry::{StoredResponse, MAX_VARIANTS, OBJECT_OVERHEAD};
use super::evict::{Evictable, S3Fifo};
use super::fill::{Fill, FillEnd};
use crate::http::request::RequestView;

/// A zone's settings, from its `[cache.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSettings {
    /// Bytes of memory for stored responses (keys, heads, bodies).
    pub memory: usize,
    /// Largest response stored; larger ones pass through.
    pub max_object: usize,
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
}

impl Default for ZoneSettings {
    fn default() -> Self {
        ZoneSettings {
            memory: 64 << 20,
            max_object: 8 << 20,
            lock_timeout: Duration::from_secs(5),
            hit_for_miss: Duration::from_secs(120),
            stale_if_error: Duration::ZERO,
            key: super::key::KeySpec::default(),
            disk: None,
        }
    }
}

/// Counters of a zone, for `/metrics`.
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
    /// Responses stored.
    pub stored: AtomicU64,
    /// Responses evicted to stay within the budget.
    pub evictions: AtomicU64,
    /// Responses removed by purge or invalidation.
    pub purged: AtomicU64,
    /// Bytes charged now (stored objects and fills in progress).
    pub bytes: AtomicUsize,
    /// Objects stored now.
    pub objects: AtomicUsize,
}

/// What a lookup found.
pub enum Lookup {
    /// A stored response whose `Vary` matches.
    Found(Arc<StoredResponse>),
    /// The key was recently uncacheable: go to the origin, do not collapse.
    HitForMiss,
    /// Nothing usable.
    Miss,
}

/// Whether this request fetches the key or follows another's fetch.
pub enum FillRole {
    /// Fetch it; the guard ends the fill when dropped.
    Leader(FillGuard),
    /// Follow this fill.
    Follower(Arc<Fill>),
}

struct Writer {
    queues: S3Fifo<StoredResponse>,
    /// Bytes of stored objects.
    used: usize,
    /// Bytes reserved by fills in progress.
    filling: usize,
    objects: usize,
}

type Variants = Arc<[Arc<StoredResponse>]>;

/// A named cache shared by the routes that name it, on every worker.
pub struct CacheZone {
    /// Its name in the configuration.
    pub name: String,
    /// Its settings.
    pub settings: ZoneSettings,
    /// Its counters.
    pub stats: CacheStats,
    /// Its disk tier: every response stored in memory is also written there.
    pub disk: Option<Arc<super::disk::DiskTier>>,
    index: papaya::HashMap<Box<[u8]>, Variants>,
    writer: Mutex<Writer>,
    fills: Mutex<HashMap<Box<[u8]>, Arc<Fill>>>,
    hasher: std::hash::RandomState,
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
        let ghost = settings.memory / 4096;
        CacheZone {
            name: name.to_string(),
            disk: settings.disk.as_ref().map(super::disk::DiskTier::for_dir),
            settings,
            stats: CacheStats::default(),
            index: papaya::HashMap::new(),
            writer: Mutex::new(Writer {
                queues: S3Fifo::new(ghost),
                used: 0,
                filling: 0,
                objects: 0,
            }),
            fills: Mutex::new(HashMap::new()),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// A hash of `key` for the eviction ghost list.
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish()
    }

    /// Finds the stored response for `key` whose `Vary` matches `request`.
    /// Takes no lock: see the module doc.
    pub fn lookup(&self, key: &[u8], request: &RequestView<'_>, now: Instant) -> Lookup {
        let guard = self.index.guard();
        let Some(variants) = self.index.get(key, &guard) else {
            return Lookup::Miss;
        };
        for e in variants.iter() {
            if e.hit_for_miss {
                if e.age(now) < e.lifetime {
                    return Lookup::HitForMiss;
                }
                continue;
            }
            if e.matches(request) {
                e.marks.touch();
                return Lookup::Found(e.clone());
            }
        }
        Lookup::Miss
    }

    /// Stores `entry`, replacing the variant it selects (and a hit-for-miss
    /// mark); `reserved` bytes of a fill move to the stored count. Returns
    /// whether it was stored (a response over `max_object`, or one that
    /// cannot be made room for, is not).
    pub fn insert(&self, entry: Arc<StoredResponse>, reserved: usize) -> bool {
        let charge = entry.charge();
        let mut w = self.lock_writer();
        w.filling = w.filling.saturating_sub(reserved);
        if charge > self.settings.max_object.max(OBJECT_OVERHEAD * 2)
            || !self.make_room(&mut w, charge)
        {
            self.publish_gauges(&w);
            return false;
        }
        let guard = self.index.guard();
        let mut kept: Vec<Arc<StoredResponse>> = vec![entry.clone()];
        if let Some(old) = self.index.get(&entry.key, &guard) {
            for e in old.iter() {
                let replaced = e.hit_for_miss
                    || entry.hit_for_miss
                    || e.same_variant(&entry)
                    || kept.len() >= MAX_VARIANTS;
                if replaced {
                    self.forget(&mut w, e);
                } else {
                    kept.push(e.clone());
                }
            }
        }
        w.used += charge;
        w.objects += 1;
        w.queues.admit(&entry);
        if w.queues.slots() > 2 * w.objects + 1024 {
            w.queues.compact();
        }
        self.index.insert(entry.key.clone(), kept.into(), &guard);
        self.publish_gauges(&w);
        drop(w);
        if !entry.hit_for_miss {
            self.stats.stored.fetch_add(1, Ordering::Relaxed);
            if let Some(disk) = &self.disk {
                disk.offer(&entry);
            }
        }
        true
    }

    /// Removes every stored response of `key`; returns how many.
    pub fn purge(&self, key: &[u8]) -> usize {
        let mut w = self.lock_writer();
        let n = self.remove_key(&mut w, key);
        self.publish_gauges(&w);
        drop(w);
        // The disk holds the same objects (written through) or, after a
        // restart, the ones memory has not seen again.
        let on_disk = self.disk.as_ref().map_or(0, |d| d.purge(key));
        n.max(on_disk)
    }

    /// Removes every stored response whose key starts with `prefix`; returns how many.
    pub fn purge_prefix(&self, prefix: &[u8]) -> usize {
        let mut w = self.lock_writer();
        let keys: Vec<Box<[u8]>> = {
            let guard = self.index.guard();
            self.index
                .keys(&guard)
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect()
        };
        let n: usize = keys.iter().map(|k| self.remove_key(&mut w, k)).sum();
        self.publish_gauges(&w);
        drop(w);
        let on_disk = self.disk.as_ref().map_or(0, |d| d.purge_prefix(prefix));
        n.max(on_disk)
    }

    /// Makes `bytes` of room for a fill in progress; `false` when the budget
    /// cannot hold them (the fill then stops storing).
    pub fn reserve(&self, bytes: usize) -> bool {
        let mut w = self.lock_writer();
        let ok = self.make_room(&mut w, bytes);
        if ok {
            w.filling += bytes;
        }
        self.publish_gauges(&w);
        ok
    }

    /// Gives back bytes a fill reserved and did not store.
    pub fn release(&self, bytes: usize) {
        let mut w = self.lock_writer();
        w.filling = w.filling.saturating_sub(bytes);
        self.publish_gauges(&w);
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

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evicts until `need` more bytes fit.
    fn make_room(&self, w: &mut Writer, need: usize) -> bool {
        let budget = self.settings.memory;
        if need > budget {
            return false;
        }
        while w.used + w.filling + need > budget {
            let Some(victim) = w.queues.victim(budget) else {
                return false;
            };
            self.remove_one(w, &victim);
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Takes `e` out of its key's variants.
    fn remove_one(&self, w: &mut Writer, e: &Arc<StoredResponse>) {
        let guard = self.index.guard();
        if let Some(old) = self.index.get(&e.key, &guard) {
            let kept: Vec<_> = old.iter().filter(|o| !Arc::ptr_eq(o, e)).cloned().collect();
            if kept.is_empty() {
                self.index.remove(&e.key, &guard);
            } else if kept.len() != old.len() {
                self.index.insert(e.key.clone(), kept.into(), &guard);
            }
        }
        self.forget(w, e);
    }

    fn remove_key(&self, w: &mut Writer, key: &[u8]) -> usize {
        let guard = self.index.guard();
        let Some(old) = self.index.remove(key, &guard) else {
            return 0;
        };
        let mut n = 0;
        for e in old.iter() {
            if !e.hit_for_miss {
                n += 1;
            }
            self.forget(w, e);
        }
        self.stats.purged.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Uncharges `e`, once.
    fn forget(&self, w: &mut Writer, e: &StoredResponse) {
        if e.marks.retire() {
            w.used = w.used.saturating_sub(e.charge());
            w.objects = w.objects.saturating_sub(1);
        }
    }

    fn publish_gauges(&self, w: &Writer) {
        self.stats
            .bytes
            .store(w.used + w.filling, Ordering::Relaxed);
        self.stats.objects.store(w.objects, Ordering::Relaxed);
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

    fn small(key: &str) -> Arc<StoredResponse> {
        let fields = *b"Content-Type: text/plain\r\nCache-Control: max-age=3600\r\n";
        Arc::new(StoredResponse {
            body: Arc::new([(*b"Hello, World!").into()]),
            body_len: 13,
            lifetime: Duration::from_secs(3600),
            ..StoredResponse::new(key.as_bytes().into(), 0, 200, fields.into())
        })
    }

    #[test]
    fn a_small_object_is_charged_at_least_what_it_was_measured_to_cost() {
        // bench/cache_memory: 685 bytes of RSS per stored 13-byte response
        // with a 27-byte key and 53 bytes of head (debug build, 48,072 objects).
        let zone = CacheZone::new("t", ZoneSettings::default());
        assert!(zone.insert(small("http://localhost/?k=1000000"), 0));
        let charged = zone.stats.bytes.load(Ordering::Relaxed);
        assert!(charged >= 685, "{charged} bytes charged");
    }
}
