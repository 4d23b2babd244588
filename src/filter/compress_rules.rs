//! Which responses a route compresses, and how their heads change: the
//! content types, the minimum length, the codings on offer and their levels
//! (`compress` on a route), and the exclusions every compressor keeps: ranges
//! (206, `Content-Range`), `Cache-Control: no-transform`, a body already
//! encoded, bodiless statuses. A compressed head loses `Content-Length` and
//! `Accept-Ranges`, gains `Content-Encoding` and `Vary: Accept-Encoding`, and
//! its strong ETag turns weak (the encoded bytes are not the file's).

use super::HeadEdit;
use crate::http::content_coding::{negotiate, Coding};
use crate::http::{RequestView, ResponseHead};

/// Content types compressed when a route does not list its own: text,
/// structured text (JSON, XML and their `+json`/`+xml` kinds, JavaScript),
/// SVG, WebAssembly, icons and the font formats that are not compressed
/// already (TrueType, OpenType, EOT; WOFF and WOFF2 are).
pub const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/json",
    "application/*+json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/xml",
    "application/*+xml",
    "application/wasm",
    "application/x-ndjson",
    "application/vnd.ms-fontobject",
    "image/svg+xml",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "font/ttf",
    "font/otf",
    "font/collection",
];

/// Bodies shorter than this are sent as they are by default: below it the
/// gzip header and trailer eat most of the gain.
pub const DEFAULT_MIN_LENGTH: u64 = 512;

/// Default levels, from CPU per byte against size on HTML and text (see
/// bench/compress_levels.rs): the last level before the cost per byte
/// climbs faster than the output shrinks.
pub const DEFAULT_GZIP_LEVEL: u32 = 4;
/// See [`DEFAULT_GZIP_LEVEL`]; brotli 4 costs three times brotli 3 for 3%.
pub const DEFAULT_BR_LEVEL: u32 = 3;
/// See [`DEFAULT_GZIP_LEVEL`]; zstd's own default.
pub const DEFAULT_ZSTD_LEVEL: u32 = 3;

/// A route's compression settings.
#[derive(Debug, Clone)]
pub struct CompressSettings {
    /// Codings on offer, in the order preferred on equal weights.
    pub codings: Box<[Coding]>,
    /// Level of each coding.
    pub gzip_level: u32,
    /// Brotli quality.
    pub br_level: u32,
    /// Zstandard level.
    pub zstd_level: u32,
    /// Media type patterns, lowercase: `type/subtype`, with at most one `*`
    /// (`text/*`, `application/*+json`).
    pub types: Box<[Box<str>]>,
    /// Known-length bodies shorter than this are sent as they are.
    pub min_length: u64,
}

impl Default for CompressSettings {
    fn default() -> Self {
        CompressSettings {
            codings: Coding::ALL.into(),
            gzip_level: DEFAULT_GZIP_LEVEL,
            br_level: DEFAULT_BR_LEVEL,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            types: DEFAULT_TYPES.iter().map(|t| (*t).into()).collect(),
            min_length: DEFAULT_MIN_LENGTH,
        }
    }
}

/// What to do with one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Encode the body (or, for `HEAD` and 304, give the head it would have).
    pub coding: Option<Coding>,
    /// The answer depends on `Accept-Encoding`: say so in `Vary`.
    pub vary: bool,
    /// A strong ETag turns weak: the body is encoded, or a 304 confirms an
    /// encoded copy.
    pub weak_etag: bool,
}

const PASS: Decision = Decision {
    coding: None,
    vary: false,
    weak_etag: false,
};

impl CompressSettings {
    /// The level of `coding`.
    pub fn level(&self, coding: Coding) -> u32 {
        match coding {
            Coding::Gzip => self.gzip_level,
            Coding::Br => self.br_level,
            Coding::Zstd => self.zstd_level,
        }
    }

    /// Whether a `Content-Type` value names a type the route compresses.
    pub fn compresses_type(&self, content_type: &[u8]) -> bool {
        let media = content_type
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        self.types.iter().any(|p| type_matches(p.as_bytes(), media))
    }

