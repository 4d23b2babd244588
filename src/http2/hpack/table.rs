//! The two HPACK tables (RFC 7541 §2.3): the static table, an array indexed
//! directly, and the dynamic table, whose entries live back to back in one
//! byte buffer so that inserting a field allocates nothing once the buffer
//! has grown to its working size.

use std::collections::VecDeque;

/// Entries of the static table (Appendix A); index `i` of the combined
/// address space is `STATIC_TABLE[i - 1]`.
pub(super) const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The number of static entries: dynamic indices start after it.
pub(super) const STATIC_LEN: usize = STATIC_TABLE.len();

/// The static entries named `name`, as (first index, count): the encoder's
/// name lookup, without scanning the table.
fn static_name_range(name: &[u8]) -> Option<(usize, usize)> {
    Some(match name {
        b":authority" => (1, 1),
        b":method" => (2, 2),
        b":path" => (4, 2),
        b":scheme" => (6, 2),
        b":status" => (8, 7),
        b"accept-charset" => (15, 1),
        b"accept-encoding" => (16, 1),
        b"accept-language" => (17, 1),
        b"accept-ranges" => (18, 1),
        b"accept" => (19, 1),
        b"access-control-allow-origin" => (20, 1),
        b"age" => (21, 1),
        b"allow" => (22, 1),
        b"authorization" => (23, 1),
        b"cache-control" => (24, 1),
        b"content-disposition" => (25, 1),
        b"content-encoding" => (26, 1),
        b"content-language" => (27, 1),
        b"content-length" => (28, 1),
        b"content-location" => (29, 1),
        b"content-range" => (30, 1),
        b"content-type" => (31, 1),
        b"cookie" => (32, 1),
        b"date" => (33, 1),
        b"etag" => (34, 1),
        b"expect" => (35, 1),
        b"expires" => (36, 1),
        b"from" => (37, 1),
        b"host" => (38, 1),
        b"if-match" => (39, 1),
        b"if-modified-since" => (40, 1),
        b"if-none-match" => (41, 1),
        b"if-range" => (42, 1),
        b"if-unmodified-since" => (43, 1),
        b"last-modified" => (44, 1),
        b"link" => (45, 1),
        b"location" => (46, 1),
        b"max-forwards" => (47, 1),
        b"proxy-authenticate" => (48, 1),
        b"proxy-authorization" => (49, 1),
        b"range" => (50, 1),
        b"referer" => (51, 1),
        b"refresh" => (52, 1),
        b"retry-after" => (53, 1),
        b"server" => (54, 1),
        b"set-cookie" => (55, 1),
        b"strict-transport-security" => (56, 1),
        b"transfer-encoding" => (57, 1),
        b"user-agent" => (58, 1),
        b"vary" => (59, 1),
        b"via" => (60, 1),
        b"www-authenticate" => (61, 1),
        _ => return None,
    })
}

/// Where the static table holds `name`: `Ok(index)` for an entry with the
/// same value too, `Err(Some(index))` for the name only.
pub(super) fn static_find(name: &[u8], value: &[u8]) -> Result<usize, Option<usize>> {
    let Some((first, count)) = static_name_range(name) else {
        return Err(None);
    };
    for index in first..first + count {
        if STATIC_TABLE[index - 1].1 == value {
            return Ok(index);
        }
    }
    Err(Some(first))
}

/// The size the RFC counts for an entry (§4.1): its octets plus 32.
pub(super) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// Where one entry's octets are in [`DynamicTable::bytes`].
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: usize,
    name_len: usize,
    value_len: usize,
}

/// A dynamic table (§2.3.2): first in, first out, bounded by `max_size` as
/// the RFC counts sizes (§4.1).
#[derive(Debug)]
pub(super) struct DynamicTable {
    /// Names and values of the entries, oldest first, from `head` on;
    /// octets before `head` belong to evicted entries and are dropped when
    /// the buffer would otherwise have to grow.
    bytes: Vec<u8>,
    head: usize,
    /// Oldest at the front, newest (dynamic index 1) at the back.
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
    /// Entries ever inserted: an entry's insertion number (the count before
    /// it went in) names it for as long as it stays, whatever its index.
    inserted: u64,
}

impl DynamicTable {
    /// An empty table that may hold `max_size`.
    pub(super) fn new(max_size: usize) -> Self {
        DynamicTable {
            bytes: Vec::new(),
            head: 0,
            entries: VecDeque::new(),
            size: 0,
            max_size,
            inserted: 0,
        }
    }

    /// The dynamic index (0 is the newest) of the entry inserted as number
    /// `number`, if it is still in the table.
    pub(super) fn index_of_insertion(&self, number: u64) -> Option<usize> {
        let age = self.inserted.checked_sub(number.checked_add(1)?)?;
        usize::try_from(age)
            .ok()
            .filter(|&i| i < self.entries.len())
    }

    /// The insertion number of the entry at dynamic index `index`.
    pub(super) fn insertion_of_index(&self, index: usize) -> u64 {
        self.inserted - 1 - index as u64
    }

    /// Whether the entry at dynamic index `index` is `name: value`.
    pub(super) fn holds(&self, index: usize, name: &[u8], value: &[u8]) -> bool {
        let len = self.entries.len();
        if index >= len {
            return false;
        }
        let e = self.entries[len - 1 - index];
        let name_end = e.start + e.name_len;
        e.name_len == name.len()
            && e.value_len == value.len()
            && &self.bytes[e.start..name_end] == name
            && &self.bytes[name_end..name_end + e.value_len] == value
    }

