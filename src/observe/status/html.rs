//! The HTML status page: `page.html` (style and script, embedded in the binary)
//! around a table rendered here, so the page is complete with JavaScript off.
//!
//! Every value the server writes goes through [`escape`]; every value the
//! script writes later goes through `textContent`, never markup, so a server
//! or error text such as `<script>` stays text. Each live value is a
//! `data-v` element naming its path in `/status.json` and a `data-f`
//! formatter that [`super::human`] and the script implement alike; charts are
//! `data-s` polylines. The Content-Security-Policy allows exactly the page's
//! own style and script, by hash, and requests to its own origin.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, UNIX_EPOCH};

use super::history::WORKER_POINTS;
use super::human;
use super::snapshot::{FailureCauses, ReloadRecord, Snapshot};

/// The page around the rendered body.
const PAGE: &str = include_str!("page.html");
/// Where the body goes in [`PAGE`].
const BODY_MARK: &str = "<!--pier:body-->";

/// Chart size in SVG user units (the page scales it).
const CHART_W: f64 = 180.0;
const CHART_H: f64 = 30.0;

/// Text made safe for HTML content and quoted attribute values. Five
/// characters need it, so this is written out rather than taken from a crate.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The text between `open` and `close` in the page (its one style or script).
fn inline_block(open: &str, close: &str) -> &'static str {
    let start = PAGE.find(open).map_or(0, |i| i + open.len());
    let end = PAGE[start..].find(close).map_or(start, |i| start + i);
    &PAGE[start..end]
}

fn csp_hash(block: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, block.as_bytes());
    format!("'sha256-{}'", data_encoding::BASE64.encode(digest.as_ref()))
}

/// The Content-Security-Policy of the page: nothing but its own style and
/// script (by hash) and fetches from its own origin.
pub fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
             img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            csp_hash(inline_block("<script>", "</script>")),
            csp_hash(inline_block("<style>", "</style>")),
        )
    })
}

/// Fields the page is sent with.
pub fn security_headers() -> Vec<(&'static str, String)> {
    vec![
        (
            "content-security-policy",
            content_security_policy().to_string(),
        ),
        ("x-content-type-options", "nosniff".into()),
        ("x-frame-options", "DENY".into()),
        ("referrer-policy", "no-referrer".into()),
    ]
}

/// A date as the script's `toUTCString()` writes it (RFC 9110 IMF-fixdate).
fn date(unix: i64) -> String {
    let t = if unix >= 0 {
        UNIX_EPOCH + Duration::from_secs(unix as u64)
    } else {
        UNIX_EPOCH
    };
    httpdate::fmt_http_date(t)
}

fn reload_text(r: Option<&ReloadRecord>) -> String {
    match r {
        None => "no reload yet".into(),
        Some(r) if r.ok => format!("last reload applied {}", date(r.at_unix as i64)),
        Some(r) => format!(
            "last reload failed {}: {}",
            date(r.at_unix as i64),
            r.message
        ),
    }
}

fn expires_text(secs: Option<i64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 0 => format!("expired {} ago", human::seconds(s.unsigned_abs())),
        Some(s) => format!("in {}", human::seconds(s as u64)),
    }
}

/// Polyline points of a chart holding `capacity` points, newest at the right.
pub fn chart_points(values: &[f64], capacity: usize) -> String {
    let max = values.iter().copied().fold(0.0f64, f64::max);
    let step = CHART_W / (capacity.max(2) - 1) as f64;
    let n = values.len().min(capacity);
    let mut out = String::with_capacity(n * 12);
    for (i, v) in values[values.len() - n..].iter().enumerate() {
        let x = CHART_W - (n - 1 - i) as f64 * step;
        let y = if max > 0.0 {
            CHART_H - 1.0 - v / max * (CHART_H - 2.0)
        } else {
            CHART_H - 1.0
        };
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "{x:.1},{y:.1}");
    }
    out
}

/// Writes the body of the page.
struct Page {
    out: String,
}

impl Page {
    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn text(&mut self, s: &str) {
        self.out.push_str(&escape(s));
    }

    /// A live value: `path` in the JSON, formatted by `f`, shown as `shown` now.
    fn value(&mut self, tag: &str, path: &str, f: &str, shown: &str) {
        let _ = write!(
            self.out,
            "<{tag} data-v=\"{}\" data-f=\"{f}\">{}</{tag}>",
            escape(path),
            escape(shown)
        );
    }

