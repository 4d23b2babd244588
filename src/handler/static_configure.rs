//! The configuration of the `static` handler, beside the handler as h2o keeps
//! each configurator beside its handler: its keys as written ([`RawStatic`]),
//! checked and turned into a [`StaticFiles`] (root opened, index names
//! checked) and the route's `Cache-Control`/`Expires` filter.

use std::any::Any;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::config::value::{parse_duration, RawDuration};
use crate::filter::cache_headers::CacheHeaders;
use crate::filter::BoxedFilter;
use crate::http::content_coding::Coding;

use super::configure::{HandlerSpec, RawHandler, RouteContext};
use super::mime_table::MimeTable;
use super::static_files::{StaticFiles, StaticRules};
use super::BoxedHandler;

/// `handler = "static"`.
pub const STATIC: HandlerSpec = HandlerSpec::new::<RawStatic>("static");

/// The keys of a `static` route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStatic {
    /// Document root.
    pub root: Option<Spanned<String>>,
    /// Index file names tried for a directory.
    pub index: Option<Spanned<Vec<String>>>,
    /// HTML listing for directories without an index.
    pub autoindex: Option<bool>,
    /// Allow symlinks that lead outside the root.
    pub allow_symlinks_outside: Option<bool>,
    /// How long a worker reuses an opened file before opening its path again.
    pub open_file_cache_valid: Option<Spanned<RawDuration>>,
    /// `Cache-Control` sent with files, listings and redirects.
    pub cache_control: Option<Spanned<String>>,
    /// Serve dot-files (paths with a segment starting with `.`).
    pub allow_hidden: Option<bool>,
    /// Paths tried in order (`{path}` is the request's); the last one answers.
    pub try_files: Option<Spanned<Vec<Spanned<String>>>>,
    /// Status -> page under the root sent with it.
    pub error_pages: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `html` (default; JSON to `Accept: application/json`) or `json`.
    pub autoindex_format: Option<Spanned<String>>,
    /// `Expires` (now plus this) sent with files, listings and redirects.
    pub expires: Option<Spanned<RawDuration>>,
    /// Codings whose precompressed siblings (`file.br`, `file.zst`,
    /// `file.gz`) are served, in the order preferred on equal weights.
    pub precompressed: Option<Vec<Spanned<String>>>,
}

