//! A route as written: where it matches (host, paths, conditions), the
//! filters around its handler, and its handler's own keys read into the
//! struct its [`HandlerSpec`] names. A route without `handler` takes the one
//! handler its keys fit; a route in a site has the site's keys under its own.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::de::IntoDeserializer;
use serde::Deserialize;
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

use super::value::{one_of, RawDuration};
use crate::handler::configure::{HandlerSpec, RawHandler};

/// One `[[route]]`: where it matches, and its handler with that handler's own keys.
/// Read by [`RawRoute::from_toml`] rather than a derive, so every value keeps its
/// span (serde's tagged enums buffer the input and lose them).
#[derive(Debug)]
pub struct RawRoute {
    /// Host to match (exact, case-insensitive, port ignored); absent matches any.
    pub host: Option<Spanned<String>>,
    /// Path prefixes and patterns (`/api/`, `/assets/*`, `*.css`): one, or a list.
    pub path: Option<Spanned<RawStrings>>,
    /// The conditions beside host and path.
    pub conditions: RawConditions,
    /// The `handler` key and the keys of that handler, read into the struct
    /// its [`HandlerSpec`] names; the span is the `handler` value's.
    pub handler: Spanned<Box<dyn RawHandler>>,
    /// The filters around the handler, whatever the handler.
    pub filters: RawRouteFilters,
}

/// Route keys that apply whatever the handler: the filters around it
/// (`src/filter/`), each read into its own field.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouteFilters {
    /// Fields set, added and removed on the route's responses.
    pub response_headers: Option<Spanned<RawHeaderRules>>,
    /// Fields set, added and removed on the request sent upstream (proxy routes).
    pub request_headers: Option<Spanned<RawHeaderRules>>,
    /// Addresses and networks answered (access control).
    pub allow: Option<Spanned<Vec<Spanned<String>>>>,
    /// Addresses and networks refused with 403.
    pub deny: Option<Spanned<Vec<Spanned<String>>>>,
    /// HTTP basic authentication from an htpasswd file.
    pub basic_auth: Option<Spanned<RawBasicAuth>>,
    /// Requests per second per client.
    pub rate_limit: Option<Spanned<RawRateLimit>>,
    /// Compression of responses: `true`, or a table of settings
    /// ([`RawCompressSettings`]), read by `filter::compress_configure`.
    pub compress: Option<Spanned<toml::Value>>,
}

/// The `compress` table of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompressSettings {
    /// On (the default once the table is written) or off.
    pub enabled: Option<bool>,
    /// Codings on offer, in the order preferred on equal weights.
    pub codings: Option<Vec<String>>,
    /// Media types compressed (`text/*`, `application/*+json`).
    pub types: Option<Vec<String>>,
    /// Known-length bodies shorter than this are sent as they are.
    pub min_length: Option<crate::config::value::RawSize>,
    /// Level per coding: `{ gzip = 5, br = 4, zstd = 3 }`.
    pub levels: Option<BTreeMap<String, i64>>,
}

/// `basic_auth = { htpasswd = "...", realm = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBasicAuth {
    /// File of `user:hash` lines.
    pub htpasswd: Spanned<String>,
    /// Realm named in the challenge.
    pub realm: Option<Spanned<String>>,
}

/// `rate_limit = { rate = "10/s", burst = 20, key = "...", max_keys = ... }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    /// Requests per second, or `"N/s"`, `"N/m"`, `"N/h"`.
    pub rate: Spanned<RawRate>,
    /// Requests that may arrive at once.
    pub burst: Option<Spanned<i64>>,
    /// `remote_addr` (default) or `header:Name`.
    pub key: Option<Spanned<String>>,
    /// Clients tracked at most.
    pub max_keys: Option<Spanned<i64>>,
    /// A store shared by a fleet (`redis://host:port/db`).
    pub store: Option<Spanned<String>>,
    /// How long a decision waits for the store.
    pub store_timeout: Option<Spanned<RawDuration>>,
    /// `local`, `allow` or `deny` when the store gives no answer.
    pub on_store_error: Option<Spanned<String>>,
}

/// A rate as written: a number per second, or text with a unit.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawRate {
    /// Whole requests per second.
    PerSecond(i64),
    /// Fractional requests per second.
    Fraction(f64),
    /// `"N/s"`, `"N/m"` or `"N/h"`.
    Text(String),
}

/// The keys of [`RawRouteFilters`], which a route reads apart from its handler's.
pub const ROUTE_FILTER_KEYS: &[&str] = &[
    "response_headers",
    "request_headers",
    "allow",
    "deny",
    "basic_auth",
    "rate_limit",
    "compress",
];

/// `response_headers = { ... }` or `request_headers = { ... }` of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaderRules {
    /// Name -> value: every field of the name is replaced by this one.
    pub set: Option<BTreeMap<String, Spanned<RawFieldValues>>>,
    /// Name -> value (or list of values): sent beside fields of the same name.
    pub add: Option<BTreeMap<String, Spanned<RawFieldValues>>>,
    /// Names of fields dropped.
    pub remove: Option<Vec<Spanned<String>>>,
    /// Error answers (4xx, 5xx) get the rules too.
    pub always: Option<bool>,
}

