//! The access log against a real `pier` process: one line per request, flushed on
//! the interval and at shutdown, JSON that parses, TLS and upstream fields,
//! SIGUSR1 reopen, and a stalled sink that costs lines, not latency.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::tls::{connect_tls, recording_client, tls_get};
use common::upstream::{ok, Upstream};
use common::{get, Pier};
use rustix::process::Signal;

fn config(format: &str, flush_interval: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
[listener.tls]
self_signed = true
[[route]]
path = "/fixed"
handler = "respond"
status = 200
body = "Hello, World!"
[access_log]
path = "{{dir}}/access.log"
format = "{format}"
flush_interval = "{flush_interval}"
"#
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until `path` holds `n` lines (or three seconds pass) and returns them.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let got = lines(path);
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn request(pier: &Pier, path: &str) -> u16 {
    get(
        pier.addr(),
        &format!(
            "GET {path} HTTP/1.1\r\nHost: t\r\nUser-Agent: probe/1\r\nReferer: http://r/\r\n\r\n"
        ),
    )
    .status
}

#[test]
fn every_request_is_logged_once_and_flushed_at_shutdown() {
    // The interval is far away: only the drain on SIGTERM writes the lines.
    let mut pier = Pier::with_config(&config("combined", "1h"), &[]);
    let log = pier.root().join("access.log");
    for i in 0..20 {
        let path = if i % 4 == 0 { "/missing" } else { "/fixed" };
        request(&pier, &format!("{path}?n={i}"));
    }
    pier.signal(Signal::TERM);
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
    let got = lines(&log);
    assert_eq!(got.len(), 20, "{got:#?}");
    for i in 0..20 {
        let (path, status) = if i % 4 == 0 {
            ("/missing", 404)
        } else {
            ("/fixed", 200)
        };
        let request = format!("\"GET {path}?n={i} HTTP/1.1\" {status} ");
        let line = got
            .iter()
            .find(|l| l.contains(&request))
            .unwrap_or_else(|| panic!("no line with {request} in {got:#?}"));
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        assert!(
            line.contains("\"http://r/\" \"probe/1\" - - - - - "),
            "{line}"
        );
    }
}

#[test]
fn json_lines_parse_and_carry_tls_fields() {
    let pier = Pier::with_config(&config("json", "50ms"), &[]);
    let log = pier.root().join("access.log");
    for _ in 0..3 {
        assert_eq!(request(&pier, "/fixed"), 200);
    }
    let (client, _) = recording_client(true);
    let mut tls = connect_tls(pier.https[0], "localhost", &client).unwrap();
    assert_eq!(tls_get(&mut tls, "/fixed?tls").unwrap().status, 200);
    let got = wait_lines(&log, 4);
    assert_eq!(got.len(), 4, "{got:#?}");
    for line in &got {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in [
            "timestamp",
            "client",
            "client_port",
            "method",
            "target",
            "protocol",
            "status",
            "bytes",
            "duration_ms",
            "referer",
            "user_agent",
            "tls_version",
            "tls_cipher",
            "sni",
            "upstream",
            "upstream_time_ms",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {line}");
        }
        assert_eq!(v["client"], "127.0.0.1");
        assert_eq!(v["status"], 200);
        assert_eq!(v["method"], "GET");
        // The body only, as nginx's $body_bytes_sent: not the head.
        assert_eq!(v["bytes"], 13, "{line}");
        if v["target"] == "/fixed?tls" {
            assert_eq!(v["sni"], "localhost");
            assert_eq!(v["tls_version"], "TLSv1.3");
            let cipher = v["tls_cipher"].as_str().unwrap();
            assert!(
                [
                    "TLS_AES_256_GCM_SHA384",
                    "TLS_AES_128_GCM_SHA256",
                    "TLS_CHACHA20_POLY1305_SHA256"
                ]
                .contains(&cipher),
                "{line}"
            );
        } else {
            assert_eq!(v["user_agent"], "probe/1");
            assert_eq!(v["tls_version"], serde_json::Value::Null);
        }
    }
    assert_eq!(got.iter().filter(|l| l.contains("/fixed?tls")).count(), 1);
}

#[test]
fn access_log_flag_logs_body_bytes_of_the_embedded_default() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("flag.log");
    let log_arg = log.to_str().unwrap().to_string();
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--no-tls",
        "--access-log",
        &log_arg,
    ]);
    std::fs::write(pier.root().join("page.html"), vec![b'x'; 335]).unwrap();
    let got = get(pier.addr(), "GET /page.html HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((got.status, got.body.len()), (200, 335));
    let head = get(pier.addr(), "HEAD /page.html HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(head.status, 200);
    let mut s = common::connect(pier.addr());
    // A 100 Continue before the answer is head too, not body.
    std::io::Write::write_all(
        &mut s,
        b"POST /page.html HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
    )
    .unwrap();
    let mut r = common::Reader::new(s);
    assert_eq!(r.response(false).unwrap().status, 100);
    r.send(b"ok");
    assert_eq!(r.response(false).unwrap().status, 405);
    let plain = get(
        pier.addr(),
        "POST /page.html HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok",
    );
    assert_eq!(plain.status, 405);
    let lines = wait_lines(&log, 4);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    // Workers hand over their lines separately: count, do not rely on order.
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    // combined is the default format; the bytes field is $body_bytes_sent.
    assert_eq!(
        count("\"GET /page.html HTTP/1.1\" 200 335 "),
        1,
        "{lines:#?}"
    );
    assert_eq!(
        count("\"HEAD /page.html HTTP/1.1\" 200 0 "),
        1,
        "{lines:#?}"
    );
    // Neither the 405's head nor the 100 Continue before it count.
    let body = format!("\"POST /page.html HTTP/1.1\" 405 {} ", plain.body.len());
    assert_eq!(count(&body), 2, "{body} in {lines:#?}");
}

#[test]
fn access_log_format_flag_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("flag.json");
    let log_arg = log.to_str().unwrap().to_string();
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--no-tls",
        "--access-log",
        &log_arg,
        "--access-log-format",
        "json",
    ]);
    std::fs::write(pier.root().join("caf\u{e9}.txt"), b"hello").unwrap();
    let got = get(
        pier.addr(),
        "GET /caf%C3%A9.txt HTTP/1.1\r\nHost: t\r\nUser-Agent: caf\u{e9}/1\r\n\r\n",
    );
    assert_eq!(got.status, 200);
    let lines = wait_lines(&log, 1);
    // UTF-8 stays text, not one escape per byte.
    assert!(
        lines[0].contains("\"user_agent\":\"caf\u{e9}/1\""),
        "{lines:#?}"
    );
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["user_agent"], "caf\u{e9}/1");
    assert_eq!(v["bytes"], 5);
    assert!(v["timestamp"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn sigusr1_reopens_the_file_after_rotation() {
    let pier = Pier::with_config(&config("combined", "50ms"), &[]);
    let log = pier.root().join("access.log");
    let rotated = pier.root().join("access.log.1");
    for _ in 0..3 {
        request(&pier, "/fixed?before");
    }
    assert_eq!(wait_lines(&log, 3).len(), 3);
    std::fs::rename(&log, &rotated).unwrap();
    pier.signal(Signal::USR1);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !log.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.exists(), "the log was not reopened at its path");
    for _ in 0..4 {
        request(&pier, "/fixed?after");
    }
    let after = wait_lines(&log, 4);
    assert_eq!(after.len(), 4, "{after:#?}");
    assert!(after.iter().all(|l| l.contains("/fixed?after")));
    let before = lines(&rotated);
    assert_eq!(before.len(), 3, "{before:#?}");
    assert!(before.iter().all(|l| l.contains("/fixed?before")));
}

#[test]
fn proxied_requests_carry_upstream_address_and_time() {
    let app = Upstream::start(|_| ok("from app"));
    let dead = common::refused_addr();
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{app}" }}]
[[upstream]]
name = "dead"
servers = [{{ address = "{dead}" }}]
retries = 0
[[route]]
path = "/down"
handler = "proxy"
upstream = "dead"
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
[access_log]
path = "{{dir}}/access.log"
format = "json"
flush_interval = "50ms"
"#,
        app = app.addr
    );
    let pier = Pier::with_config(&config, &[]);
    let log = pier.root().join("access.log");
    let posted = get(
        pier.addr(),
        "POST /upload?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: probe/1\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(posted.status, 200);
    assert_eq!(request(&pier, "/down"), 502);
    let got = wait_lines(&log, 2);
    assert_eq!(got.len(), 2, "{got:#?}");
    let line = |target: &str| -> serde_json::Value {
        got.iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["target"] == target)
            .unwrap_or_else(|| panic!("no line for {target} in {got:#?}"))
    };
    let up = line("/upload?x=1");
    assert_eq!(up["method"], "POST");
    assert_eq!(up["status"], 200);
    assert_eq!(up["user_agent"], "probe/1");
    assert_eq!(up["upstream"], app.addr.to_string());
    assert!(up["upstream_time_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(up["bytes"], "from app".len() as u64);
    let down = line("/down");
    assert_eq!(down["status"], 502);
    assert_eq!(down["upstream"], dead.to_string());
}

/// Keep-alive connections of the stalled-sink test's client, each sending
/// `BATCH` requests per batch, `ROUNDS` batches per server.
const LOAD_CLIENTS: usize = 4;
const BATCH: usize = 75;
const ROUNDS: usize = 20;

/// Two workers, small log buffers (so a stalled writer fills the pipe and the
/// queue after about 1500 lines), the access log at `sink`, and the admin listener.
fn load_config(sink: &Path) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "respond"
status = 200
body = "Hello, World!"
[admin]
listen = "127.0.0.1:0"
[access_log]
path = "{}"
buffer = "8KiB"
flush_interval = "50ms"
"#,
        sink.display()
    )
}

