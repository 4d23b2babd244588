//! `pier bench` end to end: the real binary against a real `pier serve`, and
//! against small servers written here that misbehave on purpose (close,
//! stall, never answer) or echo TLS, so every count in a report can be checked
//! exactly.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::bench_run::{bench, bench_json, errors_total, BENCH_SERVER};
use common::Pier;
use serde_json::Value;

/// Accepts connections forever on its own thread; each is handled on another.
fn serve_raw<F>(handler: F) -> SocketAddr
where
    F: Fn(TcpStream) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            let h = handler.clone();
            std::thread::spawn(move || h(s));
        }
    });
    addr
}

/// Reads one request head (the bench sends GET without a body); false at EOF.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..i + 4);
            return true;
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// Runs `pier bench --json` on a target that never answers: the report is still
/// printed, but the run exits 1 and stderr says why; returns (report, stderr).
fn bench_json_unanswered(args: &[&str]) -> (Value, String) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = bench(&all);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "pier bench {args:?}: {err}");
    assert!(err.contains("got a response"), "{err}");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v, err)
}

#[test]
fn exact_request_count_with_n_over_threads_and_connections() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let url = format!("http://{}/", pier.http[0]);
    let v = bench_json(&["http", &url, "-n", "1000", "-c", "7", "-t", "2"]);
    assert_eq!(v["requests"], 1000);
    assert_eq!(v["status"]["200"], 1000);
    assert_eq!(errors_total(&v), 0);
    assert_eq!(v["threads"], 2);
    assert!(v["requests_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["read_bytes_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["duration_s"].as_f64().unwrap() > 0.0);
    for p in ["p50", "p90", "p99", "p99_9", "max"] {
        assert!(v["latency_us"][p].as_u64().unwrap() > 0, "{p}");
    }
    // Every request went out whole and every response came back whole.
    let req = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", pier.http[0]);
    assert_eq!(v["bytes"]["written"], 1000 * req.len() as u64);
}

#[test]
fn statuses_are_counted_by_code_and_pipelining_keeps_counts_exact() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let url = format!("http://{}/teapot", pier.http[0]);
    // Every answer is a 418: the report is printed, and the run fails saying so.
    let out = bench(&[
        "http", &url, "-n", "500", "-c", "3", "--depth", "8", "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("every answer from"), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 500);
    assert_eq!(v["status"].as_object().unwrap().len(), 1);
    assert_eq!(v["status"]["418"], 500);
    assert_eq!(errors_total(&v), 0);
}

#[test]
fn server_closing_connections_is_counted_not_fatal() {
    // Answers the first request of each connection, then closes it without
    // saying so: the next request on that connection fails.
    let addr = serve_raw(|mut s| {
        let mut buf = Vec::new();
        if read_head(&mut s, &mut buf) {
            let _ = s.write_all(OK);
        }
    });
    let v = bench_json(&["http", &format!("http://{addr}/"), "-n", "100", "-c", "2"]);
    let errors = v["errors"]["closed"].as_u64().unwrap() + v["errors"]["reset"].as_u64().unwrap();
    assert_eq!(v["requests"].as_u64().unwrap() + errors, 100, "{v}");
    assert!(v["requests"].as_u64().unwrap() >= 40, "{v}");
    assert!(errors >= 40, "{v}");

    // Closes every connection unanswered: all fail, and the run still ends.
    let addr = serve_raw(|mut s| {
        let mut buf = Vec::new();
        read_head(&mut s, &mut buf);
    });
    let (v, err) =
        bench_json_unanswered(&["http", &format!("http://{addr}/"), "-n", "20", "-c", "2"]);
    assert!(
        err.contains("closed the connection") || err.contains("reset"),
        "{err}"
    );
    assert_eq!(v["requests"], 0);
    assert_eq!(errors_total(&v), 20, "{v}");
}

#[test]
fn malformed_responses_are_counted() {
    let addr = serve_raw(|mut s| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf) {
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
    });
    let (v, err) =
        bench_json_unanswered(&["http", &format!("http://{addr}/"), "-n", "30", "-c", "3"]);
    assert!(
        err.contains("30 errors, the first because the answer was not a valid HTTP/1.1 response"),
        "{err}"
    );
    assert_eq!(v["errors"]["malformed"], 30, "{v}");
    assert_eq!(v["requests"], 0);
}

