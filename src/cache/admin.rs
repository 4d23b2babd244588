//! The cache on the admin listener: purge by exact key or by key prefix
//! (`PURGE` or `DELETE /cache/NAME?key=...` / `?prefix=...`, the key
//! percent-encoded), and the zones' counters in the Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use percent_encoding::percent_decode;

use super::zone::CacheZone;

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

/// Appends the zones' counters and gauges to a Prometheus text page.
pub fn render_prometheus(out: &mut String, zones: &[Arc<CacheZone>]) {
    if zones.is_empty() {
        return;
    }
    type Get = fn(&CacheZone) -> u64;
    let series: [(&str, &str, &str, Get); 11] = [
        (
            "pier_cache_hits_total",
            "counter",
            "Requests answered from a fresh stored response.",
            |z| z.stats.hits.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_misses_total",
            "counter",
            "Requests that went to the origin.",
            |z| z.stats.misses.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_stale_total",
            "counter",
            "Requests answered from a stale stored response.",
            |z| z.stats.stale.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_revalidations_total",
            "counter",
            "Conditional requests sent to refresh a stored response.",
            |z| z.stats.revalidations.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_revalidated_total",
            "counter",
            "Revalidations answered 304.",
            |z| z.stats.revalidated.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_collapsed_total",
            "counter",
            "Misses that followed another request's fetch.",
            |z| z.stats.collapsed.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_stored_total",
            "counter",
            "Responses stored.",
            |z| z.stats.stored.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_evictions_total",
            "counter",
            "Responses evicted to stay within the memory budget.",
            |z| z.stats.evictions.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_purged_total",
            "counter",
            "Responses removed by purge or invalidation.",
            |z| z.stats.purged.load(Ordering::Relaxed),
        ),
        (
            "pier_cache_bytes",
            "gauge",
            "Bytes held in memory (stored responses and fills in progress).",
            |z| z.stats.bytes.load(Ordering::Relaxed) as u64,
        ),
        (
            "pier_cache_objects",
            "gauge",
            "Responses stored in memory.",
            |z| z.stats.objects.load(Ordering::Relaxed) as u64,
        ),
    ];
    for (name, kind, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for z in zones {
            let tier = if kind == "gauge" {
                ",tier=\"memory\""
            } else {
                ""
            };
            let _ = writeln!(out, "{name}{{zone=\"{}\"{tier}}} {}", z.name, get(z));
            super::disk_metrics::render_disk_gauge(out, name, z);
        }
    }
    let _ = writeln!(
        out,
        "# HELP pier_cache_budget_bytes The zone's memory budget."
    );
    let _ = writeln!(out, "# TYPE pier_cache_budget_bytes gauge");
    for z in zones {
        let _ = writeln!(
            out,
            "pier_cache_budget_bytes{{zone=\"{}\",tier=\"memory\"}} {}",
            z.name, z.settings.memory
        );
        super::disk_metrics::render_disk_gauge(out, "pier_cache_budget_bytes", z);
    }
    super::disk_metrics::render_disk_counters(out, zones);
}
