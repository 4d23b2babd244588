//! HTTP/2 downstream against a real `pier` process: prior knowledge on a plain
//! listener with `http2 = true`, ALPN on TLS listeners, every kind of route
//! answered over h2 (static with flow control, Range, 304 and HEAD; respond;
//! redirect; header rules; the proxy to an HTTP/1.1 upstream with the request
//! body streamed), connection-specific fields refused and never sent, and an
//! access-log line and metrics per stream. Clients: the `h2` crate, curl, and
//! frames written by hand.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::h2raw::{self, RawH2};
use common::upstream::{Reply, Upstream};
use common::Pier;

/// A current-thread runtime for one test's client.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An h2 client connection with prior knowledge; `window` is the client's
/// initial stream window.
async fn h2_client(addr: SocketAddr, window: Option<u32>) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut b = h2::client::Builder::new();
    if let Some(w) = window {
        b.initial_window_size(w);
    }
    let (send, conn) = b.handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.unwrap()
}

/// A response as read whole.
struct Got {
    head: http::response::Parts,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends `req` (with `body` in 16 KiB pieces when given) and reads the answer.
async fn fetch(
    send: &mut h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    body: Option<Vec<u8>>,
) -> Got {
    let (resp, mut out) = send.send_request(req, body.is_none()).unwrap();
    if let Some(body) = body {
        for piece in body.chunks(16 * 1024) {
            out.send_data(Bytes::copy_from_slice(piece), false).unwrap();
        }
        out.send_data(Bytes::new(), true).unwrap();
    }
    let resp = resp.await.unwrap();
    let (head, stream) = resp.into_parts();
    Got {
        head,
        body: read_body(stream).await,
    }
}

/// All of a body, its window given back as it comes.
async fn read_body(mut stream: h2::RecvStream) -> Vec<u8> {
    let mut data = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.unwrap();
        let _ = stream.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    data
}

fn get(uri: &str) -> http::request::Builder {
    http::Request::get(uri)
}

const CONNECTION_FIELDS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

fn assert_no_connection_fields(got: &Got) {
    for name in CONNECTION_FIELDS {
        assert!(
            got.head.headers.get(name).is_none(),
            "{name} sent over h2: {:?}",
            got.head.headers
        );
    }
}

const SITE: &str = r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true

[[route]]
path = "/fixed"
handler = "respond"
body = "fixed answer\n"
headers = { "X-Fixed" = "yes" }

[[route]]
path = "/bare"
handler = "respond"
body = "bare\n"

[[route]]
path = "/old"
handler = "redirect"
status = 308
location = "/new{uri}"

[[route]]
path = "/"
handler = "static"
root = "{dir}"
[route.response_headers]
set = { "X-Rule" = "{scheme} {path}" }
"#;

fn big_file(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

fn site(pier_dir: &std::path::Path) -> Vec<u8> {
    let site = pier_dir;
    std::fs::write(site.join("index.html"), "hello over h2\n").unwrap();
    let big = big_file(1_500_000);
    std::fs::write(site.join("big.bin"), &big).unwrap();
    big
}

#[test]
fn static_files_over_prior_knowledge_whole_ranged_conditional_and_head() {
    let pier = Pier::with_config(SITE, &[]);
    let big = site(pier.root());
    let addr = pier.addr();
    rt().block_on(async move {
        // A small client window: the 1.5 MB file comes only as fast as the
        // window opens, and whole.
        let mut c = h2_client(addr, Some(16 * 1024)).await;
        let uri = format!("http://{addr}/big.bin");
        let got = fetch(&mut c, get(&uri).body(()).unwrap(), None).await;
        assert_eq!(got.head.status, 200);
        assert_eq!(got.header("content-length"), Some("1500000"));
        assert!(got.body == big, "{} bytes differ", got.body.len());
        assert_eq!(got.header("server"), Some("pier"));
        assert_eq!(got.header("x-rule"), Some("http /big.bin"));
        assert_no_connection_fields(&got);
        let etag = got.header("etag").unwrap().to_string();

        let ranged = fetch(
            &mut c,
            get(&uri).header("range", "bytes=10-19").body(()).unwrap(),
            None,
        )
        .await;
        assert_eq!(ranged.head.status, 206);
        assert_eq!(ranged.body, &big[10..20]);
        assert_eq!(ranged.header("content-range"), Some("bytes 10-19/1500000"));

        let not_modified = fetch(
            &mut c,
            get(&uri).header("if-none-match", &etag).body(()).unwrap(),
            None,
        )
        .await;
        assert_eq!(not_modified.head.status, 304);
        assert!(not_modified.body.is_empty());

        let head = fetch(&mut c, http::Request::head(&uri).body(()).unwrap(), None).await;
        assert_eq!(head.head.status, 200);
        assert_eq!(head.header("content-length"), Some("1500000"));
        assert!(head.body.is_empty());

        // Many streams at once on the one connection, each answered whole.
        let mut waits = Vec::new();
        for _ in 0..20 {
            let req = get(&format!("http://{addr}/index.html")).body(()).unwrap();
            let (resp, _) = c.send_request(req, true).unwrap();
            waits.push(resp);
        }
        for w in waits {
            let resp = w.await.unwrap();
            assert_eq!(resp.status(), 200);
            let mut body = resp.into_body();
            let mut text = Vec::new();
            while let Some(d) = body.data().await {
                text.extend_from_slice(&d.unwrap());
            }
            assert_eq!(text, b"hello over h2\n");
        }
    });
}

/// The body of a 200 answer, whole.
async fn read_whole(resp: h2::client::ResponseFuture) -> Vec<u8> {
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    read_body(resp.into_body()).await
}

#[test]
fn files_sent_at_once_and_after_each_other_keep_their_own_bytes() {
    // File chunks go out in buffers the worker takes again once written: a
    // buffer reused for another file, or for a shorter last chunk, must carry
    // only that file's bytes.
    let pier = Pier::with_config(SITE, &[]);
    let file =
        |n: usize, step: usize| -> Vec<u8> { (0..n).map(|i| (i * step % 253) as u8).collect() };
    let a = file(700_001, 3);
    let b = file(300_003, 11);
    let c = file(100_003, 17);
    std::fs::write(pier.root().join("a.bin"), &a).unwrap();
    std::fs::write(pier.root().join("b.bin"), &b).unwrap();
    std::fs::write(pier.root().join("c.bin"), &c).unwrap();
    let addr = pier.addr();
    rt().block_on(async move {
        let mut conn = h2_client(addr, None).await;
        for _ in 0..3 {
            // Both at once, read side by side (the connection's window is shared).
            let req = |name: &str| get(&format!("http://{addr}/{name}.bin")).body(()).unwrap();
            let wait_a = conn.send_request(req("a"), true).unwrap().0;
            let wait_b = conn.send_request(req("b"), true).unwrap().0;
            let (got_a, got_b) = tokio::join!(read_whole(wait_a), read_whole(wait_b));
            assert!(got_a == a, "{} bytes, not the first file's", got_a.len());
            assert!(got_b == b, "{} bytes, not the second file's", got_b.len());
            let got = fetch(
                &mut conn,
                get(&format!("http://{addr}/c.bin")).body(()).unwrap(),
                None,
            )
            .await;
            assert!(
                got.body == c,
                "{} bytes, not the small file's",
                got.body.len()
            );
        }
    });
}

#[test]
fn respond_redirect_and_missing_routes_answer_over_h2() {
    let pier = Pier::with_config(SITE, &[]);
    site(pier.root());
    let addr = pier.addr();
    rt().block_on(async move {
        let mut c = h2_client(addr, None).await;
        let fixed = fetch(
            &mut c,
            get(&format!("http://{addr}/fixed")).body(()).unwrap(),
            None,
        )
        .await;
        assert_eq!(fixed.head.status, 200);
        assert_eq!(fixed.body, b"fixed answer\n");
        assert_eq!(fixed.header("x-fixed"), Some("yes"));
        assert_eq!(fixed.header("content-length"), Some("13"));

        // A bare answer carries the driver's fields and nothing else, the
        // first time and when the request and the answer repeat.
        for _ in 0..3 {
            let bare = fetch(
                &mut c,
                get(&format!("http://{addr}/bare")).body(()).unwrap(),
                None,
            )
            .await;
            assert_eq!(bare.head.status, 200);
            assert_eq!(bare.body, b"bare\n");
            let mut names: Vec<&str> = bare.head.headers.keys().map(|n| n.as_str()).collect();
            names.sort_unstable();
            assert_eq!(names, ["content-length", "date", "server"]);
            assert_eq!(bare.header("content-length"), Some("5"));
            assert_eq!(bare.header("server"), Some("pier"));
            assert!(bare.header("date").is_some_and(|d| d.ends_with(" GMT")));
        }

        let moved = fetch(
            &mut c,
            get(&format!("http://{addr}/old/a?b=1")).body(()).unwrap(),
            None,
        )
        .await;
        assert_eq!(moved.head.status, 308);
        assert_eq!(moved.header("location"), Some("/new/old/a?b=1"));

        let missing = fetch(
            &mut c,
            get(&format!("http://{addr}/nothing-here"))
                .body(())
                .unwrap(),
            None,
        )
        .await;
        assert_eq!(missing.head.status, 404);
    });
}

#[test]
fn a_plain_listener_with_http2_still_speaks_http1_and_one_without_it_no_h2() {
    let pier = Pier::with_config(
        &format!("{SITE}\n[[listener]]\nlisten = \"127.0.0.1:0\"\n"),
        &[],
    );
    site(pier.root());
    let r = common::get(
        pier.http[0],
        "GET /fixed HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    // Without `http2 = true` the preface is an HTTP/1 request it cannot serve.
    let mut raw = RawH2::connect(pier.http[1]);
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &h2raw::block(&h2raw::get_fields("/fixed")),
    ));
    let first = raw.next_frame(Duration::from_secs(5));
    assert!(
        first.as_ref().is_none_or(|f| f.kind != h2raw::SETTINGS),
        "{first:?}"
    );
}

#[test]
fn requests_with_connection_specific_fields_are_malformed_and_the_connection_lives_on() {
    let pier = Pier::with_config(SITE, &[]);
    site(pier.root());
    let mut raw = RawH2::connect(pier.addr());
    let mut fields = h2raw::get_fields("/fixed");
    fields.push(("connection", "keep-alive"));
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        1,
        &h2raw::block(&fields),
    ));
    let reset = raw
        .wait_for(Duration::from_secs(5), |f| {
            f.stream == 1 && (f.kind == h2raw::RST_STREAM || f.kind == h2raw::HEADERS)
        })
        .expect("an answer to stream 1");
    assert_eq!(reset.kind, h2raw::RST_STREAM, "{reset:?}");
    assert_eq!(reset.error_code(), Some(1), "PROTOCOL_ERROR");
    // `te` other than "trailers" is malformed too; `te: trailers` is fine.
    let mut fields = h2raw::get_fields("/fixed");
    fields.push(("te", "trailers"));
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        3,
        &h2raw::block(&fields),
    ));
    let ok = raw
        .wait_for(Duration::from_secs(5), |f| f.stream == 3)
        .expect("an answer to stream 3");
    assert_eq!(ok.kind, h2raw::HEADERS, "{ok:?}");
}

