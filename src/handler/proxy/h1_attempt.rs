//! Phases 4 to 6 on an HTTP/1 server, for the attempts loop
//! ([`super::attempts`]): a pooled connection or a new one, the request head
//! and body (stopping when the upstream answers early), the response head
//! (interim heads relayed to the client on the way).

use std::time::Instant;

use super::attempts::{Attempt, ExchangeBufs, UpstreamExchange};
use super::request_info::RequestInfo;
use super::response_head::read_response_head;
use super::send::{send_request, Answer, BodySend, SendError};
use super::{ErrorKind, ProxyError};
use crate::http::Session;
use crate::upstream::connect::connect_upstream;
use crate::upstream::group::UpstreamGroup;
use crate::upstream::group_state::GroupState;
use crate::upstream::pool::Pooled;
use crate::upstream::request_head::Http1Head;
use crate::upstream::retry::FailedExchange;

/// An HTTP/1 upstream connection after its server's final head.
pub struct Http1Answer {
    /// The connection, positioned after the head, with its timer.
    pub(super) up: Pooled,
    /// The whole request was sent (not cut short by an early answer).
    pub(super) complete: bool,
}

/// One request's exchange with the servers of an HTTP/1 group.
pub(super) struct Http1Attempt<'b, 'h> {
    pub(super) group: &'h UpstreamGroup,
    pub(super) state: &'h GroupState,
    pub(super) info: &'b RequestInfo,
    /// The head, the upstream's bytes and its parsed head.
    pub(super) bufs: &'b mut ExchangeBufs,
    /// The request body on its way, across attempts.
    pub(super) body: &'b mut BodySend,
}

impl<'h> UpstreamExchange<'h> for Http1Attempt<'_, 'h> {
    type Answer = Http1Answer;

    type Head<'a>
        = Http1Head<'a>
    where
        Self: 'a;

    fn head(&mut self) -> Http1Head<'_> {
        Http1Head::new(&mut self.bufs.up_head)
    }

    async fn attempt(
        &mut self,
        session: &mut dyn Session<'h>,
        server: usize,
        fresh_only: bool,
        now: Instant,
    ) -> Attempt<Http1Answer> {
        let ctx = session.worker();
        let http = &ctx.config.http;
        let (group, info, bufs) = (self.group, self.info, &mut *self.bufs);
        // Phase 4: connect.
        let (mut up, reused) =
            match connect_upstream(group, self.state, server, fresh_only, now).await {
                Ok(c) => c,
                Err(e) => return Attempt::ConnectFailed(e),
            };

        // Phase 5: send the head and body, watching for an early answer.
        bufs.up_read.clear();
        // Interim heads from the upstream: once one came (and went on to the
        // client), the request is never sent again.
        let mut interim = 0;
        let sent = send_request(
            session,
            &mut up.stream,
            &bufs.up_head,
            &mut bufs.out,
            self.body,
            group.read_timeout,
            Answer {
                buf: &mut bufs.up_read,
                head: &mut bufs.resp,
                method: info.method,
                limits: &http.limits,
                interim: &mut interim,
            },
        )
        .await;
        // Whether the whole request went out; if not, the upstream answered
        // first, or a write failed, perhaps because the upstream answered and
        // closed without taking the whole body: either way its answer is read.
        let (replayable, complete, write_error) = match sent {
            Ok(s) => (s.replayable, !s.answered_early, None),
            Err(SendError::Downstream) => return Attempt::Downstream,
            Err(SendError::Upstream(e, replayable)) => (replayable, false, Some(e)),
        };

        // Phase 6: the response head, unless the write timed out.
        let write = write_error.as_ref().map(|e| e.kind);
        let (head, head_error) = if write == Some(ErrorKind::Timeout) {
            (None, None)
        } else {
            match read_response_head(
                session,
                &mut up,
                &mut bufs.up_read,
                &mut bufs.resp,
                &mut interim,
                info,
                group,
                http,
                &ctx.clock,
            )
            .await
            {
                Ok(()) => {
                    return Attempt::Answered {
                        upstream: Http1Answer { up, complete },
                        status: bufs.resp.status,
                        head_at: ctx.clock.now().into_std(),
                    }
                }
                Err(h) => (Some((h.error.kind, h.nothing_received)), Some(h.error)),
            }
        };
        let failure = FailedExchange {
            reused,
            replayable,
            interim: interim > 0,
            write,
            head,
        };
        // Unanswered, the failed write is what went wrong first; otherwise
        // what the upstream sent (or did not send in time) is.
        let error = if failure.unanswered() {
            write_error.or(head_error)
        } else {
            head_error.or(write_error)
        };
        let error =
            error.unwrap_or_else(|| ProxyError::upstream(ErrorKind::Reset, "exchange failed"));
        Attempt::Failed { failure, error }
    }
}
