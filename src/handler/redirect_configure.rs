//! Second configuration stage of the `redirect` handler: the status checked
//! and the `location` template compiled, beside the handler.

use std::ops::Range;

use crate::config::error::{ConfigError, Locator};
use crate::config::raw::RawRedirect;
use crate::filter::placeholder::Template;

use super::redirect::Redirect;
use super::respond_configure::StatusRule;

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
