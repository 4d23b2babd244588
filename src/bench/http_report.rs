//! What `pier bench http` reports of a run: rates, latency percentiles,
//! per-connection figures and failures, as text and as JSON.

use std::time::Duration;

use anyhow::bail;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::http_plan::HttpPlan;
use super::stats::{human_bytes, human_us, round2, round3, Percentiles, Stats};

/// Result of an HTTP run.
#[derive(Debug)]
pub struct HttpReport {
    /// Merged counts of every thread.
    pub stats: Stats,
    /// From the common start to the last thread's end.
    pub elapsed: Duration,
}

impl HttpReport {
    /// Completed responses per second of wall time.
    pub fn requests_per_s(&self) -> f64 {
        self.per_second(self.stats.requests)
    }

    /// Bytes read per second of wall time (the transfer rate h2load and oha show).
    pub fn read_bytes_per_s(&self) -> f64 {
        self.per_second(self.stats.bytes_read)
    }

    /// `count` over the run's wall time; 0 for a run that took no time.
    fn per_second(&self, count: u64) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            count as f64 / s
        } else {
            0.0
        }
    }

    /// The run as one JSON object.
    pub fn to_json(&self, plan: &HttpPlan) -> Value {
        let s = &self.stats;
        let status: serde_json::Map<String, Value> = s
            .statuses()
            .map(|(code, n)| (code.to_string(), json!(n)))
            .collect();
        let mut v = json!({
            "url": plan.target.url(),
            "threads": plan.threads,
            "connections": plan.connections,
            "depth": plan.depth,
            "protocol": plan.protocol(),
            "streams_per_connection": plan.stream_request.is_some().then_some(plan.depth),
            "mode": if plan.rate.is_some() { "open" } else { "closed" },
            "rate": plan.rate,
            "new_conn": plan.new_conn,
            "requests": s.requests,
            "duration_s": round3(self.elapsed.as_secs_f64()),
            "requests_per_s": round2(self.requests_per_s()),
            "latency_us": s.percentiles().to_json(),
            "status": status,
            "errors": s.errors.to_json(),
            "bytes": { "read": s.bytes_read, "written": s.bytes_written },
            "read_bytes_per_s": round2(self.read_bytes_per_s()),
            "connect_us": per_connection_json(&s.connect),
            "first_byte_us": per_connection_json(&s.first_byte),
        });
        if plan.tls.is_some() {
            v["tls"] = json!({ "handshakes": s.handshakes, "resumed": s.resumed });
        }
        v
    }

    /// A run without a single response measured nothing: its zero latencies must
    /// not pass for a result, so it fails (exit 1) and says why.
    pub fn check_answered(&self, plan: &HttpPlan) -> anyhow::Result<()> {
        let s = &self.stats;
        if s.requests > 0 {
            if s.statuses().any(|(code, _)| (200..400).contains(&code)) {
                return Ok(());
            }
            let statuses: Vec<String> = s
                .statuses()
                .map(|(code, n)| format!("{n} × {code}"))
                .collect();
            bail!(
                "every answer from {} was an error ({}): no response had a 2xx or 3xx status, \
                 so these figures measure the error path",
                plan.target.url(),
                statuses.join(", ")
            )
        }
        let why = match s.errors.first {
            Some(kind) => format!(
                "; {} errors, the first because {}",
                s.errors.total(),
                kind.explain()
            ),
            None => String::new(),
        };
        bail!("no request to {} got a response{why}", plan.target.url())
    }

    /// The run as text, in the spirit of wrk's report.
    pub fn text(&self, plan: &HttpPlan) -> String {
        let s = &self.stats;
        let p = s.percentiles();
        let mode = match plan.rate {
            Some(r) => format!("open loop at {r} requests/s"),
            None => "closed loop".to_string(),
        };
        let conn = if plan.new_conn {
            ", new connection per request"
        } else {
            ""
        };
        let status: Vec<String> = s.statuses().map(|(c, n)| format!("{c}: {n}")).collect();
        let per_conn = if plan.stream_request.is_some() {
            format!(
                "{}, {} stream(s) per connection",
                plan.protocol.title(),
                plan.depth
            )
        } else {
            format!("depth {}", plan.depth)
        };
        let mut out = format!(
            "pier bench {}\n  {} thread(s), {} connection(s), {per_conn}, {mode}{conn}\n\
             \x20 requests  {} in {:.2} s, {:.2} requests/s\n\
             \x20 latency   p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {}, stdev {})\n\
             \x20 status    {}\n\
             \x20 errors    {}\n\
             \x20 transfer  read {}, written {}; {}/s read\n\
             \x20 connect   {}\n\
             \x20 1st byte  {}\n",
            plan.target.url(),
            plan.threads,
            plan.connections,
            s.requests,
            self.elapsed.as_secs_f64(),
            self.requests_per_s(),
            human_us(p.p50),
            human_us(p.p90),
            human_us(p.p99),
            human_us(p.p999),
            human_us(p.max),
            human_us(p.mean.round() as u64),
            human_us(p.stdev.round() as u64),
            if status.is_empty() {
                "none".to_string()
            } else {
                status.join(", ")
            },
            s.errors,
            human_bytes(s.bytes_read),
            human_bytes(s.bytes_written),
            human_bytes(self.read_bytes_per_s() as u64),
            per_connection_text(&s.connect),
            per_connection_text(&s.first_byte),
        );
        if plan.tls.is_some() {
            out.push_str(&format!(
                "  tls       {} handshake(s), {} resumed\n",
                s.handshakes, s.resumed
            ));
        }
        out
    }
}

/// A per-connection histogram (connect time, time to first byte) as JSON: the
/// latency percentiles plus how many connections it counts.
fn per_connection_json(h: &Histogram<u64>) -> Value {
    let mut v = Percentiles::of(h).to_json();
    v["count"] = json!(h.len());
    v
}

/// A per-connection histogram as one report line, h2load's figures in wrk's style.
fn per_connection_text(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "none".to_string();
    }
    let p = Percentiles::of(h);
    format!(
        "p50 {}  p99 {}  max {}  (mean {}, {} connection{})",
        human_us(p.p50),
        human_us(p.p99),
        human_us(p.max),
        human_us(p.mean.round() as u64),
        h.len(),
        if h.len() == 1 { "" } else { "s" }
    )
}