#[test]
fn a_server_that_never_answers_times_out_and_the_run_ends() {
    let addr = serve_raw(|mut s| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf) {}
    });
    let started = Instant::now();
    let (v, err) = bench_json_unanswered(&[
        "http",
        &format!("http://{addr}/"),
        "-n",
        "4",
        "-c",
        "2",
        "--timeout",
        "300ms",
    ]);
    assert!(err.contains("did not answer within --timeout"), "{err}");
    assert_eq!(v["errors"]["timeout"], 4, "{v}");
    assert_eq!(v["requests"], 0);
    assert!(started.elapsed() < Duration::from_secs(10));

    // Bounded by time, the same server ends the run at its deadline.
    let started = Instant::now();
    let (v, _) =
        bench_json_unanswered(&["http", &format!("http://{addr}/"), "-d", "500ms", "-c", "2"]);
    assert_eq!(v["requests"], 0);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn open_loop_rate_shows_a_stall_that_closed_loop_hides() {
    // Answers at once, except that one request (across all connections) is
    // held for 500 ms.
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let addr = serve_raw(move |mut s| {
        let _ = s.set_nodelay(true);
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf) {
            if counter.fetch_add(1, Ordering::SeqCst) == 60 {
                std::thread::sleep(Duration::from_millis(500));
            }
            if s.write_all(OK).is_err() {
                return;
            }
        }
    });
    let url = format!("http://{addr}/");
    let out = bench(&[
        "http", &url, "--rate", "200", "-c", "2", "-d", "2500ms", "--json",
    ]);
    assert!(out.status.success());
    // Not a terminal: no progress bar, whatever the run's length.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "open");
    let n = v["requests"].as_u64().unwrap();
    // 200/s for 2.5 s, give or take the requests in flight at the end.
    assert!((450..=505).contains(&n), "{v}");
    let p999 = v["latency_us"]["p99_9"].as_u64().unwrap();
    let p99 = v["latency_us"]["p99"].as_u64().unwrap();
    let p50 = v["latency_us"]["p50"].as_u64().unwrap();
    // ~50 requests were due on the stalled connection during the stall; their
    // latency runs from when they were due.
    assert!(p999 >= 400_000, "p99.9 {p999} us: {v}");
    assert!(p99 >= 200_000, "p99 {p99} us: {v}");
    assert!(p50 < 50_000, "p50 {p50} us: {v}");

    // Closed loop against the same server (stall now past): the one slow
    // sample there would be hidden in thousands.
    served.store(0, Ordering::SeqCst);
    let v = bench_json(&["http", &url, "-c", "2", "-n", "4000"]);
    assert!(v["latency_us"]["p99"].as_u64().unwrap() < 200_000, "{v}");
    assert!(v["latency_us"]["max"].as_u64().unwrap() >= 400_000, "{v}");
}

#[test]
fn https_needs_trust_and_insecure_or_cacert_give_it() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let url = format!("https://{}/", pier.https[0]);
    let out = bench(&["http", &url, "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TLS handshake") && err.contains("failed"),
        "{err}"
    );
    // The self-signed certificate is not trusted: the message says what to do.
    assert!(
        err.contains("pass -k") && err.contains("--cacert FILE"),
        "{err}"
    );

    let v = bench_json(&["http", &url, "-k", "-n", "50", "-c", "5"]);
    assert_eq!(v["status"]["200"], 50);
    assert_eq!(v["tls"]["handshakes"], 5);

    // --new-conn: one handshake per request; --resume makes the later ones short.
    let v = bench_json(&["http", &url, "-k", "-n", "40", "-c", "2", "--new-conn"]);
    assert_eq!(
        (v["requests"].as_u64(), v["tls"]["handshakes"].as_u64()),
        (Some(40), Some(40)),
        "{v}"
    );
    assert_eq!(v["tls"]["resumed"], 0);
    let v = bench_json(&[
        "http",
        &url,
        "-k",
        "-n",
        "40",
        "-c",
        "2",
        "--new-conn",
        "--resume",
    ]);
    assert_eq!(v["requests"], 40, "{v}");
    assert!(v["tls"]["resumed"].as_u64().unwrap() >= 30, "{v}");
}

