//! The `redirect` handler and the static directory redirect against a real
//! `pier`: HTTP to HTTPS keeps the host, path and query, over plain HTTP and
//! TLS, and bad redirect settings are configuration errors.

mod common;

use std::process::Command;

use common::tls::{connect_tls, recording_client, tls_request};
use common::{assert_config_error, get, which, Pier};

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[listener]]
listen = "127.0.0.1:0"
tls = { self_signed = true }

[[route]]
path = "/"
handler = "redirect"
status = 308
location = "https://{host}{uri}"

[[route]]
path = "/old/"
handler = "redirect"
location = "/new/?from={path}&q={query}"

[[route]]
path = "/files/"
handler = "static"
root = "{dir}"
"#;

fn pier() -> (Pier, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files/sub")).unwrap();
    let text = CONFIG.replace("{dir}", dir.path().to_str().unwrap());
    (Pier::with_config(&text, &[]), dir)
}

#[test]
fn http_to_https_keeps_host_path_and_query() {
    let (pier, _dir) = pier();
    let r = get(
        pier.addr(),
        "GET /a/b%20c?x=1&y=%2F HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    );
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some("https://example.com/a/b%20c?x=1&y=%2F")
    );
    // A HEAD gets the same head without a body; a POST keeps its 308.
    let r = get(pier.addr(), "HEAD /x HTTP/1.1\r\nHost: H\r\n\r\n");
    assert_eq!((r.status, r.header("location")), (308, Some("https://h/x")));
    assert!(r.body.is_empty());
    let r = get(
        pier.addr(),
        "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert_eq!(
        (r.status, r.header("location")),
        (308, Some("https://h/form"))
    );
}

#[test]
fn the_default_status_is_302_and_placeholders_fill_a_relative_location_over_tls() {
    let (pier, _dir) = pier();
    let (client, _) = recording_client(true);
    let mut s = connect_tls(pier.https[0], "localhost", &client).unwrap();
    let r = tls_request(&mut s, "GET /old/page?id=7 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/new/?from=/old/page&q=id=7"));
    // Keep-alive: the next request on the same connection is answered too.
    let r = tls_request(&mut s, "GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!((r.status, r.header("location")), (308, Some("https://t/")));
}

#[test]
fn a_static_directory_redirect_keeps_the_query() {
    let (pier, _dir) = pier();
    let r = get(
        pier.addr(),
        "GET /files/sub?page=2&s=a%20b HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/files/sub/?page=2&s=a%20b"));
    let r = get(pier.addr(), "GET /files/sub HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.header("location"), Some("/files/sub/"));
}

#[test]
fn curl_follows_the_redirect_to_https() {
    let Some(curl) = which("curl") else {
        eprintln!("curl not installed; .ci/run installs it");
        return;
    };
    let (pier, _dir) = pier();
    let out = Command::new(curl)
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{redirect_url}",
        ])
        .arg(format!("http://localhost:{}/p/q?r=1", pier.addr().port()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "308 https://localhost/p/q?r=1"
    );
}

fn check_error(route: &str, want_line: usize, want_key: &str, want_text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let text = format!("[[listener]]\nlisten = \"127.0.0.1:0\"\n\n[[route]]\n{route}");
    std::fs::write(&path, text).unwrap();
    let err = assert_config_error(&path, want_line, want_key);
    assert!(err.contains(want_text), "{err}");
}

#[test]
fn bad_redirects_are_config_errors_naming_file_line_and_key() {
    check_error(
        "handler = \"redirect\"\nstatus = 200\nlocation = \"/x\"\n",
        6,
        "route[1].status",
        "not a redirect status",
    );
    check_error(
        "handler = \"redirect\"\nstatus = 301\n",
        4,
        "route[1].location",
        "needs `location`",
    );
    check_error(
        "handler = \"redirect\"\nlocation = \"https://{hostname}{uri}\"\n",
        6,
        "route[1].location",
        "unknown placeholder {hostname}",
    );
    check_error(
        "handler = \"redirect\"\nlocation = \"/x\"\nroot = \"/srv\"\n",
        7,
        "route[1].root",
        "is a key of the `static` handler",
    );
}
