//! The HTTP/3 client on aioquic (tests/http3/h3_client.py, PyPI `aioquic`
//! installed by .ci/run): whether it can run, and one run's JSON report.

use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// Whether python3 has aioquic (see [`super::python_peer::present`]).
pub fn present() -> bool {
    super::python_peer::present("aioquic", "PyPI aioquic")
}

/// Runs the client against `addr` with `args`, for at most `secs` seconds.
pub fn output(addr: SocketAddr, secs: u32, args: &[&str]) -> Output {
    script_output("http3/h3_client.py", addr, secs, args)
}

/// The command that runs `script` (under tests/) against `addr` with
/// `args`, for at most `secs` seconds.
fn script_command(script: &str, addr: SocketAddr, secs: u32, args: &[&str]) -> Command {
    let mut command = Command::new("timeout");
    command
        .arg(secs.to_string())
        .arg("python3")
        .arg(super::python_peer::script(script))
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .args(args);
    command
}

/// Runs `script` (under tests/) against `addr` with `args`, for at most
/// `secs` seconds.
fn script_output(script: &str, addr: SocketAddr, secs: u32, args: &[&str]) -> Output {
    script_command(script, addr, secs, args)
        .output()
        .expect("run python3")
}

/// Starts `script` (under tests/) against `addr` with `args`, for at most
/// 30 seconds, with its stdin and stdout piped: for a client the test
/// talks to while it runs.
pub fn spawn(script: &str, addr: SocketAddr, args: &[&str]) -> Child {
    script_command(script, addr, 30, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3")
}

/// Runs `script` against `addr` with `args`; its JSON report.
fn script_report(script: &str, addr: SocketAddr, args: &[&str]) -> Value {
    let out = script_output(script, addr, 30, args);
    assert!(
        out.status.success(),
        "aioquic client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client's JSON report")
}

/// Runs the client against `addr` with `args`; its JSON report.
pub fn run(addr: SocketAddr, args: &[&str]) -> Value {
    script_report("http3/h3_client.py", addr, args)
}

/// Resumes a session at `addr` with its requests in 0-RTT
/// (tests/http3/h3_early_data.py); its JSON report.
pub fn early_data(addr: SocketAddr, args: &[&str]) -> Value {
    script_report("http3/h3_early_data.py", addr, args)
}

/// The body of an answer in a report, as bytes.
pub fn body(answer: &Value) -> Vec<u8> {
    let hex = answer["body_hex"].as_str().expect("body_hex");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs an abusive client (tests/http3/h3_abuse.py) against `addr` with
/// `args`; its JSON report.
pub fn abuse(addr: SocketAddr, args: &[&str]) -> Value {
    script_report("http3/h3_abuse.py", addr, args)
}

/// Sends `n` first flights from `n` ports to `addr` and never goes on
/// (tests/http3/h3_stalled_handshakes.py), reading answers for `secs`; its
/// JSON report.
pub fn stalled_handshakes(addr: SocketAddr, n: u32, secs: u32) -> Value {
    script_report(
        "http3/h3_stalled_handshakes.py",
        addr,
        &[&n.to_string(), &secs.to_string()],
    )
}
