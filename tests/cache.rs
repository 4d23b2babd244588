//! The HTTP cache end to end: a real `pier` with a `[cache.NAME]` zone in
//! front of a scripted origin (tests/common/upstream.rs), each RFC 9111 rule
//! shown by what the client gets and how many requests reach the origin.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::upstream::{Reply, Req, Upstream};
use common::{get, Pier};

fn config(origin: SocketAddr, workers: usize, zone_extra: &str) -> String {
    common::cache::cached_proxy_config(origin, workers, zone_extra)
}

fn start(origin: &Upstream, zone_extra: &str) -> Pier {
    Pier::with_config(&config(origin.addr, 1, zone_extra), &[])
}

fn req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n{extra}\r\n")
}

fn reply(status: u16, fields: &[(&str, &str)], body: &str) -> Reply {
    Reply::Http(
        status,
        fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body.as_bytes().to_vec(),
    )
}

/// Requests to `path` the origin saw.
fn seen(origin: &Upstream, path: &str) -> Vec<Req> {
    origin
        .requests()
        .into_iter()
        .filter(|r| r.target == path)
        .collect()
}

#[test]
fn a_fresh_response_is_served_from_the_cache_with_age_and_cache_status() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "hello"));
    let pier = start(&origin, "");
    let first = get(pier.addr(), &req("/a", ""));
    assert_eq!(first.status, 200);
    assert_eq!(first.body, b"hello");
    assert_eq!(first.header("cache-status"), Some("pier; fwd=miss; stored"));
    let second = get(pier.addr(), &req("/a", ""));
    assert_eq!(second.body, b"hello");
    assert_eq!(second.header("cache-control"), Some("max-age=60"));
    assert!(second
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
    let age: u64 = second.header("age").unwrap().parse().unwrap();
    assert!(age <= 1, "age {age}");
    assert_eq!(seen(&origin, "/a").len(), 1);
}

#[test]
fn the_age_of_a_stored_response_includes_the_origins_age() {
    let origin = Upstream::start(|_| {
        reply(
            200,
            &[("Cache-Control", "max-age=600"), ("Age", "100")],
            "x",
        )
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/aged", ""));
    let hit = get(pier.addr(), &req("/aged", ""));
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!((100..=102).contains(&age), "age {age}");
    assert_eq!(
        hit.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("age"))
            .count(),
        1
    );
}

#[test]
fn no_store_private_and_set_cookie_responses_are_not_stored() {
    let origin = Upstream::start(|r| match r.target.as_str() {
        "/no-store" => reply(200, &[("Cache-Control", "no-store, max-age=60")], "a"),
        "/private" => reply(200, &[("Cache-Control", "private, max-age=60")], "b"),
        _ => reply(
            200,
            &[("Cache-Control", "max-age=60"), ("Set-Cookie", "s=1")],
            "c",
        ),
    });
    let pier = start(&origin, "hit_for_miss = \"0s\"");
    for path in ["/no-store", "/private", "/cookie"] {
        let a = get(pier.addr(), &req(path, ""));
        assert_eq!(a.header("cache-status"), Some("pier; fwd=miss"), "{path}");
        get(pier.addr(), &req(path, ""));
        assert_eq!(
            seen(&origin, path).len(),
            2,
            "{path} reached the origin twice"
        );
    }
}

#[test]
fn a_request_with_authorization_is_stored_only_when_the_response_allows_it() {
    let origin = Upstream::start(|r| match r.target.as_str() {
        "/public" => reply(200, &[("Cache-Control", "public, max-age=60")], "p"),
        _ => reply(200, &[("Cache-Control", "max-age=60")], "q"),
    });
    let pier = start(&origin, "hit_for_miss = \"0s\"");
    let auth = "Authorization: Basic dXNlcjpwYXNz\r\n";
    for _ in 0..2 {
        get(pier.addr(), &req("/plain", auth));
        get(pier.addr(), &req("/public", auth));
    }
    assert_eq!(seen(&origin, "/plain").len(), 2);
    assert_eq!(seen(&origin, "/public").len(), 1);
}

#[test]
fn a_status_not_cacheable_by_default_needs_explicit_freshness() {
    let origin = Upstream::start(|r| match r.target.as_str() {
        "/found" => reply(
            302,
            &[
                ("Location", "/x"),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ],
            "",
        ),
        "/gone" => reply(
            404,
            &[("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")],
            "nope",
        ),
        _ => reply(
            302,
            &[("Location", "/x"), ("Cache-Control", "max-age=60")],
            "",
        ),
    });
    let pier = start(&origin, "hit_for_miss = \"0s\"");
    for path in ["/found", "/gone", "/found-explicit"] {
        get(pier.addr(), &req(path, ""));
        get(pier.addr(), &req(path, ""));
    }
    assert_eq!(
        seen(&origin, "/found").len(),
        2,
        "302 with only Last-Modified"
    );
    assert_eq!(
        seen(&origin, "/gone").len(),
        1,
        "404 is cacheable by default (heuristic)"
    );
    assert_eq!(
        seen(&origin, "/found-explicit").len(),
        1,
        "302 with max-age"
    );
}

#[test]
fn expires_gives_freshness_and_a_past_expires_none() {
    let future = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(300));
    let origin = Upstream::start(move |r| match r.target.as_str() {
        "/future" => reply(200, &[("Expires", future.as_str())], "f"),
        _ => reply(200, &[("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")], "p"),
    });
    let pier = start(&origin, "hit_for_miss = \"0s\"");
    for path in ["/future", "/past"] {
        get(pier.addr(), &req(path, ""));
        get(pier.addr(), &req(path, ""));
    }
    assert_eq!(seen(&origin, "/future").len(), 1);
    assert_eq!(seen(&origin, "/past").len(), 2);
}

