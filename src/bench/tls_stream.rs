//! `pier bench tls-stream`: the Asio experiment. C connections, spread over T
//! client threads, each send M messages of S bytes to an echo server and read
//! every byte back; the figure is how many megabytes went each way and how
//! fast, plus how evenly the connections were served.
//!
//! Each connection writes and reads at the same time (two halves of one
//! stream), so a message larger than the socket buffers cannot deadlock the
//! echo, and the measure is bandwidth rather than one round trip per message.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Runs shorter than this measure start-up (handshakes, slow start) more than
/// bandwidth: the report warns.
pub const MEANINGFUL_RUN: std::time::Duration = std::time::Duration::from_secs(1);

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::args::{StreamArgs, StreamLoad};
use super::client_tls::ClientTls;
use super::io::{self, ThreadTls};
use super::stats::{round2, round3, Errors, FailureKind};
use super::target::HostPort;
use super::{join_client_threads, progress, ProgressTotal};
use crate::deadline;
use crate::http1::client::ClientStream;

/// Bytes per read of the echoed data.
const READ_CHUNK: usize = 64 * 1024;

/// One tls-stream run, validated.
#[derive(Debug)]
pub struct StreamPlan {
    /// Echo server.
    pub target: HostPort,
    /// Client threads (never more than connections).
    pub threads: usize,
    /// Connections in total.
    pub connections: usize,
    /// Messages per connection.
    pub messages: u64,
    /// Bytes per message.
    pub size: usize,
    /// Longest wait without progress.
    pub timeout: Duration,
    /// TLS settings; `None` with `--plain`.
    pub tls: Option<ClientTls>,
}

impl StreamPlan {
    /// Validates one run's settings.
    pub fn new(
        target: &str,
        threads: usize,
        connections: usize,
        load: &StreamLoad,
    ) -> Result<StreamPlan, String> {
        let target = HostPort::parse(target)?;
        let StreamLoad {
            messages,
            size,
            plain,
            timeout,
            ref tls,
        } = *load;
        if threads == 0 || connections == 0 || messages == 0 || size == 0 {
            return Err(
                "--threads, --connections, --messages and --size must be at least 1".into(),
            );
        }
        if size > 64 << 20 {
            return Err("--size is at most 64 MiB".into());
        }
        let tls = if plain {
            None
        } else {
            Some(ClientTls::new(tls, &target.host, &[], false)?)
        };
        Ok(StreamPlan {
            target,
            threads: threads.min(connections),
            connections,
            messages,
            size,
            timeout,
            tls,
        })
    }

    /// The plan of `pier bench tls-stream`.
    pub fn from_args(a: &StreamArgs) -> Result<StreamPlan, String> {
        StreamPlan::new(&a.target, a.threads, a.connections, &a.load)
    }

    /// Bytes each connection sends (and expects back).
    pub fn bytes_per_connection(&self) -> u64 {
        self.messages.saturating_mul(self.size as u64)
    }
}

/// What one connection did.
#[derive(Clone, Copy, Debug, Default)]
struct ConnResult {
    sent: u64,
    received: u64,
    /// From the first byte written to the last byte read, if it finished.
    transfer: Option<Duration>,
    error: Option<FailureKind>,
}

/// Result of a tls-stream run.
#[derive(Debug)]
pub struct StreamReport {
    /// Bytes written over all connections.
    pub bytes_sent: u64,
    /// Bytes read back over all connections.
    pub bytes_received: u64,
    /// From the common start (before connecting) to the last connection's end.
    pub elapsed: Duration,
    /// Each finished connection's transfer time, seconds, ascending.
    pub per_connection_s: Vec<f64>,
    /// Connections that failed, by kind.
    pub errors: Errors,
}

impl StreamReport {
    /// Megabytes (10^6 bytes) that went each way: bytes read back, which a
    /// complete run makes equal to bytes sent.
    pub fn megabytes(&self) -> f64 {
        self.bytes_received as f64 / 1e6
    }

    /// Each finished connection's own bandwidth, MB/s (10^6 bytes), ascending.
    /// Every finished connection echoed the plan's bytes, so these are its
    /// transfer times reversed.
    pub fn per_connection_mb_per_s(&self, plan: &StreamPlan) -> Vec<f64> {
        let megabytes = plan.bytes_per_connection() as f64 / 1e6;
        self.per_connection_s
            .iter()
            .rev()
            .map(|secs| megabytes / secs)
            .collect()
    }

