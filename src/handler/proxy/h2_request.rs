//! Phase 3 for `protocol = "h2"` groups: the upstream request as HTTP/2
//! pseudo-fields and fields, from the field list the one request rewrite
//! writes for every protocol (so forwarding fields, request rules and
//! hop-by-hop removal are decided in one place, and no head is parsed
//! again); and the gRPC conventions the proxy honours: `grpc-timeout` as the
//! request's deadline, and errors of its own answered as gRPC statuses.

use std::time::Duration;

use crate::http::{Body, RequestView, ResponseHead, Session};
use crate::http1::grammar::list_elements;
use crate::upstream::request_head::FieldList;

/// Why a head could not be carried over HTTP/2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotH2(pub &'static str);

/// The upstream request as it goes into a stream: the pseudo fields and the
/// fields of the rewritten head, borrowed from it (no head is built again).
#[derive(Debug)]
pub struct H2RequestHead<'a> {
    /// `:method` (`CONNECT` for an extended CONNECT).
    pub method: &'a [u8],
    /// `:protocol`: the request opens a tunnel by extended CONNECT
    /// (RFC 8441 §4).
    pub protocol: Option<&'a [u8]>,
    /// `:scheme`: `https` to a TLS upstream.
    pub scheme: &'static [u8],
    /// `:authority`.
    pub authority: &'a [u8],
    /// `:path`, with the query.
    pub path: &'a [u8],
    list: &'a FieldList,
    /// The declared body length in digits, and how many there are.
    content_length: ([u8; 20], usize),
    te_trailers: bool,
}

impl H2RequestHead<'_> {
    /// The regular fields: the rewritten head's without the
    /// connection-specific ones (RFC 9113 §8.2.2), then `content-length`
    /// when the body declared one, then `te: trailers` when the client asked
    /// for trailers (gRPC servers want it).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let (digits, n) = &self.content_length;
        let length = (*n > 0).then(|| (&b"content-length"[..], &digits[digits.len() - n..]));
        let te = self.te_trailers.then_some((&b"te"[..], &b"trailers"[..]));
        self.list
            .fields()
            .filter(|(name, _)| !is_connection_specific(name))
            .chain(length)
            .chain(te)
    }
}

/// Fields HTTP/2 does not carry (RFC 9113 §8.2.2); `te` is sent again
/// only as `te: trailers`.
fn is_connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection"
            | b"keep-alive"
            | b"proxy-connection"
            | b"transfer-encoding"
            | b"upgrade"
            | b"te"
    )
}

/// A token (RFC 9110 §5.6.2) in lowercase: a field name HTTP/2 carries.
fn is_lower_token(b: &[u8]) -> bool {
    !b.is_empty()
        && b.iter().all(|&c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&c)
        })
}

/// A field value HTTP/2 carries well-formed (RFC 9113 §8.2.1, RFC 9110
/// §5.5): no control character but HTAB, and no whitespace at either end.
fn is_field_value(v: &[u8]) -> bool {
    let edge = |c: Option<&u8>| matches!(c, Some(b' ' | b'\t'));
    !edge(v.first()) && !edge(v.last()) && !v.iter().any(|&c| (c < b' ' && c != b'\t') || c == 0x7f)
}

/// Bytes a `:path` or `:authority` may not hold: controls and space.
fn has_control(b: &[u8]) -> bool {
    b.iter().any(|&c| c <= b' ' || c == 0x7f)
}

/// Takes the HTTP/2 request from `head`, the rewritten request: its
/// authority becomes `:authority`, connection-specific fields go (RFC 9113
/// §8.2.2), a declared body length is `content-length`, and `te: trailers`
/// is kept when the client sent it (gRPC servers ask for it). A head HTTP/2
/// cannot carry (a field name or value it forbids, a target that is not a
/// path) is refused.
pub fn h2_request<'a>(
    head: &'a FieldList,
    request: &RequestView<'_>,
    secure_upstream: bool,
    protocol: Option<&'a [u8]>,
) -> Result<H2RequestHead<'a>, NotH2> {
    let method = head.method();
    if method.is_empty()
        || !method
            .iter()
            .all(|c| c.is_ascii_uppercase() || is_lower_token(&[*c]))
    {
        return Err(NotH2("method"));
    }
    for (name, value) in head.fields() {
        if !is_lower_token(name) {
            return Err(NotH2("field name"));
        }
        if !is_field_value(value) {
            return Err(NotH2("field value"));
        }
    }
    let path = match head.path() {
        b"*" => &b"/"[..],
        p => p,
    };
    let authority = head.authority();
    if !path.starts_with(b"/") || has_control(path) {
        return Err(NotH2("request target"));
    }
    if authority.is_empty() || has_control(authority) || authority.contains(&b'/') {
        return Err(NotH2("request target"));
    }
    let mut content_length = ([0u8; 20], 0);
    if let Some(mut n) = head.content_length() {
        let (digits, len) = &mut content_length;
        loop {
            *len += 1;
            digits[20 - *len] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
    }
    let te_trailers = request
        .headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"te"))
        .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"trailers")));
    if protocol.is_some_and(|p| p.is_empty() || !is_field_value(p)) {
        return Err(NotH2("protocol"));
    }
    Ok(H2RequestHead {
        method: if protocol.is_some() {
            b"CONNECT"
        } else {
            method
        },
        protocol,
        scheme: if secure_upstream { b"https" } else { b"http" },
        authority,
        path,
        list: head,
        content_length,
        te_trailers,
    })
}

