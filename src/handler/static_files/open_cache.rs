//! The open-file cache (as nginx's `open_file_cache`, lighttpd's stat cache):
//! a hit costs no open, fstat or readlink, and small files are kept in memory
//! so it costs no read either.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use super::values::MAX_HTTP_DATE_SECS;
use super::StaticFiles;

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

/// Open files cached per worker thread (as nginx's `open_file_cache`, lighttpd's stat
/// cache): a hit costs no open, fstat or readlink. Per thread, so no lock.
type OpenFileCache = HashMap<u64, HashMap<Vec<u8>, CacheEntry>>;

thread_local! {
    static OPEN_FILES: RefCell<OpenFileCache> = RefCell::new(HashMap::new());
}

/// Open files kept per handler per worker.
const OPEN_FILE_CACHE_MAX: usize = 1024;
/// Default reuse time: changes on disk show within a second, as with lighttpd's stat cache.
pub const DEFAULT_CACHE_VALID: Duration = Duration::from_secs(1);
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl StaticFiles {
    /// A fresh entry of this worker's open-file cache for `path`, if any.
    pub(super) fn cached(&self, path: &[u8]) -> Option<OpenedFile> {
        if self.cache_valid.is_zero() {
            return None;
        }
        OPEN_FILES.with(|cache| {
            let cache = cache.borrow();
            let entry = cache.get(&self.id)?.get(path)?;
            (entry.checked.elapsed() < self.cache_valid).then(|| entry.opened.clone())
        })
    }

    /// Keeps a regular file that passed the root check open for later requests.
    pub(super) fn remember(&self, path: &[u8], file: File, meta: &Metadata) -> OpenedFile {
        let mut opened = OpenedFile {
            file: Rc::new(file),
            size: meta.len(),
            // Pre-epoch mtimes are clamped to the epoch: HTTP dates cannot go earlier.
            mtime: u64::try_from(meta.mtime())
                .unwrap_or(0)
                .min(MAX_HTTP_DATE_SECS),
            content: None,
        };
        if self.cache_valid.is_zero() {
            return opened;
        }
        if opened.size <= CACHED_CONTENT_MAX {
            let mut buf = vec![0u8; opened.size as usize];
            if opened.file.read_exact_at(&mut buf, 0).is_ok() {
                opened.content = Some(buf.into());
            }
        }
        OPEN_FILES.with(|cache| {
            let mut cache = cache.borrow_mut();
            let files = cache.entry(self.id).or_default();
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
        });
        opened
    }
}
