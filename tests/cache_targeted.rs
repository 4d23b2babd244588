//! Targeted cache-control fields (RFC 9213) end to end: a real `pier` in
//! front of a scripted origin whose `Cache-Control` says one thing to
//! browsers and whose `CDN-Cache-Control` (or the zone's own
//! `targeted_field`) says another to this cache. Each test shows which one
//! the cache obeyed by how many requests reach the origin.

mod common;

use std::net::SocketAddr;

use common::upstream::{Reply, Upstream};
use common::{get, Pier, Response};

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

/// An origin that answers each path with the fields `fields_of` gives it.
fn origin(fields_of: fn(&str) -> &'static [(&'static str, &'static str)]) -> Upstream {
    Upstream::start(move |r| {
        let fields = fields_of(&r.target)
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Reply::Http(200, fields, b"body".to_vec())
    })
}

fn req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n{extra}\r\n")
}

fn seen(origin: &Upstream, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r| r.target == path)
        .count()
}

fn is_hit(r: &Response) -> bool {
    r.header("cache-status")
        .is_some_and(|s| s.starts_with("pier; hit"))
}

/// Asks for `path` twice: whether the second answer came from the cache.
fn second_is_a_hit(pier: &Pier, path: &str) -> bool {
    get(pier.addr(), &req(path, ""));
    is_hit(&get(pier.addr(), &req(path, "")))
}

const BROWSERS_KEEP_IT: (&str, &str) = ("Cache-Control", "public, max-age=600");

#[test]
fn cdn_cache_control_no_store_private_no_cache_and_max_age_0_beat_cache_control() {
    let origin = origin(|path| match path {
        "/no-store" => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "no-store")],
        "/private" => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "private")],
        "/no-cache" => &[
            BROWSERS_KEEP_IT,
            ("CDN-Cache-Control", "no-cache"),
            ("ETag", "\"e\""),
        ],
        "/max-age-0" => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "max-age=0")],
        _ => &[BROWSERS_KEEP_IT],
    });
    let pier = Pier::with_config(&config(origin.addr, ""), &[]);
    for path in ["/no-store", "/private", "/max-age-0"] {
        assert!(!second_is_a_hit(&pier, path), "{path}");
        assert_eq!(seen(&origin, path), 2, "{path} reached the origin twice");
    }
    // no-cache: stored, and asked about every time.
    assert!(!second_is_a_hit(&pier, "/no-cache"));
    let asked: Vec<_> = origin
        .requests()
        .into_iter()
        .filter(|r| r.target == "/no-cache")
        .collect();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].header("if-none-match"), Some("\"e\""));
    // Cache-Control alone still rules where no targeted field is sent.
    assert!(second_is_a_hit(&pier, "/plain"));
}

#[test]
fn a_cdn_cache_control_max_age_shorter_or_longer_than_cache_controls_is_preferred() {
    // Each response says it is 100 s old already.
    let origin = origin(|path| match path {
        "/longer" => &[
            ("Cache-Control", "max-age=60"),
            ("CDN-Cache-Control", "max-age=600"),
            ("Age", "100"),
        ],
        "/shorter" => &[
            ("Cache-Control", "max-age=600"),
            ("CDN-Cache-Control", "max-age=60"),
            ("Age", "100"),
        ],
        "/s-maxage-ignored" => &[
            ("Cache-Control", "s-maxage=600"),
            ("CDN-Cache-Control", "max-age=60"),
            ("Age", "100"),
        ],
        "/own-s-maxage" => &[
            ("Cache-Control", "max-age=600"),
            ("CDN-Cache-Control", "s-maxage=600, max-age=10"),
            ("Age", "100"),
        ],
        "/expires-ignored" => &[
            ("Expires", "Thu, 01 Jan 1970 00:00:00 GMT"),
            ("CDN-Cache-Control", "max-age=600"),
        ],
        _ => &[],
    });
    let pier = Pier::with_config(&config(origin.addr, ""), &[]);
    get(pier.addr(), &req("/longer", ""));
    let hit = get(pier.addr(), &req("/longer", ""));
    assert!(is_hit(&hit));
    let ttl: u64 = hit
        .header("cache-status")
        .and_then(|s| s.split("ttl=").nth(1))
        .and_then(|t| t.split(';').next())
        .and_then(|t| t.trim().parse().ok())
        .expect("a ttl");
    assert!((497..=500).contains(&ttl), "ttl {ttl}");
    assert_eq!(
        hit.header("cache-control"),
        Some("max-age=60"),
        "kept for browsers"
    );
    assert!(!second_is_a_hit(&pier, "/shorter"));
    assert_eq!(seen(&origin, "/shorter"), 2);
    // The s-maxage of the Cache-Control it replaces does not count; its own does.
    assert!(!second_is_a_hit(&pier, "/s-maxage-ignored"));
    assert!(second_is_a_hit(&pier, "/own-s-maxage"));
    // Expires is replaced too.
    assert!(second_is_a_hit(&pier, "/expires-ignored"));
}

