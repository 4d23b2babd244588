//! Access log that never makes a worker wait: each worker formats lines into its own
//! buffer and hands full buffers to one writer thread through a bounded lock-free
//! queue. When the writer falls behind, the queue is full and the worker drops the
//! buffer's lines and counts them (`pier_log_lines_dropped_total`) instead of blocking.

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_queue::ArrayQueue;
use tracing::warn;

use crate::http::date::civil_from_days;
use crate::observe::metrics::WorkerStats;

/// Full buffers that may wait for the writer, per worker: enough to ride out a
/// slow disk for a moment, bounded so a stuck disk costs memory only up to this.
const BUFFERS_PER_WORKER: usize = 4;
/// How long the writer sleeps when it has nothing to do; workers unpark it sooner.
const WRITER_IDLE: Duration = Duration::from_millis(200);
/// How long shutdown waits for the writer to write what the workers handed over.
const FINISH_WAIT: Duration = Duration::from_secs(5);

/// Line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Apache/nginx combined, with TLS, upstream and timing fields appended.
    Combined,
    /// One JSON object per line.
    Json,
}

/// Where lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard output (`path = "-"`), for containers and journald.
    Stdout,
    /// A file opened for append, reopened on SIGUSR1 after logrotate moved it.
    File(PathBuf),
}

impl std::fmt::Display for LogTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogTarget::Stdout => f.write_str("standard output"),
            LogTarget::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// `[access_log]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogConfig {
    /// Where lines go.
    pub target: LogTarget,
    /// Line format.
    pub format: LogFormat,
    /// Bytes a worker gathers before handing a buffer to the writer.
    pub buffer: usize,
    /// A partial buffer is handed over at least this often, so quiet servers log too.
    pub flush_interval: Duration,
}

/// State shared by the workers and the writer thread.
pub struct AccessLogShared {
    config: AccessLogConfig,
    full: ArrayQueue<(Vec<u8>, u64)>,
    empty: ArrayQueue<Vec<u8>>,
    reopen: AtomicBool,
    stop: AtomicBool,
    writer: OnceLock<Thread>,
}

impl AccessLogShared {
    fn new(config: AccessLogConfig, queue: usize) -> Arc<AccessLogShared> {
        Arc::new(AccessLogShared {
            config,
            full: ArrayQueue::new(queue.max(1)),
            empty: ArrayQueue::new(queue.max(1)),
            reopen: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            writer: OnceLock::new(),
        })
    }

    fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }
}

/// The process's access log: owns the writer thread.
pub struct AccessLog {
    shared: Arc<AccessLogShared>,
    writer: Option<JoinHandle<()>>,
}

impl AccessLog {
    /// Opens the target (so a bad path fails the start) and starts the writer.
    pub fn start(config: AccessLogConfig, workers: usize) -> io::Result<AccessLog> {
        let sink = Sink::open(&config.target)?;
        let shared = AccessLogShared::new(config, workers.max(1) * BUFFERS_PER_WORKER);
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("pier-access-log".into())
            .spawn(move || write_loop(&s, sink))?;
        let _ = shared.writer.set(handle.thread().clone());
        Ok(AccessLog {
            shared,
            writer: Some(handle),
        })
    }

    /// What each worker needs to log.
    pub fn shared(&self) -> Arc<AccessLogShared> {
        self.shared.clone()
    }

    /// Reopens the file at its path (SIGUSR1), after the writer has written what it holds.
    pub fn reopen(&self) {
        self.shared.reopen.store(true, Ordering::Release);
        self.shared.wake_writer();
    }

    /// Writes what the workers handed over, then stops the writer. A writer stuck
    /// on a dead disk is given `FINISH_WAIT`, so it cannot hold up the exit.
    pub fn finish(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake_writer();
        let Some(h) = self.writer.take() else { return };
        if !crate::deadline::Deadline::after(FINISH_WAIT).join_thread(h) {
            warn!("access log writer is stuck; exiting without its last lines");
        }
    }
}

enum Sink {
    Stdout,
    File(File, PathBuf),
}

impl Sink {
    fn open(target: &LogTarget) -> io::Result<Sink> {
        Ok(match target {
            LogTarget::Stdout => Sink::Stdout,
            LogTarget::File(p) => Sink::File(open_append(p)?, p.clone()),
        })
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(data)?;
                out.flush()
            }
            Sink::File(f, _) => f.write_all(data),
        }
    }
}

