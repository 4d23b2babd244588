//! One site: the host names it answers, the listeners it is served on, its
//! routes in the order they are tried, and the redirect to HTTPS that plain
//! listeners give when the site is also served over TLS.

use super::matcher::{PathMatch, Rank, RouteMatch};
use super::Route;
use crate::http::RequestView;

/// A site's host names: exact ones, and `*.example.com` suffixes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SiteHosts {
    /// Exact names, lowercase.
    exact: Vec<Box<[u8]>>,
    /// From `*.example.com`: `.example.com`, lowercase.
    suffixes: Vec<Box<[u8]>>,
}

impl SiteHosts {
    /// The names as written (lowercase; `*.` opens a wildcard).
    pub fn new<'n>(names: impl IntoIterator<Item = &'n str>) -> SiteHosts {
        let mut hosts = SiteHosts::default();
        for name in names {
            match name.strip_prefix('*') {
                Some(suffix) => hosts.suffixes.push(suffix.as_bytes().into()),
                None => hosts.exact.push(name.as_bytes().into()),
            }
        }
        hosts
    }

    /// Whether no name was given: the site answers any host.
    pub fn is_any(&self) -> bool {
        self.exact.is_empty() && self.suffixes.is_empty()
    }

    /// Whether `host` (without port) is one of the exact names.
    fn has_exact(&self, host: &[u8]) -> bool {
        self.exact.iter().any(|n| n.eq_ignore_ascii_case(host))
    }

    /// The length of the longest wildcard suffix `host` falls under.
    fn wildcard_len(&self, host: &[u8]) -> Option<usize> {
        self.suffixes
            .iter()
            .filter(|s| {
                host.len() > s.len() && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
            })
            .map(|s| s.len())
            .max()
    }

    /// Names the two sets share, as written, for the error about a host in two
    /// sites.
    pub fn shared_with(&self, other: &SiteHosts) -> Option<String> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        self.exact
            .iter()
            .find(|n| other.has_exact(n))
            .map(|n| text(n))
            .or_else(|| {
                self.suffixes
                    .iter()
                    .find(|s| other.suffixes.contains(s))
                    .map(|s| format!("*{}", text(s)))
            })
            .or_else(|| (self.is_any() && other.is_any()).then(|| "any host".to_string()))
    }

    /// The first name, for labels and for redirects of requests without a host.
    pub fn first(&self) -> Option<String> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        self.exact
            .first()
            .map(|n| text(n))
            .or_else(|| self.suffixes.first().map(|s| format!("*{}", text(s))))
    }

    /// Every name as written, for `pier check --routes`.
    pub fn names(&self) -> Vec<String> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut out: Vec<String> = self.exact.iter().map(|n| text(n)).collect();
        out.extend(self.suffixes.iter().map(|s| format!("*{}", text(s))));
        out
    }
}

/// One route's path entry in the order of trial, with what a request is
/// checked against kept inline.
#[derive(Debug)]
struct Entry {
    rank: Rank,
    /// The path to match.
    matches: PathMatch,
    /// The route has no condition beside the path.
    plain: bool,
    /// Which route, and which of its paths.
    route: usize,
    path: usize,
}

/// A site: hosts, listeners, routes and the HTTPS redirect.
#[derive(Debug)]
pub struct Site {
    /// The host names answered; none: any host.
    pub hosts: SiteHosts,
    /// The listeners served on (by position); `None`: every HTTP listener.
    pub listeners: Option<Vec<usize>>,
    /// A request no route of the site matches goes on to the routes that
    /// serve any host (top-level routes with a `host` behave so); a `[[site]]`
    /// answers 404 instead, as an nginx `server` block does.
    pub falls_back: bool,
    /// On plain listeners, requests are redirected to HTTPS by this route,
    /// except those of routes that opted out.
    pub https_redirect: Option<Route>,
    routes: Vec<Route>,
    order: Vec<Entry>,
}

impl Site {
    /// A site without routes.
    pub fn new(hosts: SiteHosts, listeners: Option<Vec<usize>>, falls_back: bool) -> Site {
        Site {
            hosts,
            listeners,
            falls_back,
            https_redirect: None,
            routes: Vec::new(),
            order: Vec::new(),
        }
    }

    /// Adds a route; a route that matches exactly what another one matches
    /// is an error.
    pub fn add(&mut self, route: Route) -> Result<(), String> {
        if let Some(same) = self.routes.iter().find(|r| r.matches == route.matches) {
            return Err(format!(
                "path {:?} is routed twice for the same host",
                same.matches.label()
            ));
        }
        let index = self.routes.len();
        for (path, matches) in route.matches.paths.iter().enumerate() {
            self.order.push(Entry {
                rank: route.matches.rank(path),
                matches: matches.clone(),
                plain: route.matches.conditions.is_empty(),
                route: index,
                path,
            });
        }
        self.routes.push(route);
        // Stable: routes of equal rank keep the order written.
        self.order.sort_by_key(|e| std::cmp::Reverse(e.rank));
        Ok(())
    }

    /// Whether the site is served on listener `listener`.
    #[inline]
    pub fn on_listener(&self, listener: usize) -> bool {
        self.listeners
            .as_ref()
            .is_none_or(|l| l.contains(&listener))
    }

    /// Whether the site answers `host` exactly; else the length of the
    /// wildcard it falls under.
    pub(super) fn host_match(&self, host: &[u8]) -> Option<HostMatch> {
        if self.hosts.has_exact(host) {
            return Some(HostMatch::Exact);
        }
        self.hosts.wildcard_len(host).map(HostMatch::Wildcard)
    }

    /// The first route, in the order of trial, whose path and conditions
    /// match `req`.
    #[inline]
    pub fn find(&self, req: &RequestView<'_>, path: &[u8]) -> Option<&Route> {
        for e in &self.order {
            if !e.matches.matches(path) {
                continue;
            }
            let route = &self.routes[e.route];
            if e.plain || route.matches.conditions.hold(req, path) {
                return Some(route);
            }
        }
        None
    }

    /// The routes in the order of trial, each with the path entry that ranks
    /// it, for `pier check --routes`.
    pub fn ordered(&self) -> impl Iterator<Item = (&Route, &RouteMatch, usize)> {
        self.order.iter().map(|e| {
            let r = &self.routes[e.route];
            (r, &r.matches, e.path)
        })
    }

    /// Every route.
    pub fn routes(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().chain(self.https_redirect.iter())
    }
}

/// How a host name matched a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum HostMatch {
    /// Under a wildcard whose suffix is this long (longer wins).
    Wildcard(usize),
    /// One of the site's exact names.
    Exact,
}