#[test]
fn the_proxy_streams_h2_request_bodies_to_http1_upstreams_and_strips_their_connection_fields() {
    let upstream = Upstream::start(|req| {
        Reply::Http(
            200,
            vec![
                ("Connection".into(), "keep-alive".into()),
                ("Keep-Alive".into(), "timeout=5".into()),
                ("X-Up".into(), format!("{} {}", req.method, req.body.len())),
            ],
            format!("got {} bytes\n", req.body.len()).into_bytes(),
        )
    });
    let pier = Pier::with_config(
        &format!(
            r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[http]
max_body_bytes = 10000000
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
"#,
            upstream.addr
        ),
        &[],
    );
    let addr = pier.addr();
    let body = big_file(300_000);
    let sent = body.clone();
    rt().block_on(async move {
        let body = sent;
        let mut c = h2_client(addr, None).await;
        // No content-length: the upstream gets it chunked as it streams in.
        let got = fetch(
            &mut c,
            http::Request::post(format!("http://{addr}/upload?x=1"))
                .body(())
                .unwrap(),
            Some(body.clone()),
        )
        .await;
        assert_eq!(got.head.status, 200);
        assert_eq!(got.header("x-up"), Some("POST 300000"));
        assert_eq!(got.body, b"got 300000 bytes\n");
        assert_no_connection_fields(&got);
        // A declared length goes upstream as Content-Length.
        let got = fetch(
            &mut c,
            http::Request::put(format!("http://{addr}/put"))
                .header("content-length", "300000")
                .body(())
                .unwrap(),
            Some(body.clone()),
        )
        .await;
        assert_eq!(got.header("x-up"), Some("PUT 300000"));
    });
    let reqs = upstream.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].chunked, "{}", reqs[0].head);
    assert_eq!(reqs[0].target, "/upload?x=1");
    assert_eq!(reqs[0].body, body);
    assert_eq!(reqs[1].header("content-length"), Some("300000"));
    assert_eq!(reqs[1].body, body);
    assert!(reqs[0].header("host").is_some());
}

