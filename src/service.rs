//! The service step: what every driver does with a request once its head is
//! parsed, in one place (h2o's `h2o_process_request`, Pingora's
//! `process_new_http`). Handlers registered ahead of the routes (ACME HTTP-01)
//! first, then the route; a request no route takes is 404, a declared body
//! over `max_body_bytes` 413; the handler answers through the session; a body
//! that could not be read and a handler that gave no answer are mapped to
//! their status; the request counters and the duration histogram are written;
//! with tracing on, the request's trace begins and its server span ends here.
//!
//! A driver keeps framing, keep-alive, flow control and its log record, and
//! says through [`DriverSession`] the few things that differ by protocol: what
//! becomes of a body nobody reads (HTTP/1 reads it off the connection, HTTP/2
//! leaves it to the stream), how a request it cannot answer in place ends
//! (HTTP/1 answers with an error status and closes), and whether the client
//! gave up meanwhile (an HTTP/2 reset). An HTTP/3 driver implements the same
//! trait and calls [`serve_request`] unchanged.

use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::handler::Handler;
use crate::http::{Body, BodyReadError, ResponseHead, Served, Session};
use crate::http1::parse::BodyKind;
use crate::observe::metrics::{HandlerKind, ROUTE_NONE};
use crate::observe::trace::{ServerFacts, WorkerTracer};

/// What the service step needs of a driver beyond the handler's [`Session`].
#[allow(async_fn_in_trait)]
pub trait DriverSession<'h>: Session<'h> {
    /// How the driver ends a request it cannot answer on the connection
    /// (HTTP/1: an error status, then close).
    type Stop;

    /// Watches for the client giving up on the request while a handler works.
    type Watch: AbandonWatch;

    /// The status answered so far; 0 before an answer.
    fn status(&self) -> u16 {
        self.record().status
    }

    /// Why reading the request body failed, if it did.
    fn body_error(&self) -> Option<BodyReadError> {
        self.record().body_error
    }

    /// How a cache answered the request, on routes with one.
    fn cache_outcome(&self) -> Option<&'static str> {
        self.record().cache
    }

    /// The protocol version as OpenTelemetry names it: `1.0`, `1.1` or `2`.
    fn protocol_version(&self) -> &'static str;

    /// A watch on this request, taken before its handler borrows the session.
    fn watch(&self) -> Self::Watch;

    /// Deals with a body the chosen handler will not read (or that of a
    /// request no route takes) before the answer: HTTP/1 reads and drops it,
    /// so the connection can carry the next request. By default (a
    /// multiplexed stream) it is left to the stream's end.
    async fn skip_unwanted_body(&mut self) -> Result<(), Self::Stop> {
        Ok(())
    }

    /// Refuses a request whose declared body is over `max_body_bytes`, before
    /// any of it is read: with a 413 on the request (the default, as a
    /// multiplexed stream does), or by ending it.
    fn refuse_oversized_body(&mut self) -> Result<(), Self::Stop> {
        send_status(self, 413);
        Ok(())
    }

    /// Answers a request its handler left unanswered because its body could
    /// not be read (413, 400, 408), or ends it (the client went away).
    fn answer_body_error(&mut self, error: BodyReadError) -> Result<(), Self::Stop>;

    /// Sends what the answer left to send (a body after its head), and ends a
    /// pushed body the handler left unfinished so the client cannot take it
    /// for whole.
    async fn finish_answer(&mut self) -> Result<(), Self::Stop>;
}

/// Whether the client gave up on a request (an HTTP/2 stream it reset).
pub trait AbandonWatch {
    /// True once the client gave up; otherwise registers `cx`'s waker to be
    /// woken when it does.
    fn poll_abandoned(&self, cx: &mut Context<'_>) -> bool;
}

/// The watch of a protocol whose requests the client cannot give up on
/// without closing the connection (HTTP/1).
pub struct NeverAbandoned;

impl AbandonWatch for NeverAbandoned {
    fn poll_abandoned(&self, _cx: &mut Context<'_>) -> bool {
        false
    }
}

/// How a request ended, for the driver's log record and its own counters.
pub enum Outcome<Stop> {
    /// Answered, and counted.
    Answered {
        /// Which handler answered (or `NoRoute`, `Error`).
        kind: HandlerKind,
        /// The route's metrics slot; [`ROUTE_NONE`] when none matched.
        route_slot: usize,
        /// From the request's start until its answer was sent.
        took: Duration,
    },
    /// The client gave up before the answer (its handler's work is dropped).
    Abandoned,
    /// The driver ended the request itself; it counts and logs it.
    Stopped(Stop),
}

/// Serves one parsed request on `s`, started at `started`: pre-route
/// handlers, route, handler, status mapping, counters and duration.
pub async fn serve_request<'h, S: DriverSession<'h>>(
    s: &mut S,
    started: Instant,
) -> Outcome<S::Stop> {
    let tracer = begin_trace(s, started);
    let mut route_slot = ROUTE_NONE;
    let outcome = match choose_and_serve(s, &mut route_slot).await {
        Ok(Some(kind)) => finish(s, kind, route_slot, started).await,
        Ok(None) => Outcome::Abandoned,
        Err(stop) => Outcome::Stopped(stop),
    };
    if let Some(t) = tracer {
        end_trace(s, t, route_slot);
    }
    outcome
}

/// Answers a request its driver refused before routing (an HTTP/2 head that
/// is malformed or too large) with `status`, counted as an error.
pub async fn refuse_request<'h, S: DriverSession<'h>>(
    s: &mut S,
    status: u16,
    started: Instant,
) -> Outcome<S::Stop> {
    let tracer = begin_trace(s, started);
    send_status(s, status);
    let outcome = finish(s, HandlerKind::Error, ROUTE_NONE, started).await;
    if let Some(t) = tracer {
        end_trace(s, t, ROUTE_NONE);
    }
    outcome
}

/// Starts the request's trace when tracing is on (with it off, this branch is
/// all a request pays) and returns the worker's tracer.
#[inline(always)]
fn begin_trace<'h, S: DriverSession<'h>>(s: &S, started: Instant) -> Option<&'h WorkerTracer> {
    let tracer = s.worker().tracer.as_ref()?;
    tracer.begin(
        s.trace(),
        &s.request(),
        s.protocol_version(),
        started.into_std(),
    );
    Some(tracer)
}

