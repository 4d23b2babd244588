//! Every kind of route over HTTP/3, asked by aioquic (tests/http3/h3_client.py):
//! static ranges (one, several, none satisfiable), conditional requests,
//! compression, a redirect, access control, header rules, the cache in
//! front of a proxy, and a proxied HTTP/2 origin's trailers and 103 Early
//! Hints. The same answers as HTTP/1.1 and HTTP/2 give, through the same
//! service step.

mod common;
#[path = "common/h2_origin.rs"]
mod h2_origin;

use std::io::Read;

use common::aioquic::{body, present, run};
use common::Pier;
use h2_origin::H2Origin;
use serde_json::Value;

/// A TLS listener (HTTP/3 on by default) with a static root under /files/,
/// a redirect, access control, header rules and proxy routes to an HTTP/2
/// origin, one of them cached.
fn config(origin: std::net::SocketAddr, htpasswd: &std::path::Path) -> String {
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[upstream]]
name = "h2"
protocol = "h2"
servers = [{{ address = "{origin}" }}]
[cache.main]
memory = "4MiB"
[[route]]
path = "/files/"
handler = "static"
root = "{{dir}}"
compress = true
[[route]]
path = "/old/"
handler = "redirect"
status = 301
location = "/new{{path}}"
[[route]]
path = "/denied"
handler = "respond"
body = "never"
deny = ["127.0.0.0/8"]
[[route]]
path = "/private"
handler = "respond"
body = "secret"
basic_auth = {{ htpasswd = "{htpasswd}", realm = "staff only" }}
[[route]]
path = "/ruled"
handler = "respond"
body = "ruled"
[route.response_headers]
set = {{ "X-Frame-Options" = "DENY" }}
add = {{ Link = ["</a.css>; rel=preload", "</b.js>; rel=preload"] }}
[[route]]
path = "/cache/"
handler = "proxy"
upstream = "h2"
cache = "main"
[[route]]
path = "/"
handler = "proxy"
upstream = "h2"
"#,
        htpasswd = htpasswd.display()
    )
}

struct Site {
    pier: Pier,
    origin: H2Origin,
    big: Vec<u8>,
    text: Vec<u8>,
    _dir: tempfile::TempDir,
}

fn start() -> Site {
    let origin = H2Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let htpasswd = dir.path().join("htpasswd");
    let alice = bcrypt::hash_with_salt("wonderland", 5, [3u8; 16])
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    std::fs::write(&htpasswd, format!("alice:{alice}\n")).unwrap();
    let pier = Pier::with_config(&config(origin.addr, &htpasswd), &[]);
    let files = pier.root().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("a.txt"), "a static file\n").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(files.join("big.bin"), &big).unwrap();
    let text: Vec<u8> = (0..400)
        .flat_map(|i| format!("line {i} of a text that compresses well\n").into_bytes())
        .collect();
    std::fs::write(files.join("text.txt"), &text).unwrap();
    Site {
        pier,
        origin,
        big,
        text,
        _dir: dir,
    }
}

/// One GET of `path` with `headers` (`name: value`); its answer.
fn get(site: &Site, path: &str, headers: &[&str]) -> Value {
    let mut args = Vec::new();
    for h in headers {
        args.extend(["--header", h]);
    }
    args.extend(["GET", path]);
    let v = run(site.pier.https[0], &args);
    v["answers"][0].clone()
}

#[test]
fn static_ranges_one_several_and_unsatisfiable() {
    if !present() {
        return;
    }
    let site = start();
    let one = get(&site, "/files/big.bin", &["range: bytes=100-109"]);
    assert_eq!(one["status"], 206, "{one}");
    assert_eq!(one["headers"]["content-range"], "bytes 100-109/300000");
    assert_eq!(one["headers"]["content-length"], "10");
    assert_eq!(body(&one), site.big[100..110]);

    let several = get(&site, "/files/big.bin", &["range: bytes=0-1,1000-1002"]);
    assert_eq!(several["status"], 206, "{several}");
    let ct = several["headers"]["content-type"].as_str().unwrap();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart: {ct}"));
    let mut want = Vec::new();
    for (first, last) in [(0usize, 1usize), (1000, 1002)] {
        want.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {first}-{last}/300000\r\n\r\n"
            )
            .as_bytes(),
        );
        want.extend_from_slice(&site.big[first..=last]);
    }
    want.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    assert_eq!(body(&several), want, "{several}");
    assert_eq!(
        several["headers"]["content-length"],
        want.len().to_string().as_str()
    );

    let none = get(&site, "/files/big.bin", &["range: bytes=400000-"]);
    assert_eq!(none["status"], 416, "{none}");
    assert_eq!(none["headers"]["content-range"], "bytes */300000");
}

#[test]
fn conditional_requests_get_304_without_a_body() {
    if !present() {
        return;
    }
    let site = start();
    let full = get(&site, "/files/a.txt", &[]);
    assert_eq!(full["status"], 200, "{full}");
    let etag = full["headers"]["etag"].as_str().unwrap().to_string();
    let modified = full["headers"]["last-modified"]
        .as_str()
        .unwrap()
        .to_string();
    let by_tag = get(&site, "/files/a.txt", &[&format!("if-none-match: {etag}")]);
    assert_eq!(by_tag["status"], 304, "{by_tag}");
    assert_eq!(by_tag["body"], "");
    assert_eq!(by_tag["headers"]["etag"], etag.as_str());
    let by_date = get(
        &site,
        "/files/a.txt",
        &[&format!("if-modified-since: {modified}")],
    );
    assert_eq!(by_date["status"], 304, "{by_date}");
    assert_eq!(by_date["body"], "");
    let changed = get(&site, "/files/a.txt", &["if-none-match: \"other\""]);
    assert_eq!(changed["status"], 200, "{changed}");
    assert_eq!(changed["body"], "a static file\n");
}

