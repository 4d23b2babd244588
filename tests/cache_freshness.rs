//! What the cache reads of a response's age and freshness, end to end: a
//! real `pier` in front of a scripted origin. A hit keeps the origin's `Date`
//! and counts `Age` from it (RFC 9110 §6.6.1, RFC 9111 §4); an `Age` field
//! is read as RFC 9111 §5.1 says, whatever its shape.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use common::upstream::{Reply, Req, Upstream};
use common::{get, Pier};

/// One worker, and a zone that keeps no hit-for-miss marks.
fn config(origin: SocketAddr, zone_extra: &str) -> String {
    common::cache::cached_proxy_config(
        origin,
        1,
        &format!(
            "hit_for_miss = \"0s\"
{zone_extra}"
        ),
    )
}

fn start(origin: &Upstream, zone_extra: &str) -> Pier {
    Pier::with_config(&config(origin.addr, zone_extra), &[])
}

fn req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n")
}

fn reply(fields: &[(&str, &str)], body: &str) -> Reply {
    Reply::Http(
        200,
        fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body.as_bytes().to_vec(),
    )
}

/// Requests to `path` the origin saw.
fn seen(origin: &Upstream, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r: &&Req| r.target == path)
        .count()
}

/// Asks for `path` twice; whether the second answer came from the cache.
fn second_is_a_hit(pier: &Pier, path: &str) -> bool {
    get(pier.addr(), &req(path));
    let again = get(pier.addr(), &req(path));
    again
        .header("cache-status")
        .is_some_and(|s| s.starts_with("pier; hit"))
}

#[test]
fn a_hit_keeps_the_origins_date_and_its_age_counts_from_it() {
    let date = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(50));
    let sent = date.clone();
    let origin = Upstream::start(move |_| {
        reply(
            &[
                ("Cache-Control", "max-age=600"),
                ("Date", sent.as_str()),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ],
            "x",
        )
    });
    let pier = start(&origin, "");
    get(pier.addr(), &req("/d"));
    std::thread::sleep(Duration::from_millis(1100));
    let hit = get(pier.addr(), &req("/d"));
    assert!(hit.header("cache-status").unwrap().starts_with("pier; hit"));
    assert_eq!(hit.header("date"), Some(date.as_str()), "the origin's Date");
    let dates = hit
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("date"))
        .count();
    assert_eq!(dates, 1);
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!((50..=53).contains(&age), "age {age}");
    // A conditional answered from the cache carries the same Date.
    let not_modified = get(
        pier.addr(),
        "GET /d HTTP/1.1\r\nHost: app.test\r\nIf-Modified-Since: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n",
    );
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("date"), Some(date.as_str()));
    assert_eq!(seen(&origin, "/d"), 1);
}

#[test]
fn a_response_without_a_date_keeps_the_time_it_arrived() {
    let origin = Upstream::start(|_| reply(&[("Cache-Control", "max-age=600")], "x"));
    let pier = start(&origin, "");
    let before = SystemTime::now();
    get(pier.addr(), &req("/n"));
    std::thread::sleep(Duration::from_millis(2100));
    let hit = get(pier.addr(), &req("/n"));
    assert!(hit.header("cache-status").unwrap().starts_with("pier; hit"));
    let date = httpdate::parse_http_date(hit.header("date").unwrap()).unwrap();
    let arrived = before.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let kept = date.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    assert!(
        kept.as_secs() <= arrived.as_secs() + 1,
        "Date {kept:?} is the time it arrived ({arrived:?}), not the time of the hit"
    );
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!((2..=3).contains(&age), "age {age}");
}

/// An origin answering `max-age=60` with the `Age` lines a path names.
fn origin_with_ages() -> Upstream {
    Upstream::start(|r| {
        let ages: &[&str] = match r.target.as_str() {
            "/list-old" => &["100, 0"],
            "/list-young" => &["0, 100"],
            "/two-lines" => &["100", "0"],
            "/junk-first" => &["old, 0"],
            "/junk" => &["soon"],
            "/negative" => &["-100"],
            "/huge" => &["99999999999999999999999"],
            "/saturated" => &["2147483648"],
            _ => &[],
        };
        let mut fields = vec![("Cache-Control".to_string(), "max-age=60".to_string())];
        fields.extend(ages.iter().map(|a| ("Age".to_string(), a.to_string())));
        Reply::Http(200, fields, b"a".to_vec())
    })
}

#[test]
fn a_list_valued_age_is_read_by_its_first_member() {
    let origin = origin_with_ages();
    let pier = start(&origin, "");
    // 100 s old with 60 s of freshness: stale at once, asked for again.
    for path in ["/list-old", "/two-lines"] {
        assert!(!second_is_a_hit(&pier, path), "{path} is stale");
        assert_eq!(seen(&origin, path), 2, "{path}");
    }
    assert!(second_is_a_hit(&pier, "/list-young"));
    let hit = get(pier.addr(), &req("/list-young"));
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!(age <= 1, "age {age}");
    assert_eq!(seen(&origin, "/list-young"), 1);
}

#[test]
fn an_invalid_age_is_ignored_and_never_makes_a_response_fresher_than_its_date() {
    let origin = origin_with_ages();
    let pier = start(&origin, "");
    // Ignored: as old as the time since it arrived, one Age line sent.
    for path in ["/junk-first", "/junk", "/negative"] {
        assert!(second_is_a_hit(&pier, path), "{path}");
        let hit = get(pier.addr(), &req(path));
        let ages: Vec<&str> = hit
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("age"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(ages.len(), 1, "{path}: {ages:?}");
        let age: u64 = ages[0].parse().unwrap();
        assert!(age <= 1, "{path}: age {age}");
    }
}

#[test]
fn a_huge_age_saturates_and_the_response_is_stale() {
    let origin = origin_with_ages();
    let pier = start(&origin, "");
    for path in ["/huge", "/saturated"] {
        assert!(!second_is_a_hit(&pier, path), "{path} is stale");
        assert_eq!(seen(&origin, path), 2, "{path}");
    }
}
