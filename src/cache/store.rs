//! The cache's side of a proxied exchange ([`CacheTap`]): it asks the origin
//! for a whole, storable response (the client's conditionals and ranges are
//! the cache's to answer), revalidates a stored one with its validators,
//! decides from the head whether the response is stored, and stores the body
//! as it streams, publishing each piece to the requests that wait on the same
//! key. Each chunk is charged against the zone's budget as it arrives, so
//! responses in flight count too.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::control::age_seconds;
use super::control::RequestDirectives;
use super::disk::copy_meta;
use super::disk_hit::DiskStale;
use super::entry::{
    http_date, kept_date, normalised_field, vary_names, StoredResponse, VarySelection,
};
use super::fill::{FillEnd, FillHead};
use super::policy::{self, RequestFacts, ResponseFacts};
use super::tap::{Instead, ResponseTap, TapHead, UpstreamHead};
use super::targeted::directives_for;
use super::zone::{CacheZone, FillGuard};
use crate::http::request::RequestView;
use crate::http::response::split_field_lines;
use crate::upstream::request_head::RequestHeadSink;

/// Request fields the cache answers itself, so the origin is not asked for them.
const CLIENT_CONDITIONALS: &[&[u8]] = &[
    b"if-none-match",
    b"if-modified-since",
    b"if-range",
    b"if-match",
    b"if-unmodified-since",
    b"range",
];

/// A response being stored.
struct Building {
    status: u16,
    fields: Box<[u8]>,
    facts: ResponseFacts,
    vary: VarySelection,
    chunks: Vec<Arc<[u8]>>,
    len: u64,
    reserved: usize,
    response_time: SystemTime,
    stored_at: Instant,
}

/// The cache's tap on one proxied request.
pub struct CacheTap {
    zone: Arc<CacheZone>,
    key: Box<[u8]>,
    request: RequestFacts,
    request_time: SystemTime,
    /// Present when this request leads a collapsed fetch.
    leader: Option<FillGuard>,
    /// The stored response being revalidated, or kept to serve stale.
    stale: Option<Arc<StoredResponse>>,
    /// Set when `stale` is a disk object's head: its body is in this file.
    disk: Option<DiskStale>,
    /// Conditionals from `stale` are sent.
    revalidate: bool,
    building: Option<Building>,
    /// Extra `Cache-Status` parameters (`collapsed`, a follower that timed out).
    note: &'static str,
    /// Set by the relay; read for the access log.
    pub outcome: &'static str,
}

impl CacheTap {
    /// A tap storing `key` for a request with `request` facts; `stale` is a
    /// stored response to revalidate (when it has validators) or to fall
    /// back on when the origin fails.
    pub fn new(
        zone: Arc<CacheZone>,
        key: Box<[u8]>,
        request: RequestFacts,
        leader: Option<FillGuard>,
        stale: Option<Arc<StoredResponse>>,
    ) -> Self {
        let revalidate = request.get
            && stale
                .as_ref()
                .is_some_and(|s| s.etag.is_some() || s.last_modified.is_some());
        CacheTap {
            zone,
            key,
            request,
            request_time: SystemTime::now(),
            leader,
            stale,
            disk: None,
            revalidate,
            building: None,
            note: "",
            outcome: "miss",
        }
    }

    /// Makes `found`, a stale disk object, the stored response to revalidate
    /// (or to fall back on): a 304 refreshes its head on disk and its body
    /// is sent from its file.
    pub fn with_disk(mut self, found: Option<DiskStale>) -> Self {
        if let Some(found) = found {
            let meta = Arc::new(copy_meta(&found.object.meta, found.object.meta.key_hash));
            self.revalidate =
                self.request.get && (meta.etag.is_some() || meta.last_modified.is_some());
            self.stale = Some(meta);
            self.disk = Some(found);
        }
        self
    }