#[test]
fn a_stale_response_is_revalidated_and_a_304_refreshes_it() {
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    let origin = Upstream::start(move |r| {
        count.fetch_add(1, Ordering::SeqCst);
        if r.header("if-none-match") == Some("\"v1\"") {
            return reply(
                304,
                &[
                    ("ETag", "\"v1\""),
                    ("Cache-Control", "max-age=60"),
                    ("X-Fresh", "yes"),
                ],
                "",
            );
        }
        reply(
            200,
            &[("ETag", "\"v1\""), ("Cache-Control", "max-age=1")],
            "body-v1",
        )
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/r", ""));
    std::thread::sleep(Duration::from_millis(2100));
    let revalidated = get(pier.addr(), &req("/r", ""));
    assert_eq!(revalidated.status, 200);
    assert_eq!(revalidated.body, b"body-v1");
    assert_eq!(
        revalidated.header("cache-status"),
        Some("pier; fwd=stale; fwd-status=304")
    );
    let reqs = seen(&origin, "/r");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"v1\""));
    // The 304's fields replaced the stored ones: fresh for 60 s now.
    let hit = get(pier.addr(), &req("/r", ""));
    assert!(hit.header("cache-status").unwrap().starts_with("pier; hit"));
    assert_eq!(hit.header("x-fresh"), Some("yes"));
    assert_eq!(hit.header("cache-control"), Some("max-age=60"));
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn the_clients_conditionals_are_answered_from_the_cache() {
    let origin = Upstream::start(|_| {
        reply(
            200,
            &[
                ("ETag", "\"e\""),
                ("Cache-Control", "max-age=60"),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ],
            "etagged",
        )
    });
    let pier = start(&origin, "");
    // The origin is asked for the whole response even on a conditional miss.
    let first = get(pier.addr(), &req("/c", "If-None-Match: \"e\"\r\n"));
    assert_eq!(first.status, 200);
    assert!(seen(&origin, "/c")[0].header("if-none-match").is_none());
    let not_modified = get(pier.addr(), &req("/c", "If-None-Match: W/\"e\"\r\n"));
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("etag"), Some("\"e\""));
    let ims = get(
        pier.addr(),
        &req("/c", "If-Modified-Since: Tue, 02 Jan 2024 00:00:00 GMT\r\n"),
    );
    assert_eq!(ims.status, 304);
    let changed = get(pier.addr(), &req("/c", "If-None-Match: \"other\"\r\n"));
    assert_eq!(changed.status, 200);
    assert_eq!(changed.body, b"etagged");
    assert_eq!(seen(&origin, "/c").len(), 1);
}

