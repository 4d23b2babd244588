//! `pier check --routes`: per listener and host, the routes a request meets,
//! in the order they are tried.

use std::fmt::Write as _;

use super::matcher::{PathMatch, RouteMatch, Scheme};
use super::RouteTable;

/// A listener as the listing names it: its position, its name or address,
/// and whether it is TLS.
pub struct ListenerLine {
    /// Position in the configuration.
    pub index: usize,
    /// `name (address)` or the address.
    pub label: String,
    /// TLS.
    pub secure: bool,
}

/// The listing: for each listener, each site served on it, its routes in
/// the order they are tried.
pub fn describe(table: &RouteTable, listeners: &[ListenerLine], labels: &[String]) -> String {
    let mut out = String::new();
    for l in listeners {
        let scheme = if l.secure { "https" } else { "http" };
        let _ = writeln!(out, "listener {} ({scheme})", l.label);
        for site in table.sites().filter(|s| s.on_listener(l.index)) {
            let hosts = site.hosts.names();
            let name = if hosts.is_empty() {
                "any host".to_string()
            } else {
                hosts.join(", ")
            };
            let fallback = if site.falls_back {
                ", then the routes for any host"
            } else {
                ""
            };
            let _ = writeln!(out, "  {name}{fallback}");
            if let (false, Some(r)) = (l.secure, &site.https_redirect) {
                let _ = writeln!(
                    out,
                    "    every path (but routes with redirect_https = false) -> redirect to HTTPS  [{}]",
                    label(labels, r.index)
                );
            }
            for (route, matches, path) in site.ordered() {
                let _ = writeln!(
                    out,
                    "    {}{} -> {}  [{}]",
                    path_text(&matches.paths[path]),
                    conditions_text(matches, listeners),
                    route.handler.kind().label(),
                    label(labels, route.index)
                );
            }
        }
    }
    out
}

fn label(labels: &[String], index: usize) -> &str {
    labels.get(index).map_or("", String::as_str)
}

fn path_text(p: &PathMatch) -> String {
    match p {
        PathMatch::Prefix(_) => format!("{} (prefix)", p.text()),
        PathMatch::Exact(_) => format!("{} (exact)", p.text().trim_start_matches('=')),
        PathMatch::Pattern(_) => format!("{} (pattern)", p.text()),
    }
}

/// The conditions beside the path, as `, if ...` clauses.
fn conditions_text(m: &RouteMatch, listeners: &[ListenerLine]) -> String {
    let c = &m.conditions;
    let text = |list: &[Box<[u8]>]| {
        list.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect::<Vec<_>>()
            .join("|")
    };
    let mut out = String::new();
    if !c.extensions.is_empty() {
        let _ = write!(out, ", extension {}", text(&c.extensions));
    }
    if !c.methods.is_empty() {
        let _ = write!(out, ", method {}", text(&c.methods));
    }
    match c.scheme {
        Some(Scheme::Http) => out.push_str(", over http"),
        Some(Scheme::Https) => out.push_str(", over https"),
        None => {}
    }
    if let Some(l) = &c.listeners {
        let names: Vec<&str> = l
            .iter()
            .filter_map(|i| listeners.iter().find(|x| x.index == *i))
            .map(|x| x.label.as_str())
            .collect();
        let _ = write!(out, ", on {}", names.join("|"));
    }
    for f in &c.fields {
        match &f.value {
            None => {
                let _ = write!(out, ", with {}", f.name);
            }
            Some(v) => {
                let _ = write!(out, ", {} = {:?}", f.name, String::from_utf8_lossy(v));
            }
        }
    }
    out
}
