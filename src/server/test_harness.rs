//! What the HTTP/1 and HTTP/2 driver tests share: routes written as plain
//! functions of the session, one that echoes the request body, and one
//! loopback connection answered by a driver, so each driver's tests say only
//! what they send and what they expect.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;

use tokio::net::{TcpListener, TcpStream};

use crate::handler::Handler;
use crate::http::{Body, ResponseHead, Served, Session, SessionExt};
use crate::observe::metrics::HandlerKind;
use crate::worker::WorkerCtx;

/// A test route: a function answering through the session, and whether it
/// reads the request body itself.
struct TestRoute<F> {
    reads_body: bool,
    serve: F,
}

impl<F> fmt::Debug for TestRoute<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TestRoute")
    }
}

impl<F> Handler for TestRoute<F>
where
    F: for<'s, 'h> Fn(&'s mut dyn Session<'h>) -> Served<'s> + Send + Sync,
{
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn reads_body(&self) -> bool {
        self.reads_body
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        (self.serve)(session)
    }
}

/// A route answered by `serve`; with `reads_body`, the driver leaves the
/// request body to it.
pub(super) fn test_route<F>(reads_body: bool, serve: F) -> Box<dyn Handler>
where
    F: for<'s, 'h> Fn(&'s mut dyn Session<'h>) -> Served<'s> + Send + Sync + 'static,
{
    Box::new(TestRoute { reads_body, serve })
}

/// A route answering with the request body it read through the session.
pub(super) fn echo_route() -> Box<dyn Handler> {
    test_route(true, |session| {
        Served::Pending(Box::pin(echo_body(session)))
    })
}

async fn echo_body(session: &mut dyn Session<'_>) {
    // The driver answers a failed body itself.
    let Ok(got) = session.read_body_to_end().await else {
        return;
    };
    session.send_response(&ResponseHead::new(200, &[]), Body::Owned(got));
}

/// A worker context for the configuration `toml`, with `routes` added.
pub(super) fn test_ctx(toml: &str, routes: Vec<(&str, Box<dyn Handler>)>) -> Rc<WorkerCtx> {
    let mut config = crate::config::build::load_str("test.toml", toml).expect("a valid config");
    for (path, handler) in routes {
        config
            .routes
            .insert(
                None,
                crate::route::matcher::RouteMatch::prefix(path),
                handler,
            )
            .unwrap();
    }
    crate::worker::standalone_ctx(config, Default::default())
}

/// Runs `client` against one connection to a listener on 127.0.0.1:0 whose
/// accepted stream `serve` answers, on a current-thread runtime as a worker's.
pub(super) fn with_one_connection<S, SF, C, CF>(serve: S, client: C)
where
    S: FnOnce(TcpStream, SocketAddr) -> SF + 'static,
    SF: Future<Output = ()> + 'static,
    C: FnOnce(TcpStream) -> CF,
    CF: Future<Output = ()>,
{
    with_one_windowed_connection(None, serve, client)
}

/// [`with_one_connection`] with the client's receive buffer set to
/// `recv_buffer` before it connects, so a server writing more than that
/// while the client does not read finds its socket full.
pub(super) fn with_one_windowed_connection<S, SF, C, CF>(
    recv_buffer: Option<u32>,
    serve: S,
    client: C,
) where
    S: FnOnce(TcpStream, SocketAddr) -> SF + 'static,
    SF: Future<Output = ()> + 'static,
    C: FnOnce(TcpStream) -> CF,
    CF: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::task::spawn_local(async move {
            let (stream, peer) = listener.accept().await.unwrap();
            serve(stream, peer).await;
        });
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size).unwrap();
        }
        client(socket.connect(addr).await.unwrap()).await;
        server.await.unwrap();
    });
}