fn open_append(p: &PathBuf) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(p)
}

fn write_loop(shared: &AccessLogShared, mut sink: Sink) {
    let mut failing = false;
    loop {
        let stopping = shared.stop.load(Ordering::Acquire);
        while let Some((buf, _lines)) = shared.full.pop() {
            match sink.write(&buf) {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    warn!(error = %e, "access log write failed; lines are lost until it recovers");
                }
                Err(_) => {}
            }
            let mut buf = buf;
            buf.clear();
            let _ = shared.empty.push(buf);
        }
        if shared.reopen.swap(false, Ordering::AcqRel) {
            if let Sink::File(f, path) = &mut sink {
                match open_append(path) {
                    Ok(new) => *f = new,
                    Err(e) => {
                        warn!(path = %path.display(), error = %e, "cannot reopen the access log; keeping the old file")
                    }
                }
            }
        }
        if stopping {
            return;
        }
        std::thread::park_timeout(WRITER_IDLE);
    }
}

/// TLS facts of a downstream connection, for the log line.
#[derive(Debug, Clone, Copy, Default)]
pub struct TlsFields<'a> {
    /// e.g. `TLSv1.3` (see [`crate::tls::names`]).
    pub version: Option<&'static str>,
    /// e.g. `TLS_AES_128_GCM_SHA256`, the OpenSSL name.
    pub cipher: Option<&'static str>,
    /// Server name the client asked for.
    pub sni: Option<&'a str>,
}

/// One answered request.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// Client address (after PROXY protocol).
    pub client: SocketAddr,
    /// Request method, or empty when the head could not be parsed.
    pub method: &'a [u8],
    /// Request target as sent.
    pub target: &'a [u8],
    /// `HTTP/1.1`, `HTTP/1.0` or `HTTP/2.0`.
    pub protocol: &'a str,
    /// The HTTP/2 stream the request came on.
    pub stream: Option<u32>,
    /// Status sent.
    pub status: u16,
    /// Body bytes sent downstream for this response, without the head (as
    /// nginx's `$body_bytes_sent`).
    pub body_bytes: u64,
    /// From the complete request head to the response handed to the socket.
    pub duration: Duration,
    /// `Referer`.
    pub referer: Option<&'a [u8]>,
    /// `User-Agent`.
    pub user_agent: Option<&'a [u8]>,
    /// TLS facts when the connection is TLS.
    pub tls: Option<TlsFields<'a>>,
    /// Upstream server of a proxied request.
    pub upstream: Option<SocketAddr>,
    /// From the start of proxying to the upstream's response head.
    pub upstream_time: Option<Duration>,
    /// How a cache answered (`hit`, `miss`, ...) on routes with a cache.
    pub cache: Option<&'static str>,
    /// The trace and server span ids (lowercase hex) of a traced request.
    pub trace: Option<([u8; 32], [u8; 16])>,
}

/// Second-resolution timestamps, formatted once per second per worker.
#[derive(Default)]
struct Clock {
    secs: u64,
    clf: String,
    iso: String,
}

impl Clock {
    fn update(&mut self, now: SystemTime) {
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if secs == self.secs && !self.clf.is_empty() {
            return;
        }
        self.secs = secs;
        let (y, m, d) = civil_from_days(secs / 86400);
        let (hh, mm, ss) = (secs % 86400 / 3600, secs % 3600 / 60, secs % 60);
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        self.clf = format!(
            "{d:02}/{}/{y}:{hh:02}:{mm:02}:{ss:02} +0000",
            MONTHS[(m - 1) as usize]
        );
        self.iso = format!("{y}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z");
    }
}

/// A worker's side of the log: its buffer, and the hand-off that never waits.
pub struct WorkerLog {
    shared: Arc<AccessLogShared>,
    buf: RefCell<Vec<u8>>,
    lines: Cell<u64>,
    clock: RefCell<Clock>,
    stats: Arc<WorkerStats>,
}

impl WorkerLog {
    /// A worker's log over the shared queue; drops are counted into `stats`.
    pub fn new(shared: Arc<AccessLogShared>, stats: Arc<WorkerStats>) -> WorkerLog {
        let cap = shared.config.buffer;
        WorkerLog {
            shared,
            buf: RefCell::new(Vec::with_capacity(cap)),
            lines: Cell::new(0),
            clock: RefCell::new(Clock::default()),
            stats,
        }
    }

