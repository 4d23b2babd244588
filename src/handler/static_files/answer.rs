//! The static handler on the request seam: reads what it needs of the request
//! head, decides the reply, and gives it to the session as a head and a body
//! (a file region the driver sends as it sees fit).

use crate::http::status::status_text;
use crate::http::{Body, FileRegion, ResponseHead, Served, Session};
use crate::http1::parse::Method;
use crate::observe::metrics::HandlerKind;

use super::super::Handler;
use super::reply::{JSON_LISTING_CONTENT_TYPE, LISTING_CONTENT_TYPE};
use super::{OpenedOffLoop, Reply, StaticFiles, StaticRequest};

/// `Content-Type` of status pages.
const TEXT_PLAIN: &[u8] = b"text/plain; charset=utf-8";

impl Handler for StaticFiles {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Static
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let reply = {
            let opened = OpenedOffLoop::default();
            self.decide(&self.static_request(&*session, &opened))
        };
        let Reply::Blocked(work) = reply else {
            let reply = with_query(&*session, reply);
            give(session, reply, self.varies_by_coding());
            return Served::Done;
        };
        Served::Pending(Box::pin(async move {
            let config = session.worker().config.clone();
            let reply = self
                .finish_off_loop(
                    &config.file_io,
                    |opened| self.decide(&self.static_request(&*session, opened)),
                    work,
                )
                .await;
            let reply = with_query(&*session, reply);
            give(session, reply, self.varies_by_coding());
        }))
    }
}

impl StaticFiles {
    /// What the static handler reads of the request, borrowed from the session.
    fn static_request<'r>(
        &self,
        session: &'r dyn Session<'_>,
        off_loop: &'r OpenedOffLoop,
    ) -> StaticRequest<'r> {
        let mut req = static_request(session, off_loop);
        if self.varies_by_coding() {
            req.accept_encoding = session.request().header("accept-encoding");
        }
        req
    }
}

/// What every static route reads of the request, borrowed from the session.
fn static_request<'r>(
    session: &'r dyn Session<'_>,
    off_loop: &'r OpenedOffLoop,
) -> StaticRequest<'r> {
    let req = session.request();
    let method = req.method();
    StaticRequest {
        is_head: method == Method::Head,
        method_allowed: matches!(method, Method::Get | Method::Head),
        path: req.path(),
        if_none_match: req.header("if-none-match"),
        if_modified_since: req.header("if-modified-since"),
        range: req.header("range"),
        if_range: req.header("if-range"),
        open_files: Some(session.worker().handlers.get()),
        listing_json: req
            .header("accept")
            .is_some_and(|a| contains_ignore_case(a, b"application/json")),
        off_loop: Some(off_loop),
        accept_encoding: None,
        coding: None,
        now: Some(session.worker().clock.now().into_std()),
    }
}

/// The slash is added, the query kept, as nginx does.
fn with_query(session: &dyn Session<'_>, mut reply: Reply) -> Reply {
    if let Reply::Redirect { location } = &mut reply {
        if let Some(query) = session.request().query() {
            location.push(b'?');
            location.extend_from_slice(query);
        }
    }
    reply
}

/// Hands a reply to the session; up to seven fields, collected on the stack.
/// `vary_coding`: the route serves precompressed files, so what it sends
/// depends on `Accept-Encoding`.
fn give<'h>(session: &mut dyn Session<'h>, reply: Reply, vary_coding: bool) {
    let status = reply.status();
    if let Reply::File(f) = reply {
        // The common answer: its fields straight from the reply, its file
        // handed over rather than shared.
        let mut fields: [(&str, &[u8]); 7] = [
            ("Content-Type", f.content_type.as_bytes()),
            ("ETag", f.etag.as_bytes()),
            ("Last-Modified", f.last_modified.as_bytes()),
            ("Accept-Ranges", b"bytes"),
            ("", &[]),
            ("", &[]),
            ("", &[]),
        ];
        let mut n = 4;
        if let Some(range) = &f.content_range {
            fields[n] = ("Content-Range", range.as_bytes());
            n += 1;
        }
        if let Some(coding) = f.coding {
            fields[n] = ("Content-Encoding", coding.token().as_bytes());
            n += 1;
        }
        if vary_coding && matches!(status, 200 | 206) {
            fields[n] = ("Vary", b"Accept-Encoding");
            n += 1;
        }
        let body = Body::File(FileRegion {
            file: f.file,
            offset: f.offset,
            len: f.len,
            content: f.content,
        });
        session.send_response(&ResponseHead::new(status, &fields[..n]), body);
        return;
    }
    let reply = match reply {
        Reply::Listing { body } => {
            return give_listing(session, status, LISTING_CONTENT_TYPE, body)
        }
        Reply::ListingJson { body } => {
            return give_listing(session, status, JSON_LISTING_CONTENT_TYPE, body)
        }
        other => other,
    };
    let mut fields: [(&str, &[u8]); 8] = [("", &[]); 8];
    let mut n = 0;
    let text = matches!(
        reply,
        Reply::Redirect { .. }
            | Reply::RangeNotSatisfiable { .. }
            | Reply::Error(_)
            | Reply::Blocked(_)
    );
    if text {
        fields[0] = ("Content-Type", TEXT_PLAIN);
        n = 1;
    }
    for field in reply.headers() {
        fields[n] = field;
        n += 1;
    }
    if let Some(coding) = reply.content_coding() {
        fields[n] = ("Content-Encoding", coding.token().as_bytes());
        n += 1;
    }
    if vary_coding && matches!(status, 200 | 206 | 304) {
        fields[n] = ("Vary", b"Accept-Encoding");
        n += 1;
    }
    let head = ResponseHead::new(status, &fields[..n]);
    match &reply {
        Reply::Multipart(m) => session.send_response(&head, m.body()),
        Reply::NotModified { .. } => session.send_response(&head, Body::Empty),
        Reply::File(_)
        | Reply::Listing { .. }
        | Reply::ListingJson { .. }
        | Reply::Redirect { .. }
        | Reply::RangeNotSatisfiable { .. }
        | Reply::Error(_)
        | Reply::Blocked(_) => session.send_response(&head, Body::Bytes(status_text(status))),
    }
}

/// A directory listing, HTML or JSON: the same URL answers JSON to
/// `Accept: application/json`, so both vary by `Accept`.
fn give_listing(session: &mut dyn Session<'_>, status: u16, content_type: &str, body: Vec<u8>) {
    let fields = [
        ("Content-Type", content_type.as_bytes()),
        ("Vary", b"Accept".as_slice()),
    ];
    session.send_response(&ResponseHead::new(status, &fields), Body::Owned(body));
}

/// Whether `hay` contains `needle`, ASCII case-insensitively.
fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
