//! What every phase needs to know about the downstream request, read once
//! from its head through the session's view.

use super::websocket_key::WebSocketKey;
use crate::http::RequestView;
use crate::http1::grammar::list_elements;
use crate::http1::parse::{BodyKind, Method, Version};

/// What the phases need to know about the downstream request.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestInfo {
    pub(super) method: Method,
    pub(super) body: BodyKind,
    pub(super) expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` field on a GET.
    pub(super) upgrade: bool,
    /// The key the upstream request carries in place of the client's: an
    /// HTTP/2 extended CONNECT for a WebSocket, which has none (RFC 8441 §5).
    pub(super) websocket_key: Option<WebSocketKey>,
}

impl RequestInfo {
    pub(super) fn new(request: &RequestView<'_>) -> Self {
        let method = request.method();
        let version = request.version();
        let upgrade = method == Method::Get
            && version == Version::Http11
            && request.header("upgrade").is_some()
            && request
                .headers()
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
                .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"upgrade")));
        let body = request.body_kind();
        let websocket_key = (upgrade
            && request.is_extended_connect()
            && request
                .header("upgrade")
                .is_some_and(|p| p.eq_ignore_ascii_case(b"websocket")))
        .then(WebSocketKey::random)
        .flatten();
        RequestInfo {
            method,
            body,
            expect_continue: body != BodyKind::None
                && request
                    .header("expect")
                    .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue")),
            upgrade,
            websocket_key,
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
