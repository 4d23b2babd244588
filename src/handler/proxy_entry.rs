//! The proxy's entry from the request seam: it reads the request and answers
//! through the session alone, so any driver (HTTP/1 today, HTTP/2 beside it)
//! runs it unchanged.

use crate::http::{Served, Session};
use crate::observe::metrics::HandlerKind;

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
        match &self.cache {
            None => Served::Pending(Box::pin(proxy::forward(session, self))),
            Some(zone) => {
                Served::Pending(Box::pin(proxy::cached::forward_cached(session, self, zone)))
            }
        }
    }
}
