//! Jaeger, the tracing backend, started on loopback for the trace tests: its
//! all-in-one binary (`$JAEGER`, else where `.ci/run` builds it) with in-memory
//! storage, its OTLP/HTTP and OTLP/gRPC receivers and query API on free ports.
//! Killed on drop.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::free_port;

/// The pinned version `.ci/run` builds.
pub const VERSION: &str = "v1.76.0";

/// A running Jaeger.
pub struct Jaeger {
    child: Child,
    /// The OTLP/HTTP traces endpoint (`http://127.0.0.1:PORT/v1/traces`).
    pub otlp: String,
    /// The OTLP/gRPC endpoint (`http://127.0.0.1:PORT`).
    pub otlp_grpc: String,
    /// The query API (`/api/traces/...`).
    pub query: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("JAEGER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(format!(".cache/pier-ci/jaeger-{VERSION}/jaeger"));
    p.is_file().then_some(p).or_else(|| super::which("jaeger"))
}

impl Jaeger {
    /// Starts Jaeger and waits until its query API answers; `None` (with a
    /// message) when it is not installed, a failure under CI.
    pub fn start() -> Option<Jaeger> {
        let Some(bin) = binary() else {
            let why = format!(
                "jaeger not found: run .ci/run, or build github.com/jaegertracing/jaeger/cmd/jaeger@{VERSION} and set JAEGER"
            );
            if std::env::var_os("CI").is_some() || std::env::var_os("JAEGER").is_some() {
                panic!("{why}");
            }
            eprintln!("skipped: {why}");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let (otlp, otlp_grpc, query, query_grpc, health) = (
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            free_port(),
        );
        let config = dir.path().join("jaeger.yaml");
        std::fs::write(
            &config,
            format!(
                r#"service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health}
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"#
            ),
        )
        .unwrap();
        let log = dir.path().join("jaeger.log");
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("jaeger.log")).unwrap())
            .spawn()
            .expect("jaeger starts");
        let jaeger = Jaeger {
            child,
            otlp: format!("http://127.0.0.1:{otlp}/v1/traces"),
            otlp_grpc: format!("http://127.0.0.1:{otlp_grpc}"),
            query: format!("127.0.0.1:{query}").parse().unwrap(),
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while jaeger.api("/api/services").is_none() {
            let log = || std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                Instant::now() < until,
                "jaeger's query API did not come up: {}",
                log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // The OTLP receivers too.
        for port in [otlp, otlp_grpc] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < until,
                    "jaeger's OTLP receiver on port {port} did not come up"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Some(jaeger)
    }

    /// GETs `path` of the query API; `None` unless it answered 200 with JSON.
    pub fn api(&self, path: &str) -> Option<Value> {
        std::net::TcpStream::connect(self.query).ok()?;
        // HTTP/1.0: the answer is not chunked (large ones are, to 1.1).
        let resp = super::get(
            self.query,
            &format!("GET {path} HTTP/1.0\r\nHost: jaeger\r\n\r\n"),
        );
        (resp.status == 200).then(|| serde_json::from_slice(&resp.body).ok())?
    }

    /// The spans of `trace` (hex id) once Jaeger holds at least `spans` of
    /// them, waiting at most 15 s; what it holds then otherwise.
    pub fn trace(&self, trace: &str, spans: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let got = self
                .api(&format!("/api/traces/{trace}"))
                .and_then(|v| v["data"][0]["spans"].as_array().cloned())
                .unwrap_or_default();
            if got.len() >= spans || Instant::now() > until {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A span's tag as text, whatever its type.
pub fn tag(span: &Value, key: &str) -> Option<String> {
    let t = span["tags"].as_array()?.iter().find(|t| t["key"] == key)?;
    Some(match &t["value"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    })
}

/// The span ids a span is the child of.
pub fn parents(span: &Value) -> Vec<String> {
    span["references"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter(|r| r["refType"] == "CHILD_OF")
                .filter_map(|r| r["spanID"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