#[test]
fn head_and_range_are_answered_from_a_stored_full_response() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "0123456789"));
    let pier = start(&origin, "");
    get(pier.addr(), &req("/h", ""));
    let head = get(pier.addr(), "HEAD /h HTTP/1.1\r\nHost: app.test\r\n\r\n");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("10"));
    assert!(head
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
    let range = get(pier.addr(), &req("/h", "Range: bytes=2-5\r\n"));
    assert_eq!(range.status, 206);
    assert_eq!(range.body, b"2345");
    assert_eq!(range.header("content-range"), Some("bytes 2-5/10"));
    let suffix = get(pier.addr(), &req("/h", "Range: bytes=-3\r\n"));
    assert_eq!(suffix.body, b"789");
    let beyond = get(pier.addr(), &req("/h", "Range: bytes=20-\r\n"));
    assert_eq!(beyond.status, 416);
    assert_eq!(seen(&origin, "/h").len(), 1);
}

#[test]
fn vary_keeps_one_variant_per_normalised_request_value() {
    let origin = Upstream::start(|r| {
        let enc = r.header("accept-encoding").unwrap_or("none").to_string();
        reply(
            200,
            &[("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")],
            &enc,
        )
    });
    let pier = start(&origin, "");
    let gzip = get(pier.addr(), &req("/v", "Accept-Encoding: gzip, br\r\n"));
    let none = get(pier.addr(), &req("/v", ""));
    let gzip_again = get(pier.addr(), &req("/v", "Accept-Encoding: GZIP,br\r\n"));
    let none_again = get(pier.addr(), &req("/v", ""));
    assert_eq!(gzip.body, b"gzip, br");
    assert_eq!(none.body, b"none");
    assert_eq!(gzip_again.body, b"gzip, br");
    assert!(gzip_again
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
    assert_eq!(none_again.body, b"none");
    assert_eq!(seen(&origin, "/v").len(), 2);
}

#[test]
fn request_cache_control_no_cache_max_age_and_only_if_cached() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "rq"));
    let pier = start(&origin, "");
    let miss = get(pier.addr(), &req("/q", "Cache-Control: only-if-cached\r\n"));
    assert_eq!(miss.status, 504);
    assert!(seen(&origin, "/q").is_empty());
    get(pier.addr(), &req("/q", ""));
    let cached = get(pier.addr(), &req("/q", "Cache-Control: only-if-cached\r\n"));
    assert_eq!(cached.status, 200);
    get(pier.addr(), &req("/q", "Cache-Control: no-cache\r\n"));
    assert_eq!(seen(&origin, "/q").len(), 2, "no-cache goes to the origin");
    get(pier.addr(), &req("/q", "Pragma: no-cache\r\n"));
    assert_eq!(seen(&origin, "/q").len(), 3, "Pragma: no-cache too");
    std::thread::sleep(Duration::from_millis(1100));
    get(pier.addr(), &req("/q", "Cache-Control: max-age=0\r\n"));
    assert_eq!(seen(&origin, "/q").len(), 4, "max-age=0 wants a newer one");
    get(pier.addr(), &req("/q", ""));
    assert_eq!(seen(&origin, "/q").len(), 4);
}

#[test]
fn max_stale_accepts_a_stale_response() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=1")], "old"));
    let pier = start(&origin, "");
    get(pier.addr(), &req("/s", ""));
    std::thread::sleep(Duration::from_millis(2100));
    let stale = get(pier.addr(), &req("/s", "Cache-Control: max-stale=60\r\n"));
    assert_eq!(stale.body, b"old");
    assert!(stale.header("cache-status").unwrap().contains("hit"));
    assert_eq!(seen(&origin, "/s").len(), 1);
}

