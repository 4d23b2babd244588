//! Second configuration stage of a route's access keys (`allow`, `deny`,
//! `basic_auth`, `rate_limit`, read into [`RawRouteFilters`] with the other
//! route filters' keys): checked and turned into the route's filters, in the
//! order they run; and the `[http]` keys that say where the client address is.

use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::address::{parse_address_entry, AddressRule, AddressRules};
use super::basic_auth::{parse_htpasswd, BasicAuth};
use super::rate_limit::{RateKey, RateLimit};
use super::rate_reload::{table_for, RateRule};
use super::rate_store::{OnStoreError, RateStore, StoreRule};
use super::shared_rate_limit::SharedRateLimit;
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawBasicAuth, RawRate, RawRateLimit, RawRouteFilters};
use crate::config::value::{duration, read_named_file};
use crate::filter::BoxedFilter;
use crate::http::client_address::ClientAddress;

/// Largest htpasswd file read.
const MAX_HTPASSWD: u64 = 16 * 1024 * 1024;
/// Keys a rate-limit table holds unless told otherwise (16 bytes each).
const DEFAULT_MAX_KEYS: i64 = 16_384;

/// How long a decision waits for a shared store before its fallback.
const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_millis(5);

/// The longest `store_timeout`: a store slower than this is down.
const MAX_STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// The client address resolver from `trusted_proxies` and
/// `client_address_header` of `[http]` (`at` is `http`) or of a listener
/// (`at` is `listener[N]`), which the access log, access rules and rate
/// limits of the listener's requests consult.
pub fn client_address(
    loc: &Locator<'_>,
    at: &str,
    trusted: &Option<Spanned<Vec<Spanned<String>>>>,
    header: &Option<Spanned<String>>,
) -> Result<Arc<ClientAddress>, ConfigError> {
    let mut nets = Vec::new();
    for (i, entry) in trusted.iter().flat_map(|t| t.get_ref().iter()).enumerate() {
        let key = format!("{at}.trusted_proxies[{}]", i + 1);
        match parse_address_entry(entry.get_ref()) {
            Ok(Some(net)) => nets.push(net),
            Ok(None) => {
                return Err(loc.error(
                    entry.span(),
                    &key,
                    "\"all\" would let any client name its own address; list the proxies",
                ))
            }
            Err(m) => return Err(loc.error(entry.span(), &key, m)),
        }
    }
    let name = match header {
        None => "X-Forwarded-For",
        Some(h) => {
            let v = h.get_ref().as_str();
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                return Err(loc.error(
                    h.span(),
                    &format!("{at}.client_address_header"),
                    format!("{v:?} is not a header name"),
                ));
            }
            v
        }
    };
    Ok(Arc::new(ClientAddress::new(nets, name)))
}

/// Builds the route's checks in the order they run: address rules first (no
/// state, cheapest), then the rate limit (so password guessing is throttled
/// before it costs a hash), then basic authentication.
/// Each judges the request's client address (trusted proxies: the listener's).
/// `route` is the route's host and path, which tell its rate limit apart
/// from others' across a reload.
pub fn access_filters(
    loc: &Locator<'_>,
    key: &str,
    route: (Option<String>, String),
    raw: &RawRouteFilters,
) -> Result<Vec<BoxedFilter>, ConfigError> {
    let mut filters: Vec<BoxedFilter> = Vec::new();
    if let Some(rules) = address_rules(loc, key, raw)? {
        filters.push(Box::new(AddressRules::new(rules)));
    }
    if let Some(r) = &raw.rate_limit {
        filters.push(rate_limit(loc, &format!("{key}.rate_limit"), route, r)?);
    }
    if let Some(b) = &raw.basic_auth {
        filters.push(Box::new(basic_auth(loc, &format!("{key}.basic_auth"), b)?));
    }
    Ok(filters)
}

