//! A zone's memory tier: the index every worker reads, the byte budget and
//! the eviction queues.
//!
//! How shared state is read: the index is a `papaya` map, whose reads take no
//! lock (an epoch guard, then an atomic load); a hit then clones the stored
//! response's `Arc` and bumps its eviction counter with a relaxed atomic, so a
//! hit on one worker never waits for another. Every change to the index
//! (store, replace, evict, purge) is made under the tier's one writer lock,
//! held for the few map operations it takes, which also keeps the byte count
//! exact. Fills in progress reserve their bytes here as they arrive
//! ([`MemoryTier::reserve`]), so responses in flight count against the
//! budget too.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::entry::{StoredResponse, MAX_VARIANTS, OBJECT_OVERHEAD};
use super::evict::{Evictable, S3Fifo};
use super::tier::{CacheTier, Found, Lookup, TierStats};
use crate::http::request::RequestView;

struct Writer {
    queues: S3Fifo<StoredResponse>,
    /// Bytes of stored objects.
    used: usize,
    /// Bytes reserved by fills in progress.
    filling: usize,
    objects: usize,
}

type Variants = Arc<[Arc<StoredResponse>]>;

/// Counters and gauges of the memory tier.
#[derive(Debug, Default)]
struct MemoryStats {
    stored: AtomicU64,
    evictions: AtomicU64,
    skipped: AtomicU64,
    /// Bytes charged now (stored objects and fills in progress).
    bytes: AtomicUsize,
    objects: AtomicUsize,
}

/// Stored responses in memory, within a byte budget.
pub struct MemoryTier {
    /// Bytes for keys, heads and bodies, fills in progress included.
    budget: usize,
    /// Largest response kept.
    max_object: usize,
    stats: MemoryStats,
    index: papaya::HashMap<Box<[u8]>, Variants>,
    writer: Mutex<Writer>,
    hasher: std::hash::RandomState,
}

impl MemoryTier {
    /// An empty tier of `budget` bytes keeping responses up to `max_object`.
    pub fn new(budget: usize, max_object: usize) -> Self {
        MemoryTier {
            budget,
            max_object,
            stats: MemoryStats::default(),
            index: papaya::HashMap::new(),
            writer: Mutex::new(Writer {
                queues: S3Fifo::new(budget / 4096),
                used: 0,
                filling: 0,
                objects: 0,
            }),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// A hash of `key` for the eviction ghost list.
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish()
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

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evicts until `need` more bytes fit.
    fn make_room(&self, w: &mut Writer, need: usize) -> bool {
        let budget = self.budget;
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

    /// Removes `key`; returns how many responses it held (hit-for-miss
    /// marks are not responses).
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

impl CacheTier for MemoryTier {
    fn name(&self) -> &'static str {
        "memory"
    }

    /// Takes no lock: see the module doc.
    fn lookup(&self, key: &[u8], request: &RequestView<'_>, now: Instant) -> Lookup {
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
                return Lookup::Found(Found::Memory(e.clone()));
            }
        }
        Lookup::Miss
    }

    /// Replaces the variant `entry` selects (and a hit-for-miss mark); the
    /// `reserved` bytes of its fill move to the stored count. A response over
    /// `max_object`, or one that cannot be made room for, is not kept.
    fn store(&self, entry: &Arc<StoredResponse>, reserved: usize) -> bool {
        let charge = entry.charge();
        let mut w = self.lock_writer();
        w.filling = w.filling.saturating_sub(reserved);
        if charge > self.max_object.max(OBJECT_OVERHEAD * 2) || !self.make_room(&mut w, charge) {
            self.publish_gauges(&w);
            drop(w);
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let guard = self.index.guard();
        let mut kept: Vec<Arc<StoredResponse>> = vec![entry.clone()];
        if let Some(old) = self.index.get(&entry.key, &guard) {
            for e in old.iter() {
                let replaced = e.hit_for_miss
                    || entry.hit_for_miss
                    || e.same_variant(entry)
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
        w.queues.admit(entry);
        if w.queues.slots() > 2 * w.objects + 1024 {
            w.queues.compact();
        }
        self.index.insert(entry.key.clone(), kept.into(), &guard);
        self.publish_gauges(&w);
        drop(w);
        if !entry.hit_for_miss {
            self.stats.stored.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    fn purge(&self, key: &[u8]) -> usize {
        let mut w = self.lock_writer();
        let n = self.remove_key(&mut w, key);
        self.publish_gauges(&w);
        n
    }

    fn purge_prefix(&self, prefix: &[u8]) -> usize {
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
        n
    }

    fn stats(&self) -> TierStats {
        let s = &self.stats;
        TierStats {
            bytes: s.bytes.load(Ordering::Relaxed) as u64,
            objects: s.objects.load(Ordering::Relaxed) as u64,
            budget: self.budget as u64,
            stored: s.stored.load(Ordering::Relaxed),
            evictions: s.evictions.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        let tier = MemoryTier::new(64 << 20, 8 << 20);
        assert!(tier.store(&small("http://localhost/?k=1000000"), 0));
        let charged = tier.stats().bytes;
        assert!(charged >= 685, "{charged} bytes charged");
    }

    #[test]
    fn what_does_not_fit_is_skipped_and_purge_counts_responses() {
        let tier = MemoryTier::new(4096, 2048);
        assert!(!tier.store(&small(&"k".repeat(3000)), 0));
        assert_eq!(tier.stats().skipped, 1);
        assert!(tier.store(&small("http://a/1"), 0));
        assert!(tier.store(&small("http://a/2"), 0));
        assert!(tier.store(&small("http://b/1"), 0));
        let s = tier.stats();
        assert_eq!((s.stored, s.objects), (3, 3));
        assert_eq!(tier.purge_prefix(b"http://a/"), 2);
        assert_eq!(tier.purge(b"http://b/1"), 1);
        assert_eq!(tier.purge(b"http://b/1"), 0);
        assert_eq!(tier.stats().objects, 0);
    }
}
