//! A cached static file answers from heads prepared once per file version:
//! those answers carry the same fields as the ones decided the whole way (a
//! path spelled differently goes that way and shares the cache entry), and a
//! file changed on disk is answered with its new fields once its entry
//! expires, as the open-file cache has always done.

mod common;

use std::fs::File;
use std::time::{Duration, SystemTime};

use common::{connect, Pier, Reader, Response};

const CONFIG: &str = r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "static"
root = "{dir}"
open_file_cache_valid = "{valid}"
"#;

fn server(valid: &str, route_extra: &str) -> Pier {
    let config = CONFIG.replace("{valid}", valid);
    Pier::with_config(&format!("{config}{route_extra}\n"), &[])
}

/// Sends `request` on the connection and reads the answer.
fn ask(r: &mut Reader, request: &str) -> Response {
    r.send(request.as_bytes());
    r.response(request.starts_with("HEAD ")).expect("an answer")
}

fn request(method: &str, path: &str, fields: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n")
}

/// The head's fields in order, without `Date` (the only one that changes
/// with the clock).
fn fields(r: &Response) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .cloned()
        .collect()
}

fn write_at(path: &std::path::Path, contents: &str, mtime: SystemTime) {
    std::fs::write(path, contents).unwrap();
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// Answers of a warm entry (the prepared way) and of the same file reached
/// by a spelling that is not normal (the whole way): status, fields and body
/// alike, for GET, HEAD and a conditional GET.
fn both_ways_agree(pier: &Pier, extra_fields: &str) {
    let dir = pier.root().join("docs");
    std::fs::create_dir_all(&dir).unwrap();
    write_at(
        &dir.join("page.html"),
        "<p>prepared</p>",
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    );
    let mut r = Reader::new(connect(pier.addr()));
    let first = ask(&mut r, &request("GET", "/docs/page.html", extra_fields));
    assert_eq!(first.status, 200);
    let etag = first.header("etag").expect("an ETag").to_string();
    let conditional = format!("{extra_fields}If-None-Match: {etag}\r\n");
    for (method, fields_sent) in [
        ("GET", extra_fields),
        ("HEAD", extra_fields),
        ("GET", conditional.as_str()),
    ] {
        let prepared = ask(&mut r, &request(method, "/docs/page.html", fields_sent));
        let whole = ask(&mut r, &request(method, "//docs/./page.html", fields_sent));
        assert_eq!(prepared.status, whole.status, "{method} {fields_sent:?}");
        assert_eq!(
            fields(&prepared),
            fields(&whole),
            "{method} {fields_sent:?}"
        );
        assert_eq!(prepared.body, whole.body);
        assert!(prepared.header("date").is_some());
    }
    let full = ask(&mut r, &request("GET", "/docs/page.html", extra_fields));
    assert_eq!(full.body, b"<p>prepared</p>");
    assert_eq!(
        full.header("last-modified"),
        Some("Tue, 14 Nov 2023 22:13:20 GMT")
    );
    assert_eq!(
        full.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(full.header("accept-ranges"), Some("bytes"));
    assert_eq!(full.header("content-length"), Some("15"));
    let not_modified = ask(&mut r, &request("GET", "/docs/page.html", &conditional));
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    assert_eq!(not_modified.header("content-type"), None);
    // A date at or after the file's answers 304 too; one before it, 200.
    let since = |date: &str| format!("{extra_fields}If-Modified-Since: {date}\r\n");
    let later = ask(
        &mut r,
        &request(
            "GET",
            "/docs/page.html",
            &since("Wed, 15 Nov 2023 00:00:00 GMT"),
        ),
    );
    assert_eq!(later.status, 304);
    let earlier = ask(
        &mut r,
        &request(
            "GET",
            "/docs/page.html",
            &since("Mon, 13 Nov 2023 00:00:00 GMT"),
        ),
    );
    assert_eq!(earlier.status, 200);
    // A range is still served, from the same entry.
    let range = ask(
        &mut r,
        &request(
            "GET",
            "/docs/page.html",
            &format!("{extra_fields}Range: bytes=3-10\r\n"),
        ),
    );
    assert_eq!(
        (range.status, range.body.as_slice()),
        (206, &b"prepared"[..])
    );
    // Preconditions (RFC 9110 §13.1.1, §13.1.4) are judged on a warm entry
    // too: a tag that is not the file's, or a date before its change, is
    // answered 412, as nginx does.
    for (precondition, status) in [
        (format!("If-Match: {etag}"), 200),
        ("If-Match: *".to_string(), 200),
        ("If-Match: \"other\"".to_string(), 412),
        (format!("If-Match: W/{etag}"), 412),
        (
            "If-Unmodified-Since: Wed, 15 Nov 2023 00:00:00 GMT".to_string(),
            200,
        ),
        (
            "If-Unmodified-Since: Mon, 13 Nov 2023 00:00:00 GMT".to_string(),
            412,
        ),
    ] {
        let sent = format!("{extra_fields}{precondition}\r\n");
        for path in ["/docs/page.html", "//docs/./page.html"] {
            let answer = ask(&mut r, &request("GET", path, &sent));
            assert_eq!(answer.status, status, "{path} {precondition}");
        }
    }
}

#[test]
fn prepared_answers_carry_what_the_whole_way_decides() {
    both_ways_agree(&server("60s", ""), "");
}

#[test]
fn prepared_answers_keep_vary_and_header_rules_on_routes_with_precompressed_files() {
    let pier = server(
        "60s",
        "precompressed = [\"br\"]\n[route.response_headers]\nset = { \"Cache-Control\" = \"max-age=60\" }",
    );
    both_ways_agree(&pier, "");
    let mut r = Reader::new(connect(pier.addr()));
    let plain = ask(&mut r, &request("GET", "/docs/page.html", ""));
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.header("cache-control"), Some("max-age=60"));
    // With a sibling there, a client that takes it gets it; one that does
    // not still gets the file from its prepared heads.
    std::fs::write(pier.root().join("docs/page.html.br"), "brotli bytes").unwrap();
    let encoded = ask(
        &mut r,
        &request("GET", "/docs/page.html", "Accept-Encoding: br\r\n"),
    );
    assert_eq!(encoded.header("content-encoding"), Some("br"));
    assert_eq!(encoded.body, b"brotli bytes");
    let plain = ask(&mut r, &request("GET", "/docs/page.html", ""));
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.body, b"<p>prepared</p>");
}

