//! Header rules on routes (`response_headers`, `request_headers`) and the
//! static `cache_control` / `expires` keys, against a real `pier` over plain
//! HTTP and TLS, with raw sockets, curl and a recording upstream.

mod common;

use std::process::Command;

use common::tls::{connect_tls, recording_client, tls_get, tls_request};
use common::upstream::{Reply, Upstream};
use common::{assert_config_error, get, which, Pier, Response};

const STATIC: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }

[[route]]
path = "/"
handler = "static"
root = "{dir}/site"
cache_control = "public, max-age=60"
expires = "1h"

[route.response_headers]
set = { "Strict-Transport-Security" = "max-age=63072000", "X-Seen" = "{scheme}://{host}{uri} q={query} p={path} from {remote_addr}" }
add = { Link = ["</a.css>; rel=preload", "</b.js>; rel=preload"] }
remove = ["Accept-Ranges"]

[[route]]
path = "/always/"
handler = "static"
root = "{dir}/site"
response_headers = { always = true, set = { X-Frame-Options = "DENY" } }

[[route]]
path = "/fixed"
handler = "respond"
body = "fixed"
headers = { X-Powered-By = "php", X-Kept = "yes" }
response_headers = { remove = ["x-powered-by"], set = { "X-Request-Id" = "{request_id}" } }
"#;

/// The server and the directory its files are in (kept for the test's length).
fn static_pier() -> (Pier, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("always")).unwrap();
    std::fs::write(site.join("a.txt"), "hello\n").unwrap();
    std::fs::write(site.join("always/a.txt"), "hello\n").unwrap();
    let text = STATIC.replace("{dir}", dir.path().to_str().unwrap());
    (Pier::with_config(&text, &[]), dir)
}

fn values<'a>(r: &'a Response, name: &str) -> Vec<&'a str> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// What every successful static answer carries under the first route's rules.
fn assert_static_rules(r: &Response, scheme: &str) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("strict-transport-security"),
        Some("max-age=63072000")
    );
    assert_eq!(
        r.header("x-seen"),
        Some(format!("{scheme}://t/a.txt?x=1&y q=x=1&y p=/a.txt from 127.0.0.1").as_str())
    );
    assert_eq!(
        values(r, "link"),
        ["</a.css>; rel=preload", "</b.js>; rel=preload"]
    );
    assert_eq!(r.header("accept-ranges"), None, "removed by the rule");
    assert_eq!(r.header("cache-control"), Some("public, max-age=60"));
    let expires = httpdate_secs(r.header("expires").expect("Expires"));
    let date = httpdate_secs(r.header("date").unwrap());
    assert!(
        (3599..=3601).contains(&(expires - date)),
        "{expires} {date}"
    );
    assert!(r.header("etag").is_some(), "the handler's fields stay");
}

fn httpdate_secs(v: &str) -> i64 {
    // "Mon, 23 Nov 2026 22:39:33 GMT": only the time of day and the day matter here.
    let parts: Vec<&str> = v.split([' ', ':']).collect();
    let day: i64 = parts[1].parse().unwrap();
    let (h, m, s): (i64, i64, i64) = (
        parts[4].parse().unwrap(),
        parts[5].parse().unwrap(),
        parts[6].parse().unwrap(),
    );
    ((day * 24 + h) * 60 + m) * 60 + s
}

