//! Answering from a stored response: the stored fields as they are, `Age` and
//! `Cache-Status` computed, the client's own conditionals (`If-None-Match`,
//! `If-Modified-Since`) answered 304, a single `Range` answered 206 from the
//! whole stored body, `HEAD` with the head alone.

use std::fmt::Write as _;
use std::fs::File;
use std::io::IoSlice;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::entry::{http_date, StoredResponse};
use super::tap::Instead;
use crate::http::response::FileRegion;
use crate::http::{Body, ResponseHead, Session, SessionExt};
use crate::http1::grammar::trim_ows;
use crate::http1::parse::Method;

/// Fields a 304 carries of the stored response (RFC 9110 §15.4.5).
const NOT_MODIFIED_FIELDS: &[&str] = &[
    "cache-control",
    "content-location",
    "etag",
    "expires",
    "vary",
    "last-modified",
];

/// Where the body of a stored response is.
pub enum StoredBody {
    /// In memory, in `StoredResponse::body`.
    Memory,
    /// In a file of the disk tier, from this offset.
    File(Rc<File>, u64),
}

/// Answers `session` with what the cache gave instead of the upstream's
/// answer, its body from memory or from its disk object's file.
pub async fn answer_instead<'h>(session: &mut dyn Session<'h>, instead: Instead, now: Instant) {
    let body = match instead.file {
        Some((file, at)) => StoredBody::File(file, at),
        None => StoredBody::Memory,
    };
    answer_stored_from(session, &instead.stored, body, &instead.cache_status, now).await
}

/// Answers `session` from `stored`; `status` is the `Cache-Status` value.
pub async fn answer_stored<'h>(
    session: &mut dyn Session<'h>,
    stored: &StoredResponse,
    cache_status: &str,
    now: Instant,
) {
    answer_stored_from(session, stored, StoredBody::Memory, cache_status, now).await
}

/// [`answer_stored`] with the body in `body`: a file region goes by
/// `sendfile` (through the file IO pool when its pages are cold).
pub async fn answer_stored_from<'h>(
    session: &mut dyn Session<'h>,
    stored: &StoredResponse,
    body: StoredBody,
    cache_status: &str,
    now: Instant,
) {
    let mut age = String::new();
    let _ = write!(age, "{}", stored.age(now).as_secs());
    // The origin's Date, as stored; Age says how old the response is since.
    let date = stored.date.as_ref().map(|d| &d[..]);
    let request = session.request();
    let method = request.method();
    if stored.status == 200 && not_modified(&request, stored) {
        let mut lines = Vec::new();
        for (name, value) in crate::http::response::split_field_lines(&stored.fields) {
            if NOT_MODIFIED_FIELDS
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name))
            {
                lines.extend_from_slice(name.as_bytes());
                lines.extend_from_slice(b": ");
                lines.extend_from_slice(value);
                lines.extend_from_slice(b"\r\n");
            }
        }
        let fields = [
            ("Age", age.as_bytes()),
            ("Cache-Status", cache_status.as_bytes()),
        ];
        let head = ResponseHead {
            date,
            status: 304,
            fields: &fields,
            configured: None,
            field_lines: &lines,
        };
        session.send_response(&head, Body::Empty);
        return;
    }
    let range = if stored.status == 200 && method == Method::Get {
        request
            .header("range")
            .filter(|_| if_range_holds(&request, stored))
            .and_then(|r| single_range(r, stored.body_len))
    } else {
        None
    };
    let total = stored.body_len;
    let (status, first, len, content_range) = match range {
        Some(RangeAnswer::Span(first, last)) => (
            206,
            first,
            last - first + 1,
            Some(format!("bytes {first}-{last}/{total}")),
        ),
        Some(RangeAnswer::Unsatisfiable) => {
            let cr = format!("bytes */{total}");
            let fields = [
                ("Content-Range", cr.as_bytes()),
                ("Cache-Status", cache_status.as_bytes()),
            ];
            session.send_response(&ResponseHead::new(416, &fields), Body::Empty);
            return;
        }
        None => (stored.status, 0, total, None),
    };
    let cr = content_range.unwrap_or_default();
    let all = [
        ("Age", age.as_bytes()),
        ("Cache-Status", cache_status.as_bytes()),
        ("Content-Range", cr.as_bytes()),
    ];
    let n = if cr.is_empty() { 2 } else { 3 };
    let head = ResponseHead {
        date,
        status,
        fields: &all[..n],
        configured: None,
        field_lines: &stored.fields,
    };
    if let StoredBody::File(file, at) = body {
        let region = FileRegion {
            file,
            offset: at + first,
            len,
            content: None,
        };
        session.send_response(&head, Body::File(region));
        return;
    }
    session.send_response(&head, Body::Push(Some(len)));
    if method != Method::Head && write_span(session, stored, first, len).await.is_err() {
        return;
    }
    session.finish_body(&[]);
}

