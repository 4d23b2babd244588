//! Phase 7, rewriting the downstream response: the fields the client gets from
//! the upstream's head, and the answer when no upstream answered.

use super::fields::{ConnectionOptions, Field, FieldCopy};
use crate::http1::response::ParsedResponseHead;
use crate::http1::HeaderLines;

/// Phase 7: the upstream's end-to-end fields as `name: value\r\n` lines, for
/// [`ResponseHead::field_lines`]: its `Date`, `Server`, framing and
/// hop-by-hop fields are dropped (the driver writes its own). `keep_length`
/// passes the upstream's Content-Length through (a 304, whose Content-Length
/// describes a body that is not sent); `upgrade` keeps `Upgrade` (a 101).
pub(super) fn encode_response_fields(
    out: &mut Vec<u8>,
    resp: &ParsedResponseHead,
    buf: &[u8],
    keep_length: bool,
    upgrade: bool,
) {
    // The parse classified the fields; the `Connection` options are
    // gathered only when one may name a field.
    let options = resp
        .connection_options()
        .then(|| ConnectionOptions::gather(|| resp.headers(buf)));
    let mut copy = FieldCopy::default();
    for (&h, &field) in resp.header_spans().iter().zip(resp.field_names()) {
        let keep = match field {
            Field::ContentLength => keep_length,
            Field::Upgrade if upgrade => true,
            Field::Date | Field::Server => false,
            field if field.is_hop_by_hop() => false,
            _ => options.as_ref().is_none_or(|o| !o.names(h.name.get(buf))),
        };
        if keep {
            copy.field(out, buf, h);
        }
    }
    copy.finish(out, buf);
}