#[test]
fn tls_listeners_offer_h2_by_alpn_unless_their_alpn_says_otherwise() {
    let Some(curl) = common::which("curl") else {
        eprintln!("curl not installed; skipping");
        return;
    };
    let pier = Pier::with_config(
        r#"
[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }
[[listener]]
listen = "127.0.0.1:0"
alpn = ["http/1.1"]
tls = { self_signed = true }
[[route]]
path = "/"
handler = "respond"
body = "over tls\n"
"#,
        &[],
    );
    let version = |addr: SocketAddr| {
        let out = Command::new(&curl)
            .args(["-sk", "--http2", "-w", "\n%{http_version}"])
            .arg(format!("https://{addr}/"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(version(pier.https[0]), "over tls\n\n2");
    assert_eq!(version(pier.https[1]), "over tls\n\n1.1");
}

/// A socket that is full when TLS has taken the last of a long answer used
/// to keep that answer's last records in rustls until something else was
/// written, and nothing else was: the download stalled for good. A small
/// send buffer makes the socket full at nearly every write.
#[test]
fn a_long_answer_over_tls_ends_when_the_socket_was_full_at_its_last_records() {
    let Some(curl) = common::which("curl") else {
        eprintln!("curl not installed; skipping");
        return;
    };
    let pier = Pier::with_config(
        r#"
[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }
[listener.socket]
send_buffer = "16KiB"
[[route]]
path = "/"
handler = "static"
root = "{dir}"
"#,
        &[],
    );
    let big = big_file(2_000_000);
    std::fs::write(pier.root().join("two.bin"), &big).unwrap();
    let out_path = pier.root().join("got.bin");
    for _ in 0..3 {
        let out = Command::new("timeout")
            .arg("20")
            .arg(&curl)
            .args(["-sk", "--http2", "-o"])
            .arg(&out_path)
            .args(["-w", "%{http_version} %{http_code}"])
            .arg(format!("https://{}/two.bin", pier.https[0]))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200", "{out:?}");
        assert!(std::fs::read(&out_path).unwrap() == big);
    }
}

#[test]
fn curl_with_prior_knowledge_gets_the_same_file() {
    let Some(curl) = common::which("curl") else {
        eprintln!("curl not installed; skipping");
        return;
    };
    let pier = Pier::with_config(SITE, &[]);
    let big = site(pier.root());
    let out_path = pier.root().join("got.bin");
    let out = Command::new(&curl)
        .args(["-s", "--http2-prior-knowledge", "-o"])
        .arg(&out_path)
        .args(["-w", "%{http_version} %{http_code}"])
        .arg(format!("http://{}/big.bin", pier.addr()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2 200");
    assert!(std::fs::read(&out_path).unwrap() == big);
}

#[test]
fn each_stream_gets_an_access_log_line_and_metrics_count_http2() {
    let pier = Pier::with_config(
        &format!(
            "{SITE}\n[access_log]\npath = \"{{dir}}/access.log\"\nflush_interval = \"50ms\"\n[admin]\nlisten = \"127.0.0.1:0\"\n"
        ),
        &[],
    );
    site(pier.root());
    let addr = pier.addr();
    rt().block_on(async move {
        let mut c = h2_client(addr, None).await;
        for path in ["/fixed", "/index.html"] {
            let got = fetch(
                &mut c,
                get(&format!("http://{addr}{path}"))
                    .header("user-agent", "h2-test")
                    .body(())
                    .unwrap(),
                None,
            )
            .await;
            assert_eq!(got.head.status, 200);
        }
    });
    let log = pier.root().join("access.log");
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("\"GET /fixed HTTP/2.0\" 200 13 "),
        "{text}"
    );
    assert!(
        lines[0].ends_with(" stream=1") || lines[0].contains(" stream=1"),
        "{text}"
    );
    assert!(
        lines[1].contains("\"GET /index.html HTTP/2.0\" 200 14 "),
        "{text}"
    );
    assert!(lines[1].contains(" stream=3"), "{text}");
    assert!(lines[1].contains("\"h2-test\""), "{text}");

    let admin = pier.admin.unwrap();
    let r = common::get(
        admin,
        "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&r.body).to_string();
    assert!(text.contains("\npier_http2_requests_total 2\n"), "{text}");
    assert!(
        text.contains("\npier_http2_connections_total 1\n"),
        "{text}"
    );
}

#[test]
fn a_cached_route_over_h2_answers_from_the_cache_and_logs_the_outcome() {
    let origin = Upstream::start(|_| {
        Reply::Http(
            200,
            vec![("Cache-Control".into(), "max-age=60".into())],
            b"cacheable\n".to_vec(),
        )
    });
    let pier = Pier::with_config(
        &format!(
            r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
[cache.main]
memory = "4MiB"
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
cache = "main"
[access_log]
path = "{{dir}}/access.log"
flush_interval = "50ms"
"#,
            origin.addr
        ),
        &[],
    );
    let addr = pier.addr();
    rt().block_on(async move {
        let mut c = h2_client(addr, None).await;
        for _ in 0..2 {
            let got = fetch(
                &mut c,
                get(&format!("http://{addr}/c")).body(()).unwrap(),
                None,
            )
            .await;
            assert_eq!(
                (got.head.status.as_u16(), &got.body[..]),
                (200, &b"cacheable\n"[..])
            );
        }
    });
    assert_eq!(origin.requests().len(), 1, "the second came from the cache");
    let log = pier.root().join("access.log");
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("cache=miss"), "{text}");
    assert!(lines[1].contains("cache=hit"), "{text}");
    assert!(lines[1].contains("HTTP/2.0"), "{text}");
}

#[test]
fn an_invalid_preface_on_a_plain_http2_listener_is_closed_without_an_answer() {
    use std::io::{Read, Write};
    let pier = Pier::with_config(SITE, &[]);
    site(pier.root());
    for opening in [
        &b"INVALID CONNECTION PREFACE\r\n\r\n"[..],
        b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
    ] {
        let mut c = common::connect(pier.addr());
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(opening).unwrap();
        let mut got = Vec::new();
        // A FIN (end of stream), not a reset and not an HTTP/1 answer.
        c.read_to_end(&mut got)
            .expect("closed cleanly, without a reset");
        assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    }
    // HTTP/1 on the same listener, good and bad, is still answered.
    let r = common::get(
        pier.addr(),
        "GET /fixed HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let r = common::get(pier.addr(), "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 400);
}

#[test]
fn trailers_with_a_pseudo_field_after_an_early_answer_reset_the_stream() {
    let pier = Pier::with_config(SITE, &[]);
    site(pier.root());
    let mut raw = RawH2::connect(pier.addr());
    let mut fields = h2raw::get_fields("/index.html");
    fields[0].1 = "POST";
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS,
        1,
        &h2raw::block(&fields),
    ));
    raw.send(&h2raw::frame(h2raw::DATA, 0, 1, b"test"));
    // The static route answers without reading the body.
    let answer = raw
        .wait_for(Duration::from_secs(5), |f| f.stream == 1)
        .expect("an answer to stream 1");
    assert_eq!(answer.kind, h2raw::HEADERS, "{answer:?}");
    // Trailers (without END_STREAM, and with a pseudo-field) are malformed:
    // the stream is reset with PROTOCOL_ERROR, not dropped with NO_ERROR.
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS,
        1,
        &h2raw::block(&[(":method", "POST")]),
    ));
    let reset = raw
        .wait_for(Duration::from_secs(5), |f| {
            f.stream == 1 && f.kind == h2raw::RST_STREAM
        })
        .expect("RST_STREAM on stream 1");
    assert_eq!(reset.error_code(), Some(1), "PROTOCOL_ERROR: {reset:?}");
    // The connection lives on.
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        3,
        &h2raw::block(&h2raw::get_fields("/fixed")),
    ));
    let ok = raw
        .wait_for(Duration::from_secs(5), |f| f.stream == 3)
        .expect("an answer to stream 3");
    assert_eq!(ok.kind, h2raw::HEADERS, "{ok:?}");
}

