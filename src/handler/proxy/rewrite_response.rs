//! Phase 7, rewriting the downstream response: the head the client gets from
//! the upstream's, and the answer when no upstream answered.

use super::fields::{ConnectionOptions, Field, FieldCopy};
use super::request_info::RequestInfo;
use crate::filter::legacy_proxy::ProxiedRequest;
use crate::filter::HeadEdit;
use crate::http::RequestId;
use crate::http1::parse::Method;
use crate::http1::response::ResponseHead;
use crate::http1::write::{self, BodyFraming, ConnectionHeader};
use crate::observe::metrics::HandlerKind;
use crate::server::h1::{Downstream, Exit, Http1Conn};

/// Phase 6: the downstream response head from the upstream one. Our `Server`,
/// `Date`, framing and `Connection`; the upstream's other end-to-end fields.
/// `keep_length` passes the upstream's Content-Length through (HEAD and 304,
/// where it describes a body that is not sent).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_response_head(
    out: &mut Vec<u8>,
    resp: &ResponseHead,
    buf: &[u8],
    date: &[u8],
    framing: BodyFraming,
    connection: ConnectionHeader,
    keep_length: bool,
    upgrade: bool,
    filters: Option<(&ProxiedRequest<'_>, &RequestId)>,
) {
    write::write_head_start(out, resp.status, date, framing, connection);
    let options = ConnectionOptions::gather(|| resp.headers(buf));
    if let Some((filters, id)) = filters {
        // The route's response filters edit the fields the client would get.
        let mut edit = HeadEdit::from_head(&crate::http::ResponseHead::new(resp.status, &[]));
        for &h in resp.header_spans() {
            let name = h.name.get(buf);
            let keep = match Field::of(name) {
                Field::ContentLength => keep_length,
                Field::Date | Field::Server => false,
                field if field.is_hop_by_hop() => false,
                _ => !options.names(name),
            };
            if let (true, Ok(name)) = (keep, std::str::from_utf8(name)) {
                edit.push(name, h.value.get(buf));
            }
        }
        filters.filter(id, &mut edit);
        for (name, value) in edit.fields() {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        return;
    }
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
    if upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// After a failure before any response byte was sent downstream: answer with
/// `status`, keeping the connection only if the whole request was consumed
/// (`request_end` is where it ended), since otherwise its framing is in doubt.
pub(super) fn finish_with_error<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    info: &RequestInfo,
    status: u16,
    request_end: Option<usize>,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    let Some(end) = request_end else {
        return Err(Exit::Reject(status));
    };
    conn.rpos = end;
    ctx.stats.request(HandlerKind::Proxy, status);
    conn.status = status;
    let keep_alive = info.keep_alive && !ctx.draining.get();
    let connection = ConnectionHeader::choose(keep_alive, info.version);
    let b = conn.bufs.as_mut().expect("buffers held while handling");
    let mut date = ctx.date.borrow_mut();
    // The route's response filters see the proxy's own answers too.
    let edited = conn
        .response_filters
        .as_deref()
        .map(|f| f.own_answer(&conn.request_id, status, &[]));
    write::write_status_body(
        &mut b.write,
        status,
        date.get(),
        connection,
        edited.as_ref().map(HeadEdit::fields).unwrap_or_default(),
        info.method == Method::Head,
    );
    Ok(keep_alive)
}