    /// The number of entries.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The table's current size (§4.1).
    #[cfg(test)]
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The most the table may hold now.
    pub(super) fn max_size(&self) -> usize {
        self.max_size
    }

    /// The entry at dynamic index `index + 1` (0 is the newest).
    pub(super) fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        let len = self.entries.len();
        if index >= len {
            return None;
        }
        let e = self.entries[len - 1 - index];
        let name_end = e.start + e.name_len;
        Some((
            &self.bytes[e.start..name_end],
            &self.bytes[name_end..name_end + e.value_len],
        ))
    }

    /// Where the table holds `name` (0 is the newest entry): `Ok(index)` for
    /// an entry with the same value too, `Err(Some(index))` for the name
    /// only.
    pub(super) fn find(&self, name: &[u8], value: &[u8]) -> Result<usize, Option<usize>> {
        let mut name_match = None;
        for (index, e) in self.entries.iter().rev().enumerate() {
            if e.name_len != name.len() {
                continue;
            }
            let name_end = e.start + e.name_len;
            if &self.bytes[e.start..name_end] != name {
                continue;
            }
            if e.value_len == value.len() && &self.bytes[name_end..name_end + e.value_len] == value
            {
                return Ok(index);
            }
            name_match.get_or_insert(index);
        }
        Err(name_match)
    }

    /// Changes the bound, evicting the oldest entries until the table fits.
    pub(super) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        while self.size > self.max_size {
            self.evict_oldest();
        }
    }

    /// Adds an entry as index 1, evicting what it needs (§4.4); an entry
    /// larger than the whole table leaves the table empty.
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = entry_size(name, value);
        self.inserted += 1;
        if size > self.max_size {
            self.entries.clear();
            self.bytes.clear();
            self.head = 0;
            self.size = 0;
            return;
        }
        while self.size + size > self.max_size {
            self.evict_oldest();
        }
        let octets = name.len() + value.len();
        if self.bytes.len() + octets > self.bytes.capacity() && self.head > 0 {
            self.compact();
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            start,
            name_len: name.len(),
            value_len: value.len(),
        });
        self.size += size;
    }

    fn evict_oldest(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            self.size -= e.name_len + e.value_len + 32;
            self.head = e.start + e.name_len + e.value_len;
            if self.entries.is_empty() {
                self.bytes.clear();
                self.head = 0;
            }
        }
    }

    /// Drops the evicted octets at the front. The buffer is then given room
    /// for twice the table's bound, so the next compaction comes only after
    /// at least that many octets were added and the copying stays linear.
    fn compact(&mut self) {
        self.bytes.copy_within(self.head.., 0);
        self.bytes.truncate(self.bytes.len() - self.head);
        for e in &mut self.entries {
            e.start -= self.head;
        }
        self.head = 0;
        let want = 2 * self.max_size;
        if self.bytes.capacity() < want {
            self.bytes.reserve_exact(want - self.bytes.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_lookup_by_name_and_value() {
        assert_eq!(static_find(b":status", b"404"), Ok(13));
        assert_eq!(static_find(b":status", b"302"), Err(Some(8)));
        assert_eq!(static_find(b"accept-encoding", b"gzip, deflate"), Ok(16));
        assert_eq!(static_find(b"www-authenticate", b""), Ok(61));
        assert_eq!(static_find(b"content-type", b"text/html"), Err(Some(31)));
        assert_eq!(static_find(b"x-custom", b""), Err(None));
        for (i, (name, value)) in STATIC_TABLE.iter().enumerate() {
            assert_eq!(static_find(name, value), Ok(i + 1), "entry {}", i + 1);
        }
    }

    #[test]
    fn eviction_drops_the_oldest_first() {
        // Each entry is 1 + 1 + 32 = 34; three fit in 102, not four.
        let mut t = DynamicTable::new(102);
        t.insert(b"a", b"1");
        t.insert(b"b", b"2");
        t.insert(b"c", b"3");
        assert_eq!((t.len(), t.size()), (3, 102));
        t.insert(b"d", b"4");
        assert_eq!((t.len(), t.size()), (3, 102));
        assert_eq!(t.get(0), Some((&b"d"[..], &b"4"[..])));
        assert_eq!(t.get(2), Some((&b"b"[..], &b"2"[..])));
        assert_eq!(t.get(3), None);
        // A bigger entry evicts two.
        t.insert(b"ee", b"55555555555555555555555555555555");
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(1), Some((&b"d"[..], &b"4"[..])));
        // Shrinking evicts from the old end.
        t.set_max_size(66);
        assert_eq!(t.len(), 1, "the big entry alone is 66");
        assert_eq!(t.get(0).unwrap().0, b"ee");
        t.set_max_size(65);
        assert_eq!(t.len(), 0);
        t.set_max_size(102);
        t.insert(b"f", b"6");
        // An entry larger than the table empties it.
        t.insert(&[b'x'; 60], &[b'y'; 20]);
        assert_eq!((t.len(), t.size()), (0, 0));
    }

    #[test]
    fn buffer_stays_bounded_and_entries_intact_over_many_inserts() {
        let mut t = DynamicTable::new(256);
        for i in 0..10_000usize {
            let value = format!("value-{i}-{}", "v".repeat(i % 50));
            t.insert(b"name", value.as_bytes());
            assert_eq!(t.get(0), Some((&b"name"[..], value.as_bytes())));
            assert!(t.size() <= 256);
            assert!(t.bytes.capacity() <= 4 * 256, "{}", t.bytes.capacity());
        }
        assert_eq!(t.find(b"name", b"value-9999-"), Err(Some(0)));
    }
}
