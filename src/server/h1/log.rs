//! The access-log record of each request: what the line needs is copied out of
//! the read buffer when the request is routed (handlers may consume that
//! buffer), and the line is written once the answer is.

use std::time::Duration;

use tokio::time::Instant;

use super::{Downstream, Exit, Http1Conn};
use crate::http::RequestView;
use crate::http1::parse::Version;
use crate::http1::HeaderLines;
use crate::observe::access_log::{Entry, TlsFields, WorkerLog};

/// What the access log needs of a request, kept across the awaits that answer it.
#[derive(Default)]
pub(super) struct LoggedRequest {
    /// A request is between `begin_log` and its line.
    active: bool,
    started: Option<Instant>,
    /// `sent` plus pending output when the request began.
    out_mark: u64,
    /// Output offset (as `out_mark`) up to which response heads were looked for,
    /// and whether the final (non-1xx) head ended there: the body starts there.
    head_end: u64,
    head_done: bool,
    method: Vec<u8>,
    target: Vec<u8>,
    protocol: &'static str,
    /// Reused across the connection's requests, so logging does not allocate per line.
    referer: Vec<u8>,
    user_agent: Vec<u8>,
    has_referer: bool,
    has_user_agent: bool,
    /// The client address a trusted proxy reported, read with the head.
    client: Option<std::net::SocketAddr>,
}

/// Finds where the response head of the logged request ends in the output not
/// yet sent (`pending`, which starts at offset `sent`), so the log can count body
/// bytes only. Interim 1xx heads (100 Continue) are skipped; a 101 is final, the
/// tunnelled bytes after it being its body. Looked at before each flush, while
/// the head is still in the buffer; a head is a few hundred bytes to scan.
fn note_head(l: &mut LoggedRequest, sent: u64, pending: &[u8]) {
    while !l.head_done {
        let Some(from) = l.head_end.checked_sub(sent) else {
            return;
        };
        let Some(rest) = pending.get(from as usize..) else {
            return;
        };
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            return;
        };
        l.head_end += end as u64 + 4;
        let interim = rest.get(9) == Some(&b'1') && rest.get(9..12) != Some(b"101");
        l.head_done = !interim;
    }
}

impl<D: Downstream> Http1Conn<'_, D> {
    /// Notes where the logged response's head ends before `pending` output is
    /// written out, while the head is still in the buffer.
    pub(super) fn note_log_head(&mut self) {
        if let (Some(l), Some(b)) = (
            self.logged.as_deref_mut().filter(|l| l.active),
            self.bufs.as_ref(),
        ) {
            note_head(l, self.sent, &b.write);
        }
    }

    /// Whether a request's line is begun and not yet written.
    pub(super) fn log_active(&self) -> bool {
        self.logged.as_ref().is_some_and(|l| l.active)
    }

    /// Answers the parsed request, logging it when the access log is on.
    pub(super) async fn handle(&mut self) -> Result<bool, Exit> {
        let ctx = self.ctx;
        // The wake-up's time: requests answered without waiting take one
        // clock read per read of input, not two per request.
        let Some(log) = &ctx.access_log else {
            return self.answer(ctx.clock.now()).await;
        };
        self.begin_log(true);
        // The log line's start time serves the duration metric too: one clock read.
        let started = self
            .logged
            .as_ref()
            .and_then(|l| l.started)
            .unwrap_or_else(|| ctx.clock.now());
        let r = self.answer(started).await;
        // A refused request is logged once its error response is written.
        if !matches!(r, Err(Exit::Reject(_))) && self.record.status != 0 {
            self.end_log(log);
        }
        r
    }

    /// Starts a log line: copies what the line needs out of the read buffer
    /// (`parsed`: a request head is there) and marks the time and output so far.
    pub(super) fn begin_log(&mut self, parsed: bool) {
        let l = self.logged.get_or_insert_with(Box::default);
        l.active = true;
        l.started = Some(self.ctx.clock.now());
        l.method.clear();
        l.target.clear();
        l.referer.clear();
        l.user_agent.clear();
        l.has_referer = false;
        l.has_user_agent = false;
        l.client = None;
        self.record.status = 0;
        self.record.upstream = None;
        self.record.cache = None;
        l.out_mark = self.sent + self.bufs.as_ref().map_or(0, |b| b.write.len() as u64);
        l.head_end = l.out_mark;
        l.head_done = false;
        let Some(b) = self.bufs.as_ref().filter(|_| parsed) else {
            return;
        };
        let req = &b.read[self.rpos..self.rpos + b.head.head_len];
        l.method.extend_from_slice(b.head.method_token(req));
        l.target.extend_from_slice(b.head.target(req));
        l.protocol = match b.head.version {
            Version::Http10 => "HTTP/1.0",
            _ => "HTTP/1.1",
        };
        if let Some(v) = b.head.header(req, "referer") {
            l.referer.extend_from_slice(v);
            l.has_referer = true;
        }
        if let Some(v) = b.head.header(req, "user-agent") {
            l.user_agent.extend_from_slice(v);
            l.has_user_agent = true;
        }
        if let Some(trusted) = self.client_address {
            let view = RequestView::http1(&b.head, req, self.peer, None);
            l.client = Some(trusted.client_socket_of(&view));
        }
    }

    /// Formats the line of the request begun by `begin_log`.
    pub(super) fn end_log(&mut self, log: &WorkerLog) {
        let Some(l) = self.logged.as_mut() else {
            return;
        };
        if !l.active {
            return;
        }
        l.active = false;
        note_head(
            l,
            self.sent,
            self.bufs.as_ref().map_or(&[], |b| &b.write[..]),
        );
        let pending = self.bufs.as_ref().map_or(0, |b| b.write.len() as u64);
        log.record(&Entry {
            client: l.client.unwrap_or(self.peer),
            method: &l.method,
            target: &l.target,
            protocol: l.protocol,
            stream: None,
            status: self.record.status,
            body_bytes: (self.sent + pending).saturating_sub(l.head_end),
            duration: l
                .started
                .map_or(Duration::ZERO, |t| self.ctx.clock.since(t)),
            referer: l.has_referer.then_some(&l.referer[..]),
            user_agent: l.has_user_agent.then_some(&l.user_agent[..]),
            tls: self.io.tls_facts().map(|t| TlsFields {
                version: t.version,
                cipher: t.cipher,
                sni: t.sni,
            }),
            upstream: self.record.upstream.map(|u| u.0),
            upstream_time: self.record.upstream.map(|u| u.1),
            cache: self.record.cache,
            trace: self.record.trace.ids_hex(),
        });
    }
}
