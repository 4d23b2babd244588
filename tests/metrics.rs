//! The admin listener against a real `pier` process: exact counts on `/metrics`
//! after known traffic, TLS handshake results, `/status`, and the loopback rule.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::{connect_tls, recording_client, tls_get};
use common::{connect, get, Pier, Reader};

const CONFIG: &str = r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/fixed"
handler = "respond"
status = 200
body = "Hello, World!"
[admin]
listen = "127.0.0.1:0"
"#;

/// One admin request; returns the status and body.
fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let r = get(
        admin,
        &format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n"),
    );
    (r.status, String::from_utf8(r.body).unwrap())
}

/// The value of one sample line (`name{labels}`) in a scrape.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// Scrapes until every `(series, value)` holds or two seconds pass; workers
/// finish counting a moment after the client has seen its answer.
fn scrape_until(admin: SocketAddr, want: &[(&str, u64)]) -> String {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let (status, text) = admin_get(admin, "/metrics");
        assert_eq!(status, 200);
        let all = want.iter().all(|(s, v)| sample(&text, s) == Some(*v));
        if all || Instant::now() > deadline {
            for (s, v) in want {
                assert_eq!(sample(&text, s), Some(*v), "{s} in\n{text}");
            }
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn metrics_count_requests_by_class_and_handler_exactly() {
    let pier = Pier::with_config(CONFIG, &[]);
    let admin = pier.admin.expect("admin listener on");
    let mut sent_bytes = 0u64;
    let mut body_bytes = 0u64;
    for i in 0..10 {
        let path = if i % 10 < 7 { "/fixed" } else { "/missing" };
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        sent_bytes += req.len() as u64;
        let r = get(pier.addr(), &req);
        assert_eq!(r.status, if path == "/fixed" { 200 } else { 404 });
        body_bytes += r.body.len() as u64;
    }
    let text = scrape_until(
        admin,
        &[
            ("pier_requests_total{handler=\"respond\",class=\"2xx\"}", 7),
            ("pier_requests_total{handler=\"none\",class=\"4xx\"}", 3),
            ("pier_requests_total{handler=\"static\",class=\"2xx\"}", 0),
            ("pier_requests_total{handler=\"error\",class=\"4xx\"}", 0),
            ("pier_connections_accepted_total", 10),
            ("pier_connections_open", 0),
            ("pier_received_bytes_total", sent_bytes),
            ("pier_workers", 2),
            ("pier_connections_shed_total", 0),
            ("pier_log_lines_dropped_total", 0),
            // Durations by route (its configured prefix) and status class;
            // requests no route matched share the label `none`.
            (
                "pier_request_duration_seconds_count{route=\"/fixed\",class=\"2xx\"}",
                7,
            ),
            (
                "pier_request_duration_seconds_bucket{route=\"/fixed\",class=\"2xx\",le=\"+Inf\"}",
                7,
            ),
            (
                "pier_request_duration_seconds_count{route=\"none\",class=\"4xx\"}",
                3,
            ),
            ("pier_build_info{version=\"0.1.0\"}", 1),
        ],
    );
    let out = sample(&text, "pier_sent_bytes_total").unwrap();
    assert!(out > body_bytes, "{out} <= {body_bytes}");
    assert!(text.contains("# TYPE pier_upstream_latency_seconds histogram"));
    // Process metrics under the names Prometheus's client libraries use.
    let fds = sample(&text, "process_open_fds").expect("process_open_fds");
    assert!(fds > 5, "{fds}");
    let rss = sample(&text, "process_resident_memory_bytes").expect("RSS");
    assert!(rss > 1 << 20, "{rss}");
    assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
    assert!(text.contains("\nprocess_start_time_seconds "), "{text}");
}

#[test]
fn refused_requests_count_as_error_and_open_connections_show() {
    let pier = Pier::with_config(CONFIG, &[]);
    let admin = pier.admin.unwrap();
    let r = get(pier.addr(), "GET /fixed HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 400, "HTTP/1.1 without Host");
    let mut idle = Reader::new(connect(pier.addr()));
    idle.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.response(false).unwrap().status, 200);
    scrape_until(
        admin,
        &[
            ("pier_requests_total{handler=\"error\",class=\"4xx\"}", 1),
            ("pier_requests_total{handler=\"respond\",class=\"2xx\"}", 1),
            ("pier_connections_open", 1),
        ],
    );
    drop(idle);
    scrape_until(admin, &[("pier_connections_open", 0)]);
}

#[test]
fn tls_handshakes_count_full_resumed_and_failed() {
    let config = r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[listener.tls]
self_signed = true
[[route]]
path = "/fixed"
handler = "respond"
status = 200
body = "ok"
[admin]
listen = "127.0.0.1:0"
"#;
    let pier = Pier::with_config(config, &[]);
    let admin = pier.admin.unwrap();
    let (client, _) = recording_client(true);
    let mut resuming = rustls::ClientConfig::clone(&client);
    resuming.resumption = rustls::client::Resumption::in_memory_sessions(8);
    let resuming = std::sync::Arc::new(resuming);

    let mut c = connect_tls(pier.https[0], "localhost", &resuming).unwrap();
    assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
    scrape_until(
        admin,
        &[
            ("pier_tls_handshakes_total{result=\"full\"}", 1),
            ("pier_tls_handshakes_total{result=\"resumed\"}", 0),
            ("pier_tls_handshakes_total{result=\"failed\"}", 0),
            ("pier_requests_total{handler=\"respond\",class=\"2xx\"}", 1),
        ],
    );
    let mut c = connect_tls(pier.https[0], "localhost", &resuming).unwrap();
    assert_eq!(tls_get(&mut c, "/fixed").unwrap().status, 200);
    assert_eq!(
        c.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );

    // Plain HTTP on the TLS port is not a ClientHello: it is answered 400 and
    // counted as a failure of its own cause.
    let mut plain = Reader::new(connect(pier.https[0]));
    plain.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(plain.response(false).map(|r| r.status), Some(400));
    // A record that is not a valid ClientHello is a protocol failure.
    let mut garbage = Reader::new(connect(pier.https[0]));
    garbage.send(&[0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0, 0, 0, 0]);
    assert!(garbage.response(false).is_none());
    scrape_until(
        admin,
        &[
            ("pier_tls_handshakes_total{result=\"full\"}", 1),
            ("pier_tls_handshakes_total{result=\"resumed\"}", 1),
            ("pier_tls_handshakes_total{result=\"failed\"}", 2),
            (
                "pier_tls_handshakes_by_version_total{version=\"TLSv1.3\",kind=\"full\"}",
                1,
            ),
            (
                "pier_tls_handshakes_by_version_total{version=\"TLSv1.3\",kind=\"resumed\"}",
                1,
            ),
            ("pier_tls_handshake_failures_total{cause=\"plain_http\"}", 1),
            ("pier_tls_handshake_failures_total{cause=\"protocol\"}", 1),
        ],
    );
}

#[test]
fn status_page_lists_workers_and_listeners() {
    let pier = Pier::with_config(CONFIG, &[]);
    let admin = pier.admin.unwrap();
    assert_eq!(
        get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let (status, page) = admin_get(admin, "/status");
    assert_eq!(status, 200);
    assert!(page.contains("workers    2"), "{page}");
    assert!(page.contains(&format!("http://{}", pier.addr())), "{page}");
    let all = page
        .lines()
        .find(|l| l.trim_start().starts_with("all"))
        .unwrap();
    let cols: Vec<&str> = all.split_whitespace().collect();
    assert_eq!(&cols[2..], ["1", "1"], "{page}");
    assert_eq!(admin_get(admin, "/nothing").0, 404);
    let post = get(
        admin,
        "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(post.status, 405);
}

#[test]
fn admin_is_off_by_default() {
    let pier = Pier::with_config(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\nstatus = 204\n",
        &[],
    );
    assert_eq!(pier.admin, None);
}

#[test]
fn admin_flag_serves_metrics_from_the_command_line() {
    let pier = Pier::with_config(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\nstatus = 204\n",
        &["--admin", "127.0.0.1:0"],
    );
    let admin = pier.admin.expect("--admin turns the listener on");
    assert_eq!(
        get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        204
    );
    scrape_until(
        admin,
        &[("pier_requests_total{handler=\"respond\",class=\"2xx\"}", 1)],
    );
}

#[test]
fn non_loopback_admin_address_is_refused_with_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args([
            "serve",
            "--no-tls",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "0.0.0.0:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("command line: admin.listen"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n\n[admin]\nlisten = \"0.0.0.0:9090\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pier.toml:8: admin.listen"), "{err}");
    assert!(err.contains("allow_remote"), "{err}");
}

#[test]
fn proxied_requests_count_upstream_requests_errors_and_latency() {
    let mut up = common::upstream::Upstream::start(|r| {
        if r.target == "/found" {
            common::upstream::ok("yes")
        } else {
            common::upstream::Reply::Http(404, Vec::new(), b"no".to_vec())
        }
    });
    let url = format!("http://{}", up.addr);
    let pier = Pier::embedded(&[
        "--no-tls",
        "--listen",
        "127.0.0.1:0",
        "--proxy",
        &url,
        "--admin",
        "127.0.0.1:0",
    ]);
    let admin = pier.admin.unwrap();
    let req = |path: &str| {
        get(
            pier.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"),
        )
    };
    assert_eq!(req("/found").status, 200);
    assert_eq!(req("/lost").status, 404);
    up.stop();
    assert!(req("/found").status >= 500);
    scrape_until(
        admin,
        &[
            ("pier_requests_total{handler=\"proxy\",class=\"2xx\"}", 1),
            ("pier_requests_total{handler=\"proxy\",class=\"4xx\"}", 1),
            ("pier_requests_total{handler=\"proxy\",class=\"5xx\"}", 1),
            ("pier_upstream_requests_total", 3),
            ("pier_upstream_errors_total", 1),
            ("pier_upstream_latency_seconds_count", 2),
            ("pier_upstream_latency_seconds_bucket{le=\"+Inf\"}", 2),
        ],
    );
}
