//! The redirect a site served on both TLS and plain listeners gives on its
//! plain ones: `308 Permanent Redirect` to the same host, path and query over
//! HTTPS, on the TLS listener's port when it is not 443 (as Caddy does by
//! itself, and nginx's `return 308 https://$host$request_uri`).

use crate::http::status::status_text;
use crate::http::{Body, ResponseHead, Served, Session};
use crate::observe::metrics::HandlerKind;

use super::Handler;

/// A site's redirect to HTTPS.
#[derive(Debug)]
pub struct HttpsRedirect {
    /// The TLS listener's port, when it is not 443.
    port: Option<u16>,
    /// The host for requests that name none (HTTP/1.0): the site's first name.
    fallback_host: Option<String>,
}

impl HttpsRedirect {
    /// To HTTPS on `port`; `fallback_host` for requests without a host.
    pub fn new(port: u16, fallback_host: Option<String>) -> Self {
        HttpsRedirect {
            port: (port != 443).then_some(port),
            fallback_host,
        }
    }

    /// The `Location` for a request to `host` (without port) and `target`
    /// (path and query).
    fn location(&self, host: &[u8], target: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + host.len() + target.len());
        out.extend_from_slice(b"https://");
        out.extend_from_slice(host);
        if let Some(port) = self.port {
            out.extend_from_slice(format!(":{port}").as_bytes());
        }
        out.extend_from_slice(target);
        out
    }
}

impl Handler for HttpsRedirect {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Redirect
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let req = session.request();
        let host = req
            .host_name()
            .or_else(|| self.fallback_host.as_deref().map(str::as_bytes));
        // An absolute-form target keeps only its path and query.
        let target = match req.query() {
            Some(q) if !q.is_empty() => [req.path(), b"?", q].concat(),
            _ => req.path().to_vec(),
        };
        let Some(host) = host.filter(|h| is_plain_host(h)) else {
            session.send_response(&ResponseHead::new(400, &[]), Body::Bytes(status_text(400)));
            return Served::Done;
        };
        let location = self.location(host, &target);
        let fields = [
            ("Location", location.as_slice()),
            ("Content-Type", b"text/plain; charset=utf-8".as_slice()),
        ];
        session.send_response(
            &ResponseHead::new(308, &fields),
            Body::Bytes(status_text(308)),
        );
        Served::Done
    }
}

/// A host name or address literal that may go into a URL as it is (the
/// request's `Host` is the client's to choose).
fn is_plain_host(host: &[u8]) -> bool {
    !host.is_empty()
        && host
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_location_keeps_host_path_and_query_and_names_a_port_other_than_443() {
        let r = HttpsRedirect::new(443, None);
        assert_eq!(
            r.location(b"site.test", b"/a?b=c"),
            b"https://site.test/a?b=c"
        );
        let r = HttpsRedirect::new(8443, None);
        assert_eq!(r.location(b"site.test", b"/"), b"https://site.test:8443/");
        assert!(!is_plain_host(b"evil.test/x"));
        assert!(is_plain_host(b"[::1]"));
    }
}