/// Runs `bin` with `args` and returns its stdout, asserting it succeeded.
fn run_client(bin: &std::path::Path, args: &[String]) -> Vec<u8> {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn nghttp_and_h2load_interoperate_over_tls_and_prior_knowledge() {
    let (Some(nghttp), Some(h2load)) = (common::which("nghttp"), common::which("h2load")) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "nghttp and h2load (Debian nghttp2-client) are not installed"
        );
        eprintln!("nghttp or h2load not installed (Debian nghttp2-client); skipping");
        return;
    };
    let pier = Pier::with_config(
        &format!(
            "{SITE}\n[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ self_signed = true }}\n"
        ),
        &[],
    );
    let big = site(pier.root());
    let bases = [
        format!("http://{}", pier.addr()),
        format!("https://{}", pier.https[0]),
    ];
    for base in &bases {
        // One connection, several streams: a large file and a page three times.
        let got = run_client(&nghttp, &[format!("{base}/big.bin")]);
        assert!(got == big, "{base}/big.bin: {} bytes", got.len());
        let got = run_client(
            &nghttp,
            &["-m".into(), "3".into(), format!("{base}/index.html")],
        );
        assert_eq!(String::from_utf8_lossy(&got), "hello over h2\n".repeat(3));
        // h2load, as the benchmarks use it: 2 connections, 10 streams each.
        let out = run_client(
            &h2load,
            &[
                "-n".into(),
                "200".into(),
                "-c".into(),
                "2".into(),
                "-m".into(),
                "10".into(),
                format!("{base}/fixed"),
            ],
        );
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("Application protocol: h2"), "{text}");
        assert!(
            text.contains("200 total, 200 started, 200 done, 200 succeeded, 0 failed"),
            "{text}"
        );
        assert!(text.contains("status codes: 200 2xx"), "{text}");
    }
}