#[test]
fn a_changed_file_is_answered_with_its_new_fields_once_its_entry_expires() {
    let pier = server("300ms", "");
    let path = pier.root().join("news.txt");
    let old_time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    write_at(&path, "old", old_time);
    let mut r = Reader::new(connect(pier.addr()));
    let get = request("GET", "/news.txt", "");
    let old = ask(&mut r, &get);
    let old_tag = old.header("etag").unwrap().to_string();
    assert_eq!(old.body, b"old");
    assert_eq!(ask(&mut r, &get).body, b"old");

    write_at(&path, "news!", old_time + Duration::from_secs(60));
    // Within the entry's time the open file and its heads are kept...
    let kept = ask(&mut r, &get);
    assert_eq!(kept.header("etag"), Some(old_tag.as_str()));
    std::thread::sleep(Duration::from_millis(400));
    // ...and after it, the path is opened again and the new version's
    // fields are made and sent, by the prepared way too.
    for _ in 0..2 {
        let new = ask(&mut r, &get);
        assert_eq!(new.body, b"news!");
        assert_eq!(new.header("content-length"), Some("5"));
        assert_ne!(new.header("etag"), Some(old_tag.as_str()));
        assert_eq!(
            new.header("last-modified"),
            Some("Sun, 13 Sep 2020 12:27:40 GMT")
        );
    }
    let stale = ask(
        &mut r,
        &request("GET", "/news.txt", &format!("If-None-Match: {old_tag}\r\n")),
    );
    assert_eq!((stale.status, stale.body.as_slice()), (200, &b"news!"[..]));
}
