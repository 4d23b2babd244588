//! The second stage of routes and sites: a route's match keys checked into
//! a [`RouteMatch`], a `[[site]]`'s hosts and listeners checked and its HTTPS
//! redirect set up.

use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::route_raw::{RawRoute, RawStrings};
use super::site_raw::RawSite;
use super::value::is_host_name;
use super::ListenerConfig;
use crate::handler::https_redirect::HttpsRedirect;
use crate::route::matcher::{Conditions, FieldCondition, PathMatch, RouteMatch, Scheme};
use crate::route::site::{Site, SiteHosts};
use crate::route::Route;

/// A route's paths and conditions, and whether it is served on plain
/// listeners where its site redirects to HTTPS.
pub fn route_match(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawRoute,
    listeners: &[ListenerConfig],
) -> Result<(RouteMatch, bool), ConfigError> {
    let c = &raw.conditions;
    let mut paths = Vec::new();
    for text in raw.path.iter().flat_map(|p| p.get_ref().iter()) {
        let span = raw.path.as_ref().map_or(0..0, Spanned::span);
        if !(text.starts_with('/') || text.starts_with('*')) {
            return Err(loc.error(
                span,
                &format!("{key}.path"),
                format!("{text:?} is not a path: a path prefix or pattern starts with '/' or '*'"),
            ));
        }
        paths.push(PathMatch::from_path(text));
    }
    for text in c.exact_path.iter().flat_map(|p| p.get_ref().iter()) {
        if !text.starts_with('/') || text.contains('*') {
            let span = c.exact_path.as_ref().map_or(0..0, Spanned::span);
            return Err(loc.error(
                span,
                &format!("{key}.exact_path"),
                format!("{text:?} is not a path: an exact path starts with '/' and has no '*'"),
            ));
        }
        paths.push(PathMatch::Exact(text.as_bytes().into()));
    }
    if paths.is_empty() {
        paths.push(PathMatch::from_path("/"));
    }
    let list = |v: &Option<Spanned<RawStrings>>, what: &str, ok: fn(&str) -> bool| {
        let mut out: Vec<Box<[u8]>> = Vec::new();
        for text in v.iter().flat_map(|l| l.get_ref().iter()) {
            if !ok(text) {
                let span = v.as_ref().map_or(0..0, Spanned::span);
                return Err(loc.error(
                    span,
                    &format!("{key}.{what}"),
                    format!(
                        "{text:?} is not {}",
                        match what {
                            "extensions" => "a file extension such as \"css\"",
                            _ => "a method such as \"GET\"",
                        }
                    ),
                ));
            }
            out.push(
                text.trim_start_matches('.')
                    .to_ascii_lowercase()
                    .into_bytes()
                    .into(),
            );
        }
        Ok(out)
    };
    let extensions = list(&c.extensions, "extensions", |t| {
        let t = t.trim_start_matches('.');
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    })?;
    let methods: Vec<Box<[u8]>> = c
        .methods
        .iter()
        .flat_map(|l| l.get_ref().iter())
        .map(|m| m.as_bytes().into())
        .collect();
    if let Some(bad) = methods
        .iter()
        .find(|m| m.is_empty() || !m.iter().all(|b| b.is_ascii_uppercase() || *b == b'-'))
    {
        let span = c.methods.as_ref().map_or(0..0, Spanned::span);
        return Err(loc.error(
            span,
            &format!("{key}.methods"),
            format!(
                "{:?} is not a method such as \"GET\" (methods are written in capitals)",
                String::from_utf8_lossy(bad)
            ),
        ));
    }
    let scheme = match c.scheme.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
        None => None,
        Some(("http", _)) => Some(Scheme::Http),
        Some(("https", _)) => Some(Scheme::Https),
        Some((other, span)) => {
            return Err(loc.error(
                span,
                &format!("{key}.scheme"),
                format!("{other:?} is not a scheme: use \"http\" or \"https\""),
            ))
        }
    };
    let listeners = c
        .listeners
        .as_ref()
        .map(|l| listener_indices(loc, &format!("{key}.listeners"), l, listeners))
        .transpose()?;
    let mut fields = Vec::new();
    for (name, value) in c.match_header.iter().flat_map(|h| h.get_ref().iter()) {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        {
            let span = c.match_header.as_ref().map_or(0..0, Spanned::span);
            return Err(loc.error(
                span,
                &format!("{key}.match_header"),
                format!("{name:?} is not a field name"),
            ));
        }
        fields.push(FieldCondition {
            name: name.clone(),
            value: (value.get_ref() != "*").then(|| value.get_ref().as_bytes().into()),
        });
    }
    let matches = RouteMatch {
        paths,
        conditions: Conditions {
            extensions,
            methods,
            scheme,
            listeners,
            fields,
        },
    };
    let serves_plain = c.redirect_https.as_ref().is_some_and(|r| !*r.get_ref());
    Ok((matches, serves_plain))
}

