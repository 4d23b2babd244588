//! `[[site]]` as written: the site's own keys (`hosts`, `listeners`,
//! `redirect_https`, `route`), and every other key a default its routes
//! inherit. Each route is read as a `[[route]]` is, from its own keys over the
//! site's; a site whose keys name a handler (`handler`, or a key only one
//! handler takes such as `root` or `upstream`) also serves, as a route of its
//! own, every path its routes do not.

use std::ops::Range;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::route_raw::{RawRoute, RawStrings, RouteError};
use crate::handler::configure::HandlerSpec;

/// The keys of a site that are the site's, not defaults for its routes.
const SITE_KEYS: &[&str] = &["hosts", "listeners", "redirect_https", "route"];

/// Keys that make a site's defaults a route of its own: they name a handler.
const HANDLER_KEYS: &[&str] = &["handler", "root", "upstream", "location", "body"];

/// One `[[site]]`.
#[derive(Debug)]
pub struct RawSite {
    /// Host names answered (`example.com`, `*.example.com`); none: any host.
    pub hosts: Option<Spanned<RawStrings>>,
    /// Listeners served on, by name or address; default: every HTTP listener.
    pub listeners: Option<Spanned<RawStrings>>,
    /// Plain listeners redirect to HTTPS when the site is on a TLS one too
    /// (default true).
    pub redirect_https: Option<Spanned<bool>>,
    /// The routes, each with the site's defaults under its own keys, and
    /// where each was written.
    pub routes: Vec<(Spanned<RawRoute>, SiteRoutePlace)>,
}

/// Where a site's route comes from, for the key errors name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteRoutePlace {
    /// `[[site.route]]` number n (from 1).
    Written(usize),
    /// The site's own keys, serving what its routes do not.
    Site,
}

/// The site's keys that are not defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSiteOwn {
    hosts: Option<Spanned<RawStrings>>,
    listeners: Option<Spanned<RawStrings>>,
    redirect_https: Option<Spanned<bool>>,
}

/// Why a `[[site]]` could not be read: the error, and the route it is in.
#[derive(Debug)]
pub struct SiteError {
    /// The route, when the error is in one.
    pub route: Option<SiteRoutePlace>,
    /// What went wrong.
    pub error: RouteError,
}

impl RawSite {
    /// Reads one `[[site]]` element.
    pub fn from_toml(
        v: Spanned<DeValue<'_>>,
        handlers: &[HandlerSpec],
    ) -> Result<Spanned<RawSite>, SiteError> {
        let at_site = |error: RouteError| SiteError { route: None, error };
        let span = v.span();
        let DeValue::Table(table) = v.into_inner() else {
            return Err(at_site(RouteError::At {
                message: "a site is a table: write [[site]]".into(),
                span,
                key: "",
            }));
        };
        let (own, defaults): (DeTable<'_>, DeTable<'_>) = table
            .into_iter()
            .partition(|(k, _)| SITE_KEYS.contains(&k.get_ref().as_ref()));
        let mut own_keys = own;
        let routes = own_keys.remove("route");
        let site = RawSiteOwn::deserialize(
            Spanned::new(span.clone(), DeValue::Table(own_keys)).into_deserializer(),
        )
        .map_err(|e| at_site(RouteError::Toml(e)))?;
        let inherited: Vec<String> = defaults.keys().map(|k| k.get_ref().to_string()).collect();
        let written = match routes.map(Spanned::into_inner) {
            None => Vec::new(),
            Some(DeValue::Array(list)) => list.into_iter().collect::<Vec<_>>(),
            Some(_) => {
                return Err(at_site(RouteError::At {
                    message: "a site's `route` is a list of tables: write [[site.route]]".into(),
                    span,
                    key: "route",
                }))
            }
        };
        let own_route = written.is_empty()
            || defaults
                .keys()
                .any(|k| HANDLER_KEYS.contains(&k.get_ref().as_ref()));
        let mut out = Vec::new();
        if own_route {
            let route = RawRoute::from_toml(
                Spanned::new(span.clone(), DeValue::Table(defaults.clone())),
                handlers,
                &[],
            )
            .map_err(|error| SiteError {
                route: Some(SiteRoutePlace::Site),
                error,
            })?;
            out.push((route, SiteRoutePlace::Site));
        }
        for (i, r) in written.into_iter().enumerate() {
            let place = SiteRoutePlace::Written(i + 1);
            let route = inherit(r, &defaults, span.clone())
                .and_then(|merged| RawRoute::from_toml(merged, handlers, &inherited))
                .map_err(|error| SiteError {
                    route: Some(place),
                    error,
                })?;
            out.push((route, place));
        }
        Ok(Spanned::new(
            span,
            RawSite {
                hosts: site.hosts,
                listeners: site.listeners,
                redirect_https: site.redirect_https,
                routes: out,
            },
        ))
    }
}

/// A route's table with the site's defaults under its own keys.
fn inherit<'i>(
    route: Spanned<DeValue<'i>>,
    defaults: &DeTable<'i>,
    site: Range<usize>,
) -> Result<Spanned<DeValue<'i>>, RouteError> {
    let span = route.span();
    let DeValue::Table(mut table) = route.into_inner() else {
        return Err(RouteError::At {
            message: "a route is a table: write [[site.route]]".into(),
            span: site,
            key: "",
        });
    };
    for (k, v) in defaults {
        if !table.contains_key(k.get_ref().as_ref()) {
            table.insert(k.clone(), v.clone());
        }
    }
    Ok(Spanned::new(span, DeValue::Table(table)))
}
