//! The one dispatch after accept: PROXY protocol header, TLS handshake and
//! ALPN, then the HTTP/1 or HTTP/2 driver or the TCP stream relay.

use std::io;
use std::rc::Rc;
use std::time::Duration;

use tracing::debug;

use super::h1::serve_http1;
use super::h2::serve_h2;
use super::prior_knowledge::{close_invalid_preface, plain_opening, PlainOpening};
use super::transport::{Downstream, Plain, Tls};
use crate::config::ListenerConfig;
use crate::deadline;
use crate::observe::metrics::TlsFailure;
use crate::proxy_protocol::receive::receive_proxy_header;
use crate::stream_proxy::{self, TlsInfo};
use crate::tls::stream::ReadAhead;
use crate::worker::WorkerCtx;

/// The steps after accept in order: PROXY protocol header, TLS handshake, then
/// HTTP or stream forwarding. A drain does not cut the first two short: the
/// connection was accepted, so its client (or balancer) expects an answer, and
/// both steps are bounded by the handshake timeout.
pub(super) async fn serve_accepted(
    ctx: &Rc<WorkerCtx>,
    lc: &ListenerConfig,
    index: usize,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    mut stream: tokio::net::TcpStream,
    mut peer: std::net::SocketAddr,
) {
    let handshake_timeout = lc
        .tls
        .as_ref()
        .map_or(Duration::from_secs(10), |t| t.handshake_timeout);
    // The PROXY header and the TLS handshake are not cut short by a drain: the
    // client has sent no request yet and would see its first one fail. Both are
    // bounded by `handshake_timeout`, and the request that follows is answered
    // with `Connection: close`.
    let trusted = lc
        .client_address
        .trusts_any()
        .then_some(&*lc.client_address);
    // From a peer the listener does not trust, no PROXY header is expected:
    // what it sends is read as HTTP (or TLS) from its first byte.
    if lc.accept_proxy_protocol && lc.client_address.accepts_proxy_header_from(peer.ip()) {
        let header = receive_proxy_header(&mut stream, handshake_timeout).await;
        match header {
            Ok(Some(source)) => peer = source,
            Ok(None) => {}
            Err(e) => {
                debug!(%peer, error = %e, "PROXY protocol header refused; closing");
                return;
            }
        }
    }
    let local = stream.local_addr().unwrap_or(lc.addr);
    let Some(acceptor) = acceptor else {
        match &lc.tcp {
            Some(fwd) => {
                let state = &ctx.upstreams.groups[fwd.group.index];
                let rejected = &ctx.stats.upstream_rejected;
                stream_proxy::relay_stream(state, rejected, fwd, stream, peer, local, None).await
            }
            None if lc.http2 => match plain_opening(&stream, handshake_timeout).await {
                PlainOpening::H2 => {
                    serve_h2(
                        Plain::new(stream),
                        ctx.clone(),
                        peer,
                        index,
                        trusted.map(|_| lc.client_address.clone()),
                    )
                    .await
                }
                PlainOpening::Http1 => {
                    serve_http1(Plain::new(stream), ctx, peer, index, trusted).await
                }
                PlainOpening::Neither => {
                    debug!(%peer, "neither an HTTP/1 request nor the HTTP/2 preface; closing");
                    close_invalid_preface(stream).await
                }
            },
            None => serve_http1(Plain::new(stream), ctx, peer, index, trusted).await,
        }
        return;
    };
    // One deadline for the first bytes and the handshake together.
    let mut handshake_deadline = deadline::Deadline::after(handshake_timeout);
    let mut stream = ReadAhead::new(stream);
    if lc.tcp.is_none() {
        let first = handshake_deadline.run(stream.read_first()).await;
        if first.is_ok_and(|r| r.is_ok_and(crate::tls::plain_http::is_plain_http)) {
            debug!(%peer, "plain HTTP request on a TLS port; answering 400");
            ctx.stats.tls_failure(TlsFailure::PlainHttp);
            crate::tls::plain_http::answer_plain_http(&mut stream).await;
            return;
        }
    }
    let handshake = handshake_deadline.run(acceptor.accept(stream)).await;
    count_handshake(ctx, &handshake);
    if let Ok(Ok(tls)) = &handshake {
        // A TLS-ALPN-01 validation ends with its handshake (RFC 8737 3).
        if tls.get_ref().1.alpn_protocol() == Some(crate::tls::acme::ACME_TLS_ALPN) {
            debug!(%peer, "ACME TLS-ALPN-01 validation handshake answered");
            return;
        }
    }
    match handshake {
        Ok(Ok(tls)) => match &lc.tcp {
            Some(fwd) => {
                let session = tls.get_ref().1;
                if let Some(subject) = session
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(crate::tls::subject_of)
                {
                    debug!(%peer, subject, "TLS client certificate verified");
                }
                let info = TlsInfo {
                    alpn: session.alpn_protocol().map(<[u8]>::to_vec),
                    sni: session.server_name().map(str::to_string),
                };
                let state = &ctx.upstreams.groups[fwd.group.index];
                let rejected = &ctx.stats.upstream_rejected;
                stream_proxy::relay_stream(state, rejected, fwd, tls, peer, local, Some(info)).await
            }
            None => {
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let tls = Tls::new(tls);
                if let Some(subject) = tls.peer_subject() {
                    debug!(%peer, subject, "TLS client certificate verified");
                }
                if h2 {
                    serve_h2(
                        tls,
                        ctx.clone(),
                        peer,
                        index,
                        trusted.map(|_| lc.client_address.clone()),
                    )
                    .await
                } else {
                    serve_http1(tls, ctx, peer, index, trusted).await
                }
            }
        },
        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}

/// Counts a finished handshake as full, resumed or failed (a timeout is a failure).
fn count_handshake<T>(
    ctx: &WorkerCtx,
    handshake: &Result<io::Result<tokio_rustls::server::TlsStream<T>>, deadline::DeadlinePassed>,
) {
    let stats = &ctx.stats;
    match handshake {
        Ok(Ok(tls)) => {
            let session = tls.get_ref().1;
            stats.tls_handshake(
                session
                    .protocol_version()
                    .and_then(crate::tls::names::protocol_name),
                session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            )
        }
        Ok(Err(e)) => stats.tls_failure(TlsFailure::of(e)),
        Err(_) => stats.tls_failure(TlsFailure::Timeout),
    }
}
