//! What a static request gets: the reply decided from the file and the
//! request's conditionals and range, with the header fields it carries.

use std::fs::File;
use std::rc::Rc;
use std::time::Instant;

use super::conditional::{if_range_matches, not_modified, precondition_failed};
use super::multipart::MultipartReply;
use super::off_loop_work::{OffLoop, OpenedOffLoop};
use super::open_cache::{OpenFileCache, OpenedFile};
use super::range::{parse_range, RangeOutcome};
use super::values::{ContentRange, ETag, HttpDateValue};
use crate::http::content_coding::Coding;

/// Content-Type of an autoindex page.
pub(super) const LISTING_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// Content-Type of a JSON listing.
pub(super) const JSON_LISTING_CONTENT_TYPE: &str = "application/json";

/// The parts of a downstream request this handler reads, borrowed from the parsed head.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticRequest<'a> {
    /// HEAD gets the same reply as GET; the driver omits the body.
    pub is_head: bool,
    /// Whether the method is GET or HEAD; anything else is answered 405.
    pub method_allowed: bool,
    /// Raw request path as received: percent-encoded, query removed, starting with `/`.
    pub path: &'a [u8],
    /// `If-None-Match` field value, if present.
    pub if_none_match: Option<&'a [u8]>,
    /// `If-Modified-Since` field value, if present.
    pub if_modified_since: Option<&'a [u8]>,
    /// `If-Match` field value, if present.
    pub if_match: Option<&'a [u8]>,
    /// `If-Unmodified-Since` field value, if present.
    pub if_unmodified_since: Option<&'a [u8]>,
    /// `Range` field value, if present.
    pub range: Option<&'a [u8]>,
    /// `If-Range` field value, if present.
    pub if_range: Option<&'a [u8]>,
    /// The worker's open-file cache for this configuration; `None` opens every time.
    pub open_files: Option<&'a OpenFileCache>,
    /// `Accept`: a directory listing is sent as JSON to one that names
    /// `application/json`.
    pub accept: Option<&'a [u8]>,
    /// `Some` on an event loop: an open that would wait on a disk makes the
    /// reply [`Reply::Blocked`] and files already opened off the loop are taken
    /// from here, and listings are always `Blocked`. `None` where waiting is
    /// allowed (tools, tests): opens and listings happen inline.
    pub off_loop: Option<&'a OpenedOffLoop>,
    /// `Accept-Encoding`; only routes with precompressed files use it.
    pub accept_encoding: Option<&'a [u8]>,
    /// The file being answered is this coding's precompressed sibling.
    pub coding: Option<Coding>,
    /// The time of this wake-up, which the driver reads once for all it
    /// does; `None` reads the clock.
    pub now: Option<Instant>,
}

impl StaticRequest<'_> {
    /// Whether a directory listing is wanted as JSON (`Accept:
    /// application/json`).
    pub fn wants_json_listing(&self) -> bool {
        self.accept
            .is_some_and(|a| contains_ignore_case(a, b"application/json"))
    }
}

/// Whether `hay` contains `needle`, ASCII case-insensitively.
fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// What the driver should answer; each variant maps to one status code.
#[derive(Debug)]
pub enum Reply {
    /// 200 or 206 with a region of an open file.
    File(FileReply),
    /// 206 `multipart/byteranges` with several regions of an open file.
    Multipart(MultipartReply),
    /// 304: the client's copy is current.
    NotModified {
        /// Validator the client should keep.
        etag: ETag,
        /// Modification time the client should keep.
        last_modified: HttpDateValue,
    },
    /// 200 autoindex page, `text/html; charset=utf-8`.
    Listing {
        /// Complete HTML document.
        body: Vec<u8>,
    },
    /// 200 autoindex as JSON, `application/json`.
    ListingJson {
        /// The JSON array.
        body: Vec<u8>,
    },
    /// 301 for a directory requested without its trailing slash, like nginx.
    Redirect {
        /// Path-absolute Location, rebuilt from the normalised path and percent-encoded.
        location: Vec<u8>,
    },
    /// 416 with `Content-Range: bytes */total`.
    RangeNotSatisfiable {
        /// Current length of the file.
        total: u64,
        /// Preformatted `bytes */total`.
        content_range: ContentRange,
    },
    /// 400, 403, 404, 405 (carries `Allow` in [`Reply::headers`]) or 500; the driver picks the body.
    Error(u16),
    /// Not decided yet: this file work must be done off the event loop first.
    Blocked(OffLoop),
}

/// An open file and the region to send, with the validators for the response head.
#[derive(Debug)]
pub struct FileReply {
    /// 200 for the whole file, 206 for a byte range.
    pub status: u16,
    /// Opened read-only and non-blocking (a no-op for regular files); ready for sendfile.
    pub file: Rc<File>,
    /// The whole file, when the open-file cache holds it in memory: send
    /// `content[offset..offset + len]` instead of reading the file.
    pub content: Option<Rc<[u8]>>,
    /// First byte to send.
    pub offset: u64,
    /// Bytes to send: the Content-Length.
    pub len: u64,
    /// File size when it was opened.
    pub total: u64,
    /// From the file extension.
    pub content_type: &'static str,
    /// Strong validator, nginx format.
    pub etag: ETag,
    /// File mtime as an IMF-fixdate.
    pub last_modified: HttpDateValue,
    /// `bytes first-last/total` for a 206.
    pub content_range: Option<ContentRange>,
    /// The file is a precompressed sibling in this coding.
    pub coding: Option<Coding>,
}

