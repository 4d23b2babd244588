//! An upstream server as operators write one: `"host:port"`, a URL
//! (`"http://app:3000"`, `"https://api.example.com"`, as `--proxy` takes), or a
//! table `{ address = ..., weight = ... }`. Read apart from `raw.rs` because a
//! derive cannot take both a string and a table and keep the value's span.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::raw::RawUpstreamServer;

/// What an upstream server's address says once its scheme is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamAddress {
    /// `host:port` to resolve and to name the server by (a URL's default port
    /// made explicit).
    pub authority: String,
    /// `Some(true)` for `https://`, `Some(false)` for `http://`, `None` without
    /// a scheme (the group's `tls` decides).
    pub tls: Option<bool>,
}

/// Reads `host:port`, `http://host[:port]` or `https://host[:port]` (ports
/// 80 and 443 by default). A URL with a path, query or user is refused in
/// words: a proxy route sends the request's own path.
pub fn parse_upstream_address(text: &str) -> Result<UpstreamAddress, String> {
    let text = text.trim();
    let Some((scheme, rest)) = text.split_once("://") else {
        return Ok(UpstreamAddress {
            authority: text.to_string(),
            tls: None,
        });
    };
    let tls = match scheme.to_ascii_lowercase().as_str() {
        "http" => false,
        "https" => true,
        _ => {
            return Err(format!(
                "{text:?} has the scheme {scheme:?}; an upstream server is host:port, \
                 http://host[:port] or https://host[:port]"
            ))
        }
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if !tail.is_empty() && tail != "/" {
        return Err(format!(
            "{text:?} has a path ({tail:?}); an upstream server is a scheme, host and port \
             only, and a proxy route sends each request's own path"
        ));
    }
    if authority.contains('@') {
        return Err(format!(
            "{text:?} names a user; an upstream server is a scheme, host and port only"
        ));
    }
    if authority.is_empty() {
        return Err(format!("{text:?} names no host"));
    }
    let has_port = match authority.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && !host.ends_with('[') && !port.contains(']'),
        None => false,
    };
    let authority = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    Ok(UpstreamAddress {
        authority,
        tls: Some(tls),
    })
}

/// The table form, with its own unknown-key check.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableForm {
    address: Spanned<String>,
    weight: Option<Spanned<i64>>,
}

enum Form {
    Address(String),
    Table(TableForm),
}

struct FormVisitor;

impl<'de> Visitor<'de> for FormVisitor {
    type Value = Form;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a server address such as \"127.0.0.1:3000\" or \"http://app:3000\", \
             or a table such as { address = \"127.0.0.1:3000\", weight = 2 }",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Form, E> {
        Ok(Form::Address(v.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Form, A::Error> {
        TableForm::deserialize(de::value::MapAccessDeserializer::new(map)).map(Form::Table)
    }
}

impl<'de> Deserialize<'de> for Form {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FormVisitor)
    }
}

impl<'de> Deserialize<'de> for RawUpstreamServer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let form = Spanned::<Form>::deserialize(d)?;
        let span = form.span();
        Ok(match form.into_inner() {
            Form::Address(a) => RawUpstreamServer {
                address: Spanned::new(span, a),
                weight: None,
            },
            Form::Table(t) => RawUpstreamServer {
                address: t.address,
                weight: t.weight,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (String, Option<bool>) {
        let a = parse_upstream_address(text).unwrap();
        (a.authority, a.tls)
    }

    #[test]
    fn upstream_addresses_as_host_port_or_url() {
        assert_eq!(parsed("127.0.0.1:3000"), ("127.0.0.1:3000".into(), None));
        assert_eq!(
            parsed("http://127.0.0.1:3000"),
            ("127.0.0.1:3000".into(), Some(false))
        );
        assert_eq!(parsed("http://app/"), ("app:80".into(), Some(false)));
        assert_eq!(
            parsed("HTTPS://api.test"),
            ("api.test:443".into(), Some(true))
        );
        assert_eq!(parsed("https://[::1]"), ("[::1]:443".into(), Some(true)));
        assert_eq!(
            parsed("https://[::1]:8443"),
            ("[::1]:8443".into(), Some(true))
        );
    }

    #[test]
    fn a_url_path_scheme_or_user_is_refused_in_words() {
        let e = parse_upstream_address("http://app:3000/api").unwrap_err();
        assert!(e.contains("has a path (\"/api\")"), "{e}");
        let e = parse_upstream_address("ftp://app:21").unwrap_err();
        assert!(e.contains("scheme \"ftp\""), "{e}");
        assert!(parse_upstream_address("http://u:p@app").is_err());
        assert!(parse_upstream_address("http://").is_err());
    }

    fn upstream(servers: &str, extra: &str) -> String {
        format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"respond\"\n\
             [[upstream]]\nname = \"u\"\nservers = {servers}\n{extra}"
        )
    }

    #[test]
    fn servers_are_read_as_strings_urls_and_tables() {
        let cfg = crate::config::check_text(&upstream(
            "[\"127.0.0.1:2\", \"http://127.0.0.1:3\", { address = \"127.0.0.1:4\", weight = 3 }]",
            "",
        ))
        .unwrap();
        let g = &cfg.upstreams[0];
        let names: Vec<&str> = g.servers.iter().map(|s| s.authority.as_str()).collect();
        assert_eq!(names, ["127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"]);
        assert_eq!(g.servers[2].weight(), 3);
        assert!(g.tls.is_none());
        let cfg = crate::config::check_text(&upstream("[\"https://127.0.0.1\"]", "")).unwrap();
        let g = &cfg.upstreams[0];
        assert!(g.tls.is_some(), "https:// means TLS to the server");
        assert_eq!(g.servers[0].addr.port(), 443);
    }

    #[test]
    fn bad_server_addresses_are_located_and_explained() {
        let e = crate::config::check_text(&upstream("[\"127.0.0.1:2\", \"http://a:1/api\"]", ""))
            .unwrap_err();
        e.assert_at(7, "upstream[1].servers[2].address");
        assert!(e.message.contains("has a path"), "{e}");
        let e = crate::config::check_text(&upstream(
            "[\"https://127.0.0.1:2\", \"http://127.0.0.1:3\"]",
            "",
        ))
        .unwrap_err();
        assert!(e.message.contains("all https:// or all http://"), "{e}");
        let e = crate::config::check_text(&upstream(
            "[\"http://127.0.0.1:3\"]",
            "tls = { verify = false }\n",
        ))
        .unwrap_err();
        assert!(e.message.contains("tls table"), "{e}");
        let e = crate::config::check_text(&upstream("[3]", "")).unwrap_err();
        e.assert_at(7, "upstream[1].servers[1]");
        assert!(e.message.contains("a server address such as"), "{e}");
        assert!(!e.message.contains("RawUpstreamServer"), "{e}");
    }
}
