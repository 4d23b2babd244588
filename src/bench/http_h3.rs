//! `pier bench http --h3`: HTTP/3 load in the manner of h2load's `--h3`, each
//! of the `-c` connections carrying `--streams` requests at once, on the same
//! slots, watchdog, schedule and statistics as HTTP/1.1 and HTTP/2 runs, so
//! the report, JSON and sweeps are the same.
//!
//! The client is the `h3` crate over `quinn` (the tree's quinn-proto, rustls
//! and aws-lc-rs), not Pier's own HTTP/3 codec, so a run cannot share the
//! server's blind spots. Each connection has its own UDP socket (its own
//! quinn endpoint): the server's `SO_REUSEPORT` hash then spreads connections
//! over its workers as it spreads real clients. Bytes are counted as UDP
//! payload (QUIC packets, encryption and acknowledgements included), read
//! from quinn's connection statistics after each response and every MiB of a
//! body, so a run cut at its deadline still counts nearly all of them.

use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::bail;
use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, StreamError};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{TransportErrorCode, VarInt};
use tokio::time::Instant;

use super::client_tls::untrusted_hint;
use super::http_conn::{Slot, ThreadCtx};
use super::http_plan::HttpPlan;
use super::multiplexed::{
    after_connect, connection_ended, connection_lifetime, record_first_byte, stream_loop,
    ConnectAttempt, StreamFailure, StreamLoop, PROGRESS_EVERY,
};
use super::stats::FailureKind;
use super::stream_request::StreamRequest;
use crate::deadline;

/// Receive window per stream: large, so the server is measured rather than
/// the client's flow-control updates (as `--h2` does).
const STREAM_WINDOW: u32 = 8 * 1024 * 1024;
/// Receive window of a connection: every stream's window at once for up to
/// four streams, beyond which streams share it.
const CONNECTION_WINDOW: u32 = 4 * STREAM_WINDOW;
/// UDP receive and send buffers asked of the kernel (it grants up to its
/// `rmem_max`/`wmem_max`): a bulk transfer at a gigabyte a second arrives
/// faster than the client thread may read in a scheduling gap.
const SOCKET_BUFFER: usize = 8 * 1024 * 1024;

/// The request sender of one HTTP/3 connection.
type H3Send = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Why a QUIC connection could not be made, with the report's kind for it.
struct QuicConnectError {
    kind: FailureKind,
    text: String,
}

/// The QUIC client settings of a run: the plan's TLS client (ALPN `h3`) and
/// transport windows large enough that the server sets the pace.
fn client_config(plan: &HttpPlan) -> Result<quinn::ClientConfig, String> {
    let tls = plan
        .tls
        .as_ref()
        .ok_or_else(|| "--h3 needs an https:// URL".to_string())?;
    let crypto = QuicClientConfig::try_from(tls.config()?)
        .map_err(|e| format!("the TLS client cannot run QUIC: {e}"))?;
    let mut transport = quinn::TransportConfig::default();
    transport
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW))
        // The server opens its control and QPACK streams, and no request
        // streams: none of those is bidirectional.
        .max_concurrent_bidi_streams(VarInt::from_u32(0));
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// A client endpoint on a UDP socket of its own, of the target's address
/// family, with large socket buffers.
fn client_endpoint(target: SocketAddr) -> std::io::Result<quinn::Endpoint> {
    use socket2::{Domain, Protocol, Socket, Type};
    let local: SocketAddr = if target.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: the kernel caps them, and a smaller buffer still works.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&local.into())?;
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket.into(),
        Arc::new(quinn::TokioRuntime),
    )
}

/// The server's name as quinn wants it (SNI and verification).
fn server_name(plan: &HttpPlan) -> String {
    plan.tls.as_ref().map_or_else(
        || plan.target.host.clone(),
        |t| t.server_name.to_str().into_owned(),
    )
}

/// Connects and completes the QUIC handshake (with TLS, ALPN `h3`).
async fn connect_quic(
    endpoint: &quinn::Endpoint,
    config: &quinn::ClientConfig,
    plan: &HttpPlan,
) -> Result<quinn::Connection, QuicConnectError> {
    let connecting = endpoint
        .connect_with(config.clone(), plan.target.addr, &server_name(plan))
        .map_err(|e| QuicConnectError {
            kind: FailureKind::Connect,
            text: e.to_string(),
        })?;
    connecting.await.map_err(|e| QuicConnectError {
        kind: classify_quic(&e),
        text: e.to_string(),
    })
}

