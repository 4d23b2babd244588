//! The runtime API for upstreams on the admin listener: a server drained
//! under load loses no request and gets no new one, a weight set shows in the
//! distribution counted at two origins, and a change from a page of another
//! origin, under another Host, or on a non-loopback listener is refused (a
//! read too, there, without a token).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::load::Load;
use common::upstream::{ok, Upstream};
use common::{get, Pier};
use serde_json::Value;

fn config(workers: usize, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        "[server]\nworkers = {workers}\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"app\"\nservers = [\"{a}\", \"{b}\"]\n\
         [[route]]\npath = \"/\"\nhandler = \"proxy\"\nupstream = \"app\"\n"
    )
}

/// `POST path` to the admin listener with `extra` fields; status and JSON body.
fn post(admin: SocketAddr, path: &str, extra: &str) -> (u16, Value) {
    request(admin, "POST", path, extra)
}

fn request(admin: SocketAddr, method: &str, path: &str, extra: &str) -> (u16, Value) {
    let r = get(
        admin,
        &format!("{method} {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\n{extra}\r\n"),
    );
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

fn upstreams(admin: SocketAddr) -> Value {
    upstreams_as(admin, "")
}

/// `GET /api/upstreams` with `extra` fields (a token).
fn upstreams_as(admin: SocketAddr, extra: &str) -> Value {
    let r = get(
        admin,
        &format!("GET /api/upstreams HTTP/1.1\r\nHost: {admin}\r\n{extra}\r\n"),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("JSON")
}

fn server_field(admin: SocketAddr, addr: SocketAddr, field: &str) -> Value {
    server_field_as(admin, "", addr, field)
}

fn server_field_as(admin: SocketAddr, extra: &str, addr: SocketAddr, field: &str) -> Value {
    let v = upstreams_as(admin, extra);
    let servers = v["upstreams"][0]["servers"].as_array().unwrap().clone();
    servers
        .into_iter()
        .find(|s| s["address"] == addr.to_string().as_str())
        .unwrap_or_else(|| panic!("no server {addr}"))[field]
        .clone()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn send(addr: SocketAddr, n: usize) {
    for _ in 0..n {
        assert_eq!(get(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
    }
}

#[test]
fn a_drained_server_finishes_its_requests_gets_no_new_one_and_comes_back() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let pier = Pier::with_config(&config(2, a.addr, b.addr), &[]);
    let admin = pier.admin.expect("admin listener");
    let v = upstreams(admin);
    assert_eq!(v["upstreams"][0]["name"], "app");
    assert_eq!(server_field(admin, a.addr, "origin"), "configured");
    assert_eq!(server_field(admin, a.addr, "state"), "up");
    assert!(server_field(admin, a.addr, "checks").is_array());

    let load = Load::start(pier.addr(), 4);
    wait_until("traffic on both", || {
        a.request_count() > 20 && b.request_count() > 20
    });
    let (status, answer) = post(
        admin,
        &format!("/api/upstreams/app/servers/{}/drain", a.addr),
        "",
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["servers"], 1);
    assert!(
        answer["scope"]
            .as_str()
            .unwrap()
            .contains("until the next reload"),
        "{answer}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let after = a.request_count();
    let b_before = b.request_count();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(a.request_count(), after, "the drained server got requests");
    assert!(b.request_count() > b_before + 20);
    assert_eq!(server_field(admin, a.addr, "state"), "draining");

    let (status, _) = post(
        admin,
        &format!("/api/upstreams/app/servers/{}/ready", a.addr),
        "",
    );
    assert_eq!(status, 200);
    wait_until("traffic on the server again", || {
        a.request_count() > after + 20
    });
    let (answered, failed) = load.finish();
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed",
        answered + failed
    );
    assert_eq!(server_field(admin, a.addr, "state"), "up");

    // Maintenance: no requests, shown as such.
    let (status, _) = post(
        admin,
        &format!("/api/upstreams/app/servers/{}/maintenance", b.addr),
        "",
    );
    assert_eq!(status, 200);
    let before = b.request_count();
    send(pier.addr(), 20);
    assert_eq!(b.request_count(), before);
    assert_eq!(server_field(admin, b.addr, "state"), "maintenance");
    let changes = pier
        .log_lines()
        .into_iter()
        .filter(|l| {
            l.contains("admin API: upstream server changed") && l.contains("peer=127.0.0.1")
        })
        .count();
    assert_eq!(changes, 3, "each change is logged with who made it");
}

#[test]
fn a_weight_set_through_the_api_shows_in_the_distribution() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let pier = Pier::with_config(&config(1, a.addr, b.addr), &[]);
    let admin = pier.admin.expect("admin listener");
    send(pier.addr(), 200);
    assert_eq!((a.request_count(), b.request_count()), (100, 100));

    let (status, answer) = post(
        admin,
        &format!("/api/upstreams/app/servers/{}/weight?value=3", a.addr),
        "",
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["weight"], 3);
    assert_eq!(server_field(admin, a.addr, "weight"), 3);
    send(pier.addr(), 400);
    let (da, db) = (a.request_count() - 100, b.request_count() - 100);
    assert!(
        da.abs_diff(300) <= 2 && db.abs_diff(100) <= 2,
        "3:1 after the change: {da} and {db}"
    );

    for (path, want) in [
        (
            format!("/api/upstreams/app/servers/{}/weight?value=0", a.addr),
            400,
        ),
        (format!("/api/upstreams/app/servers/{}/weight", a.addr), 400),
        (format!("/api/upstreams/nope/servers/{}/drain", a.addr), 404),
        (
            "/api/upstreams/app/servers/127.0.0.1:1/drain".to_string(),
            404,
        ),
        ("/api/upstreams/app/servers/app:80/drain".to_string(), 400),
        (format!("/api/upstreams/app/servers/{}/pause", a.addr), 404),
    ] {
        let (status, answer) = post(admin, &path, "");
        assert_eq!(status, want, "{path}: {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    let r = get(
        admin,
        &format!(
            "GET /api/upstreams/app/servers/{}/drain HTTP/1.1\r\nHost: {admin}\r\n\r\n",
            a.addr
        ),
    );
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD, POST, DELETE"));
}

#[test]
fn servers_added_and_removed_through_the_api_take_and_leave_traffic() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let c = Upstream::start(|_| ok("c"));
    let pier = Pier::with_config(&config(1, a.addr, b.addr), &[]);
    let admin = pier.admin.expect("admin listener");
    let (status, answer) = post(
        admin,
        &format!("/api/upstreams/app/servers?address={}&weight=2", c.addr),
        "",
    );
    assert_eq!(status, 201, "{answer}");
    assert_eq!(server_field(admin, c.addr, "origin"), "runtime");
    assert_eq!(server_field(admin, c.addr, "weight"), 2);
    send(pier.addr(), 200);
    let counts = (a.request_count(), b.request_count(), c.request_count());
    assert!(
        counts.0.abs_diff(50) <= 2 && counts.1.abs_diff(50) <= 2 && counts.2.abs_diff(100) <= 2,
        "1:1:2 with the added server: {counts:?}"
    );
    let (status, _) = post(
        admin,
        &format!("/api/upstreams/app/servers?address={}", a.addr),
        "",
    );
    assert_eq!(status, 409, "a configured address is not added twice");

    let (status, answer) = request(
        admin,
        "DELETE",
        &format!("/api/upstreams/app/servers/{}", a.addr),
        "",
    );
    assert_eq!(status, 200, "{answer}");
    send(pier.addr(), 30);
    assert_eq!(
        a.request_count(),
        counts.0,
        "the removed server got requests"
    );
    assert_eq!(server_field(admin, a.addr, "state"), "removed");
    let (status, _) = post(admin, "/api/upstreams/app/servers?address=app:80", "");
    assert_eq!(status, 400);
}

#[test]
fn changes_from_another_origin_or_host_are_refused() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let pier = Pier::with_config(&config(1, a.addr, b.addr), &[]);
    let admin = pier.admin.expect("admin listener");
    let path = format!("/api/upstreams/app/servers/{}/drain", a.addr);
    // A page of another site posting to the admin listener.
    let (status, answer) = post(admin, &path, "Origin: http://evil.example\r\n");
    assert_eq!(status, 403, "{answer}");
    let (status, _) = post(admin, &path, "Sec-Fetch-Site: cross-site\r\n");
    assert_eq!(status, 403);
    // DNS rebinding: the browser sends the attacker's name as Host.
    let r = get(
        admin,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: evil.example:{}\r\nContent-Length: 0\r\n\r\n",
            admin.port()
        ),
    );
    assert_eq!(r.status, 403);
    assert_eq!(server_field(admin, a.addr, "state"), "up");
    // The listener's own origin is fine.
    let (status, _) = post(admin, &path, &format!("Origin: http://{admin}\r\n"));
    assert_eq!(status, 200);
    assert_eq!(server_field(admin, a.addr, "state"), "draining");
}

#[test]
fn a_non_loopback_admin_listener_without_a_token_answers_no_api_request() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let text = config(1, a.addr, b.addr).replace(
        "listen = \"127.0.0.1:0\"\n[[listener]]",
        "listen = \"0.0.0.0:0\"\nallow_remote = true\n[[listener]]",
    );
    let pier = Pier::with_config(&text, &[]);
    let port = pier.admin.expect("admin listener").port();
    let admin: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for (method, path) in [
        (
            "POST",
            format!("/api/upstreams/app/servers/{}/drain", a.addr),
        ),
        ("GET", "/api/upstreams".to_string()),
        ("GET", "/api/config".to_string()),
        ("POST", "/api/config?dry_run=1".to_string()),
    ] {
        let (status, answer) = request(admin, method, &path, "");
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("loopback"),
            "{answer}"
        );
    }
    // Not drained: both servers still take requests.
    send(pier.addr(), 10);
    assert_eq!((a.request_count(), b.request_count()), (5, 5));
    // The pages that are not the API answer as before.
    let r = get(admin, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200);
}