    /// The answer `stored` stands in for, its body where it is.
    fn instead(&self, stored: Arc<StoredResponse>, cache_status: String) -> Instead {
        Instead {
            stored,
            cache_status,
            file: self
                .disk
                .as_ref()
                .map(|d| (d.file.clone(), d.object.body_offset)),
        }
    }

    /// Adds a `Cache-Status` parameter (`; collapsed`...).
    pub fn with_note(mut self, note: &'static str) -> Self {
        self.note = note;
        self
    }

    /// What the upstream's head says, as this zone reads it: its targeted
    /// field or `CDN-Cache-Control` in place of `Cache-Control` and
    /// `Expires` when one is valid (RFC 9213).
    fn facts(&self, resp: UpstreamHead<'_>) -> ResponseFacts {
        let values = |name: &'static str| {
            resp.headers()
                .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v)
        };
        let (_, vary_any) = vary_names(values("vary"));
        let directed = directives_for(|| resp.headers(), self.own_target());
        ResponseFacts {
            status: resp.status(),
            directives: directed.directives,
            expires: if directed.targeted {
                None
            } else {
                resp.header("expires").map(http_date)
            },
            date: resp.header("date").and_then(http_date),
            last_modified: resp.header("last-modified").and_then(http_date),
            age: age_seconds(values("age")),
            vary_any,
            sets_cookie: resp.header("set-cookie").is_some(),
            etag: resp.header("etag").is_some(),
        }
    }

    /// The zone's own targeted field, lowercase, when it names one.
    fn own_target(&self) -> Option<&str> {
        self.zone.settings.targeted_field.as_deref()
    }

    fn status_line(&self, fwd: &str, stored: bool) -> String {
        let mut s = format!("pier; fwd={fwd}");
        if stored {
            s.push_str("; stored");
        }
        s.push_str(self.note);
        s
    }

    /// Stops storing: the fill is abandoned, its bytes given back.
    fn abandon(&mut self) {
        if let Some(b) = self.building.take() {
            self.zone.release(b.reserved);
        }
        if let Some(l) = self.leader.take() {
            l.finish(FillEnd::Abandoned);
        }
    }

    /// A response found uncacheable: followers go on their own, and later
    /// requests for the key skip collapsing for the zone's hit-for-miss time.
    fn uncacheable(&mut self) {
        if let Some(l) = self.leader.take() {
            l.finish(FillEnd::Uncacheable);
            let settings = &self.zone.settings;
            if !settings.hit_for_miss.is_zero() {
                let key_hash = self.zone.key_hash(&self.key);
                let marker = StoredResponse {
                    lifetime: settings.hit_for_miss,
                    hit_for_miss: true,
                    ..StoredResponse::new(self.key.clone(), key_hash, 0, Box::default())
                };
                self.zone.insert(Arc::new(marker), 0);
            }
        }
    }

    fn stale_on_error(&mut self, fwd_status: u16) -> Option<Instead> {
        let stale = self.stale.as_ref()?;
        let now = Instant::now();
        let allowance = self.zone.settings.stale_if_error;
        if !policy::usable_on_error(stale.lifetime, stale.age(now), &stale.directives, allowance) {
            return None;
        }
        self.zone.stats.stale.fetch_add(1, Ordering::Relaxed);
        self.outcome = "stale";
        let status = if fwd_status == 0 {
            "pier; hit; fwd=stale; detail=origin-down".to_string()
        } else {
            format!("pier; hit; fwd=stale; fwd-status={fwd_status}; detail=stale-if-error")
        };
        let stale = stale.clone();
        self.abandon();
        Some(self.instead(stale, status))
    }

    /// A 304 to a revalidation: the stored response with the 304's fields
    /// in place of its own (RFC 9111 §4.3.4), stored again and published to
    /// the followers.
    fn refreshed(&mut self, resp: UpstreamHead<'_>) -> Option<Instead> {
        let stale = self.stale.clone()?;
        let mut fields = Vec::with_capacity(stale.fields.len());
        let update = |n: &[u8]| !n.eq_ignore_ascii_case(b"content-length") && !is_hop_or_framing(n);
        for (name, value) in split_field_lines(&stale.fields) {
            let replaced = resp
                .headers()
                .any(|(n, _)| update(n) && n.eq_ignore_ascii_case(name.as_bytes()));
            if !replaced {
                push_line(&mut fields, name.as_bytes(), value);
            }
        }
        for (name, value) in resp.headers() {
            if update(name) && !name.eq_ignore_ascii_case(b"age") {
                push_line(&mut fields, name, value);
            }
        }
        let mut facts = self.facts(resp);
        facts.status = stale.status;
        // The merged head decides, as a stored one would (RFC 9111 §4.3.4).
        let directed = directives_for(
            || split_field_lines(&fields).map(|(n, v)| (n.as_bytes(), v)),
            self.own_target(),
        );
        facts.directives = directed.directives;
        facts.expires = if directed.targeted {
            None
        } else {
            facts
                .expires
                .or_else(|| stale.field("expires").map(http_date))
        };
        if facts.last_modified.is_none() {
            facts.last_modified = stale.last_modified.as_deref().and_then(http_date);
        }
        let now = SystemTime::now();
        let fields = fields.into_boxed_slice();
        let entry = StoredResponse {
            body: stale.body.clone(),
            body_len: stale.body_len,
            vary: stale.vary.clone(),
            directives: facts.directives,
            lifetime: policy::freshness_lifetime(&facts),
            initial_age: policy::initial_age(&facts, self.request_time, now),
            date: Some(kept_date(facts.date, now)),
            ..StoredResponse::new(stale.key.clone(), stale.key_hash, stale.status, fields)
        };
        let entry = Arc::new(entry);
        self.zone.stats.revalidated.fetch_add(1, Ordering::Relaxed);
        self.outcome = "revalidated";
        let status = format!("pier; fwd=stale; fwd-status=304{}", self.note);
        if let Some(disk) = &self.disk {
            // The body stays in its file: the head is refreshed there, and
            // followers, which stream bodies from memory, fetch on their own.
            self.zone
                .refresh_on_disk(&disk.object, copy_meta(&entry, entry.key_hash));
            if let Some(l) = self.leader.take() {
                l.finish(FillEnd::Abandoned);
            }
            return Some(self.instead(entry, status));
        }
        if let Some(l) = self.leader.take() {
            l.fill.publish_head(FillHead {
                status: entry.status,
                fields: entry.fields.clone(),
                body_len: Some(entry.body_len),
            });
            for c in entry.body.iter() {
                l.fill.publish_chunk(c.clone());
            }
            l.finish(FillEnd::Complete);
        }
        self.zone.insert(entry.clone(), 0);
        Some(self.instead(entry, status))
    }
}