/// One value, or several (`add` sends one field per value).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawFieldValues {
    /// One field.
    One(String),
    /// A field per element.
    Many(Vec<String>),
}

/// One text, or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawStrings {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl RawStrings {
    /// Each text.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let (one, many) = match self {
            RawStrings::One(s) => (Some(s.as_str()), &[][..]),
            RawStrings::Many(v) => (None, v.as_slice()),
        };
        one.into_iter().chain(many.iter().map(String::as_str))
    }
}

/// A route's conditions beside host and path (`src/route/matcher.rs`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConditions {
    /// Paths matched exactly.
    pub exact_path: Option<Spanned<RawStrings>>,
    /// File extensions of the path's last segment (`"css"` or `".css"`).
    pub extensions: Option<Spanned<RawStrings>>,
    /// Request methods.
    pub methods: Option<Spanned<RawStrings>>,
    /// `http` or `https`.
    pub scheme: Option<Spanned<String>>,
    /// Listeners, by name or address.
    pub listeners: Option<Spanned<RawStrings>>,
    /// Request fields: name -> value, or `"*"` for any value.
    pub match_header: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `false`: served on plain listeners where the site redirects to HTTPS.
    pub redirect_https: Option<Spanned<bool>>,
}

/// The keys that say where a route matches, whatever its handler.
pub const ROUTE_MATCH_KEYS: &[&str] = &[
    "host",
    "path",
    "handler",
    "exact_path",
    "extensions",
    "methods",
    "scheme",
    "listeners",
    "match_header",
    "redirect_https",
];

/// The keys every route has, whatever its handler.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouteMatch {
    host: Option<Spanned<String>>,
    path: Option<Spanned<RawStrings>>,
    handler: Option<Spanned<String>>,
}

impl RawRoute {
    /// Reads one `[[route]]` element: the match keys, then the keys of the handler
    /// it names (one of `handlers`), each into its own struct with its own
    /// unknown-key check. `inherited` names the keys a site gave the route:
    /// one its handler does not take is left out rather than refused.
    pub fn from_toml<'i>(
        v: Spanned<DeValue<'i>>,
        handlers: &[HandlerSpec],
        inherited: &[String],
    ) -> Result<Spanned<RawRoute>, RouteError> {
        let span = v.span();
        let DeValue::Table(table) = v.into_inner() else {
            return Err(de_error("a route is a table", span, ""));
        };
        let (common, own): (DeTable<'i>, DeTable<'i>) = table
            .into_iter()
            .partition(|(k, _)| ROUTE_MATCH_KEYS.contains(&k.get_ref().as_ref()));
        let (conditions, common): (DeTable<'i>, DeTable<'i>) = common
            .into_iter()
            .partition(|(k, _)| !matches!(k.get_ref().as_ref(), "host" | "path" | "handler"));
        let (filters, own): (DeTable<'i>, DeTable<'i>) = own
            .into_iter()
            .partition(|(k, _)| ROUTE_FILTER_KEYS.contains(&k.get_ref().as_ref()));
        let table_of = |t: DeTable<'i>| Spanned::new(span.clone(), DeValue::Table(t));
        let handler_inherited = inherited.iter().any(|k| k == "handler");
        let m = RawRouteMatch::deserialize(table_of(common).into_deserializer())?;
        let conditions = RawConditions::deserialize(table_of(conditions).into_deserializer())?;
        let filters = RawRouteFilters::deserialize(table_of(filters).into_deserializer())?;
        let is_inherited = |k: &str| inherited.iter().any(|i| i == k);
        let spec = match &m.handler {
            Some(h) if !handler_inherited => named_handler(h, handlers)?,
            named => match infer_handler(&own, handlers, &is_inherited) {
                Some(spec) => spec,
                None => match named {
                    Some(h) => named_handler(h, handlers)?,
                    None => return Err(no_handler(span, &own, handlers)),
                },
            },
        };
        let handler_span = m.handler.as_ref().map_or(span.clone(), |h| h.span());
        // Keys a site gave that this route's handler does not take are left out.
        let own: DeTable<'i> = own
            .into_iter()
            .filter(|(k, v)| !is_inherited(k.get_ref()) || takes_key(spec, k.get_ref(), v))
            .collect();
        let raw = match spec.read(table_of(own.clone())) {
            Ok(raw) => raw,
            Err(e) => return Err(foreign_key(spec.name, &own, e, handlers)),
        };
        Ok(Spanned::new(
            span,
            RawRoute {
                host: m.host,
                path: m.path,
                conditions,
                handler: Spanned::new(handler_span, raw),
                filters,
            },
        ))
    }
}

/// The handler a route's `handler` value names.
fn named_handler<'s>(
    handler: &Spanned<String>,
    handlers: &'s [HandlerSpec],
) -> Result<&'s HandlerSpec, RouteError> {
    let name = handler.get_ref().as_str();
    handlers.iter().find(|h| h.name == name).ok_or_else(|| {
        de_error(
            &format!(
                "unknown handler {name:?}; expected {}",
                handler_names(handlers)
            ),
            handler.span(),
            "handler",
        )
    })
}

