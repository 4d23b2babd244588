//! Large responses answered from the cache's memory: the stored chunks leave
//! with the head in gathered writes straight from the store. A client reading
//! slowly through a small window makes each write stop part way, so what it
//! gets shows whether every answer resumed at the right byte and stayed in
//! order: GET, HEAD and Range hits pipelined on one connection.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::upstream::{Reply, Upstream};
use common::{get, Pier, Reader};

/// Size of the stored object: many upstream reads, so many stored chunks.
const BIG: usize = 300_000;

/// `len` bytes that do not repeat with a short period, so a body resumed at
/// the wrong byte cannot match.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn start(origin: &Upstream) -> Pier {
    let config = format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[listener.socket]
send_buffer = "4KiB"
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
[cache.main]
memory = "8MiB"
max_object = "1MiB"
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
cache = "main"
"#,
        origin.addr
    );
    Pier::with_config(&config, &[])
}

/// A connection whose receive buffer is small, so the server's writes fill it.
fn narrow_connection(addr: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn is_hit(r: &common::Response) -> bool {
    r.header("cache-status")
        .is_some_and(|s| s.starts_with("pier; hit"))
}

#[test]
fn large_hits_reach_a_slow_pipelining_client_whole_and_in_order() {
    let body = pattern(BIG);
    let stored = body.clone();
    let origin = Upstream::start(move |r| {
        let fields = vec![("Cache-Control".to_string(), "max-age=60".to_string())];
        match r.target.as_str() {
            "/big" => Reply::Http(200, fields, stored.clone()),
            _ => Reply::Http(200, fields, b"tiny".to_vec()),
        }
    });
    let pier = start(&origin);
    let host = "Host: app.test\r\n";
    for path in ["/big", "/small"] {
        let first = get(pier.addr(), &format!("GET {path} HTTP/1.1\r\n{host}\r\n"));
        assert_eq!(first.status, 200);
    }
    let mut client = Reader::new(narrow_connection(pier.addr()));
    client.send(
        format!(
            "GET /big HTTP/1.1\r\n{host}\r\n\
             HEAD /big HTTP/1.1\r\n{host}\r\n\
             GET /big HTTP/1.1\r\n{host}Range: bytes=70000-250000\r\n\r\n\
             GET /small HTTP/1.1\r\n{host}\r\n\
             GET /big HTTP/1.1\r\n{host}Range: bytes=-5\r\n\r\n\
             GET /big HTTP/1.1\r\n{host}Connection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    // Not reading for a while: the first answer fills the socket and waits.
    std::thread::sleep(Duration::from_millis(200));

    let whole = client.response(false).expect("the first answer");
    assert_eq!(whole.status, 200);
    assert!(is_hit(&whole), "{:?}", whole.headers);
    assert!(whole.body == body, "the first body differs");

    let head = client.response(true).expect("the HEAD answer");
    assert_eq!(head.status, 200);
    assert!(is_hit(&head), "{:?}", head.headers);
    assert_eq!(head.header("content-length"), Some("300000"));

    let range = client.response(false).expect("the range answer");
    assert_eq!(range.status, 206);
    assert_eq!(
        range.header("content-range"),
        Some("bytes 70000-250000/300000")
    );
    assert!(range.body == body[70_000..=250_000], "the range differs");

    let small = client.response(false).expect("the small answer");
    assert_eq!(small.body, b"tiny");

    let suffix = client.response(false).expect("the suffix answer");
    assert_eq!(suffix.status, 206);
    assert_eq!(suffix.body, &body[BIG - 5..]);

    let last = client.response(false).expect("the last answer");
    assert!(last.body == body, "the last body differs");
    assert!(client.closed(), "the connection stayed open after close");

    let asked = origin.requests();
    assert_eq!(asked.iter().filter(|r| r.target == "/big").count(), 1);
}
