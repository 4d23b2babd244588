//! A zone's disk tier: responses in files under a directory, within a byte
//! budget, found again after a restart or a binary upgrade.
//!
//! Every response the memory tier stores is also written to disk (write
//! through), not only the ones memory evicts: the popular objects memory
//! never evicts then survive a restart too, and an eviction never waits on a
//! disk write. Memory is asked first; a request memory cannot answer and the
//! disk can is sent from the file by `sendfile` (a cold file through the file
//! IO pool, as static files are). A disk object answers while it is fresh (or
//! within a request's `max-stale`); a stale one with validators is
//! revalidated, and a 304 refreshes its head ([`DiskTier::refresh`]: at once
//! in the index, then in its file) while the body is sent from the file. An
//! object hit on disk more than once is brought back to memory.
//!
//! One thread per directory does all the disk work: it rebuilds the index at
//! start from the files' headers (removing partial files a crash left and
//! files whose length does not match their header), then writes each stored
//! response to a temporary file renamed into place when whole, and deletes
//! the files of replaced, purged and evicted objects. Workers only read the
//! index (a `papaya` map, no lock, as the zone's own index) and hand jobs to
//! the thread. When the directory cannot be used or a write fails (a full
//! disk), one error is logged and the zone keeps to memory: no request fails.
//!
//! The index keeps each disk object's key and head in memory, outside the
//! memory budget (about the key, the head and 300 bytes per object).

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, Once, Weak};
use std::time::{Duration, Instant, SystemTime};

use tracing::{error, info, warn};

use super::disk_file::{encode_head, read_head, ObjectHead};
use super::disk_object::DiskObject;
use super::entry::{StoredResponse, MAX_VARIANTS};
use super::evict::S3Fifo;
use super::tier::{CacheTier, Found, Lookup, OnDisk, TierStats};
use crate::http::request::RequestView;

/// A zone's `disk_path` and `disk_size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSettings {
    /// The directory of the object files (created when missing).
    pub path: PathBuf,
    /// Bytes of files allowed in it.
    pub size: u64,
}

/// Bytes of responses waiting for the disk thread at most; past it a stored
/// response stays in memory only (counted as skipped), so a slow disk never
/// holds more memory than this.
const QUEUE_BYTES: usize = 32 << 20;

/// Files are charged by the blocks they take.
const BLOCK: u64 = 4096;

/// Counters and gauges of a disk tier, for `/metrics` through
/// [`CacheTier::stats`].
#[derive(Debug, Default)]
struct DiskStats {
    /// Objects written.
    pub writes: AtomicU64,
    /// Stored responses not written: the queue was full or the tier is off.
    pub skipped: AtomicU64,
    /// Objects removed to stay within the budget.
    pub evictions: AtomicU64,
    /// Bytes of files now.
    pub bytes: AtomicU64,
    /// Objects now.
    pub objects: AtomicUsize,
}

/// Work for the disk thread, done in the order it was asked for (so a purge
/// also removes a write queued before it).
enum DiskJob {
    Write(Arc<StoredResponse>, usize),
    Rewrite(Arc<DiskObject>),
    Delete(Box<str>),
    Purge(Box<[u8]>),
    PurgePrefix(Box<[u8]>),
}

const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const OFF: u8 = 2;

struct DiskWriter {
    queues: S3Fifo<DiskObject>,
    used: u64,
    objects: usize,
}

type DiskVariants = Arc<[Arc<DiskObject>]>;

/// The disk tier of the zones that name one directory.
pub struct DiskTier {
    /// The directory.
    pub dir: PathBuf,
    budget: AtomicU64,
    stats: DiskStats,
    index: papaya::HashMap<Box<[u8]>, DiskVariants>,
    writer: Mutex<DiskWriter>,
    jobs: Mutex<Option<mpsc::Sender<DiskJob>>>,
    queued: AtomicUsize,
    state: AtomicU8,
    started: Once,
    hasher: std::hash::RandomState,
    file_prefix: String,
    seq: AtomicU64,
}

/// Disk tiers alive in this process, by directory: zones of a reloaded
/// configuration that name the same directory share its tier.
static LIVE_TIERS: Mutex<Vec<Weak<DiskTier>>> = Mutex::new(Vec::new());

