//! Request -> handler. Routes live in sites: a site answers its host names
//! (exact, or `*.example.com`) on its listeners, and tries its routes in one
//! order ([`matcher`]: exact paths, then the longest literal path, then more
//! conditions, then the order written). Routes outside a `[[site]]` form the
//! default site (no `host`) and one site per `host` they name, which falls
//! back to the default site's routes when none of its own matches.

pub mod matcher;
pub mod print;
pub mod site;

pub use crate::handler::{BoxedHandler, Handler};
use crate::http::RequestView;
use matcher::RouteMatch;
use site::{Site, SiteHosts};

/// One route: what it matches and what serves it.
#[derive(Debug)]
pub struct Route {
    /// Its paths and conditions.
    pub matches: RouteMatch,
    /// Position in the configuration (0 = the first route): the metrics' route slot.
    pub index: usize,
    /// Served on plain listeners even where its site redirects to HTTPS
    /// (`redirect_https = false` on the route).
    pub serves_plain: bool,
    /// What serves the requests it matches.
    pub handler: Box<dyn Handler>,
}

/// A handler consulted ahead of every route for paths under its prefix (ACME
/// HTTP-01 validations under `/.well-known/acme-challenge/`), whatever the
/// host. It answers only requests without a body; when it gives no answer the
/// request goes to the routes.
#[derive(Debug)]
pub struct PreRoute {
    /// Path prefix it claims.
    pub prefix: Box<[u8]>,
    /// Whether it answers on plain listeners only (not over TLS).
    pub plain_only: bool,
    /// What answers.
    pub handler: Box<dyn Handler>,
}

/// Every site and its routes.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Handlers ahead of the routes.
    pre: Vec<PreRoute>,
    /// `[[site]]` blocks, then the sites of top-level routes with a `host`.
    sites: Vec<Site>,
    /// Top-level routes without a `host`.
    default: Option<Site>,
    /// A label for each route in configuration order, for metrics.
    labels: Vec<String>,
}

impl RouteTable {
    /// Adds a top-level route: to the site of `host`, or the default site.
    /// The same match twice for one host is an error.
    pub fn insert(
        &mut self,
        host: Option<String>,
        matches: RouteMatch,
        handler: Box<dyn Handler>,
    ) -> Result<(), String> {
        let label = format!("{}{}", host.as_deref().unwrap_or(""), matches.label());
        let route = Route {
            matches,
            index: self.labels.len(),
            serves_plain: true,
            handler,
        };
        let site = match host {
            None => self
                .default
                .get_or_insert_with(|| Site::new(SiteHosts::default(), None, false)),
            Some(h) => {
                let hosts = SiteHosts::new([h.as_str()]);
                // A `[[site]]` answers its hosts on every listener it shares
                // with this route (all of them): the route would never be met.
                if self.sites.iter().any(|s| {
                    !s.falls_back && s.host_match(h.as_bytes()) == Some(site::HostMatch::Exact)
                }) {
                    return Err(format!(
                        "host {h:?} is answered by a [[site]]: write this route in that site"
                    ));
                }
                let at = self
                    .sites
                    .iter()
                    .position(|s| s.falls_back && s.hosts == hosts);
                match at {
                    Some(i) => &mut self.sites[i],
                    None => {
                        self.sites.push(Site::new(hosts, None, true));
                        self.sites.last_mut().expect("just pushed")
                    }
                }
            }
        };
        site.add(route)?;
        self.push_label(label);
        Ok(())
    }

    /// Keeps `label` for the next slot; one already taken (two routes of a
    /// path told apart by their conditions) gets the slot's number after it,
    /// so metrics never show two series under one label.
    fn push_label(&mut self, label: String) -> usize {
        let label = if self.labels.contains(&label) {
            format!("{label}#{}", self.labels.len() + 1)
        } else {
            label
        };
        self.labels.push(label);
        self.labels.len() - 1
    }

    /// The slot and label the next route gets.
    pub fn next_index(&self) -> usize {
        self.labels.len()
    }

    /// Adds a route of a `[[site]]` (built with [`Self::next_index`]) under
    /// `label`.
    pub fn add_site_route(
        &mut self,
        site: &mut Site,
        route: Route,
        label: String,
    ) -> Result<(), String> {
        debug_assert_eq!(route.index, self.labels.len());
        site.add(route)?;
        self.push_label(label);
        Ok(())
    }

    /// Reserves the slot of a site's HTTPS redirect, labelled `label`.
    pub fn add_label(&mut self, label: String) -> usize {
        self.push_label(label)
    }