#[test]
fn response_rules_set_add_and_remove_fields_with_placeholders_over_http_and_tls() {
    let (pier, _site) = static_pier();
    let r = get(
        pier.addr(),
        "GET /a.txt?x=1&y HTTP/1.1\r\nHost: t:8080\r\n\r\n",
    );
    assert_static_rules(&r, "http");
    assert_eq!(r.body, b"hello\n");

    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let r = tls_request(&mut s, "GET /a.txt?x=1&y HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_static_rules(&r, "https");
}

#[test]
fn a_304_keeps_the_caching_fields_and_errors_get_rules_only_with_always() {
    let (pier, _site) = static_pier();
    let r = get(
        pier.addr(),
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n",
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("cache-control"), Some("public, max-age=60"));
    assert!(r.header("expires").is_some());
    assert_eq!(
        r.header("strict-transport-security"),
        Some("max-age=63072000")
    );

    // Like nginx's add_header: a 404 gets neither the rules nor the caching fields.
    let r = get(pier.addr(), "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("strict-transport-security"), None);
    assert_eq!(r.header("cache-control"), None);
    assert_eq!(r.header("expires"), None);

    // `always = true`, like `add_header ... always`: errors too.
    let r = get(
        pier.addr(),
        "GET /always/missing HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    let r = get(pier.addr(), "GET /always/a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert_eq!(r.header("cache-control"), None, "the second route has none");
}

#[test]
fn rules_edit_a_respond_route_s_configured_fields_and_request_ids_differ() {
    let (pier, _site) = static_pier();
    let a = get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(a.body, b"fixed");
    assert_eq!(a.header("x-powered-by"), None);
    assert_eq!(a.header("x-kept"), Some("yes"));
    let b = get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    let (ida, idb) = (
        a.header("x-request-id").unwrap(),
        b.header("x-request-id").unwrap(),
    );
    assert_eq!(ida.len(), 32);
    assert!(ida.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(ida, idb);
}

#[test]
fn curl_sees_the_rules_on_https() {
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let (pier, _site) = static_pier();
    for (protocol, status) in [("--http1.1", "http/1.1 200"), ("--http2", "http/2 200")] {
        let out = Command::new(&curl)
            .args(["-sk", "-D", "-", "-o", "/dev/null", protocol])
            .arg(format!("https://127.0.0.1:{}/a.txt", pier.https[0].port()))
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(head.starts_with(status), "{head}");
        assert!(
            head.contains("strict-transport-security: max-age=63072000"),
            "{head}"
        );
        assert!(
            head.contains("x-seen: https://127.0.0.1/a.txt q= p=/a.txt"),
            "{head}"
        );
        assert!(!head.contains("accept-ranges"), "{head}");
    }
}

const PROXY: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }

[[upstream]]
name = "app"
servers = [{ address = "UPSTREAM" }]

[[route]]
path = "/"
handler = "proxy"
upstream = "app"

[route.request_headers]
set = { "X-Request-Id" = "{request_id}", "X-Original-Uri" = "{uri}" }
add = { "X-Via-Rule" = ["one", "two"] }
remove = ["Cookie"]

[route.response_headers]
set = { "X-Request-Id" = "{request_id}", "Cache-Control" = "no-store" }
remove = ["X-Powered-By"]
"#;

fn upstream_answer() -> Upstream {
    Upstream::start(|_| {
        Reply::Http(
            200,
            vec![
                ("Cache-Control".into(), "max-age=999".into()),
                ("X-Powered-By".into(), "app".into()),
                ("X-App".into(), "kept".into()),
            ],
            b"from app".to_vec(),
        )
    })
}

fn check_proxied(r: &Response, up: &Upstream, n: usize) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"from app");
    assert_eq!(
        values(r, "cache-control"),
        ["no-store"],
        "set replaces the upstream's"
    );
    assert_eq!(r.header("x-powered-by"), None);
    assert_eq!(r.header("x-app"), Some("kept"));
    let seen = up.requests();
    let req = &seen[n];
    assert_eq!(
        req.header("cookie"),
        None,
        "removed before it goes upstream"
    );
    assert_eq!(req.header("x-original-uri"), Some("/p?q=1"));
    assert_eq!(req.count("x-via-rule"), 2);
    assert_eq!(req.header("x-keep"), Some("me"));
    let id = req
        .header("x-request-id")
        .expect("the request id goes upstream");
    assert_eq!(id.len(), 32);
    assert_eq!(
        r.header("x-request-id"),
        Some(id),
        "the client sees the id the upstream saw"
    );
}

#[test]
fn proxy_routes_rewrite_the_upstream_request_and_the_response_over_http_and_tls() {
    let up = upstream_answer();
    let pier = Pier::with_config(&PROXY.replace("UPSTREAM", &up.addr.to_string()), &[]);
    let req = "GET /p?q=1 HTTP/1.1\r\nHost: t\r\nCookie: secret=1\r\nX-Keep: me\r\nX-Request-Id: forged\r\n\r\n";
    let r = get(pier.addr(), req);
    check_proxied(&r, &up, 0);

    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let r = tls_request(&mut s, req).unwrap();
    check_proxied(&r, &up, 1);
    let r = tls_get(&mut s, "/other").unwrap();
    assert_eq!(r.status, 200);
}

fn check_error(config: &str, want_line: usize, want_key: &str, want_text: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("site")).unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(&path, config).unwrap();
    let err = assert_config_error(&path, want_line, want_key);
    assert!(err.contains(want_text), "{err}");
    assert!(!err.contains("Error {") && !err.contains("Some("), "{err}");
}

