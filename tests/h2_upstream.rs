//! Upstream groups with `protocol = "h2"`: a real `pier` in front of an HTTP/2
//! origin written with the `h2` crate (tests/common/h2_origin.rs), spoken to
//! over HTTP/1.1: multiplexed pooled connections, the stream cap, request
//! bodies under flow control, response trailers, `grpc-timeout` and
//! cancellation relayed as RST_STREAM, ALPN over TLS.

mod common;
#[path = "common/h2_origin.rs"]
mod h2_origin;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::Pki;
use common::{connect, get, Pier};
use h2_origin::H2Origin;

fn h2_config(addr: std::net::SocketAddr, upstream_extra: &str) -> String {
    h2_config_route(addr, upstream_extra, "")
}

fn h2_config_route(addr: std::net::SocketAddr, upstream_extra: &str, route_extra: &str) -> String {
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "grpc"
protocol = "h2"
servers = [{{ address = "{addr}" }}]
{upstream_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "grpc"
{route_extra}
"#
    )
}

/// Sends `raw` (which asks for `Connection: close`) and reads until the close.
fn exchange_raw(pier: &Pier, raw: &[u8]) -> String {
    let mut s = connect(pier.addr());
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits up to 3 s for the origin to note a reset of `path`.
fn saw_reset(origin: &H2Origin, path: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if origin.resets().iter().any(|p| p == path) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn requests_share_one_pooled_connection_with_forwarding_fields() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    for i in 0..5 {
        let r = get(
            pier.addr(),
            &format!("GET /a/{i} HTTP/1.1\r\nHost: app.test\r\nTE: trailers\r\n\r\n"),
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-origin"), Some("h2"));
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            format!("GET /a/{i} app.test te=trailers")
        );
    }
    assert_eq!(
        origin.connections(),
        1,
        "one connection carries every stream"
    );
    let (uri, headers) = &origin.requests()[0];
    assert_eq!(uri, "http://app.test/a/0");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert!(headers.get("connection").is_none());
}

#[test]
fn streams_beyond_max_streams_open_another_connection() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, "max_streams = 2"), &[]);
    let addr = pier.addr();
    let clients: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                get(
                    addr,
                    "GET /slow/400 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                )
            })
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200);
        // No length from the origin: chunked to the client.
        assert_eq!(r.body, b"4\r\nslow\r\n0\r\n\r\n");
    }
    assert_eq!(
        origin.connections(),
        3,
        "six streams at once, two per connection"
    );
}

#[test]
fn request_body_streams_up_and_response_trailers_come_down() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    // 1 MiB in 16 KiB chunks: many times the origin's 64 KiB stream window,
    // so it moves only as the origin grants window.
    let mut raw = b"POST /upload HTTP/1.1\r\nHost: a\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..64 {
        raw.extend_from_slice(b"4000\r\n");
        raw.extend_from_slice(&[b'x'; 0x4000]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let text = exchange_raw(&pier, &raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("got 1048576 bytes"), "{text}");
    assert!(
        text.contains("\r\n0\r\nx-body-len: 1048576\r\n\r\n"),
        "the trailer ends the chunked body: {text}"
    );
}

#[test]
fn grpc_timeout_resets_the_stream_and_answers_deadline_exceeded() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    let started = Instant::now();
    let text = exchange_raw(
        &pier,
        b"POST /slow/5000 HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: application/grpc\r\ngrpc-timeout: 300m\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("grpc-status: 4\r\n"), "{text}");
    assert!(saw_reset(&origin, "/slow/5000"), "{:?}", origin.resets());
}

#[test]
fn client_going_away_resets_the_upstream_stream() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    let mut s = connect(pier.addr());
    s.write_all(b"GET /ticks HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    drop(s);
    assert!(saw_reset(&origin, "/ticks"), "{:?}", origin.resets());
}

#[test]
fn trailers_only_answer_is_relayed_as_a_head() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    let r = get(
        pier.addr(),
        "POST /trailers-only HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("5"));
    assert_eq!(r.header("grpc-message"), Some("not found"));
    assert!(r.body.is_empty());
}

#[test]
fn unreachable_h2_server_is_502_and_grpc_calls_get_unavailable() {
    let origin = H2Origin::start();
    let addr = origin.addr;
    drop(origin);
    let pier = Pier::with_config(&h2_config(addr, "retries = 0"), &[]);
    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 502);
    let r = get(
        pier.addr(),
        "POST /x HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("14"));
}

