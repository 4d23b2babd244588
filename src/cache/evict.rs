//! S3-FIFO eviction (Yang et al., SOSP 2023): a small FIFO that new objects
//! enter, a main FIFO for objects seen again, and a ghost list of keys recently
//! evicted from the small one. A one-hit scan passes through the small queue
//! without pushing popular objects out of the main one. Hits only bump an
//! atomic counter on the object ([`EvictMarks::touch`]); the queues are touched
//! by writers alone, under the zone's writer lock.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Weak};

/// What the queues need from a stored object.
pub trait Evictable {
    /// Bytes charged against the budget.
    fn charge(&self) -> usize;
    /// A hash of its key, remembered by the ghost list.
    fn key_hash(&self) -> u64;
    /// Its hits and whether it is still in the index.
    fn marks(&self) -> &EvictMarks;
}

/// What eviction keeps on each object: hits since it entered its queue
/// (saturating at 3) and whether it is still in the index (replaced or
/// purged objects are not). Hits and removals change them without a lock.
#[derive(Debug)]
pub struct EvictMarks {
    freq: AtomicU8,
    live: AtomicBool,
}

impl Default for EvictMarks {
    /// Not hit yet, in the index.
    fn default() -> Self {
        EvictMarks {
            freq: AtomicU8::new(0),
            live: AtomicBool::new(true),
        }
    }
}

impl EvictMarks {
    /// Counts a hit: one relaxed atomic, at most 3.
    #[inline]
    pub fn touch(&self) {
        let f = self.freq.load(Ordering::Relaxed);
        if f < 3 {
            self.freq.store(f + 1, Ordering::Relaxed);
        }
    }

    /// Whether the object is still in the index.
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }

    /// Marks the object gone from the index: true the first time only, so
    /// whoever removes it uncharges it once.
    pub fn retire(&self) -> bool {
        self.live.swap(false, Ordering::Relaxed)
    }
}

/// The two FIFOs and the ghost list. Objects are held weakly: the index owns
/// them, so one dropped from the index frees its memory at once.
pub struct S3Fifo<T> {
    small: VecDeque<Weak<T>>,
    main: VecDeque<Weak<T>>,
    small_bytes: usize,
    ghost: VecDeque<u64>,
    ghost_set: HashSet<u64>,
    ghost_max: usize,
}

impl<T: Evictable> S3Fifo<T> {
    /// Empty queues; the ghost list remembers at most `ghost_max` keys.
    pub fn new(ghost_max: usize) -> Self {
        S3Fifo {
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            ghost: VecDeque::new(),
            ghost_set: HashSet::new(),
            ghost_max: ghost_max.max(16),
        }
    }

    /// Queues a new object: straight to main when its key was evicted from
    /// the small queue recently (it came back), else to small.
    pub fn admit(&mut self, e: &Arc<T>) {
        if self.ghost_set.remove(&e.key_hash()) {
            self.main.push_back(Arc::downgrade(e));
        } else {
            self.small_bytes += e.charge();
            self.small.push_back(Arc::downgrade(e));
        }
    }

    /// Picks the next object to evict, or `None` when the queues are empty.
    /// `small_share` is the small queue's share of `budget` (10% in the paper).
    pub fn victim(&mut self, budget: usize) -> Option<Arc<T>> {
        loop {
            let from_small = self.small_bytes > budget / 10 || self.main.is_empty();
            if from_small {
                let w = self.small.pop_front()?;
                let Some(e) = w.upgrade() else { continue };
                self.small_bytes = self.small_bytes.saturating_sub(e.charge());
                let marks = e.marks();
                if !marks.is_live() {
                    continue;
                }
                if marks.freq.load(Ordering::Relaxed) > 1 {
                    marks.freq.store(0, Ordering::Relaxed);
                    self.main.push_back(w);
                    continue;
                }
                self.remember(e.key_hash());
                return Some(e);
            }
            let w = self.main.pop_front()?;
            let Some(e) = w.upgrade() else { continue };
            let marks = e.marks();
            if !marks.is_live() {
                continue;
            }
            let f = marks.freq.load(Ordering::Relaxed);
            if f > 0 {
                marks.freq.store(f - 1, Ordering::Relaxed);
                self.main.push_back(w);
                continue;
            }
            return Some(e);
        }
    }

    fn remember(&mut self, hash: u64) {
        if self.ghost_set.insert(hash) {
            self.ghost.push_back(hash);
        }
        while self.ghost.len() > self.ghost_max {
            if let Some(old) = self.ghost.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }

    /// Drops the queue slots of objects that are gone, so the queues do not
    /// grow with replaced objects between evictions.
    pub fn compact(&mut self) {
        self.small.retain(|w| w.strong_count() > 0);
        self.main.retain(|w| w.strong_count() > 0);
    }

    /// Queue slots held, live or not.
    pub fn slots(&self) -> usize {
        self.small.len() + self.main.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Obj {
        id: u64,
        marks: EvictMarks,
    }

    impl Evictable for Obj {
        fn charge(&self) -> usize {
            1
        }
        fn key_hash(&self) -> u64 {
            self.id
        }
        fn marks(&self) -> &EvictMarks {
            &self.marks
        }
    }

    fn obj(id: u64) -> Arc<Obj> {
        Arc::new(Obj {
            id,
            marks: EvictMarks::default(),
        })
    }

    #[test]
    fn a_scan_of_one_hit_objects_does_not_evict_a_popular_one() {
        // Budget 10 objects: the small queue holds about one.
        let mut q = S3Fifo::new(100);
        let mut held = Vec::new();
        let hot = obj(0);
        q.admit(&hot);
        hot.marks.touch();
        hot.marks.touch();
        held.push(hot.clone());
        let mut evicted = Vec::new();
        for id in 1..100 {
            let o = obj(id);
            q.admit(&o);
            held.push(o);
            // Keep ten objects: evict down to the budget.
            while held.iter().filter(|o| o.marks.is_live()).count() > 10 {
                let v = q.victim(10).expect("something to evict");
                v.marks.retire();
                evicted.push(v.id);
            }
            hot.marks.touch();
        }
        assert!(!evicted.contains(&0), "the hot object survived the scan");
        assert!(hot.marks.is_live());
    }

    #[test]
    fn a_key_evicted_from_small_comes_back_into_main() {
        let mut q = S3Fifo::new(100);
        let a = obj(7);
        q.admit(&a);
        let v = q.victim(10).unwrap();
        assert_eq!(v.id, 7);
        v.marks.retire();
        let again = obj(7);
        q.admit(&again);
        assert_eq!(q.main.len(), 1);
        assert_eq!(q.small.len(), 0);
    }

    #[test]
    fn dead_objects_are_skipped_and_compacted() {
        let mut q = S3Fifo::new(100);
        let a = obj(1);
        q.admit(&a);
        drop(a);
        assert!(q.victim(10).is_none());
        let b = obj(2);
        q.admit(&b);
        drop(b);
        q.compact();
        assert_eq!(q.slots(), 0);
    }
}
