//! The HTTP/3 client on aioquic (tests/http3/h3_client.py, PyPI `aioquic`
//! installed by .ci/run): whether it can run, and one run's JSON report.

use std::net::SocketAddr;
use std::process::{Command, Output};

use serde_json::Value;

/// Whether python3 has aioquic (see [`super::python_peer::present`]).
pub fn present() -> bool {
    super::python_peer::present("aioquic", "PyPI aioquic")
}

/// Runs the client against `addr` with `args`, for at most `secs` seconds.
pub fn output(addr: SocketAddr, secs: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg("python3")
        .arg(super::python_peer::script("http3/h3_client.py"))
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .args(args)
        .output()
        .expect("run python3")
}

/// Runs the client against `addr` with `args`; its JSON report.
pub fn run(addr: SocketAddr, args: &[&str]) -> Value {
    let out = output(addr, 30, args);
    assert!(
        out.status.success(),
        "aioquic client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client's JSON report")
}

/// The body of an answer in a report, as bytes.
pub fn body(answer: &Value) -> Vec<u8> {
    let hex = answer["body_hex"].as_str().expect("body_hex");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}
