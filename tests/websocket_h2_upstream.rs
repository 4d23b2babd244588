//! WebSockets to an HTTP/2 origin by extended CONNECT (RFC 8441 §4-5): an
//! HTTP/2 client's extended CONNECT goes on as one, and an HTTP/1.1
//! client's `Upgrade: websocket` is carried as one (its 101 answered once
//! the origin's 200 came), to an origin that offers
//! SETTINGS_ENABLE_CONNECT_PROTOCOL; one that does not gets the client a
//! 501. The origin is PyPI `h2` with `websockets`' sans-IO protocol
//! (tests/websocket_h2/h2_origin.py), the HTTP/2 client PyPI `h2`, the
//! HTTP/1.1 client `websockets`.

mod common;

use std::path::{Path, PathBuf};

use common::python_peer::PythonServer;
use common::websocket::{assert_echo_session, assert_idle_reset, run_client, wait_for_line};
use common::Pier;
use serde_json::Value;

fn origin_script() -> PathBuf {
    common::python_peer::script("websocket_h2/h2_origin.py")
}

/// The two origins (one offering extended CONNECT, one not) behind a
/// proxy on a listener that takes HTTP/1.1 and HTTP/2 with prior knowledge.
struct Setup {
    pier: Pier,
    markers: tempfile::TempDir,
    _origins: [PythonServer; 2],
}

fn setup() -> Option<Setup> {
    if !common::python_peer::present("h2, websockets", "PyPI h2 and websockets") {
        return None;
    }
    let markers = tempfile::tempdir().unwrap();
    let plain = tempfile::tempdir().unwrap();
    let origin = PythonServer::start(&origin_script(), markers.path(), "HTTP/2 origin");
    let noconnect = PythonServer::start_with(
        &origin_script(),
        plain.path(),
        &["noconnect"],
        "HTTP/2 origin without extended CONNECT",
    );
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[upstream]]
name = "ws"
protocol = "h2"
read_timeout = "1s"
servers = [{{ address = "127.0.0.1:{origin}" }}]
[[upstream]]
name = "limited"
protocol = "h2"
max_in_flight = 1
servers = [{{ address = "127.0.0.1:{origin}" }}]
[[upstream]]
name = "noconnect"
protocol = "h2"
servers = [{{ address = "127.0.0.1:{noconnect}" }}]
[cache.main]
memory = "1MiB"
[[route]]
path = "/noconnect/"
handler = "proxy"
upstream = "noconnect"
[[route]]
path = "/limited/"
handler = "proxy"
upstream = "limited"
[[route]]
path = "/cached/"
handler = "proxy"
upstream = "ws"
cache = "main"
[[route]]
path = "/"
handler = "proxy"
upstream = "ws"
"#,
        origin = origin.port,
        noconnect = noconnect.port
    );
    let pier = Pier::with_config(&config, &[]);
    Some(Setup {
        pier,
        markers,
        _origins: [origin, noconnect],
    })
}

