//! `[resolver]`: the name servers upstream names and SRV records are looked up
//! on (`/etc/resolv.conf` when absent), and how patiently.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::raw::RawDuration;
use super::value::{duration, int};
use crate::upstream::discovery::ResolverSettings;

/// `[resolver]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResolver {
    /// `ip` or `ip:port` (port 53 by default), asked in turn.
    pub nameservers: Option<Spanned<Vec<Spanned<String>>>>,
    /// Deadline of one query.
    pub timeout: Option<Spanned<RawDuration>>,
    /// Queries sent before a lookup fails.
    pub attempts: Option<Spanned<i64>>,
}

/// `[resolver]`, or the system's resolver with Pier's defaults when absent.
pub fn validate_resolver(
    loc: &Locator<'_>,
    raw: Option<&Spanned<RawResolver>>,
) -> Result<ResolverSettings, ConfigError> {
    let defaults = ResolverSettings::default();
    let Some(raw) = raw.map(Spanned::get_ref) else {
        return Ok(defaults);
    };
    let mut nameservers = Vec::new();
    for (i, ns) in raw.nameservers.iter().flat_map(|l| l.get_ref()).enumerate() {
        let text = ns.get_ref().trim();
        let addr = text
            .parse::<SocketAddr>()
            .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
            .map_err(|_| {
                loc.error(
                    ns.span(),
                    &format!("resolver.nameservers[{}]", i + 1),
                    format!("{text:?} is not an IP address, with or without a port (\"10.0.0.2\", \"127.0.0.1:5353\")"),
                )
            })?;
        nameservers.push(addr);
    }
    let timeout = duration(loc, &raw.timeout, "resolver.timeout", defaults.timeout)?;
    if timeout.is_zero() {
        let span = raw.timeout.as_ref().map_or(0..0, |t| t.span());
        return Err(loc.error(
            span,
            "resolver.timeout",
            "the timeout must be longer than zero",
        ));
    }
    Ok(ResolverSettings {
        nameservers,
        timeout: timeout.min(Duration::from_secs(60)),
        attempts: int(
            loc,
            &raw.attempts,
            "resolver.attempts",
            1..=10,
            i64::from(defaults.attempts),
        )? as u32,
    })
}
