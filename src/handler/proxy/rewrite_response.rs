//! Phase 7, rewriting the downstream response: the fields the client gets from
//! the upstream's head, and the answer when no upstream answered.

use super::fields::{ConnectionOptions, Field, FieldCopy};
use crate::http::{Body, ResponseHead, Session};
use crate::http1::response::ResponseHead as UpstreamHead;

/// Phase 7: the upstream's end-to-end fields as `name: value\r\n` lines, for
/// [`ResponseHead::field_lines`]: its `Date`, `Server`, framing and
/// hop-by-hop fields are dropped (the driver writes its own). `keep_length`
/// passes the upstream's Content-Length through (a 304, whose Content-Length
/// describes a body that is not sent); `upgrade` keeps `Upgrade` (a 101).
pub(super) fn encode_response_fields(
    out: &mut Vec<u8>,
    resp: &UpstreamHead,
    buf: &[u8],
    keep_length: bool,
    upgrade: bool,
) {
    let options = ConnectionOptions::gather(|| resp.headers(buf));
    let mut copy = FieldCopy::default();
    for &h in resp.header_spans() {
        let name = h.name.get(buf);
        let keep = match Field::of(name) {
            Field::ContentLength => keep_length,
            Field::Upgrade if upgrade => true,
            Field::Date | Field::Server => false,
            field if field.is_hop_by_hop() => false,
            _ => !options.names(name),
        };
        if keep {
            copy.field(out, buf, h);
        }
    }
    copy.finish(out, buf);
}

/// After a failure before any response byte was sent downstream: answers with
/// `status`. The driver keeps the connection only if the request was read
/// whole, since otherwise its framing is in doubt.
pub(super) fn answer_error(session: &mut dyn Session<'_>, status: u16) {
    answer_status(session, status, &[]);
}

/// Answers with the status as a text body (`502 Bad Gateway\n`) and `extra` fields.
pub(super) fn answer_status(session: &mut dyn Session<'_>, status: u16, extra: &[(&str, &[u8])]) {
    let mut fields: [(&str, &[u8]); 2] = [("Content-Type", b"text/plain; charset=utf-8"); 2];
    let n = 1 + extra.len().min(1);
    if let Some(&f) = extra.first() {
        fields[1] = f;
    }
    session.send_response(
        &ResponseHead::new(status, &fields[..n]),
        Body::Bytes(crate::http::status::status_text(status)),
    );
}