impl DiskTier {
    /// The tier of `settings.path`, shared with the zones already using it
    /// (its budget becomes `settings.size`). Touches no file until started.
    pub fn for_dir(settings: &DiskSettings) -> Arc<DiskTier> {
        let mut live = LIVE_TIERS.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        if let Some(t) = live
            .iter()
            .filter_map(Weak::upgrade)
            .find(|t| t.dir == settings.path)
        {
            t.budget.store(settings.size, Ordering::Relaxed);
            return t;
        }
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let tier = Arc::new(DiskTier {
            dir: settings.path.clone(),
            budget: AtomicU64::new(settings.size),
            stats: DiskStats::default(),
            index: papaya::HashMap::new(),
            writer: Mutex::new(DiskWriter {
                queues: S3Fifo::new((settings.size / 16384) as usize),
                used: 0,
                objects: 0,
            }),
            jobs: Mutex::new(None),
            queued: AtomicUsize::new(0),
            state: AtomicU8::new(IDLE),
            started: Once::new(),
            hasher: std::hash::RandomState::new(),
            // Names no other process (a binary upgrade's old one) makes.
            file_prefix: format!("{:x}-{:x}", std::process::id(), since_epoch.as_micros()),
            seq: AtomicU64::new(0),
        });
        live.push(Arc::downgrade(&tier));
        tier
    }

    /// The byte budget.
    fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Starts the disk thread once: it loads the directory, then writes.
    pub fn start(self: &Arc<Self>) {
        self.started.call_once(|| {
            let (tx, rx) = mpsc::channel();
            *self.lock_jobs() = Some(tx);
            self.state.store(RUNNING, Ordering::Release);
            let tier = self.clone();
            let spawned = std::thread::Builder::new()
                .name("pier-cache-disk".into())
                .spawn(move || tier.run(rx));
            if let Err(e) = spawned {
                self.turn_off(&format!("cannot start its thread: {e}"));
            }
        });
    }

    /// The path of `obj`'s file.
    fn path_of(&self, obj: &DiskObject) -> PathBuf {
        self.dir.join(format!("{}.obj", obj.name))
    }