/// The positions of the listeners `names` names, each by its `name` or its
/// `listen` address.
fn listener_indices(
    loc: &Locator<'_>,
    key: &str,
    names: &Spanned<RawStrings>,
    listeners: &[ListenerConfig],
) -> Result<Vec<usize>, ConfigError> {
    let mut out = Vec::new();
    for name in names.get_ref().iter() {
        let by_name = listeners
            .iter()
            .position(|l| l.name.as_deref() == Some(name));
        let by_addr = || {
            let addr: std::net::SocketAddr = name.parse().ok()?;
            listeners.iter().position(|l| l.addr == addr)
        };
        let Some(i) = by_name.or_else(by_addr) else {
            let known: Vec<String> = listeners
                .iter()
                .map(|l| match &l.name {
                    Some(n) => format!("{n:?}"),
                    None => format!("\"{}\"", l.addr),
                })
                .collect();
            return Err(loc.error(
                names.span(),
                key,
                format!(
                    "no listener is called {name:?}; listeners are named by `name` or address: {}",
                    known.join(", ")
                ),
            ));
        };
        if listeners[i].tcp.is_some() {
            return Err(loc.error(
                names.span(),
                key,
                format!("{name:?} is a tcp listener; it serves no routes"),
            ));
        }
        out.push(i);
    }
    Ok(out)
}

/// A `[[site]]` without its routes: hosts and listeners checked.
pub fn site_of(
    loc: &Locator<'_>,
    key: &str,
    raw: &Spanned<RawSite>,
    listeners: &[ListenerConfig],
) -> Result<Site, ConfigError> {
    let site = raw.get_ref();
    let mut names = Vec::new();
    for name in site.hosts.iter().flat_map(|h| h.get_ref().iter()) {
        let v = name.trim().trim_end_matches('.').to_ascii_lowercase();
        let bare = v.strip_prefix("*.").unwrap_or(&v);
        if !is_host_name(bare) || bare.contains('*') {
            let span = site.hosts.as_ref().map_or(raw.span(), Spanned::span);
            return Err(loc.error(
                span,
                &format!("{key}.hosts"),
                format!("{name:?} is not a host name (or a wildcard such as \"*.example.com\")"),
            ));
        }
        names.push(v);
    }
    let listeners = site
        .listeners
        .as_ref()
        .map(|l| listener_indices(loc, &format!("{key}.listeners"), l, listeners))
        .transpose()?;
    Ok(Site::new(
        SiteHosts::new(names.iter().map(String::as_str)),
        listeners,
        false,
    ))
}

/// The redirect to HTTPS a site gives on its plain listeners, when it is
/// served on a TLS listener too and `redirect_https` is not false; `index`
/// is its route slot.
pub fn https_redirect(
    raw: &RawSite,
    site: &Site,
    listeners: &[ListenerConfig],
    index: usize,
) -> Option<Route> {
    if raw.redirect_https.as_ref().is_some_and(|r| !*r.get_ref()) {
        return None;
    }
    let served = |i: &usize| site.on_listener(*i);
    let http: Vec<usize> = (0..listeners.len())
        .filter(|i| listeners[*i].tcp.is_none())
        .filter(served)
        .collect();
    let tls = http.iter().find(|&&i| listeners[i].tls.is_some())?;
    http.iter().find(|&&i| listeners[i].tls.is_none())?;
    let fallback = site.hosts.first().filter(|h| !h.starts_with('*'));
    Some(Route {
        matches: RouteMatch::everything(),
        index,
        serves_plain: false,
        handler: Box::new(HttpsRedirect::new(listeners[*tls].addr.port(), fallback)),
    })
}
