//! What the WebSocket-over-HTTP/2 tests share: the client of a peer script
//! run to its JSON report, and the checks of the exchanges its
//! `echo_session` and `idle_session` (tests/websocket_h2/ws_peer.py) make.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Runs `python3 SCRIPT ARGS...`, which must succeed and print one JSON
/// object: that object.
pub fn run_client(script: &Path, args: &[String]) -> Value {
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("run the client");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The echo on /ws/echo: the stream's 200 with the subprotocol chosen,
/// every message echoed (one of 200 kB, three times the stream window),
/// then the close handshake and the upstream's close ending the stream.
pub fn assert_echo_session(v: &Value) {
    assert_eq!(v["status"], "200", "{v}");
    assert_eq!(v["subprotocol"], "chat", "{v}");
    assert_eq!(
        v["echo"],
        json!(["hello", "w\u{f6}rld", {"binary": 204800, "same": true}, "last"]),
        "{v}"
    );
    assert_eq!(v["close"], 1000, "{v}");
    assert_eq!(v["ended"], true, "{v}");
}

/// A tunnel idle past the group's read_timeout (1 s) was reset with `code`
/// (HTTP/2's CANCEL, HTTP/3's H3_CONNECT_ERROR).
pub fn assert_idle_reset(v: &Value, code: u64) {
    assert_eq!(v["idle_status"], "200", "{v}");
    assert_eq!(v["idle_reset"], code, "{v}");
    let after = v["idle_after_s"].as_f64().unwrap();
    assert!((0.8..5.0).contains(&after), "{v}");
}

/// Whether `path` comes to hold a line for which `line` holds, within 5 s.
pub fn wait_for_line(path: &Path, line: impl Fn(&str) -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(&line)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The WebSocket echo server of tests/websocket_h2/ws_peer.py (PyPI
/// `websockets`, subprotocol "chat"), noting closes in `markers`/closed.
pub fn echo_server(markers: &Path) -> super::python_peer::PythonServer {
    super::python_peer::PythonServer::start(
        &super::python_peer::script("websocket_h2/ws_peer.py"),
        markers,
        "WebSocket server",
    )
}
