//! `protocol = "h2"` upstreams against an origin written frame by frame
//! (tests/common/h2raw.rs), for what a well-behaved origin library never
//! does on cue: a GOAWAY that refuses a request, a connection closed after
//! an answer, response bodies sent in full to streams the proxy drops.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::h2raw::{block, frame, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING};
use common::h2raw::{get_fields, RawH2, ACK, PREFACE, RST_STREAM, SETTINGS};
use common::{get, Pier};

/// What the origin does with a request: the frames it writes, and whether
/// it keeps the connection open afterwards.
type Handler = dyn Fn(usize, u32, &mut TcpStream) -> bool + Send + Sync;

/// An origin that reads frames and answers each request HEADERS through a
/// handler given the connection's index (in the order accepted) and the
/// stream id; it notes connections, RST_STREAM and GOAWAY frames.
struct RawOrigin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    /// (connection, stream, code) of each RST_STREAM.
    resets: Arc<Mutex<Vec<(usize, u32, u32)>>>,
    /// Error codes of the GOAWAY frames received.
    goaways: Arc<Mutex<Vec<u32>>>,
}

impl RawOrigin {
    fn start(handler: Box<Handler>) -> RawOrigin {
        RawOrigin::with_settings(Vec::new(), handler)
    }

    /// An origin whose SETTINGS frame carries `settings` (id and value pairs
    /// as the frame writes them).
    fn with_settings(settings: Vec<u8>, handler: Box<Handler>) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let resets = Arc::new(Mutex::new(Vec::new()));
        let goaways = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::from(handler);
        {
            let (connections, resets, goaways) =
                (connections.clone(), resets.clone(), goaways.clone());
            std::thread::spawn(move || {
                for s in listener.incoming() {
                    let Ok(s) = s else { return };
                    let index = connections.fetch_add(1, Ordering::SeqCst);
                    let (handler, resets, goaways) =
                        (handler.clone(), resets.clone(), goaways.clone());
                    let settings = settings.clone();
                    std::thread::spawn(move || {
                        serve(s, index, &settings, &*handler, &resets, &goaways)
                    });
                }
            });
        }
        RawOrigin {
            addr,
            connections,
            resets,
            goaways,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn serve(
    mut s: TcpStream,
    index: usize,
    settings: &[u8],
    handler: &Handler,
    resets: &Mutex<Vec<(usize, u32, u32)>>,
    goaways: &Mutex<Vec<u32>>,
) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server's SETTINGS may go before the client's preface is read: an
    // origin's first bytes then reach the proxy with the connection itself.
    if s.write_all(&frame(SETTINGS, 0, 0, settings)).is_err() {
        return;
    }
    let mut preface = [0u8; 24];
    if s.read_exact(&mut preface).is_err() || preface != PREFACE {
        return;
    }
    loop {
        let mut head = [0u8; 9];
        if s.read_exact(&mut head).is_err() {
            return;
        }
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return;
        }
        let code = |at: usize| {
            payload
                .get(at..at + 4)
                .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let keep = match kind {
            SETTINGS if flags & ACK == 0 => s.write_all(&frame(SETTINGS, ACK, 0, &[])).is_ok(),
            PING if flags & ACK == 0 => s.write_all(&frame(PING, ACK, 0, &payload)).is_ok(),
            HEADERS => handler(index, stream, &mut s),
            RST_STREAM => {
                resets.lock().unwrap().push((index, stream, code(0)));
                true
            }
            GOAWAY => {
                goaways.lock().unwrap().push(code(4));
                true
            }
            _ => true,
        };
        if !keep {
            let _ = s.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Writes a response: a head with `status` (and the body's length when it
/// ends), then `body` in DATA frames of 16 KiB, ending the stream when
/// `end`.
fn answer(s: &mut TcpStream, stream: u32, status: &str, body: &[u8], end: bool) {
    let mut out = Vec::new();
    let len = body.len().to_string();
    let mut fields = vec![(":status", status)];
    if end {
        fields.push(("content-length", &len));
    }
    let head_flags = if body.is_empty() && end {
        END_HEADERS | END_STREAM
    } else {
        END_HEADERS
    };
    out.extend(frame(HEADERS, head_flags, stream, &block(&fields)));
    let mut chunks = body.chunks(16 * 1024).peekable();
    while let Some(c) = chunks.next() {
        let flags = if end && chunks.peek().is_none() {
            END_STREAM
        } else {
            0
        };
        out.extend(frame(DATA, flags, stream, c));
    }
    // The proxy may have reset the stream and moved on: a failed write
    // is its business.
    let _ = s.write_all(&out);
}

fn config(addr: SocketAddr, upstream_extra: &str, route_extra: &str) -> String {
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "origin"
protocol = "h2"
servers = [{{ address = "{addr}" }}]
{upstream_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "origin"
{route_extra}
"#
    )
}

#[test]
fn a_request_refused_by_goaway_goes_again_on_a_new_connection() {
    // The first connection turns the request away unprocessed (GOAWAY with
    // last stream 0); the second answers it.
    let origin = RawOrigin::start(Box::new(|conn, stream, s| {
        if conn == 0 {
            let mut payload = 0u32.to_be_bytes().to_vec();
            payload.extend_from_slice(&0u32.to_be_bytes());
            let _ = s.write_all(&frame(GOAWAY, 0, 0, &payload));
            return true;
        }
        answer(s, stream, "200", b"second", true);
        true
    }));
    let pier = Pier::with_config(&config(origin.addr, "retries = 0", ""), &[]);
    let r = get(pier.addr(), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body, b"second");
    assert_eq!(origin.connections(), 2);
}

#[test]
fn a_pooled_connection_the_origin_closed_is_not_used_again() {
    // The first connection answers once and closes; a POST with a body
    // (never sent again once its body was read) must go on a new one.
    let origin = RawOrigin::start(Box::new(|conn, stream, s| {
        answer(s, stream, "200", format!("conn {conn}").as_bytes(), true);
        conn != 0
    }));
    let pier = Pier::with_config(&config(origin.addr, "retries = 0", ""), &[]);
    let r = get(pier.addr(), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.body, b"conn 0");
    std::thread::sleep(Duration::from_millis(300));
    let r = get(
        pier.addr(),
        "POST /y HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body, b"conn 1");
    assert_eq!(origin.connections(), 2);
}

#[test]
fn bodies_of_dropped_streams_give_their_window_back() {
    // Each 503 comes with 240 KiB of body the proxy never relays (an error
    // page replaces it): twelve of them are more than the connection's
    // 2 MiB window, so the connection lives on only if a dropped stream's
    // bytes are counted as released.
    let origin = RawOrigin::start(Box::new(|_, stream, s| {
        answer(s, stream, "503", &vec![b'z'; 240 * 1024], false);
        true
    }));
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("503.html");
    std::fs::write(&page, "page").unwrap();
    let route = format!("error_pages = {{ 503 = \"{}\" }}", page.display());
    let pier = Pier::with_config(&config(origin.addr, "", &route), &[]);
    for i in 0..12 {
        let r = get(pier.addr(), "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!((i, r.status, &r.body[..]), (i, 503, &b"page"[..]));
        // The proxy resets each stream it dropped.
        let stream = 2 * i + 1;
        let until = std::time::Instant::now() + Duration::from_secs(3);
        while !origin.resets.lock().unwrap().iter().any(|r| r.1 == stream) {
            assert!(
                std::time::Instant::now() < until,
                "no reset of stream {stream}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert_eq!(origin.connections(), 1, "one connection carried them all");
    assert!(
        origin.goaways.lock().unwrap().is_empty(),
        "the proxy never ended the connection: {:?}",
        origin.goaways.lock().unwrap()
    );
    let resets = origin.resets.lock().unwrap();
    assert!(resets.iter().all(|r| r.2 == 8), "CANCEL: {resets:?}");
}

#[test]
fn a_server_refusing_every_stream_is_a_502_after_a_few_tries() {
    let refused = Arc::new(AtomicUsize::new(0));
    let count = refused.clone();
    let origin = RawOrigin::start(Box::new(move |_, stream, s| {
        count.fetch_add(1, Ordering::SeqCst);
        // RST_STREAM(REFUSED_STREAM): not processed, may be retried.
        s.write_all(&frame(RST_STREAM, 0, stream, &7u32.to_be_bytes()))
            .is_ok()
    }));
    let pier = Pier::with_config(&config(origin.addr, "retries = 0", ""), &[]);
    let r = get(pier.addr(), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 502);
    let tries = refused.load(Ordering::SeqCst);
    assert!((2..=6).contains(&tries), "sent {tries} times");
}

#[test]
fn a_request_waiting_for_a_stream_slot_fails_after_the_read_timeout() {
    // The origin takes one stream at a time (SETTINGS_MAX_CONCURRENT_STREAMS
    // = 1, sent at once) and keeps each call open. Two calls that come
    // together both wait for their group's first connection; when its
    // SETTINGS are read before the calls open their streams, one gets the
    // only slot and the other must not wait for one forever. Whether they
    // are read first is up to the scheduler, so five groups each take such
    // a pair at once.
    let mut settings = 3u16.to_be_bytes().to_vec();
    settings.extend_from_slice(&1u32.to_be_bytes());
    let origin = RawOrigin::with_settings(
        settings,
        Box::new(|_, stream, s| {
            answer(s, stream, "200", b"first part", false);
            true
        }),
    );
    let mut text = String::from(
        "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\nhttp2 = true\n",
    );
    for g in 0..5 {
        text.push_str(&format!(
            "[[upstream]]\nname = \"g{g}\"\nprotocol = \"h2\"\nservers = [\"{}\"]\n\
             retries = 0\nread_timeout = \"1s\"\n\
             [[route]]\npath = \"/g{g}/\"\nhandler = \"proxy\"\nupstream = \"g{g}\"\n",
            origin.addr
        ));
    }
    let pier = Pier::with_config(&text, &[]);
    let mut client = RawH2::connect(pier.addr());
    let mut all = Vec::new();
    for g in 0..5u32 {
        for k in 0..2u32 {
            let path = format!("/g{g}/{k}");
            let id = 1 + 2 * (2 * g + k);
            all.extend(frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                id,
                &block(&get_fields(&path)),
            ));
        }
    }
    client.send(&all);
    let started = std::time::Instant::now();
    let mut heads = Vec::new();
    while heads.len() < 10 {
        let Some(f) = client.next_frame(Duration::from_secs(6)) else {
            panic!(
                "only streams {heads:?} answered after {:?}",
                started.elapsed()
            );
        };
        if f.kind == HEADERS {
            heads.push(f.stream);
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
