//! ACME metrics: certificate expiry per name, orders by result, failures by
//! cause. Written by the ACME thread a few times a day, read by `/metrics`, so
//! a plain mutex is enough; no worker touches it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::SystemTime;

#[derive(Default)]
struct AcmeStats {
    expiry: BTreeMap<String, u64>,
    orders: BTreeMap<&'static str, u64>,
    failures: BTreeMap<&'static str, u64>,
}

static STATS: Mutex<AcmeStats> = Mutex::new(AcmeStats {
    expiry: BTreeMap::new(),
    orders: BTreeMap::new(),
    failures: BTreeMap::new(),
});

fn with<R>(f: impl FnOnce(&mut AcmeStats) -> R) -> R {
    f(&mut STATS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The certificate served for `name` now ends at `not_after`.
pub fn set_expiry(name: &str, not_after: SystemTime) {
    let secs = not_after
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    with(|s| s.expiry.insert(name.to_string(), secs));
}

/// An order ended: `issued` or `failed`.
pub fn count_order(result: &'static str) {
    with(|s| *s.orders.entry(result).or_default() += 1);
}

/// A failed attempt, by cause (`account`, `order`, `validation`, `finalize`,
/// `rate_limited`, `storage`, `network`).
pub fn count_failure(cause: &'static str) {
    with(|s| *s.failures.entry(cause).or_default() += 1);
}

/// The Prometheus text of the ACME metrics (empty when ACME never ran).
pub fn render_acme_metrics() -> String {
    with(|s| {
        let mut out = String::new();
        if s.expiry.is_empty() && s.orders.is_empty() && s.failures.is_empty() {
            return out;
        }
        let _ = writeln!(out, "# HELP pier_acme_certificate_expiry_seconds End of validity (Unix time) of the ACME certificate served for a name.");
        let _ = writeln!(out, "# TYPE pier_acme_certificate_expiry_seconds gauge");
        for (name, v) in &s.expiry {
            let _ = writeln!(
                out,
                "pier_acme_certificate_expiry_seconds{{name=\"{name}\"}} {v}"
            );
        }
        let _ = writeln!(out, "# HELP pier_acme_orders_total ACME orders by result.");
        let _ = writeln!(out, "# TYPE pier_acme_orders_total counter");
        for result in ["issued", "failed"] {
            let v = s.orders.get(result).copied().unwrap_or(0);
            let _ = writeln!(out, "pier_acme_orders_total{{result=\"{result}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP pier_acme_failures_total Failed ACME attempts by cause."
        );
        let _ = writeln!(out, "# TYPE pier_acme_failures_total counter");
        for (cause, v) in &s.failures {
            let _ = writeln!(out, "pier_acme_failures_total{{cause=\"{cause}\"}} {v}");
        }
        out
    })
}