/// Keep-alive connections to one server that send requests in batches.
struct Clients(Vec<common::Reader>);

impl Clients {
    fn new(pier: &Pier) -> Clients {
        Clients(
            (0..LOAD_CLIENTS)
                .map(|_| common::Reader::new(common::connect(pier.addr())))
                .collect(),
        )
    }

    /// `BATCH` GETs on every connection at once; the latency of each request,
    /// measured at the client.
    fn batch(&mut self) -> Vec<Duration> {
        std::thread::scope(|scope| {
            let clients: Vec<_> = self
                .0
                .iter_mut()
                .enumerate()
                .map(|(c, r)| {
                    scope.spawn(move || {
                        let mut took = Vec::with_capacity(BATCH);
                        for i in 0..BATCH {
                            let req = format!("GET /load?c={c}&i={i} HTTP/1.1\r\nHost: t\r\n\r\n");
                            let started = Instant::now();
                            r.send(req.as_bytes());
                            let resp = r.response(false).expect("a response");
                            took.push(started.elapsed());
                            assert_eq!(resp.status, 200);
                        }
                        took
                    })
                })
                .collect();
            clients
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        })
    }
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99).div_ceil(100) - 1]
}

/// `pier_log_lines_dropped_total` from the admin listener.
fn dropped_lines(pier: &Pier) -> u64 {
    let resp = get(
        pier.admin.expect("admin listener"),
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    );
    String::from_utf8_lossy(&resp.body)
        .lines()
        .find_map(|l| {
            l.strip_prefix("pier_log_lines_dropped_total ")?
                .parse()
                .ok()
        })
        .expect("pier_log_lines_dropped_total in /metrics")
}