    /// Adds a `[[site]]`; a host it shares with a site before it on a
    /// listener they share is an error.
    pub fn add_site(&mut self, site: Site) -> Result<(), String> {
        for other in self.sites.iter().filter(|o| !o.falls_back) {
            let overlap = match (&site.listeners, &other.listeners) {
                (Some(a), Some(b)) => a.iter().any(|l| b.contains(l)),
                _ => true,
            };
            if let (true, Some(host)) = (overlap, site.hosts.shared_with(&other.hosts)) {
                return Err(format!(
                    "{host} is answered by two sites on the same listener"
                ));
            }
        }
        // Sites of `[[site]]` blocks come before the ones of top-level routes.
        let at = self
            .sites
            .iter()
            .position(|s| s.falls_back)
            .unwrap_or(self.sites.len());
        self.sites.insert(at, site);
        Ok(())
    }

    /// A label for each route in configuration order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Adds a handler that answers ahead of the routes.
    pub fn insert_pre_route(&mut self, pre: PreRoute) {
        self.pre.push(pre);
    }

    /// Whether any handler is registered ahead of the routes.
    #[inline]
    pub fn has_pre_routes(&self) -> bool {
        !self.pre.is_empty()
    }

    /// The handler registered ahead of the routes for `path` on a listener
    /// that is TLS (`secure`) or not.
    pub fn pre_route(&self, secure: bool, path: &[u8]) -> Option<&dyn Handler> {
        self.pre
            .iter()
            .find(|p| !(secure && p.plain_only) && path.starts_with(&p.prefix))
            .map(|p| &*p.handler)
    }

    /// The site that answers `req`: the one naming its host exactly, else
    /// the longest wildcard, else one for any host; each among the sites
    /// served on the request's listener.
    pub fn site(&self, req: &RequestView<'_>) -> Option<&Site> {
        let listener = req.listener();
        let mut best: Option<(site::HostMatch, &Site)> = None;
        if let Some(host) = req.host_name().map(strip_port) {
            // A fully qualified name (`a.test.`) is the same host.
            let host = host.strip_suffix(b".").unwrap_or(host);
            for s in self.sites.iter().filter(|s| s.on_listener(listener)) {
                if let Some(m) = s.host_match(host) {
                    if best.is_none_or(|(b, _)| m > b) {
                        best = Some((m, s));
                    }
                }
            }
        }
        best.map(|(_, s)| s).or_else(|| {
            self.sites
                .iter()
                .chain(self.default.iter())
                .find(|s| s.hosts.is_any() && s.on_listener(listener))
        })
    }

    /// The route for a request, if any matches: its site's, the site's
    /// HTTPS redirect on a plain listener, or (for a site of top-level
    /// routes) the default site's.
    #[inline]
    pub fn find_route(&self, req: &RequestView<'_>, path: &[u8]) -> Option<&Route> {
        if self.sites.is_empty() {
            // Only routes for any host, on every listener: no host to look at.
            return self.default.as_ref()?.find(req, path);
        }
        let site = self.site(req)?;
        let route = site.find(req, path);
        if let Some(redirect) = &site.https_redirect {
            if !req.is_secure() && !route.is_some_and(|r| r.serves_plain) {
                return Some(redirect);
            }
        }
        match route {
            Some(r) => Some(r),
            None if site.falls_back => self.default.as_ref()?.find(req, path),
            None => None,
        }
    }

    /// Every site, `[[site]]` blocks first, then those of top-level routes,
    /// then the default site.
    pub fn sites(&self) -> impl Iterator<Item = &Site> {
        self.sites.iter().chain(self.default.iter())
    }

    /// Every handler, for start-up checks and logs.
    pub fn handlers(&self) -> impl Iterator<Item = &dyn Handler> {
        self.sites().flat_map(Site::routes).map(|r| &*r.handler)
    }
}

