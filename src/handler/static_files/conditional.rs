//! Conditional requests (RFC 9110 §13): If-Match, If-Unmodified-Since,
//! If-None-Match, If-Modified-Since and If-Range against a file's validators.

use std::time::UNIX_EPOCH;

use super::values::ETag;
use crate::http1::grammar::trim_ows;

/// Whether a precondition fails, so the answer is a 412 (RFC 9110 §13.2.2,
/// as nginx answers): `If-Match` when the request has one (a strong match
/// with any listed tag, or `*`), else `If-Unmodified-Since` (a file changed
/// after the date; an invalid date is ignored).
pub(super) fn precondition_failed(
    if_match: Option<&[u8]>,
    if_unmodified_since: Option<&[u8]>,
    etag: &ETag,
    mtime: u64,
) -> bool {
    match (if_match, if_unmodified_since) {
        (Some(im), _) => !match_strong(im, etag),
        (None, Some(ius)) => parse_http_date_secs(ius).is_some_and(|since| mtime > since),
        (None, None) => false,
    }
}

/// If-Match evaluates to true when it is `*` or any listed tag matches
/// strongly: a weak tag never does.
fn match_strong(field: &[u8], etag: &ETag) -> bool {
    let field = trim_ows(field);
    field == b"*" || EntityTags(field).any(|(weak, opaque)| !weak && opaque == etag.opaque())
}

/// Whether the client's copy of a file with these validators is current, so
/// the answer is a 304 (RFC 9110 §13.2.2): `If-None-Match` when the request
/// has one, else `If-Modified-Since`.
pub(super) fn not_modified(
    if_none_match: Option<&[u8]>,
    if_modified_since: Option<&[u8]>,
    etag: &ETag,
    mtime: u64,
) -> bool {
    match (if_none_match, if_modified_since) {
        (Some(inm), _) => none_match_fails(inm, etag),
        (None, Some(ims)) => parse_http_date_secs(ims).is_some_and(|since| mtime <= since),
        (None, None) => false,
    }
}

/// If-None-Match evaluates to false (so 304) when `*` or any listed tag matches weakly.
fn none_match_fails(field: &[u8], etag: &ETag) -> bool {
    let field = trim_ows(field);
    field == b"*" || EntityTags(field).any(|(_, opaque)| opaque == etag.opaque())
}

/// The entity tags of an `If-Match` or `If-None-Match` list, as (weak,
/// opaque tag without its quotes). A malformed list stops at the malformed
/// member: what was read so far decides.
struct EntityTags<'a>(&'a [u8]);

impl<'a> Iterator for EntityTags<'a> {
    type Item = (bool, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let mut rest = self.0;
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        let weak = rest.starts_with(b"W/");
        if weak {
            rest = &rest[2..];
        }
        let quoted = rest.strip_prefix(b"\"")?;
        let end = quoted.iter().position(|&b| b == b'"')?;
        self.0 = &quoted[end + 1..];
        Some((weak, &quoted[..end]))
    }
}

/// If-Range (RFC 9110 §13.1.5): a strong match with the ETag, or the exact Last-Modified.
pub(super) fn if_range_matches(field: &[u8], etag: &ETag, mtime: u64) -> bool {
    let field = trim_ows(field);
    if field.starts_with(b"\"") || field.starts_with(b"W/") {
        // Strong comparison: a weak tag never matches, and ours is never weak.
        return field == etag.as_bytes();
    }
    parse_http_date_secs(field) == Some(mtime)
}

/// Any of the three HTTP-date formats, as seconds since the epoch; invalid dates are None,
/// so the header is ignored as RFC 9110 requires.
pub(super) fn parse_http_date_secs(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    time.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}
