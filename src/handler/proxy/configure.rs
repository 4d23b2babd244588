//! Second configuration stage of a `proxy` route: its raw keys checked and turned
//! into a [`ProxyRoute`] bound to its upstream group, beside the proxy as h2o keeps
//! each configurator beside its handler.

use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;

use super::upstream::UpstreamGroup;
use super::{Forwarding, ProxyRoute};
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::RawProxy;
use crate::config::value::unknown_choice;

/// The group the `upstream` key of a listener or route (`key`, its table at
/// `span`) names; `needed_by` says who needs the key when it is missing.
pub fn upstream_named(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    name: &Option<Spanned<String>>,
    needed_by: &str,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<Arc<UpstreamGroup>, ConfigError> {
    let Some(name) = name else {
        return Err(loc.error(
            span,
            &format!("{key}.upstream"),
            format!("{needed_by} needs `upstream`"),
        ));
    };
    match upstreams.iter().find(|g| g.name == *name.get_ref()) {
        Some(group) => Ok(group.clone()),
        None => Err(loc.error(
            name.span(),
            &format!("{key}.upstream"),
            format!("no [[upstream]] named {:?}", name.get_ref()),
        )),
    }
}

/// Builds a `proxy` route from its raw keys; `key` names the route (`route[2]`)
/// and `span` its table, for keys that are missing.
pub fn build_proxy(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    raw: &RawProxy,
    upstreams: &[Arc<UpstreamGroup>],
) -> Result<ProxyRoute, ConfigError> {
    let group = upstream_named(loc, key, span, &raw.upstream, "a proxy route", upstreams)?;
    let forwarding = match raw.forwarded.as_ref().map(|f| f.get_ref().as_str()) {
        None | Some("x-forwarded") => Forwarding {
            x_forwarded: true,
            forwarded: false,
        },
        Some("forwarded") => Forwarding {
            x_forwarded: false,
            forwarded: true,
        },
        Some("both") => Forwarding {
            x_forwarded: true,
            forwarded: true,
        },
        Some("none") => Forwarding {
            x_forwarded: false,
            forwarded: false,
        },
        Some(_) => {
            return Err(unknown_choice(
                loc,
                &raw.forwarded,
                &format!("{key}.forwarded"),
                "value",
                &["x-forwarded", "forwarded", "both", "none"],
            ))
        }
    };
    let header_name =
        |h: &Option<Spanned<String>>, k: &str| -> Result<Option<Box<str>>, ConfigError> {
            let Some(h) = h else { return Ok(None) };
            let v = h.get_ref();
            let reserved = [
                "host",
                "content-length",
                "transfer-encoding",
                "connection",
                "upgrade",
                "te",
                "trailer",
                "keep-alive",
            ];
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
                || reserved.contains(&v.to_ascii_lowercase().as_str())
            {
                return Err(loc.error(
                    h.span(),
                    &format!("{key}.{k}"),
                    format!("{v:?} is not a header name that can be set here"),
                ));
            }
            Ok(Some(v.clone().into_boxed_str()))
        };
    Ok(ProxyRoute {
        group,
        forwarding,
        via: raw.via.unwrap_or(true),
        preserve_host: raw.preserve_host.unwrap_or(true),
        client_addr_header: header_name(&raw.client_addr_header, "client_addr_header")?,
        client_cert_header: header_name(&raw.client_cert_header, "client_cert_header")?,
        request_rules: None,
        error_pages: Default::default(),
        cache: None,
    })
}