    fn send(&self, job: DiskJob) -> bool {
        self.lock_jobs()
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok())
    }

    fn delete_later(&self, names: Vec<Box<str>>) {
        for name in names {
            if !self.send(DiskJob::Delete(name.clone())) {
                let _ = fs::remove_file(self.dir.join(format!("{name}.obj")));
            }
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, DiskWriter> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_jobs(&self) -> MutexGuard<'_, Option<mpsc::Sender<DiskJob>>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs why the tier cannot be used, once, and keeps the zones to memory.
    fn turn_off(&self, why: &str) {
        if self.state.swap(OFF, Ordering::AcqRel) != OFF {
            error!(
                directory = %self.dir.display(),
                "the cache's disk tier {why}; the cache keeps to memory until the next start"
            );
        }
    }

    /// The disk thread.
    fn run(self: Arc<Self>, jobs: mpsc::Receiver<DiskJob>) {
        match self.prepare() {
            Ok(()) => self.load(),
            Err(e) => self.turn_off(&format!("cannot use the directory: {e}")),
        }
        loop {
            // Every zone of this directory is gone (a reload dropped it): stop.
            if Arc::strong_count(&self) == 1 {
                break;
            }
            let job = match jobs.recv_timeout(Duration::from_secs(1)) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            match job {
                DiskJob::Write(entry, size) => {
                    self.queued.fetch_sub(size, Ordering::Relaxed);
                    if self.state.load(Ordering::Acquire) == RUNNING {
                        if let Err(e) = self.write(&entry) {
                            self.turn_off(&format!("cannot write a file: {e}"));
                        }
                    } else {
                        self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                DiskJob::Rewrite(obj) => {
                    if self.state.load(Ordering::Acquire) == RUNNING {
                        if let Err(e) = self.rewrite(&obj) {
                            self.turn_off(&format!("cannot write a file: {e}"));
                        }
                    }
                }
                DiskJob::Delete(name) => self.unlink(&name),
                DiskJob::Purge(key) => {
                    let removed = self.remove_where(&mut self.lock_writer(), |k| *k == *key);
                    removed.iter().for_each(|n| self.unlink(n));
                }
                DiskJob::PurgePrefix(prefix) => {
                    let removed =
                        self.remove_where(&mut self.lock_writer(), |k| k.starts_with(&prefix));
                    removed.iter().for_each(|n| self.unlink(n));
                }
            }
        }
    }

    /// Creates the directory and checks that files can be made in it.
    fn prepare(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let probe = self.dir.join(format!("{}.probe.tmp", self.file_prefix));
        File::create(&probe)?.write_all(b"pier")?;
        fs::remove_file(&probe)
    }

    /// Rebuilds the index from the directory: partial files are removed, and
    /// of two files holding the same variant the newer stays.
    fn load(&self) {
        let started = Instant::now();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut found: Vec<(Box<str>, ObjectHead, u64)> = Vec::new();
        let mut dropped = 0usize;
        let (now, wall) = (Instant::now(), SystemTime::now());
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let path = entry.path();
            if name.ends_with(".tmp") {
                let _ = fs::remove_file(&path);
                dropped += 1;
                continue;
            }
            let Some(stem) = name.strip_suffix(".obj") else {
                continue;
            };
            let head = File::open(&path).and_then(|f| {
                let len = f.metadata()?.len();
                Ok(read_head(&f, len, |k| self.key_hash(k), now, wall)?.map(|h| (h, len)))
            });
            match head {
                Ok(Some((h, len))) => found.push((stem.into(), h, len)),
                Ok(None) | Err(_) => {
                    let _ = fs::remove_file(&path);
                    dropped += 1;
                }
            }
        }
        found.sort_by_key(|(_, h, _)| h.stored_wall);
        let n = found.len();
        for (name, head, len) in found {
            self.register(DiskObject {
                meta: head.meta,
                body_offset: head.body_offset,
                name,
                charge: len.div_ceil(BLOCK) * BLOCK,
                hits: AtomicU32::new(0),
            });
        }
        if dropped > 0 {
            warn!(directory = %self.dir.display(), files = dropped, "removed partial or damaged cache files");
        }
        info!(
            directory = %self.dir.display(),
            objects = self.stats.objects.load(Ordering::Relaxed),
            found = n,
            ms = started.elapsed().as_millis() as u64,
            "cache disk tier loaded"
        );
    }

    /// A new object file's name, and the temporary path it is written at
    /// until it is whole.
    fn fresh_name(&self) -> (Box<str>, PathBuf) {
        let name: Box<str> = format!(
            "{}-{:x}",
            self.file_prefix,
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
        .into();
        let tmp = self.dir.join(format!("{name}.tmp"));
        (name, tmp)
    }

    /// Writes `entry` to a temporary file, renamed into place once whole.
    fn write(&self, entry: &StoredResponse) -> io::Result<()> {
        let (name, tmp) = self.fresh_name();
        let head = encode_head(entry, Instant::now(), SystemTime::now());
        let written = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&head)?;
            for chunk in entry.body.iter() {
                f.write_all(chunk)?;
            }
            fs::rename(&tmp, self.dir.join(format!("{name}.obj")))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        let len = head.len() as u64 + entry.body_len;
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        self.register(DiskObject {
            meta: copy_meta(entry, self.key_hash(&entry.key)),
            body_offset: head.len() as u64,
            name,
            charge: len.div_ceil(BLOCK) * BLOCK,
            hits: AtomicU32::new(0),
        });
        Ok(())
    }

    /// Writes `obj`'s head (refreshed by a 304) before the body its file
    /// holds, to a new file that then replaces it. Nothing to do when the
    /// object left the index meanwhile or its file is gone.
    fn rewrite(&self, obj: &DiskObject) -> io::Result<()> {
        if !obj.meta.marks.is_live() {
            return Ok(());
        }
        let Ok(old) = File::open(self.dir.join(format!("{}.obj", obj.name))) else {
            return Ok(());
        };
        let (name, tmp) = self.fresh_name();
        let head = encode_head(&obj.meta, Instant::now(), SystemTime::now());
        let written = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&head)?;
            let mut body = io::Read::take(&old, obj.meta.body_len);
            io::Seek::seek(&mut &old, io::SeekFrom::Start(obj.body_offset))?;
            let copied = io::copy(&mut body, &mut f)?;
            if copied != obj.meta.body_len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the object's file was cut short",
                ));
            }
            fs::rename(&tmp, self.dir.join(format!("{name}.obj")))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            // A file cut short is the object's loss, not the disk's.
            return if e.kind() == io::ErrorKind::UnexpectedEof {
                Ok(())
            } else {
                Err(e)
            };
        }
        let len = head.len() as u64 + obj.meta.body_len;
        self.register(DiskObject {
            meta: copy_meta(&obj.meta, obj.meta.key_hash),
            body_offset: head.len() as u64,
            name,
            charge: len.div_ceil(BLOCK) * BLOCK,
            hits: AtomicU32::new(obj.hits.load(Ordering::Relaxed)),
        });
        Ok(())
    }

    /// A 304 refreshed `old`'s head to `meta`: lookups find the new head at
    /// once, with the body where it was, and the disk thread then writes the
    /// head into the object's file. `false` when `old` left the index
    /// meanwhile (purged, evicted or replaced).
    pub fn refresh(&self, old: &Arc<DiskObject>, meta: StoredResponse) -> bool {
        let obj = Arc::new(DiskObject {
            meta,
            body_offset: old.body_offset,
            name: old.name.clone(),
            charge: old.charge,
            hits: AtomicU32::new(old.hits.load(Ordering::Relaxed)),
        });
        {
            let mut w = self.lock_writer();
            let guard = self.index.guard();
            let Some(variants) = self.index.get(&old.meta.key, &guard) else {
                return false;
            };
            if !variants.iter().any(|o| Arc::ptr_eq(o, old)) {
                return false;
            }
            let kept: Vec<_> = variants
                .iter()
                .map(|o| {
                    if Arc::ptr_eq(o, old) {
                        obj.clone()
                    } else {
                        o.clone()
                    }
                })
                .collect();
            // The same file: uncharged and charged again, not deleted.
            let _ = self.forget(&mut w, old);
            w.used += obj.charge;
            w.objects += 1;
            w.queues.admit(&obj);
            self.index.insert(old.meta.key.clone(), kept.into(), &guard);
            self.publish(&w);
        }
        self.send(DiskJob::Rewrite(obj))
    }

    /// Puts `obj` in the index in place of the variant it selects, then
    /// evicts (deleting files) until the budget holds.
    fn register(&self, obj: DiskObject) {
        let obj = Arc::new(obj);
        let mut gone = Vec::new();
        {
            let mut w = self.lock_writer();
            let guard = self.index.guard();
            let mut kept = vec![obj.clone()];
            if let Some(old) = self.index.get(&obj.meta.key, &guard) {
                for o in old.iter() {
                    if o.meta.same_variant(&obj.meta) || kept.len() >= MAX_VARIANTS {
                        gone.extend(self.forget(&mut w, o));
                    } else {
                        kept.push(o.clone());
                    }
                }
            }
            w.used += obj.charge;
            w.objects += 1;
            w.queues.admit(&obj);
            if w.queues.slots() > 2 * w.objects + 1024 {
                w.queues.compact();
            }
            self.index.insert(obj.meta.key.clone(), kept.into(), &guard);
            let budget = self.budget();
            while w.used > budget {
                let Some(victim) = w.queues.victim(budget as usize) else {
                    break;
                };
                gone.extend(self.take_out(&mut w, &victim));
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            }
            self.publish(&w);
        }
        for name in gone {
            self.unlink(&name);
        }
    }

    /// Removes every object whose key `pick` chooses; returns their file names.
    fn remove_where(&self, w: &mut DiskWriter, pick: impl Fn(&[u8]) -> bool) -> Vec<Box<str>> {
        let guard = self.index.guard();
        let keys: Vec<Box<[u8]>> = self
            .index
            .keys(&guard)
            .filter(|k| pick(k))
            .cloned()
            .collect();
        let mut gone = Vec::new();
        for k in keys {
            if let Some(old) = self.index.remove(&k, &guard) {
                for o in old.iter() {
                    gone.extend(self.forget(w, o));
                }
            }
        }
        self.publish(w);
        gone
    }

    /// Takes `victim` out of its key's variants.
    fn take_out(&self, w: &mut DiskWriter, victim: &Arc<DiskObject>) -> Option<Box<str>> {
        let guard = self.index.guard();
        let key = &victim.meta.key;
        if let Some(old) = self.index.get(key, &guard) {
            let kept: Vec<_> = old
                .iter()
                .filter(|o| !Arc::ptr_eq(o, victim))
                .cloned()
                .collect();
            if kept.is_empty() {
                self.index.remove(key, &guard);
            } else if kept.len() != old.len() {
                self.index.insert(key.clone(), kept.into(), &guard);
            }
        }
        self.forget(w, victim)
    }

    /// Uncharges `o` once; its file name, to delete.
    fn forget(&self, w: &mut DiskWriter, o: &DiskObject) -> Option<Box<str>> {
        if !o.meta.marks.retire() {
            return None;
        }
        w.used = w.used.saturating_sub(o.charge);
        w.objects = w.objects.saturating_sub(1);
        Some(o.name.clone())
    }

    fn unlink(&self, name: &str) {
        let _ = fs::remove_file(self.dir.join(format!("{name}.obj")));
    }

    fn publish(&self, w: &DiskWriter) {
        self.stats.bytes.store(w.used, Ordering::Relaxed);
        self.stats.objects.store(w.objects, Ordering::Relaxed);
    }

    fn key_hash(&self, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish()
    }
}

