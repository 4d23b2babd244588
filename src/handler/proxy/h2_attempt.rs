//! Phases 4 to 6 on an HTTP/2 server (`protocol = "h2"` groups), for the
//! attempts loop ([`super::attempts`]): a stream on a pooled connection or a
//! new one, the request head (as HTTP/2 fields, [`super::h2_request`]), the
//! body streamed within the stream's window, the response head (interim heads
//! relayed to the client on the way).
//!
//! A stream the server refused unprocessed (REFUSED_STREAM, or cut off by a
//! GOAWAY before the server saw it) goes again while none of its body was
//! taken from the client, a few times at most; a `grpc-timeout` that passes
//! ends the call.

use std::time::Instant;

use tracing::debug;

use super::attempts::{Attempt, UpstreamExchange};
use super::error_page::answer_with_page;
use super::h2_exchange::{ExchangeError, H2Exchange, Limits, Upload};
use super::h2_request::{connect_protocol, h2_request};
use super::request_info::RequestInfo;
use super::{ErrorKind, ProxyError, ProxyRoute};
use crate::http::Session;
use crate::http1::parse::BodyKind;
use crate::http2::client::{OpenError, ResponseHead};
use crate::upstream::group_state::GroupState;
use crate::upstream::h2_stream::OpenFailed;
use crate::upstream::request_head::FieldList;
use crate::upstream::retry::FailedExchange;

/// A stream whose server answered with a final head.
pub struct H2Answer {
    /// The stream (holding its place on its connection) and the body still
    /// to relay.
    pub(super) exchange: H2Exchange,
    /// The response head.
    pub(super) head: ResponseHead,
}

/// One request's exchange with the servers of an HTTP/2 group.
pub(super) struct H2Attempt<'b, 'h> {
    pub(super) route: &'h ProxyRoute,
    pub(super) state: &'h GroupState,
    pub(super) info: &'b RequestInfo,
    pub(super) limits: Limits,
    /// The head as phase 3 writes it.
    pub(super) head: &'b mut FieldList,
    /// Times the request was refused unprocessed and sent again.
    pub(super) refusals: u32,
}

/// Times one request is sent again after a refusal (REFUSED_STREAM, a
/// GOAWAY before the server saw it, a pooled connection that took no
/// stream); past it, the refusal is a failure like any other, so a server
/// that refuses everything is not asked without end.
const MAX_REFUSALS: u32 = 4;

impl<'h> UpstreamExchange<'h> for H2Attempt<'_, 'h> {
    type Answer = H2Answer;

    type Head<'a>
        = &'a mut FieldList
    where
        Self: 'a;

    fn head(&mut self) -> &mut FieldList {
        self.head
    }

