//! End-to-end HTTP/1.1 behaviour against a real `pier` process: raw bytes and curl.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{connect, get, which, Pier, Reader};

const RESPOND: &str = r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "static"
root = "{dir}"
[[route]]
path = "/fixed"
handler = "respond"
status = 200
body = "Hello, World!"
headers = { "Content-Type" = "text/plain" }
"#;

fn server() -> Pier {
    Pier::with_config(RESPOND, &[])
}

#[test]
fn pipelined_requests_are_answered_in_order_in_one_write() {
    let pier = server();
    std::fs::write(pier.root().join("a.txt"), "AAA").unwrap();
    std::fs::write(pier.root().join("b.txt"), "BBBB").unwrap();
    let mut r = Reader::new(connect(pier.addr()));
    let mut burst = String::new();
    for p in ["/a.txt", "/fixed", "/b.txt", "/missing", "/a.txt"] {
        burst.push_str(&format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n"));
    }
    r.send(burst.as_bytes());
    let bodies: Vec<(u16, Vec<u8>)> = (0..5)
        .map(|_| {
            let resp = r.response(false).unwrap();
            (resp.status, resp.body)
        })
        .collect();
    assert_eq!(bodies[0], (200, b"AAA".to_vec()));
    assert_eq!(bodies[1], (200, b"Hello, World!".to_vec()));
    assert_eq!(bodies[2], (200, b"BBBB".to_vec()));
    assert_eq!(bodies[3].0, 404);
    assert_eq!(bodies[4], (200, b"AAA".to_vec()));
}

#[test]
fn pipelined_burst_is_coalesced_into_one_segment() {
    let pier = server();
    let mut s = connect(pier.addr());
    let burst = "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n".repeat(16);
    s.write_all(burst.as_bytes()).unwrap();
    // All 16 responses arrive together: after the first read returns, the rest is
    // already there (a per-response write would trickle in over several reads).
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 16, "{text}");
}

#[test]
fn keep_alive_reuses_the_connection_and_http10_closes() {
    let pier = server();
    let mut r = Reader::new(connect(pier.addr()));
    for _ in 0..3 {
        r.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = r.response(false).unwrap();
        assert_eq!(resp.status, 200);
        assert!(resp.header("connection").is_none());
    }
    r.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(
        r.response(false).unwrap().header("connection"),
        Some("close")
    );
    assert!(r.closed());

    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /fixed HTTP/1.0\r\n\r\n");
    let resp = r.response(false).unwrap();
    assert_eq!(resp.status, 200);
    assert!(r.closed(), "HTTP/1.0 without keep-alive closes");

    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /fixed HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(
        r.response(false).unwrap().header("connection"),
        Some("keep-alive")
    );
    r.send(b"GET /fixed HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);
}

#[test]
fn chunked_upload_is_decoded_and_framing_kept() {
    let pier = server();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n");
    std::thread::sleep(Duration::from_millis(50));
    r.send(b"6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\nGET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);
    assert_eq!(r.response(false).unwrap().body, b"Hello, World!");

    // A bad chunk size is a framing error: 400 and close.
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 400);
    assert!(r.closed());
}

#[test]
fn expect_continue_gets_100_before_the_body_is_sent() {
    let pier = server();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"PUT /fixed HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 100);
    r.send(b"hello");
    assert_eq!(r.response(false).unwrap().status, 200);
}

#[test]
fn oversized_body_is_413() {
    let pier = Pier::with_config(
        &RESPOND.replace("[server]", "[http]\nmax_body_bytes = 10\n[server]"),
        &[],
    );
    let resp = get(
        pier.addr(),
        "POST /fixed HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world",
    );
    assert_eq!(resp.status, 413);
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n6\r\nworld!\r\n0\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 413);
}

#[test]
fn range_requests() {
    let pier = server();
    std::fs::write(pier.root().join("r.txt"), "0123456789").unwrap();
    let resp = get(
        pier.addr(),
        "GET /r.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=2-5\r\n\r\n",
    );
    assert_eq!(resp.status, 206);
    assert_eq!(resp.body, b"2345");
    assert_eq!(resp.header("content-range"), Some("bytes 2-5/10"));
    let resp = get(
        pier.addr(),
        "GET /r.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-3\r\n\r\n",
    );
    assert_eq!((resp.status, resp.body.as_slice()), (206, &b"789"[..]));
    let resp = get(
        pier.addr(),
        "GET /r.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=20-\r\n\r\n",
    );
    assert_eq!(resp.status, 416);
    assert_eq!(resp.header("content-range"), Some("bytes */10"));
}