/// `allow` and `deny` as one ordered list: the key written first is tried first.
fn address_rules(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawRouteFilters,
) -> Result<Option<Vec<AddressRule>>, ConfigError> {
    let mut lists = [(&raw.allow, "allow", true), (&raw.deny, "deny", false)];
    lists.sort_by_key(|(list, _, _)| list.as_ref().map_or(usize::MAX, |l| l.span().start));
    let mut rules = Vec::new();
    for (list, name, allow) in lists {
        let Some(list) = list else { continue };
        if list.get_ref().is_empty() {
            return Err(loc.error(
                list.span(),
                &format!("{key}.{name}"),
                "the list is empty; remove the key or name an address",
            ));
        }
        for (i, entry) in list.get_ref().iter().enumerate() {
            let net = parse_address_entry(entry.get_ref())
                .map_err(|m| loc.error(entry.span(), &format!("{key}.{name}[{}]", i + 1), m))?;
            rules.push(AddressRule { net, allow });
        }
    }
    Ok((!rules.is_empty()).then_some(rules))
}

fn rate_limit(
    loc: &Locator<'_>,
    key: &str,
    route: (Option<String>, String),
    raw: &Spanned<RawRateLimit>,
) -> Result<BoxedFilter, ConfigError> {
    let r = raw.get_ref();
    let per_second = parse_rate(r.rate.get_ref())
        .map_err(|m| loc.error(r.rate.span(), &format!("{key}.rate"), m))?;
    let per_request = Duration::from_secs_f64(1.0 / per_second);
    let burst = match &r.burst {
        None => per_second.ceil().max(1.0) as u32,
        Some(b) => {
            let v = *b.get_ref();
            if !(1..=1_000_000).contains(&v) {
                return Err(loc.error(
                    b.span(),
                    &format!("{key}.burst"),
                    format!("{v} is not a burst: requests allowed at once, 1 to 1000000"),
                ));
            }
            v as u32
        }
    };
    let rate_key = match &r.key {
        None => RateKey::ClientAddress,
        Some(k) => parse_rate_key(k.get_ref())
            .map_err(|m| loc.error(k.span(), &format!("{key}.key"), m))?,
    };
    let max_keys = match &r.max_keys {
        None => DEFAULT_MAX_KEYS,
        Some(m) if (4..=1 << 24).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => {
            return Err(loc.error(
                m.span(),
                &format!("{key}.max_keys"),
                format!("{} is out of range (4 to 16777216)", m.get_ref()),
            ))
        }
    };
    let rule = RateRule {
        route,
        key: rate_key,
        per_request,
        burst,
        max_keys: max_keys as usize,
    };
    let local = RateLimit::new(rule.key.clone(), table_for(&rule));
    let Some(url) = &r.store else {
        for (name, given) in [
            ("store_timeout", r.store_timeout.as_ref().map(|v| v.span())),
            (
                "on_store_error",
                r.on_store_error.as_ref().map(|v| v.span()),
            ),
        ] {
            if let Some(span) = given {
                return Err(loc.error(
                    span,
                    &format!("{key}.{name}"),
                    "applies only to a limit with a store; add store = \"redis://...\" or remove it",
                ));
            }
        }
        return Ok(Box::new(local));
    };
    let store = RateStore::for_url(url.get_ref())
        .map_err(|m| loc.error(url.span(), &format!("{key}.store"), m))?;
    let timeout = duration(
        loc,
        &r.store_timeout,
        &format!("{key}.store_timeout"),
        DEFAULT_STORE_TIMEOUT,
    )?;
    if timeout.is_zero() || timeout > MAX_STORE_TIMEOUT {
        let span = r.store_timeout.as_ref().map_or(url.span(), |v| v.span());
        return Err(loc.error(
            span,
            &format!("{key}.store_timeout"),
            "a store timeout is more than 0 and at most 10s",
        ));
    }
    let on_error = match &r.on_store_error {
        None => OnStoreError::Local,
        Some(v) => OnStoreError::parse(v.get_ref())
            .map_err(|m| loc.error(v.span(), &format!("{key}.on_store_error"), m))?,
    };
    // What names the rule on every instance alike, so they share its keys.
    let name = format!(
        "{}|{}|{}|{}|{}",
        rule.route.0.as_deref().unwrap_or("*"),
        rule.route.1,
        rule.key.name(),
        rule.per_request.as_nanos(),
        rule.burst
    );
    let store = StoreRule::new(store, &name, per_request, burst, timeout);
    Ok(Box::new(SharedRateLimit::new(store, local, on_error)))
}