#[test]
fn balances_over_servers_skips_a_dead_one_and_checks_health_over_h2() {
    let (a, b) = (H2Origin::start(), H2Origin::start());
    let dead = common::refused_addr();
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "grpc"
protocol = "h2"
servers = [{{ address = "{}" }}, {{ address = "{}" }}, {{ address = "{dead}" }}]
health_check = {{ path = "/health", interval = "50ms", rise = 1, fall = 1 }}
retries = 0
[[route]]
path = "/"
handler = "proxy"
upstream = "grpc"
"#,
        a.addr, b.addr
    );
    let pier = Pier::with_config(&config, &[]);
    // The health checks reach the live servers over HTTP/2 and take the dead one out.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until
        && !(a.requests().iter().any(|(u, _)| u.ends_with("/health"))
            && b.requests().iter().any(|(u, _)| u.ends_with("/health")))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    for i in 0..8 {
        let r = get(
            pier.addr(),
            &format!("GET /r/{i} HTTP/1.1\r\nHost: a\r\n\r\n"),
        );
        assert_eq!(r.status, 200, "request {i}");
    }
    let served = |o: &H2Origin| {
        o.requests()
            .iter()
            .filter(|(u, _)| u.contains("/r/"))
            .count()
    };
    assert_eq!((served(&a), served(&b)), (4, 4));
}

#[test]
fn tls_upstream_speaks_h2_only_when_the_server_picks_it_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "h2 test ca");
    let (cert, key) = pki.server("origin", "localhost", &["localhost"], None);
    let ca = pki.ca_path();
    let tls = format!("tls = {{ sni = \"localhost\", ca = \"{}\" }}", ca.display());

    let origin = H2Origin::start_tls(&cert, &key, &["h2"]);
    let pier = Pier::with_config(&h2_config(origin.addr, &tls), &[]);
    let r = get(pier.addr(), "GET /t HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).starts_with("GET /t a"));
    let (uri, _) = &origin.requests()[0];
    assert!(uri.starts_with("https://"), "{uri}");

    let http1_only = H2Origin::start_tls(&cert, &key, &["http/1.1"]);
    let pier = Pier::with_config(&h2_config(http1_only.addr, &tls), &[]);
    let r = get(pier.addr(), "GET /t HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 502);
    assert!(http1_only.requests().is_empty());
}

#[test]
fn protocol_config_errors_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let check = |extra: &str| {
        let config = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"a\"\nservers = [{{ address = \"127.0.0.1:1\" }}]\n{extra}\n"
        );
        std::fs::write(&path, config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_pier"))
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = check("protocol = \"h3\"");
    assert!(
        err.contains(&format!("{}:6: upstream[1].protocol", path.display())) && err.contains("h3"),
        "{err}"
    );
    let err = check("max_streams = 10");
    assert!(
        err.contains("upstream[1].max_streams") && err.contains("protocol = \"h2\""),
        "{err}"
    );
    let err = check("protocol = \"h2\"\nmax_streams = 0");
    assert!(err.contains("upstream[1].max_streams"), "{err}");
}

#[test]
fn error_pages_replace_upstream_5xx_and_own_errors_but_not_grpc_answers() {
    let origin = H2Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("50x.html");
    std::fs::write(&page, "<h1>down for a moment</h1>").unwrap();
    let route = format!(
        "error_pages = {{ 502 = \"{0}\", 503 = \"{0}\" }}",
        page.display()
    );
    let pier = Pier::with_config(&h2_config_route(origin.addr, "", &route), &[]);
    let r = get(pier.addr(), "GET /fail HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 503);
    assert_eq!(r.body, b"<h1>down for a moment</h1>");
    // A gRPC call's status is the upstream's, relayed as sent.
    let r = get(
        pier.addr(),
        "POST /trailers-only HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.header("grpc-status"), Some("5"));

    let addr = origin.addr;
    drop(origin);
    let pier = Pier::with_config(&h2_config_route(addr, "retries = 0", &route), &[]);
    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 502);
    assert_eq!(r.body, b"<h1>down for a moment</h1>");
}

/// What an HTTP/2 client got back: status, body and trailers.
struct H2Answer {
    status: u16,
    head: http::HeaderMap,
    body: Vec<u8>,
    trailers: http::HeaderMap,
}

/// POSTs `body` to `path` over h2 with prior knowledge (the `h2` crate as the
/// client), ending the request with `trailers`.
fn h2_post_with_trailers(
    addr: std::net::SocketAddr,
    path: &str,
    length: bool,
    body: &[u8],
    trailers: &[(&str, &str)],
) -> H2Answer {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut send = send.ready().await.unwrap();
        let mut req = http::Request::post(format!("http://{addr}{path}"));
        if length {
            req = req.header("content-length", body.len());
        }
        let (resp, mut out) = send.send_request(req.body(()).unwrap(), false).unwrap();
        out.send_data(bytes::Bytes::copy_from_slice(body), false)
            .unwrap();
        let mut map = http::HeaderMap::new();
        for (n, v) in trailers {
            map.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        out.send_trailers(map).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), resp)
            .await
            .expect("an answer within 10 s")
            .unwrap();
        let status = resp.status().as_u16();
        let head = resp.headers().clone();
        let mut recv = resp.into_body();
        let mut body = Vec::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.unwrap();
            let _ = recv.flow_control().release_capacity(chunk.len());
            body.extend_from_slice(&chunk);
        }
        let trailers = recv.trailers().await.unwrap().unwrap_or_default();
        H2Answer {
            status,
            head,
            body,
            trailers,
        }
    })
}

