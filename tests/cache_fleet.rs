//! A two-tier cache fleet (docs/fleet.md, "A cache tier"): front instances
//! shard requests over cache instances with the consistent-hash balancer on
//! the URI, so each object is fetched from the origin once and stored on one
//! cache instance only, whichever front a client reaches.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::upstream::{Reply, Upstream};
use common::{get, Pier};

/// A cache instance: a proxy route with a cache zone in front of the origin.
fn cache_instance(origin: SocketAddr) -> Pier {
    Pier::with_config(
        &format!(
            r#"
[server]
workers = 2
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "origin"
servers = [{{ address = "{origin}" }}]
[cache.objects]
memory = "8MiB"
[[route]]
path = "/"
handler = "proxy"
upstream = "origin"
cache = "objects"
"#
        ),
        &[],
    )
}

/// A front instance: no cache, the cache instances as one group hashed on
/// the URI.
fn front(caches: &[&Pier]) -> Pier {
    let servers: Vec<String> = caches
        .iter()
        .map(|c| format!("{{ address = \"{}\" }}", c.addr()))
        .collect();
    Pier::with_config(
        &format!(
            r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "caches"
servers = [{}]
balance = "hash"
hash_key = "uri"
[[route]]
path = "/"
handler = "proxy"
upstream = "caches"
"#,
            servers.join(", ")
        ),
        &[],
    )
}

fn req(target: &str, extra: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: app.test\r\n{extra}\r\n")
}

fn memory_objects(pier: &Pier) -> u64 {
    let page = get(
        pier.admin.expect("admin"),
        "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let text = String::from_utf8(page.body).unwrap();
    let series = "pier_cache_objects{zone=\"objects\",tier=\"memory\"} ";
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .unwrap_or_else(|| panic!("{series} in {text}"))
        .parse()
        .unwrap()
}

#[test]
fn each_object_is_fetched_once_and_stored_on_one_cache_instance() {
    let origin = Upstream::start(|r| {
        Reply::Http(
            200,
            vec![("Cache-Control".into(), "max-age=600".into())],
            format!("object {}", r.target).into_bytes(),
        )
    });
    let caches = [cache_instance(origin.addr), cache_instance(origin.addr)];
    let fronts = [
        front(&[&caches[0], &caches[1]]),
        front(&[&caches[0], &caches[1]]),
    ];
    // Keys differ in the path and in the query alone: both shard.
    let keys: Vec<String> = (0..40)
        .map(|i| {
            if i % 2 == 0 {
                format!("/o/{i}")
            } else {
                format!("/search?q={i}")
            }
        })
        .collect();
    for round in 0..2 {
        for (i, key) in keys.iter().enumerate() {
            // Each key through both fronts, the first front taking turns.
            for f in [i % 2, 1 - i % 2] {
                let r = get(fronts[f].addr(), &req(key, ""));
                assert_eq!(r.status, 200, "{key} through front {f}");
                assert_eq!(r.body, format!("object {key}").as_bytes());
                let status = r.header("cache-status").unwrap();
                let first = round == 0 && f == i % 2;
                if first {
                    assert_eq!(status, "pier; fwd=miss; stored", "{key}");
                } else {
                    assert!(status.starts_with("pier; hit"), "{key}: {status}");
                }
            }
        }
    }
    for key in &keys {
        let reached = origin
            .requests()
            .iter()
            .filter(|r| r.target == *key)
            .count();
        assert_eq!(reached, 1, "{key} reached the origin once");
        // Asked directly, exactly one cache instance holds it.
        let holders = caches
            .iter()
            .filter(|c| {
                let r = get(c.addr(), &req(key, "Cache-Control: only-if-cached\r\n"));
                assert!(r.status == 200 || r.status == 504, "{}", r.status);
                r.status == 200
            })
            .count();
        assert_eq!(holders, 1, "{key} is stored on one cache instance");
    }
    let stored: Vec<u64> = caches.iter().map(memory_objects).collect();
    assert_eq!(stored.iter().sum::<u64>(), keys.len() as u64, "{stored:?}");
    assert!(
        stored.iter().all(|&n| n >= 5),
        "both cache instances take a share: {stored:?}"
    );
    // The origin had nothing else to do.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(origin.requests().len(), keys.len());
}
