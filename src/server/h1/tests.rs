//! The HTTP/1 driver behind the session, over real loopback sockets: request
//! bodies read through the session (chunked, `100 Continue`, the limit) and
//! streamed response bodies framed by the driver (chunked with trailers, a
//! known length, close-delimited for HTTP/1.0, nothing for HEAD).

use std::io::{self, IoSlice};
use std::task::{Context, Poll};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::serve_http1;
use crate::handler::Handler;
use crate::http::{Body, BodyStream, OwnedField, ResponseHead, Served, SessionExt};
use crate::server::test_harness::{
    echo_route, test_ctx, test_route, with_one_connection, with_one_windowed_connection,
};
use crate::server::transport::Plain;

/// A body in three pieces, with a trailer; `known` says whether it declares its length.
struct PieceStream {
    left: Vec<&'static [u8]>,
    known: bool,
    waited: bool,
    trailers: Vec<OwnedField>,
}

impl BodyStream for PieceStream {
    fn known_len(&self) -> Option<u64> {
        self.known.then_some(9)
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<io::Result<bool>> {
        if self.left.is_empty() {
            return Poll::Ready(Ok(false));
        }
        // The second piece makes the driver wait once, as a slow producer would.
        if self.left.len() == 2 && !self.waited {
            self.waited = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        out.extend_from_slice(self.left.remove(0));
        Poll::Ready(Ok(true))
    }

    fn trailers(&self) -> &[OwnedField] {
        &self.trailers
    }
}

/// A route answering with a [`PieceStream`].
fn pieces_route(known: bool) -> Box<dyn Handler> {
    test_route(false, move |session| {
        let stream = PieceStream {
            left: vec![b"one", b"two", b"six"],
            known,
            waited: false,
            trailers: vec![OwnedField::new("x-sum", b"9")],
        };
        let fields = [("Content-Type", b"text/plain".as_slice())];
        session.send_response(
            &ResponseHead::new(200, &fields),
            Body::Stream(Box::new(stream)),
        );
        Served::Done
    })
}

/// Body size of the `/big` route: under the size copied behind the head over
/// TLS; over plain TCP each answer leaves with its head in a gathered write,
/// the body from the configuration.
const BIG_BODY: usize = 60_000;

/// A route pushing its body through the session: `pieces` of `piece` bytes
/// each, with the length declared or not, finished or left short.
fn pushed_route(known: bool, pieces: usize, piece: usize, finish: bool) -> Box<dyn Handler> {
    test_route(false, move |session| {
        Served::Pending(Box::pin(async move {
            let len = (pieces * piece) as u64;
            let head = ResponseHead {
                date: None,
                status: 200,
                fields: &[],
                configured: None,
                field_lines: b"X-From: upstream\r\nX-Two: 2\r\n",
            };
            session.send_response(&head, Body::Push(known.then_some(len)));
            for i in 0..pieces {
                let bytes = vec![b'a' + (i % 26) as u8; piece];
                session.write_body(&bytes).await.unwrap();
                session.flush_body().await.unwrap();
            }
            if finish {
                session.finish_body(&[("x-pieces", b"3")]);
            }
        }))
    })
}

/// Size of the `/gathered` body and of the `/huge` respond body (over a
/// file chunk, so it is written in more than one step).
const GATHERED_BODY: usize = 120_001;
const HUGE_BODY: usize = 300_000;

/// `len` letters that do not repeat with a short period, so a body resumed
/// at the wrong byte cannot match.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((i as u64).wrapping_mul(2_654_435_761) >> 7) as u8 % 26)
        .collect()
}

/// A route pushing [`pattern`] as three pieces of very different sizes
/// handed over at once, declaring `len` (right, wrong, or none).
fn gathered_route(len: Option<u64>) -> Box<dyn Handler> {
    test_route(false, move |session| {
        Served::Pending(Box::pin(async move {
            let body = pattern(GATHERED_BODY);
            session.send_response(&ResponseHead::new(200, &[]), Body::Push(len));
            let mut pieces = [
                IoSlice::new(&body[..50_000]),
                IoSlice::new(&body[50_000..50_001]),
                IoSlice::new(&body[50_001..]),
            ];
            if session.write_body_gathered(&mut pieces).await.is_ok() {
                session.finish_body(&[]);
            }
        }))
    })
}

/// Serves one connection with these routes and runs `client` against it.
fn with_server<F, Fut>(client: F)
where
    F: FnOnce(TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    with_server_buffers(None, client)
}

/// [`with_server`] with the server's send buffer and the client's receive
/// buffer both set to `buffers` bytes, so large answers find the socket full.
fn with_server_buffers<F, Fut>(buffers: Option<u32>, client: F)
where
    F: FnOnce(TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let toml = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n\
         [http]\nmax_body_bytes = 64\nkeepalive_timeout = \"300ms\"\n\
         body_read_timeout = \"300ms\"\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"root\"\n\
         headers = {{ \"X-One\" = \"1\", \"Content-Type\" = \"text/plain\" }}\n\
         [[route]]\npath = \"/big\"\nhandler = \"respond\"\nbody = \"{}\"\n\
         [[route]]\npath = \"/huge\"\nhandler = \"respond\"\nbody = \"{}\"\n",
        "x".repeat(BIG_BODY),
        String::from_utf8(pattern(HUGE_BODY)).unwrap(),
    );
    let ctx = test_ctx(
        &toml,
        vec![
            ("/echo", echo_route()),
            ("/chunks", pieces_route(false)),
            ("/sized", pieces_route(true)),
            ("/push-chunked", pushed_route(false, 3, 20_000, true)),
            ("/push-sized", pushed_route(true, 2, 5, true)),
            ("/push-short", pushed_route(true, 2, 5, false)),
            ("/gathered", gathered_route(Some(GATHERED_BODY as u64))),
            ("/gathered-chunked", gathered_route(None)),
            ("/gathered-over", gathered_route(Some(100_000))),
        ],
    );
    let serve = move |stream: TcpStream, peer| async move {
        if let Some(size) = buffers {
            socket2::SockRef::from(&stream)
                .set_send_buffer_size(size as usize)
                .unwrap();
        }
        serve_http1(Plain::new(stream), &ctx, peer, 0, None).await;
    };
    with_one_windowed_connection(buffers, serve, client);
}