    async fn attempt(
        &mut self,
        session: &mut dyn Session<'h>,
        server: usize,
        fresh_only: bool,
        now: Instant,
    ) -> Attempt<H2Answer> {
        let group = &*self.route.group;
        let protocol = self
            .info
            .extended_connect
            .then(|| connect_protocol(&session.request()).to_vec());
        let secure = group.tls.is_some();
        let request = match h2_request(self.head, &session.request(), secure, protocol.as_deref()) {
            Ok(r) => r,
            Err(e) => {
                debug!(group = %group.name, peer = %session.request().peer(), cause = e.0, "request cannot be sent over HTTP/2");
                answer_with_page(session, &self.route.error_pages, 400, None);
                return Attempt::Downstream;
            }
        };

        // Phase 4: a stream on a pooled connection, or on a new one.
        let pooled = if fresh_only {
            None
        } else {
            self.state.h2.checkout(server, now)
        };
        let (lease, reused) =
            pooled.unwrap_or_else(|| (self.state.h2.connect(&self.route.group, server), false));

        // Phase 5 and 6: the head, the body, the response head.
        let no_body = self.info.body == BodyKind::None;
        // A connection whose streams are all taken by long calls gives no
        // slot: waiting for one is bounded as any wait for the server is.
        let mut fields = request.fields();
        let opened = match request.protocol {
            Some(protocol) => {
                let open = lease.open_tunnel(
                    protocol,
                    request.scheme,
                    request.authority,
                    request.path,
                    &mut fields,
                );
                crate::deadline::within(self.limits.idle, open).await
            }
            None => {
                let open = lease.open(
                    request.method,
                    request.scheme,
                    request.authority,
                    request.path,
                    &mut fields,
                    no_body,
                );
                crate::deadline::within(self.limits.idle, open).await
            }
        };
        let Ok(opened) = opened else {
            return Attempt::ConnectFailed(ProxyError::upstream(
                ErrorKind::Timeout,
                "no HTTP/2 stream of the server's connections came free in time",
            ));
        };
        let stream = match opened {
            Ok(stream) => stream,
            Err(OpenFailed::Connect(e)) => return Attempt::ConnectFailed(e),
            // The origin announced a SETTINGS_MAX_HEADER_LIST_SIZE the
            // request head is past: no server of the group is tried with
            // it, and the client hears that its head is too large.
            Err(OpenFailed::NotOpened(OpenError::HeadTooLarge)) => {
                debug!(group = %group.name, peer = %session.request().peer(), "request head past the origin's SETTINGS_MAX_HEADER_LIST_SIZE");
                answer_with_page(session, &self.route.error_pages, 431, None);
                return Attempt::Downstream;
            }
            // The server does not take extended CONNECT (RFC 8441 §3): an
            // upgrade cannot reach it, and a group's servers are alike.
            Err(OpenFailed::NotOpened(OpenError::NoExtendedConnect)) => {
                debug!(group = %group.name, peer = %session.request().peer(), "the HTTP/2 server does not offer extended CONNECT: 501");
                answer_with_page(session, &self.route.error_pages, 501, None);
                return Attempt::Downstream;
            }
            // Nothing was sent: the request goes again on a fresh
            // connection (this pooled one is going away or ended).
            Err(OpenFailed::NotOpened(e)) if reused && self.refusals < MAX_REFUSALS => {
                self.refusals += 1;
                debug!(group = %group.name, reason = ?e, "no stream on the pooled HTTP/2 connection");
                return Attempt::Refused;
            }
            // A fresh connection that took no stream (the server closed it
            // or sent GOAWAY at once), or one refusal too many, counts as a
            // failed connect: nothing was sent.
            Err(OpenFailed::NotOpened(e)) => {
                return Attempt::ConnectFailed(ProxyError::upstream(
                    ErrorKind::Connect,
                    format!("HTTP/2 connection took no stream ({e:?})"),
                ))
            }
        };
        let mut exchange = H2Exchange::new(stream, Upload::new(no_body));
        let error = match exchange.head(session, self.limits).await {
            Ok(head) => {
                return Attempt::Answered {
                    status: head.status(),
                    head_at: Instant::now(),
                    upstream: H2Answer { exchange, head },
                }
            }
            Err(e) => e,
        };
        let consumed = exchange.upload.consumed;
        // Interim heads came (and went on to the client): the request is not
        // sent again.
        let interim = exchange.interim > 0;
        if !matches!(error, ExchangeError::Upstream(_)) {
            exchange.cancel();
        }
        let error = match error {
            // The client went away or sent a bad body: the driver answers
            // for it, and the upstream hears of it.
            ExchangeError::Downstream => return Attempt::Downstream,
            ExchangeError::DeadlinePassed => {
                return Attempt::Final(ProxyError::upstream(
                    ErrorKind::Timeout,
                    "grpc-timeout passed",
                ))
            }
            ExchangeError::Stalled => {
                ProxyError::upstream(ErrorKind::Timeout, "no response head in time")
            }
            ExchangeError::TooManyInterim => {
                ProxyError::upstream(ErrorKind::Malformed, super::interim::InterimError::TooMany)
            }
            ExchangeError::Upstream(e) => {
                if e.refused() && !consumed && !interim && self.refusals < MAX_REFUSALS {
                    self.refusals += 1;
                    // Not processed (RFC 9113 §8.7): safe to send again, on
                    // the pool's other connections or a new one.
                    return Attempt::Refused;
                }
                ProxyError::upstream(ErrorKind::Reset, format!("HTTP/2: {e}"))
            }
        };
        let timed_out = error.kind == ErrorKind::Timeout;
        Attempt::Failed {
            failure: FailedExchange {
                reused,
                replayable: !consumed,
                interim,
                write: None,
                head: Some((error.kind, !timed_out)),
            },
            error,
        }
    }
}
