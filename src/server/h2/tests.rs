//! The HTTP/2 driver behind the session, over real loopback sockets with the
//! h2 crate as the client: trailers of pushed and streamed bodies (what a
//! relayed gRPC status rides on), an echoed request body read through the
//! session under the body limit, and a pushed body left unfinished ending in
//! a reset of its stream alone.

use std::io;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::net::TcpStream;

use super::serve_h2;
use crate::handler::Handler;
use crate::http::{Body, BodyStream, OwnedField, ResponseHead, Served, SessionExt};
use crate::server::test_harness::{echo_route, test_ctx, test_route, with_one_connection};
use crate::server::transport::Plain;

/// A route pushing two pieces, then ending with a trailer (or leaving the
/// body short).
fn pushed_with_trailers_route(finish: bool) -> Box<dyn Handler> {
    test_route(false, move |session| {
        Served::Pending(Box::pin(async move {
            let head = ResponseHead {
                date: None,
                status: 200,
                fields: &[("content-type", b"application/grpc")],
                configured: None,
                field_lines: b"Connection: keep-alive\r\nX-From: upstream\r\n",
            };
            session.send_response(&head, Body::Push(None));
            session.write_body(b"piece one, ").await.unwrap();
            session.write_body(b"piece two").await.unwrap();
            if finish {
                session.finish_body(&[("grpc-status", b"0"), ("grpc-message", b"ok")]);
            }
        }))
    })
}

/// A body in two pieces with a trailer.
struct TwoPieces(u8);

impl BodyStream for TwoPieces {
    fn known_len(&self) -> Option<u64> {
        None
    }

    fn poll_chunk(&mut self, _: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<io::Result<bool>> {
        self.0 += 1;
        match self.0 {
            1 | 2 => {
                out.extend_from_slice(b"part ");
                Poll::Ready(Ok(true))
            }
            _ => Poll::Ready(Ok(false)),
        }
    }

    fn trailers(&self) -> &[OwnedField] {
        static T: std::sync::OnceLock<Vec<OwnedField>> = std::sync::OnceLock::new();
        T.get_or_init(|| vec![OwnedField::new("x-sum", b"2")])
    }
}

/// A route answering with a [`TwoPieces`] stream.
fn streamed_route() -> Box<dyn Handler> {
    test_route(false, |session| {
        session.send_response(
            &ResponseHead::new(200, &[]),
            Body::Stream(Box::new(TwoPieces(0))),
        );
        Served::Done
    })
}

/// Serves h2 connections with these routes while `client` runs.
fn with_h2_server<F, Fut>(client: F)
where
    F: FnOnce(h2::client::SendRequest<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let ctx = test_ctx(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\nhttp2 = true\n[http]\nmax_body_bytes = 100000\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"root\"\n",
        vec![
            ("/push", pushed_with_trailers_route(true)),
            ("/push-short", pushed_with_trailers_route(false)),
            ("/stream", streamed_route()),
            ("/echo", echo_route()),
        ],
    );
    let serve = move |stream, peer| serve_h2(Plain::new(stream), ctx, peer, 0, None);
    with_one_connection(serve, |tcp: TcpStream| async move {
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        client(send.ready().await.unwrap()).await;
    });
}

/// Body and trailers of a GET, or the stream's error.
async fn get(
    send: &mut h2::client::SendRequest<Bytes>,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(http::response::Parts, Vec<u8>, Option<http::HeaderMap>), h2::Error> {
    let req = http::Request::post(format!("http://x{path}"))
        .body(())
        .unwrap();
    let (resp, mut out) = send.send_request(req, body.is_none()).unwrap();
    if let Some(b) = body {
        out.send_data(Bytes::copy_from_slice(b), true).unwrap();
    }
    let (head, mut stream) = resp.await?.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk?;
        let _ = stream.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = stream.trailers().await?;
    Ok((head, data, trailers))
}

#[test]
fn trailers_of_pushed_and_streamed_bodies_end_the_stream() {
    with_h2_server(|mut send| async move {
        let (head, body, trailers) = get(&mut send, "/push", None).await.unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(body, b"piece one, piece two");
        assert_eq!(head.headers["x-from"], "upstream");
        assert!(head.headers.get("connection").is_none());
        assert!(head.headers.get("content-length").is_none());
        let trailers = trailers.expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(trailers["grpc-message"], "ok");

        let (_, body, trailers) = get(&mut send, "/stream", None).await.unwrap();
        assert_eq!(body, b"part part ");
        assert_eq!(trailers.expect("trailers")["x-sum"], "2");
    });
}

#[test]
fn a_pushed_body_left_unfinished_resets_the_stream_only() {
    with_h2_server(|mut send| async move {
        let err = get(&mut send, "/push-short", None).await.unwrap_err();
        assert_eq!(err.reason(), Some(h2::Reason::INTERNAL_ERROR), "{err}");
        // The connection carries on.
        let (head, body, _) = get(&mut send, "/", None).await.unwrap();
        assert_eq!((head.status.as_u16(), &body[..]), (200, &b"root"[..]));
    });
}

#[test]
fn request_bodies_are_read_through_the_session_and_the_limit_applies() {
    with_h2_server(|mut send| async move {
        let body = vec![b'z'; 50_000];
        let (head, got, _) = get(&mut send, "/echo", Some(&body)).await.unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(got, body);
        let too_big = vec![b'z'; 150_000];
        let (head, _, _) = get(&mut send, "/echo", Some(&too_big)).await.unwrap();
        assert_eq!(head.status, 413);
    });
}

/// A connection's shared state over a fresh codec, for driving `poll_io`.
fn idle_shared(ctx: &crate::worker::WorkerCtx) -> super::SharedCell {
    let limits = ctx.config.http2.conn_limits(&ctx.config.http);
    std::cell::RefCell::new(super::Shared {
        conn: crate::http2::conn::ServerConnection::new(limits),
        table: super::StreamTable::new(ctx.config.http.limits),
    })
}

#[test]
fn an_idle_connection_frees_its_read_buffer_and_one_with_a_stream_keeps_it() {
    let ctx = test_ctx(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[route]]\npath = \"/\"\nhandler = \"respond\"\n",
        Vec::new(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut io = Plain::new(server);
        let shared = idle_shared(&ctx);
        let state = super::ConnState {
            active: std::cell::Cell::new(1),
            idle_since: std::cell::Cell::new(tokio::time::Instant::now()),
            client_resets: std::cell::Cell::new(0),
            stalled_since: std::cell::Cell::new(None),
            wake: tokio::sync::Notify::new(),
        };
        // The codec's SETTINGS go out; then nothing to read.
        let mut rbuf = Vec::with_capacity(8192);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let r = super::poll_io(&mut cx, &mut io, &shared, &mut rbuf, &state, &ctx);
        assert!(r.is_pending());
        assert!(shared.borrow().conn.output().is_empty(), "SETTINGS written");
        // A stream is open: the next bytes are expected soon, the buffer stays.
        assert!(rbuf.capacity() > 0);
        // No stream and nothing to read: the buffer stays until the
        // connection has been idle for RELEASE_AFTER, then goes.
        state.active.set(0);
        let r = super::poll_io(&mut cx, &mut io, &shared, &mut rbuf, &state, &ctx);
        assert!(r.is_pending());
        assert!(rbuf.capacity() > 0);
        super::release_idle_buffers(&shared, &mut rbuf);
        assert_eq!(
            rbuf.capacity(),
            0,
            "an idle connection keeps no read buffer"
        );
        drop(client);
    });
}
