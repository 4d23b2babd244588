//! `pier bench`: the load generator, so that Pier is measured (and measures its
//! peers) with a client that shares its HTTP/1.1 codec, its TLS provider and its
//! thread-per-core shape: one current-thread runtime per client thread, nothing
//! shared between threads during a run, results merged at the end.
//!
//! - [`http`]: wrk / wrk2 / h2load-style HTTP load (closed loop, `--rate`, `-n`, `--new-conn`);
//!   plain keep-alive closed-loop runs take an epoll fast path (`http_epoll`), and
//!   `--h2` runs go through [`http_h2`], `--h3` runs through `http_h3`.
//! - [`tls_stream`]: echo bandwidth over many TLS (or TCP) streams.
//! - [`sweep`]: matrices of either, written as CSV and drawn by [`chart`].
//! - [`stats`]: histograms and counters; [`io`] and [`client_tls`]: the client side's sockets.

pub mod args;
mod cacert_trust;
pub mod chart;
pub mod client_tls;
pub mod http;
mod http_conn;
mod http_epoll;
pub mod http_h2;
mod http_h3;
mod http_plan;
mod http_report;
pub mod io;
mod multiplexed;
pub mod stats;
pub mod stream_request;
pub mod sweep;
pub mod target;
pub mod tls_stream;

use std::fmt;
use std::io::IsTerminal;
use std::sync::Arc;

pub use args::{BenchArgs, BenchCommand};

/// A mistake in the command line found after clap's checks (a bad URL, header
/// or combination of flags); the binary exits 2 for it, as for a usage error.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Runs `pier bench ...`; reports go to stdout, progress to stderr.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let show_progress = std::io::stderr().is_terminal();
    raise_open_file_limit();
    match args.command {
        BenchCommand::Http(a) => {
            let plan = Arc::new(http::HttpPlan::from_args(&a).map_err(UsageError)?);
            let report = http::run(&plan, show_progress)?;
            if a.json {
                println!("{}", report.to_json(&plan));
            } else {
                print!("{}", report.text(&plan));
            }
            report.check_answered(&plan)?;
        }
        BenchCommand::TlsStream(a) => {
            let plan = Arc::new(tls_stream::StreamPlan::from_args(&a).map_err(UsageError)?);
            let report = tls_stream::run(&plan, show_progress)?;
            if report.elapsed < tls_stream::MEANINGFUL_RUN {
                eprintln!(
                    "pier bench: warning: the run lasted {:.1} ms, too short for its bandwidth \
                     to mean much; raise --messages or --size so it lasts a second or more",
                    report.elapsed.as_secs_f64() * 1000.0
                );
            }
            if a.json {
                println!("{}", report.to_json(&plan));
            } else {
                print!("{}", report.text(&plan));
            }
        }
        BenchCommand::Sweep(a) => sweep::run(a, show_progress)?,
    }
    Ok(())
}

/// Every connection is a descriptor; thousands of them need the hard limit.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
}

/// Joins a run's client threads. Each ends with what it counted and the instant
/// it finished; the run ends with the last of them (`start` if none finished).
fn join_client_threads<T>(
    handles: Vec<std::thread::JoinHandle<Result<(T, tokio::time::Instant), String>>>,
    start: tokio::time::Instant,
) -> anyhow::Result<(Vec<T>, tokio::time::Instant)> {
    let mut counted = Vec::with_capacity(handles.len());
    let mut end = start;
    for h in handles {
        let (c, e) = h
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))?
            .map_err(|e| anyhow::anyhow!(e))?;
        counted.push(c);
        end = end.max(e);
    }
    Ok((counted, end))
}

/// What a progress bar counts toward.
#[derive(Clone, Copy, Debug)]
pub enum ProgressTotal {
    /// A run bounded by time.
    Duration(std::time::Duration),
    /// A run bounded by a count (requests or bytes); 0 if unknown.
    Count(u64),
}

/// The progress bar: drawn on a terminal only, and only for runs over 2 s.
pub mod progress {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::thread::JoinHandle;
    use std::time::Duration;

    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use tokio::time::Instant;

    use super::ProgressTotal;

    /// Runs shorter than this get no bar.
    const SHOW_AFTER: Duration = Duration::from_secs(2);
    const POLL: Duration = Duration::from_millis(20);

    /// Waits until every thread has finished, drawing a bar from the threads'
    /// counters meanwhile when `enabled`. The threads' own end times, not this
    /// wait, are what a report's duration is taken from.
    pub fn wait<T>(
        handles: &[JoinHandle<T>],
        counters: &[Arc<AtomicU64>],
        start: Instant,
        total: ProgressTotal,
        enabled: bool,
        unit: &str,
    ) {
        let mut bar: Option<ProgressBar> = None;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(POLL);
            if !enabled {
                continue;
            }
            let elapsed = start.elapsed();
            let long = match total {
                ProgressTotal::Duration(d) => d > SHOW_AFTER,
                ProgressTotal::Count(_) => false,
            };
            if bar.is_none() && (long || elapsed >= SHOW_AFTER) {
                bar = Some(make_bar(total));
            }
            if let Some(b) = &bar {
                let done: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
                let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
                match total {
                    ProgressTotal::Duration(_) => b.set_position(elapsed.as_secs()),
                    ProgressTotal::Count(_) => b.set_position(done),
                }
                b.set_message(format!("{done} {unit} ({rate:.0}/s)"));
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
    }

    fn make_bar(total: ProgressTotal) -> ProgressBar {
        let (len, template) = match total {
            ProgressTotal::Duration(d) => (d.as_secs(), "{bar:40} {pos}/{len} s  {msg}"),
            ProgressTotal::Count(n) => (n, "{bar:40} {percent}%  {msg}"),
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar
    }
}