    /// A count, shown as [`human::count`] prints it and as the page's `count`
    /// format refreshes it.
    fn count(&mut self, tag: &str, path: &str, n: u64) {
        self.value(tag, path, "count", &human::count(n as f64));
    }

    /// A per-second rate ([`human::rate`], the page's `rate` format).
    fn rate(&mut self, tag: &str, path: &str, per_s: f64) {
        self.value(tag, path, "rate", &human::rate(per_s));
    }

    /// Milliseconds, `-` when unknown ([`human::millis`], the `ms` format).
    fn millis(&mut self, tag: &str, path: &str, ms: Option<f64>) {
        self.value(tag, path, "ms", &human::millis(ms));
    }

    /// A byte count in binary units ([`human::bytes`], the `bytes` format).
    fn bytes(&mut self, tag: &str, path: &str, n: u64) {
        self.value(tag, path, "bytes", &human::bytes(n));
    }

    fn chart(&mut self, path: &str, values: &[f64], capacity: usize, class: &str) {
        let _ = write!(
            self.out,
            "<svg class=\"spark {class}\" viewBox=\"0 0 {CHART_W} {CHART_H}\" preserveAspectRatio=\"none\" aria-hidden=\"true\"><polyline data-s=\"{}\" data-n=\"{capacity}\" points=\"{}\"/></svg>",
            escape(path),
            chart_points(values, capacity)
        );
    }

    /// A server's recent checks as a row of marks, oldest first.
    fn checks(&mut self, path: &str, checks: &[bool]) {
        let passed = checks.iter().filter(|&&ok| ok).count();
        let _ = write!(
            self.out,
            "<td class=\"checks\" title=\"{passed} of the last {} checks passed\" data-v=\"{}\" data-f=\"checks\">",
            checks.len(),
            escape(path)
        );
        for ok in checks {
            self.raw(if *ok {
                "<i class=\"ok\"></i>"
            } else {
                "<i class=\"no\"></i>"
            });
        }
        if checks.is_empty() {
            self.raw("-");
        }
        self.raw("</td>");
    }
}

fn bad_class(bad: bool) -> &'static str {
    if bad {
        " class=\"bad\""
    } else {
        ""
    }
}

/// A tile headed by a per-second rate of the totals (`total.{name}`), with the
/// chart of its history (`history.{name}`) below; `class` styles the chart.
fn rate_tile(
    b: &mut Page,
    title: &str,
    name: &str,
    now: f64,
    history: &[f64],
    capacity: usize,
    class: &str,
) {
    tile(
        b,
        title,
        &format!("total.{name}"),
        "rate",
        &human::rate(now),
    );
    b.chart(&format!("history.{name}"), history, capacity, class);
}

fn tile(b: &mut Page, title: &str, path: &str, f: &str, shown: &str) {
    b.raw("<div class=\"tile\"><h2>");
    b.text(title);
    b.raw("</h2>");
    b.value("div", path, f, shown);
}

fn header(b: &mut Page, s: &Snapshot) {
    b.raw("<header><h1>pier ");
    b.value("span", "version", "text", s.version);
    b.raw("</h1><p class=\"meta\">PID ");
    b.value("span", "pid", "text", &s.pid.to_string());
    b.raw(" · up ");
    b.value("span", "uptime_s", "dur", &human::seconds(s.uptime_s));
    b.raw(" · configuration generation ");
    b.value("span", "generation", "text", &s.generation.to_string());
    b.raw(" from <code>");
    b.text(&s.config_source);
    b.raw("</code> · ");
    let failed = s.last_reload.as_ref().is_some_and(|r| !r.ok);
    let _ = write!(
        b.out,
        "<span data-v=\"last_reload\" data-f=\"reload\" data-bad=\"!last_reload.ok\"{}>{}</span>",
        bad_class(failed),
        escape(&reload_text(s.last_reload.as_ref()))
    );
    b.raw("</p><p class=\"meta\">");
    let _ = write!(b.out, "{} workers · listeners", s.worker_count);
    for l in &s.listeners {
        b.raw(" <code>");
        b.text(l);
        b.raw("</code>");
    }
    if s.max_connections_per_worker > 0 {
        let _ = write!(
            b.out,
            " · max_connections {} per worker",
            s.max_connections_per_worker
        );
    }
    b.raw("</p></header>");
}

