//! The static handler on the request seam: reads what it needs of the request
//! head, decides the reply, and gives it to the session as a head and a body
//! (a file region the driver sends as it sees fit).

use crate::http::status::status_text;
use crate::http::{Body, FileRegion, ResponseHead, Served, Session};
use crate::http1::parse::Method;
use crate::observe::metrics::HandlerKind;

use super::super::Handler;
use super::fields::ReplyFields;
use super::reply::{JSON_LISTING_CONTENT_TYPE, LISTING_CONTENT_TYPE};
use super::{OpenedOffLoop, Reply, StaticFiles, StaticRequest};

impl Handler for StaticFiles {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Static
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let reply = {
            // The prepared way opens nothing, so it needs no place for files
            // opened off the loop; the whole way gets one.
            let req = static_request(&*session, None);
            if let Some(answer) = self.prepared_answer(&req) {
                answer.give(session);
                return Served::Done;
            }
            let opened = OpenedOffLoop::default();
            self.decide(&StaticRequest {
                off_loop: Some(&opened),
                ..req
            })
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
                    |opened| self.decide(&static_request(&*session, Some(opened))),
                    work,
                )
                .await;
            let reply = with_query(&*session, reply);
            give(session, reply, self.varies_by_coding());
        }))
    }
}

/// What the static handler reads of the request, borrowed from the session:
/// the fields it uses are picked out in one pass over the head. `off_loop`:
/// see [`StaticRequest::off_loop`]; a request decided on the event loop must
/// have one.
fn static_request<'r>(
    session: &'r dyn Session<'_>,
    off_loop: Option<&'r OpenedOffLoop>,
) -> StaticRequest<'r> {
    let req = session.request();
    let method = req.method();
    let mut out = StaticRequest {
        is_head: method == Method::Head,
        method_allowed: matches!(method, Method::Get | Method::Head),
        path: req.path(),
        open_files: Some(session.worker().handlers.get()),
        off_loop,
        now: Some(session.worker().clock.now().into_std()),
        ..StaticRequest::default()
    };
    for (name, value) in req.headers() {
        let slot = match name.len() {
            5 if name.eq_ignore_ascii_case(b"range") => &mut out.range,
            6 if name.eq_ignore_ascii_case(b"accept") => &mut out.accept,
            8 if name.eq_ignore_ascii_case(b"if-range") => &mut out.if_range,
            8 if name.eq_ignore_ascii_case(b"if-match") => &mut out.if_match,
            13 if name.eq_ignore_ascii_case(b"if-none-match") => &mut out.if_none_match,
            15 if name.eq_ignore_ascii_case(b"accept-encoding") => &mut out.accept_encoding,
            17 if name.eq_ignore_ascii_case(b"if-modified-since") => &mut out.if_modified_since,
            19 if name.eq_ignore_ascii_case(b"if-unmodified-since") => &mut out.if_unmodified_since,
            _ => continue,
        };
        // The first of repeated fields counts, as with a lookup by name.
        slot.get_or_insert(value);
    }
    out
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

/// Hands a reply to the session. `vary_coding`: the route serves
/// precompressed files, so what it sends depends on `Accept-Encoding`.
fn give<'h>(session: &mut dyn Session<'h>, reply: Reply, vary_coding: bool) {
    let status = reply.status();
    let reply = match reply {
        Reply::Listing { body } => {
            return give_listing(session, status, LISTING_CONTENT_TYPE, body)
        }
        Reply::ListingJson { body } => {
            return give_listing(session, status, JSON_LISTING_CONTENT_TYPE, body)
        }
        other => other,
    };
    let body = match &reply {
        Reply::File(f) => Body::File(FileRegion {
            file: f.file.clone(),
            offset: f.offset,
            len: f.len,
            content: f.content.clone(),
        }),
        Reply::Multipart(m) => m.body(),
        Reply::NotModified { .. } => Body::Empty,
        Reply::Listing { .. }
        | Reply::ListingJson { .. }
        | Reply::Redirect { .. }
        | Reply::RangeNotSatisfiable { .. }
        | Reply::Error(_)
        | Reply::Blocked(_) => Body::Bytes(status_text(status)),
    };
    let fields = ReplyFields::of(&reply, vary_coding);
    session.send_response(&ResponseHead::new(status, fields.as_slice()), body);
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