impl ResponseTap for CacheTap {
    fn drops_request_field(&self, name: &[u8]) -> bool {
        CLIENT_CONDITIONALS
            .iter()
            .any(|c| c.eq_ignore_ascii_case(name))
    }

    fn add_request_fields(&mut self, head: &mut impl RequestHeadSink) {
        if !self.revalidate {
            return;
        }
        let Some(stale) = &self.stale else { return };
        if let Some(etag) = &stale.etag {
            head.field(b"If-None-Match", etag);
        }
        if let Some(lm) = &stale.last_modified {
            head.field(b"If-Modified-Since", lm);
        }
        self.zone
            .stats
            .revalidations
            .fetch_add(1, Ordering::Relaxed);
    }

    fn instead_of_error(&mut self) -> Option<Instead> {
        self.stale_on_error(0)
    }

    fn instead_of_head(&mut self, resp: UpstreamHead<'_>) -> Option<Instead> {
        let status = resp.status();
        if status == 304 && self.revalidate {
            return self.refreshed(resp);
        }
        if status >= 500 {
            return self.stale_on_error(status);
        }
        None
    }

    fn on_head(&mut self, request: &RequestView<'_>, head: TapHead<'_>, fields: &mut Vec<u8>) {
        let TapHead {
            head: resp,
            body_len,
        } = head;
        let facts = self.facts(resp);
        let max = self.zone.largest_object();
        let ok =
            policy::storable(&self.request, &facts).is_ok() && body_len.is_none_or(|n| n <= max);
        let fwd = if self.stale.is_some() {
            "stale"
        } else {
            "miss"
        };
        if ok {
            let (names, _) = vary_names(
                resp.headers()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(b"vary"))
                    .map(|(_, v)| v),
            );
            let vary = names
                .into_iter()
                .map(|n| {
                    let v = normalised_field(request, &n);
                    (n, v)
                })
                .collect();
            let stored_fields: Vec<u8> = {
                let mut f = Vec::with_capacity(fields.len());
                for (name, value) in split_field_lines(fields) {
                    if !name.eq_ignore_ascii_case("age") {
                        push_line(&mut f, name.as_bytes(), value);
                    }
                }
                f
            };
            if let Some(l) = &self.leader {
                l.fill.publish_head(FillHead {
                    status: resp.status(),
                    fields: stored_fields.clone().into_boxed_slice(),
                    body_len,
                });
            }
            self.building = Some(Building {
                status: resp.status(),
                fields: stored_fields.into_boxed_slice(),
                facts,
                vary,
                chunks: Vec::new(),
                len: 0,
                reserved: 0,
                response_time: SystemTime::now(),
                stored_at: Instant::now(),
            });
        } else {
            self.uncacheable();
        }
        self.outcome = if fwd == "stale" { "expired" } else { "miss" };
        let status = self.status_line(fwd, ok);
        push_line(fields, b"Cache-Status", status.as_bytes());
    }

    fn on_body(&mut self, data: &[u8]) {
        let Some(b) = self.building.as_mut() else {
            return;
        };
        let max = self.zone.largest_object();
        if b.len + data.len() as u64 > max || !self.zone.reserve(data.len()) {
            self.abandon();
            return;
        }
        b.reserved += data.len();
        b.len += data.len() as u64;
        let chunk: Arc<[u8]> = data.into();
        if let Some(l) = &self.leader {
            l.fill.publish_chunk(chunk.clone());
        }
        b.chunks.push(chunk);
    }

    fn storing(&self) -> bool {
        self.building.is_some()
    }

    fn on_end(&mut self, complete: bool) {
        if !complete {
            self.abandon();
            return;
        }
        let Some(b) = self.building.take() else {
            return;
        };
        let key_hash = self.zone.key_hash(&self.key);
        let entry = StoredResponse {
            body: b.chunks.into(),
            body_len: b.len,
            vary: b.vary,
            directives: b.facts.directives,
            lifetime: policy::freshness_lifetime(&b.facts),
            initial_age: policy::initial_age(&b.facts, self.request_time, b.response_time),
            stored_at: b.stored_at,
            date: Some(kept_date(b.facts.date, b.response_time)),
            ..StoredResponse::new(self.key.clone(), key_hash, b.status, b.fields)
        };
        self.zone.insert(Arc::new(entry), b.reserved);
        if let Some(l) = self.leader.take() {
            l.finish(FillEnd::Complete);
        }
    }
}

impl Drop for CacheTap {
    fn drop(&mut self) {
        self.abandon();
    }
}

fn push_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Fields a 304 must not put into the stored head: framing and hop-by-hop.
fn is_hop_or_framing(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"transfer-encoding",
        b"te",
        b"trailer",
        b"upgrade",
        b"proxy-connection",
        b"date",
        b"server",
    ]
    .iter()
    .any(|h| h.eq_ignore_ascii_case(name))
}

/// The request facts storability needs.
pub fn request_facts(request: &RequestView<'_>) -> RequestFacts {
    let values = |name: &'static str| {
        request
            .headers()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    };
    RequestFacts {
        get: request.method() == crate::http1::parse::Method::Get,
        authorization: request.header("authorization").is_some(),
        directives: RequestDirectives::parse(values("cache-control"), values("pragma")),
    }
}
