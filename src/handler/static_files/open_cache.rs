//! The open-file cache (as nginx's `open_file_cache`, lighttpd's stat cache):
//! a hit costs no open, fstat or readlink, and small files are kept in memory
//! so it costs no read either.
//!
//! Each worker's context owns one per configuration generation, so it needs no
//! lock, and the files a replaced configuration opened are closed when that
//! generation goes rather than staying open for the life of the worker.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use super::values::MAX_HTTP_DATE_SECS;
use super::StaticFiles;
use crate::file_io::residency::read_cached;

/// A regular file that passed the root check, with what its headers need.
#[derive(Clone, Debug)]
pub(super) struct OpenedFile {
    pub(super) file: Rc<File>,
    pub(super) size: u64,
    pub(super) mtime: u64,
    /// The whole file when it is small, read once when it was opened.
    pub(super) content: Option<Rc<[u8]>>,
}

/// Files up to this size are kept in memory by the open-file cache, so a hit costs
/// no read either.
const CACHED_CONTENT_MAX: u64 = 16 * 1024;

struct CacheEntry {
    opened: OpenedFile,
    checked: Instant,
}

/// One worker's open files for one configuration generation, by static handler
/// and path.
#[derive(Default)]
pub struct OpenFileCache {
    by_handler: RefCell<HashMap<u64, HashMap<Vec<u8>, CacheEntry>>>,
}

impl OpenFileCache {
    /// Files held open now.
    pub fn len(&self) -> usize {
        self.by_handler.borrow().values().map(HashMap::len).sum()
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
    /// A fresh entry of this worker's open-file cache for `path`, if any.
    pub(super) fn cached(&self, cache: Option<&OpenFileCache>, path: &[u8]) -> Option<OpenedFile> {
        let cache = cache.filter(|_| !self.cache_valid.is_zero())?;
        let files = cache.by_handler.borrow();
        let entry = files.get(&self.id)?.get(path)?;
        (entry.checked.elapsed() < self.cache_valid).then(|| entry.opened.clone())
    }

    /// Keeps a regular file that passed the root check open for later requests.
    pub(super) fn remember(
        &self,
        cache: Option<&OpenFileCache>,
        path: &[u8],
        file: File,
        meta: &Metadata,
    ) -> OpenedFile {
        let mut opened = OpenedFile {
            file: Rc::new(file),
            size: meta.len(),
            // Pre-epoch mtimes are clamped to the epoch: HTTP dates cannot go earlier.
            mtime: u64::try_from(meta.mtime())
                .unwrap_or(0)
                .min(MAX_HTTP_DATE_SECS),
            content: None,
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
            let files = by_handler.entry(self.id).or_default();
            if files.len() >= OPEN_FILE_CACHE_MAX {
                let valid = self.cache_valid;
                files.retain(|_, e| e.checked.elapsed() < valid);
                if files.len() >= OPEN_FILE_CACHE_MAX {
                    files.clear();
                }
            }
            let entry = CacheEntry {
                opened: opened.clone(),
                checked: Instant::now(),
            };
            files.insert(path.to_vec(), entry);
        }
        opened
    }
}
