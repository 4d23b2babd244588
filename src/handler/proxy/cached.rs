//! A proxy route with a cache: the lookup before the phases, and the phases
//! run with the cache's tap when the request goes to the origin. Fresh hits
//! are answered without an upstream; a miss leads a collapsed fetch or
//! follows one in progress; a stale response is revalidated; an unsafe
//! method invalidates what it changed (RFC 9111 §4.4).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::error_page::answer_with_page;
use super::refresh_session::RefreshSink;
use super::request_info::asks_upgrade;
use super::{forward_with, ProxyRoute};
use crate::cache::answer::answer_stored;
use crate::cache::disk_hit::{answer_from_disk, DiskAnswer};
use crate::cache::follow::{follow_fill, Followed};
use crate::cache::policy::{usable, Usable};
use crate::cache::store::{request_facts, CacheTap};
use crate::cache::tap::{ResponseTap, TapHead};
use crate::cache::tier::{Found, Lookup};
use crate::cache::zone::{CacheZone, FillRole};
use crate::http::request::RequestView;
use crate::http::session_layer::LayeredSession;
use crate::http::{Session, SessionExt};
use crate::http1::parse::Method;

/// Serves a request on a route whose responses `zone` stores.
pub(crate) async fn forward_cached<'h>(
    session: &mut dyn Session<'h>,
    route: &'h ProxyRoute,
    zone: &Arc<CacheZone>,
) {
    let request = session.request();
    let method = request.method();
    let key = zone.settings.key.key_of(&request);
    // An upgrade's answer (an extended CONNECT's among them) is a tunnel,
    // never a stored response: it always goes to the origin.
    let tunnel = request.is_extended_connect() || asks_upgrade(&request);
    if tunnel || !matches!(method, Method::Get | Method::Head) {
        let safe = tunnel || matches!(method, Method::Options | Method::Trace);
        if safe {
            forward_with(session, route, &mut PassTap::default()).await;
            session.note_cache("bypass");
            return;
        }
        let mut tap = PassTap::default();
        forward_with(session, route, &mut tap).await;
        invalidate(session, zone, &key, &tap);
        session.note_cache("bypass");
        return;
    }
    let facts = request_facts(&request);
    let now = Instant::now();
    let mut stale = None;
    let mut stale_on_disk = None;
    let mut hit_for_miss = false;
    match zone.lookup(&key, &request, now) {
        Lookup::Found(Found::Memory(stored)) => {
            let age = stored.age(now);
            match usable(stored.lifetime, age, &stored.directives, &facts.directives) {
                Usable::Fresh => {
                    zone.stats.hits.fetch_add(1, Ordering::Relaxed);
                    let ttl = stored.lifetime.saturating_sub(age).as_secs();
                    let status = format!("pier; hit; ttl={ttl}");
                    answer_stored(session, &stored, &status, now).await;
                    session.note_cache("hit");
                    return;
                }
                u @ (Usable::StaleAccepted | Usable::StaleWhileRevalidate) => {
                    zone.stats.stale.fetch_add(1, Ordering::Relaxed);
                    let ttl = age.saturating_sub(stored.lifetime).as_secs();
                    let status = format!("pier; hit; ttl=-{ttl}");
                    answer_stored(session, &stored, &status, now).await;
                    session.note_cache("stale");
                    // One refresh per stale response, by the first request
                    // that served it, once its client has the whole answer.
                    if u == Usable::StaleWhileRevalidate
                        && !stored.refreshing.swap(true, Ordering::AcqRel)
                        && session.flush_body().await.is_ok()
                    {
                        let mut tap =
                            CacheTap::new(zone.clone(), key, facts, None, Some(stored.clone()));
                        let mut sink = LayeredSession {
                            inner: session,
                            layer: RefreshSink,
                        };
                        forward_with(&mut sink, route, &mut tap).await;
                        stored.refreshing.store(false, Ordering::Release);
                    }
                    return;
                }
                Usable::Revalidate => stale = Some(stored),
            }
        }
        Lookup::Found(Found::Disk(found)) => {
            match answer_from_disk(session, zone, found, &facts, now).await {
                DiskAnswer::Answered => return,
                DiskAnswer::Revalidate(found) => stale_on_disk = Some(found),
                DiskAnswer::Unusable => {}
            }
        }
        Lookup::HitForMiss => hit_for_miss = true,
        Lookup::Miss => {}
    }
    if facts.directives.only_if_cached {
        answer_with_page(
            session,
            &route.error_pages,
            504,
            Some(("Cache-Status", b"pier; fwd=miss; detail=only-if-cached")),
        );
        session.note_cache("miss");
        return;
    }
    zone.stats.misses.fetch_add(1, Ordering::Relaxed);
    if method == Method::Head || hit_for_miss {
        let note = if hit_for_miss {
            "; detail=hit-for-miss"
        } else {
            ""
        };
        let mut tap = CacheTap::new(zone.clone(), key, facts, None, stale)
            .with_disk(stale_on_disk)
            .with_note(note);
        forward_with(session, route, &mut tap).await;
        session.note_cache(tap.outcome);
        return;
    }
    match zone.begin_fill(&key) {
        FillRole::Leader(guard) => {
            let mut tap = CacheTap::new(zone.clone(), key, facts, Some(guard), stale)
                .with_disk(stale_on_disk);
            forward_with(session, route, &mut tap).await;
            session.note_cache(tap.outcome);
        }
        FillRole::Follower(fill) => {
            let timeout = zone.settings.lock_timeout;
            if follow_fill(session, &fill, timeout, &zone.stats).await == Followed::Answered {
                session.note_cache("collapsed");
                return;
            }
            let mut tap =
                CacheTap::new(zone.clone(), key, facts, None, stale).with_disk(stale_on_disk);
            forward_with(session, route, &mut tap).await;
            session.note_cache(tap.outcome);
        }
    }
}

/// RFC 9111 §4.4: a non-error answer to an unsafe request invalidates the
/// stored responses of its URI and of its `Location` and `Content-Location`
/// on the same origin.
fn invalidate(session: &dyn Session<'_>, zone: &CacheZone, key: &[u8], tap: &PassTap) {
    if !tap.status.is_some_and(|s| (200..400).contains(&s)) {
        return;
    }
    zone.purge(key);
    let request: RequestView<'_> = session.request();
    for uri in &tap.locations {
        if let Some(k) = zone.settings.key.key_of_uri(&request, uri) {
            zone.purge(&k);
        }
    }
}

/// The tap of a request the cache does not store: it notes the status and
/// the locations an unsafe method's answer names.
#[derive(Default)]
struct PassTap {
    status: Option<u16>,
    locations: Vec<Box<[u8]>>,
}

impl ResponseTap for PassTap {
    fn on_head(&mut self, _: &RequestView<'_>, head: TapHead<'_>, _: &mut Vec<u8>) {
        self.status = Some(head.head.status());
        for name in ["location", "content-location"] {
            if let Some(v) = head.head.header(name) {
                self.locations.push(v.into());
            }
        }
    }
}