/// `example.com:8080` -> `example.com`; `[::1]:80` -> `[::1]`.
fn strip_port(host: &[u8]) -> &[u8] {
    if host.first() == Some(&b'[') {
        return match host.iter().position(|&b| b == b']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(i) => &host[..i],
        None => host,
    }
}

#[cfg(test)]
mod tests {
    use super::matcher::{Conditions, PathMatch, Scheme};
    use super::*;
    use crate::http::{Served, Session, TlsFacts};
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};
    use crate::observe::metrics::HandlerKind;

    /// A handler known by its tag, read through its debug form.
    #[derive(Debug)]
    #[allow(dead_code)]
    struct Tag(&'static str);

    impl Handler for Tag {
        fn kind(&self) -> HandlerKind {
            HandlerKind::Respond
        }

        fn serve<'s, 'h: 's>(&'h self, _: &'s mut dyn Session<'h>) -> Served<'s> {
            Served::Done
        }
    }

    fn respond(tag: &'static str) -> Box<dyn Handler> {
        Box::new(Tag(tag))
    }

    /// Which route answers `head` (a request head's text), on listener
    /// `listener`, over TLS or not.
    fn answer(t: &RouteTable, head: &str, listener: usize, secure: bool) -> String {
        let raw = format!("{head}\r\n\r\n");
        let mut parsed = RequestHead::default();
        assert!(matches!(
            parse_request(raw.as_bytes(), &Limits::default(), &mut parsed),
            Ok(Parsed::Complete)
        ));
        let tls = secure.then(TlsFacts::default);
        let view = RequestView::http1(&parsed, raw.as_bytes(), "127.0.0.1:1".parse().unwrap(), tls)
            .on_listener(listener);
        t.find_route(&view, view.path())
            .map_or("<none>".into(), |r| format!("{:?}", r.handler))
    }

    fn get(t: &RouteTable, host: &str, path: &str) -> String {
        answer(t, &format!("GET {path} HTTP/1.1\r\nHost: {host}"), 0, false)
    }

    fn prefix(p: &str) -> RouteMatch {
        RouteMatch::prefix(p)
    }

    #[test]
    fn longest_prefix_wins_and_host_groups_fall_back() {
        let mut t = RouteTable::default();
        t.insert(None, prefix("/"), respond("root")).unwrap();
        t.insert(None, prefix("/api/"), respond("api")).unwrap();
        t.insert(
            Some("example.com".into()),
            prefix("/admin"),
            respond("ex-admin"),
        )
        .unwrap();
        assert_eq!(get(&t, "x", "/x"), r#"Tag("root")"#);
        assert_eq!(get(&t, "a", "/api/v1"), r#"Tag("api")"#);
        assert_eq!(
            get(&t, "EXAMPLE.com:8080", "/admin/x"),
            r#"Tag("ex-admin")"#
        );
        assert_eq!(get(&t, "example.com", "/api/"), r#"Tag("api")"#);
        assert_eq!(get(&t, "other", "/admin"), r#"Tag("root")"#);
        assert!(t.insert(None, prefix("/api/"), respond("dup")).is_err());
    }

    #[test]
    fn a_pre_route_claims_its_prefix_on_its_listeners_only() {
        let mut t = RouteTable::default();
        t.insert(None, prefix("/"), respond("root")).unwrap();
        assert!(!t.has_pre_routes());
        t.insert_pre_route(PreRoute {
            prefix: b"/.well-known/acme-challenge/"[..].into(),
            plain_only: true,
            handler: respond("acme"),
        });
        let acme = b"/.well-known/acme-challenge/token";
        let body_of = |h: Option<&dyn Handler>| h.map_or("<none>".into(), |h| format!("{h:?}"));
        assert_eq!(body_of(t.pre_route(false, acme)), r#"Tag("acme")"#);
        assert_eq!(body_of(t.pre_route(true, acme)), "<none>");
        assert_eq!(body_of(t.pre_route(false, b"/x")), "<none>");
    }

    #[test]
    fn no_route_means_none() {
        let mut t = RouteTable::default();
        t.insert(None, prefix("/only"), respond("x")).unwrap();
        assert_eq!(get(&t, "h", "/other"), "<none>");
        assert_eq!(strip_port(b"[::1]:443"), b"[::1]");
    }

    /// A `[[site]]` of `hosts` on `listeners` with `routes` added in order.
    fn site(
        t: &mut RouteTable,
        hosts: &[&str],
        listeners: Option<Vec<usize>>,
        routes: Vec<(RouteMatch, &'static str)>,
    ) -> Site {
        let mut s = Site::new(SiteHosts::new(hosts.iter().copied()), listeners, false);
        for (m, tag) in routes {
            let route = Route {
                matches: m,
                index: t.next_index(),
                serves_plain: false,
                handler: respond(tag),
            };
            t.add_site_route(&mut s, route, tag.into()).unwrap();
        }
        s
    }

    #[test]
    fn sites_answer_exact_names_then_the_longest_wildcard_and_never_fall_back() {
        let mut t = RouteTable::default();
        t.insert(None, prefix("/"), respond("default")).unwrap();
        let a = site(&mut t, &["a.test"], None, vec![(prefix("/"), "a")]);
        t.add_site(a).unwrap();
        let w = site(&mut t, &["*.a.test"], None, vec![(prefix("/"), "any-a")]);
        t.add_site(w).unwrap();
        let ww = site(
            &mut t,
            &["*.x.a.test"],
            None,
            vec![(prefix("/only/"), "x-a")],
        );
        t.add_site(ww).unwrap();
        assert_eq!(get(&t, "a.test", "/"), r#"Tag("a")"#);
        assert_eq!(get(&t, "www.A.test:80", "/"), r#"Tag("any-a")"#);
        assert_eq!(get(&t, "a.test.", "/"), r#"Tag("a")"#);
        assert_eq!(get(&t, "b.x.a.test", "/only/1"), r#"Tag("x-a")"#);
        // A site answers its hosts alone: no falling back to other routes.
        assert_eq!(get(&t, "b.x.a.test", "/else"), "<none>");
        assert_eq!(get(&t, "other.test", "/"), r#"Tag("default")"#);
        let twice = site(&mut t, &["a.test"], None, vec![]);
        assert!(t.add_site(twice).unwrap_err().contains("a.test"));
        // A top-level route for a site's host would never be met.
        let shadowed = t.insert(Some("a.test".into()), prefix("/x"), respond("never"));
        assert!(shadowed.unwrap_err().contains("[[site]]"));
    }

    #[test]
    fn a_site_is_served_on_its_listeners_only() {
        let mut t = RouteTable::default();
        let s = site(
            &mut t,
            &["a.test"],
            Some(vec![1]),
            vec![(prefix("/"), "on-1")],
        );
        t.add_site(s).unwrap();
        let get_on = |l| answer(&t, "GET / HTTP/1.1\r\nHost: a.test", l, false);
        assert_eq!(get_on(1), r#"Tag("on-1")"#);
        assert_eq!(get_on(0), "<none>");
    }

    #[test]
    fn routes_are_tried_exact_then_longest_literal_then_more_conditions() {
        let mut t = RouteTable::default();
        let css = RouteMatch {
            paths: vec![PathMatch::from_path("*.css")],
            conditions: Conditions::default(),
        };
        let exact = RouteMatch {
            paths: vec![PathMatch::Exact(b"/assets/x.css"[..].into())],
            conditions: Conditions::default(),
        };
        let post = RouteMatch {
            paths: vec![PathMatch::from_path("/")],
            conditions: Conditions {
                methods: vec![b"POST"[..].into()],
                ..Conditions::default()
            },
        };
        let tls = RouteMatch {
            paths: vec![PathMatch::from_path("/")],
            conditions: Conditions {
                scheme: Some(Scheme::Https),
                fields: vec![matcher::FieldCondition {
                    name: "x-debug".into(),
                    value: None,
                }],
                ..Conditions::default()
            },
        };
        let s = site(
            &mut t,
            &[],
            None,
            vec![
                (prefix("/"), "root"),
                (css, "css"),
                (prefix("/assets/"), "assets"),
                (exact, "exact"),
                (post, "post"),
                (tls, "tls-debug"),
            ],
        );
        t.add_site(s).unwrap();
        assert_eq!(get(&t, "h", "/assets/x.css"), r#"Tag("exact")"#);
        assert_eq!(get(&t, "h", "/assets/y.css"), r#"Tag("assets")"#);
        assert_eq!(get(&t, "h", "/y.css"), r#"Tag("css")"#);
        assert_eq!(get(&t, "h", "/page"), r#"Tag("root")"#);
        let post = "POST /page HTTP/1.1\r\nHost: h\r\nContent-Length: 0";
        assert_eq!(answer(&t, post, 0, false), r#"Tag("post")"#);
        let debug = "GET /page HTTP/1.1\r\nHost: h\r\nX-Debug: 1";
        assert_eq!(answer(&t, debug, 0, true), r#"Tag("tls-debug")"#);
        assert_eq!(answer(&t, debug, 0, false), r#"Tag("root")"#);
    }

    #[test]
    fn plain_listeners_of_a_site_on_tls_too_meet_its_redirect_but_opted_out_routes() {
        let mut t = RouteTable::default();
        let mut s = site(&mut t, &["a.test"], None, vec![(prefix("/"), "site")]);
        let open = Route {
            matches: prefix("/open/"),
            index: t.next_index(),
            serves_plain: true,
            handler: respond("open"),
        };
        t.add_site_route(&mut s, open, "open".into()).unwrap();
        s.https_redirect = Some(Route {
            matches: RouteMatch::everything(),
            index: t.add_label("redirect".into()),
            serves_plain: false,
            handler: respond("to-https"),
        });
        t.add_site(s).unwrap();
        let req = |path: &str, secure| {
            answer(
                &t,
                &format!("GET {path} HTTP/1.1\r\nHost: a.test"),
                0,
                secure,
            )
        };
        assert_eq!(req("/x", false), r#"Tag("to-https")"#);
        assert_eq!(req("/x", true), r#"Tag("site")"#);
        assert_eq!(req("/open/1", false), r#"Tag("open")"#);
    }
}
