//! The compression filter (`compress` on a route) against a real `pier`:
//! static files, `respond` bodies and proxied bodies (with a length, chunked,
//! close-delimited) come out gzip, brotli or zstd as the client's
//! `Accept-Encoding` asks, decoded here by the reference decoders (and by
//! curl), with each exclusion checked: small bodies, other types, ranges,
//! `no-transform`, an existing coding, `HEAD`, 304.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Command;

use common::upstream::{Reply, Upstream};
use common::{connect, find, which, Pier};

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[listener]]
listen = "127.0.0.1:0"
http2 = true

[[upstream]]
name = "app"
servers = [{ address = "{upstream}" }]

[[route]]
path = "/up/"
handler = "proxy"
upstream = "app"
compress = { levels = { gzip = 6, br = 5, zstd = 5 } }

[[route]]
path = "/fixed"
handler = "respond"
body = "{fixed}"
headers = { "Content-Type" = "text/plain; charset=utf-8" }
compress = true

[[route]]
path = "/no-transform"
handler = "respond"
body = "{fixed}"
headers = { "Content-Type" = "text/plain", "Cache-Control" = "public, no-transform" }
compress = true

[[route]]
path = "/encoded"
handler = "respond"
body = "{fixed}"
headers = { "Content-Type" = "text/plain", "Content-Encoding" = "x-custom" }
compress = true

[[route]]
path = "/json-only/"
handler = "static"
root = "{site}"
compress = { types = ["application/json"], codings = ["gzip"], min_length = 64 }

[[route]]
path = "/"
handler = "static"
root = "{site}"
compress = true
"#;

/// A text that compresses well but not trivially.
fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| {
            format!(
                "<p class=\"row\">Row {i}: the quick brown fox {}</p>\n",
                i * 7919 % 1000
            )
            .into_bytes()
        })
        .collect()
}

fn fixed() -> String {
    "A respond body long enough to be worth compressing. ".repeat(20)
}

struct Site {
    pier: Pier,
    _dir: tempfile::TempDir,
    _up: Upstream,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    std::fs::create_dir_all(root.join("json-only")).unwrap();
    std::fs::write(root.join("page.html"), text(1000)).unwrap();
    std::fs::write(root.join("big.txt"), text(40_000)).unwrap();
    std::fs::write(root.join("small.txt"), b"tiny\n").unwrap();
    std::fs::write(root.join("photo.png"), text(100)).unwrap();
    std::fs::write(root.join("json-only/a.json"), text(10)).unwrap();
    std::fs::write(root.join("json-only/a.txt"), text(10)).unwrap();
    let up = Upstream::start(|r| {
        let body = text(2000);
        let head = |framing: &str| {
            format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: \"up\"\r\n{framing}\r\n")
                .into_bytes()
        };
        match r.target.as_str() {
            "/up/length" => Reply::Http(
                200,
                vec![("Content-Type".into(), "application/json".into())],
                body,
            ),
            "/up/chunked" => {
                let mut raw = head("Transfer-Encoding: chunked\r\n");
                for piece in body.chunks(3000) {
                    raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    raw.extend_from_slice(piece);
                    raw.extend_from_slice(b"\r\n");
                }
                raw.extend_from_slice(b"0\r\n\r\n");
                Reply::Raw(raw)
            }
            "/up/close" => {
                let mut raw = head("Connection: close\r\n");
                raw.extend_from_slice(&body);
                Reply::RawClose(raw)
            }
            _ => Reply::Http(404, Vec::new(), Vec::new()),
        }
    });
    let config = CONFIG
        .replace("{site}", root.to_str().unwrap())
        .replace("{upstream}", &up.addr.to_string())
        .replace("{fixed}", &fixed());
    Site {
        pier: Pier::with_config(&config, &[]),
        _dir: dir,
        _up: up,
    }
}

