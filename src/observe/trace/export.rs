//! The OTLP/HTTP exporter: workers hand each exported request's encoded spans
//! to one background thread through a bounded lock-free queue (as the access
//! log does); the thread batches them into `ExportTraceServiceRequest`s and
//! POSTs them to the collector over a kept-alive connection. A full queue
//! drops the request's spans and counts them
//! (`pier_trace_spans_dropped_total`): a worker never waits on a collector.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use tracing::{info, warn};

use super::otlp::encode_request;
use super::TraceConfig;

/// Encoded spans per POST, at most: a batch stays a few hundred KiB.
const BATCH_BYTES: usize = 512 * 1024;
/// Queued requests that make a worker wake the exporter before its interval.
const WAKE_AT: usize = 256;
/// How long one POST may take (connect, write, answer).
const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutdown waits for the last batch.
const FINISH_WAIT: Duration = Duration::from_secs(5);
/// Largest collector answer read (its body is not used).
const ANSWER_MAX: u64 = 64 * 1024;

/// State shared by the workers and the exporter thread.
pub struct TraceShared {
    /// The `[trace]` settings this exporter runs under.
    pub config: TraceConfig,
    /// Encoded spans of one request each, and how many spans they hold.
    full: ArrayQueue<(Vec<u8>, u32)>,
    /// Buffers the exporter sent, for the workers to reuse.
    empty: ArrayQueue<Vec<u8>>,
    stop: AtomicBool,
    exporter: OnceLock<Thread>,
}

impl TraceShared {
    fn new(config: TraceConfig) -> Arc<TraceShared> {
        let queue = config.queue.max(1);
        Arc::new(TraceShared {
            config,
            full: ArrayQueue::new(queue),
            empty: ArrayQueue::new(queue),
            stop: AtomicBool::new(false),
            exporter: OnceLock::new(),
        })
    }

    /// A buffer to encode a request's spans into (a reused one when there is one).
    pub fn buffer(&self) -> Vec<u8> {
        self.empty.pop().unwrap_or_default()
    }

    /// Queues a request's encoded spans; `Err` gives them back when the queue
    /// is full (the caller counts `spans` as dropped).
    pub fn hand_off(&self, spans: Vec<u8>, count: u32) -> Result<(), Vec<u8>> {
        match self.full.push((spans, count)) {
            Ok(()) => {
                if self.full.len() >= WAKE_AT {
                    self.wake();
                }
                Ok(())
            }
            Err((buf, _)) => Err(buf),
        }
    }

    /// Gives back a buffer that was not queued.
    pub fn give_back(&self, mut buf: Vec<u8>) {
        buf.clear();
        let _ = self.empty.push(buf);
    }

    fn wake(&self) {
        if let Some(t) = self.exporter.get() {
            t.unpark();
        }
    }
}

/// The process's trace exporter: owns the exporter thread.
pub struct TraceExporter {
    shared: Arc<TraceShared>,
    thread: Option<JoinHandle<()>>,
}

impl TraceExporter {
    /// Starts the exporter thread for `config`.
    pub fn start(config: TraceConfig) -> io::Result<TraceExporter> {
        let shared = TraceShared::new(config);
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("pier-trace-export".into())
            .spawn(move || export_loop(&s))?;
        let _ = shared.exporter.set(handle.thread().clone());
        Ok(TraceExporter {
            shared,
            thread: Some(handle),
        })
    }

    /// What each worker needs to export.
    pub fn shared(&self) -> Arc<TraceShared> {
        self.shared.clone()
    }

    /// Sends what the workers handed over, then stops the thread; a collector
    /// that does not answer is given `FINISH_WAIT`.
    pub fn finish(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        let Some(h) = self.thread.take() else { return };
        if !crate::deadline::Deadline::after(FINISH_WAIT).join_thread(h) {
            warn!("trace exporter is stuck; exiting without its last spans");
        }
    }
}

/// The collector's endpoint, split for the request line.
struct Endpoint {
    /// `host:port`, for the connection and the `Host` field.
    authority: String,
    /// The request target (`/v1/traces`).
    path: String,
}

