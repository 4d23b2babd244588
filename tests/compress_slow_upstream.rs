//! gzip of a proxied body of known length from a slow upstream: the filter
//! gathers such a body to encode it in one call, but what the upstream sent
//! before it paused must reach the client while it waits (a flush turns the
//! gathered input into a stream), and the whole body must still decode.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use common::{connect, find, Pier};

const CONFIG: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[upstream]]
name = "slow"
servers = [{ address = "{upstream}" }]

[[route]]
path = "/"
handler = "proxy"
upstream = "slow"
compress = { codings = ["gzip"], levels = { gzip = 5 } }
"#;

fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| format!("<li>item {i}: {}</li>\n", i * 7919 % 1000).into_bytes())
        .collect()
}

#[test]
fn a_slow_upstreams_first_bytes_reach_the_client_before_the_rest() {
    let body = text(2000);
    let half = body.len() / 2;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = listener.local_addr().unwrap();
    let (go_on, wait) = mpsc::channel::<()>();
    let sent = body.clone();
    let origin = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut byte).unwrap(), 1, "a request head");
            head.push(byte[0]);
        }
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
            sent.len()
        )
        .unwrap();
        s.write_all(&sent[..half]).unwrap();
        // The rest only once the client has decoded the first half.
        let released = wait.recv_timeout(Duration::from_secs(10)).is_ok();
        s.write_all(&sent[half..]).unwrap();
        released
    });
    let pier = Pier::with_config(&CONFIG.replace("{upstream}", &upstream.to_string()), &[]);

    // HTTP/1.0: the encoded body is close-delimited, read as it comes.
    let mut c = connect(pier.http[0]);
    c.write_all(b"GET /page HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    let mut fed = 0;
    let mut buf = [0u8; 16384];
    while decoder.get_ref().len() < half {
        let n = c
            .read(&mut buf)
            .expect("the first half arrives while the upstream waits");
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
        if let Some(end) = find(&got, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            assert!(head.contains("content-encoding: gzip"), "{head}");
            let start = (end + 4).max(fed);
            decoder.write_all(&got[start..]).unwrap();
            decoder.flush().unwrap();
            fed = got.len();
        }
    }
    assert_eq!(decoder.get_ref()[..half], body[..half]);
    go_on.send(()).unwrap();
    c.read_to_end(&mut got).unwrap();
    let end = find(&got, b"\r\n\r\n").unwrap() + 4;
    let mut whole = Vec::new();
    flate2::read::GzDecoder::new(&got[end..])
        .read_to_end(&mut whole)
        .unwrap();
    assert_eq!(whole, body);
    assert!(origin.join().unwrap(), "the client released the upstream");
}
