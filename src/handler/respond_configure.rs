//! The configuration of the `respond` handler, beside the handler: its keys
//! as written ([`RawRespond`]), status, body and header fields checked and
//! turned into a [`Respond`].

use std::any::Any;
use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::http1::grammar::is_token;

use super::configure::{HandlerSpec, RawHandler, RouteContext};
use super::respond::Respond;
use super::BoxedHandler;

/// `handler = "respond"`.
pub const RESPOND: HandlerSpec = HandlerSpec::new::<RawRespond>("respond");

/// The keys of a `respond` route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRespond {
    /// Status code.
    pub status: Option<Spanned<i64>>,
    /// Body.
    pub body: Option<Spanned<String>>,
    /// Extra header fields.
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
}

impl RawHandler for RawRespond {
    fn name(&self) -> &'static str {
        RESPOND.name
    }

    fn build(&self, route: RouteContext<'_>) -> Result<BoxedHandler, ConfigError> {
        Ok(Box::new(build_respond(route.loc, route.key, self)?))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Header fields a fixed response may not set: the driver writes them itself.
const RESERVED: [&str; 4] = ["content-length", "transfer-encoding", "connection", "date"];

/// Which values a route's `status` key takes, for the handlers that have one.
pub(super) struct StatusRule {
    /// The status when the key is absent.
    pub(super) default: u16,
    /// Whether a given status is one the handler may send.
    pub(super) allowed: fn(i64) -> bool,
    /// What the error says after the refused value.
    pub(super) otherwise: &'static str,
}

impl StatusRule {
    /// The status `value` (the route's `status` key) asks for; `key` names the route.
    pub(super) fn check(
        &self,
        loc: &Locator<'_>,
        key: &str,
        value: &Option<Spanned<i64>>,
    ) -> Result<u16, ConfigError> {
        match value {
            None => Ok(self.default),
            Some(s) if (self.allowed)(*s.get_ref()) => Ok(*s.get_ref() as u16),
            Some(s) => Err(loc.error(
                s.span(),
                &format!("{key}.status"),
                format!("{} {}", s.get_ref(), self.otherwise),
            )),
        }
    }
}

/// The statuses a `respond` route may give: final ones.
const FINAL_STATUS: StatusRule = StatusRule {
    default: 200,
    allowed: |s| (200..=599).contains(&s),
    otherwise: "is not a final status (200-599)",
};

/// Builds a `respond` route's handler; `key` names the route (`route[2]`).
pub fn build_respond(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawRespond,
) -> Result<Respond, ConfigError> {
    let status = FINAL_STATUS.check(loc, key, &raw.status)?;
    let body = raw
        .body
        .as_ref()
        .map(|b| b.get_ref().clone().into_bytes())
        .unwrap_or_default();
    if let Some(b) = raw.body.as_ref().filter(|_| matches!(status, 204 | 304)) {
        if !body.is_empty() {
            return Err(loc.error(
                b.span(),
                &format!("{key}.body"),
                format!("a {status} response has no body"),
            ));
        }
    }
    let mut headers = Vec::new();
    if let Some(h) = &raw.headers {
        for (name, value) in h.get_ref() {
            if !is_token(name) || RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(loc.error(
                    h.span(),
                    &format!("{key}.headers.{name}"),
                    "not a header name that can be set here",
                ));
            }
            if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(loc.error(
                    h.span(),
                    &format!("{key}.headers.{name}"),
                    "control characters in a header value",
                ));
            }
            headers.push((name.clone(), value.clone()));
        }
    }
    Ok(Respond::new(status, body, &headers))
}