#[test]
fn a_fresh_cdn_cache_control_beside_cache_control_no_store_is_stored_and_passed_on() {
    let origin = origin(|_| {
        &[
            ("Cache-Control", "no-store, private"),
            ("CDN-Cache-Control", "max-age=600"),
        ]
    });
    let pier = Pier::with_config(&config(origin.addr, ""), &[]);
    let miss = get(pier.addr(), &req("/a", ""));
    assert_eq!(miss.header("cache-status"), Some("pier; fwd=miss; stored"));
    let hit = get(pier.addr(), &req("/a", ""));
    assert!(is_hit(&hit));
    assert_eq!(seen(&origin, "/a"), 1);
    for r in [&miss, &hit] {
        assert_eq!(r.header("cache-control"), Some("no-store, private"));
        assert_eq!(r.header("cdn-cache-control"), Some("max-age=600"));
    }
}

#[test]
fn must_revalidate_in_cdn_cache_control_forbids_stale_and_cache_controls_does_not_count() {
    let origin = origin(|path| match path {
        "/must" => &[
            ("Cache-Control", "max-age=600"),
            ("CDN-Cache-Control", "max-age=60, must-revalidate"),
            ("Age", "100"),
        ],
        _ => &[
            ("Cache-Control", "max-age=600, must-revalidate"),
            ("CDN-Cache-Control", "max-age=60"),
            ("Age", "100"),
        ],
    });
    let pier = Pier::with_config(&config(origin.addr, ""), &[]);
    let stale_ok = "Cache-Control: max-stale=1000\r\n";
    get(pier.addr(), &req("/must", ""));
    assert!(!is_hit(&get(pier.addr(), &req("/must", stale_ok))));
    assert_eq!(seen(&origin, "/must"), 2);
    get(pier.addr(), &req("/may", ""));
    let stale = get(pier.addr(), &req("/may", stale_ok));
    assert!(is_hit(&stale), "{:?}", stale.header("cache-status"));
    assert_eq!(seen(&origin, "/may"), 1);
}

#[test]
fn an_invalid_cdn_cache_control_is_ignored() {
    let origin = origin(|path| match path {
        "/upper" => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "NO-STORE")],
        "/trailing" => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "no-store,")],
        _ => &[BROWSERS_KEEP_IT, ("CDN-Cache-Control", "")],
    });
    let pier = Pier::with_config(&config(origin.addr, ""), &[]);
    for path in ["/upper", "/trailing", "/empty"] {
        assert!(second_is_a_hit(&pier, path), "{path}: Cache-Control rules");
    }
}

#[test]
fn the_zones_own_field_comes_before_cdn_cache_control() {
    let origin = origin(|path| match path {
        "/own-keeps" => &[
            ("Cache-Control", "no-store"),
            ("CDN-Cache-Control", "no-store"),
            ("Pier-Cache-Control", "max-age=600"),
        ],
        "/own-refuses" => &[
            BROWSERS_KEEP_IT,
            ("CDN-Cache-Control", "max-age=600"),
            ("Pier-Cache-Control", "no-store"),
        ],
        _ => &[
            ("Cache-Control", "no-store"),
            ("CDN-Cache-Control", "max-age=600"),
            ("Pier-Cache-Control", "max-age=60;;"),
        ],
    });
    let zone = "targeted_field = \"Pier-Cache-Control\"";
    let pier = Pier::with_config(&config(origin.addr, zone), &[]);
    assert!(second_is_a_hit(&pier, "/own-keeps"));
    assert!(!second_is_a_hit(&pier, "/own-refuses"));
    assert!(
        second_is_a_hit(&pier, "/own-invalid"),
        "CDN-Cache-Control next"
    );
    let hit = get(pier.addr(), &req("/own-keeps", ""));
    assert_eq!(hit.header("pier-cache-control"), Some("max-age=600"));
    assert_eq!(seen(&origin, "/own-keeps"), 1);
    assert_eq!(seen(&origin, "/own-refuses"), 2);

    // A zone that names no field of its own does not read it.
    drop(pier);
    let other = Pier::with_config(&config(origin.addr, ""), &[]);
    assert!(!second_is_a_hit(&other, "/own-keeps"));
    assert!(second_is_a_hit(&other, "/own-refuses"));
}

#[test]
fn a_targeted_field_that_names_a_field_already_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let base = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\ncache = \"a\"\n";
    for (value, says) in [
        ("Cache-Control", "read already"),
        ("cdn-cache-control", "read already"),
        ("Pier Cache", "a token"),
        ("", "a token"),
    ] {
        std::fs::write(
            &path,
            format!("{base}[cache.a]\ntargeted_field = \"{value}\"\n"),
        )
        .unwrap();
        let err = common::assert_config_error(&path, 11, "cache.a.targeted_field");
        assert!(err.contains(says), "{value}: {err}");
    }
    std::fs::write(
        &path,
        format!("{base}[cache.a]\ntargeted_field = \"Pier-Cache-Control\"\n"),
    )
    .unwrap();
    let (code, err) = common::check_config(&path);
    assert_eq!(code, Some(0), "{err}");
}