    /// How often the worker's timer hands over a partial buffer.
    pub fn flush_interval(&self) -> Duration {
        self.shared.config.flush_interval
    }

    /// Formats one line; hands the buffer over when it is full.
    pub fn record(&self, e: &Entry<'_>) {
        let mut clock = self.clock.borrow_mut();
        clock.update(SystemTime::now());
        let mut buf = self.buf.borrow_mut();
        match self.shared.config.format {
            LogFormat::Combined => combined(&mut buf, &clock.clf, e),
            LogFormat::Json => json(&mut buf, &clock.iso, e),
        }
        self.lines.set(self.lines.get() + 1);
        if buf.len() >= self.shared.config.buffer {
            self.hand_off(&mut buf);
        }
    }

    /// Hands over a partial buffer (timer, shutdown).
    pub fn flush(&self) {
        let mut buf = self.buf.borrow_mut();
        if !buf.is_empty() {
            self.hand_off(&mut buf);
        }
    }

    /// Pushes the buffer to the writer, or drops and counts its lines when the
    /// queue is full; neither waits.
    fn hand_off(&self, buf: &mut Vec<u8>) {
        let lines = self.lines.replace(0);
        let fresh = self
            .shared
            .empty
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.shared.config.buffer));
        let full = std::mem::replace(buf, fresh);
        match self.shared.full.push((full, lines)) {
            Ok(()) => self.shared.wake_writer(),
            Err((mut full, lines)) => {
                self.stats.log_dropped.add(lines);
                full.clear();
                *buf = full;
            }
        }
    }
}

fn push_ms(out: &mut Vec<u8>, d: Duration) {
    let _ = write!(out, "{:.3}", d.as_secs_f64() * 1000.0);
}

/// An optional field: `push` writes it when present, else `absent` stands in
/// its place (`-` in combined lines, `null` in JSON).
fn push_or<T>(out: &mut Vec<u8>, v: Option<T>, absent: &[u8], push: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        Some(v) => push(out, v),
        None => out.extend_from_slice(absent),
    }
}

/// Bytes nginx-style: printable ASCII as is, the rest (and `"` and `\`) as `\xHH`.
fn push_clf(out: &mut Vec<u8>, s: &[u8]) {
    if s.is_empty() {
        out.push(b'-');
        return;
    }
    for &c in s {
        if (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\' {
            out.push(c);
        } else {
            let _ = write!(out, "\\x{c:02X}");
        }
    }
}

fn combined(out: &mut Vec<u8>, time: &str, e: &Entry<'_>) {
    let _ = write!(out, "{} - - [{time}] \"", e.client.ip());
    if e.method.is_empty() {
        out.push(b'-');
    } else {
        push_clf(out, e.method);
        out.push(b' ');
        push_clf(out, e.target);
        let _ = write!(out, " {}", e.protocol);
    }
    let _ = write!(out, "\" {} {} \"", e.status, e.body_bytes);
    push_clf(out, e.referer.unwrap_or_default());
    out.extend_from_slice(b"\" \"");
    push_clf(out, e.user_agent.unwrap_or_default());
    out.extend_from_slice(b"\" ");
    let tls = e.tls.unwrap_or_default();
    out.extend_from_slice(tls.version.unwrap_or("-").as_bytes());
    out.push(b' ');
    out.extend_from_slice(tls.cipher.unwrap_or("-").as_bytes());
    out.push(b' ');
    push_clf(out, tls.sni.unwrap_or_default().as_bytes());
    out.push(b' ');
    push_or(out, e.upstream, b"-", |out, a| {
        let _ = write!(out, "{a}");
    });
    out.push(b' ');
    push_or(out, e.upstream_time, b"-", push_ms);
    out.push(b' ');
    push_ms(out, e.duration);
    // HTTP/2 lines name their stream; HTTP/1 lines keep nginx's layout.
    if let Some(id) = e.stream {
        let _ = write!(out, " stream={id}");
    }
    // Only routes with a cache add the outcome, so other lines keep their shape.
    if let Some(c) = e.cache {
        out.extend_from_slice(b" cache=");
        out.extend_from_slice(c.as_bytes());
    }
    // Traced requests name their trace and span, as `cache=` is added.
    if let Some((trace, span)) = &e.trace {
        out.extend_from_slice(b" trace_id=");
        out.extend_from_slice(trace);
        out.extend_from_slice(b" span_id=");
        out.extend_from_slice(span);
    }
    out.push(b'\n');
}

