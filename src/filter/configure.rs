//! Second configuration stage of the route filters: the route-level keys
//! (`response_headers`, `request_headers`) checked and built into filters,
//! each error naming the file, the line and the key.

use toml::Spanned;

use super::headers::{HeaderRules, ResponseHeaders, DRIVER_FIELDS};
use super::placeholder::Template;
use super::BoxedFilter;
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawFieldValues, RawHeaderRules, RawRoute};
use crate::http1::grammar::is_token;

/// The route's `response_headers` filter (the access checks and the
/// handler's own filters are built apart); `key` names the route (`route[2]`).
pub fn route_filters(
    loc: &Locator<'_>,
    key: &str,
    route: &RawRoute,
) -> Result<Vec<BoxedFilter>, ConfigError> {
    let mut filters: Vec<BoxedFilter> = Vec::new();
    if let Some(rules) = &route.filters.response_headers {
        let rules = header_rules(loc, &format!("{key}.response_headers"), rules)?;
        if !rules.is_empty() {
            filters.push(Box::new(ResponseHeaders(rules)));
        }
    }
    Ok(filters)
}

/// The rules for the request a route's handler sends upstream (a proxy's);
/// an error on a route whose handler sends no request anywhere.
pub fn upstream_request_rules(
    loc: &Locator<'_>,
    key: &str,
    route: &RawRoute,
) -> Result<Option<HeaderRules>, ConfigError> {
    let Some(rules) = &route.filters.request_headers else {
        return Ok(None);
    };
    let handler = route.handler.get_ref();
    let key = format!("{key}.request_headers");
    if !handler.sends_upstream() {
        return Err(loc.error(
            rules.span(),
            &key,
            format!(
                "only a proxy route sends a request upstream; this route's handler is `{}` \
                 (response_headers edits what the client gets)",
                handler.name()
            ),
        ));
    }
    if rules.get_ref().always.is_some() {
        return Err(loc.error(
            rules.span(),
            &format!("{key}.always"),
            "`always` is about responses; request rules apply to every request",
        ));
    }
    let rules = header_rules_for(loc, &key, rules, true)?;
    Ok((!rules.is_empty()).then_some(rules))
}

/// One `response_headers` / `request_headers` table: names checked, values
/// compiled.
pub fn header_rules(
    loc: &Locator<'_>,
    key: &str,
    raw: &Spanned<RawHeaderRules>,
) -> Result<HeaderRules, ConfigError> {
    header_rules_for(loc, key, raw, false)
}

/// [`header_rules`] for responses, or for the request sent `upstream`,
/// where `Host` is the proxy's.
fn header_rules_for(
    loc: &Locator<'_>,
    key: &str,
    raw: &Spanned<RawHeaderRules>,
    upstream: bool,
) -> Result<HeaderRules, ConfigError> {
    let check_name = |key: &str, span, name: &str| {
        if upstream && name.eq_ignore_ascii_case("host") {
            return Err(loc.error(
                span,
                key,
                "the proxy sets Host itself; use `preserve_host` to send the client's",
            ));
        }
        check_name(loc, key, span, name)
    };
    let r = raw.get_ref();
    let mut remove = Vec::new();
    for name in r.remove.iter().flatten() {
        check_name(&format!("{key}.remove"), name.span(), name.get_ref())?;
        remove.push(name.get_ref().clone());
    }
    let mut set = Vec::new();
    for (name, value) in r.set.iter().flatten() {
        let at = format!("{key}.set.{name}");
        check_name(&at, value.span(), name)?;
        let RawFieldValues::One(text) = value.get_ref() else {
            return Err(loc.error(
                value.span(),
                &at,
                "`set` sends one field: give one value, or use `add` for several",
            ));
        };
        set.push((name.clone(), template(loc, &at, value.span(), text)?));
    }
    let mut add = Vec::new();
    for (name, value) in r.add.iter().flatten() {
        let at = format!("{key}.add.{name}");
        check_name(&at, value.span(), name)?;
        let texts = match value.get_ref() {
            RawFieldValues::One(t) => std::slice::from_ref(t),
            RawFieldValues::Many(list) => list.as_slice(),
        };
        for text in texts {
            add.push((name.clone(), template(loc, &at, value.span(), text)?));
        }
    }
    if let Some(name) = set
        .iter()
        .map(|(n, _)| n)
        .find(|n| remove.iter().any(|r: &String| r.eq_ignore_ascii_case(n)))
    {
        return Err(loc.error(
            raw.span(),
            &format!("{key}.set.{name}"),
            format!("{name} is both set and removed"),
        ));
    }
    Ok(HeaderRules::new(
        remove,
        set,
        add,
        r.always.unwrap_or(false),
    ))
}

fn check_name(
    loc: &Locator<'_>,
    key: &str,
    span: std::ops::Range<usize>,
    name: &str,
) -> Result<(), ConfigError> {
    if !is_token(name) {
        return Err(loc.error(span, key, format!("{name:?} is not a header field name")));
    }
    if DRIVER_FIELDS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(loc.error(
            span,
            key,
            format!("{name} is written by the server itself and cannot be changed by a rule"),
        ));
    }
    Ok(())
}

fn template(
    loc: &Locator<'_>,
    key: &str,
    span: std::ops::Range<usize>,
    text: &str,
) -> Result<Template, ConfigError> {
    if text.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(loc.error(span, key, "control characters in a header value"));
    }
    Template::compile(text).map_err(|m| loc.error(span, key, m))
}