#[test]
fn an_unsafe_method_invalidates_the_uri_and_its_location() {
    let origin = Upstream::start(|r| match r.method.as_str() {
        "POST" => reply(201, &[("Location", "/items/2")], "created"),
        _ => reply(200, &[("Cache-Control", "max-age=60")], &r.target),
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/items", ""));
    get(pier.addr(), &req("/items/2", ""));
    let post = get(
        pier.addr(),
        "POST /items HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1\r\n\r\nx",
    );
    assert_eq!(post.status, 201);
    get(pier.addr(), &req("/items", ""));
    get(pier.addr(), &req("/items/2", ""));
    assert_eq!(
        seen(&origin, "/items")
            .iter()
            .filter(|r| r.method == "GET")
            .count(),
        2
    );
    assert_eq!(seen(&origin, "/items/2").len(), 2);
}

#[test]
fn an_error_answer_to_an_unsafe_method_invalidates_nothing() {
    let origin = Upstream::start(|r| match r.method.as_str() {
        "DELETE" => reply(500, &[], "failed"),
        _ => reply(200, &[("Cache-Control", "max-age=60")], "kept"),
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/k", ""));
    get(pier.addr(), "DELETE /k HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let again = get(pier.addr(), &req("/k", ""));
    assert!(again
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
}

#[test]
fn a_stale_response_is_served_when_the_origin_is_down_or_fails() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f = fail.clone();
    let mut origin = Upstream::start(move |_| {
        if f.load(Ordering::SeqCst) == 1 {
            return reply(503, &[], "down");
        }
        reply(
            200,
            &[("Cache-Control", "max-age=1, stale-if-error=60")],
            "good",
        )
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/e", ""));
    std::thread::sleep(Duration::from_millis(2100));
    fail.store(1, Ordering::SeqCst);
    let on_5xx = get(pier.addr(), &req("/e", ""));
    assert_eq!(on_5xx.status, 200);
    assert_eq!(on_5xx.body, b"good");
    assert!(on_5xx
        .header("cache-status")
        .unwrap()
        .contains("fwd-status=503"));
    origin.stop();
    let down = get(pier.addr(), &req("/e", ""));
    assert_eq!(down.status, 200);
    assert_eq!(down.body, b"good");
}

#[test]
fn without_stale_if_error_the_origins_error_is_relayed() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f = fail.clone();
    let origin = Upstream::start(move |_| {
        if f.load(Ordering::SeqCst) == 1 {
            return reply(503, &[], "down");
        }
        reply(200, &[("Cache-Control", "max-age=1")], "good")
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/e", ""));
    std::thread::sleep(Duration::from_millis(2100));
    fail.store(1, Ordering::SeqCst);
    assert_eq!(get(pier.addr(), &req("/e", "")).status, 503);
}

/// Fires `n` concurrent GETs of `path`; returns the responses and the time
/// the slowest took.
fn concurrent(addr: SocketAddr, path: &str, n: usize) -> (Vec<common::Response>, Duration) {
    let start = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let r = req(path, "");
            std::thread::spawn(move || get(addr, &r))
        })
        .collect();
    let responses = threads.into_iter().map(|t| t.join().unwrap()).collect();
    (responses, start.elapsed())
}

#[test]
fn concurrent_misses_on_several_workers_reach_the_origin_once() {
    let origin = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(700));
        reply(
            200,
            &[("Cache-Control", "max-age=60")],
            &"z".repeat(100_000),
        )
    });
    let pier = Pier::with_config(&config(origin.addr, 4, ""), &[]);
    let (responses, took) = concurrent(pier.addr(), "/slow", 40);
    assert_eq!(seen(&origin, "/slow").len(), 1);
    for r in &responses {
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 100_000);
    }
    let collapsed = responses
        .iter()
        .filter(|r| {
            r.header("cache-status")
                .is_some_and(|s| s.contains("collapsed"))
        })
        .count();
    assert!(collapsed >= 1, "some requests followed the first");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn an_uncacheable_answer_releases_the_waiters_and_is_remembered_as_hit_for_miss() {
    let origin = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(400));
        reply(200, &[("Cache-Control", "no-store")], "private")
    });
    let pier = start(&origin, "");
    let (responses, _) = concurrent(pier.addr(), "/u", 6);
    assert!(responses.iter().all(|r| r.body == b"private"));
    assert_eq!(seen(&origin, "/u").len(), 6, "every waiter went on its own");
    // Hit-for-miss: later requests do not queue behind one another.
    let (responses, took) = concurrent(pier.addr(), "/u", 6);
    assert!(responses
        .iter()
        .all(|r| r.header("cache-status") == Some("pier; fwd=miss; detail=hit-for-miss")));
    assert!(took < Duration::from_millis(2000), "took {took:?}");
    assert_eq!(seen(&origin, "/u").len(), 12);
}

