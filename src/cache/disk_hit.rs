//! Answering from the disk tier what memory could not: the object's file is
//! opened without waiting on the disk when its path is cached (else on the
//! file IO pool) and its body sent from the file, so HEAD, ranges and the
//! client's conditionals work as for a memory hit.

use std::io;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::answer::{answer_stored_from, StoredBody};
use super::policy::{usable, RequestFacts, Usable};
use super::tier::OnDisk;
use super::zone::CacheZone;
use crate::file_io::residency::{open_blocking, open_cached};
use crate::http::Session;

/// Answers `session` with `found`, a response `zone` found on disk, when it
/// is usable; `false` (nothing sent) otherwise. A stale disk object is not
/// used: it is fetched again whole.
pub async fn answer_from_disk<'h>(
    session: &mut dyn Session<'h>,
    zone: &CacheZone,
    found: OnDisk,
    facts: &RequestFacts,
    now: Instant,
) -> bool {
    let OnDisk { object: obj, path } = found;
    let meta = &obj.meta;
    let age = meta.age(now);
    let (status, fresh) = match usable(meta.lifetime, age, &meta.directives, &facts.directives) {
        Usable::Fresh => {
            let ttl = meta.lifetime.saturating_sub(age).as_secs();
            (format!("pier; hit; ttl={ttl}; detail=disk"), true)
        }
        Usable::StaleAccepted => {
            let ttl = age.saturating_sub(meta.lifetime).as_secs();
            (format!("pier; hit; ttl=-{ttl}; detail=disk"), false)
        }
        Usable::StaleWhileRevalidate | Usable::Revalidate => return false,
    };
    let opened = match open_cached(&path) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            let pool = &session.worker().config.file_io;
            match pool.run(move || open_blocking(&path)).await {
                Ok(r) => r,
                Err(_) => return false,
            }
        }
        r => r,
    };
    // Gone (evicted or purged since the lookup, or removed by hand) or
    // changed: the origin is asked instead.
    let Ok(file) = opened else {
        return false;
    };
    if file
        .metadata()
        .map_or(true, |m| m.len() != obj.body_offset + meta.body_len)
    {
        return false;
    }
    if fresh {
        zone.stats.hits.fetch_add(1, Ordering::Relaxed);
    } else {
        zone.stats.stale.fetch_add(1, Ordering::Relaxed);
    }
    zone.stats.disk_hits.fetch_add(1, Ordering::Relaxed);
    let body = StoredBody::File(Rc::new(file), obj.body_offset);
    answer_stored_from(session, meta, body, &status, now).await;
    session.note_cache(if fresh { "hit" } else { "stale" });
    true
}
