//! One storage interface for a zone's tiers: the memory tier and the disk
//! tier each look up, store, purge by key and by prefix, and report their
//! figures the same way ([`CacheTier`]). The zone asks its tiers in order, memory
//! first, and is all the proxy, the cache's tap and the admin listener speak
//! to: adding a tier, or changing what one does, touches none of them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::disk_object::DiskObject;
use super::entry::StoredResponse;
use crate::http::request::RequestView;

/// A stored response a tier found, where its body is.
pub enum Found {
    /// Head and body in memory: it may be answered, revalidated, or served
    /// stale.
    Memory(Arc<StoredResponse>),
    /// Head in memory, body in a file: answered from the file, or
    /// revalidated with its file held open and its head refreshed by a 304.
    Disk(OnDisk),
}

/// A response found on disk.
pub struct OnDisk {
    /// Its head and where its body starts.
    pub object: Arc<DiskObject>,
    /// Its file.
    pub path: PathBuf,
}

/// What a lookup found.
pub enum Lookup {
    /// A stored response whose `Vary` matches.
    Found(Found),
    /// The key was recently uncacheable: go to the origin, do not collapse.
    HitForMiss,
    /// Nothing usable.
    Miss,
}

/// A tier's figures, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Bytes held now (memory: stored responses and fills in progress;
    /// disk: the files, by the blocks they take).
    pub bytes: u64,
    /// Responses held now.
    pub objects: u64,
    /// The byte budget.
    pub budget: u64,
    /// Responses stored (memory) or written (disk) so far.
    pub stored: u64,
    /// Responses removed to stay within the budget so far.
    pub evictions: u64,
    /// Responses offered and not kept so far: too large or no room (memory),
    /// a full write queue or the tier off (disk).
    pub skipped: u64,
}

/// A storage tier of a zone. Lookups take no lock, so a hit on one worker
/// never waits for another; every change is the tier's to order.
pub trait CacheTier: Send + Sync {
    /// Its name, as `/metrics` labels its figures (`tier="..."`).
    fn name(&self) -> &'static str;

    /// The stored response of `key` whose `Vary` matches `request`.
    fn lookup(&self, key: &[u8], request: &RequestView<'_>, now: Instant) -> Lookup;

    /// Keeps `entry`, a whole response (or a hit-for-miss mark, which only a
    /// tier that answers it keeps), in place of the variant it selects;
    /// `reserved` bytes were set aside for it in this tier while it arrived.
    /// Whether it was kept (or, for a tier that writes later, taken to be).
    fn store(&self, entry: &Arc<StoredResponse>, reserved: usize) -> bool;

    /// Removes every stored response of `key`; returns how many.
    fn purge(&self, key: &[u8]) -> usize;

    /// Removes every stored response whose key starts with `prefix`;
    /// returns how many.
    fn purge_prefix(&self, prefix: &[u8]) -> usize;

    /// Its figures now.
    fn stats(&self) -> TierStats;
}