impl RawHandler for RawStatic {
    fn name(&self) -> &'static str {
        STATIC.name
    }

    fn resolve_paths(&mut self, resolve: &dyn Fn(&mut Spanned<String>)) {
        if let Some(root) = &mut self.root {
            resolve(root);
        }
    }

    fn build(&self, route: RouteContext<'_>) -> Result<BoxedHandler, ConfigError> {
        let files = build_static(route.loc, route.key, route.span, self, route.mime)?;
        Ok(Box::new(files))
    }

    fn own_filters(&self, loc: &Locator<'_>, key: &str) -> Result<Vec<BoxedFilter>, ConfigError> {
        Ok(match cache_headers(loc, key, self)? {
            Some(headers) => vec![Box::new(headers)],
            None => Vec::new(),
        })
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Builds a `static` route's handler; `key` names the route (`route[2]`) and
/// `span` its table, for keys that are missing.
pub fn build_static(
    loc: &Locator<'_>,
    key: &str,
    span: Range<usize>,
    raw: &RawStatic,
    mime: &Arc<MimeTable>,
) -> Result<StaticFiles, ConfigError> {
    let Some(root) = &raw.root else {
        return Err(loc.error(span, &format!("{key}.root"), "a static route needs `root`"));
    };
    let index = match &raw.index {
        None => vec!["index.html".to_string()],
        Some(list) => {
            if let Some(bad) = list
                .get_ref()
                .iter()
                .find(|n| n.is_empty() || n.contains('/') || n.as_str() == "..")
            {
                return Err(loc.error(
                    list.span(),
                    &format!("{key}.index"),
                    format!("{bad:?} is not a file name"),
                ));
            }
            list.get_ref().clone()
        }
    };
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
    let files = files.with_rules(rules(loc, key, raw, mime)?);
    Ok(match &raw.open_file_cache_valid {
        None => files,
        Some(d) => {
            let valid = parse_duration(d.get_ref())
                .map_err(|m| loc.error(d.span(), &format!("{key}.open_file_cache_valid"), m))?;
            files.with_cache_valid(valid)
        }
    })
}

/// The status of an `error_pages` entry (static and proxy routes alike): an
/// error status, 400-599; `at` names the entry and `span` is its value's.
pub(crate) fn error_page_status(
    loc: &Locator<'_>,
    at: &str,
    status: &str,
    span: std::ops::Range<usize>,
) -> Result<u16, ConfigError> {
    match status.parse::<u16>() {
        Ok(c) if (400..=599).contains(&c) => Ok(c),
        _ => Err(loc.error(
            span,
            at,
            format!("{status:?} is not an error status (400-599)"),
        )),
    }
}

/// `allow_hidden`, `try_files`, `error_pages`, `autoindex_format` and
/// `precompressed`.
fn rules(
    loc: &Locator<'_>,
    key: &str,
    raw: &RawStatic,
    mime: &Arc<MimeTable>,
) -> Result<StaticRules, ConfigError> {
    let mut try_files = Vec::new();
    if let Some(list) = &raw.try_files {
        if list.get_ref().is_empty() {
            return Err(loc.error(
                list.span(),
                &format!("{key}.try_files"),
                "list at least one path, e.g. [\"{path}\", \"/index.html\"]",
            ));
        }
        for entry in list.get_ref() {
            let text = entry.get_ref();
            let rest = text.replace("{path}", "");
            if !(text.starts_with('/') || text.starts_with("{path}"))
                || rest.contains(['{', '}', '?', '#'])
                || text.bytes().any(|b| b <= 0x20 || b == 0x7f)
            {
                return Err(loc.error(
                    entry.span(),
                    &format!("{key}.try_files"),
                    format!(
                        "{text:?} is not a path under the root: start with \"/\" or \"{{path}}\" \
                         ({{path}} is the only placeholder)"
                    ),
                ));
            }
            try_files.push(text.as_str().into());
        }
    }
    let mut error_pages = Vec::new();
    if let Some(pages) = &raw.error_pages {
        for (status, page) in pages.get_ref() {
            let at = format!("{key}.error_pages.{status}");
            let code = error_page_status(loc, &at, status, page.span())?;
            let path = page.get_ref();
            if !path.starts_with('/') || path.bytes().any(|b| b <= 0x20 || b == 0x7f) {
                return Err(loc.error(
                    page.span(),
                    &at,
                    format!("{path:?} is not a path under the root, e.g. \"/404.html\""),
                ));
            }
            if let Some(root) = &raw.root {
                let file = std::path::Path::new(root.get_ref()).join(&path[1..]);
                if !file.is_file() {
                    loc.finding(loc.error(
                        page.span(),
                        &at,
                        format!(
                            "the error page {} does not exist; {status} answers in plain text                              until it does",
                            file.display()
                        ),
                    ));
                }
            }
            error_pages.push((code, path.as_bytes().into()));
        }
    }
    let autoindex_json = match raw.autoindex_format.as_ref() {
        None => false,
        Some(f) => match f.get_ref().as_str() {
            "html" => false,
            "json" => true,
            other => {
                return Err(loc.error(
                    f.span(),
                    &format!("{key}.autoindex_format"),
                    format!("unknown format {other:?}; use \"html\" or \"json\""),
                ))
            }
        },
    };
    let mut precompressed = Vec::new();
    for name in raw.precompressed.iter().flatten() {
        let at = format!("{key}.precompressed");
        let Some(coding) = Coding::from_name(name.get_ref()) else {
            return Err(loc.error(
                name.span(),
                &at,
                format!(
                    "{:?} is not a coding Pier serves; use \"br\", \"zstd\" or \"gzip\"",
                    name.get_ref()
                ),
            ));
        };
        if precompressed.contains(&coding) {
            return Err(loc.error(
                name.span(),
                &at,
                format!("{:?} is listed twice", name.get_ref()),
            ));
        }
        precompressed.push(coding);
    }
    Ok(StaticRules {
        allow_hidden: raw.allow_hidden.unwrap_or(false),
        precompressed: precompressed.into(),
        try_files: try_files.into(),
        error_pages: error_pages.into(),
        autoindex_json,
        mime: mime.clone(),
    })
}

/// `cache_control` and `expires`: the route's `Cache-Control` and `Expires`
/// headers, sent by a route filter.
fn cache_headers(
    loc: &Locator<'_>,
    key: &str,
    s: &RawStatic,
) -> Result<Option<CacheHeaders>, ConfigError> {
    let cache_control = match &s.cache_control {
        None => None,
        Some(v) => {
            let text = v.get_ref().trim();
            if text.is_empty() || text.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(loc.error(
                    v.span(),
                    &format!("{key}.cache_control"),
                    "a Cache-Control value such as \"public, max-age=3600\"",
                ));
            }
            Some(text.to_string())
        }
    };
    let expires = match &s.expires {
        None => None,
        Some(d) => Some(
            parse_duration(d.get_ref())
                .map_err(|m| loc.error(d.span(), &format!("{key}.expires"), m))?,
        ),
    };
    if cache_control.is_none() && expires.is_none() {
        return Ok(None);
    }
    Ok(Some(CacheHeaders::new(cache_control, expires)))
}
