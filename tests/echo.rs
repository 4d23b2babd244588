//! `pier echo`: plain and TLS, several workers, bytes come back unchanged.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::tls::{connect_tls, recording_client, seen_subject, Pki};

struct Echo {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(extra: &[&str]) -> Echo {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["echo", "--listen", "127.0.0.1:0", "--workers", "2"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("pier echo exited before starting")
            .unwrap();
        if let Some(rest) = line.split("://").nth(1) {
            if line.contains("pier echo started") {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Echo { child, addr }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

/// Writes `data` in pieces while reading the echo back.
fn round_trip<S: Read + Write>(s: &mut S, data: &[u8]) -> Vec<u8> {
    let mut back = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 65536];
    for piece in data.chunks(40_000) {
        s.write_all(piece).unwrap();
        s.flush().unwrap();
        let want = back.len() + piece.len();
        while back.len() < want {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "closed early");
            back.extend_from_slice(&buf[..n]);
        }
    }
    back
}

#[test]
fn plain_echo_returns_every_byte() {
    let echo = start(&[]);
    let data = pattern(300_000);
    for _ in 0..3 {
        let mut s = common::connect(echo.addr);
        assert!(round_trip(&mut s, &data) == data);
    }
}

#[test]
fn tls_echo_returns_every_byte_with_a_generated_certificate() {
    let echo = start(&["--tls"]);
    let (client, _) = recording_client(true);
    let data = pattern(1_000_000);
    for _ in 0..3 {
        let mut s = connect_tls(echo.addr, "localhost", &client).unwrap();
        assert!(round_trip(&mut s, &data) == data);
    }
    // A stalled handshake does not hold up others.
    let _idle = std::net::TcpStream::connect(echo.addr).unwrap();
    let mut s = connect_tls(echo.addr, "localhost", &client).unwrap();
    s.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(round_trip(&mut s, b"ping"), b"ping");
}

#[test]
fn tls_echo_uses_given_certificate_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) =
        Pki::new(dir.path(), "Echo CA").server("e", "echo.test", &["echo.test"], None);
    let echo = start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let (client, seen) = recording_client(true);
    let mut s = connect_tls(echo.addr, "echo.test", &client).unwrap();
    assert_eq!(round_trip(&mut s, b"hello"), b"hello");
    assert_eq!(seen_subject(&seen), "CN=echo.test");
}
