//! Request handlers, each written against the protocol-neutral
//! [`Session`]: a driver routes a request and calls its handler through the
//! [`Handler`] trait, so adding a handler touches no driver. Each handler's
//! runtime code and its config validation sit side by side, as in h2o.

pub mod acme_challenge;
pub mod mime;
pub mod proxy;
mod proxy_entry;
pub mod respond;
pub mod static_files;

use std::fmt;

use toml::Spanned;

use crate::config::raw::RawRoute;
use crate::config::{ConfigError, Locator};
use crate::http::{Served, Session};
use crate::observe::metrics::HandlerKind;
use respond::Respond;
use static_files::StaticFiles;

/// A route's handler, as the route table holds it.
pub type BoxedHandler = Box<dyn Handler>;

/// What serves a route. Built once from the configuration and shared by every
/// worker, so per-worker state lives in the worker context, not here.
pub trait Handler: fmt::Debug + Send + Sync {
    /// Which handler this is, for the request metrics and logs.
    fn kind(&self) -> HandlerKind;

    /// Whether the handler reads the request body itself. Otherwise the driver
    /// reads and drops it (under the body limit) before calling [`Handler::serve`].
    fn reads_body(&self) -> bool {
        false
    }

    /// Answers one request through `session`. A handler that can answer from
    /// the head alone gives its response and returns [`Served::Done`] without
    /// allocating; one that must wait returns the future that answers.
    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s>;
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Builds a route's handler from its raw config, checking only the keys that handler uses.
pub fn from_raw(
    loc: &Locator<'_>,
    key: &str,
    r: &Spanned<RawRoute>,
    upstreams: &[std::sync::Arc<proxy::upstream::UpstreamGroup>],
) -> Result<Box<dyn Handler>, ConfigError> {
    let raw = r.get_ref();
    let kind = raw.handler.get_ref().as_str();
    let foreign = |present: bool, name: &str| -> Result<(), ConfigError> {
        if present {
            Err(loc.error(
                r.span(),
                &format!("{key}.{name}"),
                format!("not a key of the `{kind}` handler"),
            ))
        } else {
            Ok(())
        }
    };
    let proxy_keys = [
        (raw.upstream.is_some(), "upstream"),
        (raw.forwarded.is_some(), "forwarded"),
        (raw.via.is_some(), "via"),
        (raw.preserve_host.is_some(), "preserve_host"),
        (raw.client_addr_header.is_some(), "client_addr_header"),
        (raw.client_cert_header.is_some(), "client_cert_header"),
    ];
    if kind != "proxy" {
        for (present, name) in proxy_keys {
            foreign(present, name)?;
        }
    }
    match kind {
        "proxy" => {
            for (present, name) in [
                (raw.root.is_some(), "root"),
                (raw.index.is_some(), "index"),
                (raw.autoindex.is_some(), "autoindex"),
                (
                    raw.allow_symlinks_outside.is_some(),
                    "allow_symlinks_outside",
                ),
                (raw.open_file_cache_valid.is_some(), "open_file_cache_valid"),
                (raw.status.is_some(), "status"),
                (raw.body.is_some(), "body"),
                (raw.headers.is_some(), "headers"),
            ] {
                foreign(present, name)?;
            }
            Ok(Box::new(proxy::route_from_raw(loc, key, r, upstreams)?))
        }
        "static" => {
            foreign(raw.status.is_some(), "status")?;
            foreign(raw.body.is_some(), "body")?;
            foreign(raw.headers.is_some(), "headers")?;
            let Some(root) = &raw.root else {
                return Err(loc.error(
                    r.span(),
                    &format!("{key}.root"),
                    "a static route needs `root`",
                ));
            };
            let index = raw
                .index
                .clone()
                .unwrap_or_else(|| vec!["index.html".to_string()]);
            if let Some(bad) = index
                .iter()
                .find(|n| n.is_empty() || n.contains('/') || n.as_str() == "..")
            {
                return Err(loc.error(
                    r.span(),
                    &format!("{key}.index"),
                    format!("{bad:?} is not a file name"),
                ));
            }
            let files = StaticFiles::new(
                std::path::Path::new(root.get_ref()),
                index,
                raw.autoindex.unwrap_or(false),
                raw.allow_symlinks_outside.unwrap_or(false),
            )
            .map_err(|e| {
                loc.error(
                    root.span(),
                    &format!("{key}.root"),
                    format!("{:?}: {e}", root.get_ref()),
                )
            })?;
            let files = match &raw.open_file_cache_valid {
                None => files,
                Some(d) => {
                    let valid = crate::config::parse_duration(d.get_ref()).map_err(|m| {
                        loc.error(d.span(), &format!("{key}.open_file_cache_valid"), m)
                    })?;
                    files.with_cache_valid(valid)
                }
            };
            Ok(Box::new(files))
        }
        "respond" => {
            foreign(raw.root.is_some(), "root")?;
            foreign(raw.index.is_some(), "index")?;
            foreign(raw.autoindex.is_some(), "autoindex")?;
            foreign(
                raw.allow_symlinks_outside.is_some(),
                "allow_symlinks_outside",
            )?;
            foreign(raw.open_file_cache_valid.is_some(), "open_file_cache_valid")?;
            let status = match &raw.status {
                None => 200,
                Some(s) if (200..=599).contains(s.get_ref()) => *s.get_ref() as u16,
                Some(s) => {
                    return Err(loc.error(
                        s.span(),
                        &format!("{key}.status"),
                        format!("{} is not a final status (200-599)", s.get_ref()),
                    ));
                }
            };
            let body = raw.body.clone().unwrap_or_default().into_bytes();
            if matches!(status, 204 | 304) && !body.is_empty() {
                return Err(loc.error(
                    r.span(),
                    &format!("{key}.body"),
                    format!("a {status} response has no body"),
                ));
            }
            let mut headers = Vec::new();
            if let Some(h) = &raw.headers {
                for (name, value) in h.get_ref() {
                    let reserved = ["content-length", "transfer-encoding", "connection", "date"];
                    if !is_token(name) || reserved.contains(&name.to_ascii_lowercase().as_str()) {
                        return Err(loc.error(
                            h.span(),
                            &format!("{key}.headers.{name}"),
                            "not a header name that can be set here",
                        ));
                    }
                    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                        return Err(loc.error(
                            h.span(),
                            &format!("{key}.headers.{name}"),
                            "control characters in a header value",
                        ));
                    }
                    headers.push((name.clone(), value.clone()));
                }
            }
            Ok(Box::new(Respond::new(status, body, &headers)))
        }
        other => Err(loc.error(
            raw.handler.span(),
            &format!("{key}.handler"),
            format!("unknown handler {other:?}; expected \"static\", \"respond\" or \"proxy\""),
        )),
    }
}
