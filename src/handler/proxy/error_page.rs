//! Custom error pages of a proxy route (`error_pages = { 502 = "/srv/50x.html" }`,
//! the key static routes use): an upstream's 5xx and Pier's own 502/503/504
//! are answered with the configured page and the same status, as nginx's
//! `proxy_intercept_errors` with `error_page` or HAProxy's `errorfile` do.
//! A proxy route has no document root, so each page is a file read whole when
//! the configuration loads (a reload reads it again): answering one costs no
//! disk access and cannot fail. The intercepted upstream body never reaches
//! the client; the upstream connection goes back to the pool only when that
//! body was already read whole, and is closed otherwise, so no connection is
//! reused in the middle of a message.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::attempts::ExchangeBufs;
use crate::config::error::{ConfigError, Locator};
use crate::config::value::read_named_file;
use crate::handler::mime_table::MimeTable;
use crate::handler::static_configure::error_page_status;
use crate::http::{Body, ResponseHead, Session};
use crate::http1::body::BodyDecoder;
use crate::http1::parse::BodyKind;
use crate::http1::response::ResponseBody;

/// Largest error page read: pages are held in memory by every configuration.
const MAX_ERROR_PAGE: u64 = 1024 * 1024;

/// One page: its bytes and the content type its file name gives.
#[derive(Debug)]
pub struct ProxyErrorPage {
    body: Box<[u8]>,
    content_type: &'static str,
}

/// A route's pages by status; empty when it configures none.
#[derive(Debug, Default)]
pub struct ProxyErrorPages {
    pages: Box<[(u16, ProxyErrorPage)]>,
}

impl ProxyErrorPages {
    /// The page configured for `status`, if any.
    pub fn page(&self, status: u16) -> Option<&ProxyErrorPage> {
        if self.pages.is_empty() {
            return None;
        }
        self.pages
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, p)| p)
    }

    /// Whether an upstream response with `status` is replaced by a page: only
    /// server errors are, so a 404 or a 401 with its challenge passes as sent.
    pub fn intercepts(&self, status: u16) -> bool {
        status >= 500 && self.page(status).is_some()
    }
}

/// Answers with the page of `status` when the route has one, else with the
/// status as a text body and `extra` fields. `Retry-After` (a busy group's
/// 503) goes with the page too.
pub(super) fn answer_with_page<'h>(
    session: &mut dyn Session<'h>,
    pages: &'h ProxyErrorPages,
    status: u16,
    extra: Option<(&str, &[u8])>,
) {
    let (content_type, body) = match pages.page(status) {
        Some(page) => (page.content_type.as_bytes(), Body::Bytes(&page.body)),
        None => (
            &b"text/plain; charset=utf-8"[..],
            Body::Bytes(crate::http::status::status_text(status)),
        ),
    };
    let mut fields: [(&str, &[u8]); 2] = [("Content-Type", content_type); 2];
    let n = match extra {
        Some(f) => {
            fields[1] = f;
            2
        }
        None => 1,
    };
    session.send_response(&ResponseHead::new(status, &fields[..n]), body);
}

/// Whether the body of the upstream response in `bufs` is already read whole
/// (so the connection is at the end of the message and may be reused); it is
/// then dropped with the buffer.
pub(super) fn body_fully_read(bufs: &ExchangeBufs) -> bool {
    let rest = &bufs.up_read[bufs.resp.head_len.min(bufs.up_read.len())..];
    match bufs.resp.body {
        ResponseBody::None => rest.is_empty(),
        ResponseBody::Length(n) => rest.len() as u64 == n,
        ResponseBody::Chunked => {
            let mut decoder = BodyDecoder::new(BodyKind::Chunked);
            let mut pos = 0;
            while pos < rest.len() {
                match decoder.decode(&rest[pos..]) {
                    Ok(step) if step.done => return pos + step.consumed == rest.len(),
                    Ok(step) if step.consumed > 0 => pos += step.consumed,
                    _ => return false,
                }
            }
            false
        }
        // Its end is the connection's: never reusable.
        ResponseBody::UntilClose => false,
    }
}

/// Reads a proxy route's `error_pages` table: statuses 400-599 and files,
/// each read now. `key` names the route.
pub fn build_error_pages(
    loc: &Locator<'_>,
    key: &str,
    raw: Option<&Spanned<BTreeMap<String, Spanned<String>>>>,
    mime: &MimeTable,
) -> Result<ProxyErrorPages, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ProxyErrorPages::default());
    };
    let mut pages = Vec::new();
    for (status, file) in raw.get_ref() {
        let at = format!("{key}.error_pages.{status}");
        let code = error_page_status(loc, &at, status, file.span())?;
        let path = file.get_ref();
        let error = |span: Range<usize>, m: String| loc.error(span, &at, m);
        let body = read_named_file(path, MAX_ERROR_PAGE)
            .map_err(|e| error(file.span(), format!("cannot read the page {path}: {e}")))?;
        let name = path.rsplit('/').next().unwrap_or(path);
        pages.push((
            code,
            ProxyErrorPage {
                body: body.into_boxed_slice(),
                content_type: mime.for_file_name(name.as_bytes()),
            },
        ));
    }
    Ok(ProxyErrorPages {
        pages: pages.into_boxed_slice(),
    })
}