fn overview(b: &mut Page, s: &Snapshot) {
    let t = &s.total;
    let h = &s.history;
    let open: Vec<f64> = h.charts.open.iter().map(|&v| v as f64).collect();
    b.raw("<section class=\"tiles\">");
    tile(
        b,
        "Open connections",
        "total.open",
        "count",
        &human::count(t.open as f64),
    );
    b.chart("history.open", &open, h.capacity, "");
    b.raw("<p>accepted ");
    b.count("span", "total.accepted", t.accepted);
    b.raw("</p></div>");

    rate_tile(
        b,
        "Accepts",
        "accept_per_s",
        t.accept_per_s,
        &h.charts.accept_per_s,
        h.capacity,
        "",
    );
    b.raw("<p>shedding ");
    b.value("span", "total.shedding", "paused", &paused(t.shedding));
    b.raw(", paused ");
    b.count("span", "total.shed_total", t.shed_total);
    b.raw(" times</p></div>");

    rate_tile(
        b,
        "Requests",
        "requests_per_s",
        t.requests_per_s,
        &h.charts.requests_per_s,
        h.capacity,
        "",
    );
    b.raw("<p>");
    b.count("span", "total.requests", t.requests);
    b.raw(" answered</p></div>");

    rate_tile(
        b,
        "Errors",
        "errors_per_s",
        t.errors_per_s,
        &h.charts.errors_per_s,
        h.capacity,
        "err",
    );
    b.raw("<p>");
    b.value(
        "span",
        "total.error_ratio",
        "pct",
        &human::percent(t.error_ratio),
    );
    b.raw(" of requests, ");
    b.count("span", "total.errors", t.errors);
    b.raw(" in all</p></div>");

    b.raw("<div class=\"tile\"><h2>Latency, last second</h2><table class=\"kv\"><tr><th>p50</th>");
    b.millis("td", "total.latency_p50_ms", t.latency_p50_ms);
    b.raw("</tr><tr><th>p99</th>");
    b.millis("td", "total.latency_p99_ms", t.latency_p99_ms);
    b.raw("</tr></table>");
    let p99: Vec<f64> = h.charts.p99_ms.iter().map(|v| v.unwrap_or(0.0)).collect();
    b.chart("history.p99_ms", &p99, h.capacity, "");
    b.raw("<p>p99 per second; request head to response written</p></div>");

    b.raw("<div class=\"tile\"><h2>TLS handshakes</h2><table class=\"kv\"><tr><th>full</th>");
    b.count("td", "total.tls.full", t.tls.full);
    b.raw("</tr><tr><th>resumed</th>");
    b.count("td", "total.tls.resumed", t.tls.resumed);
    b.raw("</tr><tr><th>failed</th>");
    b.count("td", "total.tls.failed", t.tls.failed);
    b.raw("</tr></table></div>");

    let p = &t.protocols;
    b.raw("<div class=\"tile\"><h2>HTTP/2 and HTTP/3</h2><table class=\"kv\"><tr><th>HTTP/2 requests</th>");
    b.count("td", "total.protocols.http2_requests", p.http2_requests);
    b.raw("</tr><tr><th>HTTP/3 requests</th>");
    b.count("td", "total.protocols.http3_requests", p.http3_requests);
    b.raw("</tr><tr><th>QUIC connections</th>");
    b.count("td", "total.protocols.quic_connections", p.quic_connections);
    b.raw("</tr><tr><th>QUIC packets lost</th>");
    b.count(
        "td",
        "total.protocols.quic_packets_lost",
        p.quic_packets_lost,
    );
    b.raw("</tr><tr><th>QUIC RTT, mean</th>");
    b.millis("td", "total.protocols.quic_rtt_ms", p.quic_rtt_ms);
    b.raw("</tr></table></div>");

    b.raw("<div class=\"tile\"><h2>Traffic</h2><table class=\"kv\"><tr><th>received</th>");
    b.bytes("td", "total.bytes_in", t.bytes_in);
    b.raw("</tr><tr><th>sent</th>");
    b.bytes("td", "total.bytes_out", t.bytes_out);
    b.raw("</tr></table></div></section>");
}