#[test]
fn with_a_token_file_a_change_needs_the_token() {
    let (a, b) = (Upstream::start(|_| ok("a")), Upstream::start(|_| ok("b")));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "s3cret-token-0123456789\n").unwrap();
    let text = config(1, a.addr, b.addr).replace(
        "listen = \"127.0.0.1:0\"\n[[listener]]",
        &format!(
            "listen = \"0.0.0.0:0\"\nallow_remote = true\ntoken_file = \"{}\"\n[[listener]]",
            dir.path().join("token").display()
        ),
    );
    let pier = Pier::with_config(&text, &[]);
    let port = pier.admin.expect("admin listener").port();
    let admin: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let path = format!("/api/upstreams/app/servers/{}/drain", a.addr);
    let token = "Authorization: Bearer s3cret-token-0123456789\r\n";
    let (status, answer) = post(admin, &path, "");
    assert_eq!(status, 401, "{answer}");
    let (status, _) = post(
        admin,
        &path,
        "Authorization: Bearer s3cret-token-0123456788\r\n",
    );
    assert_eq!(status, 401);
    // Reads need it too.
    let (status, _) = request(admin, "GET", "/api/upstreams", "");
    assert_eq!(status, 401);
    assert_eq!(server_field_as(admin, token, a.addr, "state"), "up");
    let (status, answer) = post(admin, &path, token);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(server_field_as(admin, token, a.addr, "state"), "draining");
    // Logged with the token's name, never the token.
    let line = pier
        .log_lines()
        .into_iter()
        .find(|l| l.contains("admin API: upstream server changed"))
        .expect("the change is logged");
    assert!(line.contains("bearer token sha256:"), "{line}");
    assert!(!line.contains("s3cret"), "{line}");

    // A token file that is missing is a configuration error, located.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, text.replace("token\"", "missing\"")).unwrap();
    let err = common::assert_config_error(&bad, 6, "admin.token_file");
    assert!(!err.contains("os error"), "{err}");
}