/// Header name/value pairs for a reply, with no allocation.
pub type Headers<'a> =
    std::iter::Flatten<std::array::IntoIter<Option<(&'static str, &'a [u8])>, 5>>;

impl Reply {
    /// Status code of the response head.
    pub fn status(&self) -> u16 {
        match self {
            Reply::File(f) => f.status,
            Reply::Multipart(_) => 206,
            Reply::NotModified { .. } => 304,
            Reply::Listing { .. } | Reply::ListingJson { .. } => 200,
            Reply::Redirect { .. } => 301,
            Reply::RangeNotSatisfiable { .. } => 416,
            Reply::Error(status) => *status,
            Reply::Blocked(_) => 503,
        }
    }

    /// Headers this module owns, for the driver's head writer; framing, Date and Server are
    /// the driver's.
    pub fn headers(&self) -> Headers<'_> {
        match self {
            Reply::File(f) => f.headers(),
            Reply::Multipart(m) => [
                Some(("Content-Type", m.content_type())),
                Some(("ETag", m.etag.as_bytes())),
                Some(("Last-Modified", m.last_modified.as_bytes())),
                None,
                None,
            ]
            .into_iter()
            .flatten(),
            Reply::NotModified {
                etag,
                last_modified,
            } => [
                Some(("ETag", etag.as_bytes())),
                Some(("Last-Modified", last_modified.as_bytes())),
                None,
                None,
                None,
            ]
            .into_iter()
            .flatten(),
            Reply::Listing { .. } => only(("Content-Type", LISTING_CONTENT_TYPE.as_bytes())),
            Reply::ListingJson { .. } => {
                only(("Content-Type", JSON_LISTING_CONTENT_TYPE.as_bytes()))
            }
            Reply::Redirect { location } => only(("Location", location.as_slice())),
            Reply::RangeNotSatisfiable { content_range, .. } => {
                only(("Content-Range", content_range.as_bytes()))
            }
            Reply::Error(405) => only(("Allow", b"GET, HEAD")),
            Reply::Error(_) | Reply::Blocked(_) => {
                [None, None, None, None, None].into_iter().flatten()
            }
        }
    }
}

impl FileReply {
    /// Content-Type, ETag, Last-Modified, Accept-Ranges and, for a 206, Content-Range.
    pub fn headers(&self) -> Headers<'_> {
        [
            Some(("Content-Type", self.content_type.as_bytes())),
            Some(("ETag", self.etag.as_bytes())),
            Some(("Last-Modified", self.last_modified.as_bytes())),
            Some(("Accept-Ranges", b"bytes".as_slice())),
            self.content_range
                .as_ref()
                .map(|cr| ("Content-Range", cr.as_bytes())),
        ]
        .into_iter()
        .flatten()
    }
}

fn only<'a>(header: (&'static str, &'a [u8])) -> Headers<'a> {
    [Some(header), None, None, None, None].into_iter().flatten()
}

/// Preconditions and conditionals in RFC 9110 §13.2.2's order, then Range (§14), for an open regular file.
/// `content_type` is the file's own ([`OpenedFile::content_type`]), or the
/// type of the file a precompressed sibling stands for.
pub(super) fn file_reply(
    req: &StaticRequest<'_>,
    opened: OpenedFile,
    content_type: &'static str,
) -> Reply {
    let OpenedFile {
        file,
        size: total,
        mtime,
        content,
        etag,
        last_modified,
        ..
    } = opened;
    let etag = etag.for_coding(req.coding);

    if precondition_failed(req.if_match, req.if_unmodified_since, &etag, mtime) {
        return Reply::Error(412);
    }
    if not_modified(req.if_none_match, req.if_modified_since, &etag, mtime) {
        return Reply::NotModified {
            etag,
            last_modified,
        };
    }

    let honor_range = match req.if_range {
        Some(validator) => if_range_matches(validator, &etag, mtime),
        None => true,
    };
    let range = match req.range {
        Some(range) if honor_range => parse_range(range, total),
        _ => RangeOutcome::Full,
    };
    let (status, offset, len, content_range) = match range {
        RangeOutcome::Full => (200, 0, total, None),
        RangeOutcome::Partial { first, last } => (
            206,
            first,
            last - first + 1,
            Some(ContentRange::satisfied(first, last, total)),
        ),
        RangeOutcome::Multiple(spans) => {
            return Reply::Multipart(MultipartReply::new(
                file,
                content,
                spans,
                total,
                content_type,
                etag,
                last_modified,
            ))
        }
        RangeOutcome::Unsatisfiable => {
            return Reply::RangeNotSatisfiable {
                total,
                content_range: ContentRange::unsatisfied(total),
            }
        }
    };
    Reply::File(FileReply {
        status,
        file,
        content,
        offset,
        len,
        total,
        content_type,
        etag,
        last_modified,
        content_range,
        coding: req.coding,
    })
}