fn paused(n: u64) -> String {
    if n == 0 {
        "none".into()
    } else {
        format!("{n} paused")
    }
}

fn workers(b: &mut Page, s: &Snapshot) {
    b.raw("<section><h2>Workers</h2><table class=\"grid\"><thead><tr><th>#</th><th>open</th><th>accepted</th><th>accepts</th><th>requests</th><th>last minute</th><th>errors</th><th>p50</th><th>p99</th><th>answered</th><th>TLS full / resumed / failed</th><th>received / sent</th><th>accepting</th></tr></thead><tbody>");
    for (i, w) in s.workers.iter().enumerate() {
        let p = |k: &str| format!("workers.{i}.{k}");
        let _ = write!(
            b.out,
            "<tr data-bad=\"workers.{i}.shedding\"{}><td>{i}</td>",
            bad_class(w.shedding > 0)
        );
        b.count("td", &p("open"), w.open);
        b.count("td", &p("accepted"), w.accepted);
        b.rate("td", &p("accept_per_s"), w.accept_per_s);
        b.rate("td", &p("requests_per_s"), w.requests_per_s);
        b.raw("<td>");
        b.chart(&p("chart"), &w.chart, WORKER_POINTS, "small");
        b.raw("</td>");
        b.rate("td", &p("errors_per_s"), w.errors_per_s);
        b.millis("td", &p("latency_p50_ms"), w.latency_p50_ms);
        b.millis("td", &p("latency_p99_ms"), w.latency_p99_ms);
        b.count("td", &p("requests"), w.requests);
        b.raw("<td>");
        b.count("span", &p("tls.full"), w.tls.full);
        b.raw(" / ");
        b.count("span", &p("tls.resumed"), w.tls.resumed);
        b.raw(" / ");
        b.count("span", &p("tls.failed"), w.tls.failed);
        b.raw("</td><td>");
        b.bytes("span", &p("bytes_in"), w.bytes_in);
        b.raw(" / ");
        b.bytes("span", &p("bytes_out"), w.bytes_out);
        b.raw("</td>");
        b.value("td", &p("shedding"), "shed", shed(w.shedding));
        b.raw("</tr>");
    }
    b.raw("</tbody></table></section>");
}

fn shed(v: u64) -> &'static str {
    if v > 0 {
        "paused"
    } else {
        "yes"
    }
}

