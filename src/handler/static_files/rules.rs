//! What a static route does beyond mapping a path to a file: hidden
//! dot-files, `try_files` fallbacks (a single-page app's `/index.html` for
//! every unknown path), custom error pages, the listing's format and the
//! route's content types. Set once from the configuration.

use std::sync::Arc;

use super::reply::{Reply, StaticRequest};
use super::StaticFiles;
use crate::handler::mime_table::MimeTable;
use crate::http::content_coding::Coding;

/// A static route's rules; the default is what a route without them gets.
#[derive(Debug)]
pub struct StaticRules {
    /// Serve paths with a segment starting with `.` (else 404, except
    /// `/.well-known/`).
    pub allow_hidden: bool,
    /// Paths tried in order, `{path}` standing for the request's; the first
    /// that is not a 404 answers. Empty: the request's path only.
    pub try_files: Box<[Box<str>]>,
    /// Status -> path under the root of the page sent with that status.
    pub error_pages: Box<[(u16, Box<[u8]>)]>,
    /// Listings are JSON whatever the request asks for.
    pub autoindex_json: bool,
    /// Content types by extension.
    pub mime: Arc<MimeTable>,
    /// Codings whose precompressed siblings are served, preferred in this
    /// order on equal weights; empty: none are looked for.
    pub precompressed: Box<[Coding]>,
}

impl Default for StaticRules {
    fn default() -> Self {
        StaticRules {
            allow_hidden: false,
            try_files: Box::default(),
            error_pages: Box::default(),
            autoindex_json: false,
            mime: Arc::new(MimeTable::new()),
            precompressed: Box::default(),
        }
    }
}

/// The segment exempt from hiding: RFC 8615 well-known URIs.
const WELL_KNOWN: &[u8] = b".well-known";

/// Whether a decoded path segment is hidden by the rules; `first` says it is
/// the path's first segment (only `/.well-known/` is exempt, not
/// `/a/.well-known/`).
pub(super) fn is_hidden(segment: &[u8], first: bool) -> bool {
    segment.first() == Some(&b'.') && !(first && segment == WELL_KNOWN)
}

impl StaticFiles {
    /// Decides the reply under the route's rules: `try_files`, then the
    /// error page for an error status.
    pub fn decide(&self, req: &StaticRequest<'_>) -> Reply {
        let reply = if self.rules.try_files.is_empty() || !req.method_allowed {
            self.reply_for(req)
        } else {
            self.try_files(req)
        };
        match reply {
            Reply::Error(status) => self.error_page(req, status),
            other => other,
        }
    }

    /// Each `try_files` entry in turn; the last one answers whatever it is.
    fn try_files(&self, req: &StaticRequest<'_>) -> Reply {
        let mut path = Vec::with_capacity(req.path.len() + 16);
        let last = self.rules.try_files.len() - 1;
        for (i, entry) in self.rules.try_files.iter().enumerate() {
            path.clear();
            let mut parts = entry.split("{path}");
            path.extend_from_slice(parts.next().unwrap_or("").as_bytes());
            for part in parts {
                path.extend_from_slice(req.path);
                path.extend_from_slice(part.as_bytes());
            }
            let reply = self.reply_for(&StaticRequest {
                path: &path,
                ..*req
            });
            if i == last || !matches!(reply, Reply::Error(404)) {
                return reply;
            }
        }
        Reply::Error(404)
    }

    /// The configured page for `status`, sent with that status; the plain
    /// status text when there is none or it cannot be served.
    fn error_page(&self, req: &StaticRequest<'_>, status: u16) -> Reply {
        let Some((_, page)) = self.rules.error_pages.iter().find(|(s, _)| *s == status) else {
            return Reply::Error(status);
        };
        let page_req = StaticRequest {
            is_head: req.is_head,
            method_allowed: true,
            path: page,
            open_files: req.open_files,
            off_loop: req.off_loop,
            now: req.now,
            ..StaticRequest::default()
        };
        match self.reply_for(&page_req) {
            Reply::File(mut f) if f.status == 200 => {
                f.status = status;
                Reply::File(f)
            }
            // The page is opened off the loop, then the request decided again.
            blocked @ Reply::Blocked(_) => blocked,
            _ => Reply::Error(status),
        }
    }
}