    /// Megabytes per second of wall time.
    pub fn mb_per_s(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.megabytes() / s
        } else {
            0.0
        }
    }

    fn spread(v: &[f64]) -> (f64, f64, f64) {
        match (v.first(), v.get(v.len() / 2), v.last()) {
            (Some(&a), Some(&m), Some(&b)) => (a, m, b),
            _ => (0.0, 0.0, 0.0),
        }
    }

    /// The Asio experiment's line plus the spread between connections.
    pub fn text(&self, plan: &StreamPlan) -> String {
        let (min, median, max) = Self::spread(&self.per_connection_mb_per_s(plan));
        let (fast, _, slow) = Self::spread(&self.per_connection_s);
        let mut out = format!(
            "{:.1} megabytes sent and received in {:.3} seconds ({:.1} MB/s)\n",
            self.megabytes(),
            self.elapsed.as_secs_f64(),
            self.mb_per_s()
        );
        out.push_str(&format!(
            "  {} {} connection(s) on {} thread(s), {} x {} bytes each\n",
            plan.connections,
            if plan.tls.is_some() { "TLS" } else { "TCP" },
            plan.threads,
            plan.messages,
            plan.size,
        ));
        out.push_str(&format!(
            "  per connection: min {min:.1} MB/s, median {median:.1} MB/s, max {max:.1} MB/s; \
             fastest {fast:.3} s, slowest {slow:.3} s\n"
        ));
        if self.errors.total() > 0 || self.bytes_sent != self.bytes_received {
            out.push_str(&format!(
                "  errors: {} (sent {} bytes, received {})\n",
                self.errors, self.bytes_sent, self.bytes_received
            ));
        }
        out
    }

    /// The run as one JSON object.
    pub fn to_json(&self, plan: &StreamPlan) -> Value {
        let (min, median, max) = Self::spread(&self.per_connection_mb_per_s(plan));
        let (fast, _, slow) = Self::spread(&self.per_connection_s);
        json!({
            "target": format!("{}:{}", plan.target.host, plan.target.port),
            "tls": plan.tls.is_some(),
            "threads": plan.threads,
            "connections": plan.connections,
            "messages": plan.messages,
            "size": plan.size,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "megabytes": round2(self.megabytes()),
            "duration_s": round3(self.elapsed.as_secs_f64()),
            "mb_per_s": round2(self.mb_per_s()),
            "per_connection": {
                "completed": self.per_connection_s.len(),
                "min_mb_per_s": round2(min),
                "median_mb_per_s": round2(median),
                "max_mb_per_s": round2(max),
                "fastest_s": round3(fast),
                "slowest_s": round3(slow),
            },
            "errors": self.errors.to_json(),
        })
    }
}

/// Runs the plan: one connection first to fail fast, then every thread at once.
pub fn run(plan: &Arc<StreamPlan>, show_progress: bool) -> anyhow::Result<StreamReport> {
    stream_preflight(plan)?;
    let threads = plan.threads.max(1);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::with_capacity(threads);
    let mut counters = Vec::with_capacity(threads);
    for t in 0..threads {
        let n = plan.connections / threads + usize::from(t < plan.connections % threads);
        let counter = Arc::new(AtomicU64::new(0));
        counters.push(counter.clone());
        let (plan, barrier) = (plan.clone(), barrier.clone());
        let h = std::thread::Builder::new()
            .name(format!("pier-bench-{t}"))
            .spawn(move || stream_client_thread(plan, n, barrier, counter))
            .context("cannot start a client thread")?;
        handles.push(h);
    }
    // The threads leave the barrier only after this instant.
    let start = Instant::now();
    barrier.wait();
    let total = plan
        .bytes_per_connection()
        .saturating_mul(plan.connections as u64);
    progress::wait(
        &handles,
        &counters,
        start,
        ProgressTotal::Count(total),
        show_progress,
        "bytes echoed",
    );
    let mut report = StreamReport {
        bytes_sent: 0,
        bytes_received: 0,
        elapsed: Duration::ZERO,
        per_connection_s: Vec::new(),
        errors: Errors::default(),
    };
    let (per_thread, end) = join_client_threads(handles, start)?;
    for results in per_thread {
        for r in results {
            report.bytes_sent += r.sent;
            report.bytes_received += r.received;
            if let Some(kind) = r.error {
                report.errors.add(kind, 1);
            }
            if let Some(t) = r.transfer {
                let secs = t.as_secs_f64().max(1e-9);
                report.per_connection_s.push(secs);
            }
        }
    }
    report.per_connection_s.sort_by(f64::total_cmp);
    report.elapsed = end.saturating_duration_since(start);
    Ok(report)
}

fn thread_tls(plan: &StreamPlan) -> Result<Option<ThreadTls>, String> {
    plan.tls
        .as_ref()
        .map(|t| t.config().map(|c| ThreadTls::new(c, t.server_name.clone())))
        .transpose()
}

