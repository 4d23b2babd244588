//! The trace exporter: workers hand each exported request's encoded spans
//! to one background thread through a bounded lock-free queue (as the access
//! log does); the thread batches them into `ExportTraceServiceRequest`s and
//! sends them to the collector over one kept connection, OTLP/HTTP
//! (`otlp_http.rs`) or OTLP/gRPC (`otlp_grpc.rs`), blocking only itself. A
//! full queue drops the request's spans and counts them
//! (`pier_trace_spans_dropped_total`): a worker never waits on a collector.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use tracing::{info, warn};

use super::collector_endpoint::split_endpoint;
use super::otlp::encode_request;
use super::otlp_grpc::OtlpGrpc;
use super::otlp_http::OtlpHttp;
use super::{ExportProtocol, TraceConfig};

/// Encoded spans per POST, at most: a batch stays a few hundred KiB.
const BATCH_BYTES: usize = 512 * 1024;
/// Queued requests that make a worker wake the exporter before its interval
/// (half the queue, when that is fewer: a small queue must wake it before it
/// fills; a queue of one is sent at the interval only).
const WAKE_AT: usize = 256;
/// Room a new span buffer is made with: a request's server and client spans.
const SPANS_ROOM: usize = 1024;
/// How long shutdown waits for the last batch.
const FINISH_WAIT: Duration = Duration::from_secs(5);

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
    /// [`WAKE_AT`], or half the queue when that is fewer; 0: never.
    wake_at: usize,
    /// Batches the collector did not take (`pier_trace_export_failures_total`).
    failures: Arc<AtomicU64>,
}

impl TraceShared {
    fn new(config: TraceConfig, failures: Arc<AtomicU64>) -> Arc<TraceShared> {
        let queue = config.queue.max(1);
        Arc::new(TraceShared {
            config,
            full: ArrayQueue::new(queue),
            empty: ArrayQueue::new(queue),
            stop: AtomicBool::new(false),
            exporter: OnceLock::new(),
            wake_at: WAKE_AT.min(queue / 2),
            failures,
        })
    }

    /// A buffer to encode a request's spans into (a reused one when there is
    /// one, else one with room for a request's spans: grown from empty, it
    /// would be reallocated several times).
    pub fn buffer(&self) -> Vec<u8> {
        self.empty
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SPANS_ROOM))
    }

    /// Queues a request's encoded spans; `Err` gives them back when the queue
    /// is full (the caller counts `spans` as dropped).
    pub fn hand_off(&self, spans: Vec<u8>, count: u32) -> Result<(), Vec<u8>> {
        match self.full.push((spans, count)) {
            Ok(()) => {
                if self.wake_at > 0 && self.full.len() >= self.wake_at {
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
    /// Starts the exporter thread for `config`; batches the collector does
    /// not take are counted into `failures`.
    pub fn start(config: TraceConfig, failures: Arc<AtomicU64>) -> io::Result<TraceExporter> {
        let shared = TraceShared::new(config, failures);
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

/// The exporter's connection to the collector, in the configured protocol.
enum CollectorLink {
    Http(OtlpHttp),
    Grpc(Box<OtlpGrpc>),
}

impl CollectorLink {
    fn new(config: &TraceConfig) -> CollectorLink {
        let endpoint = split_endpoint(&config.endpoint, config.protocol);
        match config.protocol {
            ExportProtocol::HttpProtobuf => CollectorLink::Http(OtlpHttp::new(endpoint)),
            ExportProtocol::Grpc => CollectorLink::Grpc(Box::new(OtlpGrpc::new(endpoint))),
        }
    }

    /// Sends one encoded `ExportTraceServiceRequest`; after an error the
    /// next export connects again.
    fn export(&mut self, body: &[u8]) -> io::Result<()> {
        match self {
            CollectorLink::Http(h) => h.export(body),
            CollectorLink::Grpc(g) => g.export(body),
        }
    }
}

fn export_loop(shared: &TraceShared) {
    let mut link = CollectorLink::new(&shared.config);
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
            match link.export(&body) {
                Ok(()) => {
                    if failing {
                        info!(endpoint = %shared.config.endpoint, "trace export recovered");
                    }
                    failing = false;
                }
                Err(e) => {
                    shared.failures.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        warn!(endpoint = %shared.config.endpoint, error = %e, spans, "trace export failed; spans are lost until the collector answers");
                    }
                    failing = true;
                }
            }
            // What came in while this batch was sent waits for the interval
            // or for a full batch's worth: sending each time the queue is
            // not empty would make batches of a few requests when the
            // exporter keeps pace, each POST costing what a big one does.
            if !stopping && shared.full.len() < shared.wake_at.max(1) {
                break;
            }
        }
        if stopping {
            return;
        }
        std::thread::park_timeout(shared.config.flush_interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_refuses_without_waiting() {
        let shared = TraceShared::new(
            TraceConfig {
                queue: 2,
                ..TraceConfig::for_tests()
            },
            Arc::default(),
        );
        assert!(shared.hand_off(vec![1], 1).is_ok());
        assert!(shared.hand_off(vec![2], 1).is_ok());
        assert_eq!(shared.hand_off(vec![3], 2), Err(vec![3]));
    }

    /// A queue smaller than two wake-ups' worth wakes the exporter at half
    /// full, not never: before, a queue under 256 left at most its size per
    /// flush interval and dropped the rest.
    #[test]
    fn a_small_queue_wakes_the_exporter_at_half_full() {
        let shared = TraceShared::new(
            TraceConfig {
                queue: 100,
                ..TraceConfig::for_tests()
            },
            Arc::default(),
        );
        shared.exporter.set(std::thread::current()).unwrap();
        for i in 0..49 {
            assert!(shared.hand_off(vec![i], 1).is_ok());
        }
        let started = std::time::Instant::now();
        assert!(shared.hand_off(vec![49], 1).is_ok());
        // The hand-off unparked this thread: the park returns at once.
        std::thread::park_timeout(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