/// A response read whole: chunked, with a length, or until close.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends `raw` on a new connection and reads the answer (`Connection: close`
/// is added, so a close-delimited body ends).
fn ask(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Answer {
    let mut s = connect(addr);
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = find(&all, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8(all[..end].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    let rest = &all[end..];
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if method == "HEAD" {
        assert!(rest.is_empty(), "no body for HEAD");
        Vec::new()
    } else if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Answer { status, head, body }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = find(data, b"\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line]).unwrap(), 16).unwrap();
        data = &data[line + 2..];
        if size == 0 {
            assert!(data.starts_with(b"\r\n"), "the last chunk ends the body");
            return out;
        }
        out.extend_from_slice(&data[..size]);
        assert_eq!(&data[size..size + 2], b"\r\n");
        data = &data[size + 2..];
    }
}

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => brotli::BrotliDecompress(&mut &data[..], &mut out).unwrap(),
        "zstd" => out = zstd::decode_all(data).unwrap(),
        other => panic!("unexpected coding {other}"),
    }
    out
}

fn accept(value: &str) -> String {
    format!("Accept-Encoding: {value}\r\n")
}

#[test]
fn static_files_come_out_in_the_coding_the_client_prefers() {
    let s = site();
    let addr = s.pier.http[0];
    for (header, coding) in [
        ("gzip, deflate, br, zstd", "zstd"),
        ("gzip, br", "br"),
        ("gzip", "gzip"),
        ("zstd;q=0.5, br;q=0.6, gzip;q=0.7", "gzip"),
        ("*", "zstd"),
    ] {
        let a = ask(addr, "GET", "/page.html", &accept(header));
        assert_eq!(a.status, 200);
        assert_eq!(
            a.header("content-encoding"),
            Some(coding),
            "{header}: {}",
            a.head
        );
        assert_eq!(a.header("vary"), Some("Accept-Encoding"));
        assert_eq!(a.header("content-length"), None, "{}", a.head);
        assert_eq!(a.header("accept-ranges"), None);
        assert!(a.header("etag").unwrap().starts_with("W/\""), "{}", a.head);
        assert!(a.body.len() < text(1000).len() / 3, "{coding} packs it");
        assert_eq!(decode(coding, &a.body), text(1000), "{header}");
    }
    let plain = ask(addr, "GET", "/page.html", "");
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.body, text(1000));
    assert!(plain.header("etag").unwrap().starts_with('"'));
    let refused = ask(addr, "GET", "/page.html", &accept("gzip;q=0, identity"));
    assert_eq!(refused.header("content-encoding"), None);
}

