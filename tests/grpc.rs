//! gRPC end to end through Pier: a grpcio client (PyPI `grpcio`, installed by
//! .ci/run) speaks HTTP/2 with prior knowledge to a Pier listener, which
//! proxies to a grpcio server through an upstream group with `protocol =
//! "h2"`. The peers are tests/grpc/grpc_peer.py.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Pier;
use serde_json::Value;

fn peer_script() -> PathBuf {
    common::python_peer::script("grpc/grpc_peer.py")
}

fn wait_for(path: &Path) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether python3 with grpcio is here; without it the test says so and
/// passes, except under CI, where .ci/run installs it and its absence fails.
fn grpcio_present() -> bool {
    common::python_peer::present("grpc", "PyPI grpcio")
}

#[test]
fn grpc_calls_pass_through_pier_with_statuses_deadlines_and_cancellation() {
    if !grpcio_present() {
        return;
    }
    let markers = tempfile::tempdir().unwrap();
    let server =
        common::python_peer::PythonServer::start(&peer_script(), markers.path(), "gRPC server");
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
http2 = true
[[upstream]]
name = "grpc"
protocol = "h2"
servers = [{{ address = "127.0.0.1:{}" }}]
[[route]]
path = "/"
handler = "proxy"
upstream = "grpc"
"#,
        server.port
    );
    let pier = Pier::with_config(&config, &[]);
    let out = Command::new("python3")
        .arg(peer_script())
        .arg("client")
        .arg(pier.addr().to_string())
        .output()
        .expect("run the gRPC client");
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    // Unary, with the response's trailers (grpc-status 0) relayed.
    assert_eq!(v["unary"], "echo:hello");
    // Server streaming: every message, then the trailers.
    assert_eq!(v["stream"], serde_json::json!(["item0", "item1", "item2"]));
    // Client streaming: 800 kB of messages up (under the default body
    // limit), many times both hops' 64 KiB stream windows.
    assert_eq!(v["total"], "800000");
    // Bidirectional streaming.
    assert_eq!(v["chat"], serde_json::json!(["re:a", "re:b", "re:c"]));
    // A trailers-only error status reaches the client as sent.
    assert_eq!(v["fail"], serde_json::json!(["NOT_FOUND", "no such thing"]));
    // A deadline: the call ends at it, and the server sees its stream reset.
    assert_eq!(v["deadline"][0], "DEADLINE_EXCEEDED");
    assert!(v["deadline_s"].as_f64().unwrap() < 3.0, "{v}");
    assert!(
        wait_for(&markers.path().join("deadline")),
        "the server never saw the deadline's cancellation"
    );
    // A cancellation: the client's RST_STREAM reaches the server.
    assert_eq!(v["cancel"], true);
    assert!(
        wait_for(&markers.path().join("cancel")),
        "the server never saw the client's cancellation"
    );
    assert_eq!(v["after"], "echo:again");
}