/// Sends `request` on a connection of its own and reads the answer until the
/// server closes.
fn answer_to_request(request: &[u8]) -> String {
    answer_to_writes(&[request])
}

/// Writes `pieces` one after the other on a connection of its own and reads
/// what comes back until the server closes.
fn answer_to_writes(pieces: &[&[u8]]) -> String {
    let mut text = String::new();
    let out = &mut text;
    with_server(|mut s| async move {
        for piece in pieces {
            s.write_all(piece).await.unwrap();
        }
        *out = read_to_close(&mut s).await;
    });
    text
}

async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_chunked_request_body_is_read_through_the_session() {
    with_server(|mut s| async move {
        s.write_all(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
              Connection: close\r\n\r\n3\r\nabc\r\n",
        )
        .await
        .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        s.write_all(b"4\r\ndefg\r\n0\r\n\r\n").await.unwrap();
        let text = read_to_close(&mut s).await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 7\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nabcdefg"), "{text}");
    });
}

#[test]
fn continue_is_sent_only_when_the_handler_waits_for_the_body() {
    with_server(|mut s| async move {
        s.write_all(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\
              Expect: 100-continue\r\n\r\n",
        )
        .await
        .unwrap();
        let mut interim = [0u8; 25];
        s.read_exact(&mut interim).await.unwrap();
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        s.write_all(b"hello").await.unwrap();
        // Kept alive: a second request on the same connection.
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let text = read_to_close(&mut s).await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        let second = text.find("\r\n\r\nhello").map(|i| &text[i + 9..]).unwrap();
        assert!(second.starts_with("HTTP/1.1 200 OK\r\n"), "{second}");
        assert!(second.ends_with("\r\n\r\nroot"), "{second}");
    });
}

#[test]
fn an_empty_body_is_complete_without_a_byte() {
    let text = answer_to_request(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n\
          POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{text}");
    assert!(text.ends_with("\r\n\r\nroot"), "{text}");
}

#[test]
fn a_body_over_the_limit_read_through_the_session_is_refused() {
    let text = answer_to_writes(&[
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"41\r\n",
        &[b'a'; 65],
        b"\r\n0\r\n\r\n",
    ]);
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains("Connection: close\r\n"), "{text}");
}

