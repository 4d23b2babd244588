//! The configuration of the `redirect` handler, beside the handler: its keys
//! as written ([`RawRedirect`]), the status checked and the `location`
//! template compiled.

use std::any::Any;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::filter::placeholder::Template;

use super::configure::{HandlerSpec, RawHandler, RouteContext};
use super::redirect::Redirect;
use super::respond_configure::StatusRule;
use super::BoxedHandler;

/// `handler = "redirect"`.
pub const REDIRECT: HandlerSpec = HandlerSpec::new::<RawRedirect>("redirect");

/// The keys of a `redirect` route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedirect {
    /// 301, 302 (default), 303, 307 or 308.
    pub status: Option<Spanned<i64>>,
    /// The `Location` template, e.g. `https://{host}{uri}`.
    pub location: Option<Spanned<String>>,
}

impl RawHandler for RawRedirect {
    fn name(&self) -> &'static str {
        REDIRECT.name
    }

    fn build(&self, route: RouteContext<'_>) -> Result<BoxedHandler, ConfigError> {
        Ok(Box::new(build_redirect(
            route.loc, route.key, route.span, self,
        )?))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Redirect statuses: moved permanently or temporarily, the method kept
/// (307, 308) or turned into GET (301, 302 as browsers do, 303).
const REDIRECT_STATUS: StatusRule = StatusRule {
    default: 302,
    allowed: |s| matches!(s, 301 | 302 | 303 | 307 | 308),
    otherwise: "is not a redirect status; use 301, 302, 303, 307 or 308",
};

/// Builds a `redirect` route's handler; `key` names the route (`route[2]`)
/// and `span` its table, for a missing `location`.
pub fn build_redirect(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    raw: &RawRedirect,
) -> Result<Redirect, ConfigError> {
    let status = REDIRECT_STATUS.check(loc, key, &raw.status)?;
    let Some(location) = &raw.location else {
        return Err(loc.error(
            span,
            &format!("{key}.location"),
            "a redirect route needs `location`, e.g. \"https://{host}{uri}\"",
        ));
    };
    let at = format!("{key}.location");
    let text = location.get_ref();
    if text.is_empty() || text.bytes().any(|b| b <= 0x20 || b == 0x7f) {
        return Err(loc.error(
            location.span(),
            &at,
            "a URL without spaces or control characters, e.g. \"https://{host}{uri}\"",
        ));
    }
    let template = Template::compile(text).map_err(|m| loc.error(location.span(), &at, m))?;
    Ok(Redirect::new(status, template))
}