fn upstreams(b: &mut Page, s: &Snapshot) {
    b.raw("<section><h2>Upstreams</h2>");
    if s.upstreams.is_empty() {
        b.raw("<p class=\"empty\">No upstream groups configured.</p>");
    }
    for (gi, g) in s.upstreams.iter().enumerate() {
        b.raw("<h3>");
        b.text(&g.name);
        b.raw(" <small>");
        b.text(&g.balance);
        if let Some(hc) = &g.health_check {
            b.raw(" · checks: ");
            b.text(hc);
        }
        if g.draining {
            let _ = write!(
                b.out,
                " · <span class=\"draining\">generation {}, draining</span>",
                g.generation
            );
        }
        if !g.resolves.is_empty() {
            b.raw(" · resolves ");
            b.text(&g.resolves.join(", "));
            let age = g
                .resolution_age_s
                .map_or("not yet".to_string(), |s| format!("{s:.0} s ago"));
            b.raw(" · last resolved ");
            b.text(&age);
        }
        b.raw("</small></h3><div class=\"scroll\"><table class=\"grid\"><thead><tr><th>server</th><th>weight</th><th>state</th><th title=\"workers keeping the server out after max_fails failures\">kept out by</th><th>in flight</th><th>requests/s</th><th>requests</th><th>5xx</th><th title=\"failed attempts by cause\">errors</th><th>p50 / p99</th><th>recent checks</th><th>last check failure</th></tr></thead><tbody>");
        for (si, sv) in g.servers.iter().enumerate() {
            let p = |k: &str| format!("upstreams.{gi}.servers.{si}.{k}");
            let _ = write!(
                b.out,
                "<tr data-bad=\"{}\"{}><td>",
                escape(&p("down")),
                bad_class(sv.down)
            );
            b.text(&sv.name);
            // The address connected to, when the name is not already it.
            if sv.address != sv.name {
                b.raw(" <code class=\"addr\">");
                b.text(&sv.address);
                b.raw("</code>");
            }
            if sv.origin != "configured" {
                b.raw(" <small class=\"origin\">");
                b.text(sv.origin);
                b.raw("</small>");
            }
            let _ = write!(b.out, "</td><td>{}</td>", sv.weight);
            let _ = write!(
                b.out,
                "<td class=\"state {0}\" data-v=\"{1}\" data-f=\"state\">{0}</td>",
                sv.state,
                escape(&p("state"))
            );
            b.value(
                "td",
                &p("marked_down_workers"),
                "workers",
                &workers_text(sv.marked_down_workers),
            );
            b.count("td", &p("in_flight"), sv.in_flight);
            b.rate("td", &p("requests_per_s"), sv.recent.requests_per_s);
            b.count("td", &p("requests"), sv.requests);
            b.count("td", &p("responses.5xx"), sv.responses.server_error);
            let _ = write!(
                b.out,
                "<td class=\"causes\" data-v=\"{}\" data-f=\"causes\">{}</td>",
                escape(&p("failures")),
                escape(&causes_text(&sv.failures))
            );
            b.raw("<td>");
            b.millis("span", &p("latency_p50_ms"), sv.recent.p50_ms);
            b.raw(" / ");
            b.millis("span", &p("latency_p99_ms"), sv.recent.p99_ms);
            b.raw("</td>");
            b.checks(&p("checks"), &sv.checks);
            let _ = write!(
                b.out,
                "<td class=\"wrap\" data-v=\"{}\" data-f=\"text\">{}</td>",
                escape(&p("last_check_error")),
                escape(sv.last_check_error.as_deref().unwrap_or("-"))
            );
            b.raw("</tr>");
        }
        b.raw("</tbody></table></div>");
    }
    b.raw("</section>");
}

/// How many workers keep a server out: `-` for none, `1 worker`, `3 workers`
/// (the script's `workers`).
pub fn workers_text(n: u64) -> String {
    match n {
        0 => "-".into(),
        1 => "1 worker".into(),
        n => format!("{n} workers"),
    }
}

/// Failed attempts by cause as the page shows them: `connect 2 · reset 1`,
/// causes without failures left out, `-` without any (the script's `causes`).
pub fn causes_text(f: &FailureCauses) -> String {
    let parts: Vec<String> = [
        ("connect", f.connect),
        ("connect_timeout", f.connect_timeout),
        ("reset", f.reset),
        ("timeout", f.timeout),
        ("bad_response", f.bad_response),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, n)| format!("{name} {}", human::count(*n as f64)))
    .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" · ")
    }
}

fn certificates(b: &mut Page, s: &Snapshot) {
    b.raw("<section><h2>Certificates</h2>");
    if s.certificates.is_empty() {
        b.raw("<p class=\"empty\">No TLS listeners.</p></section>");
        return;
    }
    b.raw("<table class=\"grid\"><thead><tr><th>listener</th><th>names</th><th>expires</th><th></th><th>SHA-256</th></tr></thead><tbody>");
    for (i, c) in s.certificates.iter().enumerate() {
        let _ = write!(
            b.out,
            "<tr data-bad=\"certificates.{i}.expiring\"{}><td><code>",
            bad_class(c.expiring)
        );
        b.text(&c.listener);
        b.raw("</code></td><td>");
        b.text(&c.names.join(", "));
        if c.default {
            b.raw(" <small>(default)</small>");
        }
        if c.acme {
            b.raw(if c.not_after_unix.is_some() {
                " <small>(ACME)</small>"
            } else {
                " <small>(ACME, not issued yet)</small>"
            });
        }
        b.raw("</td><td>");
        b.text(&c.not_after_unix.map_or("-".into(), date));
        b.raw("</td>");
        b.value(
            "td",
            &format!("certificates.{i}.expires_in_s"),
            "expires",
            &expires_text(c.expires_in_s),
        );
        // The whole fingerprint is in the tooltip; the start tells certificates apart.
        let mut short: String = c.sha256.chars().take(23).collect();
        if short.is_empty() {
            short.push('-');
        }
        let _ = write!(
            b.out,
            "<td><code class=\"fp\" title=\"{}\">{}…</code></td></tr>",
            escape(&c.sha256),
            escape(&short)
        );
    }
    b.raw("</tbody></table></section>");
}

