//! The reverse proxy end to end: a real `pier` in front of small scripted
//! upstream servers (tests/common/upstream.rs), spoken to with raw bytes.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::tls::{connect_tls, tls_request, verifying_client, Pki};
use common::upstream::{ok, Reply, Upstream};
use common::{connect, get, Pier, Reader};

fn servers(addrs: &[(SocketAddr, u32)]) -> String {
    addrs
        .iter()
        .map(|(a, w)| format!("{{ address = \"{a}\", weight = {w} }}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One worker (so pool and balancing counts are exact), one proxy route to "app".
fn proxy_config(addrs: &[(SocketAddr, u32)], upstream_extra: &str, route_extra: &str) -> String {
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{}]
{upstream_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
{route_extra}
"#,
        servers(addrs)
    )
}

fn start(addrs: &[(SocketAddr, u32)], upstream_extra: &str, route_extra: &str) -> Pier {
    Pier::with_config(&proxy_config(addrs, upstream_extra, route_extra), &[])
}

fn req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n")
}

#[test]
fn forwards_request_and_response_with_forwarding_headers() {
    let up = Upstream::start(|r| {
        Reply::Http(
            201,
            vec![
                ("X-Up".into(), "yes".into()),
                ("Server".into(), "origin".into()),
                ("Keep-Alive".into(), "timeout=5".into()),
            ],
            format!("{} {}", r.method, r.target).into_bytes(),
        )
    });
    let pier = start(&[(up.addr, 1)], "", "client_addr_header = \"X-Real-IP\"");
    let resp = get(
        pier.addr(),
        "GET /a/b?c=d HTTP/1.1\r\nHost: app.test:8080\r\nX-Forwarded-For: 203.0.113.9\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-Proto: gopher\r\n\r\n",
    );
    assert_eq!(resp.status, 201);
    assert_eq!(resp.body, b"GET /a/b?c=d");
    assert_eq!(resp.header("x-up"), Some("yes"));
    assert_eq!(resp.header("server"), Some("pier"));
    assert!(resp.header("keep-alive").is_none());
    let r = &up.requests()[0];
    assert_eq!(r.header("host"), Some("app.test:8080"));
    assert_eq!(r.header("x-forwarded-for"), Some("203.0.113.9, 127.0.0.1"));
    assert_eq!(r.header("x-forwarded-proto"), Some("http"));
    assert_eq!(r.header("x-forwarded-host"), Some("app.test:8080"));
    assert_eq!(r.header("x-real-ip"), Some("127.0.0.1"));
    assert_eq!(r.count("x-real-ip"), 1);
    assert_eq!(r.header("via"), Some("1.1 pier"));
}

#[test]
fn pool_reuses_one_upstream_connection_across_clients() {
    let up = Upstream::start(|_| ok("pooled"));
    let pier = start(&[(up.addr, 1)], "", "");
    for _ in 0..3 {
        let mut r = Reader::new(connect(pier.addr()));
        for _ in 0..5 {
            r.send(req("/").as_bytes());
            let resp = r.response(false).unwrap();
            assert_eq!((resp.status, resp.body.as_slice()), (200, &b"pooled"[..]));
        }
    }
    assert_eq!(up.requests().len(), 15);
    assert_eq!(
        up.accepts(),
        1,
        "every request went over one pooled connection"
    );
}

#[test]
fn hop_by_hop_fields_are_stripped_and_the_upstream_connection_kept() {
    let up = Upstream::start(|_| ok("x"));
    let pier = start(&[(up.addr, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close, X-Foo\r\nX-Foo: secret\r\nX-Bar: kept\r\nTE: trailers\r\nKeep-Alive: 300\r\n\r\n");
    let resp = r.response(false).unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(r.closed(), "the client asked to close");
    let seen = &up.requests()[0];
    assert!(seen.header("x-foo").is_none(), "{}", seen.head);
    assert!(seen.header("te").is_none());
    assert!(seen.header("keep-alive").is_none());
    assert!(seen.header("connection").is_none());
    assert_eq!(seen.header("x-bar"), Some("kept"));
    // The client's close was for its own hop: the upstream connection is reused.
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    assert_eq!(up.accepts(), 1);
}

#[test]
fn weighted_round_robin_follows_the_weights() {
    let a = Upstream::start(|_| ok("a"));
    let b = Upstream::start(|_| ok("b"));
    let pier = start(&[(a.addr, 1), (b.addr, 3)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    let mut counts = (0, 0);
    for _ in 0..40 {
        r.send(req("/").as_bytes());
        match r.response(false).unwrap().body.as_slice() {
            b"a" => counts.0 += 1,
            b"b" => counts.1 += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(counts, (10, 30));
}

#[test]
fn consistent_hash_on_a_header_pins_each_key_to_one_server() {
    let ups: Vec<Upstream> = (0..3)
        .map(|i| Upstream::start(move |_| ok(&i.to_string())))
        .collect();
    let addrs: Vec<(SocketAddr, u32)> = ups.iter().map(|u| (u.addr, 1)).collect();
    let pier = start(
        &addrs,
        "balance = \"hash\"\nhash_key = \"header:X-User\"",
        "",
    );
    let mut r = Reader::new(connect(pier.addr()));
    let mut owners = std::collections::HashMap::new();
    for round in 0..3 {
        for user in 0..30 {
            r.send(format!("GET / HTTP/1.1\r\nHost: h\r\nX-User: u{user}\r\n\r\n").as_bytes());
            let body = r.response(false).unwrap().body;
            let prev = owners.insert(user, body.clone());
            if round > 0 {
                assert_eq!(prev, Some(body), "user {user} moved");
            }
        }
    }
    let distinct: std::collections::HashSet<_> = owners.values().collect();
    assert_eq!(distinct.len(), 3, "keys spread over every server");
}

#[test]
fn least_conn_sends_new_requests_away_from_a_busy_server() {
    let server = |name: &'static str| {
        Upstream::start(move |r| {
            if r.target == "/slow" {
                std::thread::sleep(Duration::from_millis(1500));
            }
            ok(name)
        })
    };
    let (one, two) = (server("one"), server("two"));
    let pier = start(
        &[(one.addr, 1), (two.addr, 1)],
        "balance = \"least_conn\"",
        "",
    );
    // Occupy one server with a long request; the others must avoid it.
    let mut busy = Reader::new(connect(pier.addr()));
    busy.send(req("/slow").as_bytes());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(one.requests().len() + two.requests().len(), 1);
    let free: &[u8] = if one.requests().len() == 1 {
        b"two"
    } else {
        b"one"
    };
    let mut r = Reader::new(connect(pier.addr()));
    for _ in 0..6 {
        r.send(req("/").as_bytes());
        assert_eq!(r.response(false).unwrap().body, free);
    }
    assert_eq!(busy.response(false).unwrap().status, 200);
}

#[test]
fn chunked_request_body_is_relayed_chunked() {
    let up = Upstream::start(|r| ok(&format!("{}:{}", r.chunked, r.body.len())));
    let pier = start(&[(up.addr, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(
        b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n",
    );
    std::thread::sleep(Duration::from_millis(100));
    r.send(b"6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
    let resp = r.response(false).unwrap();
    assert_eq!(resp.body, b"true:11");
    let seen = &up.requests()[0];
    assert_eq!(seen.body, b"hello world");
    assert_eq!(seen.count("transfer-encoding"), 1);
    assert!(seen.header("content-length").is_none());
    // The connection carries on.
    r.send(b"POST /len HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let cont = r.response(false).unwrap();
    assert_eq!(cont.status, 100);
    r.send(b"abcd");
    assert_eq!(r.response(false).unwrap().body, b"false:4");
    assert_eq!(up.requests()[1].body, b"abcd");
    assert!(up.requests()[1].header("expect").is_none());
}

#[test]
fn large_request_body_streams_through() {
    let up = Upstream::start(|r| ok(&r.body.len().to_string()));
    let pier = Pier::with_config(
        &proxy_config(&[(up.addr, 1)], "", "")
            .replace("[server]", "[http]\nmax_body_bytes = 20000000\n[server]"),
        &[],
    );
    let body: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(
        format!(
            "PUT /big HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    r.send(&body);
    assert_eq!(r.response(false).unwrap().body, b"5000000");
    assert!(up.requests()[0].body == body);
}

#[test]
fn chunked_and_close_delimited_responses_are_rechunked() {
    let up = Upstream::start(|r| {
        match r.target.as_str() {
        "/chunked" => Reply::Raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".to_vec(),
        ),
        _ => Reply::RawClose(b"HTTP/1.1 200 OK\r\n\r\nuntil close".to_vec()),
    }
    });
    let pier = start(&[(up.addr, 1)], "", "");
    let mut s = connect(pier.addr());
    s.write_all(req("/chunked").as_bytes()).unwrap();
    s.write_all(req("/close").as_bytes()).unwrap();
    s.write_all(b"GET /close HTTP/1.0\r\nHost: h\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let text = String::from_utf8_lossy(&all);
    assert_eq!(
        text.matches("Transfer-Encoding: chunked").count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        "{text}"
    );
    assert!(text.contains("b\r\nuntil close\r\n0\r\n\r\n"), "{text}");
    // HTTP/1.0 gets the body delimited by close.
    assert!(
        text.ends_with("Connection: close\r\n\r\nuntil close"),
        "{text}"
    );
}

#[test]
fn silent_upstream_gets_504_and_refused_one_502() {
    let up = Upstream::start(|_| Reply::Silent);
    let pier = start(
        &[(up.addr, 1)],
        "response_timeout = \"500ms\"\nmax_fails = 0",
        "",
    );
    let started = Instant::now();
    let resp = get(pier.addr(), &req("/"));
    assert_eq!(resp.status, 504);
    assert!(String::from_utf8_lossy(&resp.body).contains("504"));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // The warning is logged around the time the 504 is written, so it may
    // reach the log pipe just after the client has read the response.
    let logged = pier.wait_log(&up.addr.to_string(), Duration::from_secs(5));
    assert!(
        logged.is_some(),
        "no log line names the upstream {}",
        up.addr
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let pier = start(&[(addr, 1)], "retries = 0", "");
    let resp = get(pier.addr(), &req("/"));
    assert_eq!(resp.status, 502);
    assert!(String::from_utf8_lossy(&resp.body).contains("502"));
}

#[test]
fn malformed_upstream_response_is_502() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/smuggle" => Reply::RawClose(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
        ),
        _ => Reply::RawClose(b"HTTP/1.1 200 OK\nbare: lf\n\n".to_vec()),
    });
    let pier = start(&[(up.addr, 1)], "max_fails = 0", "");
    assert_eq!(get(pier.addr(), &req("/smuggle")).status, 502);
    assert_eq!(get(pier.addr(), &req("/bare")).status, 502);
}

#[test]
fn resets_before_a_response_are_retried_for_idempotent_methods_only() {
    let bad = Upstream::start(|_| Reply::Close);
    let good = Upstream::start(|_| ok("good"));
    let pier = start(
        &[(bad.addr, 1), (good.addr, 1)],
        "retries = 1\nmax_fails = 0",
        "",
    );
    let mut r = Reader::new(connect(pier.addr()));
    for _ in 0..4 {
        r.send(req("/").as_bytes());
        let resp = r.response(false).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"good"[..]));
    }
    assert!(!bad.requests().is_empty(), "the bad server was tried");
    // A POST that reached the bad server is not sent again.
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let resp = get(
            pier.addr(),
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi",
        );
        statuses.push(resp.status);
    }
    assert!(statuses.contains(&502), "{statuses:?}");
    assert!(statuses.contains(&200), "{statuses:?}");
}

#[test]
fn connect_failures_go_to_another_server_for_any_method() {
    let dead = common::refused_addr();
    let good = Upstream::start(|_| ok("good"));
    let pier = start(
        &[(dead, 1), (good.addr, 1)],
        "retries = 1\nmax_fails = 0",
        "",
    );
    for _ in 0..4 {
        let resp = get(
            pier.addr(),
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi",
        );
        assert_eq!(resp.status, 200);
    }
    assert_eq!(good.requests().len(), 4);
}

#[test]
fn killed_upstream_gives_502_is_marked_down_and_recovers() {
    let a = Upstream::start(|_| ok("a"));
    let mut b = Upstream::start(|_| ok("b"));
    let pier = start(
        &[(a.addr, 1), (b.addr, 1)],
        "retries = 0\nmax_fails = 1\nfail_timeout = \"1s\"",
        "",
    );
    let fetch = || {
        let r = get(pier.addr(), &req("/"));
        (r.status, String::from_utf8_lossy(&r.body).to_string())
    };
    let before: Vec<_> = (0..4).map(|_| fetch()).collect();
    assert!(before.iter().any(|(_, b)| b == "b"), "{before:?}");
    b.stop();
    let during: Vec<_> = (0..6).map(|_| fetch()).collect();
    let failed = during.iter().filter(|(s, _)| *s == 502).count();
    assert_eq!(
        failed, 1,
        "one request hits the dead server, then it is down: {during:?}"
    );
    assert!(during.iter().all(|(s, b)| *s == 502 || b == "a"));
    assert!(
        pier.wait_log("upstream marked down", Duration::from_secs(5))
            .is_some(),
        "no log line says the server was marked down"
    );
    b.restart();
    std::thread::sleep(Duration::from_millis(1200));
    let after: Vec<_> = (0..6).map(|_| fetch()).collect();
    assert!(after.iter().all(|(s, _)| *s == 200), "{after:?}");
    assert!(after.iter().any(|(_, body)| body == "b"), "{after:?}");
}

#[test]
fn a_lone_server_is_never_marked_down_so_a_blip_does_not_flap() {
    let mut up = Upstream::start(|_| ok("back"));
    // Two workers, as the report had it: each would mark the server down on its own.
    let config = proxy_config(
        &[(up.addr, 1)],
        "retries = 1\nmax_fails = 1\nfail_timeout = \"30s\"",
        "",
    )
    .replace("workers = 1", "workers = 2");
    let pier = Pier::with_config(&config, &[]);
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    up.stop();
    // Refused every time: 502 as the README says, never 503 with nothing tried.
    let during: Vec<u16> = (0..6).map(|_| get(pier.addr(), &req("/")).status).collect();
    assert_eq!(during, vec![502; 6]);
    up.restart();
    // Back at once, not after fail_timeout (30 s).
    let after: Vec<u16> = (0..6).map(|_| get(pier.addr(), &req("/")).status).collect();
    assert_eq!(after, vec![200; 6]);
}

#[test]
fn when_every_server_is_down_they_are_tried_anyway() {
    let mut a = Upstream::start(|_| ok("a"));
    let mut b = Upstream::start(|_| ok("b"));
    let pier = start(
        &[(a.addr, 1), (b.addr, 1)],
        "retries = 0\nmax_fails = 1\nfail_timeout = \"30s\"",
        "",
    );
    a.stop();
    b.stop();
    // Each failure marks its server down; once both are, they are still tried:
    // every answer is the refused connect's 502.
    let statuses: Vec<u16> = (0..5).map(|_| get(pier.addr(), &req("/")).status).collect();
    assert_eq!(statuses, vec![502; 5]);
    a.restart();
    // Down in this worker for 30 s more, yet found at once: within two requests
    // (round robin over the two down servers), and then every time.
    let mut got = Vec::new();
    for _ in 0..4 {
        let r = get(pier.addr(), &req("/"));
        got.push((r.status, String::from_utf8_lossy(&r.body).to_string()));
    }
    assert!(got[..2].iter().any(|(s, _)| *s == 200), "{got:?}");
    assert!(
        got[2..].iter().all(|(s, body)| *s == 200 && body == "a"),
        "{got:?}"
    );
}

#[test]
fn active_health_check_takes_a_server_out_and_back() {
    let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let h = healthy.clone();
    let up = Upstream::start(move |r| {
        if r.target == "/health" {
            if h.load(std::sync::atomic::Ordering::SeqCst) {
                ok("fine")
            } else {
                Reply::Http(503, Vec::new(), b"sick".to_vec())
            }
        } else {
            ok("app")
        }
    });
    let pier = start(
        &[(up.addr, 1)],
        "health_check = { kind = \"http\", path = \"/health\", interval = \"50ms\", timeout = \"500ms\", rise = 2, fall = 2 }",
        "",
    );
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    healthy.store(false, std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(get(pier.addr(), &req("/")).status, 503);
    healthy.store(true, std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
}

#[test]
fn websocket_upgrade_is_tunnelled_both_ways() {
    let up = Upstream::start(|_| Reply::WebSocketEcho);
    let pier = start(&[(up.addr, 1)], "", "");
    let mut s = connect(pier.addr());
    s.write_all(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("Upgrade: websocket"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("connection: upgrade"),
        "{head}"
    );
    let seen = &up.requests()[0];
    assert_eq!(seen.header("upgrade"), Some("websocket"));
    for msg in [
        &b"ping"[..],
        &[0x81, 0x05, b'h', b'e', b'l', b'l', b'o'],
        &vec![7u8; 100_000],
    ] {
        s.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        s.read_to_end(&mut rest).unwrap(),
        0,
        "closed after the client did"
    );
}

#[test]
fn slow_client_stops_upstream_reads_and_memory_stays_bounded() {
    const LEN: u64 = 300 * 1024 * 1024;
    let up = Upstream::start(|_| Reply::Stream(LEN));
    let pier = start(&[(up.addr, 1)], "", "");
    let before = common::rss_kib(pier.pid());
    let mut s = connect(pier.addr());
    s.write_all(req("/big").as_bytes()).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    let mut head_done = false;
    let mut pos_in_body = 0u64;
    let check = |data: &[u8], pos: &mut u64| {
        for &b in data {
            assert_eq!(b as u64, *pos % 251, "byte {pos}");
            *pos += 1;
        }
    };
    // Read a little, then stall: Pier must stop reading from the upstream.
    while got < 2 << 20 {
        let n = s.read(&mut buf).unwrap();
        let mut data = &buf[..n];
        if !head_done {
            let end = common::find(data, b"\r\n\r\n").unwrap() + 4;
            assert!(
                String::from_utf8_lossy(&data[..end]).contains(&format!("Content-Length: {LEN}"))
            );
            data = &data[end..];
            head_done = true;
        }
        check(data, &mut pos_in_body);
        got += data.len() as u64;
    }
    std::thread::sleep(Duration::from_millis(1500));
    let stalled = common::rss_kib(pier.pid());
    assert!(
        stalled < before + 16 * 1024,
        "RSS grew from {before} KiB to {stalled} KiB while the client stalled"
    );
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "body cut short at {got}");
        check(&buf[..n], &mut pos_in_body);
        got += n as u64;
        if got == LEN {
            break;
        }
    }
    let after = common::rss_kib(pier.pid());
    assert!(after < before + 16 * 1024, "RSS {before} -> {after} KiB");
}

#[test]
fn head_and_304_keep_the_upstream_length() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/304" => Reply::Raw(
            b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 99\r\n\r\n".to_vec(),
        ),
        _ => Reply::Http(200, Vec::new(), vec![b'z'; 1234]),
    });
    let pier = start(&[(up.addr, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"HEAD /x HTTP/1.1\r\nHost: h\r\n\r\n");
    let resp = r.response(true).unwrap();
    assert_eq!(resp.header("content-length"), Some("1234"));
    r.send(req("/304").as_bytes());
    let resp = r.response(false).unwrap();
    assert_eq!(resp.status, 304);
    assert_eq!(resp.header("content-length"), Some("99"));
    r.send(req("/x").as_bytes());
    assert_eq!(r.response(false).unwrap().body.len(), 1234);
    assert_eq!(up.accepts(), 1);
}

#[test]
fn quick_proxy_flag_serves_without_a_config() {
    let up = Upstream::start(|r| ok(&format!("quick {}", r.target)));
    let target = format!("http://{}", up.addr);
    let pier = Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--no-tls",
        "--workers",
        "1",
        "--proxy",
        &target,
    ]);
    let resp = get(pier.addr(), &req("/q"));
    assert_eq!(resp.body, b"quick /q");
}

#[test]
fn upstream_closing_idle_connections_never_costs_a_client_request() {
    // Each response leaves a pooled connection the upstream then closes, as a
    // server with a short keep-alive timeout does; POSTs must not see a 502.
    let up = Upstream::start(|_| {
        Reply::RawClose(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
    });
    let pier = start(&[(up.addr, 1)], "retries = 0\nmax_fails = 0", "");
    let mut r = Reader::new(connect(pier.addr()));
    for i in 0..10 {
        r.send(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx");
        let resp = r.response(false).unwrap();
        assert_eq!(resp.status, 200, "request {i}");
        if i % 3 == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(
        up.requests().len(),
        10,
        "each request reached the upstream once"
    );
}

#[test]
fn idle_pooled_connections_expire() {
    let up = Upstream::start(|_| ok("x"));
    let pier = start(&[(up.addr, 1)], "idle_timeout = \"300ms\"", "");
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    assert_eq!(up.accepts(), 1);
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(get(pier.addr(), &req("/")).status, 200);
    assert_eq!(
        up.accepts(),
        2,
        "the idle connection was closed and a new one opened"
    );
}

/// `n` requests for `/slow` at once, each on its own client connection; their
/// statuses.
fn burst(pier: SocketAddr, n: usize) -> Vec<u16> {
    let clients: Vec<_> = (0..n)
        .map(|_| std::thread::spawn(move || get(pier, &req("/slow")).status))
        .collect();
    clients.into_iter().map(|c| c.join().unwrap()).collect()
}

/// An upstream whose `/slow` answers after 300 ms, so a burst of them is in
/// flight at once.
fn slow_upstream() -> Upstream {
    Upstream::start(|r| {
        if r.target == "/slow" {
            std::thread::sleep(Duration::from_millis(300));
        }
        ok("x")
    })
}

#[test]
fn the_pool_keeps_the_connections_a_burst_needed() {
    // Six requests at once take six upstream connections. max_idle is one,
    // yet the six stay pooled for the next burst rather than five being
    // closed and dialled again.
    let up = slow_upstream();
    let pier = start(&[(up.addr, 1)], "max_idle = 1", "");
    assert_eq!(burst(pier.addr(), 6), vec![200; 6]);
    assert_eq!(up.accepts(), 6);
    assert_eq!(burst(pier.addr(), 6), vec![200; 6]);
    assert_eq!(
        up.accepts(),
        6,
        "the second burst went over the first one's connections"
    );
}

#[test]
fn a_quiet_pool_falls_back_to_max_idle() {
    let up = slow_upstream();
    let pier = start(
        &[(up.addr, 1)],
        "max_idle = 1\nidle_peak_window = \"100ms\"",
        "",
    );
    assert_eq!(burst(pier.addr(), 6), vec![200; 6]);
    assert_eq!(up.accepts(), 6);
    // Many windows without a request, and the sweep (once a second) closes
    // all but max_idle: the next burst reuses one and dials five.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(burst(pier.addr(), 6), vec![200; 6]);
    assert_eq!(up.accepts(), 11);
}

#[test]
fn client_cert_header_carries_the_verified_subject_and_never_a_forged_one() {
    let up = Upstream::start(|_| ok("x"));
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "Proxy Test CA");
    let (cert, key) = pki.server("srv", "a.test", &["a.test"], None);
    let ca = pki.ca_path();
    // Client certificates optional, so one listener serves clients with and
    // without one; a plain listener next to it.
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
[listener.tls]
cert = "{}"
key = "{}"
client_ca = "{}"
client_auth = "optional"
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
client_cert_header = "X-Client-Subject"
"#,
            cert.display(),
            key.display(),
            ca.display(),
            up.addr
        ),
        &[],
    );
    let forged = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Client-Subject: CN=admin\r\n\r\n";

    let alice = pki.client("alice", "alice");
    let mut c = connect_tls(
        pier.https[0],
        "a.test",
        &verifying_client(&ca, Some(&alice)),
    )
    .unwrap();
    // Twice on one connection: the subject belongs to the connection, not to
    // its first request.
    for _ in 0..2 {
        assert_eq!(tls_request(&mut c, forged).unwrap().status, 200);
    }
    let mut anonymous = connect_tls(pier.https[0], "a.test", &verifying_client(&ca, None)).unwrap();
    assert_eq!(tls_request(&mut anonymous, forged).unwrap().status, 200);
    assert_eq!(get(pier.addr(), forged).status, 200);

    let seen = up.requests();
    assert_eq!(seen.len(), 4);
    for r in &seen[..2] {
        assert_eq!(r.count("x-client-subject"), 1, "{}", r.head);
        assert_eq!(
            r.header("x-client-subject"),
            Some("O=Pier Tests,CN=alice"),
            "{}",
            r.head
        );
        assert_eq!(r.header("x-forwarded-proto"), Some("https"));
    }
    assert!(
        seen[2].header("x-client-subject").is_none(),
        "TLS without a client certificate: {}",
        seen[2].head
    );
    assert!(
        seen[3].header("x-client-subject").is_none(),
        "plain HTTP: {}",
        seen[3].head
    );
    assert_eq!(seen[3].header("x-forwarded-proto"), Some("http"));
}

#[test]
fn tls_to_the_upstream_verifies_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let origin = Pier::with_config(
        &format!(
            "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ cert = \"{}\", key = \"{}\" }}\n[[route]]\nhandler = \"respond\"\nbody = \"over tls\"\n",
            cert.display(),
            key.display()
        ),
        &[],
    );
    let tls_addr = origin.https[0];
    let pier = start(
        &[(tls_addr, 1)],
        &format!(
            "tls = {{ sni = \"localhost\", ca = \"{}\" }}",
            cert.display()
        ),
        "",
    );
    let mut r = Reader::new(connect(pier.addr()));
    for _ in 0..3 {
        r.send(req("/").as_bytes());
        let resp = r.response(false).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"over tls"[..]));
    }
    // A name the certificate does not cover fails the handshake: 502.
    let wrong = start(
        &[(tls_addr, 1)],
        &format!(
            "tls = {{ sni = \"other.example\", ca = \"{}\" }}\nretries = 0",
            cert.display()
        ),
        "",
    );
    assert_eq!(get(wrong.addr(), &req("/")).status, 502);
    // verify = false accepts it.
    let lax = start(&[(tls_addr, 1)], "tls = { verify = false }", "");
    assert_eq!(get(lax.addr(), &req("/")).body, b"over tls");
}

/// nginx (one worker, foreground) serving `root`, killed by PID on drop.
struct Nginx(
    std::process::Child,
    SocketAddr,
    #[allow(dead_code)] tempfile::TempDir,
);

impl Nginx {
    fn start() -> Option<Nginx> {
        let bin = common::which("nginx").or_else(|| {
            let p = std::path::PathBuf::from("/usr/sbin/nginx");
            p.is_file().then_some(p)
        })?;
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let root = dir.path().join("www");
        std::fs::create_dir(&root).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
        std::fs::write(root.join("big.bin"), data).unwrap();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n access_log off;\n client_body_temp_path {d}/cb;\n proxy_temp_path {d}/p;\n fastcgi_temp_path {d}/f;\n uwsgi_temp_path {d}/u;\n scgi_temp_path {d}/s;\n server {{\n  listen 127.0.0.1:{port};\n  root {};\n  location = /echo-length {{ return 200 \"$content_length|$http_transfer_encoding\"; }}\n }}\n}}\n",
            root.display()
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = std::process::Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..200 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Some(Nginx(child, addr, dir));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn nginx_as_the_upstream() {
    let Some(nginx) = Nginx::start() else {
        eprintln!("nginx not installed; skipping");
        return;
    };
    let pier = start(&[(nginx.1, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(req("/big.bin").as_bytes());
    let resp = r.response(false).unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body.len(), 3_000_000);
    assert!(resp
        .body
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i % 241) as u8));
    r.send(b"HEAD /big.bin HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(
        r.response(true).unwrap().header("content-length"),
        Some("3000000")
    );
    r.send(b"POST /echo-length HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    let resp = r.response(false).unwrap();
    assert_eq!(resp.status, 200);
    assert!(
        resp.body.ends_with(b"|chunked"),
        "nginx saw the body chunked"
    );
    r.send(req("/missing").as_bytes());
    assert_eq!(r.response(false).unwrap().status, 404);
}

/// Scrapes the admin listener's `/metrics`.
fn metrics(admin: SocketAddr) -> String {
    let resp = get(admin, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(resp.status, 200);
    String::from_utf8(resp.body).unwrap()
}

#[test]
fn max_in_flight_answers_503_with_retry_after_without_touching_the_upstream() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let release = Arc::new(AtomicBool::new(false));
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let up = {
        let (release, now, peak) = (release.clone(), now.clone(), peak.clone());
        Upstream::start(move |r| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            if r.target == "/hold" {
                let deadline = Instant::now() + Duration::from_secs(20);
                while !release.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            now.fetch_sub(1, Ordering::SeqCst);
            ok("done")
        })
    };
    let config = proxy_config(&[(up.addr, 1)], "max_in_flight = 3\nretry_after = \"7s\"", "")
        .replace(
            "[server]",
            "[admin]\nlisten = \"127.0.0.1:0\"\n[access_log]\npath = \"{dir}/access.log\"\nflush_interval = \"50ms\"\n[server]",
        );
    let pier = Pier::with_config(&config, &[]);
    let addr = pier.addr();
    let held: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(move || get(addr, &req("/hold"))))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while up.requests().len() < 3 {
        assert!(Instant::now() < deadline, "the held requests never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }

    // The fourth is refused at once, while the three are still held.
    let asked = Instant::now();
    let resp = get(addr, &req("/hold"));
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("retry-after"), Some("7"));
    assert!(String::from_utf8_lossy(&resp.body).contains("503"));
    // A refused request with its body already sent keeps its connection.
    let mut r = Reader::new(connect(addr));
    r.send(b"POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
    let resp = r.response(false).unwrap();
    assert_eq!((resp.status, resp.header("connection")), (503, None));
    r.send(req("/again").as_bytes());
    assert_eq!(r.response(false).unwrap().status, 503);
    assert_eq!(
        up.requests().len(),
        3,
        "no refused request reached the upstream"
    );
    assert!(!release.load(Ordering::SeqCst));

    release.store(true, Ordering::SeqCst);
    for h in held {
        let resp = h.join().unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"done"[..]));
    }
    // Slots are given back as requests finish: all pass again, also on the
    // connection that was refused before.
    r.send(req("/after").as_bytes());
    assert_eq!(r.response(false).unwrap().status, 200);
    let more: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(move || get(addr, &req("/x")).status))
        .collect();
    for h in more {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "the upstream saw at most 3 at once"
    );
    assert_eq!(up.requests().len(), 7);

    let text = metrics(pier.admin.unwrap());
    assert!(text.contains("pier_upstream_rejected_total 3\n"), "{text}");
    assert!(text.contains("pier_upstream_requests_total 7\n"), "{text}");
    let log = pier.root().join("access.log");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        let refused = lines.lines().filter(|l| l.contains("\" 503 ")).count();
        let answered = lines.lines().filter(|l| l.contains("\" 200 ")).count();
        if (refused == 3 && answered == 7) || Instant::now() > deadline {
            assert_eq!(refused, 3, "{lines}");
            assert_eq!(
                lines.lines().filter(|l| l.contains("\" 200 ")).count(),
                7,
                "{lines}"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What an [`EarlyUpstream`] does after its answer.
#[derive(Clone, Copy)]
enum AfterAnswer {
    /// Close the socket (with the request body unread, the kernel resets it).
    Close,
    /// Reset the connection (SO_LINGER 0).
    Reset,
    /// Shut down its read side and keep the connection open.
    ShutdownRead,
    /// Keep the connection open without reading.
    Hold,
}

/// An origin that reads only the head of each request, answers at once with
/// `answer` whatever the body, never reads the body, then does `after`.
struct EarlyUpstream {
    addr: SocketAddr,
    heads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl EarlyUpstream {
    fn start(answer: &'static [u8], after: AfterAnswer) -> EarlyUpstream {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let heads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, st) = (heads.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (h, st) = (h.clone(), st.clone());
                std::thread::spawn(move || {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match s.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    if s.write_all(answer).is_err() {
                        return;
                    }
                    match after {
                        AfterAnswer::Close => {}
                        AfterAnswer::Reset => {
                            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                        }
                        AfterAnswer::ShutdownRead | AfterAnswer::Hold => {
                            if matches!(after, AfterAnswer::ShutdownRead) {
                                let _ = s.shutdown(std::net::Shutdown::Read);
                            }
                            let deadline = Instant::now() + Duration::from_secs(30);
                            while !st.load(Ordering::SeqCst) && Instant::now() < deadline {
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        }
                    }
                });
            }
        });
        EarlyUpstream { addr, heads, stop }
    }

    fn heads(&self) -> usize {
        self.heads.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for EarlyUpstream {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Sends `head` and then `body_len` body bytes (as 64 KiB chunks when
/// `chunked`) from another thread, while this one reads whatever comes back
/// until the server closes. Returns those bytes and how many body bytes were
/// written before the server stopped taking them.
fn stream_body(addr: SocketAddr, head: &str, body_len: usize, chunked: bool) -> (Vec<u8>, usize) {
    let mut s = connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let head = head.to_string();
    let writer = std::thread::spawn(move || {
        if w.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let block = vec![b'x'; 65536];
        let mut sent = 0;
        while sent < body_len {
            let n = (body_len - sent).min(block.len());
            let r = if chunked {
                let mut c = format!("{n:x}\r\n").into_bytes();
                c.extend_from_slice(&block[..n]);
                c.extend_from_slice(b"\r\n");
                w.write_all(&c)
            } else {
                w.write_all(&block[..n])
            };
            if r.is_err() {
                return sent;
            }
            sent += n;
        }
        if chunked {
            let _ = w.write_all(b"0\r\n\r\n");
        }
        sent
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the answer: {e} after {got:?}"),
        }
    }
    (got, writer.join().unwrap())
}

/// Status, head and body of the one response in `raw` (Content-Length framed).
fn parse_one(raw: &[u8]) -> (u16, String, Vec<u8>) {
    let end = common::find(raw, b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("Content-Length");
    assert_eq!(raw.len() - end, len, "exactly one response: {head}");
    (status, head, raw[end..].to_vec())
}

const BIG_BODY: usize = 50 * 1024 * 1024;

fn big_body_config(addr: SocketAddr, upstream_extra: &str) -> String {
    proxy_config(&[(addr, 1)], upstream_extra, "")
        .replace("[server]", "[http]\nmax_body_bytes = 104857600\n[server]")
}

#[test]
fn upstream_answering_413_and_closing_mid_body_is_relayed_not_502() {
    let up = EarlyUpstream::start(
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 16\r\nConnection: close\r\n\r\nupstream refused",
        AfterAnswer::Close,
    );
    let pier = Pier::with_config(&big_body_config(up.addr, "retries = 0\nmax_fails = 1"), &[]);
    let heads = [
        (
            format!("PUT /up HTTP/1.1\r\nHost: h\r\nContent-Length: {BIG_BODY}\r\n\r\n"),
            false,
        ),
        (
            "PUT /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".to_string(),
            true,
        ),
    ];
    for (head, chunked) in heads {
        let (raw, sent) = stream_body(pier.addr(), &head, BIG_BODY, chunked);
        let (status, resp_head, body) = parse_one(&raw);
        assert_eq!(status, 413, "chunked={chunked}: {resp_head}");
        assert_eq!(body, b"upstream refused");
        assert!(resp_head.contains("Connection: close\r\n"), "{resp_head}");
        assert!(
            sent < BIG_BODY,
            "the rest of the body was not taken (sent {sent})"
        );
    }
    assert_eq!(up.heads(), 2);
    // An early answer is an answer: the server was not marked down.
    assert_eq!(get(pier.addr(), &req("/")).status, 413);
    assert!(!pier.log_lines().join("\n").contains("marked down"));
}

#[test]
fn upstream_answering_early_without_reading_the_body_is_relayed_at_once() {
    for after in [AfterAnswer::Hold, AfterAnswer::ShutdownRead] {
        let up = EarlyUpstream::start(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly", after);
        // Without watching the upstream while sending, the request would wait
        // for the body write to time out (read_timeout) and end in a 504.
        let pier = Pier::with_config(&big_body_config(up.addr, "read_timeout = \"30s\""), &[]);
        let started = Instant::now();
        let (raw, sent) = stream_body(
            pier.addr(),
            &format!("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: {BIG_BODY}\r\n\r\n"),
            BIG_BODY,
            false,
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        let (status, head, body) = parse_one(&raw);
        assert_eq!((status, body.as_slice()), (200, &b"early"[..]), "{head}");
        assert!(head.contains("Connection: close\r\n"), "{head}");
        assert!(sent < BIG_BODY, "sent {sent}");
    }
}

#[test]
fn upstream_resetting_after_a_full_response_is_not_a_502() {
    // The upstream answers in full while the body is still coming, then resets
    // the connection (SO_LINGER 0) rather than closing it.
    let up = EarlyUpstream::start(
        b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        AfterAnswer::Reset,
    );
    let pier = Pier::with_config(&big_body_config(up.addr, "retries = 0"), &[]);
    for chunked in [false, true] {
        let head = if chunked {
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
        } else {
            format!(
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
                BIG_BODY / 5
            )
        };
        let (raw, _) = stream_body(pier.addr(), &head, BIG_BODY / 5, chunked);
        let (status, head, body) = parse_one(&raw);
        assert_eq!((status, body.as_slice()), (201, &b"ok"[..]), "{head}");
    }
    assert_eq!(up.heads(), 2);
}

fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn one_gigabyte_response_grows_rss_by_less_than_16_mib() {
    const LEN: u64 = 1 << 30;
    let up = Upstream::start(|r| match r.target.as_str() {
        "/warm" => Reply::Stream(8 << 20),
        _ => Reply::Stream(LEN),
    });
    let pier = start(&[(up.addr, 1)], "", "");
    let pid = pier.pid();
    // Warm up the buffers and the pool first, so only growth is measured.
    assert_eq!(get(pier.addr(), &req("/warm")).body.len(), 8 << 20);
    let before = vm_kib(pid, "VmRSS:");
    let hwm_before = vm_kib(pid, "VmHWM:");
    let started = Instant::now();
    let mut s = connect(pier.addr());
    s.write_all(req("/big").as_bytes()).unwrap();
    // Generated bytes are `i % 251`: compare each read against the pattern.
    let pattern: Vec<u8> = (0..(1 << 20) + 251u32).map(|i| (i % 251) as u8).collect();
    let mut buf = vec![0u8; 1 << 20];
    let mut head = Vec::new();
    while common::find(&head, b"\r\n\r\n").is_none() {
        let n = s.read(&mut buf[..1]).unwrap();
        assert_eq!(n, 1);
        head.push(buf[0]);
    }
    assert!(String::from_utf8_lossy(&head).contains(&format!("Content-Length: {LEN}")));
    let (mut got, mut peak, mut next_sample) = (0u64, before, 0u64);
    while got < LEN {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "body cut short at {got}");
        let at = (got % 251) as usize;
        assert!(buf[..n] == pattern[at..at + n], "bytes differ near {got}");
        got += n as u64;
        if got >= next_sample {
            peak = peak.max(vm_kib(pid, "VmRSS:"));
            next_sample += 32 << 20;
        }
    }
    let took = started.elapsed();
    let hwm = vm_kib(pid, "VmHWM:");
    // A new high-water mark catches a peak between samples.
    if hwm > hwm_before {
        peak = peak.max(hwm);
    }
    let growth = peak.saturating_sub(before);
    eprintln!(
        "1 GiB through the proxy in {took:?}: RSS {before} KiB, peak {peak} KiB (+{growth} KiB)"
    );
    assert!(
        growth < 16 * 1024,
        "RSS grew by {growth} KiB ({before} -> {peak})"
    );
}

#[test]
fn interim_100_from_the_upstream_does_not_stop_the_request_body() {
    // An origin that says 100 Continue unasked once it has a head, then reads
    // the whole body and answers with its length.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let end = loop {
                        if let Some(i) = common::find(&buf, b"\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    buf.drain(..end);
                    // Not reading for a moment lets a large body fill the
                    // socket buffers, so the 100 comes while Pier is blocked
                    // writing.
                    std::thread::sleep(Duration::from_millis(300));
                    if s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                        return;
                    }
                    while buf.len() < len {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Vec<u8> = buf.drain(..len).collect();
                    let text = format!("{} {}", body.len(), body.iter().all(|&b| b == b'x'));
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if s.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let pier = Pier::with_config(&big_body_config(addr, "retries = 0"), &[]);
    let mut r = Reader::new(connect(pier.addr()));
    // A body large enough that the 100 arrives while it is being written...
    let len = 8 << 20;
    r.send(format!("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: {len}\r\n\r\n").as_bytes());
    r.send(&vec![b'x'; len]);
    let resp = r.response(false).unwrap();
    assert_eq!(
        (resp.status, resp.body),
        (200, format!("{len} true").into_bytes())
    );
    // ...and one that pauses, so the 100 arrives while waiting for the client.
    r.send(b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nxxx");
    std::thread::sleep(Duration::from_millis(300));
    r.send(b"xxx");
    let resp = r.response(false).unwrap();
    assert_eq!((resp.status, resp.body), (200, b"6 true".to_vec()));
}

#[test]
fn request_bodies_and_early_answers_over_tls_to_the_upstream() {
    // The origin is a Pier over TLS whose fixed route refuses bodies over its
    // default max_body_bytes (1 MiB) with an early 413.
    let origin = Pier::with_config(
        "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = { self_signed = true }\n[[route]]\nhandler = \"respond\"\nbody = \"taken\"\n",
        &[],
    );
    let pier = Pier::with_config(
        &big_body_config(origin.https[0], "tls = { verify = false }\nretries = 0"),
        &[],
    );
    let mut r = Reader::new(connect(pier.addr()));
    for _ in 0..2 {
        r.send(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n");
        r.send(&vec![b'x'; 100_000]);
        let resp = r.response(false).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"taken"[..]));
    }
    let (raw, sent) = stream_body(
        pier.addr(),
        &format!("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: {BIG_BODY}\r\n\r\n"),
        BIG_BODY,
        false,
    );
    let (status, head, _) = parse_one(&raw);
    assert_eq!(status, 413, "{head}");
    assert!(head.contains("Connection: close\r\n"), "{head}");
    assert!(sent < BIG_BODY, "sent {sent}");
}

/// The early hints the origins below send.
const EARLY_HINTS: &[u8] = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";

/// An origin on raw sockets: to each request (a head without a body) it
/// sends `interim` at once, then waits for a word on `gate` (at most 10 s),
/// then answers `200 ok`.
fn interim_origin(interim: Vec<u8>, gate: std::sync::mpsc::Receiver<()>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(gate));
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let (interim, gate) = (interim.clone(), gate.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let end = loop {
                        if let Some(i) = common::find(&buf, b"\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    buf.drain(..end);
                    if s.write_all(&interim).is_err() {
                        return;
                    }
                    let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(10));
                    if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn early_hints_reach_http11_clients_before_the_answer_and_never_http10_ones() {
    let (go, gate) = std::sync::mpsc::channel();
    // Fields the route removes, replaces or that belong to the hop are not
    // hinted; Link is.
    let mut hints = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX-Internal: secret\r\nX-Frame-Options: SAMEORIGIN\r\nServer: origin\r\nConnection: x-hop\r\nX-Hop: 1\r\n\r\n".to_vec();
    // An interim head that hints nothing once those are out is not sent.
    hints.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\nX-Internal: secret\r\n\r\n");
    let origin = interim_origin(hints, gate);
    let pier = start(
        &[(origin, 1)],
        "",
        r#"response_headers = { remove = ["X-Internal"], set = { X-Frame-Options = "DENY" }, add = { X-Added = "1" } }"#,
    );
    let mut r = Reader::new(connect(pier.addr()));
    r.send(req("/page").as_bytes());
    // The 103 comes while the origin still holds its answer back.
    let early = r.response(false).unwrap();
    assert_eq!(early.status, 103);
    assert_eq!(
        early.headers,
        [("Link".to_string(), "</style.css>; rel=preload".to_string())]
    );
    go.send(()).unwrap();
    let resp = r.response(false).unwrap();
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"ok"[..]));
    assert_eq!(resp.header("x-frame-options"), Some("DENY"));
    assert_eq!(resp.header("x-added"), Some("1"));
    // The connection goes on as before.
    go.send(()).unwrap();
    r.send(req("/again").as_bytes());
    assert_eq!(r.response(false).unwrap().status, 103);
    assert_eq!(r.response(false).unwrap().status, 200);

    // HTTP/1.0 knows no interim answers: its client gets the final one alone.
    go.send(()).unwrap();
    let mut c = connect(pier.addr());
    c.write_all(b"GET /old HTTP/1.0\r\nHost: app.test\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(!text.contains("103"), "{text}");
    assert!(text.ends_with("\r\n\r\nok"), "{text}");
}

#[test]
fn an_upstream_sending_endless_interim_heads_gets_a_502() {
    let (_go, gate) = std::sync::mpsc::channel();
    let origin = interim_origin(EARLY_HINTS.repeat(20), gate);
    let pier = start(&[(origin, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(req("/").as_bytes());
    let mut statuses = Vec::new();
    loop {
        let resp = r.response(false).unwrap();
        statuses.push(resp.status);
        if resp.status >= 200 {
            break;
        }
    }
    // A handful relayed, then the run is a bad response.
    let early = statuses.len() - 1;
    assert!((1..=8).contains(&early), "{statuses:?}");
    assert!(statuses[..early].iter().all(|&s| s == 103), "{statuses:?}");
    assert_eq!(statuses[early], 502, "{statuses:?}");
}

#[test]
fn a_request_whose_interim_head_was_relayed_is_not_sent_to_another_server() {
    // One server hints then closes; a retry would reach the other.
    let hinting = Upstream::start(|_| Reply::RawClose(EARLY_HINTS.to_vec()));
    let other = Upstream::start(|_| ok("other"));
    let pier = start(&[(hinting.addr, 1), (other.addr, 1)], "retries = 1", "");
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let mut r = Reader::new(connect(pier.addr()));
        r.send(req("/").as_bytes());
        let first = r.response(false).unwrap();
        statuses.push(first.status);
        if first.status == 103 {
            statuses.push(r.response(false).unwrap().status);
        }
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [103, 200, 502]);
    assert_eq!(hinting.requests().len(), 1);
    assert_eq!(
        other.requests().len(),
        1,
        "the hinted request stayed where it was"
    );
}

#[test]
fn a_client_expecting_100_continue_gets_one_whatever_the_upstream_sends() {
    let (go, gate) = std::sync::mpsc::channel();
    let mut interim = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
    interim.extend_from_slice(EARLY_HINTS);
    let origin = interim_origin(interim, gate);
    let pier = start(&[(origin, 1)], "", "");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"POST /form HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    // Pier's own, as it waits for the body; the upstream's is not sent again.
    assert_eq!(r.response(false).unwrap().status, 100);
    r.send(b"hi");
    go.send(()).unwrap();
    let mut statuses = Vec::new();
    loop {
        let resp = r.response(false).unwrap();
        statuses.push(resp.status);
        if resp.status >= 200 {
            break;
        }
    }
    assert_eq!(statuses, [103, 200]);
}

#[test]
fn upstream_servers_are_written_as_strings_and_urls() {
    let plain = Upstream::start(|_| ok("plain"));
    let config = |servers: &str, extra: &str| {
        format!(
            "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = {servers}\n{extra}\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n"
        )
    };
    for servers in [
        format!("[\"{}\"]", plain.addr),
        format!("[\"http://{}\"]", plain.addr),
        format!("[\"http://{}/\"]", plain.addr),
    ] {
        let pier = Pier::with_config(&config(&servers, ""), &[]);
        let resp = get(pier.addr(), &req("/"));
        assert_eq!(
            (resp.status, resp.body.as_slice()),
            (200, &b"plain"[..]),
            "{servers}"
        );
    }
    // https:// means TLS to the server, with the group's `tls` settings.
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let origin = Pier::with_config(
        &format!(
            "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ cert = \"{}\", key = \"{}\" }}\n[[route]]\nhandler = \"respond\"\nbody = \"over tls\"\n",
            cert.display(),
            key.display()
        ),
        &[],
    );
    let servers = format!("[\"https://localhost:{}\"]", origin.https[0].port());
    let pier = Pier::with_config(
        &config(
            &servers,
            &format!("tls = {{ ca = \"{}\" }}", cert.display()),
        ),
        &[],
    );
    assert_eq!(get(pier.addr(), &req("/")).body, b"over tls");
}