#[test]
fn a_leader_that_holds_the_lock_too_long_lets_waiters_go_to_the_origin() {
    let origin = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(1500));
        reply(200, &[("Cache-Control", "max-age=60")], "late")
    });
    let pier = start(&origin, "lock_timeout = \"200ms\"");
    let (responses, _) = concurrent(pier.addr(), "/l", 3);
    assert!(responses.iter().all(|r| r.body == b"late"));
    assert_eq!(seen(&origin, "/l").len(), 3);
}

#[test]
fn followers_of_a_large_body_get_it_whole_from_one_origin_request() {
    let origin = Upstream::start(|_| {
        let mut raw =
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 200000\r\n\r\n"
                .to_vec();
        raw.extend(std::iter::repeat_n(b'a', 200_000));
        Reply::Raw(raw)
    });
    let pier = start(&origin, "");
    let (responses, _) = concurrent(pier.addr(), "/big", 8);
    for r in &responses {
        assert_eq!(r.body.len(), 200_000);
    }
    assert_eq!(seen(&origin, "/big").len(), 1);
}

#[test]
fn memory_stays_within_the_budget() {
    let origin =
        Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], &"m".repeat(10_000)));
    let pier = Pier::with_config(
        &config(origin.addr, 1, "").replace("memory = \"4MiB\"", "memory = \"256KiB\""),
        &[],
    );
    for i in 0..100 {
        get(pier.addr(), &req(&format!("/m{i}"), ""));
    }
    // Recently stored objects are hits; the budget cannot hold all 100.
    let last = get(pier.addr(), &req("/m99", ""));
    assert!(last
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
    let first = get(pier.addr(), &req("/m0", ""));
    assert!(first
        .header("cache-status")
        .unwrap()
        .starts_with("pier; fwd=miss"));
}

#[test]
fn a_route_naming_an_unknown_cache_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\ncache = \"nope\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("route[1].cache"), "{err}");
    assert!(err.contains(":9"), "names the line: {err}");
}

fn with_admin(origin: &Upstream) -> Pier {
    let text = config(origin.addr, 1, "").replace(
        "[cache.main]",
        "[admin]\nlisten = \"127.0.0.1:0\"\n[cache.main]",
    );
    Pier::with_config(&text, &[])
}

fn admin(pier: &Pier, raw: &str) -> common::Response {
    get(pier.admin.expect("admin listener"), raw)
}