/// Stored chunks handed to the session per gathered write, from the stack.
const SPAN_BATCH: usize = 64;

/// Writes `len` body bytes from offset `first`: the stored chunks that hold
/// them go to the session together, so a driver that gathers writes sends
/// them with the head straight from the store, none copied.
async fn write_span<'h>(
    session: &mut dyn Session<'h>,
    stored: &StoredResponse,
    first: u64,
    len: u64,
) -> std::io::Result<()> {
    let mut pieces = span_pieces(&stored.body, first, len);
    let Some(one) = pieces.next() else {
        return Ok(());
    };
    let Some(two) = pieces.next() else {
        // Most small objects: one chunk, no batch to fill.
        return session.write_body_gathered(&mut [IoSlice::new(one)]).await;
    };
    let mut batch = [IoSlice::new(&[]); SPAN_BATCH];
    batch[0] = IoSlice::new(one);
    batch[1] = IoSlice::new(two);
    let mut used = 2;
    for piece in pieces {
        batch[used] = IoSlice::new(piece);
        used += 1;
        if used == SPAN_BATCH {
            session.write_body_gathered(&mut batch[..used]).await?;
            used = 0;
        }
    }
    session.write_body_gathered(&mut batch[..used]).await
}

/// The parts of `chunks` that hold bytes `first..first + len` of their
/// concatenation, in order.
fn span_pieces(chunks: &[Arc<[u8]>], first: u64, len: u64) -> impl Iterator<Item = &[u8]> {
    let mut skip = first;
    let mut left = len;
    chunks.iter().filter_map(move |chunk| {
        let clen = chunk.len() as u64;
        if left == 0 {
            return None;
        }
        if skip >= clen {
            skip -= clen;
            return None;
        }
        let start = skip as usize;
        let end = (skip + left).min(clen) as usize;
        skip = 0;
        left -= (end - start) as u64;
        Some(&chunk[start..end])
    })
}

/// RFC 9110 §13.1.2 and §13.1.3 against the stored validators:
/// `If-None-Match` (weak comparison) decides when present, else
/// `If-Modified-Since` for GET and HEAD.
fn not_modified(request: &crate::http::RequestView<'_>, stored: &StoredResponse) -> bool {
    if let Some(inm) = request.header("if-none-match") {
        let Some(etag) = &stored.etag else {
            return false;
        };
        return etag_listed(inm, etag, true);
    }
    let (Some(ims), Some(lm)) = (
        request.header("if-modified-since").and_then(http_date),
        stored.last_modified.as_deref().and_then(http_date),
    ) else {
        return false;
    };
    lm <= ims
}

/// `If-Range` (RFC 9110 §13.1.5): absent, a strong match of the ETag, or the
/// exact `Last-Modified`.
fn if_range_holds(request: &crate::http::RequestView<'_>, stored: &StoredResponse) -> bool {
    let Some(v) = request.header("if-range").map(trim_ows) else {
        return true;
    };
    if v.starts_with(b"\"") || v.starts_with(b"W/") {
        return stored
            .etag
            .as_deref()
            .is_some_and(|e| !e.starts_with(b"W/") && e == v);
    }
    stored.last_modified.as_deref() == Some(v)
}