/// Whether `spec` takes the key `key` (with its value): reading it alone
/// fails for no unknown key.
fn takes_key(spec: &HandlerSpec, key: &str, value: &Spanned<DeValue<'_>>) -> bool {
    let key: Spanned<DeString<'_>> = Spanned::new(value.span(), key.to_string().into());
    let alone: DeTable<'_> = std::iter::once((key, value.clone())).collect();
    match spec.read(Spanned::new(value.span(), DeValue::Table(alone))) {
        Ok(_) => true,
        Err(e) => !e.message().starts_with("unknown field"),
    }
}

/// The one handler that takes every key of a route without `handler`: first
/// by the route's own keys, then by those a site gave it too.
fn infer_handler<'s>(
    own: &DeTable<'_>,
    handlers: &'s [HandlerSpec],
    is_inherited: &dyn Fn(&str) -> bool,
) -> Option<&'s HandlerSpec> {
    let fitting = |only_own: bool| -> Vec<&'s HandlerSpec> {
        let keys: Vec<_> = own
            .iter()
            .filter(|(k, _)| !only_own || !is_inherited(k.get_ref()))
            .collect();
        if keys.is_empty() {
            return Vec::new();
        }
        handlers
            .iter()
            .filter(|spec| keys.iter().all(|(k, v)| takes_key(spec, k.get_ref(), v)))
            .collect()
    };
    let by_own = fitting(true);
    if let [one] = by_own[..] {
        return Some(one);
    }
    if !by_own.is_empty() {
        return None;
    }
    match fitting(false)[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// The error for a route whose handler is neither named nor told by its keys.
fn no_handler(span: Range<usize>, own: &DeTable<'_>, handlers: &[HandlerSpec]) -> RouteError {
    // A misspelt `handler` is the likely cause: point at it.
    if let Some((k, _)) = own
        .iter()
        .find(|(k, _)| super::error::edit_distance(k.get_ref(), "handler") <= 2)
    {
        return RouteError::Key {
            message: format!(
                "unknown field `{}`: not a key of a route; did you mean `handler`?",
                k.get_ref()
            ),
            span: k.span(),
            key: k.get_ref().to_string(),
        };
    }
    de_error(
        &format!("a route needs `handler`: {}", handler_names(handlers)),
        span,
        "handler",
    )
}

/// The handlers a route may name, for the errors that list them.
fn handler_names(handlers: &[HandlerSpec]) -> String {
    one_of(handlers.iter().map(|h| h.name))
}

/// An unknown key that is a key of another handler says so; other errors pass.
fn foreign_key(
    handler: &str,
    own: &DeTable<'_>,
    e: toml::de::Error,
    handlers: &[HandlerSpec],
) -> RouteError {
    let unknown = e
        .message()
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
        .map(|(k, _)| k);
    let Some((key, value)) = unknown.and_then(|k| own.get_key_value(k)) else {
        return RouteError::Toml(e);
    };
    let alone: DeTable<'_> = std::iter::once((key.clone(), value.clone())).collect();
    let owner = handlers.iter().find(|other| {
        other.name != handler
            && other
                .read(Spanned::new(value.span(), DeValue::Table(alone.clone())))
                .is_ok()
    });
    match owner {
        Some(owner) => RouteError::Key {
            message: format!(
                "`{}` is a key of the `{}` handler; this route's handler is `{handler}`",
                key.get_ref(),
                owner.name
            ),
            span: key.span(),
            key: key.get_ref().to_string(),
        },
        None => RouteError::Toml(e),
    }
}

/// Why a `[[route]]` element could not be read.
#[derive(Debug)]
pub enum RouteError {
    /// A key or value the deserializer rejected (it carries its span).
    Toml(toml::de::Error),
    /// A route-level problem at `span`, about the route's key `key` (empty: the
    /// route itself).
    At {
        /// What is wrong.
        message: String,
        /// Where.
        span: Range<usize>,
        /// The route's key it is about, e.g. `handler`.
        key: &'static str,
    },
    /// A key the route's handler does not take, but another handler does.
    Key {
        /// What is wrong.
        message: String,
        /// The key's span.
        span: Range<usize>,
        /// The key.
        key: String,
    },
}

impl RouteError {
    /// The route's key this error is about, if it is not the route itself.
    pub fn key(&self) -> Option<&str> {
        match self {
            RouteError::Toml(_) => None,
            RouteError::At { key, .. } => Some(key),
            RouteError::Key { key, .. } => Some(key),
        }
    }
}

impl From<toml::de::Error> for RouteError {
    fn from(e: toml::de::Error) -> Self {
        RouteError::Toml(e)
    }
}

fn de_error(message: &str, span: Range<usize>, key: &'static str) -> RouteError {
    RouteError::At {
        message: message.to_string(),
        span,
        key,
    }
}
