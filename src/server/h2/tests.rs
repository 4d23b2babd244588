//! The HTTP/2 driver behind the session, over real loopback sockets with the
//! h2 crate as the client: trailers of pushed and streamed bodies (what a
//! relayed gRPC status rides on), an echoed request body read through the
//! session under the body limit, and a pushed body left unfinished ending in
//! a reset of its stream alone.

use std::io;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};

use super::serve_h2;
use crate::handler::Handler;
use crate::http::{Body, BodyStream, OwnedField, ResponseHead, Served, Session, SessionExt};
use crate::observe::metrics::HandlerKind;
use crate::server::transport::Plain;

/// Pushes two pieces, then ends with a trailer (or leaves the body short).
#[derive(Debug)]
struct PushedWithTrailers {
    finish: bool,
}

impl Handler for PushedWithTrailers {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        Served::Pending(Box::pin(async move {
            let head = ResponseHead {
                status: 200,
                fields: &[("content-type", b"application/grpc")],
                configured: None,
                field_lines: b"Connection: keep-alive\r\nX-From: upstream\r\n",
            };
            session.send_response(&head, Body::Push(None));
            session.write_body(b"piece one, ").await.unwrap();
            session.write_body(b"piece two").await.unwrap();
            if self.finish {
                session.finish_body(&[("grpc-status", b"0"), ("grpc-message", b"ok")]);
            }
        }))
    }
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

#[derive(Debug)]
struct Streamed;

impl Handler for Streamed {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        session.send_response(
            &ResponseHead::new(200, &[]),
            Body::Stream(Box::new(TwoPieces(0))),
        );
        Served::Done
    }
}

/// Answers with the request body it read.
#[derive(Debug)]
struct Echo;

impl Handler for Echo {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn reads_body(&self) -> bool {
        true
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        Served::Pending(Box::pin(async move {
            let mut got = Vec::new();
            loop {
                match session.fill_body().await {
                    Ok(0) => break,
                    Ok(n) => {
                        got.extend_from_slice(session.body_chunk());
                        session.consume_body(n);
                    }
                    Err(_) => return,
                }
            }
            session.send_response(&ResponseHead::new(200, &[]), Body::Owned(got));
        }))
    }
}

/// Serves h2 connections with these routes while `client` runs.
fn with_h2_server<F, Fut>(client: F)
where
    F: FnOnce(h2::client::SendRequest<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut config = crate::config::build::load_str(
        "test.toml",
        "[[listener]]\nlisten = \"127.0.0.1:0\"\nhttp2 = true\n[http]\nmax_body_bytes = 100000\n\
         [[route]]\npath = \"/\"\nhandler = \"respond\"\nbody = \"root\"\n",
    )
    .expect("a valid config");
    let routes: [(&str, Box<dyn Handler>); 4] = [
        ("/push", Box::new(PushedWithTrailers { finish: true })),
        (
            "/push-short",
            Box::new(PushedWithTrailers { finish: false }),
        ),
        ("/stream", Box::new(Streamed)),
        ("/echo", Box::new(Echo)),
    ];
    for (path, handler) in routes {
        config.routes.insert(None, path.into(), handler).unwrap();
    }
    let ctx: Rc<_> = crate::worker::standalone_ctx(config, Default::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(async move {
            let (stream, peer) = listener.accept().await.unwrap();
            serve_h2(Plain::new(stream), ctx, peer, None).await;
        });
        let tcp = TcpStream::connect(addr).await.unwrap();
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
