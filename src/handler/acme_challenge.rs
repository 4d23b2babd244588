//! ACME HTTP-01 validations (RFC 8555 8.3) as a handler registered ahead of
//! the routes: a known token is answered with its key authorization; any other
//! path under the prefix is left to the routes (a certbot webroot still works).

use crate::http::{Body, ResponseHead, Served, Session};
use crate::observe::metrics::HandlerKind;
use crate::route::PreRoute;
use crate::tls::acme::http01::{answer, CHALLENGE_PREFIX};

use super::Handler;

/// Answers the tokens of validations in progress.
#[derive(Debug)]
pub struct AcmeChallenge;

impl AcmeChallenge {
    /// The registration ahead of the routes, on plain listeners (where HTTP-01
    /// validations arrive).
    pub fn pre_route() -> PreRoute {
        PreRoute {
            prefix: CHALLENGE_PREFIX.into(),
            plain_only: true,
            handler: Box::new(AcmeChallenge),
        }
    }
}

impl Handler for AcmeChallenge {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let path = session.request().path().to_vec();
        Served::Pending(Box::pin(async move {
            if let Some(key_authorization) = answer(&path).await {
                let fields = [("Content-Type", b"text/plain".as_slice())];
                session.send_response(
                    &ResponseHead::new(200, &fields),
                    Body::Owned(key_authorization),
                );
            }
        }))
    }
}