#[test]
fn a_stream_without_length_goes_chunked_with_its_trailers() {
    let text = answer_to_request(b"GET /chunks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(text.contains("Transfer-Encoding: chunked\r\n"), "{text}");
    assert!(!text.contains("Content-Length"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n3\r\none\r\n3\r\ntwo\r\n3\r\nsix\r\n0\r\nx-sum: 9\r\n\r\n"),
        "{text}"
    );
}

/// A GET then a HEAD of `path`, whose body is `body` with a known length: the
/// GET is answered with that length on a connection kept open, and the HEAD
/// with the same head and no body (its head ending in `head_end`).
fn get_then_head_keep_the_known_length(path: &str, body: &str, head_end: &str) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n\
         HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let text = answer_to_request(request.as_bytes());
    let (first, second) = text.split_at(text.find(body).unwrap() + body.len());
    let length = format!("Content-Length: {}\r\n", body.len());
    assert!(first.contains(&length), "{first}");
    assert!(!first.contains("chunked"), "{first}");
    assert!(second.starts_with("HTTP/1.1 200 OK\r\n"), "{second}");
    assert!(second.contains(&length), "{second}");
    assert!(second.ends_with(head_end), "{second}");
}

#[test]
fn a_stream_of_known_length_gets_content_length_and_stays_open() {
    get_then_head_keep_the_known_length("/sized", "onetwosix", "\r\n\r\n");
}

#[test]
fn a_stream_without_length_to_http10_is_delimited_by_close() {
    let text = answer_to_request(b"GET /chunks HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(
        !text.contains("chunked") && !text.contains("Content-Length"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\nonetwosix"), "{text}");
}

#[test]
fn configured_fields_follow_the_head_of_every_answer_get_and_head_alike() {
    let text = answer_to_request(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\
          HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let at = 1 + text[1..].find("HTTP/1.1 200 OK\r\n").expect("two answers");
    let (first, second) = text.split_at(at);
    for head in [first, second] {
        assert!(head.contains("\r\nX-One: 1\r\n"), "{text}");
        assert!(head.contains("\r\nContent-Type: text/plain\r\n"), "{text}");
        assert!(head.contains("\r\nContent-Length: 4\r\n"), "{text}");
    }
    assert!(first.ends_with("\r\n\r\nroot"), "{text}");
    assert!(second.contains("\r\nConnection: close\r\n"), "{text}");
    assert!(!second.contains("root"), "HEAD got a body: {text}");
}

#[test]
fn pipelined_answers_larger_than_the_socket_takes_at_once_all_arrive() {
    const REQUESTS: usize = 200;
    with_server(|mut s| async move {
        let mut requests = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n".repeat(REQUESTS - 1);
        requests.extend_from_slice(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(&requests).await.unwrap();
        // Not reading yet: the server's writes fill the socket and wait.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let text = read_to_close(&mut s).await;
        assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), REQUESTS);
        assert_eq!(text.matches('x').count(), REQUESTS * BIG_BODY);
    });
}

/// Reads until what came ends with `end`, failing if the server closes first.
async fn read_until_end(stream: &mut TcpStream, end: &str) -> String {
    let mut out = Vec::new();
    while !out.ends_with(end.as_bytes()) {
        let mut buf = [0u8; 1024];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(out).unwrap()
}

/// Reads one answer to `GET /` (its body is `root`).
async fn read_root_answer(stream: &mut TcpStream) -> String {
    read_until_end(stream, "\r\n\r\nroot").await
}

#[test]
fn the_idle_limit_runs_from_the_last_request_not_the_first() {
    use std::time::{Duration, Instant};
    with_server(|mut s| async move {
        // Five requests 200 ms apart: over the 300 ms keep-alive limit in all,
        // under it between any two.
        for _ in 0..5 {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            read_root_answer(&mut s).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        read_root_answer(&mut s).await;
        let idle_from = Instant::now();
        assert_eq!(read_to_close(&mut s).await, "");
        let idle = idle_from.elapsed();
        assert!(
            idle >= Duration::from_millis(250) && idle < Duration::from_secs(3),
            "closed after {idle:?} idle"
        );
    });
}

#[test]
fn a_connection_keeps_its_buffers_while_briefly_idle_and_gives_them_back_after() {
    use std::time::Duration;
    let ctx = test_ctx(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[http]\nkeepalive_timeout = \"10s\"\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"root\"\n",
        vec![],
    );
    let server_ctx = ctx.clone();
    let serve = move |stream: TcpStream, peer| async move {
        serve_http1(Plain::new(stream), &server_ctx, peer, 0, None).await;
    };
    with_one_connection(serve, move |mut s| async move {
        let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        for _ in 0..3 {
            s.write_all(request).await.unwrap();
            read_root_answer(&mut s).await;
            assert_eq!(
                ctx.pooled_buffer_sets(),
                0,
                "buffers given back between requests in quick succession"
            );
        }
        tokio::time::sleep(super::BUFFERS_KEPT_IDLE + Duration::from_millis(300)).await;
        assert_eq!(
            ctx.pooled_buffer_sets(),
            1,
            "buffers kept by a connection idle past the pause"
        );
        // The next request takes them again and is answered as before.
        s.write_all(request).await.unwrap();
        read_root_answer(&mut s).await;
        assert_eq!(ctx.pooled_buffer_sets(), 0);
    });
}

#[test]
fn an_answer_given_after_a_wait_carries_the_date_of_its_sending() {
    use crate::http1::write::format_http_date;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let wall = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    with_server(|mut s| async move {
        // A request answered at once first, so the worker's time is cached.
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        read_root_answer(&mut s).await;
        let started = wall();
        s.write_all(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        // 1.25 s in all, each gap under the body read timeout.
        for byte in b"abcde" {
            tokio::time::sleep(Duration::from_millis(250)).await;
            s.write_all(&[*byte]).await.unwrap();
        }
        let text = read_to_close(&mut s).await;
        let ended = wall();
        let date = text
            .lines()
            .find_map(|l| l.strip_prefix("Date: "))
            .expect("a Date field");
        assert!(
            (started + 1..=ended).any(|t| format_http_date(t) == date.as_bytes()),
            "Date {date} is not from after the wait ({started}..={ended})"
        );
    });
}

#[test]
fn a_slow_but_steady_body_is_read_whole_by_a_handler_or_the_driver() {
    use std::time::Duration;
    with_server(|mut s| async move {
        // To a handler reading the body, then to one that does not (the
        // driver drops it): each byte 150 ms apart, 750 ms in all, over the
        // 300 ms body read timeout in all but never between two bytes.
        for (target, answer) in [("/echo", "abcde"), ("/", "root")] {
            let head = format!("POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");
            s.write_all(head.as_bytes()).await.unwrap();
            for byte in b"abcde" {
                tokio::time::sleep(Duration::from_millis(150)).await;
                s.write_all(&[*byte]).await.unwrap();
            }
            let text = read_until_end(&mut s, answer).await;
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        }
        // A stall past the timeout still ends it.
        s.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab")
            .await
            .unwrap();
        let text = read_to_close(&mut s).await;
        assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    });
}

/// Decodes a chunked body, returning its bytes and what follows the last chunk.
fn dechunk(mut body: &str) -> (String, String) {
    let mut data = String::new();
    loop {
        let line_end = body.find("\r\n").unwrap();
        let size = usize::from_str_radix(&body[..line_end], 16).unwrap();
        body = &body[line_end + 2..];
        if size == 0 {
            return (data, body.to_string());
        }
        data.push_str(&body[..size]);
        assert_eq!(&body[size..size + 2], "\r\n");
        body = &body[size + 2..];
    }
}

#[test]
fn a_pushed_body_without_length_goes_chunked_large_pieces_included() {
    let text =
        answer_to_request(b"GET /push-chunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (head, body) = text.split_at(text.find("\r\n\r\n").unwrap() + 4);
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    assert!(
        head.ends_with("X-From: upstream\r\nX-Two: 2\r\n\r\n"),
        "{head}"
    );
    let (data, trailer) = dechunk(body);
    let want: String = ["a", "b", "c"].iter().map(|c| c.repeat(20_000)).collect();
    assert!(data == want, "{} bytes decoded", data.len());
    assert_eq!(trailer, "x-pieces: 3\r\n\r\n");
}

#[test]
fn a_pushed_body_of_known_length_stays_open_and_head_gets_the_length_only() {
    get_then_head_keep_the_known_length("/push-sized", "aaaaabbbbb", "X-Two: 2\r\n\r\n");
}

#[test]
fn a_pushed_body_left_short_closes_the_connection() {
    let text = answer_to_request(
        b"GET /push-short HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(text.contains("Content-Length: 10\r\n"), "{text}");
    // Never finished: the client must not see another response after it.
    assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{text}");
    assert!(!text.contains("root"), "{text}");
}

#[test]
fn trailers_go_only_where_the_framing_carries_them() {
    // HTTP/1.0 gets the pushed body delimited by close: no place for trailers.
    let text = answer_to_request(b"GET /push-chunked HTTP/1.0\r\nHost: x\r\n\r\n");
    let (head, body) = text.split_at(text.find("\r\n\r\n").unwrap() + 4);
    assert!(!head.contains("chunked"), "{head}");
    assert_eq!(body.len(), 60_000);
    assert!(!text.contains("x-pieces"));
    // A known length: the trailers are dropped, the connection stays usable.
    let text = answer_to_request(
        b"GET /push-sized HTTP/1.1\r\nHost: x\r\n\r\n\
          GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(!text.contains("x-pieces"), "{text}");
    assert!(text.ends_with("root"), "{text}");
    // HEAD: neither body nor trailers.
    let text =
        answer_to_request(b"HEAD /push-chunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(text.ends_with("X-Two: 2\r\n\r\n"), "{text}");
    assert!(!text.contains("x-pieces"), "{text}");
}

/// Takes the next answer off `rest`: its head and its body, decoded when
/// chunked; a `HEAD` answer has none.
fn next_answer(rest: &mut &[u8], head_request: bool) -> (String, Vec<u8>) {
    let end = rest
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole head")
        + 4;
    let head = String::from_utf8(rest[..end].to_vec()).unwrap();
    *rest = &rest[end..];
    if head_request {
        return (head, Vec::new());
    }
    if head.contains("Transfer-Encoding: chunked\r\n") {
        let text = std::str::from_utf8(rest).unwrap();
        let (data, after) = dechunk(text);
        *rest = &rest[rest.len() - after.len()..];
        return (head, data.into_bytes());
    }
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a length")
        .parse()
        .unwrap();
    let body = rest[..len].to_vec();
    *rest = &rest[len..];
    (head, body)
}

#[test]
fn gathered_bodies_cut_short_by_a_full_socket_resume_at_the_right_byte_in_order() {
    use std::time::Duration;
    with_server_buffers(Some(4096), |mut s| async move {
        s.write_all(
            b"GET /gathered HTTP/1.1\r\nHost: x\r\n\r\n\
              GET / HTTP/1.1\r\nHost: x\r\n\r\n\
              HEAD /gathered HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /big HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /gathered-chunked HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /gathered HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /huge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        // Not reading for a while: each large answer fills the socket and
        // waits, part written, until the client reads on.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.unwrap();
        let mut rest = all.as_slice();
        let want = pattern(GATHERED_BODY);
        let (head, body) = next_answer(&mut rest, false);
        assert!(head.contains("Content-Length: 120001\r\n"), "{head}");
        assert!(body == want, "the first gathered body differs");
        let (_, body) = next_answer(&mut rest, false);
        assert_eq!(body, b"root");
        let (head, _) = next_answer(&mut rest, true);
        assert!(head.contains("Content-Length: 120001\r\n"), "{head}");
        let (_, body) = next_answer(&mut rest, false);
        assert!(body == vec![b'x'; BIG_BODY], "the respond body differs");
        let (head, body) = next_answer(&mut rest, false);
        assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
        assert!(body == want, "the chunked gathered body differs");
        let (_, body) = next_answer(&mut rest, false);
        assert!(body == want, "the second gathered body differs");
        let (head, body) = next_answer(&mut rest, false);
        assert!(head.contains("Connection: close\r\n"), "{head}");
        assert!(body == pattern(HUGE_BODY), "the huge respond body differs");
        assert!(
            rest.is_empty(),
            "{} bytes after the last answer",
            rest.len()
        );
    });
}

#[test]
fn a_gathered_body_longer_than_its_length_sends_none_of_it_and_closes() {
    let text = answer_to_request(
        b"GET /gathered-over HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    // Refused before a byte of it went: at most the head, no second answer.
    let body = text.find("\r\n\r\n").map_or("", |i| &text[i + 4..]);
    assert!(body.is_empty(), "{} body bytes sent", body.len());
    assert!(!text.contains("root"), "{text}");
}

/// A connection idle after a POST whose body came after its head (and,
/// with `after_post_get`, after a GET too) closes at once on a drain. A body
/// read that left the socket's readiness set used to send the next wait to
/// the head deadline (closed 4 s late), and a drain signal whose first wait
/// ended at its first look at the socket went unpolled (closed at the 1 s
/// buffer release).
fn drain_test(after_post_get: bool) {
    use std::time::{Duration, Instant};
    let ctx = test_ctx(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[http]\nkeepalive_timeout = \"10s\"\n\
         header_read_timeout = \"4s\"\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"root\"\n",
        vec![("/echo", echo_route())],
    );
    let server_ctx = ctx.clone();
    let serve = move |stream: TcpStream, peer| async move {
        serve_http1(Plain::new(stream), &server_ctx, peer, 0, None).await;
    };
    with_one_connection(serve, move |mut s| async move {
        s.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.write_all(b"hello").await.unwrap();
        read_until_end(&mut s, "hello").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        if after_post_get {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            read_root_answer(&mut s).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let t = Instant::now();
        ctx.start_draining();
        assert_eq!(read_to_close(&mut s).await, "");
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(300),
            "idle connection closed {took:?} after the drain"
        );
    });
}

#[test]
fn a_drain_closes_an_idle_connection_at_once_after_a_later_request() {
    drain_test(true);
}

#[test]
fn a_drain_closes_an_idle_connection_at_once_after_a_body_read() {
    drain_test(false);
}
