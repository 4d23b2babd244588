//! One response the disk tier holds: its head in memory, its body in a file.
//! Its own file so the storage interface can name it
//! without depending on the tier that writes it.

use std::sync::atomic::AtomicU32;

use super::entry::StoredResponse;
use super::evict::{EvictMarks, Evictable};

/// One response on disk.
pub struct DiskObject {
    /// Its head and what freshness needs; the body is in the file (`body`
    /// is empty, `body_len` is the length on disk).
    pub meta: StoredResponse,
    /// Where the body starts in the file.
    pub body_offset: u64,
    pub(super) name: Box<str>,
    pub(super) charge: u64,
    /// Requests it answered, so one hit more than once is brought back to
    /// memory (once: the count goes on past the promotion).
    pub(super) hits: AtomicU32,
}

impl Evictable for DiskObject {
    fn charge(&self) -> usize {
        self.charge as usize
    }

    fn key_hash(&self) -> u64 {
        self.meta.key_hash
    }

    fn marks(&self) -> &EvictMarks {
        &self.meta.marks
    }
}
