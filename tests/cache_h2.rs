//! The HTTP cache in front of `protocol = "h2"` upstream groups: the same
//! lookup, store, revalidation, collapsing and invalidation as in front of
//! HTTP/1.1 ones (tests/cache.rs), shown against an HTTP/2 origin written
//! with the `h2` crate (tests/common/h2_origin.rs) and against a Pier
//! origin taking HTTP/2 with prior knowledge.

mod common;
#[path = "common/h2_origin.rs"]
mod h2_origin;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{get, Pier};
use h2_origin::{H2Origin, CACHEABLE_LEN};

fn config(origin: SocketAddr, workers: usize) -> String {
    config_zone(origin, workers, "")
}

fn config_zone(origin: SocketAddr, workers: usize, zone_extra: &str) -> String {
    format!(
        r#"
[server]
workers = {workers}
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
protocol = "h2"
servers = [{{ address = "{origin}" }}]
[cache.main]
memory = "4MiB"
{zone_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
cache = "main"
"#
    )
}

fn req(method: &str, path: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
}

/// Requests for `path` the origin received.
fn seen(origin: &H2Origin, path: &str) -> Vec<http::HeaderMap> {
    origin
        .requests()
        .into_iter()
        .filter(|(uri, _)| uri.ends_with(path))
        .map(|(_, headers)| headers)
        .collect()
}

fn cache_status(r: &common::Response) -> &str {
    r.header("cache-status").unwrap_or("(none)")
}

#[test]
fn a_cached_route_in_front_of_an_h2_group_stores_and_answers_hits() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&config(origin.addr, 1), &[]);
    let path = "/cache/60/0/a";
    let first = get(pier.addr(), &req("GET", path));
    assert_eq!(first.status, 200);
    assert_eq!(first.body.len(), CACHEABLE_LEN);
    assert_eq!(cache_status(&first), "pier; fwd=miss; stored");
    for _ in 0..2 {
        let hit = get(pier.addr(), &req("GET", path));
        assert_eq!(hit.status, 200);
        assert_eq!(hit.body, vec![b'c'; CACHEABLE_LEN]);
        assert!(
            cache_status(&hit).starts_with("pier; hit"),
            "{}",
            cache_status(&hit)
        );
        assert_eq!(hit.header("etag"), Some("\"v1\""));
        assert_eq!(hit.header("cache-control"), Some("max-age=60"));
    }
    assert_eq!(
        seen(&origin, path).len(),
        1,
        "one request reached the origin"
    );
}

#[test]
fn a_stale_response_from_an_h2_group_is_revalidated_and_a_304_refreshes_it() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&config(origin.addr, 1), &[]);
    let path = "/cache/1/0/r";
    let first = get(pier.addr(), &req("GET", path));
    assert_eq!(cache_status(&first), "pier; fwd=miss; stored");
    std::thread::sleep(Duration::from_millis(2100));
    let revalidated = get(pier.addr(), &req("GET", path));
    assert_eq!(revalidated.status, 200);
    assert_eq!(revalidated.body.len(), CACHEABLE_LEN);
    assert_eq!(
        cache_status(&revalidated),
        "pier; fwd=stale; fwd-status=304"
    );
    let reqs = seen(&origin, path);
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].get("if-none-match").is_none());
    assert_eq!(reqs[1].get("if-none-match").unwrap(), "\"v1\"");
    // The 304's fields replaced the stored ones: fresh for 60 s now.
    let hit = get(pier.addr(), &req("GET", path));
    assert!(
        cache_status(&hit).starts_with("pier; hit"),
        "{}",
        cache_status(&hit)
    );
    assert_eq!(hit.header("x-fresh"), Some("yes"));
    assert_eq!(hit.header("cache-control"), Some("max-age=60"));
    assert_eq!(hit.body.len(), CACHEABLE_LEN);
    assert_eq!(seen(&origin, path).len(), 2);
}

#[test]
fn a_stale_response_stands_in_when_the_h2_origin_is_down() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(
        &config_zone(origin.addr, 1, "stale_if_error = \"60s\""),
        &[],
    );
    let path = "/cache/1/0/down";
    get(pier.addr(), &req("GET", path));
    std::thread::sleep(Duration::from_millis(2100));
    drop(origin);
    let down = get(pier.addr(), &req("GET", path));
    assert_eq!(down.status, 200);
    assert_eq!(down.body.len(), CACHEABLE_LEN);
    assert_eq!(
        cache_status(&down),
        "pier; hit; fwd=stale; detail=origin-down"
    );
}

#[test]
fn concurrent_misses_to_an_h2_group_reach_the_origin_once() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&config(origin.addr, 2), &[]);
    let path = "/cache/60/700/slow";
    let started = Instant::now();
    let addr = pier.addr();
    let clients: Vec<_> = (0..10)
        .map(|_| std::thread::spawn(move || get(addr, &req("GET", path))))
        .collect();
    let responses: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = started.elapsed();
    assert_eq!(
        seen(&origin, path).len(),
        1,
        "one request reached the origin"
    );
    for r in &responses {
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), CACHEABLE_LEN);
    }
    let collapsed = responses
        .iter()
        .filter(|r| cache_status(r).contains("collapsed"))
        .count();
    assert!(collapsed >= 1, "some requests followed the first");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn an_unsafe_method_to_an_h2_group_invalidates_what_it_changed() {
    let origin = H2Origin::start();
    let pier = Pier::with_config(&config(origin.addr, 1), &[]);
    let path = "/cache/60/0/changed";
    get(pier.addr(), &req("GET", path));
    let hit = get(pier.addr(), &req("GET", path));
    assert!(cache_status(&hit).starts_with("pier; hit"));
    let post = get(pier.addr(), &req("DELETE", path));
    assert_eq!(post.status, 200);
    let again = get(pier.addr(), &req("GET", path));
    assert_eq!(cache_status(&again), "pier; fwd=miss; stored");
    assert_eq!(seen(&origin, path).len(), 3);
}

/// A Pier origin taking HTTP/2 with prior knowledge, answering every path
/// with a fixed cacheable response; a proxy in front of it with one group of
/// each protocol, both cached.
#[test]
fn a_pier_origin_is_cached_alike_over_http1_and_h2() {
    let origin = Pier::with_config(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[route]]
path = "/"
handler = "respond"
body = "from the origin"
headers = { "Cache-Control" = "max-age=60" }
"#,
        &[],
    );
    let proxy = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "one"
protocol = "http1"
servers = [{{ address = "{0}" }}]
[[upstream]]
name = "two"
protocol = "h2"
servers = [{{ address = "{0}" }}]
[cache.main]
memory = "1MiB"
[[route]]
path = "/http1/"
handler = "proxy"
upstream = "one"
cache = "main"
[[route]]
path = "/h2/"
handler = "proxy"
upstream = "two"
cache = "main"
"#,
            origin.addr()
        ),
        &[],
    );
    for prefix in ["/http1/", "/h2/"] {
        let path = format!("{prefix}page");
        let first = get(proxy.addr(), &req("GET", &path));
        assert_eq!(first.status, 200, "{prefix}");
        assert_eq!(first.body, b"from the origin", "{prefix}");
        assert_eq!(cache_status(&first), "pier; fwd=miss; stored", "{prefix}");
        for _ in 0..2 {
            let hit = get(proxy.addr(), &req("GET", &path));
            assert_eq!(hit.body, b"from the origin", "{prefix}");
            assert!(
                cache_status(&hit).starts_with("pier; hit"),
                "{prefix}: {}",
                cache_status(&hit)
            );
        }
    }
}