/// Splits `http://host[:port]/path` (validated by the configuration).
fn split_endpoint(url: &str) -> Endpoint {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/v1/traces"),
    };
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Endpoint {
        authority,
        path: path.to_string(),
    }
}

fn export_loop(shared: &TraceShared) {
    let endpoint = split_endpoint(&shared.config.endpoint);
    let mut conn: Option<TcpStream> = None;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut body = Vec::new();
    let mut failing = false;
    loop {
        let stopping = shared.stop.load(Ordering::Acquire);
        loop {
            let mut bytes = 0;
            let mut spans = 0u64;
            while bytes < BATCH_BYTES {
                let Some((buf, n)) = shared.full.pop() else {
                    break;
                };
                bytes += buf.len();
                spans += u64::from(n);
                batch.push(buf);
            }
            if batch.is_empty() {
                break;
            }
            body.clear();
            encode_request(&mut body, &shared.config.service_name, &batch);
            for buf in batch.drain(..) {
                shared.give_back(buf);
            }
            match post(&mut conn, &endpoint, &body) {
                Ok(()) => {
                    if failing {
                        info!(endpoint = %shared.config.endpoint, "trace export recovered");
                    }
                    failing = false;
                }
                Err(e) => {
                    conn = None;
                    if !failing {
                        warn!(endpoint = %shared.config.endpoint, error = %e, spans, "trace export failed; spans are lost until the collector answers");
                    }
                    failing = true;
                }
            }
        }
        if stopping {
            return;
        }
        std::thread::park_timeout(shared.config.flush_interval);
    }
}

/// POSTs one batch; a kept connection that the collector closed is replaced
/// once.
fn post(conn: &mut Option<TcpStream>, endpoint: &Endpoint, body: &[u8]) -> io::Result<()> {
    let reused = conn.is_some();
    match post_on(conn, endpoint, body) {
        Err(_) if reused => {
            *conn = None;
            post_on(conn, endpoint, body)
        }
        r => r,
    }
}

fn post_on(conn: &mut Option<TcpStream>, endpoint: &Endpoint, body: &[u8]) -> io::Result<()> {
    let stream = match conn {
        Some(s) => s,
        None => {
            let addr = endpoint
                .authority
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::other("the endpoint's host has no address"))?;
            let s = TcpStream::connect_timeout(&addr, POST_TIMEOUT)?;
            s.set_read_timeout(Some(POST_TIMEOUT))?;
            s.set_write_timeout(Some(POST_TIMEOUT))?;
            let _ = s.set_nodelay(true);
            conn.insert(s)
        }
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nUser-Agent: pier/{}\r\n\r\n",
        endpoint.path,
        endpoint.authority,
        body.len(),
        env!("CARGO_PKG_VERSION"),
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new((&*stream).take(ANSWER_MAX));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("the collector's answer is not HTTP"))?;
    let mut length = None;
    let mut close = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::other("the collector closed mid-answer"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<u64>().ok();
            } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close")
            {
                close = true;
            }
        }
    }
    match length {
        Some(n) => {
            io::copy(&mut reader.by_ref().take(n), &mut io::sink())?;
        }
        // Without a length (chunked or until close) the connection is not
        // reused: its answer is not read to its end.
        None => close = true,
    }
    if close {
        *conn = None;
    }
    if !(200..300).contains(&status) {
        return Err(io::Error::other(format!("the collector answered {status}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_split_into_authority_and_path() {
        let e = split_endpoint("http://127.0.0.1:4318/v1/traces");
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:4318", "/v1/traces")
        );
        let e = split_endpoint("http://collector");
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("collector:80", "/v1/traces")
        );
        let e = split_endpoint("http://[::1]:4318/otlp/v1/traces");
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("[::1]:4318", "/otlp/v1/traces")
        );
    }

    #[test]
    fn a_full_queue_refuses_without_waiting() {
        let shared = TraceShared::new(TraceConfig {
            queue: 2,
            ..TraceConfig::for_tests()
        });
        assert!(shared.hand_off(vec![1], 1).is_ok());
        assert!(shared.hand_off(vec![2], 1).is_ok());
        assert_eq!(shared.hand_off(vec![3], 2), Err(vec![3]));
    }
}
