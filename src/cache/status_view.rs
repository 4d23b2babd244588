//! The cache zones as the status page and `/status.json` show them: each
//! zone's counters and each tier's figures, read with relaxed loads (the same
//! figures `/metrics` gives, in one object per zone).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;

use super::zone::CacheZone;

/// One zone.
#[derive(Debug, Serialize)]
pub struct CacheZoneView {
    /// Its name in the configuration (`[cache.NAME]`).
    pub name: String,
    /// Answered from a fresh stored response.
    pub hits: u64,
    /// Went to the origin.
    pub misses: u64,
    /// Answered from a stale stored response.
    pub stale: u64,
    /// Conditional requests sent to refresh a stored response.
    pub revalidations: u64,
    /// Of those, answered 304.
    pub revalidated: u64,
    /// Misses that followed another request's fetch.
    pub collapsed: u64,
    /// Responses removed by purge or invalidation.
    pub purged: u64,
    /// Hits (fresh and stale) over hits and misses; `None` before any request.
    pub hit_ratio: Option<f64>,
    /// Its tiers, in the order lookups ask them (memory, then disk).
    pub tiers: Vec<CacheTierView>,
}

/// One tier of a zone.
#[derive(Debug, Serialize)]
pub struct CacheTierView {
    /// `memory` or `disk`.
    pub name: &'static str,
    /// Bytes held now.
    pub bytes: u64,
    /// Responses held now.
    pub entries: u64,
    /// The byte budget.
    pub budget_bytes: u64,
    /// Responses stored (memory) or written (disk) so far.
    pub stored: u64,
    /// Responses removed to stay within the budget so far.
    pub evictions: u64,
    /// Responses offered and not kept so far.
    pub skipped: u64,
}

/// The views of `zones`, in configuration order.
pub fn zone_views(zones: &[Arc<CacheZone>]) -> Vec<CacheZoneView> {
    zones
        .iter()
        .map(|z| {
            let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
            let s = &z.stats;
            let (hits, misses, stale) = (n(&s.hits), n(&s.misses), n(&s.stale));
            let asked = hits + stale + misses;
            CacheZoneView {
                name: z.name.clone(),
                hits,
                misses,
                stale,
                revalidations: n(&s.revalidations),
                revalidated: n(&s.revalidated),
                collapsed: n(&s.collapsed),
                purged: n(&s.purged),
                hit_ratio: (asked > 0)
                    .then(|| ((hits + stale) as f64 / asked as f64 * 1000.0).round() / 1000.0),
                tiers: z
                    .tiers()
                    .map(|t| {
                        let st = t.stats();
                        CacheTierView {
                            name: t.name(),
                            bytes: st.bytes,
                            entries: st.objects,
                            budget_bytes: st.budget,
                            stored: st.stored,
                            evictions: st.evictions,
                            skipped: st.skipped,
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}
