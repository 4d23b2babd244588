//! What every phase needs to know about the downstream request, read once
//! from its head.

use crate::http1::grammar::list_elements;
use crate::http1::parse::{BodyKind, Method, RequestHead, Version};

/// What the phases need to know about the downstream request once its head is consumed.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestInfo {
    pub(super) method: Method,
    pub(super) version: Version,
    pub(super) keep_alive: bool,
    pub(super) body: BodyKind,
    pub(super) expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` field on a GET.
    pub(super) upgrade: bool,
}

impl RequestInfo {
    pub(super) fn new(head: &RequestHead, req: &[u8]) -> Self {
        let upgrade = head.method == Method::Get
            && head.version == Version::Http11
            && head.header(req, "upgrade").is_some()
            && head
                .headers(req)
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
                .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"upgrade")));
        RequestInfo {
            method: head.method,
            version: head.version,
            keep_alive: head.keep_alive,
            body: head.body,
            expect_continue: head.expect_continue,
            upgrade,
        }
    }

    /// RFC 9110 §9.2.2: safe to send twice.
    pub(super) fn idempotent(&self) -> bool {
        matches!(
            self.method,
            Method::Get
                | Method::Head
                | Method::Put
                | Method::Delete
                | Method::Options
                | Method::Trace
        )
    }
}
