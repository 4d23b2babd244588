//! `redirect`: answers every request with a redirect whose `Location` is a
//! template over the request (`https://{host}{uri}`), so moving a site to
//! HTTPS or to another host keeps each request's path and query, as nginx's
//! `return 301 https://$host$request_uri` and Caddy's `redir` do.

use crate::filter::placeholder::Template;
use crate::http::status::status_text;
use crate::http::{Body, ResponseHead, Served, Session};
use crate::observe::metrics::HandlerKind;

use super::Handler;

/// A redirect route: the status and the `Location` template.
#[derive(Debug)]
pub struct Redirect {
    status: u16,
    location: Template,
}

impl Redirect {
    /// `status` is one of 301, 302, 303, 307, 308 (checked by the configuration).
    pub fn new(status: u16, location: Template) -> Self {
        Redirect { status, location }
    }
}

impl Handler for Redirect {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Redirect
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let expanded;
        let location: &[u8] = match self.location.as_literal() {
            Some(fixed) => fixed,
            None => {
                let mut out = Vec::with_capacity(128);
                self.location
                    .expand(&session.request(), session.request_id(), &mut out);
                expanded = out;
                &expanded
            }
        };
        let fields = [
            ("Location", location),
            ("Content-Type", b"text/plain; charset=utf-8".as_slice()),
        ];
        session.send_response(
            &ResponseHead::new(self.status, &fields),
            Body::Bytes(status_text(self.status)),
        );
        Served::Done
    }
}
