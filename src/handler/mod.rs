//! Request handlers, each written against the protocol-neutral
//! [`Session`]: a driver routes a request and calls its handler through the
//! [`Handler`] trait, so adding a handler touches no driver. Each handler's
//! runtime code and its configuration (its keys' raw struct and their checks)
//! sit side by side, as in h2o, and `registry.rs` lists the handlers a route
//! may name, so adding one touches no configuration code either.

pub mod acme_challenge;
pub mod configure;
pub mod https_redirect;
pub mod mime;
pub mod mime_table;
pub mod proxy;
mod proxy_entry;
pub mod redirect;
pub mod redirect_configure;
pub mod registry;
pub mod respond;
pub mod respond_configure;
pub mod static_configure;
pub mod static_files;

use std::fmt;

use crate::http::{Served, Session};
use crate::observe::metrics::HandlerKind;

/// A route's handler, as the route table holds it.
pub type BoxedHandler = Box<dyn Handler>;

/// What serves a route. Built once from the configuration and shared by every
/// worker, so per-worker state lives in the worker context, not here.
pub trait Handler: fmt::Debug + Send + Sync {
    /// Which handler this is, for the request metrics and logs.
    fn kind(&self) -> HandlerKind;

    /// Whether the handler reads the request body itself. Otherwise the driver
    /// reads and drops it (under the body limit) before calling [`Handler::serve`].
    fn reads_body(&self) -> bool {
        false
    }

    /// Answers one request through `session`. A handler that can answer from
    /// the head alone gives its response and returns [`Served::Done`] without
    /// allocating; one that must wait returns the future that answers.
    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s>;

    /// Whether [`Handler::serve`] always answers before it returns (always
    /// [`Served::Done`]): route filters around such a handler then run
    /// without a future of their own.
    fn answers_at_once(&self) -> bool {
        false
    }
}
