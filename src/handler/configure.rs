//! What every route handler gives the configuration, so that the two stages
//! name no handler: a [`HandlerSpec`] (the `handler` value and the reader of
//! the handler's own keys, a serde struct beside its configurator) and the
//! [`RawHandler`] those keys become, which builds the handler. The handlers
//! a route may name are listed once, in `registry.rs`.

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{DeserializeOwned, IntoDeserializer};
use toml::de::DeValue;
use toml::Spanned;

use super::mime_table::MimeTable;
use super::BoxedHandler;
use crate::cache::zone::CacheZone;
use crate::config::error::{ConfigError, Locator};
use crate::filter::headers::HeaderRules;
use crate::filter::BoxedFilter;
use crate::upstream::group::UpstreamGroup;

/// One handler a route may name: its `handler` value and how its keys are read.
pub struct HandlerSpec {
    /// The `handler = "..."` value.
    pub name: &'static str,
    read: ReadKeys,
}

/// Reads a handler's keys into its raw struct.
type ReadKeys = fn(Spanned<DeValue<'_>>) -> Result<Box<dyn RawHandler>, toml::de::Error>;

impl HandlerSpec {
    /// The handler called `name`, whose keys are read into `T`.
    pub const fn new<T: RawHandler + DeserializeOwned>(name: &'static str) -> Self {
        HandlerSpec {
            name,
            read: read_keys::<T>,
        }
    }

    /// Reads a route's keys that are not the route's own (`host`, `path`,
    /// `handler`) or its filters'; a key the handler does not take is an error.
    pub fn read(&self, keys: Spanned<DeValue<'_>>) -> Result<Box<dyn RawHandler>, toml::de::Error> {
        (self.read)(keys)
    }
}

fn read_keys<T: RawHandler + DeserializeOwned>(
    keys: Spanned<DeValue<'_>>,
) -> Result<Box<dyn RawHandler>, toml::de::Error> {
    T::deserialize(keys.into_deserializer()).map(|raw| Box::new(raw) as Box<dyn RawHandler>)
}

/// A route's handler keys as read (the first stage), and what the second
/// stage asks of them.
pub trait RawHandler: fmt::Debug + Send + Sync + Any {
    /// The `handler` value these keys were read for.
    fn name(&self) -> &'static str;

    /// Makes each file path among the keys relative to the configuration
    /// file's directory, through `resolve`.
    fn resolve_paths(&mut self, resolve: &dyn Fn(&mut Spanned<String>)) {
        let _ = resolve;
    }

    /// Whether the handler sends a request upstream, and so takes the route's
    /// `request_headers` rules ([`RouteContext::request_rules`]).
    fn sends_upstream(&self) -> bool {
        false
    }

    /// Checks the keys and builds the handler.
    fn build(&self, route: RouteContext<'_>) -> Result<BoxedHandler, ConfigError>;

    /// Route filters the handler's own keys ask for (a static route's
    /// `cache_control`), run after the access checks and before the
    /// `response_headers` rules; `key` names the route.
    fn own_filters(&self, loc: &Locator<'_>, key: &str) -> Result<Vec<BoxedFilter>, ConfigError> {
        let _ = (loc, key);
        Ok(Vec::new())
    }

    /// These keys as [`Any`], for a command-line flag about one handler's
    /// keys (`--root` sets every static route's).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Where a route is and what its handler may use beside its own keys, each
/// validated before the routes.
pub struct RouteContext<'a> {
    /// Locates errors in the file.
    pub loc: &'a Locator<'a>,
    /// The route as errors name it (`route[2]`).
    pub key: &'a str,
    /// The route's table, for an error about a key that is missing.
    pub span: Range<usize>,
    /// The `[[upstream]]` groups a route may name.
    pub upstreams: &'a [Arc<UpstreamGroup>],
    /// The `[cache.NAME]` zones a route may name.
    pub caches: &'a [Arc<CacheZone>],
    /// File extension -> Content-Type, `[mime]` over the built-in table.
    pub mime: &'a Arc<MimeTable>,
    /// The route's `request_headers` rules; `None` unless the handler
    /// [sends upstream](RawHandler::sends_upstream).
    pub request_rules: Option<HeaderRules>,
}