#[test]
fn a_large_file_streams_through_in_slices() {
    let s = site();
    let a = ask(s.pier.http[0], "GET", "/big.txt", &accept("gzip"));
    assert_eq!(a.header("content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &a.body), text(40_000));
    // HTTP/1.0: no chunks, the body ends with the connection.
    let mut c = connect(s.pier.http[0]);
    c.write_all(b"GET /big.txt HTTP/1.0\r\nAccept-Encoding: br\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let end = find(&all, b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: br"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert_eq!(decode("br", &all[end..]), text(40_000));
}

#[test]
fn what_is_not_worth_compressing_goes_out_as_it_is() {
    let s = site();
    let addr = s.pier.http[0];
    let small = ask(addr, "GET", "/small.txt", &accept("gzip"));
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.header("vary"), None, "a small body does not vary");
    assert_eq!(small.body, b"tiny\n");
    // Unless the client refuses it as it is.
    let forced = ask(addr, "GET", "/small.txt", &accept("gzip, identity;q=0"));
    assert_eq!(forced.header("content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &forced.body), b"tiny\n");

    let png = ask(addr, "GET", "/photo.png", &accept("gzip"));
    assert_eq!(png.header("content-encoding"), None);
    assert_eq!(png.header("vary"), None);

    let range = ask(
        addr,
        "GET",
        "/page.html",
        &format!("{}Range: bytes=0-9\r\n", accept("gzip")),
    );
    assert_eq!(range.status, 206);
    assert_eq!(range.header("content-encoding"), None);
    assert_eq!(range.body, &text(1000)[..10]);

    let kept = ask(addr, "GET", "/no-transform", &accept("gzip"));
    assert_eq!(kept.header("content-encoding"), None);
    assert_eq!(kept.body, fixed().as_bytes());

    let encoded = ask(addr, "GET", "/encoded", &accept("gzip"));
    assert_eq!(encoded.header("content-encoding"), Some("x-custom"));
    assert_eq!(encoded.body, fixed().as_bytes());
}

#[test]
fn head_and_304_get_the_head_a_compressed_get_would() {
    let s = site();
    let addr = s.pier.http[0];
    let get = ask(addr, "GET", "/page.html", &accept("br"));
    let head = ask(addr, "HEAD", "/page.html", &accept("br"));
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), Some("br"));
    assert_eq!(head.header("content-length"), None);
    assert_eq!(head.header("etag"), get.header("etag"));
    assert_eq!(head.header("vary"), Some("Accept-Encoding"));

    let etag = get.header("etag").unwrap().to_string();
    let not_modified = ask(
        addr,
        "GET",
        "/page.html",
        &format!("{}If-None-Match: {etag}\r\n", accept("br")),
    );
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    assert_eq!(not_modified.header("vary"), Some("Accept-Encoding"));
    assert_eq!(not_modified.header("content-encoding"), None);
}

#[test]
fn respond_bodies_and_route_settings() {
    let s = site();
    let addr = s.pier.http[0];
    let a = ask(addr, "GET", "/fixed", &accept("zstd"));
    assert_eq!(a.header("content-encoding"), Some("zstd"));
    assert_eq!(decode("zstd", &a.body), fixed().as_bytes());

    // Only JSON on this route, only gzip, from 64 bytes.
    let json = ask(addr, "GET", "/json-only/a.json", &accept("br, zstd, gzip"));
    assert_eq!(json.header("content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &json.body), text(10));
    let txt = ask(addr, "GET", "/json-only/a.txt", &accept("gzip"));
    assert_eq!(txt.header("content-encoding"), None);
    let refused = ask(addr, "GET", "/json-only/a.json", &accept("br"));
    assert_eq!(refused.header("content-encoding"), None);
    assert_eq!(refused.header("vary"), Some("Accept-Encoding"));
}

#[test]
fn proxied_bodies_of_every_framing_are_compressed_on_the_way() {
    let s = site();
    let addr = s.pier.http[0];
    for (path, coding) in [
        ("/up/length", "gzip"),
        ("/up/chunked", "br"),
        ("/up/close", "zstd"),
    ] {
        let a = ask(addr, "GET", path, &accept(coding));
        assert_eq!(a.status, 200, "{path}");
        assert_eq!(
            a.header("content-encoding"),
            Some(coding),
            "{path}: {}",
            a.head
        );
        assert_eq!(decode(coding, &a.body), text(2000), "{path}");
        if path != "/up/length" {
            assert_eq!(a.header("etag"), Some("W/\"up\""), "{path}");
        }
    }
    let plain = ask(addr, "GET", "/up/chunked", "");
    assert_eq!(plain.body, text(2000));
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
}

#[test]
fn curl_decodes_what_pier_compresses() {
    if which("curl").is_none() {
        eprintln!("curl not installed; skipped");
        return;
    }
    let s = site();
    let url = format!("http://{}/page.html", s.pier.http[0]);
    for coding in ["gzip", "br", "zstd"] {
        let out = Command::new("curl")
            .args(["-sS", "--compressed", "-H"])
            .arg(format!("Accept-Encoding: {coding}"))
            .arg(&url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, text(1000), "{coding}");
    }
}

#[test]
fn http2_clients_get_the_same_encodings() {
    if which("curl").is_none() {
        eprintln!("curl not installed; skipped");
        return;
    }
    let s = site();
    for (path, want) in [("/page.html", text(1000)), ("/up/chunked", text(2000))] {
        let url = format!("http://{}{path}", s.pier.http[1]);
        for coding in ["gzip", "br", "zstd"] {
            let out = Command::new("curl")
                .args([
                    "-sS",
                    "--http2-prior-knowledge",
                    "--compressed",
                    "-D",
                    "-",
                    "-H",
                ])
                .arg(format!("Accept-Encoding: {coding}"))
                .arg(&url)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            let split = find(&out.stdout, b"\r\n\r\n").unwrap();
            let head = String::from_utf8_lossy(&out.stdout[..split]).to_ascii_lowercase();
            assert!(head.starts_with("http/2 200"), "{head}");
            assert!(
                head.contains(&format!("content-encoding: {coding}")),
                "{head}"
            );
            assert_eq!(&out.stdout[split + 4..], &want[..], "{path} {coding}");
        }
    }
}

/// A file's text, different from line to line and from file to file, so a
/// body that took a byte left from another one would not decode to it.
fn file_text(file: usize, len: usize) -> Vec<u8> {
    let mut t: Vec<u8> = (0..)
        .flat_map(|l| format!("<li>file {file}, line {l}: {}</li>\n", l * 7919 % 997).into_bytes())
        .take(len)
        .collect();
    t.truncate(len);
    t
}

#[test]
fn gzip_bodies_in_turn_on_one_worker_each_decode_to_their_own_file() {
    // One worker, so each body is gathered in the buffer the one before used:
    // longer and shorter ones, whole-length ones at the gathering limit
    // (128 KiB) and one past it (streamed), small files held in memory, and a
    // `respond` body encoded from where it lies.
    let dir = tempfile::tempdir().unwrap();
    let sizes = [
        100_000, 30_000, 131_072, 20_000, 600, 131_073, 99_999, 5_000, 100_000,
    ];
    for (i, &n) in sizes.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i}.html")), file_text(i, n)).unwrap();
    }
    let config = format!(
        r#"
[server]
workers = 1

[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/fixed"
handler = "respond"
body = "{fixed}"
headers = {{ "Content-Type" = "text/plain" }}
compress = {{ codings = ["gzip"] }}

[[route]]
path = "/"
handler = "static"
root = "{root}"
compress = {{ codings = ["gzip"], levels = {{ gzip = 5 }} }}
"#,
        fixed = fixed(),
        root = dir.path().to_str().unwrap()
    );
    let pier = Pier::with_config(&config, &[]);
    let addr = pier.http[0];
    for round in 0..2 {
        for (i, &n) in sizes.iter().enumerate() {
            let a = ask(addr, "GET", &format!("/f{i}.html"), &accept("gzip"));
            assert_eq!(a.status, 200);
            assert_eq!(a.header("content-encoding"), Some("gzip"), "{}", a.head);
            assert_eq!(
                decode("gzip", &a.body),
                file_text(i, n),
                "file {i} ({n} bytes), round {round}"
            );
            let f = ask(addr, "GET", "/fixed", &accept("gzip"));
            assert_eq!(f.header("content-encoding"), Some("gzip"));
            assert_eq!(decode("gzip", &f.body), fixed().as_bytes());
        }
    }
}