/// A JSON string escaped by serde_json: UTF-8 text stays as it is; bytes that are
/// not UTF-8 are written as the text `\xHH` (as in `combined`), so a hostile
/// request line still gives valid JSON and loses no byte.
fn push_json_str(out: &mut Vec<u8>, s: &[u8]) {
    let _ = match std::str::from_utf8(s) {
        Ok(text) => serde_json::to_writer(&mut *out, text),
        Err(_) => {
            let mut text = String::with_capacity(s.len() + 8);
            for chunk in s.utf8_chunks() {
                text.push_str(chunk.valid());
                for b in chunk.invalid() {
                    let _ = std::fmt::Write::write_fmt(&mut text, format_args!("\\x{b:02X}"));
                }
            }
            serde_json::to_writer(&mut *out, &text)
        }
    };
}

/// `,"key":` and the value `push` writes, or `null` when there is none.
fn json_field<T>(out: &mut Vec<u8>, key: &str, v: Option<T>, push: impl FnOnce(&mut Vec<u8>, T)) {
    let _ = write!(out, ",\"{key}\":");
    push_or(out, v, b"null", push);
}

/// A text field, escaped, or `null`.
fn json_opt(out: &mut Vec<u8>, key: &str, v: Option<&[u8]>) {
    json_field(out, key, v, push_json_str);
}