/// The `:protocol` of the extended CONNECT that carries `request` to an
/// HTTP/2 upstream: an HTTP/2 client's own, or `websocket` for an HTTP/1.1
/// WebSocket upgrade (RFC 8441 §5).
pub fn connect_protocol<'a>(request: &RequestView<'a>) -> &'a [u8] {
    match request.header("upgrade") {
        Some(p) if request.is_extended_connect() => p,
        _ => b"websocket",
    }
}

/// Whether the request is a gRPC call (`content-type: application/grpc...`).
pub fn is_grpc(request: &RequestView<'_>) -> bool {
    request
        .header("content-type")
        .is_some_and(|v| v.len() >= 16 && v[..16].eq_ignore_ascii_case(b"application/grpc"))
}

/// The call's deadline from `grpc-timeout` (1 to 8 digits and a unit: `H`
/// hours, `M` minutes, `S` seconds, `m` milli-, `u` micro-, `n`
/// nanoseconds); `None` when absent or not of that form.
pub fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The gRPC status code (and message) standing for an HTTP status the proxy
/// answers itself: 504 is `DEADLINE_EXCEEDED`, 502 and 503 `UNAVAILABLE`, as
/// the gRPC HTTP/2 mapping has it.
pub fn grpc_status_for(status: u16) -> (&'static [u8], &'static [u8]) {
    match status {
        504 => (b"4", b"Deadline Exceeded"),
        502 | 503 => (b"14", b"upstream unavailable"),
        _ => (b"13", b"proxy error"),
    }
}