#[test]
fn purge_by_exact_key_and_by_prefix_on_the_admin_listener() {
    let origin = Upstream::start(|r| reply(200, &[("Cache-Control", "max-age=60")], &r.target));
    let pier = with_admin(&origin);
    for p in ["/img/a", "/img/b", "/doc"] {
        get(pier.addr(), &req(p, ""));
    }
    let exact = admin(
        &pier,
        "PURGE /cache/main?key=http%3A%2F%2Fapp.test%2Fdoc HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(exact.status, 200);
    assert_eq!(exact.body, b"purged 1\n");
    let prefix = admin(
        &pier,
        "DELETE /cache/main?prefix=http://app.test/img/ HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(prefix.body, b"purged 2\n");
    let none = admin(
        &pier,
        "PURGE /cache/main?key=nothing HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(none.status, 404);
    let unknown = admin(
        &pier,
        "PURGE /cache/other?key=x HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(unknown.status, 404);
    let get_refused = admin(&pier, "GET /cache/main?key=x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(get_refused.status, 405);
    for p in ["/img/a", "/img/b", "/doc"] {
        get(pier.addr(), &req(p, ""));
        assert_eq!(
            seen(&origin, p).len(),
            2,
            "{p} fetched again after the purge"
        );
    }
}

#[test]
fn metrics_count_hits_misses_and_bytes() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "12345"));
    let pier = with_admin(&origin);
    get(pier.addr(), &req("/x", ""));
    get(pier.addr(), &req("/x", ""));
    get(pier.addr(), &req("/x", ""));
    let metrics = admin(&pier, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    let text = String::from_utf8(metrics.body).unwrap();
    let value = |series: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(series))
            .unwrap_or_else(|| panic!("{series} in {text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(value("pier_cache_hits_total{zone=\"main\"}"), 2);
    assert_eq!(value("pier_cache_misses_total{zone=\"main\"}"), 1);
    assert_eq!(value("pier_cache_stored_total{zone=\"main\"}"), 1);
    assert_eq!(
        value("pier_cache_objects{zone=\"main\",tier=\"memory\"}"),
        1
    );
    let bytes = value("pier_cache_bytes{zone=\"main\",tier=\"memory\"}");
    assert!((5..2048).contains(&bytes), "{bytes}");
}

#[test]
fn a_reload_that_keeps_the_zone_keeps_what_it_stored() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "kept"));
    let pier = start(&origin, "");
    get(pier.addr(), &req("/r", ""));
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reloaded");
    let after = get(pier.addr(), &req("/r", ""));
    assert!(after
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit"));
    assert_eq!(seen(&origin, "/r").len(), 1);
}

#[test]
fn stale_while_revalidate_serves_stale_at_once_and_refreshes_once_behind() {
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    let origin = Upstream::start(move |_| {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            return reply(
                200,
                &[("Cache-Control", "max-age=1, stale-while-revalidate=60")],
                "v1",
            );
        }
        std::thread::sleep(Duration::from_millis(600));
        reply(200, &[("Cache-Control", "max-age=60")], "v2")
    });
    let pier = Pier::with_config(&config(origin.addr, 2, ""), &[]);
    get(pier.addr(), &req("/w", ""));
    std::thread::sleep(Duration::from_millis(2100));
    let started = Instant::now();
    let stale = get(pier.addr(), &req("/w", ""));
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "answered without waiting for the origin"
    );
    assert_eq!(stale.body, b"v1");
    assert!(stale.header("cache-status").unwrap().contains("hit"));
    let during = get(pier.addr(), &req("/w", ""));
    assert_eq!(during.body, b"v1");
    std::thread::sleep(Duration::from_millis(1000));
    let fresh = get(pier.addr(), &req("/w", ""));
    assert_eq!(fresh.body, b"v2");
    assert_eq!(seen(&origin, "/w").len(), 2, "one refresh");
}

/// The cache outcomes in the access log of a miss, a hit and a POST to a
/// cached route with `route_extra` keys.
fn logged_cache_outcomes(route_extra: &str) -> Vec<String> {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "logged"));
    let text = config(origin.addr, 1, "").replace(
        "[cache.main]",
        "[access_log]\npath = \"{dir}/access.log\"\nformat = \"json\"\nflush_interval = \"50ms\"\n[cache.main]",
    ) + route_extra;
    let pier = Pier::with_config(&text, &[]);
    get(pier.addr(), &req("/log", ""));
    get(pier.addr(), &req("/log", ""));
    get(
        pier.addr(),
        "POST /log HTTP/1.1\r\nHost: app.test\r\nContent-Length: 0\r\n\r\n",
    );
    let path = pier.root().join("access.log");
    let deadline = Instant::now() + Duration::from_secs(3);
    let lines = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= 3 || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["cache"].as_str().unwrap_or("null").to_string()
        })
        .collect()
}

#[test]
fn the_access_log_records_the_cache_outcome() {
    assert_eq!(logged_cache_outcomes(""), ["miss", "hit", "bypass"]);
}

#[test]
fn the_cache_outcome_is_logged_through_the_routes_filters() {
    // Header rules and compression each answer through a session of their
    // own, which must pass the outcome on to the driver's log.
    for extra in [
        "response_headers = { set = { \"X-Edge\" = \"1\" } }\n",
        "compress = true\n",
    ] {
        assert_eq!(
            logged_cache_outcomes(extra),
            ["miss", "hit", "bypass"],
            "{extra}"
        );
    }
}