fn json(out: &mut Vec<u8>, time: &str, e: &Entry<'_>) {
    let _ = write!(
        out,
        "{{\"timestamp\":\"{time}\",\"client\":\"{}\",\"client_port\":{}",
        e.client.ip(),
        e.client.port()
    );
    let parsed = !e.method.is_empty();
    json_opt(out, "method", parsed.then_some(e.method));
    json_opt(out, "target", parsed.then_some(e.target));
    json_opt(out, "protocol", parsed.then_some(e.protocol.as_bytes()));
    if let Some(id) = e.stream {
        let _ = write!(out, ",\"stream\":{id}");
    }
    let _ = write!(
        out,
        ",\"status\":{},\"bytes\":{},\"duration_ms\":",
        e.status, e.body_bytes
    );
    push_ms(out, e.duration);
    json_opt(out, "referer", e.referer);
    json_opt(out, "user_agent", e.user_agent);
    let tls = e.tls.unwrap_or_default();
    json_opt(out, "tls_version", tls.version.map(str::as_bytes));
    json_opt(out, "tls_cipher", tls.cipher.map(str::as_bytes));
    json_opt(out, "sni", tls.sni.map(str::as_bytes));
    // An address's text needs no JSON escaping.
    json_field(out, "upstream", e.upstream, |out, a| {
        let _ = write!(out, "\"{a}\"");
    });
    json_field(out, "upstream_time_ms", e.upstream_time, push_ms);
    // The outcomes are fixed words: no escaping needed.
    json_field(out, "cache", e.cache, |out, c| {
        let _ = write!(out, "\"{c}\"");
    });
    // Hex ids: no escaping needed.
    let quoted = |out: &mut Vec<u8>, id: &[u8]| {
        out.push(b'"');
        out.extend_from_slice(id);
        out.push(b'"');
    };
    json_field(out, "trace_id", e.trace.as_ref().map(|t| &t.0[..]), quoted);
    json_field(out, "span_id", e.trace.as_ref().map(|t| &t.1[..]), quoted);
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(format: LogFormat, buffer: usize) -> AccessLogConfig {
        AccessLogConfig {
            target: LogTarget::Stdout,
            format,
            buffer,
            flush_interval: Duration::from_secs(1),
        }
    }

    fn entry() -> Entry<'static> {
        Entry {
            client: "192.0.2.7:5555".parse().unwrap(),
            method: b"GET",
            target: b"/a\"b",
            protocol: "HTTP/1.1",
            stream: None,
            status: 200,
            body_bytes: 13,
            duration: Duration::from_micros(1500),
            referer: None,
            user_agent: Some(b"curl/8 \xff"),
            tls: Some(TlsFields {
                version: Some("TLSv1.3"),
                cipher: Some("TLS_AES_128_GCM_SHA256"),
                sni: Some("example.com"),
            }),
            upstream: Some("127.0.0.1:8080".parse().unwrap()),
            upstream_time: Some(Duration::from_millis(1)),
            cache: None,
            trace: None,
        }
    }

    #[test]
    fn stalled_writer_drops_and_counts_without_blocking() {
        // No writer thread: nothing ever drains the queue of two buffers.
        let shared = AccessLogShared::new(config(LogFormat::Combined, 1), 2);
        let stats = Arc::new(WorkerStats::default());
        let log = WorkerLog::new(shared.clone(), stats.clone());
        let started = std::time::Instant::now();
        for _ in 0..10 {
            log.record(&entry());
        }
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(shared.full.len(), 2);
        assert_eq!(stats.log_dropped.get(), 8);
        // Several lines in one dropped buffer are all counted.
        let shared = AccessLogShared::new(config(LogFormat::Combined, 1 << 20), 1);
        let stats = Arc::new(WorkerStats::default());
        let log = WorkerLog::new(shared, stats.clone());
        for _ in 0..3 {
            log.record(&entry());
        }
        log.flush();
        for _ in 0..5 {
            log.record(&entry());
        }
        log.flush();
        assert_eq!(stats.log_dropped.get(), 5);
    }

    #[test]
    fn combined_line_escapes_and_appends_tls_and_upstream() {
        let mut out = Vec::new();
        combined(&mut out, "22/Nov/2026:10:13:20 +0000", &entry());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "192.0.2.7 - - [22/Nov/2026:10:13:20 +0000] \"GET /a\\x22b HTTP/1.1\" 200 13 \"-\" \
             \"curl/8 \\xFF\" TLSv1.3 TLS_AES_128_GCM_SHA256 example.com 127.0.0.1:8080 1.000 1.500\n"
        );
    }

    #[test]
    fn json_line_parses_with_every_key() {
        let mut out = Vec::new();
        json(&mut out, "2026-11-22T10:13:20Z", &entry());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["target"], "/a\"b");
        assert_eq!(v["user_agent"], "curl/8 \\xFF");
        assert_eq!(v["timestamp"], "2026-11-22T10:13:20Z");
        assert_eq!(v["status"], 200);
        assert_eq!(v["referer"], serde_json::Value::Null);
        assert_eq!(v["upstream"], "127.0.0.1:8080");
        assert_eq!(v["trace_id"], serde_json::Value::Null);
    }

    #[test]
    fn traced_lines_name_their_trace_and_span() {
        let mut e = entry();
        e.trace = Some(([b'a'; 32], [b'b'; 16]));
        let mut out = Vec::new();
        json(&mut out, "2026-11-22T10:13:20Z", &e);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["trace_id"], "a".repeat(32));
        assert_eq!(v["span_id"], "b".repeat(16));
        let mut out = Vec::new();
        combined(&mut out, "22/Nov/2026:10:13:20 +0000", &e);
        let line = String::from_utf8(out).unwrap();
        let want = format!(" trace_id={} span_id={}\n", "a".repeat(32), "b".repeat(16));
        assert!(line.ends_with(&want), "{line}");
    }

    #[test]
    fn json_keeps_utf8_as_text_and_escapes_controls() {
        let mut e = entry();
        e.target = "/caf\u{e9}?q=\u{65e5}".as_bytes();
        e.user_agent = Some(b"a\tb\x01\"c\\");
        let mut out = Vec::new();
        json(&mut out, "2026-11-22T10:13:20Z", &e);
        let text = String::from_utf8(out).unwrap();
        // Not byte by byte: the two bytes of `é` are one character.
        assert!(
            text.contains("\"target\":\"/caf\u{e9}?q=\u{65e5}\""),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["target"], "/caf\u{e9}?q=\u{65e5}");
        assert_eq!(v["user_agent"], "a\tb\u{1}\"c\\");
    }

    #[test]
    fn clock_formats_civil_dates() {
        let mut c = Clock::default();
        c.update(UNIX_EPOCH + Duration::from_secs(1_795_428_800));
        assert_eq!(c.iso, "2026-11-23T10:13:20Z");
        assert_eq!(c.clf, "23/Nov/2026:10:13:20 +0000");
        c.update(UNIX_EPOCH + Duration::from_secs(951_782_400));
        assert_eq!(c.iso, "2000-02-29T00:00:00Z");
    }
}
