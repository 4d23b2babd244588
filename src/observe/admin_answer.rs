//! Answers of the admin listener: JSON for `/api/` (one place for its fields,
//! never cached, never sniffed, and for the shape of an error), and sending
//! any page through the session.

use serde::Serialize;

use crate::http::{Body, ResponseHead, Served, Session};
use crate::observe::status::StatusResponse;

#[derive(Serialize)]
struct ErrorAnswer<'a> {
    error: &'a str,
}

/// `value` as pretty JSON with `status`.
pub fn json_answer(status: u16, value: &impl Serialize) -> StatusResponse {
    let body = serde_json::to_string_pretty(value).unwrap_or_default();
    StatusResponse {
        status,
        content_type: "application/json",
        headers: vec![
            ("cache-control", "no-store".into()),
            ("x-content-type-options", "nosniff".into()),
        ],
        body: body + "\n",
    }
}

/// `{"error": message}` with `status` (and `Allow` for a 405, a challenge
/// for a 401).
pub fn error_answer(status: u16, message: &str) -> StatusResponse {
    let mut r = json_answer(status, &ErrorAnswer { error: message });
    match status {
        405 => r.headers.push(("allow", "GET, HEAD, POST, DELETE".into())),
        401 => r
            .headers
            .push(("www-authenticate", "Bearer realm=\"pier admin\"".into())),
        _ => {}
    }
    r
}

/// Sends `page` as the whole answer.
pub fn send_page<'s>(session: &mut dyn Session<'_>, page: StatusResponse) -> Served<'s> {
    let mut fields: Vec<(&str, &[u8])> = Vec::with_capacity(page.headers.len() + 2);
    fields.push(("content-type", page.content_type.as_bytes()));
    if page.status == 405 && !page.headers.iter().any(|(n, _)| *n == "allow") {
        fields.push(("allow", b"GET, HEAD"));
    }
    fields.extend(page.headers.iter().map(|(n, v)| (*n, v.as_bytes())));
    session.send_response(
        &ResponseHead::new(page.status, &fields),
        Body::Owned(page.body.into_bytes()),
    );
    Served::Done
}