/// Whether a QUIC error code is a TLS alert (RFC 9001 §4.8).
fn is_tls_alert(code: TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

/// How a QUIC connection error is counted.
fn classify_quic(e: &quinn::ConnectionError) -> FailureKind {
    use quinn::ConnectionError as E;
    match e {
        E::TransportError(t) if is_tls_alert(t.code) => FailureKind::Tls,
        E::ConnectionClosed(c) if is_tls_alert(c.error_code) => FailureKind::Tls,
        E::TimedOut => FailureKind::Timeout,
        E::ApplicationClosed(_) | E::LocallyClosed => FailureKind::Closed,
        E::TransportError(_) => FailureKind::Malformed,
        _ => FailureKind::Reset,
    }
}

/// How an HTTP/3 connection error is counted.
fn classify_h3_connection(e: &ConnectionError) -> FailureKind {
    match e {
        e if e.is_h3_no_error() => FailureKind::Closed,
        ConnectionError::Timeout { .. } => FailureKind::Timeout,
        ConnectionError::Local { .. } => FailureKind::Malformed,
        _ => FailureKind::Reset,
    }
}

/// What an HTTP/3 stream error means for its stream loop. A stream the
/// server did not process counts as such only on a connection that answered
/// before: a server that refuses everything counts as failing.
fn judge_h3(e: &StreamError, first_byte: &Cell<Option<Instant>>) -> StreamFailure {
    let answered_before = first_byte.get().is_none();
    match e {
        StreamError::RemoteClosing { .. } if answered_before => StreamFailure::Unprocessed,
        StreamError::RemoteTerminate { code, .. }
            if *code == Code::H3_REQUEST_REJECTED && answered_before =>
        {
            StreamFailure::Unprocessed
        }
        StreamError::RemoteTerminate { .. } => StreamFailure::StreamReset,
        StreamError::ConnectionError { 0: c, .. } => {
            StreamFailure::Connection(classify_h3_connection(c))
        }
        StreamError::RemoteClosing { .. } => StreamFailure::Connection(FailureKind::Closed),
        StreamError::StreamError { .. } | StreamError::HeaderTooBig { .. } => {
            StreamFailure::Connection(FailureKind::Malformed)
        }
        _ => StreamFailure::Connection(FailureKind::Reset),
    }
}

/// One connection, handshake and HTTP/3 SETTINGS exchange before the run, so
/// a target without HTTP/3 or a certificate problem is one clear error
/// instead of a report full of failures.
pub(super) fn preflight_h3(plan: &HttpPlan) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = client_config(plan).map_err(|e| anyhow::anyhow!(e))?;
    let url = plan.target.url();
    let addr = plan.target.addr;
    let wait = plan.timeout.max(Duration::from_secs(1));
    rt.block_on(async {
        let endpoint = client_endpoint(addr)?;
        let result = deadline::within(wait, connect_quic(&endpoint, &config, plan)).await;
        let outcome = match result {
            Err(_) => bail!(
                "cannot connect to {url} ({addr}) over QUIC: no answer within {wait:?}; \
                 is HTTP/3 served on UDP port {}?",
                addr.port()
            ),
            Ok(Err(e)) if e.kind == FailureKind::Tls => {
                let refused_h3 = if e.text.contains("no_application_protocol")
                    || e.text.contains("application protocol")
                    || e.text.contains("error 120")
                {
                    ". The server did not agree to HTTP/3: it offers no h3 by ALPN"
                } else {
                    ""
                };
                bail!(
                    "TLS handshake with {url} ({addr}) over QUIC failed: {}{}{refused_h3}",
                    e.text,
                    untrusted_hint(&e.text)
                )
            }
            Ok(Err(e)) if e.kind == FailureKind::Timeout => bail!(
                "cannot connect to {url} ({addr}) over QUIC: no answer within the handshake's \
                 idle timeout; is HTTP/3 served on UDP port {}?",
                addr.port()
            ),
            Ok(Err(e)) => bail!("cannot connect to {url} ({addr}) over QUIC: {}", e.text),
            Ok(Ok(conn)) => {
                let h3 = deadline::within(
                    wait,
                    h3::client::builder()
                        .build::<_, _, Bytes>(h3_quinn::Connection::new(conn.clone())),
                )
                .await;
                conn.close(VarInt::from_u32(0x100), b"");
                match h3 {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => {
                        bail!("{url} ({addr}) answered QUIC but not as HTTP/3: {e}")
                    }
                    Err(_) => {
                        bail!("{url} ({addr}) answered QUIC but not as HTTP/3 within {wait:?}")
                    }
                }
            }
        };
        // Let the CONNECTION_CLOSE leave before the runtime goes.
        let _ = deadline::within(Duration::from_millis(100), endpoint.wait_idle()).await;
        outcome
    })
}

/// A connection's UDP byte counts, read into the thread's statistics as they
/// grow.
struct WireBytes {
    conn: quinn::Connection,
    /// (read, written) counted so far.
    counted: Cell<(u64, u64)>,
}

