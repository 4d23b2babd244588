//! (host, path) -> handler: exact host (case-insensitive, port ignored) selects a
//! group, falling back to the routes without a host; the longest path prefix wins.

pub use crate::handler::{BoxedHandler, Handler};

/// One route: a path prefix and what serves it.
#[derive(Debug)]
pub struct Route {
    prefix: Box<[u8]>,
    /// Position in the configuration (0 = first `[[route]]`): the metrics' route slot.
    pub index: usize,
    /// What serves requests under the prefix.
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

/// All routes, grouped by host, each group sorted longest prefix first.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Handlers ahead of the routes.
    pre: Vec<PreRoute>,
    hosts: Vec<(Box<[u8]>, Vec<Route>)>,
    any: Vec<Route>,
    /// `host/prefix` of each route in configuration order, for metric labels.
    labels: Vec<String>,
}

impl RouteTable {
    /// Adds a route; the same (host, prefix) twice is an error.
    pub fn insert(
        &mut self,
        host: Option<String>,
        prefix: String,
        handler: Box<dyn Handler>,
    ) -> Result<(), String> {
        let host_label = host.clone();
        let group = match host {
            None => &mut self.any,
            Some(h) => {
                let h = h.into_bytes().into_boxed_slice();
                match self.hosts.iter().position(|(name, _)| *name == h) {
                    Some(i) => &mut self.hosts[i].1,
                    None => {
                        self.hosts.push((h, Vec::new()));
                        &mut self.hosts.last_mut().expect("just pushed").1
                    }
                }
            }
        };
        if group.iter().any(|r| *r.prefix == *prefix.as_bytes()) {
            return Err(format!("path {prefix:?} is routed twice for the same host"));
        }
        let index = self.labels.len();
        self.labels.push(match &host_label {
            Some(h) => format!("{h}{prefix}"),
            None => prefix.clone(),
        });
        group.push(Route {
            prefix: prefix.into_bytes().into_boxed_slice(),
            index,
            handler,
        });
        group.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        Ok(())
    }

    /// `host/prefix` (or `/prefix`) of every route, in configuration order.
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

    /// The handler for a request, if any route matches.
    pub fn find(&self, host: Option<&[u8]>, path: &[u8]) -> Option<&dyn Handler> {
        self.find_route(host, path).map(|r| &*r.handler)
    }

    /// The route for a request, if any matches.
    pub fn find_route(&self, host: Option<&[u8]>, path: &[u8]) -> Option<&Route> {
        let group = host
            .and_then(|h| {
                let name = strip_port(h);
                self.hosts
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
            })
            .map_or(&self.any, |(_, g)| g);
        group
            .iter()
            .find(|r| path.starts_with(&r.prefix))
            .or_else(|| self.any.iter().find(|r| path.starts_with(&r.prefix)))
    }

    /// Every handler, for start-up checks and logs.
    pub fn handlers(&self) -> impl Iterator<Item = &dyn Handler> {
        self.hosts
            .iter()
            .flat_map(|(_, g)| g.iter())
            .chain(self.any.iter())
            .map(|r| &*r.handler)
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
    use super::*;
    use crate::http::{Served, Session};
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

    fn body_of(h: Option<&dyn Handler>) -> String {
        h.map_or("<none>".into(), |h| format!("{h:?}"))
    }

    #[test]
    fn longest_prefix_wins_and_host_groups_fall_back() {
        let mut t = RouteTable::default();
        t.insert(None, "/".into(), respond("root")).unwrap();
        t.insert(None, "/api/".into(), respond("api")).unwrap();
        t.insert(
            Some("example.com".into()),
            "/admin".into(),
            respond("ex-admin"),
        )
        .unwrap();
        assert_eq!(body_of(t.find(None, b"/x")), r#"Tag("root")"#);
        assert_eq!(body_of(t.find(Some(b"a"), b"/api/v1")), r#"Tag("api")"#);
        assert_eq!(
            body_of(t.find(Some(b"EXAMPLE.com:8080"), b"/admin/x")),
            r#"Tag("ex-admin")"#
        );
        assert_eq!(
            body_of(t.find(Some(b"example.com"), b"/api/")),
            r#"Tag("api")"#
        );
        assert_eq!(body_of(t.find(Some(b"other"), b"/admin")), r#"Tag("root")"#);
        assert!(t.insert(None, "/api/".into(), respond("dup")).is_err());
    }

    #[test]
    fn a_pre_route_claims_its_prefix_on_its_listeners_only() {
        let mut t = RouteTable::default();
        t.insert(None, "/".into(), respond("root")).unwrap();
        assert!(!t.has_pre_routes());
        t.insert_pre_route(PreRoute {
            prefix: b"/.well-known/acme-challenge/"[..].into(),
            plain_only: true,
            handler: respond("acme"),
        });
        let acme = b"/.well-known/acme-challenge/token";
        assert_eq!(body_of(t.pre_route(false, acme)), r#"Tag("acme")"#);
        assert_eq!(body_of(t.pre_route(true, acme)), "<none>");
        assert_eq!(body_of(t.pre_route(false, b"/x")), "<none>");
    }

    #[test]
    fn no_route_means_none() {
        let mut t = RouteTable::default();
        t.insert(None, "/only".into(), respond("x")).unwrap();
        assert!(t.find(None, b"/other").is_none());
        assert_eq!(strip_port(b"[::1]:443"), b"[::1]");
    }
}