const HEAD: &str = "[[listener]]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\npath = \"/\"\n";

#[test]
fn bad_rules_are_config_errors_naming_file_line_and_key() {
    check_error(
        &format!("{HEAD}handler = \"static\"\nroot = \"site\"\n[route.response_headers]\nset = {{ X-A = \"{{hots}}\" }}\n"),
        9,
        "route[1].response_headers.set.X-A",
        "unknown placeholder {hots}",
    );
    check_error(
        &format!("{HEAD}handler = \"static\"\nroot = \"site\"\nrequest_headers = {{ set = {{ X-A = \"b\" }} }}\n"),
        8,
        "route[1].request_headers",
        "only a proxy route",
    );
    check_error(
        &format!(
            "{HEAD}handler = \"respond\"\nresponse_headers = {{ remove = [\"Content-Length\"] }}\n"
        ),
        7,
        "route[1].response_headers.remove",
        "written by the server itself",
    );
    check_error(
        &format!("{HEAD}handler = \"respond\"\nresponse_headers = {{ set = {{ \"Bad Name\" = \"x\" }} }}\n"),
        7,
        "route[1].response_headers.set.Bad Name",
        "not a header field name",
    );
    check_error(
        &format!(
            "{HEAD}handler = \"respond\"\nresponse_headers = {{ sett = {{ X-A = \"x\" }} }}\n"
        ),
        7,
        "route[1].response_headers",
        "sett",
    );
    check_error(
        &format!("{HEAD}handler = \"static\"\nroot = \"site\"\nexpires = \"soon\"\n"),
        8,
        "route[1].expires",
        "invalid duration",
    );
    check_error(
        &format!("{HEAD}handler = \"respond\"\ncache_control = \"no-store\"\n"),
        7,
        "route[1].cache_control",
        "static",
    );
}

#[test]
fn the_proxy_s_own_errors_get_the_rules_with_always_only() {
    // A port nothing listens on: every request is the proxy's own 502.
    let addr = common::refused_addr();
    let config = format!(
        r#"
[[listener]]
listen = "127.0.0.1:0"

[[upstream]]
name = "gone"
servers = [{{ address = "{addr}" }}]

[[route]]
path = "/always/"
handler = "proxy"
upstream = "gone"
response_headers = {{ always = true, set = {{ "Strict-Transport-Security" = "max-age=60" }} }}

[[route]]
path = "/"
handler = "proxy"
upstream = "gone"
response_headers = {{ set = {{ "Strict-Transport-Security" = "max-age=60" }} }}
"#
    );
    let pier = Pier::with_config(&config, &[]);
    let r = get(pier.addr(), "GET /always/x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 502);
    assert_eq!(r.header("strict-transport-security"), Some("max-age=60"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let r = get(pier.addr(), "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 502);
    assert_eq!(r.header("strict-transport-security"), None);
}
