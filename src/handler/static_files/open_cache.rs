//! The open-file cache (as nginx's `open_file_cache`, lighttpd's stat cache):
//! a hit costs no open, fstat or readlink, and small files are kept in memory
//! so it costs no read either.
//!
//! Each worker's context owns one per configuration generation, so it needs no
//! lock, and the files a replaced configuration opened are closed when that
//! generation goes rather than staying open for the life of the worker.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use super::path::last_segment;
use super::prepared_heads::PreparedHeads;
use super::values::{ETag, HttpDateValue, MAX_HTTP_DATE_SECS};
use super::StaticFiles;
use crate::file_io::residency::read_cached;

/// A regular file that passed the root and hidden-file checks, with what its
/// headers need decided once when it was opened: a cache hit formats nothing
/// and looks up no content type.
#[derive(Clone, Debug)]
pub(super) struct OpenedFile {
    pub(super) file: Rc<File>,
    pub(super) size: u64,
    pub(super) mtime: u64,
    /// The whole file when it is small, read once when it was opened.
    pub(super) content: Option<Rc<[u8]>>,
    /// From the file name's extension, by the route's content types.
    pub(super) content_type: &'static str,
    /// Strong validator from `mtime` and `size`.
    pub(super) etag: ETag,
    /// `mtime` as an IMF-fixdate.
    pub(super) last_modified: HttpDateValue,
}

/// Files up to this size are kept in memory by the open-file cache, so a hit costs
/// no read either.
const CACHED_CONTENT_MAX: u64 = 16 * 1024;

pub(super) struct CacheEntry {
    pub(super) opened: OpenedFile,
    /// The head fields of this file version's answers, made on the first
    /// request that can use them; they go with the entry, so a file opened
    /// again (changed or not) gets them made afresh.
    pub(super) heads: OnceCell<Rc<PreparedHeads>>,
    /// When the path was opened plus the route's reuse time: used before
    /// then, opened again after. `None`: a reuse time past the clock's range,
    /// so never.
    fresh_until: Option<Instant>,
}

impl CacheEntry {
    /// Whether the entry may still be used at `now`.
    fn fresh_at(&self, now: Instant) -> bool {
        self.fresh_until.is_none_or(|until| now < until)
    }
}

/// One worker's open files for one configuration generation, by static handler
/// and path.
#[derive(Default)]
pub struct OpenFileCache {
    /// By handler id, sorted: a configuration has few static handlers, and a
    /// binary search over them costs less than hashing the id.
    by_handler: RefCell<Vec<(u64, HandlerFiles)>>,
}

/// One static handler's open files, by normalised path under its root. The
/// hash is seeded at random per map, so clients cannot aim paths at one
/// bucket; foldhash costs a fraction of SipHash on a path's few bytes.
type HandlerFiles = HashMap<Vec<u8>, CacheEntry, foldhash::fast::RandomState>;

impl OpenFileCache {
    /// Files held open now.
    pub fn len(&self) -> usize {
        self.by_handler.borrow().iter().map(|(_, f)| f.len()).sum()
    }

    /// Whether no file is held open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for OpenFileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenFileCache({} files)", self.len())
    }
}

/// Open files kept per handler per worker.
const OPEN_FILE_CACHE_MAX: usize = 1024;
/// Default reuse time: changes on disk show within a second, as with lighttpd's stat cache.
pub const DEFAULT_CACHE_VALID: Duration = Duration::from_secs(1);
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl StaticFiles {
    /// A fresh entry of this worker's open-file cache for `relative` (the
    /// normalised path under the root), if any; `now` is the time of this
    /// wake-up.
    pub(super) fn cached(
        &self,
        cache: Option<&OpenFileCache>,
        relative: &[u8],
        now: Instant,
    ) -> Option<OpenedFile> {
        self.with_fresh(cache, relative, now, |entry| entry.opened.clone())
    }

    /// `read` of the fresh entry for `relative`, if there is one: the one
    /// place that says whether an entry may still be used.
    pub(super) fn with_fresh<R>(
        &self,
        cache: Option<&OpenFileCache>,
        relative: &[u8],
        now: Instant,
        read: impl FnOnce(&CacheEntry) -> R,
    ) -> Option<R> {
        let cache = cache.filter(|_| !self.cache_valid.is_zero())?;
        let by_handler = cache.by_handler.borrow();
        let at = by_handler
            .binary_search_by_key(&self.id, |(id, _)| *id)
            .ok()?;
        let entry = by_handler[at].1.get(relative)?;
        entry.fresh_at(now).then(|| read(entry))
    }

    /// Keeps a regular file that passed the root check open for later
    /// requests of `relative`, with its content type and validators.
    pub(super) fn remember(
        &self,
        cache: Option<&OpenFileCache>,
        relative: &[u8],
        file: File,
        meta: &Metadata,
    ) -> OpenedFile {
        let size = meta.len();
        // Pre-epoch mtimes are clamped to the epoch: HTTP dates cannot go earlier.
        let mtime = u64::try_from(meta.mtime())
            .unwrap_or(0)
            .min(MAX_HTTP_DATE_SECS);
        let mut opened = OpenedFile {
            file: Rc::new(file),
            size,
            mtime,
            content: None,
            content_type: self.rules.mime.for_file_name(last_segment(relative)),
            etag: ETag::new(mtime, size),
            last_modified: HttpDateValue::from_unix_secs(mtime),
        };
        let Some(cache) = cache.filter(|_| !self.cache_valid.is_zero()) else {
            return opened;
        };
        if opened.size <= CACHED_CONTENT_MAX {
            // Only from the page cache: a cold file is kept without its bytes,
            // and the driver reads them off the loop.
            let mut buf = vec![0u8; opened.size as usize];
            if matches!(read_cached(&opened.file, &mut buf, 0), Some(Ok(n)) if n == buf.len()) {
                opened.content = Some(buf.into());
            }
        }
        {
            let mut by_handler = cache.by_handler.borrow_mut();
            let at = match by_handler.binary_search_by_key(&self.id, |(id, _)| *id) {
                Ok(at) => at,
                Err(at) => {
                    by_handler.insert(at, (self.id, HandlerFiles::default()));
                    at
                }
            };
            let files = &mut by_handler[at].1;
            if files.len() >= OPEN_FILE_CACHE_MAX {
                let now = Instant::now();
                files.retain(|_, e| e.fresh_at(now));
                if files.len() >= OPEN_FILE_CACHE_MAX {
                    files.clear();
                }
            }
            let entry = CacheEntry {
                heads: OnceCell::new(),
                opened: opened.clone(),
                fresh_until: Instant::now().checked_add(self.cache_valid),
            };
            files.insert(relative.to_vec(), entry);
        }
        opened
    }
}
