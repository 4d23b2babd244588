//! What every phase needs to know about the downstream request, read once
//! from its head through the session's view.

use super::websocket_key::WebSocketKey;
use crate::http::RequestView;
use crate::http1::grammar::list_elements;
use crate::http1::parse::{BodyKind, Method, Version};

/// Whether `request` asks to switch protocols: a GET with `Upgrade` and
/// `Connection: upgrade` (an HTTP/2 extended CONNECT reads as one); its
/// answer is a tunnel or an error, never a stored response.
pub(crate) fn asks_upgrade(request: &RequestView<'_>) -> bool {
    request.method() == Method::Get
        && request.version() == Version::Http11
        && request.header("upgrade").is_some()
        && request
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"connection"))
            .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"upgrade")))
}

/// What the phases need to know about the downstream request.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestInfo {
    pub(super) method: Method,
    pub(super) body: BodyKind,
    pub(super) expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` field on a GET.
    pub(super) upgrade: bool,
    /// The key the upstream request carries in place of the client's: an
    /// HTTP/2 extended CONNECT for a WebSocket to an HTTP/1.1 upstream,
    /// which has none (RFC 8441 §5).
    pub(super) websocket_key: Option<WebSocketKey>,
    /// The upgrade goes to an HTTP/2 upstream as an extended CONNECT
    /// (RFC 8441 §4): the client's own extended CONNECT, or its HTTP/1.1
    /// `Upgrade: websocket`.
    pub(super) extended_connect: bool,
}

impl RequestInfo {
    /// What the phases need of `request`, whose group speaks HTTP/2 when
    /// `h2_upstream`.
    pub(super) fn new(request: &RequestView<'_>, h2_upstream: bool) -> Self {
        let method = request.method();
        let upgrade = asks_upgrade(request);
        let body = request.body_kind();
        let websocket = upgrade
            && request
                .header("upgrade")
                .is_some_and(|p| p.eq_ignore_ascii_case(b"websocket"));
        let websocket_key = (websocket && request.is_extended_connect() && !h2_upstream)
            .then(WebSocketKey::random)
            .flatten();
        // Any protocol an HTTP/2 client opens goes on as it came; of the
        // HTTP/1.1 upgrades only WebSocket has an extended CONNECT form.
        let extended_connect =
            h2_upstream && upgrade && (request.is_extended_connect() || websocket);
        RequestInfo {
            method,
            body,
            expect_continue: body != BodyKind::None
                && request
                    .header("expect")
                    .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue")),
            upgrade,
            websocket_key,
            extended_connect,
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