#[test]
fn stalled_sink_drops_counted_lines_without_slowing_requests() {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;

    // Baseline: the log goes to a plain file.
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("access.log");
    let baseline = Pier::with_config(&load_config(&file), &[]);
    // Stalled: a FIFO whose reader is open (so Pier's open succeeds) but is not
    // read until the load is over; the pipe fills and the writer thread blocks.
    let fifo = files.path().join("stalled.log");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
    let reader = rustix::fs::open(&fifo, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()).unwrap();
    let mut reader = std::fs::File::from(reader);
    let stalled = Pier::with_config(&load_config(&fifo), &[]);

    // Batches alternate between the two servers, so a burst of noise on this
    // shared two-core machine (where the other tests of this file run at the
    // same time) falls on both sides alike; each side's p99 is taken over all
    // its batches. The 20% bound gets an absolute floor of 2 ms for what noise
    // remains.
    let (mut base_load, mut stalled_load) = (Clients::new(&baseline), Clients::new(&stalled));
    let mut sent = (base_load.batch().len(), stalled_load.batch().len()); // warm-up
    let (mut base_took, mut stalled_took) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut base_batch = || base_took.extend(base_load.batch());
        if round % 2 == 0 {
            base_batch();
            stalled_took.extend(stalled_load.batch());
        } else {
            stalled_took.extend(stalled_load.batch());
            base_batch();
        }
    }
    sent.0 += base_took.len();
    sent.1 += stalled_took.len();
    // Past a flush interval every worker has handed over (or dropped) its last lines.
    std::thread::sleep(Duration::from_millis(300));

    let base_dropped = dropped_lines(&baseline) as usize;
    let base_written = wait_lines(&file, sent.0 - base_dropped).len();
    assert_eq!(base_written + base_dropped, sent.0, "file sink");

    let dropped = dropped_lines(&stalled) as usize;
    assert!(dropped > 0, "a stalled sink must cost lines");
    // Now drain the FIFO: what was queued reaches it, and with the drops it
    // accounts for every request.
    let mut written = 0;
    let mut chunk = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while written + dropped < sent.1 && Instant::now() < deadline {
        match reader.read(&mut chunk) {
            Ok(n) => written += chunk[..n].iter().filter(|&&b| b == b'\n').count(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("reading the FIFO: {e}"),
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    if let Ok(n) = reader.read(&mut chunk) {
        written += chunk[..n].iter().filter(|&&b| b == b'\n').count();
    }
    assert_eq!(
        written + dropped,
        sent.1,
        "{written} lines written and {dropped} dropped for {} requests",
        sent.1
    );
    assert_eq!(
        dropped_lines(&stalled) as usize,
        dropped,
        "no drop after the load"
    );

    let (base, slow) = (p99(base_took), p99(stalled_took));
    let bound = base.mul_f64(1.2) + Duration::from_millis(2);
    eprintln!(
        "p99: file sink {base:?}, stalled sink {slow:?}; \
         stalled: {dropped} lines dropped, {written} written"
    );
    assert!(
        slow <= bound,
        "p99 with a stalled log {slow:?} above {bound:?} (file sink {base:?})"
    );
}
