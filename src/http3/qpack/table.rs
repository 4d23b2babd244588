//! QPACK's dynamic table (RFC 9204 §3.2), the same type on both sides: the
//! decoder's mirrors the peer encoder's, the encoder's mirrors the peer
//! decoder's. Entries are addressed by absolute index (the n-th insert
//! since the connection began, §3.2.4), evicted oldest first when an
//! insert or a smaller capacity needs the room (§3.2.2); each costs its
//! name and value plus 32 bytes (§3.2.1).
//!
//! An entry keeps its name and value in one allocation; the table never
//! holds more than its capacity, which is bounded by what this side
//! advertised (decoder) or chose (encoder).

use std::collections::VecDeque;

/// The bytes an entry counts for (§3.2.1).
pub(crate) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

#[derive(Debug)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    fn size(&self) -> usize {
        self.bytes.len() + 32
    }
}

/// The dynamic table of one side of a connection.
#[derive(Debug, Default)]
pub(crate) struct DynamicTable {
    /// Oldest first: the front is absolute index `dropped()`.
    entries: VecDeque<Entry>,
    size: usize,
    capacity: usize,
    inserted: u64,
}

impl DynamicTable {
    /// The number of inserts since the connection began (§3.2.4): one past
    /// the newest entry's absolute index.
    pub(crate) fn insert_count(&self) -> u64 {
        self.inserted
    }

    /// The absolute index of the oldest entry still held.
    pub(crate) fn dropped(&self) -> u64 {
        self.inserted - self.entries.len() as u64
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry at absolute index `abs`, if it is held.
    pub(crate) fn get(&self, abs: u64) -> Option<(&[u8], &[u8])> {
        let offset = abs.checked_sub(self.dropped())?;
        let e = self.entries.get(usize::try_from(offset).ok()?)?;
        Some((e.name(), e.value()))
    }

    /// Sets the capacity, evicting the oldest entries until they fit.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict_to(capacity);
    }

    /// Inserts an entry, evicting the oldest ones to make room; an entry
    /// larger than the capacity is refused (`false`) and nothing changes.
    pub(crate) fn insert(&mut self, name: &[u8], value: &[u8]) -> bool {
        let size = entry_size(name, value);
        if size > self.capacity {
            return false;
        }
        self.evict_to(self.capacity - size);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
        self.inserted += 1;
        true
    }

    /// The bytes an insert of `size` would leave to evict, and whether only
    /// entries older than absolute index `keep_from` would go: the encoder
    /// asks before it inserts, so no entry a reference still needs is
    /// evicted (§2.1.1).
    pub(crate) fn fits_evicting_before(&self, size: usize, keep_from: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        let mut room = self.capacity - self.size;
        for (abs, e) in (self.dropped()..).zip(self.entries.iter()) {
            if room >= size {
                return true;
            }
            if abs >= keep_from {
                return false;
            }
            room += e.size();
        }
        room >= size
    }

    /// The newest entry holding `name: value`, and failing that the newest
    /// holding `name`, among entries at absolute indices `from..below`, as
    /// absolute indices.
    pub(crate) fn find(
        &self,
        name: &[u8],
        value: &[u8],
        from: u64,
        below: u64,
    ) -> (Option<u64>, Option<u64>) {
        let mut name_match = None;
        let dropped = self.dropped();
        for (i, e) in self.entries.iter().enumerate().rev() {
            let abs = dropped + i as u64;
            if abs < from {
                break;
            }
            if abs >= below {
                continue;
            }
            if e.name() == name {
                if e.value() == value {
                    return (Some(abs), name_match.or(Some(abs)));
                }
                name_match = name_match.or(Some(abs));
            }
        }
        (None, name_match)
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.size -= e.size();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_evict_the_oldest_and_keep_absolute_indices() {
        let mut t = DynamicTable::default();
        t.set_capacity(220);
        assert!(t.insert(b":authority", b"www.example.com"));
        assert!(t.insert(b":path", b"/sample/path"));
        assert_eq!((t.size(), t.insert_count(), t.dropped()), (106, 2, 0));
        assert!(t.insert(b"custom-key", b"custom-value"));
        assert!(t.insert(b":authority", b"www.example.com"));
        assert_eq!(t.size(), 217);
        // RFC 9204 B.5: the next insert evicts absolute index 0.
        assert!(t.insert(b"custom-key", b"custom-value2"));
        assert_eq!((t.size(), t.insert_count(), t.dropped()), (215, 5, 1));
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(1), Some((&b":path"[..], &b"/sample/path"[..])));
        assert_eq!(t.get(4).unwrap().1, b"custom-value2");
        assert_eq!(t.get(5), None);
    }

    #[test]
    fn an_entry_over_the_capacity_is_refused_and_changes_nothing() {
        let mut t = DynamicTable::default();
        assert!(!t.insert(b"a", b"b"), "capacity 0 holds nothing");
        t.set_capacity(40);
        assert!(t.insert(b"abcd", b"efgh"));
        assert!(!t.insert(b"abcd", b"efghi"));
        assert_eq!((t.len(), t.insert_count()), (1, 1));
        t.set_capacity(0);
        assert_eq!((t.len(), t.size(), t.insert_count()), (0, 0, 1));
    }

    #[test]
    fn an_insert_fits_only_by_evicting_unpinned_entries() {
        let mut t = DynamicTable::default();
        t.set_capacity(100);
        t.insert(b"aaaa", b"aaaa"); // 40 bytes, absolute 0
        t.insert(b"bbbb", b"bbbb"); // 40 bytes, absolute 1
        assert!(t.fits_evicting_before(20, 0), "free room is enough");
        assert!(!t.fits_evicting_before(40, 0), "entry 0 is pinned");
        assert!(t.fits_evicting_before(40, 1));
        assert!(!t.fits_evicting_before(100, 1));
        assert!(t.fits_evicting_before(100, 2));
        assert!(!t.fits_evicting_before(101, 2));
    }

    #[test]
    fn find_prefers_the_newest_whole_field() {
        let mut t = DynamicTable::default();
        t.set_capacity(1000);
        t.insert(b"k", b"1");
        t.insert(b"k", b"2");
        t.insert(b"x", b"2");
        assert_eq!(t.find(b"k", b"1", 0, 3), (Some(0), Some(1)));
        assert_eq!(t.find(b"k", b"3", 0, 3), (None, Some(1)));
        assert_eq!(
            t.find(b"k", b"1", 1, 3),
            (None, Some(1)),
            "entry 0 is out of range"
        );
        assert_eq!(
            t.find(b"k", b"2", 0, 1),
            (None, Some(0)),
            "entry 1 is out of range"
        );
        assert_eq!(t.find(b"z", b"1", 0, 3), (None, None));
    }
}
