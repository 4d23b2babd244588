//! Phase 6, reading the response head within the group's response timeout,
//! interim 1xx heads relayed to the client as they come ([`super::interim`]).
//!
//! The timeout runs on the connection's own timer ([`Pooled::timer`]), which
//! stays armed across its keep-alive exchanges: a response that has to be
//! waited for moves a deadline instead of inserting and removing a timer, and
//! the deadline is taken from the worker's wake-up clock, which the driver
//! has read in this wake-up already.

use std::future::{poll_fn, Future};
use std::task::Poll;

use super::interim::relay_interim;
use super::request_info::RequestInfo;
use super::{ErrorKind, ProxyError};
use crate::deadline::{DeadlinePassed, WakeClock};
use crate::http::Session;
use crate::http1::response::ParsedResponseHead;
use crate::http1::HeaderLines;
use crate::upstream::group::UpstreamGroup;
use crate::upstream::pool::Pooled;
use crate::worker::READ_BUF;

/// How reading a response head failed.
pub(super) struct HeadError {
    pub(super) error: ProxyError,
    /// No byte of a response arrived (so a retry cannot duplicate a response).
    pub(super) nothing_received: bool,
}

/// Reads the upstream response head into `buf`, relaying interim 1xx heads
/// other than 101 to the client through `session` (`interim` counts those
/// that came, across the exchange). After a wait, `clock` is told the work woke, so its
/// next reading is fresh.
#[allow(clippy::too_many_arguments)]
pub(super) async fn read_response_head(
    session: &mut dyn Session<'_>,
    up: &mut Pooled,
    buf: &mut Vec<u8>,
    resp: &mut ParsedResponseHead,
    interim: &mut u32,
    info: &RequestInfo,
    group: &UpstreamGroup,
    http: &crate::config::HttpConfig,
    clock: &WakeClock,
) -> Result<(), HeadError> {
    // Fixed at the first wait, `response_timeout` from then.
    let mut deadline = None;
    // Bytes may be there already: an answer that came while the request was sent.
    let mut received = !buf.is_empty() || *interim > 0;
    loop {
        let relayed = *interim;
        match relay_interim(session, buf, &http.limits, info.method, resp, interim) {
            Ok(complete) => {
                if !complete {
                    // Read more, once what was relayed is on its way (a
                    // client gone shows when the answer is given).
                    if *interim > relayed {
                        let _ = poll_fn(|cx| session.poll_flush_body(cx)).await;
                    }
                } else if resp.status == 101 && !info.upgrade {
                    return Err(HeadError {
                        error: ProxyError::upstream(
                            ErrorKind::Malformed,
                            "101 to a request that did not ask to upgrade",
                        ),
                        nothing_received: false,
                    });
                } else if resp.status == 101 && !accepted(info, resp, buf) {
                    return Err(HeadError {
                        error: ProxyError::upstream(
                            ErrorKind::Malformed,
                            "101 whose Sec-WebSocket-Accept does not answer the key",
                        ),
                        nothing_received: false,
                    });
                } else {
                    return Ok(());
                }
            }
            Err(e) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Malformed, e),
                    nothing_received: false,
                })
            }
        }
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(READ_BUF);
        }
        match read_within(up, buf, &mut deadline, group, clock).await {
            Ok(Ok(0)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(
                        ErrorKind::Reset,
                        if received {
                            "connection closed inside the response head"
                        } else {
                            "connection closed before a response"
                        },
                    ),
                    nothing_received: !received,
                })
            }
            Ok(Ok(_)) => received = true,
            Ok(Err(e)) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Reset, e),
                    nothing_received: !received,
                })
            }
            Err(_) => {
                return Err(HeadError {
                    error: ProxyError::upstream(ErrorKind::Timeout, "no response head in time"),
                    nothing_received: !received,
                })
            }
        }
    }
}

/// One read of `up` into `buf`, or [`DeadlinePassed`] at `deadline` (fixed
/// now from `clock` if this is the first wait).
async fn read_within(
    up: &mut Pooled,
    buf: &mut Vec<u8>,
    deadline: &mut Option<tokio::time::Instant>,
    group: &UpstreamGroup,
    clock: &WakeClock,
) -> Result<std::io::Result<usize>, DeadlinePassed> {
    let Pooled { stream, timer } = up;
    let mut read = std::pin::pin!(stream.read_into(buf));
    let mut waited = false;
    let r = poll_fn(|cx| {
        if let Poll::Ready(r) = read.as_mut().poll(cx) {
            return Poll::Ready(Ok(r));
        }
        waited = true;
        let at = *deadline.get_or_insert_with(|| clock.now() + group.response_timeout);
        timer.poll_passed(cx, at).map(|()| Err(DeadlinePassed))
    })
    .await;
    if waited {
        clock.woke();
    }
    r
}

/// Whether a 101 answers the WebSocket key the proxy made for the request,
/// when it made one (RFC 6455 §4.1: a client fails a handshake whose
/// accept value is wrong; here the proxy is that client).
fn accepted(info: &RequestInfo, resp: &ParsedResponseHead, buf: &[u8]) -> bool {
    info.websocket_key.is_none_or(|key| {
        resp.header(buf, "sec-websocket-accept")
            .is_some_and(|a| key.accepts(a))
    })
}
