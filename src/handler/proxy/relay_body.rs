//! Phase 8, relaying the response body: decoded from the upstream's framing,
//! re-framed for the client, with backpressure; the upstream connection goes
//! back to the pool when the exchange ended cleanly.

use super::request_info::RequestInfo;
use super::rewrite_response::encode_response_head;
use super::tunnel::tunnel;
use super::ProxyRoute;
use crate::deadline;
use crate::http1::body::BodyDecoder;
use crate::http1::client::ClientStream;
use crate::http1::parse::{BodyKind, Method, Version};
use crate::http1::response::{ResponseBody, ResponseHead};
use crate::http1::write::{self, BodyFraming, ConnectionHeader};
use crate::server::h1::{Downstream, Exit, Http1Conn, WRITE_HIGH_WATER};

/// Response data at least this large is written straight from the upstream buffer.
pub(super) const DIRECT_WRITE_MIN: usize = 16 * 1024;

/// Upstream read buffer capacity while streaming a body.
pub(super) const UPSTREAM_READ_BUF: usize = 32 * 1024;

/// Phases 6-8: writes the downstream head, streams the body, returns the
/// upstream connection to the pool when the exchange ended cleanly.
#[allow(clippy::too_many_arguments)]
pub(super) async fn relay_response<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    route: &ProxyRoute,
    info: &RequestInfo,
    server: usize,
    mut up: ClientStream,
    up_read: &mut Vec<u8>,
    resp: &ResponseHead,
    request_complete: bool,
    head_at: std::time::Instant,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    let group = &*route.group;
    let state = &ctx.proxy.groups[group.index];
    let addr = group.servers[server].addr;

    if resp.status == 101 {
        return tunnel(conn, group, server, up, up_read, resp).await;
    }

    let http11 = info.version == Version::Http11;
    let (framing, mut decoder, chunked_out) = match resp.body {
        ResponseBody::None => (BodyFraming::None, None, false),
        ResponseBody::Length(n) => (
            BodyFraming::Length(n),
            Some(BodyDecoder::new(BodyKind::Length(n))),
            false,
        ),
        ResponseBody::Chunked if http11 => (
            BodyFraming::Chunked,
            Some(BodyDecoder::new(BodyKind::Chunked)),
            true,
        ),
        ResponseBody::Chunked => (
            BodyFraming::None,
            Some(BodyDecoder::new(BodyKind::Chunked)),
            false,
        ),
        ResponseBody::UntilClose if http11 => {
            (BodyFraming::Chunked, Some(BodyDecoder::until_close()), true)
        }
        ResponseBody::UntilClose => (BodyFraming::None, Some(BodyDecoder::until_close()), false),
    };
    // Without a length or chunks, only closing can end the body for this client.
    let delimited = framing != BodyFraming::None || resp.body == ResponseBody::None;
    let keep_alive = info.keep_alive && delimited && !ctx.draining.get();
    let keep_length =
        resp.body == ResponseBody::None && (info.method == Method::Head || resp.status == 304);
    {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let mut date = ctx.date.borrow_mut();
        encode_response_head(
            &mut b.write,
            resp,
            up_read,
            date.get(),
            framing,
            ConnectionHeader::choose(keep_alive, info.version),
            keep_length,
            false,
            conn.response_filters
                .as_deref()
                .map(|f| (f, &conn.request_id)),
        );
    }

    let mut pos = resp.head_len;
    let mut clean = true;
    // Whether the body took a read after the head (then the connection's idle
    // time starts later than `head_at`).
    let mut read_more = false;
    if let Some(decoder) = decoder.as_mut() {
        loop {
            let step = match decoder.decode(&up_read[pos..]) {
                Ok(s) => s,
                Err(e) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, error = %e, "upstream response body malformed");
                    return Err(Exit::Broken);
                }
            };
            pos += step.consumed;
            if !step.data.is_empty() {
                emit(conn, step.data, chunked_out).await?;
            }
            if step.done {
                break;
            }
            if step.consumed > 0 && pos < up_read.len() {
                // More chunks already buffered: decode them before reading again.
                continue;
            }
            if pos >= up_read.len() {
                up_read.clear();
                pos = 0;
            } else if pos > 0 {
                up_read.drain(..pos);
                pos = 0;
            }
            if up_read.capacity() - up_read.len() < 4096 {
                up_read.reserve(UPSTREAM_READ_BUF);
            }
            // Backpressure: nothing more is read from the upstream until the
            // client has taken what is pending.
            if conn.flush().await.is_err() {
                return Err(Exit::Broken);
            }
            read_more = true;
            match deadline::within(group.read_timeout, up.read_into(up_read)).await {
                Ok(Ok(0)) => {
                    if decoder.finish().is_ok() {
                        clean = false;
                        break;
                    }
                    crate::warn_limited!(upstream = %addr, group = %group.name, "upstream closed inside the response body");
                    return Err(Exit::Broken);
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, error = %e, "upstream failed inside the response body");
                    return Err(Exit::Broken);
                }
                Err(_) => {
                    crate::warn_limited!(upstream = %addr, group = %group.name, "upstream response body stalled (read_timeout)");
                    return Err(Exit::Broken);
                }
            }
        }
    }
    if chunked_out {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        b.write.extend_from_slice(write::LAST_CHUNK);
    }
    // A request cut short by an early answer leaves the upstream connection
    // mid-message: it is not reused. Nor is one of a draining configuration,
    // whose pools are no longer swept.
    let draining = conn.ctx.draining.get();
    if clean && request_complete && resp.keep_alive && pos >= up_read.len() && !draining {
        let idle_since = if read_more {
            std::time::Instant::now()
        } else {
            head_at
        };
        state.pool.checkin(server, up, idle_since);
    }
    Ok(keep_alive)
}

/// Sends response body bytes downstream: through the output buffer when small,
/// straight from the upstream buffer when large (no copy).
pub(super) async fn emit<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    data: &[u8],
    chunked: bool,
) -> Result<(), Exit> {
    let write_timeout = conn.ctx.config.http.write_timeout;
    let b = conn.bufs.as_mut().expect("buffers held while proxying");
    if data.len() < DIRECT_WRITE_MIN || b.write.len() + data.len() <= WRITE_HIGH_WATER {
        if chunked {
            write::write_chunk(&mut b.write, data);
        } else {
            b.write.extend_from_slice(data);
        }
        if b.write.len() >= WRITE_HIGH_WATER && conn.flush().await.is_err() {
            return Err(Exit::Broken);
        }
        return Ok(());
    }
    if chunked {
        write::write_chunk_size(&mut b.write, data.len());
    }
    if conn.flush().await.is_err() {
        return Err(Exit::Broken);
    }
    if deadline::io_within(write_timeout, "write timeout", conn.io.write_all(data))
        .await
        .is_err()
    {
        return Err(Exit::Broken);
    }
    conn.ctx.stats.bytes_out.add(data.len() as u64);
    conn.sent += data.len() as u64;
    if chunked {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        b.write.extend_from_slice(b"\r\n");
    }
    Ok(())
}
