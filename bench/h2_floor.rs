//! The floor of the `h2` crate: the least a server on it can do per HTTP/2
//! request, so bench/h2_userspace can say which part of Pier's instructions per
//! request is the crate's (HPACK, frames, stream state, flow control) and which
//! is Pier's own (routing, the session, limits, logs, metrics).
//!
//! One thread, one current-thread runtime, cleartext h2 with prior knowledge
//! (`h2load http://...`), one task per connection that answers each stream as
//! it is accepted: the head Pier sends for bench/h2's `respond` route
//! (`server`, `date`, `content-length`, the date a fixed string) and the
//! 13-byte body in the HEADERS' stream, no task per stream, nothing logged or
//! counted. `/bulk` streams `FLOOR_BULK_MB` (default 100) MiB from one
//! in-memory buffer within the client's windows, for the cost per byte.
//!
//! usage: cargo build --release --example h2_floor && target/release/examples/h2_floor PORT

use std::future::poll_fn;

use bytes::Bytes;
use tokio::net::TcpListener;

const BODY: &[u8] = b"Hello, World!";
const CHUNK: usize = 1 << 20;

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: h2_floor PORT");
    let bulk_bytes = std::env::var("FLOOR_BULK_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(100)
        << 20;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the port is free");
        let chunk = Bytes::from(vec![b'x'; CHUNK]);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let chunk = chunk.clone();
            tokio::task::spawn_local(async move {
                let mut builder = h2::server::Builder::new();
                builder.max_concurrent_streams(128);
                let Ok(mut conn) = builder.handshake::<_, Bytes>(tcp).await else {
                    return;
                };
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    let bulk = req.uri().path().starts_with("/bulk");
                    let length = if bulk { bulk_bytes } else { BODY.len() };
                    let response = http::Response::builder()
                        .status(200)
                        .header("server", "pier")
                        .header("date", "Tue, 24 Nov 2026 04:00:00 GMT")
                        .header("content-length", length)
                        .body(())
                        .expect("a valid head");
                    let Ok(mut send) = respond.send_response(response, false) else {
                        continue;
                    };
                    if !bulk {
                        let _ = send.send_data(Bytes::from_static(BODY), true);
                        continue;
                    }
                    let chunk = chunk.clone();
                    tokio::task::spawn_local(async move {
                        let mut left = bulk_bytes;
                        while left > 0 {
                            send.reserve_capacity(left.min(CHUNK));
                            let Some(Ok(n)) = poll_fn(|cx| send.poll_capacity(cx)).await else {
                                return;
                            };
                            let n = n.min(left);
                            left -= n;
                            if send.send_data(chunk.slice(..n), left == 0).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
        }
    });
}
