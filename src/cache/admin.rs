//! The cache on the admin listener: purge by exact key or by key prefix
//! (`PURGE` or `DELETE /cache/NAME?key=...` / `?prefix=...`, the key
//! percent-encoded), and the zones' counters and gauges, memory and disk
//! tiers, in the Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use percent_encoding::percent_decode;

use super::tier::TierStats;
use super::zone::CacheZone;
use crate::observe::exposition::family_head;

/// An admin answer: status and a line of text.
pub type PurgeAnswer = (u16, String);

/// Answers a request for `/cache/...` with `method`; `None` when `path` is
/// not a cache path.
pub fn purge_page(
    zones: &[Arc<CacheZone>],
    method: &[u8],
    path: &[u8],
    query: Option<&[u8]>,
) -> Option<PurgeAnswer> {
    let name = path.strip_prefix(b"/cache/")?;
    let Some(zone) = zones.iter().find(|z| z.name.as_bytes() == name) else {
        return Some((
            404,
            format!("no cache named {:?}\n", String::from_utf8_lossy(name)),
        ));
    };
    if method != b"PURGE" && method != b"DELETE" {
        return Some((405, "PURGE or DELETE with ?key= or ?prefix=\n".into()));
    }
    let mut key = None;
    let mut prefix = None;
    for pair in query.unwrap_or_default().split(|&b| b == b'&') {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &b""[..]),
        };
        let v: Vec<u8> = percent_decode(v).collect();
        match k {
            b"key" => key = Some(v),
            b"prefix" => prefix = Some(v),
            _ => {}
        }
    }
    let n = match (key, prefix) {
        (Some(k), None) => zone.purge(&k),
        (None, Some(p)) => zone.purge_prefix(&p),
        _ => return Some((400, "give exactly one of ?key= and ?prefix=\n".into())),
    };
    let status = if n == 0 { 404 } else { 200 };
    Some((status, format!("purged {n}\n")))
}

/// A counter on `/metrics`: name, its value for a zone (`None` for a zone
/// that does not keep it: no disk tier), and help.
type ZoneCounter = (&'static str, fn(&CacheZone) -> Option<u64>, &'static str);

/// The figures of `zone`'s tier named `tier`, if it has one.
fn tier(zone: &CacheZone, tier: &str) -> Option<TierStats> {
    zone.tiers().find(|t| t.name() == tier).map(|t| t.stats())
}

fn count(c: &AtomicU64) -> Option<u64> {
    Some(c.load(Ordering::Relaxed))
}

/// The zones' counters, in the order `/metrics` shows them.
#[rustfmt::skip]
const ZONE_COUNTERS: [ZoneCounter; 9] = [
    ("pier_cache_hits_total",          |z| count(&z.stats.hits),               "Requests answered from a fresh stored response."),
    ("pier_cache_misses_total",        |z| count(&z.stats.misses),             "Requests that went to the origin."),
    ("pier_cache_stale_total",         |z| count(&z.stats.stale),              "Requests answered from a stale stored response."),
    ("pier_cache_revalidations_total", |z| count(&z.stats.revalidations),      "Conditional requests sent to refresh a stored response."),
    ("pier_cache_revalidated_total",   |z| count(&z.stats.revalidated),        "Revalidations answered 304."),
    ("pier_cache_collapsed_total",     |z| count(&z.stats.collapsed),          "Misses that followed another request's fetch."),
    ("pier_cache_stored_total",        |z| Some(tier(z, "memory")?.stored),    "Responses stored."),
    ("pier_cache_evictions_total",     |z| Some(tier(z, "memory")?.evictions), "Responses evicted to stay within the memory budget."),
    ("pier_cache_purged_total",        |z| count(&z.stats.purged),             "Responses removed by purge or invalidation."),
];

/// The disk tiers' counters, in the order `/metrics` shows them.
#[rustfmt::skip]
const DISK_COUNTERS: [ZoneCounter; 5] = [
    ("pier_cache_disk_hits_total",      |z| z.has_disk().then(|| z.stats.disk_hits.load(Ordering::Relaxed)), "Requests answered from the disk tier."),
    ("pier_cache_promotions_total",     |z| z.has_disk().then(|| z.stats.promotions.load(Ordering::Relaxed)), "Disk objects brought back to memory after more than one hit."),
    ("pier_cache_disk_writes_total",    |z| Some(tier(z, "disk")?.stored),    "Responses written to the disk tier."),
    ("pier_cache_disk_skipped_total",   |z| Some(tier(z, "disk")?.skipped),   "Stored responses not written to disk (the write queue was full or the disk tier is off)."),
    ("pier_cache_disk_evictions_total", |z| Some(tier(z, "disk")?.evictions), "Files removed to keep the disk tier within its budget."),
];

/// A gauge with a line per tier of each zone: name, help, and the figure.
type TierGauge = (&'static str, &'static str, fn(&TierStats) -> u64);

/// The tiers' gauges, in the order `/metrics` shows them.
#[rustfmt::skip]
const TIER_GAUGES: [TierGauge; 3] = [
    ("pier_cache_bytes",        "Bytes held in memory (stored responses and fills in progress).", |t| t.bytes),
    ("pier_cache_objects",      "Responses stored in memory.",                                    |t| t.objects),
    ("pier_cache_budget_bytes", "The zone's memory budget.",                                      |t| t.budget),
];

/// Appends the zones' counters and gauges to a Prometheus text page.
pub fn render_prometheus(out: &mut String, zones: &[Arc<CacheZone>]) {
    if zones.is_empty() {
        return;
    }
    render_counters(out, zones, &ZONE_COUNTERS);
    for (name, help, figure) in TIER_GAUGES {
        family_head(out, name, "gauge", help);
        for z in zones {
            for t in z.tiers() {
                let (zone, tier, v) = (&z.name, t.name(), figure(&t.stats()));
                let _ = writeln!(out, "{name}{{zone=\"{zone}\",tier=\"{tier}\"}} {v}");
            }
        }
    }
    if zones.iter().any(|z| z.has_disk()) {
        render_counters(out, zones, &DISK_COUNTERS);
    }
}

/// Writes the families of `table`, a line for each zone that keeps the
/// counter.
fn render_counters(out: &mut String, zones: &[Arc<CacheZone>], table: &[ZoneCounter]) {
    for (name, counter, help) in table {
        family_head(out, name, "counter", help);
        for z in zones {
            if let Some(v) = counter(z) {
                let _ = writeln!(out, "{name}{{zone=\"{}\"}} {v}", z.name);
            }
        }
    }
}