/// The request heads the origin saw, in order.
fn origin_requests(markers: &Path) -> Vec<Value> {
    std::fs::read_to_string(markers.join("requests"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn an_http2_websocket_goes_to_an_h2_origin_as_extended_connect() {
    let Some(s) = setup() else { return };
    let v = run_client(
        &origin_script(),
        &["client".into(), s.pier.addr().to_string()],
    );
    assert_echo_session(&v);
    // The origin's refusal as it is; an origin without the setting: 501.
    assert_eq!(v["refused"], "403", "{v}");
    assert_eq!(v["noconnect"], "501", "{v}");
    // Idle past read_timeout: reset with CANCEL, upstream too.
    assert_idle_reset(&v, 8);
    assert!(
        wait_for_line(&s.markers.path().join("resets"), |l| l.ends_with(" 8")),
        "the origin never saw the idle tunnel's stream reset"
    );

    // What the origin saw: the extended CONNECT of RFC 8441 §4.
    let seen = origin_requests(s.markers.path());
    let echo = seen
        .iter()
        .find(|r| r[":path"] == "/ws/echo")
        .expect("the echo's request");
    assert_eq!(echo[":method"], "CONNECT", "{echo}");
    assert_eq!(echo[":protocol"], "websocket", "{echo}");
    assert_eq!(echo[":scheme"], "http", "{echo}");
    assert!(
        echo[":authority"].as_str().is_some_and(|a| !a.is_empty()),
        "{echo}"
    );
    assert_eq!(echo["sec-websocket-version"], "13", "{echo}");
    assert!(echo.get("sec-websocket-key").is_none(), "{echo}");
}

#[test]
fn an_http1_websocket_upgrade_goes_to_an_h2_origin_as_extended_connect() {
    let Some(s) = setup() else { return };
    let v = run_client(
        &origin_script(),
        &["client1".into(), s.pier.addr().to_string()],
    );
    // The 101 was accepted by the client (its Sec-WebSocket-Accept
    // answers the client's key), then the echo.
    assert_eq!(v["subprotocol"], "chat", "{v}");
    assert_eq!(v["echo"], "hello over HTTP/1.1", "{v}");
    assert_eq!(v["big_same"], true, "{v}");
    assert_eq!(v["noconnect"], 501, "{v}");
    let seen = origin_requests(s.markers.path());
    let h1 = seen
        .iter()
        .find(|r| r[":path"] == "/ws/h1")
        .expect("the upgrade's request");
    assert_eq!(h1[":method"], "CONNECT", "{h1}");
    assert_eq!(h1[":protocol"], "websocket", "{h1}");
    // No connection-specific field, no key: RFC 8441 §5 uses neither.
    for gone in ["connection", "upgrade", "sec-websocket-key"] {
        assert!(h1.get(gone).is_none(), "{gone} in {h1}");
    }
}

#[test]
fn a_websocket_on_a_cached_route_is_never_answered_from_the_cache() {
    let Some(s) = setup() else { return };
    // A plain GET stores the origin's fresh answer for the path
    // (under the Host the WebSocket client sends)...
    let addr = s.pier.addr();
    let plain = format!("GET /cached/ws HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    for hit in [false, true] {
        let r = common::get(addr, &plain);
        assert_eq!((r.status, &r.body[..]), (200, &b"plain"[..]));
        let status = r.header("cache-status").unwrap_or_default();
        assert_eq!(status.contains("; hit"), hit, "{status}");
    }
    // ...and a WebSocket handshake on it still goes to the origin: a
    // tunnel is never a stored response.
    let v = run_client(
        &origin_script(),
        &[
            "client1".into(),
            s.pier.addr().to_string(),
            "/cached/ws".into(),
        ],
    );
    assert_eq!(v["echo"], "hello over HTTP/1.1", "{v}");
    let seen = origin_requests(s.markers.path());
    let gets = seen.iter().filter(|r| r[":path"] == "/cached/ws").count();
    assert_eq!(gets, 2, "one GET, then the CONNECT: {seen:?}");
}

#[test]
fn a_tunnel_to_an_h2_origin_holds_its_admission_and_needs_its_key() {
    let Some(s) = setup() else { return };
    // max_in_flight = 1: the open tunnel is the one request in flight.
    let v = run_client(
        &origin_script(),
        &["client1-busy".into(), s.pier.addr().to_string()],
    );
    assert_eq!(v["echo"], "held", "{v}");
    assert_eq!(v["beside"], 503, "{v}");
    assert_eq!(v["after"], 200, "{v}");
    // An HTTP/1.1 handshake without Sec-WebSocket-Key cannot be answered
    // with an accept value: 400, and nothing reaches the origin.
    let r = common::get(
        s.pier.addr(),
        "GET /ws/nokey HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    let seen = origin_requests(s.markers.path());
    assert!(!seen.iter().any(|r| r[":path"] == "/ws/nokey"), "{seen:?}");
}
