//! Multi-range requests against a real `pier` process: `206 multipart/byteranges`
//! read byte for byte from raw sockets, with curl over plain HTTP and HTTPS, and
//! the bounds that keep a hostile Range header from amplifying.

mod common;

use std::io::Read;
use std::process::Command;

use common::{connect, find, get, which, Pier, Reader, Response};

/// File contents where every offset is recognisable: byte `i` is `i % 251`.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The embedded default over plain HTTP and HTTPS, one worker.
fn server() -> Pier {
    Pier::embedded(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-listen",
        "127.0.0.1:0",
        "--workers",
        "1",
    ])
}

/// The boundary from `multipart/byteranges; boundary=...`.
fn boundary(resp: &Response) -> String {
    let ct = resp.header("content-type").expect("a Content-Type");
    let b = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart/byteranges: {ct}"));
    b.to_string()
}

/// Exactly the body nginx's layout gives for `ranges` of `data`.
fn expected_body(data: &[u8], ranges: &[(usize, usize)], b: &str, part_type: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for &(first, last) in ranges {
        out.extend_from_slice(
            format!(
                "\r\n--{b}\r\nContent-Type: {part_type}\r\nContent-Range: bytes {first}-{last}/{}\r\n\r\n",
                data.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&data[first..=last]);
    }
    out.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    out
}

fn range_request(method: &str, path: &str, range: &str, extra: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n{extra}\r\n")
}

#[test]
fn multipart_body_is_exact_and_the_connection_stays_alive() {
    let pier = server();
    // Small (held in memory by the open-file cache) and large (sent by sendfile
    // per part, each part larger than the inline limits).
    let small = b"Hello, World!".to_vec();
    let large = pattern(3_000_000);
    std::fs::write(pier.root().join("small.txt"), &small).unwrap();
    std::fs::write(pier.root().join("large.bin"), &large).unwrap();
    let mut r = Reader::new(connect(pier.addr()));
    struct Case<'a> {
        path: &'a str,
        data: &'a [u8],
        range: &'a str,
        ranges: &'a [(usize, usize)],
        part_type: &'a str,
    }
    let cases = [
        Case {
            path: "/small.txt",
            data: &small,
            range: "bytes=0-4, 7-11",
            ranges: &[(0, 4), (7, 11)],
            part_type: "text/plain; charset=utf-8",
        },
        Case {
            path: "/large.bin",
            data: &large,
            range: "bytes=2000000-2199999,-100000,10-200009",
            ranges: &[
                (2_000_000, 2_199_999),
                (2_900_000, 2_999_999),
                (10, 200_009),
            ],
            part_type: "application/octet-stream",
        },
    ];
    for Case {
        path,
        data,
        range,
        ranges,
        part_type,
    } in cases
    {
        r.send(range_request("GET", path, range, "").as_bytes());
        let resp = r.response(false).expect("an answer");
        assert_eq!(resp.status, 206, "{path}");
        let b = boundary(&resp);
        assert_eq!(resp.header("content-range"), None, "{path}");
        assert!(resp.header("etag").is_some() && resp.header("last-modified").is_some());
        let want = expected_body(data, ranges, &b, part_type);
        // Reader took exactly Content-Length bytes: equal bodies mean the length
        // in the head was exact, and the next answer parses from the right place.
        assert_eq!(
            resp.header("content-length"),
            Some(want.len().to_string().as_str())
        );
        assert!(
            resp.body == want,
            "{path}: body differs from nginx's layout"
        );
    }
    // Still alive after both, and in step.
    r.send(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let resp = r.response(false).expect("keep-alive");
    assert_eq!((resp.status, resp.body), (200, small));
}

#[test]
fn head_gets_the_same_head_without_a_body() {
    let pier = server();
    let data = pattern(100_000);
    std::fs::write(pier.root().join("h.bin"), &data).unwrap();
    let get_resp = get(
        pier.addr(),
        &range_request("GET", "/h.bin", "bytes=0-0,-1", ""),
    );
    let mut r = Reader::new(connect(pier.addr()));
    r.send(range_request("HEAD", "/h.bin", "bytes=0-0,-1", "").as_bytes());
    let head = r.response(true).unwrap();
    assert_eq!(head.status, 206);
    boundary(&head);
    // Boundaries differ per answer but have one length, so the lengths agree.
    assert_eq!(
        head.header("content-length"),
        get_resp.header("content-length")
    );
    // No body followed the head: the next answer on the connection starts at once.
    r.send(b"GET /h.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=5-6\r\n\r\n");
    let next = r.response(false).unwrap();
    assert_eq!((next.status, next.body.as_slice()), (206, &data[5..7]));
}

#[test]
fn if_range_decides_between_multipart_and_the_whole_file() {
    let pier = server();
    std::fs::write(pier.root().join("i.txt"), "0123456789").unwrap();
    let etag = get(pier.addr(), "GET /i.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .header("etag")
        .unwrap()
        .to_string();
    let matching = get(
        pier.addr(),
        &range_request(
            "GET",
            "/i.txt",
            "bytes=0-1,8-9",
            &format!("If-Range: {etag}\r\n"),
        ),
    );
    assert_eq!(matching.status, 206);
    let b = boundary(&matching);
    assert_eq!(
        matching.body,
        expected_body(
            b"0123456789",
            &[(0, 1), (8, 9)],
            &b,
            "text/plain; charset=utf-8"
        )
    );
    let stale = get(
        pier.addr(),
        &range_request("GET", "/i.txt", "bytes=0-1,8-9", "If-Range: \"old\"\r\n"),
    );
    assert_eq!(
        (stale.status, stale.body.as_slice()),
        (200, &b"0123456789"[..])
    );
}

#[test]
fn unsatisfiable_sets_get_416_and_one_satisfiable_range_a_plain_206() {
    let pier = server();
    std::fs::write(pier.root().join("u.txt"), "0123456789").unwrap();
    let resp = get(
        pier.addr(),
        &range_request("GET", "/u.txt", "bytes=10-,20-30,-0", ""),
    );
    assert_eq!(resp.status, 416);
    assert_eq!(resp.header("content-range"), Some("bytes */10"));
    let resp = get(
        pier.addr(),
        &range_request("GET", "/u.txt", "bytes=50-60,3-4", ""),
    );
    assert_eq!(resp.status, 206);
    assert_eq!(resp.header("content-range"), Some("bytes 3-4/10"));
    assert_eq!(resp.body, b"34");
}

/// Reads everything the server sends for one request on a closing connection.
fn raw_answer(pier: &Pier, request: &str) -> Vec<u8> {
    let mut s = connect(pier.addr());
    std::io::Write::write_all(&mut s, request.as_bytes()).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    all
}

#[test]
fn hostile_range_headers_cost_no_more_than_a_plain_get() {
    let pier = server();
    let len = 50_000;
    let data = pattern(len);
    std::fs::write(pier.root().join("x.bin"), &data).unwrap();
    let plain = raw_answer(
        &pier,
        "GET /x.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let ranges = |members: Vec<String>| members.join(",");
    let hostile = [
        // Thousands of one-byte ranges (the CVE-2011-3192 shape).
        ranges((0..2000).map(|i| format!("{i}-{i}")).collect()),
        // The same byte over and over.
        ranges(vec!["0-0".to_string(); 2000]),
        // Few ranges, each nearly the whole file.
        ranges(vec!["0-".to_string(); 20]),
        ranges(vec!["-49999".to_string(), "1-".to_string()]),
        // One more than the bound.
        ranges(
            (0..=pier_max_ranges())
                .map(|i| format!("{}-{}", i * 10, i * 10))
                .collect(),
        ),
    ];
    for range in &hostile {
        let all = raw_answer(
            &pier,
            &range_request(
                "GET",
                "/x.bin",
                &format!("bytes={range}"),
                "Connection: close\r\n",
            ),
        );
        let head_end = find(&all, b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&all[..head_end]);
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        assert!(all[head_end..] == data[..], "the whole file, once");
        // Same bytes on the wire as a plain GET, give or take the Date line.
        assert!(
            all.len().abs_diff(plain.len()) < 8,
            "{} vs {}",
            all.len(),
            plain.len()
        );
    }
    // At the bound, one-byte ranges are honoured and the answer stays small:
    // each part costs its head, about a hundred bytes.
    let at_bound = (0..pier_max_ranges())
        .map(|i| format!("{}-{}", i * 10, i * 10))
        .collect::<Vec<_>>()
        .join(",");
    let resp = get(
        pier.addr(),
        &range_request("GET", "/x.bin", &format!("bytes={at_bound}"), ""),
    );
    assert_eq!(resp.status, 206);
    let parts = resp
        .body
        .windows(15)
        .filter(|w| w == b"Content-Range: ")
        .count();
    assert_eq!(parts, pier_max_ranges());
    assert!(
        resp.body.len() < pier_max_ranges() * 128,
        "{}",
        resp.body.len()
    );
}

/// The bound on ranges per request, documented in the README.
fn pier_max_ranges() -> usize {
    pier::handler::static_files::MAX_RANGES
}

#[test]
fn curl_reads_multipart_over_http_and_https() {
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; skipped");
        return;
    };
    let pier = server();
    // Large enough that TLS sends each part in several bounded chunks.
    let data = pattern(1_500_000);
    std::fs::write(pier.root().join("c.bin"), &data).unwrap();
    let ranges = [(0usize, 9usize), (300_000, 899_999), (1_499_990, 1_499_999)];
    let http = format!("http://127.0.0.1:{}/c.bin", pier.addr().port());
    let https = format!("https://127.0.0.1:{}/c.bin", pier.https[0].port());
    // HTTPS twice: HTTP/1.1, then HTTP/2 as ALPN chooses it.
    for (url, protocol) in [
        (&http, "--http1.1"),
        (&https, "--http1.1"),
        (&https, "--http2"),
    ] {
        let out = Command::new(&curl)
            .args(["-sSk", "--max-time", "20", "-D", "-", protocol])
            .args(["-r", "0-9,300000-899999,-10"])
            .arg(url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let all = out.stdout;
        let head_end = find(&all, b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&all[..head_end]).to_string();
        let status = if protocol == "--http2" {
            "HTTP/2 206"
        } else {
            "HTTP/1.1 206"
        };
        assert!(head.starts_with(status), "{url} {protocol}: {head}");
        let b = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(": ")?;
                let value = value.strip_prefix("multipart/byteranges; boundary=")?;
                name.eq_ignore_ascii_case("content-type").then_some(value)
            })
            .unwrap_or_else(|| panic!("{url}: {head}"))
            .trim()
            .to_string();
        let want = expected_body(&data, &ranges, &b, "application/octet-stream");
        assert!(
            all[head_end..] == want[..],
            "{url} {protocol}: body differs"
        );
    }
}

#[test]
fn pipelined_multipart_answers_stay_in_order() {
    let pier = server();
    let small = b"0123456789".to_vec();
    let large = pattern(1_000_000);
    std::fs::write(pier.root().join("p.txt"), &small).unwrap();
    std::fs::write(pier.root().join("p.bin"), &large).unwrap();
    // One write: a multipart answer sent part by part after its head, one
    // built whole in the output buffer, then a plain answer.
    let mut burst = range_request("GET", "/p.bin", "bytes=0-299999,-300000", "");
    burst.push_str(&range_request("GET", "/p.txt", "bytes=0-0,9-9", ""));
    burst.push_str("GET /p.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut r = Reader::new(connect(pier.addr()));
    r.send(burst.as_bytes());
    let first = r.response(false).unwrap();
    assert_eq!(first.status, 206);
    let b = boundary(&first);
    let want = expected_body(
        &large,
        &[(0, 299_999), (700_000, 999_999)],
        &b,
        "application/octet-stream",
    );
    assert!(first.body == want, "first answer differs");
    let second = r.response(false).unwrap();
    let b = boundary(&second);
    assert_eq!(
        second.body,
        expected_body(&small, &[(0, 0), (9, 9)], &b, "text/plain; charset=utf-8")
    );
    let third = r.response(false).unwrap();
    assert_eq!((third.status, third.body), (200, small));
}
