//! WebSockets over HTTP/3 (RFC 9220) end to end through Pier: an HTTP/3
//! client (PyPI `aioquic`, installed by .ci/run) opens WebSockets by
//! extended CONNECT; Pier relays each to a WebSocket server (PyPI
//! `websockets`, tests/websocket_h2/ws_peer.py) as an HTTP/1.1 upgrade. The
//! client is tests/websocket_h3/ws_h3_client.py; to an h2 group the
//! WebSocket goes on as an extended CONNECT (tests/websocket_h2/h2_origin.py).

mod common;

use std::net::SocketAddr;

use common::websocket::{
    assert_echo_session, assert_idle_reset, echo_server, run_client, wait_for_line,
};
use common::Pier;
use serde_json::{json, Value};

/// H3_MESSAGE_ERROR (RFC 9114 §8.1).
const H3_MESSAGE_ERROR: u64 = 0x10e;
/// H3_CONNECT_ERROR (RFC 9114 §8.1): the tunnel's connection broke.
const H3_CONNECT_ERROR: u64 = 0x10f;

/// Whether python3 with aioquic and websockets is here; without them the
/// test says so and passes, except under CI, where .ci/run installs them.
fn peers_present() -> bool {
    common::python_peer::present("aioquic, websockets", "PyPI aioquic and websockets")
}

/// Pier on a TLS listener (HTTP/3 on) with `http` as its [http] section,
/// proxying every path to the echo server on `port` (group "ws", whose
/// read_timeout is `read_timeout`) but for the groups and routes in `more`.
fn start(port: u16, http: &str, read_timeout: &str, more: &str) -> Pier {
    let config = format!(
        r#"
[server]
workers = 1
[http]
{http}
[[listener]]
listen = "127.0.0.1:0"
tls = {{ self_signed = true }}
[[upstream]]
name = "ws"
read_timeout = "{read_timeout}"
servers = [{{ address = "127.0.0.1:{port}" }}]
{more}
[[route]]
path = "/"
handler = "proxy"
upstream = "ws"
"#
    );
    Pier::with_config(&config, &[])
}

/// The client's report of a run against `addr` with `args` after the address.
fn run_h3_client(addr: SocketAddr, args: &[&str]) -> Value {
    let script = common::python_peer::script("websocket_h3/ws_h3_client.py");
    let mut all = vec![addr.ip().to_string(), addr.port().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    run_client(&script, &all)
}

#[test]
fn websockets_open_over_http3_by_extended_connect_and_echo_through_the_proxy() {
    if !peers_present() {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let server = echo_server(markers.path());
    let more = format!(
        r#"
[[upstream]]
name = "busy"
max_in_flight = 1
servers = [{{ address = "127.0.0.1:{}" }}]
[[route]]
path = "/busy/"
handler = "proxy"
upstream = "busy"
[[route]]
path = "/static/"
handler = "respond"
status = 200
body = "not a tunnel"
"#,
        server.port
    );
    let pier = start(server.port, "", "1s", &more);
    let v = run_h3_client(pier.https[0], &[]);
    // SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 9220 §3).
    assert_eq!(v["enable_connect_protocol"], 1, "{v}");
    // The upstream's 101 is the stream's 200, with the subprotocol it chose,
    // no Sec-WebSocket-Accept and no length; the echo (one message of
    // 200 kB) and the close handshake, the upstream's close ending the
    // stream with FIN.
    assert_echo_session(&v);
    assert_eq!(v["accept_sent"], false, "{v}");
    assert_eq!(v["content_length_sent"], false, "{v}");
    // A route that is not a proxy does not take the protocol: 501, not its 200.
    assert_eq!(v["not_proxy"], "501", "{v}");
    assert_eq!(v["upstream_refused"], "403", "{v}");
    assert_eq!(v["upstream_refused_body"], "refused", "{v}");
    assert_eq!(v["other_protocol"], "501", "{v}");
    // Malformed: the stream reset with H3_MESSAGE_ERROR.
    assert_eq!(v["no_path"], H3_MESSAGE_ERROR, "{v}");
    assert_eq!(v["no_scheme"], H3_MESSAGE_ERROR, "{v}");
    assert_eq!(v["protocol_on_get"], H3_MESSAGE_ERROR, "{v}");
    // The client's reset closes the upstream connection (1006: no close frame).
    assert_eq!(v["before_reset"], json!(["before the reset"]), "{v}");
    assert!(
        wait_for_line(&markers.path().join("closed"), |l| l == "/ws/reset 1006"),
        "the upstream never saw the reset tunnel close"
    );
    // Idle past read_timeout: reset, the upstream closed too.
    assert_idle_reset(&v, H3_CONNECT_ERROR);
    assert!(
        wait_for_line(&markers.path().join("closed"), |l| l == "/ws/idle 1006"),
        "the upstream never saw the idle tunnel close"
    );
    // A tunnel holds its admission: max_in_flight = 1 answers 503 beside it.
    assert_eq!(v["busy_held"], "200", "{v}");
    assert_eq!(v["busy_beside"], "503", "{v}");
    assert_eq!(v["busy_after"], "200", "{v}");
    assert_eq!(v["again"], json!(["again"]), "{v}");
}

#[test]
fn a_quiet_tunnel_outlives_the_quic_idle_timeout() {
    if !peers_present() {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let server = echo_server(markers.path());
    // QUIC's idle timeout is keepalive_timeout (1 s); the tunnel's idle
    // limit is the group's read_timeout (10 s): the connection must not
    // die under an open tunnel that is quiet for 3 s.
    let pier = start(server.port, r#"keepalive_timeout = "1s""#, "10s", "");
    let v = run_h3_client(pier.https[0], &["quiet", "3"]);
    assert_eq!(v["status"], "200", "{v}");
    assert_eq!(v["echo"], json!(["still here"]), "{v}");
    assert_eq!(v["closed"], false, "{v}");
}

#[test]
fn an_http3_websocket_goes_to_an_h2_origin_as_extended_connect() {
    if !common::python_peer::present("aioquic, h2, websockets", "PyPI aioquic, h2, websockets") {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let origin = common::python_peer::PythonServer::start(
        &common::python_peer::script("websocket_h2/h2_origin.py"),
        markers.path(),
        "HTTP/2 origin",
    );
    let more = format!(
        r#"
[[upstream]]
name = "h2"
protocol = "h2"
servers = [{{ address = "127.0.0.1:{}" }}]
[[route]]
path = "/h2/"
handler = "proxy"
upstream = "h2"
"#,
        origin.port
    );
    let pier = start(origin.port, "", "10s", &more);
    let v = run_h3_client(pier.https[0], &["quiet", "0", "/h2/ws"]);
    assert_eq!(v["status"], "200", "{v}");
    assert_eq!(v["subprotocol"], "chat", "{v}");
    assert_eq!(v["echo"], json!(["still here"]), "{v}");
    // The origin saw an extended CONNECT (RFC 8441 §4), not an upgrade.
    let seen = std::fs::read_to_string(markers.path().join("requests")).unwrap();
    let head: Value = serde_json::from_str(seen.lines().next().unwrap()).unwrap();
    assert_eq!(head[":method"], "CONNECT", "{head}");
    assert_eq!(head[":protocol"], "websocket", "{head}");
    assert_eq!(head[":path"], "/h2/ws", "{head}");
    assert!(head.get("sec-websocket-key").is_none(), "{head}");
}
