//! Access control of a route: the request filters that run first, before
//! the route's other filters and its handler: `allow` / `deny` address rules
//! (403), `rate_limit` (429 with `Retry-After`; counted in this instance, or
//! in a store shared by a fleet) and `basic_auth` (401 with
//! `WWW-Authenticate`), in that order. Each is built from the route's keys by
//! [`configure`] and shared by the workers; the rate limit's and the
//! authentication's state live in them, lock-free; a reload keeps the rate
//! limits' counts of rules it finds unchanged, and the rest goes with its
//! configuration generation.

pub mod address;
pub mod basic_auth;
pub mod configure;
pub mod hash_pool;
pub mod rate_limit;
pub mod rate_reload;
pub mod rate_store;
pub mod shared_rate_limit;

use std::borrow::Cow;

use crate::http::{Body, ResponseHead, Session};

/// A check's answer that stops the request: its status and the one field that
/// tells the client what to do (`WWW-Authenticate`, `Retry-After`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal<'h> {
    /// 401, 403, 429 or 503.
    pub status: u16,
    /// A field sent with the status page, borrowed from the configuration when
    /// it is fixed (a realm) or built for this answer (a delay).
    pub field: Option<(&'static str, Cow<'h, [u8]>)>,
}

impl Refusal<'_> {
    /// A refusal with no field of its own (403).
    pub fn status(status: u16) -> Self {
        Refusal {
            status,
            field: None,
        }
    }

    /// Answers the request with the status page and the field, through the
    /// route's filtering session (so header rules with `always` apply to it).
    pub fn answer<'h>(&self, session: &mut dyn Session<'h>) {
        let text = crate::http::status::status_text(self.status);
        let content_type: (&str, &[u8]) = ("Content-Type", b"text/plain; charset=utf-8");
        let with_field;
        let fields: &[(&str, &[u8])] = match &self.field {
            Some((name, value)) => {
                with_field = [content_type, (name, &**value)];
                &with_field
            }
            None => std::slice::from_ref(&content_type),
        };
        session.send_response(&ResponseHead::new(self.status, fields), Body::Bytes(text));
    }
}