/// Ends the request's trace: its server span from what the request came to.
fn end_trace<'h, S: DriverSession<'h>>(s: &S, tracer: &WorkerTracer, route_slot: usize) {
    if !s.trace().is_recording() {
        // Neither sampled nor kept for its answer: no span to make.
        return;
    }
    let labels = s.worker().config.routes.labels();
    tracer.end(
        s.trace(),
        &ServerFacts {
            route: labels.get(route_slot).map(String::as_str),
            status: s.status(),
            cache: s.cache_outcome(),
        },
    );
}

/// The handler's answer, or the status that stands for it; `None` when the
/// client gave up first.
async fn choose_and_serve<'h, S: DriverSession<'h>>(
    s: &mut S,
    route_slot: &mut usize,
) -> Result<Option<HandlerKind>, S::Stop> {
    let ctx = s.worker();
    let routes = &ctx.config.routes;
    let (body, pre, route) = {
        let req = s.request();
        let body = req.body_kind();
        let path = req.path();
        // Handlers registered ahead of the routes (ACME HTTP-01 validations)
        // see requests without a body first; one that gives no answer leaves
        // the request to the routes.
        let pre = (body == BodyKind::None && routes.has_pre_routes())
            .then(|| routes.pre_route(req.is_secure(), path))
            .flatten();
        (body, pre, routes.find_route(&req, path))
    };
    if let Some(pre) = pre {
        if !run_handler(s, pre).await {
            return Ok(None);
        }
        if s.responded() {
            return Ok(Some(pre.kind()));
        }
    }
    *route_slot = route.map_or(ROUTE_NONE, |r| r.index);
    let Some(route) = route else {
        if body != BodyKind::None {
            s.skip_unwanted_body().await?;
        }
        send_status(s, 404);
        return Ok(Some(HandlerKind::NoRoute));
    };
    let handler: &'h dyn Handler = &*route.handler;
    if let BodyKind::Length(n) = body {
        if n > ctx.config.http.max_body_bytes {
            s.refuse_oversized_body()?;
            return Ok(Some(handler.kind()));
        }
    }
    if body != BodyKind::None && !handler.reads_body() {
        s.skip_unwanted_body().await?;
    }
    if !run_handler(s, handler).await {
        return Ok(None);
    }
    Ok(Some(handler.kind()))
}

/// Maps a missing answer to its status, counts the request, sends the rest of
/// the answer and times it.
async fn finish<'h, S: DriverSession<'h>>(
    s: &mut S,
    kind: HandlerKind,
    route_slot: usize,
    started: Instant,
) -> Outcome<S::Stop> {
    let ctx = s.worker();
    if !s.responded() {
        match s.body_error() {
            Some(e) => {
                if let Err(stop) = s.answer_body_error(e) {
                    return Outcome::Stopped(stop);
                }
            }
            None => {
                tracing::debug!(peer = %s.request().peer(), "handler gave no answer");
                send_status(s, 500);
            }
        }
    }
    let status = s.status();
    ctx.stats.request(kind, status);
    let finished = s.finish_answer().await;
    let took = ctx.clock.since(started);
    ctx.stats.request_duration(route_slot, status, took);
    match finished {
        Ok(()) => Outcome::Answered {
            kind,
            route_slot,
            took,
        },
        Err(stop) => Outcome::Stopped(stop),
    }
}

/// Lets `handler` answer through `s`; false when the client gave up first.
async fn run_handler<'h, S: DriverSession<'h>>(s: &mut S, handler: &'h dyn Handler) -> bool {
    let watch = s.watch();
    let clock = &s.worker().clock;
    let Served::Pending(mut work) = handler.serve(s) else {
        return true;
    };
    let done = clock
        .track(poll_fn(|cx| {
            if work.as_mut().poll(cx).is_ready() {
                return Poll::Ready(true);
            }
            if watch.poll_abandoned(cx) {
                return Poll::Ready(false);
            }
            Poll::Pending
        }))
        .await;
    clock.woke();
    done
}

/// Answers with the status page of `status` (`404 Not Found\n`).
pub fn send_status<'h, S: Session<'h> + ?Sized>(s: &mut S, status: u16) {
    let fields = [("Content-Type", b"text/plain; charset=utf-8".as_slice())];
    s.send_response(
        &ResponseHead::new(status, &fields),
        Body::Bytes(crate::http::status::status_text(status)),
    );
}
