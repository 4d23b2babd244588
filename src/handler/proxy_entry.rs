//! The proxy's entry from the request seam. The proxy still drives the HTTP/1
//! connection directly (reading the body from its buffer, writing the response
//! into its output), so this asks the session for that connection; it goes
//! away once the proxy reads the body and writes its answer through the session.

use crate::http::{Served, Session};
use crate::observe::metrics::HandlerKind;
use crate::server::h1::LegacyHttp1;

use super::proxy::{self, ProxyRoute};
use super::Handler;

impl Handler for ProxyRoute {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Proxy
    }

    fn reads_body(&self) -> bool {
        true
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        // Boxed: the proxy's state machine is large, and inlining it would grow
        // every connection's future, static and fixed responses included.
        Served::Pending(Box::pin(async move {
            match session.legacy_http1() {
                Some(LegacyHttp1::Plain(conn)) => {
                    conn.outcome = Some(proxy::forward(conn, self).await);
                }
                Some(LegacyHttp1::Tls(conn)) => {
                    conn.outcome = Some(proxy::forward(conn, self).await);
                }
                None => {
                    let fields = [("Content-Type", b"text/plain; charset=utf-8".as_slice())];
                    session.send_response(
                        &crate::http::ResponseHead::new(502, &fields),
                        crate::http::Body::Bytes(crate::http::status::status_text(502)),
                    );
                }
            }
        }))
    }
}