#[test]
fn conditional_get_gives_304() {
    let pier = server();
    std::fs::write(pier.root().join("c.txt"), "cached").unwrap();
    let first = get(pier.addr(), "GET /c.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let etag = first.header("etag").expect("etag").to_string();
    let lm = first
        .header("last-modified")
        .expect("last-modified")
        .to_string();
    let resp = get(
        pier.addr(),
        &format!("GET /c.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n"),
    );
    assert_eq!(resp.status, 304);
    assert!(resp.body.is_empty());
    let resp = get(
        pier.addr(),
        &format!("GET /c.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {lm}\r\n\r\n"),
    );
    assert_eq!(resp.status, 304);
    let resp = get(
        pier.addr(),
        "GET /c.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
}

#[test]
fn traversal_attempts_never_return_the_file() {
    let pier = server();
    let outside = pier
        .root()
        .parent()
        .unwrap()
        .join(format!("secret-{}.txt", std::process::id()));
    std::fs::write(&outside, "SECRET").unwrap();
    let name = outside.file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&outside, pier.root().join("link.txt")).unwrap();
    let attempts = [
        format!("/../{name}"),
        format!("/%2e%2e/{name}"),
        format!("/%2E%2E/{name}"),
        format!("/..%2f{name}"),
        format!("/a/../../{name}"),
        format!("/.%2e/{name}"),
        format!("/%00/../{name}"),
        "/link.txt".to_string(),
        "/..\\..\\etc/passwd".to_string(),
        "//etc/passwd".to_string(),
        "/../../../../etc/passwd".to_string(),
    ];
    for path in attempts {
        let resp = get(
            pier.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"),
        );
        assert!(
            matches!(resp.status, 400 | 403 | 404),
            "{path} -> {}",
            resp.status
        );
        assert!(
            !String::from_utf8_lossy(&resp.body).contains("SECRET"),
            "{path} leaked the file"
        );
        assert!(
            !String::from_utf8_lossy(&resp.body).contains("root:"),
            "{path} leaked /etc/passwd"
        );
    }
    std::fs::remove_file(outside).unwrap();
}

#[test]
fn header_timeout_cuts_off_a_trickling_client_with_408() {
    let pier = Pier::with_config(
        &RESPOND.replace("[server]", "[http]\nheader_read_timeout = \"1s\"\n[server]"),
        &[],
    );
    let mut s = connect(pier.addr());
    let started = Instant::now();
    let head =
        b"GET /fixed HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut sent = 0;
    // One byte every 100 ms: the head would take > 5 s; the limit is 1 s from the start.
    while sent < head.len() && started.elapsed() < Duration::from_secs(4) {
        if s.write_all(&head[sent..sent + 1]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
        s.set_nonblocking(true).unwrap();
        let mut peek = [0u8; 64];
        let got = s.peek(&mut peek);
        s.set_nonblocking(false).unwrap();
        if matches!(got, Ok(n) if n > 0) {
            break;
        }
    }
    let mut r = Reader::new(s);
    let resp = r.response(false).expect("a 408 response");
    assert_eq!(resp.status, 408);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    assert!(r.closed());
}

#[test]
fn malformed_requests_get_their_status_and_the_next_client_is_served() {
    let pier = server();
    let cases: &[(&[u8], u16)] = &[
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
        ),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: t\r\nBad Name: x\r\n\r\n", 400),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n  folded\r\n\r\n",
            400,
        ),
        (b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
        (
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
            400,
        ),
        (
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n",
            400,
        ),
    ];
    for (raw, status) in cases {
        let mut r = Reader::new(connect(pier.addr()));
        r.send(raw);
        let resp = r
            .response(false)
            .unwrap_or_else(|| panic!("no response to {:?}", String::from_utf8_lossy(raw)));
        assert_eq!(resp.status, *status, "{:?}", String::from_utf8_lossy(raw));
        assert_eq!(resp.header("connection"), Some("close"));
        assert!(r.closed());
    }
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(10_000));
    assert_eq!(get(pier.addr(), &long_uri).status, 414);
    let many = format!(
        "GET / HTTP/1.1\r\nHost: t\r\n{}\r\n",
        "X-A: b\r\n".repeat(150)
    );
    assert_eq!(get(pier.addr(), &many).status, 431);
    let good = get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(
        (good.status, good.body.as_slice()),
        (200, &b"Hello, World!"[..])
    );
}