    /// Decides for a response with `head` whose body has `len` bytes (when
    /// known), to the request `req`.
    pub fn decide(
        &self,
        req: &RequestView<'_>,
        head: &ResponseHead<'_>,
        len: Option<u64>,
    ) -> Decision {
        let status = head.status;
        if status < 200 || status == 204 || status == 206 {
            return PASS;
        }
        if status == 304 {
            return confirms_encoded_copy(req, head);
        }
        let mut content_type = None;
        for (name, value) in head.all_fields() {
            if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(value);
            } else if name.eq_ignore_ascii_case("content-encoding") {
                if !value.trim_ascii().eq_ignore_ascii_case(b"identity") {
                    return PASS;
                }
            } else if name.eq_ignore_ascii_case("content-range")
                || (name.eq_ignore_ascii_case("cache-control") && has_no_transform(value))
            {
                return PASS;
            }
        }
        if !content_type.is_some_and(|t| self.compresses_type(t)) {
            return PASS;
        }
        let chosen = negotiate(req.header("accept-encoding"), &self.codings);
        let small = len.is_some_and(|n| n < self.min_length);
        if small && !chosen.identity_refused {
            return PASS;
        }
        Decision {
            coding: chosen.coding,
            vary: true,
            weak_etag: chosen.coding.is_some(),
        }
    }
}

/// A 304 carries no type to decide by: it gets the weak ETag and `Vary` of
/// an encoded answer when the client's `If-None-Match` holds that weak tag,
/// that is when the copy it keeps is one this filter encoded.
fn confirms_encoded_copy(req: &RequestView<'_>, head: &ResponseHead<'_>) -> Decision {
    let etag = head
        .all_fields()
        .find(|(n, _)| n.eq_ignore_ascii_case("etag"))
        .map(|(_, v)| v);
    let (Some(etag), Some(inm)) = (etag, req.header("if-none-match")) else {
        return PASS;
    };
    let held = etag.starts_with(b"\"")
        && inm.split(|&b| b == b',').any(|t| {
            let t = t.trim_ascii();
            t.len() == etag.len() + 2 && t.starts_with(b"W/") && &t[2..] == etag
        });
    Decision {
        coding: None,
        vary: held,
        weak_etag: held,
    }
}

/// `Cache-Control` forbids intermediaries to change the content (RFC 9111 §5.2).
fn has_no_transform(value: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
}

/// A media type against a pattern with at most one `*`.
fn type_matches(pattern: &[u8], media: &[u8]) -> bool {
    match pattern.iter().position(|&b| b == b'*') {
        None => pattern.eq_ignore_ascii_case(media),
        Some(star) => {
            let (prefix, suffix) = (&pattern[..star], &pattern[star + 1..]);
            media.len() > prefix.len() + suffix.len()
                && media[..prefix.len()].eq_ignore_ascii_case(prefix)
                && media[media.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
        }
    }
}

/// Edits `head` for `decision`: `Vary`, and for an encoded answer its coding,
/// a weak ETag and no length or ranges (a 304 keeps all but the ETag).
pub fn edit_head(edit: &mut HeadEdit<'_>, decision: Decision) {
    if decision.vary && !edit.varies_by_coding() {
        edit.push("Vary", b"Accept-Encoding");
    }
    if !decision.weak_etag {
        return;
    }
    if let Some(etag) = edit.get("etag").filter(|v| v.starts_with(b"\"")) {
        let mut weak = Vec::with_capacity(etag.len() + 2);
        weak.extend_from_slice(b"W/");
        weak.extend_from_slice(etag);
        edit.retain(|n| !n.eq_ignore_ascii_case("etag"));
        edit.push_owned("ETag", &weak);
    }
    let Some(coding) = decision.coding else {
        return;
    };
    edit.retain(|n| {
        !(n.eq_ignore_ascii_case("content-length")
            || n.eq_ignore_ascii_case("accept-ranges")
            || n.eq_ignore_ascii_case("content-encoding"))
    });
    edit.push("Content-Encoding", coding.token().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_patterns_match_whole_types_and_one_wildcard() {
        let s = CompressSettings::default();
        let cases: [(&[u8], bool); 17] = [
            (b"text/html; charset=utf-8", true),
            (b"TEXT/CSS", true),
            (b"application/json", true),
            (b"application/ld+json", true),
            (b"application/rss+xml", true),
            (b"image/svg+xml", true),
            (b"application/wasm", true),
            (b"font/ttf", true),
            (b" text/plain ;q", true),
            (b"image/png", false),
            (b"font/woff2", false),
            (b"application/octet-stream", false),
            (b"application/zip", false),
            (b"video/mp4", false),
            (b"text", false),
            (b"", false),
            (b"application/+json", false),
        ];
        for (ty, compresses) in cases {
            let shown = String::from_utf8_lossy(ty);
            assert_eq!(s.compresses_type(ty), compresses, "{shown}");
        }
    }

    #[test]
    fn no_transform_is_found_among_directives() {
        assert!(has_no_transform(b"public, no-transform, max-age=3"));
        assert!(has_no_transform(b"No-Transform"));
        assert!(!has_no_transform(b"no-store"));
    }
}