/// Answers a gRPC call the proxy could not relay as gRPC clients expect: a
/// trailers-only response (HTTP 200, `grpc-status` and `grpc-message` in the
/// head, no body) standing for the HTTP status `status`.
pub fn answer_grpc_error(session: &mut dyn Session<'_>, status: u16) {
    let (code, message) = grpc_status_for(status);
    let fields: [(&str, &[u8]); 3] = [
        ("content-type", b"application/grpc"),
        ("grpc-status", code),
        ("grpc-message", message),
    ];
    session.send_response(&ResponseHead::new(200, &fields), Body::Empty);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::parse::BodyKind;
    use crate::http1::parse::{parse_request, RequestHead};
    use crate::http1::Limits;
    use crate::upstream::request_head::RequestHeadSink;

    fn fields_of<'r>(req: &'r H2RequestHead<'_>) -> Vec<(&'r str, &'r str)> {
        req.fields()
            .map(|(n, v)| {
                (
                    std::str::from_utf8(n).unwrap(),
                    std::str::from_utf8(v).unwrap(),
                )
            })
            .collect()
    }

    fn view_of<'a>(raw: &'a [u8], head: &'a mut RequestHead) -> RequestView<'a> {
        parse_request(raw, &Limits::default(), head).unwrap();
        RequestView::http1(head, raw, "192.0.2.1:4000".parse().unwrap(), None)
    }

    #[test]
    fn grpc_timeout_units_and_bad_forms() {
        assert_eq!(grpc_timeout(b"5S"), Some(Duration::from_secs(5)));
        assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(grpc_timeout(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(grpc_timeout(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(
            grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(grpc_timeout(b"10u"), Some(Duration::from_micros(10)));
        assert_eq!(grpc_timeout(b"123456789S"), None, "nine digits");
        assert_eq!(grpc_timeout(b"S"), None);
        assert_eq!(grpc_timeout(b"5s"), None, "units are case-sensitive");
        assert_eq!(grpc_timeout(b"-5S"), None);
        assert_eq!(grpc_timeout(b""), None);
    }

    #[test]
    fn rewritten_head_becomes_pseudo_fields_without_connection_fields() {
        let raw = b"POST /pkg.Svc/Call?x=1 HTTP/1.1\r\nHost: client.test\r\nTE: trailers, deflate\r\nContent-Type: application/grpc\r\n\r\n";
        let mut head = RequestHead::new();
        let view = view_of(raw, &mut head);
        let mut list = FieldList::default();
        list.start(
            b"POST",
            b"/pkg.Svc/Call",
            Some(b"x=1"),
            b"app.internal:50051",
        );
        list.field(b"Content-Type", b"application/grpc");
        list.field(b"X-Forwarded-For", b"192.0.2.1");
        list.field(b"Connection", b"keep-alive");
        list.finish(BodyKind::Chunked, None);
        let req = h2_request(&list, &view, false, None).unwrap();
        assert_eq!(req.method, b"POST");
        assert_eq!(req.scheme, b"http");
        assert_eq!(req.authority, b"app.internal:50051");
        assert_eq!(req.path, b"/pkg.Svc/Call?x=1");
        let h = fields_of(&req);
        assert_eq!(
            h,
            [
                ("content-type", "application/grpc"),
                ("x-forwarded-for", "192.0.2.1"),
                ("te", "trailers")
            ]
        );
    }

    #[test]
    fn an_upgrade_goes_as_an_extended_connect_with_its_protocol() {
        // An HTTP/1.1 WebSocket handshake: CONNECT with :protocol websocket
        // (RFC 8441 §5), the Upgrade and Connection fields left out.
        let raw = b"GET /chat HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let mut head = RequestHead::new();
        let view = view_of(raw, &mut head);
        assert_eq!(connect_protocol(&view), b"websocket");
        let mut list = FieldList::default();
        list.start(b"GET", b"/chat", None, b"a.test");
        list.field(b"Sec-WebSocket-Version", b"13");
        list.finish(BodyKind::None, Some(b"WebSocket"));
        let req = h2_request(&list, &view, true, Some(b"websocket")).unwrap();
        assert_eq!(req.method, b"CONNECT");
        assert_eq!(req.protocol, Some(&b"websocket"[..]));
        assert_eq!((req.scheme, req.path), (&b"https"[..], &b"/chat"[..]));
        assert_eq!(fields_of(&req), [("sec-websocket-version", "13")]);
        // Without a protocol, the method stays; a protocol HTTP/2 cannot
        // carry is refused.
        assert_eq!(h2_request(&list, &view, true, None).unwrap().method, b"GET");
        assert_eq!(
            h2_request(&list, &view, true, Some(b"web\nsocket")).unwrap_err(),
            NotH2("protocol")
        );
        assert_eq!(
            h2_request(&list, &view, true, Some(b"")).unwrap_err(),
            NotH2("protocol")
        );
    }

    #[test]
    fn te_without_trailers_is_not_sent_and_tls_is_https() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nTE: gzip\r\n\r\n";
        let mut head = RequestHead::new();
        let view = view_of(raw, &mut head);
        let mut list = FieldList::default();
        list.start(b"GET", b"/", None, b"a");
        list.finish(BodyKind::Length(3), None);
        let req = h2_request(&list, &view, true, None).unwrap();
        assert_eq!(fields_of(&req), [("content-length", "3")]);
        assert_eq!(req.scheme, b"https");
    }

    #[test]
    fn heads_http2_cannot_carry_are_refused() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut head = RequestHead::new();
        let view = view_of(raw, &mut head);
        let mut list = FieldList::default();
        list.start(b"GET", b"/", None, b"a");
        list.field(b"X-Bad", b"a\nb");
        assert_eq!(
            h2_request(&list, &view, false, None).unwrap_err(),
            NotH2("field value")
        );
        list.clear();
        list.start(b"GET", b"/", None, b"a b");
        assert_eq!(
            h2_request(&list, &view, false, None).unwrap_err(),
            NotH2("request target")
        );
        list.clear();
        list.start(b"GET", b"*", None, b"a");
        assert_eq!(h2_request(&list, &view, false, None).unwrap().path, b"/");
        list.clear();
        list.start(b"GET", b"/", None, b"a");
        list.finish(BodyKind::Length(1234567890), None);
        assert_eq!(
            fields_of(&h2_request(&list, &view, false, None).unwrap()),
            [("content-length", "1234567890")]
        );
    }

    #[test]
    fn field_values_with_controls_or_edge_whitespace_are_not_carried() {
        assert!(is_field_value(b"a b\tc"));
        assert!(is_field_value(b""));
        for bad in [
            &b"v "[..],
            b" v",
            b"\tv",
            b"a\x01b",
            b"a\x7fb",
            b"a\rb",
            b"a\0b",
        ] {
            assert!(!is_field_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn grpc_detection() {
        let raw = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc+proto\r\n\r\n";
        let mut head = RequestHead::new();
        assert!(is_grpc(&view_of(raw, &mut head)));
        let raw = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n\r\n";
        let mut head = RequestHead::new();
        assert!(!is_grpc(&view_of(raw, &mut head)));
    }
}
