//! Diagnostic log lines carry IO errors as sentences, never Rust's
//! `(os error N)`, whichever call site logged them. Found by bench/soak: an
//! origin that resets inside a response body was logged as `error=Connection
//! reset by peer (os error 104)`, and a port in use stopped Pier with
//! `Address already in use (os error 98)`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use common::Pier;

/// An origin that answers each request with a head and half its body, then
/// resets the connection (RST, not FIN).
fn resets_mid_body() -> SocketAddr {
    common::upstream::resetting_origin(|conn| {
        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
        let _ = conn.write_all(&[b'x'; 500]);
        std::thread::sleep(Duration::from_millis(100));
    })
}

#[test]
fn an_upstream_reset_inside_a_body_is_logged_without_os_error_numbers() {
    let origin = resets_mid_body();
    let pier = Pier::with_config(&common::upstream::proxy_config(origin), &[]);
    let mut client = std::net::TcpStream::connect(pier.addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client
        .write_all(b"GET /cut HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = client.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        got.len() < 1000,
        "the body was cut short: {} bytes",
        got.len()
    );
    let line = pier
        .wait_log(
            "upstream failed inside the response body",
            Duration::from_secs(10),
        )
        .expect("the reset is logged");
    assert!(line.contains("reset"), "{line}");
    assert!(!line.contains("os error"), "{line}");
}

/// A fatal error is a sentence too: a port another process holds.
#[test]
fn a_busy_port_is_reported_without_os_error_numbers() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["serve", "--no-tls", "--listen", &addr.to_string()])
        .output()
        .expect("run pier");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("cannot listen"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(line.contains("in use"), "{line}");
    assert!(!line.contains("os error"), "{line}");
}
