//! The `Cache-Control` and `Expires` response headers of static routes (their
//! `cache_control` and `expires` keys): how long clients and caches may keep
//! what the route serves, as nginx's `expires` and `add_header Cache-Control`
//! say it; the HTTP cache itself is `src/cache/`. Sent on the answers that
//! carry or confirm content (2xx and 3xx, 304 included), never on errors.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{HeadEdit, RouteFilter};
use crate::handler::static_files::HttpDateValue;
use crate::http::{RequestId, RequestView};

/// A static route's `Cache-Control` and `Expires` headers.
#[derive(Debug)]
pub struct CacheHeaders {
    /// `Cache-Control` as configured, or `max-age=` from `expires`.
    cache_control: Option<Box<[u8]>>,
    /// `Expires` is now plus this.
    expires: Option<Duration>,
}

impl CacheHeaders {
    /// `cache_control` sent as written; `expires` sends `Expires` (and, when
    /// `cache_control` is not given, `Cache-Control: max-age=` the same time).
    pub fn new(cache_control: Option<String>, expires: Option<Duration>) -> Self {
        let cache_control = cache_control
            .map(String::into_bytes)
            .or_else(|| expires.map(|d| format!("max-age={}", d.as_secs()).into_bytes()))
            .map(Vec::into_boxed_slice);
        CacheHeaders {
            cache_control,
            expires,
        }
    }
}

impl RouteFilter for CacheHeaders {
    fn decides_at_once(&self) -> bool {
        true
    }

    fn edits_response(&self) -> bool {
        true
    }

    fn response_filter<'a>(&'a self, _: &RequestView<'_>, _: &RequestId, head: &mut HeadEdit<'a>) {
        if !(200..=399).contains(&head.status) {
            return;
        }
        if let Some(cc) = &self.cache_control {
            head.retain(|n| !n.eq_ignore_ascii_case("cache-control"));
            head.push("Cache-Control", cc);
        }
        if let Some(d) = self.expires {
            let at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .saturating_add(d);
            head.retain(|n| !n.eq_ignore_ascii_case("expires"));
            head.push_owned(
                "Expires",
                HttpDateValue::from_unix_secs(at.as_secs()).as_bytes(),
            );
        }
    }
}