/// The cache zones: a row per zone, its counters and each tier's fill.
fn cache_zones(b: &mut Page, s: &Snapshot) {
    b.raw("<section><h2>Cache zones</h2>");
    if s.cache_zones.is_empty() {
        b.raw("<p class=\"empty\">No cache zones configured.</p></section>");
        return;
    }
    b.raw("<div class=\"scroll\"><table class=\"grid\"><thead><tr><th>zone</th><th>hits</th><th>misses</th><th title=\"answered from a stale stored response\">stale</th><th title=\"hits, fresh and stale, over all lookups\">hit ratio</th><th>revalidations</th><th title=\"misses that followed another request's fetch\">collapsed</th><th>purged</th><th>tiers</th></tr></thead><tbody>");
    for (zi, z) in s.cache_zones.iter().enumerate() {
        let p = |k: &str| format!("cache_zones.{zi}.{k}");
        b.raw("<tr><td>");
        b.text(&z.name);
        b.raw("</td>");
        b.count("td", &p("hits"), z.hits);
        b.count("td", &p("misses"), z.misses);
        b.count("td", &p("stale"), z.stale);
        let ratio = z.hit_ratio.map_or("-".to_string(), human::percent);
        b.value("td", &p("hit_ratio"), "pct", &ratio);
        b.count("td", &p("revalidations"), z.revalidations);
        b.count("td", &p("collapsed"), z.collapsed);
        b.count("td", &p("purged"), z.purged);
        b.raw("<td>");
        for (ti, t) in z.tiers.iter().enumerate() {
            let tp = |k: &str| format!("cache_zones.{zi}.tiers.{ti}.{k}");
            if ti > 0 {
                b.raw("<br>");
            }
            b.text(t.name);
            b.raw(": ");
            b.bytes("span", &tp("bytes"), t.bytes);
            b.raw(" of ");
            b.text(&human::bytes(t.budget_bytes));
            b.raw(", ");
            b.count("span", &tp("entries"), t.entries);
            b.raw(" entries");
        }
        b.raw("</td></tr>");
    }
    b.raw("</tbody></table></div></section>");
}

