//! `pier bench sweep`: the classic scalability experiments as one command. Runs
//! a matrix of `http` or `tls-stream` runs one after another, prints a line per
//! run, and writes every figure to `PREFIX.csv` and the chart to `PREFIX.svg`:
//! requests/s and, beside it, p50 and p99 latency against connections (or depth,
//! on a logarithmic axis) with one line per target, or bandwidth against threads
//! with one line per connection count.
//!
//! Every run of the matrix is validated before the first one starts, so a typo
//! in the last target does not waste the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::args::{SweepArgs, SweepCommand, SweepHttpArgs, SweepStreamArgs};
use super::chart::{line_chart, panels_chart, write_csv, Panel, Series, XScale};
use super::http::{self, HttpPlan};
use super::stats::{human_us, Percentiles};
use super::tls_stream::{self, StreamPlan};
use super::UsageError;

/// Runs the sweep the arguments describe.
pub fn run(args: SweepArgs, show_progress: bool) -> anyhow::Result<()> {
    match args.command {
        SweepCommand::Http(a) => sweep_http(&a, show_progress),
        SweepCommand::TlsStream(a) => sweep_stream(&a, show_progress),
    }
}

/// `NAME=URL` or `URL` (named after the URL without its scheme, so two paths on
/// one server are two lines of the chart, not one).
pub fn parse_sweep_target(text: &str) -> (String, String) {
    match (text.find('='), text.find("://")) {
        (Some(eq), Some(scheme)) if eq < scheme => {
            let (name, url) = text.split_at(eq);
            (name.to_string(), url.get(1..).unwrap_or("").to_string())
        }
        _ => {
            let name = text.split_once("://").map_or(text, |(_, rest)| rest);
            let name = name.strip_suffix('/').unwrap_or(name);
            (name.to_string(), text.to_string())
        }
    }
}

/// A sweep's table, a row per run, to be written as `OUT.csv` beside the
/// chart `OUT.svg`.
struct SweepTable<'a> {
    out: &'a Path,
    header: &'a [&'a str],
    rows: Vec<Vec<String>>,
}