#[test]
fn a_compressible_file_is_sent_gzip_or_br_as_asked() {
    if !present() {
        return;
    }
    let site = start();
    let gz = get(&site, "/files/text.txt", &["accept-encoding: gzip"]);
    assert_eq!(gz["status"], 200, "{gz}");
    assert_eq!(gz["headers"]["content-encoding"], "gzip", "{gz}");
    assert_eq!(gz["headers"]["vary"], "Accept-Encoding", "{gz}");
    let packed = body(&gz);
    assert!(packed.len() < site.text.len() / 4, "{}", packed.len());
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, site.text);

    let br = get(&site, "/files/text.txt", &["accept-encoding: br"]);
    assert_eq!(br["headers"]["content-encoding"], "br", "{br}");
    let mut out = Vec::new();
    brotli::BrotliDecompress(&mut &body(&br)[..], &mut out).unwrap();
    assert_eq!(out, site.text);

    let plain = get(&site, "/files/text.txt", &[]);
    assert!(
        plain["headers"].get("content-encoding").is_none(),
        "{plain}"
    );
    assert_eq!(body(&plain), site.text);
}

#[test]
fn redirect_access_control_and_header_rules() {
    if !present() {
        return;
    }
    let site = start();
    let moved = get(&site, "/old/page", &[]);
    assert_eq!(moved["status"], 301, "{moved}");
    assert_eq!(moved["headers"]["location"], "/new/old/page", "{moved}");

    let denied = get(&site, "/denied", &[]);
    assert_eq!(denied["status"], 403, "{denied}");
    assert_ne!(denied["body"], "never");

    let missing = get(&site, "/private", &[]);
    assert_eq!(missing["status"], 401, "{missing}");
    assert_eq!(
        missing["headers"]["www-authenticate"], "Basic realm=\"staff only\", charset=\"UTF-8\"",
        "{missing}"
    );
    // alice:wonderland
    let allowed = get(
        &site,
        "/private",
        &["authorization: Basic YWxpY2U6d29uZGVybGFuZA=="],
    );
    assert_eq!(allowed["status"], 200, "{allowed}");
    assert_eq!(allowed["body"], "secret");

    let ruled = get(&site, "/ruled", &[]);
    assert_eq!(ruled["status"], 200, "{ruled}");
    assert_eq!(ruled["headers"]["x-frame-options"], "DENY", "{ruled}");
    let links: Vec<&str> = ruled["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f[0] == "link")
        .map(|f| f[1].as_str().unwrap())
        .collect();
    assert_eq!(
        links,
        ["</a.css>; rel=preload", "</b.js>; rel=preload"],
        "{ruled}"
    );
}

#[test]
fn a_cached_proxy_route_misses_then_hits_with_age() {
    if !present() {
        return;
    }
    let site = start();
    let asked = std::time::Instant::now();
    let first = get(&site, "/cache/60/0/a", &[]);
    assert_eq!(first["status"], 200, "{first}");
    assert_eq!(first["headers"]["cache-status"], "pier; fwd=miss; stored");
    assert_eq!(body(&first), vec![b'c'; 40000]);
    let second = get(&site, "/cache/60/0/a", &[]);
    assert_eq!(second["status"], 200, "{second}");
    let status = second["headers"]["cache-status"].as_str().unwrap();
    assert!(status.starts_with("pier; hit"), "{second}");
    let age: u64 = second["headers"]["age"].as_str().unwrap().parse().unwrap();
    // The stored answer is as old as the time between the two requests (each
    // a client process of its own, slow on a loaded machine), no older.
    let between = asked.elapsed().as_secs();
    assert!(age <= between + 1, "age {age} after {between} s");
    assert_eq!(body(&second), vec![b'c'; 40000]);
    let fetched = site.origin.requests();
    let fetched = fetched
        .iter()
        .filter(|(uri, _)| uri.ends_with("/cache/60/0/a"));
    assert_eq!(fetched.count(), 1, "one fetch from the origin");
}

#[test]
fn trailers_and_early_hints_from_an_http2_origin_reach_the_client() {
    if !present() {
        return;
    }
    let site = start();
    let v = run(
        site.pier.https[0],
        &[
            "--body-size",
            "50000",
            "--trailer",
            "x-check: yes",
            "POST",
            "/upload",
        ],
    );
    let a = &v["answers"][0];
    assert_eq!(a["status"], 200, "{v}");
    assert_eq!(a["body"], "got 50000 bytes", "{v}");
    assert_eq!(a["trailers"]["x-body-len"], "50000", "{v}");
    assert_eq!(a["trailers"]["x-echo-x-check"], "yes", "{v}");
    // Head, body and trailers in one flight: the trailers do not take the
    // place of a head not yet handed on.
    let v = run(
        site.pier.https[0],
        &[
            "--body",
            "tiny",
            "--trailer",
            "x-check: small",
            "POST",
            "/upload",
        ],
    );
    let a = &v["answers"][0];
    assert_eq!(a["body"], "got 4 bytes", "{v}");
    assert_eq!(a["trailers"]["x-echo-x-check"], "small", "{v}");

    let hinted = get(&site, "/early-hints/1", &[]);
    assert_eq!(hinted["status"], 200, "{hinted}");
    assert_eq!(hinted["body"], "hinted");
    let interim = hinted["interim"].as_array().unwrap();
    assert_eq!(interim.len(), 1, "{hinted}");
    assert_eq!(interim[0]["status"], 103);
    assert_eq!(
        interim[0]["fields"],
        serde_json::json!([["link", "</style.css>; rel=preload"]]),
        "{hinted}"
    );
}