#[test]
fn request_trailers_of_an_h2_client_are_relayed_to_h2_and_chunked_http1_upstreams() {
    let origin = H2Origin::start();
    let http1 = common::upstream::Upstream::start(|_| common::upstream::ok("taken"));
    let pier = Pier::with_config(
        &format!(
            r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[upstream]]
name = "h2origin"
protocol = "h2"
servers = [{{ address = "{}" }}]
[[upstream]]
name = "h1origin"
servers = [{{ address = "{}" }}]
[[route]]
path = "/upload"
handler = "proxy"
upstream = "h2origin"
[[route]]
path = "/"
handler = "proxy"
upstream = "h1origin"
# A response filter wraps the session: trailers still go up.
[route.response_headers]
set = {{ "X-Filtered" = "yes" }}
"#,
            origin.addr, http1.addr
        ),
        &[],
    );
    // End-to-end trailers go up; one about routing (`host`) does not.
    let trailers = [
        ("x-checksum", "abc123"),
        ("grpc-tag", "7"),
        ("host", "elsewhere"),
    ];
    let got = h2_post_with_trailers(pier.addr(), "/upload", false, b"hello", &trailers);
    assert_eq!(got.status, 200);
    assert_eq!(String::from_utf8_lossy(&got.body), "got 5 bytes");
    let t = &got.trailers;
    assert_eq!(t.get("x-body-len").unwrap(), "5", "{t:?}");
    assert_eq!(
        t.get("x-echo-x-checksum").map(|v| v.as_bytes()),
        Some(&b"abc123"[..]),
        "{t:?}"
    );
    assert_eq!(
        t.get("x-echo-grpc-tag").map(|v| v.as_bytes()),
        Some(&b"7"[..]),
        "{t:?}"
    );
    assert!(t.get("x-echo-host").is_none(), "{t:?}");

    // To HTTP/1.1 a body of unknown length goes chunked, trailers after its
    // last chunk.
    let got = h2_post_with_trailers(pier.addr(), "/up", false, b"hello", &trailers);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"taken"[..]));
    assert_eq!(got.head.get("x-filtered").unwrap(), "yes");
    let reqs = http1.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].chunked, "{:?}", reqs[0].head);
    assert_eq!(reqs[0].body, b"hello");
    assert_eq!(
        reqs[0].trailers,
        vec![
            ("x-checksum".to_string(), "abc123".to_string()),
            ("grpc-tag".to_string(), "7".to_string())
        ]
    );
    // With a length there is no place for them: dropped, the body intact.
    let got = h2_post_with_trailers(pier.addr(), "/up", true, b"hello", &trailers);
    assert_eq!(got.status, 200);
    let reqs = http1.requests();
    assert_eq!(reqs.len(), 2);
    assert!(!reqs[1].chunked);
    assert_eq!(reqs[1].body, b"hello");
    assert!(reqs[1].trailers.is_empty());
}

#[test]
fn early_hints_from_an_h2_upstream_are_relayed_and_an_endless_run_is_a_502() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&h2_config(origin.addr, ""), &[]);
    let mut r = common::Reader::new(connect(pier.addr()));
    r.send(b"GET /early-hints/1 HTTP/1.1\r\nHost: h\r\n\r\n");
    let early = r.response(false).unwrap();
    assert_eq!(early.status, 103);
    assert_eq!(
        early.headers,
        [("link".to_string(), "</style.css>; rel=preload".to_string())]
    );
    let resp = r.response(false).unwrap();
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"hinted"[..]));

    r.send(b"GET /early-hints/20 HTTP/1.1\r\nHost: h\r\n\r\n");
    let mut statuses = Vec::new();
    loop {
        let resp = r.response(false).unwrap();
        statuses.push(resp.status);
        if resp.status >= 200 {
            break;
        }
    }
    let early = statuses.len() - 1;
    assert!((1..=8).contains(&early), "{statuses:?}");
    assert_eq!(statuses[early], 502, "{statuses:?}");
}