#[test]
fn early_hints_from_an_http1_upstream_reach_h2_clients_before_the_answer() {
    let origin = Upstream::start(|_| {
        Reply::Raw(
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nServer: origin\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        )
    });
    let pier = Pier::with_config(
        &format!(
            r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
"#,
            origin.addr
        ),
        &[],
    );
    let addr = pier.addr();
    rt().block_on(async move {
        let mut c = h2_client(addr, None).await;
        for _ in 0..2 {
            let req = get(&format!("http://{addr}/page")).body(()).unwrap();
            let (mut resp, _) = c.send_request(req, true).unwrap();
            let early = std::future::poll_fn(|cx| resp.poll_informational(cx))
                .await
                .expect("an interim head before the final one")
                .unwrap();
            assert_eq!(early.status(), 103);
            let fields: Vec<_> = early.headers().iter().collect();
            assert_eq!(fields.len(), 1, "{fields:?}");
            assert_eq!(
                early.headers().get("link").unwrap(),
                "</style.css>; rel=preload"
            );
            let more = std::future::poll_fn(|cx| resp.poll_informational(cx)).await;
            assert!(more.is_none(), "one interim head");
            let (head, mut body) = resp.await.unwrap().into_parts();
            assert_eq!(head.status, 200);
            let mut data = Vec::new();
            while let Some(chunk) = body.data().await {
                data.extend_from_slice(&chunk.unwrap());
            }
            assert_eq!(data, b"ok");
        }
    });
}