#[test]
fn a_follower_gets_the_first_bytes_before_the_origin_has_sent_the_last() {
    use std::io::{Read, Write};
    // An origin that sends the head and half the body, then waits 1.5 s.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let half = vec![b'h'; 50_000];
                let head = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 100000\r\n\r\n";
                let _ = conn.write_all(head);
                let _ = conn.write_all(&half);
                std::thread::sleep(Duration::from_millis(1500));
                let _ = conn.write_all(&half);
                std::thread::sleep(Duration::from_secs(2));
            });
        }
    });
    let pier = Pier::with_config(&config(addr, 2, ""), &[]);
    let leader = {
        let a = pier.addr();
        std::thread::spawn(move || get(a, &req("/stream", "")))
    };
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let mut follower = common::connect(pier.addr());
    follower.write_all(req("/stream", "").as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") || got.len() < 1000 {
        let n = follower.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    let first_bytes = started.elapsed();
    assert!(
        first_bytes < Duration::from_millis(1000),
        "first bytes after {first_bytes:?}: the follower waited for the whole body"
    );
    let head =
        String::from_utf8_lossy(&got[..got.windows(4).position(|w| w == b"\r\n\r\n").unwrap()])
            .to_string();
    assert!(head.contains("collapsed"), "{head}");
    let mut rest = common::Reader::new(follower);
    drop(rest.stream.set_read_timeout(Some(Duration::from_secs(5))));
    let mut total = got.len() - head.len() - 4;
    while total < 100_000 {
        let n = rest.stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed inside the body at {total}");
        total += n;
    }
    assert_eq!(leader.join().unwrap().body.len(), 100_000);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one origin request");
}

#[test]
fn early_hints_reach_the_client_that_went_to_the_origin_and_are_never_stored() {
    let origin = Upstream::start(|_| {
        Reply::Raw(
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        )
    });
    let pier = start(&origin, "");
    let mut r = common::Reader::new(common::connect(pier.addr()));
    r.send(req("/hinted", "").as_bytes());
    let early = r.response(false).unwrap();
    assert_eq!(early.status, 103);
    assert_eq!(early.header("link"), Some("</style.css>; rel=preload"));
    let miss = r.response(false).unwrap();
    assert_eq!((miss.status, miss.body.as_slice()), (200, &b"ok"[..]));
    assert_eq!(miss.header("cache-status"), Some("pier; fwd=miss; stored"));
    // The stored response is the final one: a hit answers with it alone
    // (RFC 9111 stores no 1xx, and a hit need not replay one).
    r.send(req("/hinted", "").as_bytes());
    let hit = r.response(false).unwrap();
    assert_eq!((hit.status, hit.body.as_slice()), (200, &b"ok"[..]));
    assert!(hit.header("cache-status").unwrap().starts_with("pier; hit"));
    assert!(hit.header("link").is_none());
    assert_eq!(seen(&origin, "/hinted").len(), 1);
}

#[test]
fn the_status_page_and_status_json_show_the_cache_zones() {
    let origin = Upstream::start(|_| reply(200, &[("Cache-Control", "max-age=60")], "hello"));
    let text = config(origin.addr, 1, "")
        .replace("[server]", "[admin]\nlisten = \"127.0.0.1:0\"\n[server]");
    let pier = Pier::with_config(&text, &[]);
    for _ in 0..4 {
        assert_eq!(get(pier.addr(), &req("/a", "")).status, 200);
    }
    let admin = pier.admin.expect("admin listener");
    let r = get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let zone = &v["cache_zones"][0];
    assert_eq!(zone["name"], "main", "{v}");
    assert_eq!(zone["hits"], 3, "{zone}");
    assert_eq!(zone["misses"], 1, "{zone}");
    assert_eq!(zone["hit_ratio"], 0.75, "{zone}");
    let memory = &zone["tiers"][0];
    assert_eq!(memory["name"], "memory");
    assert_eq!(memory["entries"], 1, "{zone}");
    assert!(memory["bytes"].as_u64().unwrap() > 0, "{zone}");
    assert_eq!(memory["budget_bytes"], 4 << 20, "{zone}");
    let page = get(
        admin,
        "GET /status HTTP/1.1\r\nHost: admin\r\nAccept: text/html\r\n\r\n",
    );
    let page = String::from_utf8_lossy(&page.body);
    assert!(!page.contains("no cache yet"), "{page}");
    assert!(
        page.contains("<td data-v=\"cache_zones.0.hits\" data-f=\"count\">3</td>"),
        "{page}"
    );
    assert!(page.contains("<td>main</td>"), "{page}");
}