impl CacheTier for DiskTier {
    fn name(&self) -> &'static str {
        "disk"
    }

    /// Takes no lock, as the memory tier's.
    fn lookup(&self, key: &[u8], request: &RequestView<'_>, _now: Instant) -> Lookup {
        let guard = self.index.guard();
        let found = self
            .index
            .get(key, &guard)
            .and_then(|variants| variants.iter().find(|o| o.meta.matches(request)).cloned());
        match found {
            Some(object) => {
                object.meta.marks.touch();
                let path = self.path_of(&object);
                Lookup::Found(Found::Disk(OnDisk { object, path }))
            }
            None => Lookup::Miss,
        }
    }

    /// Queues `entry` to be written, unless the tier is off or too far
    /// behind. A hit-for-miss mark is not written: it holds no response, and
    /// memory alone answers it.
    fn store(&self, entry: &Arc<StoredResponse>, _reserved: usize) -> bool {
        if entry.hit_for_miss || self.state.load(Ordering::Acquire) != RUNNING {
            return false;
        }
        let size = entry.body_len as usize + entry.fields.len() + entry.key.len();
        // One response larger than the queue still goes when nothing waits.
        let waiting = self.queued.fetch_add(size, Ordering::Relaxed);
        if size as u64 > self.budget() || (waiting > 0 && waiting + size > QUEUE_BYTES) {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if !self.send(DiskJob::Write(entry.clone(), size)) {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Removes the objects of `key` now, and any a queued write adds;
    /// returns how many were removed now.
    fn purge(&self, key: &[u8]) -> usize {
        let removed = {
            let mut w = self.lock_writer();
            self.remove_where(&mut w, |k| k == key)
        };
        let n = removed.len();
        self.delete_later(removed);
        self.send(DiskJob::Purge(key.into()));
        n
    }

    /// Removes the objects whose key starts with `prefix`, now and from
    /// queued writes, as a purge of one key does.
    fn purge_prefix(&self, prefix: &[u8]) -> usize {
        let removed = {
            let mut w = self.lock_writer();
            self.remove_where(&mut w, |k| k.starts_with(prefix))
        };
        let n = removed.len();
        self.delete_later(removed);
        self.send(DiskJob::PurgePrefix(prefix.into()));
        n
    }

    fn stats(&self) -> TierStats {
        let s = &self.stats;
        TierStats {
            bytes: s.bytes.load(Ordering::Relaxed),
            objects: s.objects.load(Ordering::Relaxed) as u64,
            budget: self.budget(),
            stored: s.writes.load(Ordering::Relaxed),
            evictions: s.evictions.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
        }
    }
}

/// What the index keeps of a stored response: all but its body.
pub fn copy_meta(e: &StoredResponse, key_hash: u64) -> StoredResponse {
    StoredResponse {
        body_len: e.body_len,
        vary: e.vary.clone(),
        directives: e.directives,
        lifetime: e.lifetime,
        initial_age: e.initial_age,
        stored_at: e.stored_at,
        date: e.date,
        ..StoredResponse::new(e.key.clone(), key_hash, e.status, e.fields.clone())
    }
}