impl WireBytes {
    fn sync(&self, ctx: &ThreadCtx) {
        let s = self.conn.stats();
        let (rx, tx) = (s.udp_rx.bytes, s.udp_tx.bytes);
        let (seen_rx, seen_tx) = self.counted.replace((rx, tx));
        let mut stats = ctx.stats.borrow_mut();
        stats.bytes_read += rx.saturating_sub(seen_rx);
        stats.bytes_written += tx.saturating_sub(seen_tx);
    }
}

/// Reconnects until the connection's share is done (or the run is over); on
/// each connection, `--streams` stream loops run at once.
pub(super) async fn run_slot_h3(ctx: Rc<ThreadCtx>, slot: Rc<Slot>) {
    let plan = ctx.plan.clone();
    let Some(request) = plan.stream_request.as_ref() else {
        return;
    };
    let setup = client_config(&plan)
        .map_err(std::io::Error::other)
        .and_then(|c| Ok((c, client_endpoint(plan.target.addr)?)));
    let (config, endpoint) = match setup {
        Ok(pair) => pair,
        Err(_) => {
            // No UDP socket (out of descriptors): this connection cannot run.
            // A `-n` share is counted as failed so the run still ends; a timed
            // run counts the one connection.
            let rest = slot.remaining.get();
            slot.take(rest);
            let failed = if plan.requests.is_some() { rest } else { 1 };
            ctx.stats
                .borrow_mut()
                .errors
                .add(FailureKind::Connect, failed);
            ctx.slot_ended.notify_one();
            return;
        }
    };
    let mut failures = 0u32;
    while slot.remaining.get() > 0 && !ctx.expired(Instant::now()) {
        slot.busy_since.set(Some(Instant::now()));
        let connect_start = Instant::now();
        let connected = match connect_quic(&endpoint, &config, &plan).await {
            Ok(conn) => {
                ctx.stats.borrow_mut().record_handshake(false);
                let wire = WireBytes {
                    conn: conn.clone(),
                    counted: Cell::new((0, 0)),
                };
                match h3::client::builder()
                    .build::<_, _, Bytes>(h3_quinn::Connection::new(conn))
                    .await
                {
                    Ok(pair) => Ok((pair, wire)),
                    Err(e) => {
                        wire.sync(&ctx);
                        Err(classify_h3_connection(&e))
                    }
                }
            }
            Err(e) => Err(e.kind),
        };
        let ((mut driver, send), wire) =
            match after_connect(&ctx, &slot, connected, connect_start, &mut failures).await {
                ConnectAttempt::Ready(c) => c,
                ConnectAttempt::Retry => continue,
                ConnectAttempt::GiveUp => break,
            };
        let first_byte = Cell::new(Some(connect_start));
        let waiting = Cell::new(0u64);
        let streams: Vec<StreamLoop<'_>> =
            (0..plan.depth)
                .map(|_| {
                    let send = send.clone();
                    let (ctx, slot, first_byte, wire) = (&*ctx, &*slot, &first_byte, &wire);
                    Box::pin(stream_loop(
                        ctx,
                        slot,
                        &waiting,
                        move || {
                            let mut send = send.clone();
                            async move {
                                one_request(&mut send, request, first_byte, wire, ctx, slot).await
                            }
                        },
                        |e: &StreamError| judge_h3(e, first_byte),
                    )) as StreamLoop<'_>
                })
                .collect();
        drop(send);
        let ended = connection_lifetime(
            |cx| match driver.poll_close(cx) {
                Poll::Ready(e) if e.is_h3_no_error() => Poll::Ready(Ok(())),
                Poll::Ready(e) => Poll::Ready(Err(classify_h3_connection(&e))),
                Poll::Pending => Poll::Pending,
            },
            streams,
        )
        .await;
        wire.sync(&ctx);
        wire.conn.close(VarInt::from_u32(0x100), b"");
        connection_ended(&ctx, &slot, &waiting, ended);
    }
    ctx.slot_ended.notify_one();
}

/// Sends the request and reads its response to the end; its status.
async fn one_request(
    send: &mut H3Send,
    request: &StreamRequest,
    first_byte: &Cell<Option<Instant>>,
    wire: &WireBytes,
    ctx: &ThreadCtx,
    slot: &Slot,
) -> Result<u16, StreamError> {
    let mut stream = send.send_request(request.head.clone()).await?;
    if !request.body.is_empty() {
        stream.send_data(request.body.clone()).await?;
    }
    stream.finish().await?;
    let response = stream.recv_response().await?;
    record_first_byte(ctx, first_byte);
    let status = response.status().as_u16();
    let mut unsynced = 0usize;
    while let Some(mut data) = stream.recv_data().await? {
        let n = data.remaining();
        data.advance(n);
        unsynced += n;
        if unsynced >= PROGRESS_EVERY {
            wire.sync(ctx);
            slot.progressed();
            unsynced = 0;
        }
    }
    stream.recv_trailers().await?;
    wire.sync(ctx);
    Ok(status)
}
