//! `[resolver]`: the name servers upstream names and SRV records are looked up
//! on (`/etc/resolv.conf` when absent), and how patiently.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::raw::RawResolver;
use super::value::{duration, int};
use crate::upstream::resolution::ResolverSettings;

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

#[cfg(test)]
mod tests {
    use crate::config::check_text;

    fn with_resolver(resolver: &str) -> String {
        format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n\
             [resolver]\n{resolver}\n"
        )
    }

    #[test]
    fn nameservers_take_an_optional_port_and_bad_ones_are_located() {
        let cfg = check_text(&with_resolver(
            "nameservers = [\"10.0.0.2\", \"127.0.0.1:5353\", \"[::1]:53\"]\ntimeout = \"500ms\"\nattempts = 3",
        ))
        .unwrap();
        let ns: Vec<String> = cfg
            .resolver
            .nameservers
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(ns, ["10.0.0.2:53", "127.0.0.1:5353", "[::1]:53"]);
        assert_eq!(cfg.resolver.timeout.as_millis(), 500);
        assert_eq!(cfg.resolver.attempts, 3);

        let e = check_text(&with_resolver(
            "nameservers = [\"10.0.0.2\", \"dns.local\"]",
        ))
        .unwrap_err();
        e.assert_at(6, "resolver.nameservers[2]");
        assert!(e.message.contains("not an IP address"), "{e}");
        let e = check_text(&with_resolver("attempts = 0")).unwrap_err();
        e.assert_at(6, "resolver.attempts");
        let e = check_text(&with_resolver("timeout = 0")).unwrap_err();
        e.assert_at(6, "resolver.timeout");
        let e = check_text(&with_resolver("retries = 2")).unwrap_err();
        assert!(e.message.contains("retries"), "{e}");
    }

    fn group(keys: &str) -> String {
        format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n\
             [[upstream]]\nname = \"u\"\n{keys}\n"
        )
    }

    #[test]
    fn srv_and_ttl_bounds_are_checked_where_written() {
        // Nothing answers on port 1: the lookup fails at once, with a warning.
        let text = group("srv = \"_http._tcp.app.test\"\nmin_ttl = \"2s\"\nmax_ttl = \"1m\"")
            + "[resolver]\nnameservers = [\"127.0.0.1:1\"]\ntimeout = \"100ms\"\nattempts = 1\n";
        let cfg = check_text(&text).unwrap();
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        assert!(
            cfg.warnings[0].contains("answers 503 until it resolves"),
            "{:?}",
            cfg.warnings
        );
        let g = &cfg.upstreams[0];
        assert_eq!(g.discovery.entries.len(), 1);
        assert_eq!(g.discovery.min_ttl.as_secs(), 2);
        assert_eq!(g.discovery.max_ttl.as_secs(), 60);
        let e = check_text(&group("srv = \"_http._tcp app\"")).unwrap_err();
        e.assert_at(7, "upstream[1].srv");
        let e = check_text(&group(
            "servers = [\"127.0.0.1:2\"]\nmin_ttl = \"10s\"\nmax_ttl = \"5s\"",
        ))
        .unwrap_err();
        e.assert_at(9, "upstream[1].max_ttl");
        let e = check_text(&group("servers = [\"127.0.0.1:2\"]\nmin_ttl = 0")).unwrap_err();
        e.assert_at(8, "upstream[1].min_ttl");
        let e = check_text(&group("name2 = 1")).unwrap_err();
        assert!(e.message.contains("name2"), "{e}");
        let e = check_text(&group("")).unwrap_err();
        assert!(e.message.contains("at least one server (or srv)"), "{e}");
    }
}