fn stream_preflight(plan: &StreamPlan) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = thread_tls(plan).map_err(|e| anyhow!(e))?;
    let addr = plan.target.addr;
    let wait = plan.timeout.max(Duration::from_secs(1));
    rt.block_on(async {
        match deadline::within(wait, io::dial(addr, tls.as_ref())).await {
            Err(_) => bail!("cannot connect to {addr}: no answer within {wait:?}"),
            Ok(Err(e)) if e.kind == FailureKind::Tls => {
                bail!("TLS handshake with {addr} failed: {}", e.error)
            }
            Ok(Err(e)) => bail!("cannot connect to {addr}: {}", e.error),
            Ok(Ok(mut c)) => {
                c.transport.shutdown().await;
                Ok(())
            }
        }
    })
}

type StreamThreadResult = Result<(Vec<ConnResult>, Instant), String>;

fn stream_client_thread(
    plan: Arc<StreamPlan>,
    connections: usize,
    barrier: Arc<Barrier>,
    counter: Arc<AtomicU64>,
) -> StreamThreadResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string());
    let tls = thread_tls(&plan);
    let message: Rc<[u8]> = (0..plan.size).map(|i| (i % 251) as u8).collect();
    barrier.wait();
    let (rt, tls) = (rt?, tls?);
    let local = tokio::task::LocalSet::new();
    let results = local.block_on(&rt, async {
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                let (plan, tls, message, counter) =
                    (plan.clone(), tls.clone(), message.clone(), counter.clone());
                tokio::task::spawn_local(async move {
                    one_connection(&plan, tls.as_ref(), &message, &counter).await
                })
            })
            .collect();
        let mut results = Vec::with_capacity(tasks.len());
        for t in tasks {
            results.push(t.await.unwrap_or(ConnResult {
                error: Some(FailureKind::Reset),
                ..ConnResult::default()
            }));
        }
        results
    });
    Ok((results, Instant::now()))
}

async fn one_connection(
    plan: &StreamPlan,
    tls: Option<&ThreadTls>,
    message: &[u8],
    counter: &AtomicU64,
) -> ConnResult {
    let connected = match deadline::within(plan.timeout, io::dial(plan.target.addr, tls)).await {
        Err(_) => {
            return ConnResult {
                error: Some(FailureKind::Timeout),
                ..ConnResult::default()
            }
        }
        Ok(Err(e)) => {
            return ConnResult {
                error: Some(e.kind),
                ..ConnResult::default()
            }
        }
        Ok(Ok(c)) => c,
    };
    match connected.transport {
        ClientStream::Plain(tcp) => {
            let (r, w) = tcp.into_split();
            echo_messages(plan, r, w, message, counter).await
        }
        ClientStream::Tls(stream) => {
            let (r, w) = tokio::io::split(*stream);
            echo_messages(plan, r, w, message, counter).await
        }
    }
}

/// Writes every message and reads every byte back, concurrently.
async fn echo_messages<R, W>(
    plan: &StreamPlan,
    mut r: R,
    mut w: W,
    message: &[u8],
    counter: &AtomicU64,
) -> ConnResult
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let total = plan.bytes_per_connection();
    let started = Instant::now();
    let writer = async {
        let mut sent = 0u64;
        for _ in 0..plan.messages {
            match deadline::within(plan.timeout, w.write_all(message)).await {
                Err(_) => return (sent, Some(FailureKind::Timeout)),
                Ok(Err(e)) => return (sent, Some(io::classify(&e))),
                Ok(Ok(())) => sent += message.len() as u64,
            }
        }
        match deadline::within(plan.timeout, w.flush()).await {
            Ok(Ok(())) => (sent, None),
            Err(_) => (sent, Some(FailureKind::Timeout)),
            Ok(Err(e)) => (sent, Some(io::classify(&e))),
        }
    };
    let reader = async {
        let mut buf = vec![0u8; READ_CHUNK];
        let mut received = 0u64;
        while received < total {
            let want = usize::try_from(total - received)
                .unwrap_or(READ_CHUNK)
                .min(READ_CHUNK);
            let chunk = buf.get_mut(..want).unwrap_or(&mut []);
            match deadline::within(plan.timeout, r.read(chunk)).await {
                Err(_) => return (received, Some(FailureKind::Timeout)),
                Ok(Ok(0)) => return (received, Some(FailureKind::Closed)),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return (received, Some(FailureKind::Closed))
                }
                Ok(Err(e)) => return (received, Some(io::classify(&e))),
                Ok(Ok(n)) => {
                    received += n as u64;
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
        (received, None)
    };
    let ((sent, werr), (received, rerr)) = tokio::join!(writer, reader);
    let transfer = started.elapsed();
    let error = rerr.or(werr);
    if error.is_none() {
        // close_notify and FIN; the echo server sees a clean end.
        let _ = deadline::within(plan.timeout, w.shutdown()).await;
    }
    ConnResult {
        sent,
        received,
        transfer: error.is_none().then_some(transfer),
        error,
    }
}