/// The whole page for a snapshot.
pub fn render_html(s: &Snapshot) -> String {
    let mut b = Page {
        out: String::with_capacity(16 * 1024 + s.workers.len() * 1500),
    };
    let _ = write!(
        b.out,
        "<main id=\"status\" data-layout=\"{}\">",
        escape(&s.layout)
    );
    header(&mut b, s);
    overview(&mut b, s);
    workers(&mut b, s);
    upstreams(&mut b, s);
    certificates(&mut b, s);
    cache_zones(&mut b, s);
    b.raw("<footer><span id=\"live\">Figures as of ");
    b.value("span", "now_unix", "date", &date(s.now_unix as i64));
    b.raw(". Reload the page for new ones.</span></footer></main>");
    let (before, after) = PAGE.split_once(BODY_MARK).unwrap_or((PAGE, ""));
    let mut page = String::with_capacity(before.len() + b.out.len() + after.len());
    page.push_str(before);
    page.push_str(&b.out);
    page.push_str(after);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_check_error_wraps_inside_its_cell() {
        // An error without spaces (a URL, a path) must break anywhere, and the
        // cell has a width limit, so the table does not scroll sideways.
        let rule = PAGE
            .lines()
            .skip_while(|l| !l.starts_with(".grid td.wrap"))
            .take(2)
            .collect::<String>();
        assert!(rule.contains("overflow-wrap: anywhere"), "{rule}");
        assert!(rule.contains("max-width"), "{rule}");
    }

    #[test]
    fn escape_turns_markup_into_text() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }

    #[test]
    fn an_upstream_named_script_stays_text_and_so_do_error_texts() {
        let page = render_html(&super::super::json::tests::snapshot_with_markup());
        assert!(
            !page.contains("<script>alert"),
            "unescaped name in the page"
        );
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("<b>refused</b>"));
        assert!(page.contains("connect: &lt;b&gt;refused&lt;/b&gt; &amp; &quot;gone&quot;"));
        // A server named `<script>` and an address holding markup stay text.
        assert!(!page.contains("<script>alert(2)"));
        assert!(page.contains("<td>&lt;script&gt;alert(2)&lt;/script&gt; <code class=\"addr\">&lt;img src=x onerror=alert(3)&gt;</code></td>"));
        assert!(!page.contains("<img"));
        // The page's own script is the only one.
        assert_eq!(page.matches("<script").count(), 1);
    }

    #[test]
    fn the_rendered_table_holds_the_figures_and_the_down_server() {
        let state = super::super::json::tests::state_with_traffic();
        let page = render_html(&state.snapshot());
        assert!(page.contains("<div data-v=\"total.requests_per_s\" data-f=\"rate\">32/s</div>"));
        assert!(page.contains("<td data-v=\"workers.1.shedding\" data-f=\"shed\">paused</td>"));
        // Every worker row has a cell per column.
        let head = page.split("<section><h2>Workers</h2>").nth(1).unwrap();
        let table = &head[..head.find("</table>").unwrap()];
        let columns = table.matches("<th>").count();
        let row = table
            .split("<tbody>")
            .nth(1)
            .unwrap()
            .split("</tr>")
            .next()
            .unwrap();
        assert_eq!(row.matches("<td").count(), columns, "{row}");
        assert!(page.contains("<td data-v=\"workers.0.latency_p99_ms\" data-f=\"ms\">0.99 ms</td>"));
        assert!(page.contains(
            "<td class=\"state down\" data-v=\"upstreams.0.servers.0.state\" data-f=\"state\">down</td>"
        ));
        assert!(page.contains("title=\"1 of the last 2 checks passed\""));
        // The down server's row is flagged (red) and stays flagged by the script.
        assert!(page.contains("<tr data-bad=\"upstreams.0.servers.0.down\" class=\"bad\">"));
        assert!(page.contains("<tr data-bad=\"upstreams.0.servers.1.down\"><td>"));
        let p = |k: &str| format!("data-v=\"upstreams.0.servers.1.{k}\"");
        for cell in [
            format!("<td {} data-f=\"count\">1</td>", p("in_flight")),
            format!("<td {} data-f=\"rate\">1/s</td>", p("requests_per_s")),
            format!("<td {} data-f=\"count\">7</td>", p("requests")),
            format!("<td {} data-f=\"count\">1</td>", p("responses.5xx")),
            format!(
                "<td class=\"causes\" {} data-f=\"causes\">connect 1 · reset 1</td>",
                p("failures")
            ),
            format!("<span {} data-f=\"ms\">0.50 ms</span>", p("latency_p50_ms")),
        ] {
            assert!(page.contains(&cell), "{cell}");
        }
        // Every upstream row has a cell per column.
        let section = page.split("<h2>Upstreams</h2>").nth(1).unwrap();
        let table = &section[..section.find("</table>").unwrap()];
        let columns = table.matches("</th>").count();
        for row in table
            .split("<tbody>")
            .nth(1)
            .unwrap()
            .split("</tr>")
            .filter(|r| r.contains("<td"))
        {
            assert_eq!(row.matches("<td").count(), columns, "{row}");
        }
        assert!(page.contains("<i class=\"ok\"></i><i class=\"no\"></i></td>"));
        assert!(page.contains("localhost, 127.0.0.1, ::1"));
        assert!(page.contains("No cache zones"));
    }

    #[test]
    fn the_policy_allows_only_the_page_own_script_and_style() {
        let csp = content_security_policy();
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        let script = inline_block("<script>", "</script>");
        assert!(script.contains("status.json"), "the script block was found");
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, script.as_bytes());
        let want = data_encoding::BASE64.encode(digest.as_ref());
        assert!(csp.contains(&want));
        // No inline event handlers or style attributes, which the policy would block.
        assert!(!PAGE.contains(" onclick=") && !PAGE.contains(" style="));
    }

    #[test]
    fn charts_fill_from_the_right_and_scale_to_their_peak() {
        assert_eq!(chart_points(&[], 180), "");
        assert_eq!(chart_points(&[0.0, 0.0], 2), "0.0,29.0 180.0,29.0");
        assert_eq!(chart_points(&[5.0, 10.0], 3), "90.0,15.0 180.0,1.0");
    }
}
