//! One stored response: its head as the field lines a hit sends unchanged, its
//! body in the chunks it arrived in (shared with the clients that streamed it
//! while it was stored), what freshness needs, and the request header values
//! its `Vary` selects on.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::control::ResponseDirectives;
use super::evict::{EvictMarks, Evictable};
use crate::http::request::RequestView;
use crate::http1::grammar::list_elements;
use crate::http1::write::{format_http_date, DATE_LEN};

/// Bytes charged per object beyond its key, head and body: this struct and
/// its `Arc`, the index entry and its slot, the variants list, the queue
/// slot, and the allocator's headers of each. bench/cache_memory measured
/// 685 bytes of RSS per stored 13-byte response (27-byte key, 53 bytes of
/// head), where 349 were charged; this charge keeps RSS within the budget.
pub const OBJECT_OVERHEAD: usize = 640;

/// Bytes charged per body chunk: its `Arc` counts, its slot in the chunk
/// list and an allocator header.
const CHUNK_OVERHEAD: usize = 40;

/// Variants kept per key (`Vary`); the oldest goes first beyond this.
pub const MAX_VARIANTS: usize = 16;

/// The `Vary` field names of a response with the request values they had.
pub type VarySelection = Box<[(Box<str>, Option<Box<[u8]>>)]>;

/// A stored response.
pub struct StoredResponse {
    /// The primary key it is stored under.
    pub key: Box<[u8]>,
    /// Hash of `key`, for the eviction ghost list.
    pub key_hash: u64,
    /// Final status.
    pub status: u16,
    /// End-to-end fields as `Name: value\r\n` lines, without `Age`.
    pub fields: Box<[u8]>,
    /// The body, in chunks.
    pub body: Arc<[Arc<[u8]>]>,
    /// Body bytes.
    pub body_len: u64,
    /// The `Vary` field names (lowercase) and the normalised request values
    /// they had (`None` when the request had no such field).
    pub vary: VarySelection,
    /// The response's `Cache-Control`.
    pub directives: ResponseDirectives,
    /// Freshness lifetime (RFC 9111 §4.2.1).
    pub lifetime: Duration,
    /// Age when it arrived (§4.2.3 `corrected_initial_age`).
    pub initial_age: Duration,
    /// When it arrived (or was last refreshed by a 304).
    pub stored_at: Instant,
    /// The `Date` a hit sends (RFC 9110 §6.6.1, RFC 9111 §4): the origin's,
    /// or the time it arrived when the origin sent none or an invalid one;
    /// `None` only for a hit-for-miss mark.
    pub date: Option<[u8; DATE_LEN]>,
    /// `ETag`, for revalidation.
    pub etag: Option<Box<[u8]>>,
    /// `Last-Modified`, for revalidation.
    pub last_modified: Option<Box<[u8]>>,
    /// Hits since it entered its eviction queue, and whether it is still in
    /// the index (cleared when replaced, purged or evicted).
    pub marks: EvictMarks,
    /// A mark that the key was found uncacheable (no response is stored):
    /// requests go to the origin without collapsing until `lifetime` passes.
    pub hit_for_miss: bool,
    /// Set while a background refresh (stale-while-revalidate) runs, so only
    /// one goes to the origin.
    pub refreshing: AtomicBool,
}

impl StoredResponse {
    /// A response about to enter the index, arrived now: its validators read
    /// from `fields`, and nothing else known yet (no body, no `Vary`
    /// selection, no lifetime). Callers give the rest with `..` update syntax.
    pub fn new(key: Box<[u8]>, key_hash: u64, status: u16, fields: Box<[u8]>) -> Self {
        let mut e = StoredResponse {
            key,
            key_hash,
            status,
            fields,
            body: Arc::new([]),
            body_len: 0,
            vary: Box::default(),
            directives: ResponseDirectives::default(),
            lifetime: Duration::ZERO,
            initial_age: Duration::ZERO,
            stored_at: Instant::now(),
            date: None,
            etag: None,
            last_modified: None,
            marks: EvictMarks::default(),
            hit_for_miss: false,
            refreshing: AtomicBool::new(false),
        };
        e.etag = e.field("etag").map(Into::into);
        e.last_modified = e.field("last-modified").map(Into::into);
        e
    }

    /// Its age now (§4.2.3 `current_age`).
    pub fn age(&self, now: Instant) -> Duration {
        self.initial_age + now.saturating_duration_since(self.stored_at)
    }

    /// Whether its `Vary` selection matches `request`.
    pub fn matches(&self, request: &RequestView<'_>) -> bool {
        self.vary.iter().all(|(name, value)| {
            let now = normalised_field(request, name);
            now.as_deref() == value.as_deref()
        })
    }

    /// Whether `other` was selected by the same request values.
    pub fn same_variant(&self, other: &StoredResponse) -> bool {
        self.vary == other.vary
    }

    /// The first field named `name` among the stored field lines.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        crate::http::response::split_field_lines(&self.fields)
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

impl Evictable for StoredResponse {
    fn charge(&self) -> usize {
        // The key twice: the index holds its own copy.
        2 * self.key.len()
            + self.fields.len()
            + self.body_len as usize
            + self.body.len() * CHUNK_OVERHEAD
            + OBJECT_OVERHEAD
    }

    fn key_hash(&self) -> u64 {
        self.key_hash
    }

    fn marks(&self) -> &EvictMarks {
        &self.marks
    }
}

/// A request field as `Vary` compares it: every value of the name joined by
/// commas, list elements trimmed, lowercase (so `gzip, br` and `GZIP,br`
/// select the same variant).
pub fn normalised_field(request: &RequestView<'_>, name: &str) -> Option<Box<[u8]>> {
    let mut out: Option<Vec<u8>> = None;
    for (n, v) in request.headers() {
        if !n.eq_ignore_ascii_case(name.as_bytes()) {
            continue;
        }
        let out = out.get_or_insert_with(Vec::new);
        for element in list_elements(v) {
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend(element.iter().map(u8::to_ascii_lowercase));
        }
    }
    out.map(Vec::into_boxed_slice)
}

/// The `Vary` names of a response (lowercase), and whether one is `*`.
pub fn vary_names<'a>(values: impl Iterator<Item = &'a [u8]>) -> (Vec<Box<str>>, bool) {
    let mut names = Vec::new();
    let mut any = false;
    for v in values {
        for e in list_elements(v) {
            if e == b"*" {
                any = true;
            } else if let Ok(s) = std::str::from_utf8(e) {
                let s = s.to_ascii_lowercase().into_boxed_str();
                if !names.contains(&s) {
                    names.push(s);
                }
            }
        }
    }
    (names, any)
}

/// The `Date` a stored response keeps: the origin's `date` when it sent a
/// valid one, else the time it was `received` (RFC 9110 §6.6.1), as an
/// IMF-fixdate.
pub fn kept_date(date: Option<SystemTime>, received: SystemTime) -> [u8; DATE_LEN] {
    let at = date.unwrap_or(received);
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format_http_date(secs)
}

/// Seconds since the epoch of an HTTP date, `None` when it is not one.
pub fn http_date(value: &[u8]) -> Option<SystemTime> {
    httpdate::parse_http_date(std::str::from_utf8(value).ok()?).ok()
}
