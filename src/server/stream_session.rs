//! What an HTTP/2 and an HTTP/3 stream keep alike as a session: the request
//! body as the connection hands it over (a piece at a time, under the body
//! limit and the read timeout), the answer's progress (its promised length,
//! a pushed body, the bytes queued, the write timeout), the request view's last steps and the access-log line. Each
//! driver keeps its own framing and flow control, and its connection's
//! table of streams.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;

use crate::http::client_address::ClientAddress;
use crate::http::{BodyReadError, OwnedField, RequestView, Session};
use crate::observe::access_log::{Entry, TlsFields, WorkerLog};

/// The request body of a stream as the connection delivered it: the piece
/// taken last, how much came in all, its end and trailers.
pub(crate) struct ReceivedBody {
    /// Bytes taken and not yet used: `chunk[pos..]`.
    chunk: Vec<u8>,
    pos: usize,
    received: u64,
    /// The body ended (or there is none).
    pub(crate) done: bool,
    /// The request's trailers, once the body ended with them.
    trailers: Option<Vec<OwnedField>>,
    /// Runs while a read waits for the client: the body read timeout.
    stall: Option<Pin<Box<Sleep>>>,
}

impl ReceivedBody {
    /// A body still to come, or (`done`) none.
    pub(crate) fn new(done: bool) -> Self {
        ReceivedBody {
            chunk: Vec::new(),
            pos: 0,
            received: 0,
            done,
            trailers: None,
            stall: None,
        }
    }

    /// How many bytes are there to use, or 0 once the body is complete;
    /// `None` while it waits for more.
    pub(crate) fn ready(&self) -> Option<usize> {
        if self.pos < self.chunk.len() {
            return Some(self.chunk.len() - self.pos);
        }
        self.done.then_some(0)
    }

    /// Takes the bytes the connection holds for the stream (leaving it an
    /// empty buffer to fill); more than `max` in all is too large.
    pub(crate) fn take(&mut self, held: &mut Vec<u8>, max: u64) -> Result<(), BodyReadError> {
        self.chunk.clear();
        std::mem::swap(&mut self.chunk, held);
        self.pos = 0;
        self.stall = None;
        self.received += self.chunk.len() as u64;
        if self.received > max {
            return Err(BodyReadError::TooLarge);
        }
        Ok(())
    }

    /// The body ended, with `trailers` when it had them.
    pub(crate) fn end(&mut self, trailers: Option<Vec<OwnedField>>) {
        self.trailers = trailers;
        self.done = true;
    }

    /// The body read timeout, from the first wait since bytes last came.
    pub(crate) fn poll_stall(&mut self, cx: &mut Context<'_>, limit: Duration) -> Poll<()> {
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        stall.as_mut().poll(cx)
    }

    /// The bytes taken and not yet used.
    pub(crate) fn chunk(&self) -> &[u8] {
        &self.chunk[self.pos.min(self.chunk.len())..]
    }

    /// Marks up to `n` bytes used; returns how many were.
    pub(crate) fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.chunk.len() - self.pos);
        self.pos += n;
        n
    }

    /// The request's trailer fields, once the body ended with them.
    pub(crate) fn trailers(&self) -> Vec<(&str, &[u8])> {
        let trailers = self.trailers.as_deref().unwrap_or_default();
        trailers.iter().map(OwnedField::pair).collect()
    }
}

/// A body the handler pushes itself ([`Body::Push`]): its progress.
#[derive(Default)]
pub(crate) struct PushedBody {
    /// The answer's body is pushed by the handler.
    pub(crate) active: bool,
    /// It was ended.
    pub(crate) finished: bool,
    /// Counted, not sent: `HEAD`, or a status without a body.
    pub(crate) drop: bool,
    /// Bytes taken so far.
    pub(crate) written: u64,
}

impl PushedBody {
    /// A pushed body starting now; `drop`: its bytes are counted, not sent.
    pub(crate) fn started(drop: bool) -> PushedBody {
        PushedBody {
            active: true,
            finished: false,
            drop,
            written: 0,
        }
    }

    /// Whether the handler left its pushed body unfinished.
    pub(crate) fn unfinished(&self) -> bool {
        self.active && !self.finished
    }
}

/// The progress of a stream's answer after its head.
#[derive(Default)]
pub(crate) struct StreamAnswer {
    /// The body length promised in the head, when one was.
    pub(crate) length: Option<u64>,
    /// A body the handler pushes.
    pub(crate) push: PushedBody,
    /// Body bytes queued for the answer.
    pub(crate) sent: u64,
    /// Runs while a send waits for room: the write timeout.
    write_stall: Option<Pin<Box<Sleep>>>,
}

impl StreamAnswer {
    /// A send waits for room: fails once it waited for `limit` (the write
    /// timeout), so a client that never reads holds a stream for at most
    /// that long.
    pub(crate) fn poll_write_stall(
        &mut self,
        cx: &mut Context<'_>,
        limit: Duration,
    ) -> Poll<io::Error> {
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "write timeout"))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Room was granted (or the wait is no stall of the client's): the write
    /// timeout starts again at the next wait.
    pub(crate) fn no_stall(&mut self) {
        self.write_stall = None;
    }
}

/// Finishes a stream's request view: marked as an extended CONNECT when it
/// was one, and reading the client address from the listener's trusted
/// proxies when it has any.
pub(crate) fn stream_view<'v>(
    view: RequestView<'v>,
    extended_connect: bool,
    client_address: Option<&'v ClientAddress>,
) -> RequestView<'v> {
    let view = if extended_connect {
        view.from_extended_connect()
    } else {
        view
    };
    match client_address {
        Some(trusted) => view.with_client_address(trusted),
        None => view,
    }
}

/// The stream was reset: nothing more is sent on it.
pub struct StreamReset;

/// Answers a request whose body could not be read with its status (413,
/// 400, 408) on the stream, or resets the stream with `reset` when the
/// client went away.
pub(crate) fn answer_body_error<'h, S: Session<'h>>(
    s: &mut S,
    error: BodyReadError,
    reset: impl FnOnce(&mut S),
) -> Result<(), StreamReset> {
    let Some(status) = error.status() else {
        reset(s);
        return Err(StreamReset);
    };
    crate::service::send_status(s, status);
    Ok(())
}

/// Where a stream's access-log line differs by protocol.
pub(crate) struct StreamLine<'f> {
    /// `HTTP/2.0` or `HTTP/3.0`.
    pub(crate) protocol: &'static str,
    /// The stream's number, when it fits the log's field.
    pub(crate) stream: Option<u32>,
    /// Body bytes queued for the answer.
    pub(crate) body_bytes: u64,
    /// From the request's start until its answer was sent.
    pub(crate) took: Duration,
    /// The connection's TLS facts, on TLS.
    pub(crate) tls: Option<TlsFields<'f>>,
}

/// Writes the access-log line of the request `s` answered.
pub(crate) fn log_stream<'h, S: Session<'h>>(log: &WorkerLog, s: &S, line: StreamLine<'_>) {
    let view = s.request();
    let record = s.record();
    log.record(&Entry {
        client: view.client_socket(),
        method: view.method_token(),
        target: view.target(),
        protocol: line.protocol,
        stream: line.stream,
        status: record.status,
        body_bytes: line.body_bytes,
        duration: line.took,
        referer: view.header("referer"),
        user_agent: view.header("user-agent"),
        tls: line.tls,
        upstream: record.upstream.map(|u| u.0),
        upstream_time: record.upstream.map(|u| u.1),
        cache: record.cache,
        trace: record.trace.ids_hex(),
    });
}
