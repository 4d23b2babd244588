//! The disk tier's series on `/metrics`: its bytes, objects and budget as the
//! `tier="disk"` lines of the zone gauges, and its own counters.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::zone::CacheZone;

/// The `tier="disk"` line of the zone gauge `name` (`pier_cache_bytes`,
/// `pier_cache_objects`, `pier_cache_budget_bytes`) when `zone` has a disk.
pub fn render_disk_gauge(out: &mut String, name: &str, zone: &CacheZone) {
    let Some(d) = zone.disk.as_deref() else {
        return;
    };
    let v = match name {
        "pier_cache_bytes" => d.stats.bytes.load(Ordering::Relaxed),
        "pier_cache_objects" => d.stats.objects.load(Ordering::Relaxed) as u64,
        "pier_cache_budget_bytes" => d.budget(),
        _ => return,
    };
    let _ = writeln!(out, "{name}{{zone=\"{}\",tier=\"disk\"}} {v}", zone.name);
}

/// The disk tiers' counters, for the zones that have one.
pub fn render_disk_counters(out: &mut String, zones: &[Arc<CacheZone>]) {
    if !zones.iter().any(|z| z.disk.is_some()) {
        return;
    }
    type Get = fn(&super::disk::DiskStats) -> u64;
    let series: [(&str, &str, Get); 4] = [
        (
            "pier_cache_disk_hits_total",
            "Requests answered from the disk tier.",
            |s| s.hits.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_disk_writes_total",
            "Responses written to the disk tier.",
            |s| s.writes.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_disk_skipped_total",
            "Stored responses not written to disk (the write queue was full or the disk tier is off).",
            |s| s.skipped.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_disk_evictions_total",
            "Files removed to keep the disk tier within its budget.",
            |s| s.evictions.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for z in zones {
            if let Some(d) = z.disk.as_deref() {
                let _ = writeln!(out, "{name}{{zone=\"{}\"}} {}", z.name, get(&d.stats));
            }
        }
    }
}