/// Whether `etag` is in the `If-None-Match` list `field` (or it is `*`);
/// `weak` compares ignoring `W/`.
pub fn etag_listed(field: &[u8], etag: &[u8], weak: bool) -> bool {
    let field = trim_ows(field);
    if field == b"*" {
        return true;
    }
    let opaque = |t: &[u8]| -> Vec<u8> {
        let t = trim_ows(t);
        if weak {
            t.strip_prefix(b"W/").unwrap_or(t).to_vec()
        } else {
            t.to_vec()
        }
    };
    let ours = opaque(etag);
    field.split(|&b| b == b',').any(|t| opaque(t) == ours)
}

/// A `Range` the cache answers itself.
#[derive(Debug, PartialEq, Eq)]
enum RangeAnswer {
    /// Bytes `first..=last`.
    Span(u64, u64),
    /// 416.
    Unsatisfiable,
}

/// One `bytes=` range against a body of `total` bytes; several ranges, other
/// units or bad syntax are answered with the whole body (RFC 9110 §14.2
/// lets a server ignore Range).
fn single_range(field: &[u8], total: u64) -> Option<RangeAnswer> {
    let spec = trim_ows(field).strip_prefix(b"bytes=")?;
    if spec.contains(&b',') {
        return None;
    }
    let spec = trim_ows(spec);
    let dash = spec.iter().position(|&b| b == b'-')?;
    let num = |s: &[u8]| -> Option<u64> {
        let s = trim_ows(s);
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) || s.len() > 19 {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    let (a, b) = (&spec[..dash], &spec[dash + 1..]);
    if a.is_empty() {
        let n = num(b)?;
        if n == 0 || total == 0 {
            return Some(RangeAnswer::Unsatisfiable);
        }
        return Some(RangeAnswer::Span(total.saturating_sub(n), total - 1));
    }
    let first = num(a)?;
    let last = if b.is_empty() { u64::MAX } else { num(b)? };
    if last < first {
        return None;
    }
    if first >= total {
        return Some(RangeAnswer::Unsatisfiable);
    }
    Some(RangeAnswer::Span(first, last.min(total - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_is_answered_and_several_are_not() {
        assert_eq!(
            single_range(b"bytes=0-4", 10),
            Some(RangeAnswer::Span(0, 4))
        );
        assert_eq!(single_range(b"bytes=5-", 10), Some(RangeAnswer::Span(5, 9)));
        assert_eq!(single_range(b"bytes=-3", 10), Some(RangeAnswer::Span(7, 9)));
        assert_eq!(
            single_range(b"bytes=8-100", 10),
            Some(RangeAnswer::Span(8, 9))
        );
        assert_eq!(
            single_range(b"bytes=10-", 10),
            Some(RangeAnswer::Unsatisfiable)
        );
        assert_eq!(single_range(b"bytes=0-1,3-4", 10), None);
        assert_eq!(single_range(b"items=0-1", 10), None);
        assert_eq!(single_range(b"bytes=4-2", 10), None);
    }

    #[test]
    fn a_span_takes_the_right_bytes_of_each_chunk() {
        let chunks: Vec<Arc<[u8]>> = vec![
            b"abc".as_slice().into(),
            b"defg".as_slice().into(),
            b"hi".as_slice().into(),
        ];
        let text = |first, len| -> Vec<u8> {
            span_pieces(&chunks, first, len)
                .flatten()
                .copied()
                .collect()
        };
        assert_eq!(text(0, 9), b"abcdefghi");
        assert_eq!(text(2, 3), b"cde");
        assert_eq!(text(3, 4), b"defg");
        assert_eq!(text(4, 5), b"efghi");
        assert_eq!(text(8, 1), b"i");
        assert_eq!(span_pieces(&chunks, 3, 4).count(), 1);
        assert_eq!(span_pieces(&chunks, 9, 0).count(), 0);
    }

    #[test]
    fn if_none_match_compares_weakly() {
        assert!(etag_listed(b"\"a\", W/\"b\"", b"\"b\"", true));
        assert!(etag_listed(b"*", b"\"b\"", true));
        assert!(!etag_listed(b"\"c\"", b"\"b\"", true));
        assert!(!etag_listed(b"W/\"b\"", b"\"b\"", false));
    }
}
