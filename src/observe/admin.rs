//! The admin listener: `/metrics` (Prometheus text), `/status` (a page for
//! people, see [`crate::observe::status`]) and `/status.json`, served from a
//! thread of its own so scraping never runs on a worker.
//!
//! It speaks just enough HTTP/1.1 through Pier's own request parser: one request
//! per connection, `GET`/`HEAD` only, `Connection: close` on every answer.

use std::io;
use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use crate::deadline;
use crate::http1::parse::{parse_request, Limits, Method, Parsed, RequestHead};
use crate::http1::write::{self, BodyFraming, ConnectionHeader, DateCache};
use crate::observe::metrics::Registry;
use crate::observe::status::{StatusResponse, StatusState};

/// A scrape that has not sent its head by then is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Admin requests are small; anything bigger is refused.
const LIMITS: Limits = Limits {
    max_head_bytes: 8 * 1024,
    max_headers: 64,
    max_uri_bytes: 1024,
};

/// Starts the admin thread on an already bound listener.
pub fn spawn(
    listener: StdListener,
    registry: Arc<Registry>,
    status: Arc<StatusState>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    crate::local_thread::spawn_local_thread("pier-admin", "admin listener", move || async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "admin listener cannot start");
                return;
            }
        };
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let registry = registry.clone();
                    let status = status.clone();
                    tokio::task::spawn_local(async move {
                        if let Err(e) = serve(stream, &registry, &status).await {
                            debug!(error = %e, "admin request failed");
                        }
                    });
                }
                Err(e) => {
                    debug!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// Answers one request and closes.
async fn serve(mut stream: TcpStream, registry: &Registry, status: &StatusState) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut head = RequestHead::default();
    let read_head = async {
        loop {
            match parse_request(&buf, &LIMITS, &mut head) {
                Ok(Parsed::Complete) => return Ok(None),
                Ok(Parsed::Partial) => {}
                Err(e) => return Ok(Some(e.status())),
            }
            buf.reserve(1024);
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
        }
    };
    let refused = deadline::io_within(REQUEST_TIMEOUT, "request timeout", read_head).await?;
    let answer = match refused {
        Some(code) => StatusResponse {
            status: code,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: String::new(),
        },
        None => route(&head, &buf, registry, status),
    };
    let body = answer.body;
    let is_head = refused.is_none() && head.method == Method::Head;
    let mut out = Vec::with_capacity(body.len() + 256);
    let mut date = DateCache::default();
    write::write_head_fields(
        &mut out,
        answer.status,
        date.get(),
        BodyFraming::Length(body.len() as u64),
        ConnectionHeader::Close,
        std::iter::once(("content-type", answer.content_type.as_bytes())).chain(
            answer
                .headers
                .iter()
                .map(|(name, value)| (*name, value.as_bytes())),
        ),
    );
    if !is_head {
        out.extend_from_slice(body.as_bytes());
    }
    stream.write_all(&out).await?;
    stream.shutdown().await
}

/// The answer to a parsed request.
fn route(
    head: &RequestHead,
    buf: &[u8],
    registry: &Registry,
    status: &StatusState,
) -> StatusResponse {
    const TEXT: &str = "text/plain; charset=utf-8";
    let plain = |code: u16, content_type: &'static str, body: String| StatusResponse {
        status: code,
        content_type,
        headers: Vec::new(),
        body,
    };
    if !matches!(head.method, Method::Get | Method::Head) {
        return plain(405, TEXT, "GET or HEAD only\n".into());
    }
    let path = head.path(buf);
    if path == b"/metrics" {
        return plain(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            registry.render_prometheus(),
        );
    }
    status
        .answer(path, head.header(buf, "accept"))
        .unwrap_or_else(|| {
            plain(
                404,
                TEXT,
                "not found: try /metrics, /status or /status.json\n".into(),
            )
        })
}
