//! Phase 3 for `protocol = "h2"` groups: the upstream request as HTTP/2
//! pseudo-fields and fields, from the field list the one request rewrite
//! writes for every protocol (so forwarding fields, request rules and
//! hop-by-hop removal are decided in one place, and no head is parsed
//! again); and the gRPC conventions the proxy honours: `grpc-timeout` as the
//! request's deadline, and errors of its own answered as gRPC statuses.

use std::time::Duration;

use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use http::{Method, Request, Uri};

use crate::http::{Body, RequestView, ResponseHead, Session};
use crate::http1::grammar::list_elements;
use crate::upstream::request_head::FieldList;

/// Why a head could not be carried over HTTP/2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotH2(pub &'static str);

/// Builds the HTTP/2 request from `head`, the rewritten request: its
/// authority becomes `:authority`, connection-specific fields go (RFC 9113
/// §8.2.2), a declared body length is `content-length`, and `te: trailers`
/// is kept when the client sent it (gRPC servers ask for it).
pub fn h2_request(
    head: &FieldList,
    request: &RequestView<'_>,
    secure_upstream: bool,
) -> Result<Request<()>, NotH2> {
    let method = Method::from_bytes(head.method()).map_err(|_| NotH2("method"))?;
    let mut builder = Request::builder().method(method);
    for (name, value) in head.fields() {
        let name = HeaderName::from_bytes(name).map_err(|_| NotH2("field name"))?;
        if matches!(
            name.as_str(),
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "upgrade"
                | "te"
        ) {
            continue;
        }
        let value = HeaderValue::from_bytes(value).map_err(|_| NotH2("field value"))?;
        builder = builder.header(name, value);
    }
    if let Some(n) = head.content_length() {
        builder = builder.header(CONTENT_LENGTH, n);
    }
    let te_trailers = request
        .headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"te"))
        .any(|(_, v)| list_elements(v).any(|t| t.eq_ignore_ascii_case(b"trailers")));
    if te_trailers {
        builder = builder.header("te", "trailers");
    }
    let target = head.path();
    let target = if target == b"*" { b"/" } else { target };
    let uri = Uri::builder()
        .scheme(if secure_upstream { "https" } else { "http" })
        .authority(head.authority())
        .path_and_query(target)
        .build()
        .map_err(|_| NotH2("request target"))?;
    builder.uri(uri).body(()).map_err(|_| NotH2("request"))
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
        let req = h2_request(&list, &view, false).unwrap();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(
            req.uri().to_string(),
            "http://app.internal:50051/pkg.Svc/Call?x=1"
        );
        let h = req.headers();
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["x-forwarded-for"], "192.0.2.1");
        assert_eq!(h["te"], "trailers");
        assert!(h.get("host").is_none());
        assert!(h.get("connection").is_none());
        assert!(h.get("transfer-encoding").is_none());
    }

    #[test]
    fn te_without_trailers_is_not_sent_and_tls_is_https() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nTE: gzip\r\n\r\n";
        let mut head = RequestHead::new();
        let view = view_of(raw, &mut head);
        let mut list = FieldList::default();
        list.start(b"GET", b"/", None, b"a");
        list.finish(BodyKind::Length(3), None);
        let req = h2_request(&list, &view, true).unwrap();
        assert_eq!(req.headers()["content-length"], "3");
        assert!(req.headers().get("te").is_none());
        assert_eq!(req.uri().scheme_str(), Some("https"));
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