#[test]
fn cacert_and_sni_verify_a_real_chain() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--workers",
        "1",
    ]);
    std::fs::write(pier.root().join("a.txt"), "a").unwrap();
    let port = pier.https[0].port();
    let cacert = cert.to_str().unwrap();
    let v = bench_json(&[
        "http",
        &format!("https://localhost:{port}/a.txt"),
        "--cacert",
        cacert,
        "-n",
        "20",
    ]);
    assert_eq!(v["status"]["200"], 20, "{v}");
    // By IP the name does not match, unless --sni names the host.
    let by_ip = format!("https://127.0.0.1:{port}/a.txt");
    let out = bench(&["http", &by_ip, "--cacert", cacert, "-n", "5"]);
    assert_eq!(out.status.code(), Some(1));
    let v = bench_json(&[
        "http",
        &by_ip,
        "--cacert",
        cacert,
        "--sni",
        "localhost",
        "-n",
        "5",
    ]);
    assert_eq!(v["status"]["200"], 5, "{v}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let out = bench(&["http", "ftp://127.0.0.1/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported scheme"));
    let out = bench(&["http", "http://127.0.0.1:1/", "-H", "Oops"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Name: value"));
    let out = bench(&["http", "http://127.0.0.1:1/", "-d", "soon"]);
    assert_eq!(out.status.code(), Some(2));

    // Nothing listens on a port we just freed.
    let port = common::refused_addr().port();
    let out = bench(&["http", &format!("http://127.0.0.1:{port}/"), "-n", "5"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot connect") && err.contains("refused"),
        "{err}"
    );
    let out = bench(&["tls-stream", &format!("127.0.0.1:{port}"), "--plain"]);
    assert_eq!(out.status.code(), Some(1));
}

/// A TLS (or, with `tls` false, TCP) echo server on its own threads.
fn echo_server(tls: bool) -> SocketAddr {
    let config = tls.then(|| {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(ck.signing_key.serialize_der()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![ck.cert.der().clone()], key)
                .unwrap(),
        )
    });
    serve_raw(move |s| {
        let mut buf = vec![0u8; 65536];
        match &config {
            Some(cfg) => {
                let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, s);
                loop {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if tls.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            None => {
                let mut s = s;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    })
}

#[test]
fn tls_stream_echoes_exact_byte_counts() {
    let addr = echo_server(true);
    let v = bench_json(&[
        "tls-stream",
        &addr.to_string(),
        "-k",
        "--threads",
        "2",
        "--connections",
        "3",
        "--messages",
        "50",
        "--size",
        "3000",
    ]);
    assert_eq!(v["bytes_sent"], 3 * 50 * 3000, "{v}");
    assert_eq!(v["bytes_received"], 3 * 50 * 3000, "{v}");
    assert_eq!(v["per_connection"]["completed"], 3);
    assert_eq!(errors_total(&v), 0);
    assert!(v["mb_per_s"].as_f64().unwrap() > 0.0);

    // Large messages (beyond socket buffers) do not deadlock the echo.
    let out = bench(&[
        "tls-stream",
        &addr.to_string(),
        "-k",
        "-c",
        "2",
        "--messages",
        "4",
        "-s",
        "4000000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("32.0 megabytes sent and received in "),
        "{text}"
    );
    assert!(
        text.contains("MB/s)") && text.contains("per connection: min"),
        "{text}"
    );

    let plain = echo_server(false);
    let v = bench_json(&[
        "tls-stream",
        &plain.to_string(),
        "--plain",
        "-c",
        "4",
        "--messages",
        "10",
        "-s",
        "1000",
    ]);
    assert_eq!(v["bytes_received"], 40_000);
    assert_eq!(v["tls"], false);

    // A run of a few milliseconds says it measured too little to mean much.
    let out = bench(&[
        "tls-stream",
        &plain.to_string(),
        "--plain",
        "--messages",
        "5",
        "-s",
        "100",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("too short") && err.contains("--messages"),
        "{err}"
    );

    // TLS against a plain server is a TLS failure, stated as such.
    let out = bench(&["tls-stream", &plain.to_string(), "-k"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TLS handshake"));
}

fn check_csv(path: &std::path::Path, header_starts: &str, rows: usize) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(header_starts), "{text}");
    assert_eq!(lines.len(), rows + 1, "{text}");
    let width = lines[0].split(',').count();
    lines[1..]
        .iter()
        .map(|l| {
            let fields: Vec<String> = l.split(',').map(str::to_string).collect();
            assert_eq!(fields.len(), width, "{l}");
            fields
        })
        .collect()
}

fn check_svg(path: &std::path::Path, lines: usize, labels: &[&str]) {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    let wide = svg
        .lines()
        .filter(|l| l.starts_with("<polyline") && l.contains("stroke-width=\"2\""))
        .count();
    assert_eq!(wide, 2 * lines, "a line and a legend mark per series");
    for l in labels {
        assert!(svg.contains(l), "{l}");
    }
}

#[test]
fn sweeps_write_csv_and_svg() {
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("http");
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["bench", "sweep", "http"])
        .arg(format!("first=http://{}/", pier.http[0]))
        .arg(format!("second=http://{}/teapot", pier.http[0]))
        .args(["-c", "1,3", "-n", "60", "-o"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = check_csv(
        &dir.path().join("http.csv"),
        "target,url,threads,connections",
        4,
    );
    for r in &rows {
        assert_eq!(r[5], "60", "{r:?}");
        assert!(r[7].parse::<f64>().unwrap() > 0.0);
    }
    assert_eq!(
        rows.iter()
            .map(|r| (r[0].as_str(), r[3].as_str()))
            .collect::<Vec<_>>(),
        vec![
            ("first", "1"),
            ("first", "3"),
            ("second", "1"),
            ("second", "3")
        ]
    );
    // Each target's throughput line, and its p50 and p99 lines beside them.
    check_svg(
        &dir.path().join("http.svg"),
        6,
        &["first", "second p99", "connections"],
    );

    let echo = echo_server(true);
    let prefix = dir.path().join("stream");
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["bench", "sweep", "tls-stream"])
        .arg(echo.to_string())
        .args([
            "-k",
            "--threads",
            "1,2",
            "--connections",
            "1,4",
            "--messages",
            "10",
            "-s",
            "1000",
            "-o",
        ])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = check_csv(&dir.path().join("stream.csv"), "threads,connections", 4);
    for r in &rows {
        let c: u64 = r[1].parse().unwrap();
        assert_eq!(r[5], (c * 10 * 1000).to_string(), "{r:?}");
    }
    check_svg(
        &dir.path().join("stream.svg"),
        2,
        &["1 connection", "4 connections", "threads", "MB/s"],
    );
}

#[test]
fn new_connection_per_request_and_open_loop_use_the_general_engine_correctly() {
    // One request per connection: the server that closes after one answer is
    // then never caught out, and every request costs a connection.
    let addr = serve_raw(|mut s| {
        let mut buf = Vec::new();
        if read_head(&mut s, &mut buf) {
            let _ = s.write_all(OK);
        }
    });
    let url = format!("http://{addr}/");
    let v = bench_json(&["http", &url, "--new-conn", "-n", "60", "-c", "3"]);
    assert_eq!(v["requests"], 60, "{v}");
    assert_eq!(v["status"]["200"], 60);
    assert_eq!(errors_total(&v), 0, "{v}");
    assert_eq!(v["new_conn"], true);

    // Malformed answers and silence, counted the same way as on the fast path.
    let bad = serve_raw(|mut s| {
        let mut buf = Vec::new();
        if read_head(&mut s, &mut buf) {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        }
    });
    let (v, _) = bench_json_unanswered(&[
        "http",
        &format!("http://{bad}/"),
        "--new-conn",
        "-n",
        "12",
        "-c",
        "2",
    ]);
    assert_eq!(v["errors"]["malformed"], 12, "{v}");
    let silent = serve_raw(|mut s| {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf) {}
    });
    let (v, _) = bench_json_unanswered(&[
        "http",
        &format!("http://{silent}/"),
        "--rate",
        "100",
        "-n",
        "6",
        "-c",
        "2",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(v["errors"]["timeout"], 6, "{v}");
    assert_eq!(v["requests"], 0);

    // Open loop with -n: exactly n requests, sent at the rate.
    let pier = Pier::with_config(BENCH_SERVER, &[]);
    let started = Instant::now();
    let v = bench_json(&[
        "http",
        &format!("http://{}/", pier.http[0]),
        "--rate",
        "200",
        "-n",
        "100",
        "-c",
        "4",
    ]);
    assert_eq!(v["requests"], 100, "{v}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450),
        "100 requests at 200/s took {took:?}"
    );
}

#[test]
fn pipelining_depth_writes_a_batch_and_waits_for_all_of_it() {
    // Answers what it has read one response at a time, a moment apart, before
    // reading again, and records how many requests each read held: a client
    // that refilled the pipeline as answers came would show reads of one.
    let per_read = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = per_read.clone();
    let addr = serve_raw(move |mut s| {
        let mut chunk = [0u8; 65536];
        let mut pending = Vec::new();
        loop {
            let n = match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            pending.extend_from_slice(&chunk[..n]);
            let mut count = 0;
            while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                pending.drain(..i + 4);
                count += 1;
            }
            seen.lock().unwrap().push(count);
            for _ in 0..count {
                if s.write_all(OK).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let v = bench_json(&[
        "http",
        &format!("http://{addr}/"),
        "--depth",
        "8",
        "-n",
        "400",
        "-c",
        "2",
    ]);
    assert_eq!(v["requests"], 400, "{v}");
    let reads = per_read.lock().unwrap();
    let total: usize = reads.iter().sum();
    assert_eq!(total, 400);
    assert!(
        reads.iter().all(|&n| n <= 8),
        "never more than a batch outstanding: {reads:?}"
    );
    assert!(
        reads.iter().filter(|&&n| n == 8).count() >= 25,
        "whole batches: {reads:?}"
    );
}

#[test]
fn pier_closing_idle_keep_alive_connections_is_counted() {
    // Pier closes a keep-alive connection idle for 100 ms; at 2 requests/s per
    // connection every other request finds its connection closed.
    let pier = Pier::with_config(
        &BENCH_SERVER.replace(
            "[server]",
            "[http]\nkeepalive_timeout = \"100ms\"\n[server]",
        ),
        &[],
    );
    let v = bench_json(&[
        "http",
        &format!("http://{}/", pier.http[0]),
        "--rate",
        "4",
        "-c",
        "2",
        "-n",
        "8",
    ]);
    let failed = v["errors"]["closed"].as_u64().unwrap() + v["errors"]["reset"].as_u64().unwrap();
    assert_eq!(v["requests"].as_u64().unwrap() + failed, 8, "{v}");
    assert!(failed >= 2, "{v}");
    assert!(v["status"]["200"].as_u64().unwrap() >= 2, "{v}");
}

/// A TLS listener with one route for `site.test` (200) and a 404 for other names.
fn site_server(cert: &std::path::Path, key: &std::path::Path) -> Pier {
    Pier::with_config(
        &format!(
            "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
             tls = {{ cert = \"{}\", key = \"{}\" }}\n\
             [[route]]\nhost = \"site.test\"\nhandler = \"respond\"\nbody = \"site\"\n\
             [[route]]\nhandler = \"respond\"\nstatus = 404\nbody = \"no\"\n",
            cert.display(),
            key.display()
        ),
        &[],
    )
}

/// A self-signed certificate for `site.test` marked CA:TRUE, as
/// `openssl req -x509` makes one: (cert, key) paths.
fn self_signed_ca_cert(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut params = rcgen::CertificateParams::new(vec!["site.test".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.join("site.crt"), dir.join("site.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

#[test]
fn sni_sets_host_unless_a_host_header_is_given_and_an_all_error_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed_ca_cert(dir.path());
    let pier = site_server(&cert, &key);
    let url = format!("https://{}/", pier.https[0]);
    let v = bench_json(&["http", &url, "--sni", "site.test", "-k", "-n", "20"]);
    assert_eq!(v["status"]["200"], 20, "{v}");
    let out = bench(&[
        "http",
        &url,
        "--sni",
        "site.test",
        "-k",
        "-n",
        "20",
        "-H",
        "Host: other.test",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("every answer from") && err.contains("20 × 404"),
        "{err}"
    );
}

#[test]
fn cacert_trusts_the_self_signed_certificate_it_holds_as_curl_does() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed_ca_cert(dir.path());
    let pier = site_server(&cert, &key);
    let url = format!("https://{}/", pier.https[0]);
    let cacert = cert.to_str().unwrap();
    let v = bench_json(&[
        "http",
        &url,
        "--sni",
        "site.test",
        "--cacert",
        cacert,
        "-n",
        "10",
    ]);
    assert_eq!(v["status"]["200"], 10, "{v}");
    // The name is still checked.
    let out = bench(&[
        "http",
        &url,
        "--sni",
        "other.test",
        "--cacert",
        cacert,
        "-n",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(1));
}
