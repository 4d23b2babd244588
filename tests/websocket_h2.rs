//! WebSockets over HTTP/2 (RFC 8441) end to end through Pier: an HTTP/2
//! client (PyPI `h2`, installed by .ci/run) opens WebSockets by extended
//! CONNECT on a prior-knowledge listener; Pier relays each to a WebSocket
//! server (PyPI `websockets`) as an HTTP/1.1 upgrade. The peers are
//! tests/websocket_h2/ws_peer.py.

mod common;

use std::path::PathBuf;

use common::websocket::{
    assert_echo_session, assert_idle_reset, echo_server, run_client, wait_for_line,
};
use common::Pier;
use serde_json::json;

fn peer_script() -> PathBuf {
    common::python_peer::script("websocket_h2/ws_peer.py")
}

/// Whether python3 with h2 and websockets is here; without them the test
/// says so and passes, except under CI, where .ci/run installs them and
/// their absence fails.
fn peers_present() -> bool {
    common::python_peer::present("h2, websockets", "PyPI h2 and websockets")
}

#[test]
fn websockets_open_over_http2_by_extended_connect_and_echo_through_the_proxy() {
    extended_connect_through_the_proxy(false);
}

#[test]
fn websockets_open_over_http2_on_tls_with_alpn_h2() {
    extended_connect_through_the_proxy(true);
}

/// The whole exchange of the client script against a proxy in front of the
/// echo server, on a prior-knowledge listener or (`tls`) a TLS one.
fn extended_connect_through_the_proxy(tls: bool) {
    if !peers_present() {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let server = echo_server(markers.path());
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
{listener}
[[upstream]]
name = "ws"
read_timeout = "1s"
servers = [{{ address = "127.0.0.1:{}" }}]
[[route]]
path = "/static/"
handler = "respond"
status = 200
body = "not a tunnel"
[[route]]
path = "/"
handler = "proxy"
upstream = "ws"
"#,
        server.port,
        listener = if tls {
            "tls = { self_signed = true }"
        } else {
            "http2 = true"
        },
    );
    let pier = Pier::with_config(&config, &[]);
    let addr = if tls { pier.https[0] } else { pier.addr() };
    let mut args = vec!["client".to_string(), addr.to_string()];
    args.extend(tls.then(|| "tls".to_string()));
    let v = run_client(&peer_script(), &args);
    // SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 §3).
    assert_eq!(v["enable_connect_protocol"], 1, "{v}");
    // The upstream's 101 is the stream's 200, with the subprotocol it chose
    // and no Sec-WebSocket-Accept (RFC 8441 §5); the echo and the close.
    assert_echo_session(&v);
    assert_eq!(v["accept_sent"], false, "{v}");
    // A route that is not a proxy does not take the protocol: 501, not its 200.
    assert_eq!(v["not_proxy"], "501", "{v}");
    // An upstream that does not upgrade: its answer as it is.
    assert_eq!(v["upstream_refused"], "403", "{v}");
    assert_eq!(v["upstream_refused_body"], "refused", "{v}");
    // Only a WebSocket is relayed: another :protocol is 501.
    assert_eq!(v["other_protocol"], "501", "{v}");
    // Malformed: RST_STREAM(PROTOCOL_ERROR).
    assert_eq!(v["no_path"], 1, "{v}");
    assert_eq!(v["no_scheme"], 1, "{v}");
    assert_eq!(v["protocol_on_get"], 1, "{v}");
    // The client's RST_STREAM closes the upstream connection (1006: no
    // close frame).
    assert_eq!(v["before_reset"], json!(["before the reset"]), "{v}");
    assert!(
        wait_for_line(&markers.path().join("closed"), |l| l == "/ws/reset 1006"),
        "the upstream never saw the reset tunnel close"
    );
    // Idle past read_timeout: reset with CANCEL, the upstream closed too.
    assert_idle_reset(&v, 8);
    assert!(
        wait_for_line(&markers.path().join("closed"), |l| l == "/ws/idle 1006"),
        "the upstream never saw the idle tunnel close"
    );
    assert_eq!(v["again"], json!(["again"]), "{v}");
}
