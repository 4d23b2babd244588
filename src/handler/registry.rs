//! The handlers a route may name. A handler's keys, checks and builder live
//! in its own files; adding one adds its line here, and a variant of
//! `HandlerKind` if it is to count under a label of its own.

use super::configure::HandlerSpec;

/// Every handler a route may name, in the order errors list them.
pub const HANDLERS: &[HandlerSpec] = &[
    super::static_configure::STATIC,
    super::respond_configure::RESPOND,
    super::proxy::configure::PROXY,
    super::redirect_configure::REDIRECT,
];
