//! Answering from the disk tier what memory could not: the object's file is
//! opened without waiting on the disk when its path is cached (else on the
//! file IO pool) and its body sent from the file, so HEAD, ranges and the
//! client's conditionals work as for a memory hit. A stale object with
//! validators is handed back, its file open, to be revalidated; an object
//! hit more than once is read back into memory (on the file IO pool, after
//! its answer is sent).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::answer::{answer_stored_from, StoredBody};
use super::disk::copy_meta;
use super::disk_object::DiskObject;
use super::entry::StoredResponse;
use super::policy::{usable, RequestFacts, Usable};
use super::tier::OnDisk;
use super::zone::CacheZone;
use crate::file_io::residency::{open_blocking, open_cached};
use crate::http::Session;

/// Disk hits after which an object is brought back to memory: one more than
/// once.
const PROMOTE_AFTER: u32 = 2;

/// A stale disk object to revalidate, with its file open (so an eviction
/// meanwhile cannot take the body a 304 would send).
pub struct DiskStale {
    /// The object.
    pub object: Arc<DiskObject>,
    /// Its file.
    pub file: Rc<File>,
}

/// What the disk tier did with a request.
pub enum DiskAnswer {
    /// Answered from the file.
    Answered,
    /// Stale, with validators: ask the origin whether it changed.
    Revalidate(DiskStale),
    /// Not usable (stale without validators, or its file is gone): ask the
    /// origin for it whole.
    Unusable,
}

/// Answers `session` with `found`, a response `zone` found on disk, when it
/// is usable as it is.
pub async fn answer_from_disk<'h>(
    session: &mut dyn Session<'h>,
    zone: &CacheZone,
    found: OnDisk,
    facts: &RequestFacts,
    now: Instant,
) -> DiskAnswer {
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
        Usable::StaleWhileRevalidate | Usable::Revalidate => {
            if !facts.get || (meta.etag.is_none() && meta.last_modified.is_none()) {
                return DiskAnswer::Unusable;
            }
            return match open(session, path, &obj).await {
                Some(file) => DiskAnswer::Revalidate(DiskStale {
                    object: obj,
                    file: Rc::new(file),
                }),
                None => DiskAnswer::Unusable,
            };
        }
    };
    let Some(file) = open(session, path, &obj).await else {
        return DiskAnswer::Unusable;
    };
    if fresh {
        zone.stats.hits.fetch_add(1, Ordering::Relaxed);
    } else {
        zone.stats.stale.fetch_add(1, Ordering::Relaxed);
    }
    zone.stats.disk_hits.fetch_add(1, Ordering::Relaxed);
    let promote = obj.hits.fetch_add(1, Ordering::Relaxed) + 1 == PROMOTE_AFTER;
    let copy = if promote { file.try_clone().ok() } else { None };
    let body = StoredBody::File(Rc::new(file), obj.body_offset);
    answer_stored_from(session, meta, body, &status, now).await;
    session.note_cache(if fresh { "hit" } else { "stale" });
    if let Some(copy) = copy {
        promote_to_memory(session, zone, &obj, copy).await;
    }
    DiskAnswer::Answered
}

/// Opens `obj`'s file at `path`, on the file IO pool when its path is not
/// cached; `None` when it is gone (evicted or purged since the lookup, or
/// removed by hand) or changed.
async fn open<'h>(
    session: &mut dyn Session<'h>,
    path: std::path::PathBuf,
    obj: &DiskObject,
) -> Option<File> {
    let opened = match open_cached(&path) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            let pool = &session.worker().config.file_io;
            pool.run(move || open_blocking(&path)).await.ok()?
        }
        r => r,
    };
    let file = opened.ok()?;
    let whole = file
        .metadata()
        .is_ok_and(|m| m.len() == obj.body_offset + obj.meta.body_len);
    whole.then_some(file)
}

/// Reads `obj`'s body from `file` on the file IO pool and stores it in
/// memory beside the disk copy, within memory's budget and `max_object`.
async fn promote_to_memory<'h>(
    session: &mut dyn Session<'h>,
    zone: &CacheZone,
    obj: &Arc<DiskObject>,
    file: File,
) {
    let len = obj.meta.body_len;
    if len > zone.settings.max_object as u64 {
        return;
    }
    let at = obj.body_offset;
    let pool = &session.worker().config.file_io;
    let read = pool
        .run(move || {
            let mut body = vec![0u8; len as usize];
            file.read_exact_at(&mut body, at).map(|()| body)
        })
        .await;
    let Ok(Ok(body)) = read else { return };
    // Purged or replaced while it was read: not brought back.
    if !obj.meta.marks.is_live() {
        return;
    }
    let entry = StoredResponse {
        body: Arc::new([body.into()]),
        ..copy_meta(&obj.meta, obj.meta.key_hash)
    };
    zone.promote(Arc::new(entry));
}