impl<'a> SweepTable<'a> {
    fn new(out: &'a Path, header: &'a [&'a str]) -> Self {
        SweepTable {
            out,
            header,
            rows: Vec::new(),
        }
    }

    /// Writes the CSV, then the chart `draw` makes at the SVG path.
    fn write(self, draw: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
        let csv = with_ext(self.out, "csv");
        let svg = with_ext(self.out, "svg");
        write_csv(&csv, self.header, &self.rows)?;
        draw(&svg)?;
        println!("wrote {} and {}", csv.display(), svg.display());
        Ok(())
    }
}

fn with_ext(prefix: &Path, ext: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

fn sweep_http(a: &SweepHttpArgs, show_progress: bool) -> anyhow::Result<()> {
    if let Some(n) = a.common.short_m_streams() {
        return Err(UsageError(format!(
            "-m {n}: in a sweep, --depth lists the streams per connection"
        ))
        .into());
    }
    if a.connections.is_empty() || a.depth.is_empty() {
        return Err(UsageError("-c and --depth need at least one value".into()).into());
    }
    let mut runs = Vec::new();
    for t in &a.targets {
        let (name, url) = parse_sweep_target(t);
        for &c in &a.connections {
            for &d in &a.depth {
                let plan = HttpPlan::new(&url, c, d, &a.common, Duration::from_secs(5))
                    .map_err(|e| UsageError(format!("{name}: {e}")))?;
                runs.push((name.clone(), c, d, Arc::new(plan)));
            }
        }
    }
    // x is connections unless only the depth varies.
    let by_depth = a.connections.len() == 1 && a.depth.len() > 1;
    let several_depths = a.depth.len() > 1 && !by_depth;
    let mut table = SweepTable::new(
        &a.out,
        &[
            "target",
            "url",
            "threads",
            "connections",
            "depth",
            "requests",
            "duration_s",
            "requests_per_s",
            "p50_us",
            "p90_us",
            "p99_us",
            "p99_9_us",
            "max_us",
            "errors",
            "connect_p50_us",
            "first_byte_p50_us",
        ],
    );
    let mut series: Vec<Series> = Vec::new();
    let mut latency: Vec<Series> = Vec::new();
    for (name, c, d, plan) in &runs {
        let report = http::run(plan, show_progress)?;
        let p = report.stats.percentiles();
        let rps = report.requests_per_s();
        eprintln!(
            "sweep: {name} c={c} depth={d}: {rps:.0} requests/s, p99 {}, errors {}",
            human_us(p.p99),
            report.stats.errors.total()
        );
        table.rows.push(vec![
            name.clone(),
            plan.target.url(),
            plan.threads.to_string(),
            c.to_string(),
            d.to_string(),
            report.stats.requests.to_string(),
            format!("{:.3}", report.elapsed.as_secs_f64()),
            format!("{rps:.2}"),
            p.p50.to_string(),
            p.p90.to_string(),
            p.p99.to_string(),
            p.p999.to_string(),
            p.max.to_string(),
            report.stats.errors.total().to_string(),
            Percentiles::of(&report.stats.connect).p50.to_string(),
            Percentiles::of(&report.stats.first_byte).p50.to_string(),
        ]);
        let label = if several_depths && a.common.multiplexed() {
            format!("{name} {d} streams")
        } else if several_depths {
            format!("{name} depth {d}")
        } else {
            name.clone()
        };
        let x = if by_depth { *d } else { *c } as i64;
        add_point(&mut latency, format!("{label} p50"), x, p.p50 as f64 / 1e3);
        add_point(&mut latency, format!("{label} p99"), x, p.p99 as f64 / 1e3);
        add_point(&mut series, label, x, rps);
    }
    let x_label = if by_depth && a.common.multiplexed() {
        "streams per connection"
    } else if by_depth {
        "pipelining depth"
    } else {
        "connections"
    };
    let throughput_title = format!("Requests/s against {x_label}");
    let latency_title = format!("Latency (p50, p99) against {x_label}");
    table.write(|svg| {
        panels_chart(
            svg,
            &format!("{x_label} (log scale)"),
            XScale::Log,
            &[
                Panel {
                    title: &throughput_title,
                    y_label: "requests/s",
                    series: &series,
                },
                Panel {
                    title: &latency_title,
                    y_label: "latency (ms)",
                    series: &latency,
                },
            ],
        )
    })
}

/// Adds (x, y) to the line labelled `label`, starting it if it is new.
fn add_point(series: &mut Vec<Series>, label: String, x: i64, y: f64) {
    match series.iter_mut().find(|s| s.label == label) {
        Some(s) => s.points.push((x, y)),
        None => series.push(Series {
            label,
            points: vec![(x, y)],
        }),
    }
}

fn sweep_stream(a: &SweepStreamArgs, show_progress: bool) -> anyhow::Result<()> {
    if a.threads.is_empty() || a.connections.is_empty() {
        return Err(
            UsageError("--threads and --connections need at least one value".into()).into(),
        );
    }
    let mut runs = Vec::new();
    for &c in &a.connections {
        for &t in &a.threads {
            let plan = StreamPlan::new(&a.target, t, c, &a.load).map_err(UsageError)?;
            runs.push((t, c, Arc::new(plan)));
        }
    }
    let mut table = SweepTable::new(
        &a.out,
        &[
            "threads",
            "connections",
            "messages",
            "size",
            "bytes_sent",
            "bytes_received",
            "duration_s",
            "mb_per_s",
            "min_connection_mb_per_s",
            "max_connection_mb_per_s",
            "errors",
        ],
    );
    let mut series: Vec<Series> = Vec::new();
    for (t, c, plan) in &runs {
        let report = tls_stream::run(plan, show_progress)?;
        let mbps = report.mb_per_s();
        let per_connection = report.per_connection_mb_per_s(plan);
        eprintln!(
            "sweep: threads={t} connections={c}: {:.1} MB in {:.3} s, {mbps:.1} MB/s, errors {}",
            report.megabytes(),
            report.elapsed.as_secs_f64(),
            report.errors.total()
        );
        table.rows.push(vec![
            t.to_string(),
            c.to_string(),
            a.load.messages.to_string(),
            a.load.size.to_string(),
            report.bytes_sent.to_string(),
            report.bytes_received.to_string(),
            format!("{:.3}", report.elapsed.as_secs_f64()),
            format!("{mbps:.2}"),
            format!("{:.2}", per_connection.first().unwrap_or(&0.0)),
            format!("{:.2}", per_connection.last().unwrap_or(&0.0)),
            report.errors.total().to_string(),
        ]);
        let label = format!("{c} connection{}", if *c == 1 { "" } else { "s" });
        add_point(&mut series, label, *t as i64, mbps);
    }
    let kind = if a.load.plain { "TCP" } else { "TLS" };
    table.write(|svg| {
        line_chart(
            svg,
            &format!("{kind} echo bandwidth against threads"),
            "threads",
            "MB/s",
            &series,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_may_be_named() {
        assert_eq!(
            parse_sweep_target("nginx=http://127.0.0.1:8080/?a=b"),
            ("nginx".into(), "http://127.0.0.1:8080/?a=b".into())
        );
        assert_eq!(
            parse_sweep_target("http://127.0.0.1:8080/?a=b"),
            (
                "127.0.0.1:8080/?a=b".into(),
                "http://127.0.0.1:8080/?a=b".into()
            )
        );
        // Same host and port, two paths: two labels, so two lines in the chart.
        assert_eq!(
            parse_sweep_target("http://127.0.0.1:8080/").0,
            "127.0.0.1:8080"
        );
        assert_eq!(
            parse_sweep_target("http://127.0.0.1:8080/big").0,
            "127.0.0.1:8080/big"
        );
        assert_eq!(
            with_ext(Path::new("out/run"), "csv"),
            PathBuf::from("out/run.csv")
        );
    }
}
