//! Custom error pages on proxy routes: an upstream's 5xx and Pier's own
//! 502/504 are answered with the route's page, the upstream's body never
//! reaches the client, and the upstream connection is reused only when that
//! body had been read whole.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::upstream::{Reply, Upstream};
use common::{assert_config_error, check_config, connect, get, Pier, Reader};

const PAGE_502: &str = "<h1>We will be right back</h1>\n";
const PAGE_504: &str = "{\"error\": \"slow\"}\n";

/// Writes the pages into `dir` and returns the route keys naming them.
fn pages(dir: &Path) -> String {
    std::fs::write(dir.join("50x.html"), PAGE_502).unwrap();
    std::fs::write(dir.join("slow.json"), PAGE_504).unwrap();
    format!(
        "error_pages = {{ 502 = \"{0}/50x.html\", 503 = \"{0}/50x.html\", 504 = \"{0}/slow.json\", 404 = \"{0}/50x.html\" }}",
        dir.display()
    )
}

fn start(upstream: SocketAddr, upstream_extra: &str, route_extra: &str) -> Pier {
    Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{upstream}" }}]
{upstream_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
{route_extra}
"#
        ),
        &[],
    )
}

fn req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n")
}

#[test]
fn upstream_5xx_with_a_page_is_replaced_and_others_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::start(|r| {
        let status = match r.target.as_str() {
            "/bad" => 502,
            "/broken" => 500,
            "/missing" => 404,
            _ => 200,
        };
        Reply::Http(
            status,
            vec![("X-Upstream".into(), "yes".into())],
            format!("upstream secret {status}").into_bytes(),
        )
    });
    let pier = start(up.addr, "", &pages(dir.path()));

    let mut client = Reader::new(connect(pier.addr()));
    client.send(req("/bad").as_bytes());
    let resp = client.response(false).expect("a response");
    assert_eq!(resp.status, 502);
    assert_eq!(resp.body, PAGE_502.as_bytes());
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(
        resp.header("x-upstream"),
        None,
        "the upstream's head is replaced"
    );

    // The same client connection carries on, and the upstream connection,
    // whose body had been read whole, was kept.
    client.send(req("/ok").as_bytes());
    let resp = client.response(false).expect("a response");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"upstream secret 200");
    assert_eq!(
        up.accepts(),
        1,
        "the intercepted exchange left a reusable connection"
    );

    // A 5xx without a page, and a 4xx even with one, are relayed as sent.
    let resp = get(pier.addr(), &req("/broken"));
    assert_eq!(resp.status, 500);
    assert_eq!(resp.body, b"upstream secret 500");
    let resp = get(pier.addr(), &req("/missing"));
    assert_eq!(resp.status, 404);
    assert_eq!(resp.body, b"upstream secret 404");

    // HEAD gets the page's head: its length, no body.
    let mut client = Reader::new(connect(pier.addr()));
    client.send(b"HEAD /bad HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let resp = client.response(true).expect("a response");
    assert_eq!(resp.status, 502);
    assert_eq!(
        resp.header("content-length"),
        Some(PAGE_502.len().to_string().as_str())
    );
    assert!(resp.body.is_empty());
}

#[test]
fn an_unread_upstream_body_is_dropped_with_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    // A chunked 503 whose body has not ended: it must not leak to the client,
    // and the connection, mid-message, must not serve the next request.
    let up = Upstream::start(|r| {
        if r.target == "/down" {
            Reply::Raw(
                b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n\
                  e\r\nupstream secret\r\n"
                    .to_vec(),
            )
        } else {
            Reply::Http(200, Vec::new(), b"fine".to_vec())
        }
    });
    let pier = start(up.addr, "", &pages(dir.path()));
    let mut client = Reader::new(connect(pier.addr()));
    client.send(req("/down").as_bytes());
    let resp = client.response(false).expect("a response");
    assert_eq!(resp.status, 503);
    assert_eq!(resp.body, PAGE_502.as_bytes());

    client.send(req("/next").as_bytes());
    let resp = client.response(false).expect("a response");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"fine");
    assert_eq!(
        up.accepts(),
        2,
        "the connection left mid-body was not reused"
    );
    let seen: Vec<String> = up.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(seen, ["/down", "/next"]);
}

#[test]
fn piers_own_502_and_504_get_the_pages() {
    let dir = tempfile::tempdir().unwrap();
    let keys = pages(dir.path());

    // 504: the upstream never answers.
    let silent = Upstream::start(|_| Reply::Silent);
    let pier = start(
        silent.addr,
        "response_timeout = \"300ms\"\nmax_fails = 0",
        &keys,
    );
    let resp = get(pier.addr(), &req("/"));
    assert_eq!(resp.status, 504);
    assert_eq!(resp.body, PAGE_504.as_bytes());
    assert_eq!(resp.header("content-type"), Some("application/json"));

    // 502: nothing listens on the upstream's address.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let pier = start(addr, "retries = 0", &keys);
    let resp = get(pier.addr(), &req("/"));
    assert_eq!(resp.status, 502);
    assert_eq!(resp.body, PAGE_502.as_bytes());

    // Without pages, the plain status text as before.
    let pier = start(addr, "retries = 0", "");
    let resp = get(pier.addr(), &req("/"));
    assert_eq!(resp.status, 502);
    assert!(String::from_utf8_lossy(&resp.body).contains("502"));
}

#[test]
fn the_503_of_a_busy_group_gets_the_page_and_keeps_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::start(|_| Reply::Silent);
    let pier = start(
        up.addr,
        "max_in_flight = 1\nresponse_timeout = \"5s\"",
        &pages(dir.path()),
    );
    // The first request holds the only slot while its upstream stays silent.
    let mut held = Reader::new(connect(pier.addr()));
    held.send(req("/slow").as_bytes());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while up.requests().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(up.requests().len(), 1);
    let resp = get(pier.addr(), &req("/second"));
    assert_eq!(resp.status, 503);
    assert_eq!(resp.body, PAGE_502.as_bytes());
    assert!(resp.header("retry-after").is_some());
}

#[test]
fn a_missing_page_is_a_config_error_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    std::fs::write(
        &path,
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\n\
         servers = [{ address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\n\
         upstream = \"app\"\nerror_pages = { 502 = \"nowhere.html\" }\n",
    )
    .unwrap();
    let err = assert_config_error(&path, 9, "route[1].error_pages.502");
    // A relative page is looked for beside the config file.
    assert!(
        err.contains(&dir.path().join("nowhere.html").display().to_string()),
        "{err}"
    );

    std::fs::write(dir.path().join("nowhere.html"), "here").unwrap();
    let (code, err) = check_config(&path);
    assert_eq!(code, Some(0), "{err}");
}