/// Requests per second from `10`, `0.5`, `"10/s"`, `"600/m"`, `"100/h"`.
fn parse_rate(raw: &RawRate) -> Result<f64, String> {
    let per_second = match raw {
        RawRate::PerSecond(n) => *n as f64,
        RawRate::Fraction(f) => *f,
        RawRate::Text(t) => {
            let (n, unit) = t.trim().split_once('/').unwrap_or((t.trim(), "s"));
            let n: f64 = n.trim().trim_end_matches('r').parse().map_err(|_| {
                format!("{t:?} is not a rate such as \"10/s\", \"600/m\" or \"100/h\"")
            })?;
            let secs = match unit.trim() {
                "s" | "sec" | "second" => 1.0,
                "m" | "min" | "minute" => 60.0,
                "h" | "hour" => 3600.0,
                u => return Err(format!("unknown unit {u:?} in {t:?}; use s, m or h")),
            };
            n / secs
        }
    };
    if !per_second.is_finite() || !(0.0001..=10_000_000.0).contains(&per_second) {
        return Err("a rate is more than 0 and at most 10000000 requests per second".into());
    }
    Ok(per_second)
}

fn parse_rate_key(k: &str) -> Result<RateKey, String> {
    if k == "remote_addr" {
        return Ok(RateKey::ClientAddress);
    }
    match k.strip_prefix("header:") {
        Some(name)
            if !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) =>
        {
            Ok(RateKey::Header(name.into()))
        }
        _ => Err(format!(
            "{k:?} is not a key; use \"remote_addr\" or \"header:Name\""
        )),
    }
}

fn basic_auth(
    loc: &Locator<'_>,
    key: &str,
    raw: &Spanned<RawBasicAuth>,
) -> Result<BasicAuth, ConfigError> {
    let b = raw.get_ref();
    let realm = match &b.realm {
        None => "restricted",
        Some(r) => {
            let v = r.get_ref();
            if v.is_empty()
                || v.bytes()
                    .any(|c| !(b' '..=b'~').contains(&c) || c == b'"' || c == b'\\')
            {
                return Err(loc.error(
                    r.span(),
                    &format!("{key}.realm"),
                    "a realm is printable ASCII without quotes or backslashes",
                ));
            }
            v.as_str()
        }
    };
    let path = b.htpasswd.get_ref();
    let at = |m: String| loc.error(b.htpasswd.span(), &format!("{key}.htpasswd"), m);
    let bytes =
        read_named_file(path, MAX_HTPASSWD).map_err(|e| at(format!("cannot read {path}: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| at(format!("{path} is not UTF-8 text")))?;
    let users = parse_htpasswd(&text).map_err(|m| at(format!("in {path}, {m}")))?;
    BasicAuth::new(users, realm).map_err(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read_in_the_forms_operators_write() {
        assert_eq!(parse_rate(&RawRate::PerSecond(10)), Ok(10.0));
        assert_eq!(parse_rate(&RawRate::Text("600/m".into())), Ok(10.0));
        assert_eq!(parse_rate(&RawRate::Text("10r/s".into())), Ok(10.0));
        assert_eq!(parse_rate(&RawRate::Text("3600 / h".into())), Ok(1.0));
        assert_eq!(parse_rate(&RawRate::Fraction(0.5)), Ok(0.5));
        assert!(parse_rate(&RawRate::PerSecond(0)).is_err());
        assert!(parse_rate(&RawRate::Text("ten/s".into())).is_err());
        assert!(parse_rate(&RawRate::Text("10/d".into()))
            .unwrap_err()
            .contains("unit"));
    }

    #[test]
    fn rate_keys() {
        assert_eq!(parse_rate_key("remote_addr"), Ok(RateKey::ClientAddress));
        assert_eq!(
            parse_rate_key("header:X-Api-Key"),
            Ok(RateKey::Header("X-Api-Key".into()))
        );
        assert!(parse_rate_key("header:").is_err());
        assert!(parse_rate_key("cookie").is_err());
    }
}