#[test]
fn head_has_headers_but_no_body() {
    let pier = server();
    std::fs::write(pier.root().join("h.txt"), "head body").unwrap();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"HEAD /h.txt HTTP/1.1\r\nHost: t\r\n\r\nHEAD /fixed HTTP/1.1\r\nHost: t\r\n\r\nGET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    let a = r.response(true).unwrap();
    assert_eq!(a.header("content-length"), Some("9"));
    let b = r.response(true).unwrap();
    assert_eq!(b.header("content-length"), Some("13"));
    let c = r.response(false).unwrap();
    assert_eq!(
        c.body, b"Hello, World!",
        "no stray body bytes before the third response"
    );
}

#[test]
fn large_file_arrives_whole() {
    let pier = server();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(pier.root().join("big.bin"), &data).unwrap();
    let resp = get(pier.addr(), "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert!(resp.body == data, "body differs");
    let resp = get(
        pier.addr(),
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000000-2099999\r\n\r\n",
    );
    assert!(resp.body == data[1_000_000..2_100_000]);
}

#[test]
fn graceful_shutdown_finishes_in_flight_request_and_exits_zero() {
    let mut pier = server();
    let data: Vec<u8> = (0..20_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(pier.root().join("big.bin"), &data).unwrap();
    let mut idle = Reader::new(connect(pier.addr()));
    idle.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.response(false).unwrap().status, 200);

    let mut s = connect(pier.addr());
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = vec![0u8; 65536];
    let n = s.read(&mut got).unwrap();
    got.truncate(n);
    pier.signal(rustix::process::Signal::TERM);
    // The idle keep-alive connection is closed promptly.
    assert!(idle.closed(), "idle connection closed on shutdown");
    // New connections are refused once accepting has stopped.
    std::thread::sleep(Duration::from_millis(200));
    // The in-flight download completes, read slowly.
    let mut buf = vec![0u8; 1 << 20];
    loop {
        std::thread::sleep(Duration::from_millis(5));
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("download broken: {e}"),
        }
    }
    let body_start = common::find(&got, b"\r\n\r\n").unwrap() + 4;
    assert_eq!(got.len() - body_start, data.len());
    assert!(got[body_start..] == data[..]);
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(std::net::TcpStream::connect(pier.addr()).is_err());
}

#[test]
fn curl_gets_files_and_index() {
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let pier = server();
    std::fs::write(pier.root().join("index.html"), "<h1>home</h1>").unwrap();
    std::fs::create_dir(pier.root().join("sub")).unwrap();
    let out = std::process::Command::new(&curl)
        .args(["-sS", "-D", "-", &format!("http://{}/", pier.addr())])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/html"),
        "{text}"
    );
    assert!(text.ends_with("<h1>home</h1>"), "{text}");
    // Two URLs on one curl run reuse the connection.
    let out = std::process::Command::new(&curl)
        .args(["-sS", "-v", "-o", "/dev/null", "-o", "/dev/null"])
        .arg(format!("http://{}/fixed", pier.addr()))
        .arg(format!("http://{}/fixed", pier.addr()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Re-using existing connection") || err.contains("Reusing existing"),
        "{err}"
    );
    let code = std::process::Command::new(&curl)
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("http://{}/sub/", pier.addr()),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&code.stdout), "404");
}

#[test]
fn autoindex_lists_a_directory() {
    let pier = Pier::with_config(
        &RESPOND.replace("root = \"{dir}\"", "root = \"{dir}\"\nautoindex = true"),
        &[],
    );
    std::fs::create_dir(pier.root().join("d")).unwrap();
    std::fs::write(pier.root().join("d/one.txt"), "1").unwrap();
    let resp = get(pier.addr(), "GET /d/ HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert!(String::from_utf8_lossy(&resp.body).contains("one.txt"));
    let resp = get(pier.addr(), "GET /d HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/d/"));
}

#[test]
fn open_file_cache_valid_is_applied() {
    // Cached (default 1 s): a file deleted right after a request is still served.
    let pier = server();
    std::fs::write(pier.root().join("gone.txt"), "still here").unwrap();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /gone.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);
    std::fs::remove_file(pier.root().join("gone.txt")).unwrap();
    r.send(b"GET /gone.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.response(false).unwrap().body, b"still here");

    // "0s": every request opens the path again.
    let pier = Pier::with_config(
        &RESPOND.replace(
            "root = \"{dir}\"",
            "root = \"{dir}\"\nopen_file_cache_valid = \"0s\"",
        ),
        &[],
    );
    std::fs::write(pier.root().join("gone.txt"), "still here").unwrap();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /gone.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);
    std::fs::remove_file(pier.root().join("gone.txt")).unwrap();
    r.send(b"GET /gone.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 404);
}
