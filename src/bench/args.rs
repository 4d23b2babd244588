//! Flags of `pier bench`: raw input that clap checks for shape; values that need
//! more than shape (URLs, header lines, durations) are parsed here so a mistake is
//! reported before any connection is made.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

/// `pier bench`: the load generator.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// Subcommands of `pier bench`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// HTTP/1.1, HTTP/2 (`--h2`) or HTTP/3 (`--h3`) load against one URL (what
    /// wrk, wrk2 and h2load do).
    Http(HttpArgs),
    /// Echo bandwidth over TLS (or TCP) streams: C connections send M messages of S bytes.
    TlsStream(StreamArgs),
    /// Run a matrix of `http` or `tls-stream` runs and write CSV plus an SVG chart.
    Sweep(SweepArgs),
}

/// TLS client flags shared by every subcommand.
#[derive(Debug, Args, Clone, Default)]
pub struct TlsArgs {
    /// Accept any server certificate and skip handshake signature checks
    /// (the server's cost is what is measured).
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// Trust the certificates in this PEM file instead of the system roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Server name to send and verify (default: the target's host).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
}

/// Flags of one HTTP load, shared by `http` and `sweep http`.
#[derive(Debug, Args, Clone)]
pub struct HttpCommon {
    /// Client threads, each with its own event loop (default 1).
    #[arg(short, long, default_value_t = 1)]
    pub threads: usize,
    /// How long to run (`10s`, `500ms`, `2m`); default 10s unless `-n` is given.
    #[arg(short, long, value_parser = parse_duration_arg)]
    pub duration: Option<Duration>,
    /// Stop after exactly this many requests (completed plus failed).
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub requests: Option<u64>,
    /// Extra request header, `Name: value` (repeatable; `Host` replaces the default).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request method (or `-m METHOD`).
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// `-m N`, a number: with `--h2` or `--h3`, N requests in flight on each
    /// connection, as h2load's `-m` (`--streams N`); `-m METHOD`, a name: the
    /// method, as oha's and ab's `-m` (`--method`). No method is a number, so
    /// both habits work.
    #[arg(short = 'm', value_name = "N|METHOD")]
    pub short_m: Option<String>,
    /// Request body (sent with Content-Length).
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// A fresh connection (and so a full TLS handshake) for every request.
    #[arg(long)]
    pub new_conn: bool,
    /// With `--new-conn` over TLS: resume sessions (one cache per client thread).
    #[arg(long, requires = "new_conn")]
    pub resume: bool,
    /// Open loop: send R requests/s in total at a constant rate and measure each
    /// latency from the request's intended send time (coordinated-omission correction).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Longest a connection may wait without progress (connect, handshake, response).
    #[arg(long, default_value = "2s", value_parser = parse_duration_arg)]
    pub timeout: Duration,
    /// HTTP/2 instead of HTTP/1.1: ALPN `h2` for https URLs, prior knowledge
    /// for http ones (h2load's way). With `sweep http`, `--depth` is then the
    /// streams per connection.
    #[arg(long)]
    pub h2: bool,
    /// HTTP/3 over QUIC instead of HTTP/1.1 (https URLs only, ALPN `h3` on
    /// the URL's port over UDP). With `sweep http`, `--depth` is then the
    /// streams per connection.
    #[arg(long, conflicts_with = "h2")]
    pub h3: bool,
    /// TLS client settings (https URLs).
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl HttpCommon {
    /// The request method: `-m` when it names one, else `--method`.
    pub fn request_method(&self) -> Result<&str, String> {
        match self.short_m.as_deref() {
            Some(m) if m.parse::<u64>().is_err() => {
                if self.method != "GET" && self.method != m {
                    return Err(format!("-m {m} and --method {} disagree", self.method));
                }
                Ok(m)
            }
            _ => Ok(&self.method),
        }
    }

    /// `--h2` or `--h3`: each connection carries its requests as streams.
    pub fn multiplexed(&self) -> bool {
        self.h2 || self.h3
    }

    /// `-m N`, a number: streams per connection, as in h2load.
    pub fn short_m_streams(&self) -> Option<usize> {
        self.short_m.as_deref().and_then(|m| m.parse().ok())
    }
}

/// Flags of `pier bench http`.
#[derive(Debug, Args, Clone)]
pub struct HttpArgs {
    /// `http://host[:port]/path` or `https://...`.
    pub url: String,
    /// Connections kept open in total.
    #[arg(short, long, default_value_t = 10)]
    pub connections: usize,
    /// HTTP/1.1 pipelining: write this many requests at once and wait for all
    /// their responses (open loop: keep up to this many in flight); 1 = none.
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// With `--h2` or `--h3`: requests in flight at once on each connection,
    /// as streams (h2load's `-m`, which `-m N` also sets).
    #[arg(long, value_name = "N", visible_alias = "max-concurrent-streams")]
    pub streams: Option<usize>,
    /// Load settings.
    #[command(flatten)]
    pub common: HttpCommon,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `pier bench tls-stream`.
#[derive(Debug, Args, Clone)]
pub struct StreamArgs {
    /// Echo server, `host:port`.
    pub target: String,
    /// Client threads, each with its own event loop.
    #[arg(short, long, default_value_t = 1)]
    pub threads: usize,
    /// Connections in total, spread over the threads.
    #[arg(short, long, default_value_t = 1)]
    pub connections: usize,
    /// What each connection sends, and how.
    #[command(flatten)]
    pub load: StreamLoad,
    /// Print one JSON object on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// The echo load of `tls-stream` and `sweep tls-stream`, one set of flags for
/// both so a sweep's run is the same run `tls-stream` makes.
#[derive(Debug, Args, Clone)]
pub struct StreamLoad {
    /// Messages each connection sends (and reads back). No short form: `-m` is
    /// the method or the streams in `bench http`.
    #[arg(long, default_value_t = 1000)]
    pub messages: u64,
    /// Bytes per message.
    #[arg(short, long, default_value_t = 16384)]
    pub size: usize,
    /// Plain TCP instead of TLS.
    #[arg(long)]
    pub plain: bool,
    /// Longest a connection may wait without progress.
    #[arg(long, default_value = "10s", value_parser = parse_duration_arg)]
    pub timeout: Duration,
    /// TLS client settings.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// Flags of `pier bench sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Which experiment to sweep.
    #[command(subcommand)]
    pub command: SweepCommand,
}

/// The two matrices `sweep` runs.
#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Requests/s against connections (or depth), one line per target.
    Http(SweepHttpArgs),
    /// Bandwidth against threads, one line per connection count.
    TlsStream(SweepStreamArgs),
}

/// Flags of `pier bench sweep http`.
#[derive(Debug, Args)]
pub struct SweepHttpArgs {
    /// Targets: `URL` or `NAME=URL` (the name labels its line).
    #[arg(required = true)]
    pub targets: Vec<String>,
    /// Connection counts to run, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,10,50,100")]
    pub connections: Vec<usize>,
    /// Pipelining depths to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub depth: Vec<usize>,
    /// Load settings of every run (`-d` defaults to 5s here).
    #[command(flatten)]
    pub common: HttpCommon,
    /// Output prefix: writes PREFIX.csv and PREFIX.svg.
    #[arg(short, long, default_value = "sweep-http")]
    pub out: PathBuf,
}

/// Flags of `pier bench sweep tls-stream`.
#[derive(Debug, Args)]
pub struct SweepStreamArgs {
    /// Echo server, `host:port`.
    pub target: String,
    /// Thread counts to run, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Connection counts to run, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_value = "1,10,100")]
    pub connections: Vec<usize>,
    /// What each connection sends, and how (the same in every run).
    #[command(flatten)]
    pub load: StreamLoad,
    /// Output prefix: writes PREFIX.csv and PREFIX.svg.
    #[arg(short, long, default_value = "sweep-tls-stream")]
    pub out: PathBuf,
}

/// Parses `250ms`, `10s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {t:?}; write e.g. 10s, 250ms, 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("unknown duration unit {u:?}; use ms, s, m or h")),
    };
    if !secs.is_finite() || !(0.0..=1e7).contains(&secs) {
        return Err(format!("duration {t:?} out of range"));
    }
    if secs == 0.0 {
        return Err("duration must be more than zero".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every short flag of every `pier bench` subcommand, with the long flag it
    /// stands for there: one letter, one meaning.
    #[test]
    fn each_short_flag_means_one_thing_across_bench_subcommands() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Top {
            #[command(flatten)]
            bench: BenchArgs,
        }
        fn walk(cmd: &clap::Command, seen: &mut std::collections::HashMap<char, String>) {
            for arg in cmd.get_arguments() {
                if let (Some(short), Some(long)) = (arg.get_short(), arg.get_long()) {
                    let prev = seen.entry(short).or_insert_with(|| long.to_string());
                    assert_eq!(
                        prev,
                        long,
                        "-{short} is --{prev} in one subcommand and --{long} in {}",
                        cmd.get_name()
                    );
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, seen);
            }
        }
        let mut seen = std::collections::HashMap::new();
        walk(&Top::command(), &mut seen);
        assert_eq!(
            seen.get(&'m'),
            None,
            "-m has no long form: it is --method or --streams"
        );
    }

    #[test]
    fn short_m_is_streams_when_a_number_and_the_method_otherwise() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Top {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let parse = |args: &[&str]| {
            let mut all = vec!["bench", "http"];
            all.extend_from_slice(args);
            all.push("http://127.0.0.1:1/");
            let top = Top::try_parse_from(all).unwrap();
            let BenchCommand::Http(a) = top.bench.command else {
                panic!("not bench http");
            };
            a
        };
        let a = parse(&["--h2", "-m", "10"]);
        assert_eq!(a.common.short_m_streams(), Some(10));
        assert_eq!(a.common.request_method(), Ok("GET"));
        assert!(a.common.multiplexed());
        let a = parse(&["--h3", "-m", "7"]);
        assert_eq!(a.common.short_m_streams(), Some(7));
        assert!(a.common.multiplexed() && !a.common.h2);
        let a = parse(&["-m", "POST"]);
        assert_eq!(a.common.short_m_streams(), None);
        assert_eq!(a.common.request_method(), Ok("POST"));
        let a = parse(&["--method", "PUT"]);
        assert_eq!(a.common.request_method(), Ok("PUT"));
        let a = parse(&["-m", "POST", "--method", "PUT"]);
        assert!(a.common.request_method().unwrap_err().contains("disagree"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_arg("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration_arg("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration_arg("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration_arg("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration_arg("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration_arg("0s").is_err());
        assert!(parse_duration_arg("ten").is_err());
        assert!(parse_duration_arg("5 parsecs").is_err());
        assert!(parse_duration_arg("1e99").is_err());
    }
}
