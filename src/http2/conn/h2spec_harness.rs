//! h2spec in `--strict` mode against the connection alone, behind a small
//! blocking server (a thread per connection answering every request with
//! 200 and "hello"), so a conformance failure points at the codec rather
//! than at the driver. Ignored by default: `tests/h2spec.rs` runs h2spec
//! against the real server in the suite; run this one with
//! `cargo test --lib h2spec_against_the_connection -- --ignored`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{ErrorCode, Events, RequestHead, ServerConnection, StreamId};

const BODY: &[u8] = b"hello";

/// What one `receive` asked of the server.
#[derive(Default)]
struct Todo {
    requests: Vec<StreamId>,
    consumed: Vec<(StreamId, usize)>,
    resets: Vec<StreamId>,
}

impl Events for Todo {
    fn request(&mut self, stream: StreamId, _: &RequestHead, _: bool) {
        self.requests.push(stream);
    }
    fn data(&mut self, stream: StreamId, data: &[u8], _: bool) {
        self.consumed.push((stream, data.len()));
    }
    fn trailers(&mut self, _: StreamId, _: &RequestHead) {}
    fn reset(&mut self, stream: StreamId, _: ErrorCode) {
        self.resets.push(stream);
    }
    fn send_window(&mut self) {}
}

fn serve(mut sock: TcpStream) -> std::io::Result<()> {
    let defaults = crate::config::http2::Http2Config::default();
    let mut conn =
        ServerConnection::new(defaults.conn_limits(&crate::config::HttpConfig::default()));
    let mut input = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    // Streams answered, with how much of the body went out.
    let mut bodies: Vec<(StreamId, usize)> = Vec::new();
    loop {
        sock.write_all(conn.output())?;
        conn.consume_output(conn.output().len());
        let n = sock.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        input.extend_from_slice(&buf[..n]);
        let mut todo = Todo::default();
        let result = conn.receive(&input, Instant::now(), &mut todo);
        for &(stream, n) in &todo.consumed {
            conn.release(stream, n);
        }
        bodies.retain(|(s, _)| !todo.resets.contains(s));
        for &stream in &todo.requests {
            let fields = [(&b"content-type"[..], &b"text/plain"[..])];
            conn.send_headers(stream, 200, &mut fields.into_iter(), false);
            bodies.push((stream, 0));
        }
        bodies.retain_mut(|(stream, sent)| {
            *sent += conn.send_data(*stream, &BODY[*sent..], true);
            *sent < BODY.len()
        });
        match result {
            Ok(used) => {
                input.drain(..used);
            }
            Err(_) => {
                sock.write_all(conn.output())?;
                // Let the client read the GOAWAY before the close.
                std::thread::sleep(Duration::from_millis(50));
                return Ok(());
            }
        }
    }
}

/// h2spec: `$H2SPEC`, `PATH`, then Go's bin directory.
fn h2spec() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("H2SPEC")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("h2spec")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join("go/bin/h2spec"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

#[test]
#[ignore = "needs h2spec; the suite's tests/h2spec.rs covers the real server"]
fn h2spec_against_the_connection() {
    let Some(bin) = h2spec() else {
        eprintln!("h2spec is not installed: nothing checked");
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            std::thread::spawn(move || serve(sock));
        }
    });
    let mut cmd = Command::new(bin);
    cmd.args([
        "--strict",
        "-h",
        "127.0.0.1",
        "-o",
        "3",
        "-p",
        &port.to_string(),
    ]);
    cmd.args(std::env::args().skip_while(|a| a != "--h2spec").skip(1));
    let out = cmd.output().expect("h2spec runs");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    let summary = report
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .unwrap_or("");
    assert!(
        out.status.success() && summary.contains(" 0 failed"),
        "h2spec failed: {summary}"
    );
}
