//! Static files under a root directory with nginx `root` semantics.
//!
//! Sans-IO towards the socket: [`StaticFiles::serve`] decides the reply and opens the file,
//! and the connection driver writes the head and sends the file region (sendfile on plain
//! TCP, read+write under TLS). Hostile paths are refused before touching the filesystem:
//! the path is percent-decoded once, any `..` segment, NUL, backslash or encoded slash is a
//! 400, and the opened file's real path must lie under the canonical root unless symlinks
//! outside are allowed. Conditionals follow RFC 9110 §13.2.2 and ranges §14: one range is
//! a plain 206, several a bounded `multipart/byteranges` 206 (`range.rs`, `multipart.rs`).

mod answer;
mod autoindex;
mod autoindex_json;
mod conditional;
mod fields;
mod multipart;
mod off_loop;
mod off_loop_work;
mod open_cache;
mod path;
mod precompressed;
mod prepared;
mod prepared_heads;
mod range;
mod reply;
mod rules;
#[cfg(test)]
mod tests;
mod values;

use std::fs::{self, File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::io::Errno;

use autoindex::listing;
pub use autoindex::MAX_LISTING_ENTRIES;
use autoindex_json::listing_json;
pub use multipart::MultipartReply;
pub use off_loop_work::{OffLoop, OpenedOffLoop};
use open_cache::NEXT_ID;
pub use open_cache::{OpenFileCache, DEFAULT_CACHE_VALID};
use path::{as_path, decode_segment, error_status, is_normal, location_for_dir, open, open_inline};
pub use range::MAX_RANGES;
pub use reply::{FileReply, Headers, Reply, StaticRequest};
pub use rules::StaticRules;
use values::InlineBuf;
pub use values::{ContentRange, ETag, HttpDateValue};

/// Serves files from one root; built once from config and shared read-only by all workers.
#[derive(Debug)]
pub struct StaticFiles {
    /// Canonical root: every served file's real path must start with it.
    root: PathBuf,
    /// `root` as bytes without a trailing `/` (empty when the root is `/`): the prefix of every
    /// resolved path.
    root_prefix: Vec<u8>,
    /// Index file names tried in order for a path ending in `/`.
    index: Vec<String>,
    /// Longest index name, so the path buffer is allocated once per request.
    max_index_len: usize,
    /// Whether a directory without an index gets an HTML listing instead of a 404.
    autoindex: bool,
    /// Whether symlinks may lead to files outside the root (nginx's default behaviour).
    allow_symlinks_outside: bool,
    /// Key of this handler in each worker's open-file cache.
    id: u64,
    /// How long a cached open file is trusted before its path is opened again.
    cache_valid: Duration,
    /// Hidden files, fallbacks, error pages, listing format, content types.
    rules: StaticRules,
}

impl StaticFiles {
    /// Canonicalises `root` once so the per-request containment check is a prefix comparison.
    /// An empty `index` means no index files; names must be single path segments.
    pub fn new(
        root: &Path,
        index: Vec<String>,
        autoindex: bool,
        allow_symlinks_outside: bool,
    ) -> io::Result<Self> {
        let root = fs::canonicalize(root)?;
        if !fs::metadata(&root)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("static root {} is not a directory", root.display()),
            ));
        }
        for name in &index {
            if name.is_empty()
                || name == "."
                || name == ".."
                || name.bytes().any(|b| matches!(b, b'/' | b'\\' | 0))
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("index name {name:?} must be a single path segment"),
                ));
            }
        }
        let mut root_prefix = root.as_os_str().as_bytes().to_vec();
        if root_prefix.ends_with(b"/") {
            root_prefix.pop();
        }
        let max_index_len = index.iter().map(String::len).max().unwrap_or(0);
        Ok(StaticFiles {
            root,
            root_prefix,
            index,
            max_index_len,
            autoindex,
            allow_symlinks_outside,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            cache_valid: DEFAULT_CACHE_VALID,
            rules: StaticRules::default(),
        })
    }

    /// Decides the reply for one request and opens the file it names, unless
    /// that would wait on a disk on an event loop: then the reply is
    /// [`Reply::Blocked`] with the work to do off the loop before deciding again.
    pub fn reply_for(&self, req: &StaticRequest<'_>) -> Reply {
        if !req.method_allowed {
            return Reply::Error(405);
        }
        // A path that normalising leaves as it is names its own cache entry:
        // a hit needs no path buffer and no hidden-segment check, which such a
        // path passes.
        if is_normal(req.path) {
            if let Some(opened) = self.cached(req.open_files, req.path, now(req)) {
                return self.file_or_sibling(req, req.path, opened);
            }
        }
        let path = match self.resolve(req.path) {
            Ok(path) => path,
            Err(status) => return Reply::Error(status),
        };
        if req.path.ends_with(b"/") {
            self.serve_directory(req, path)
        } else {
            self.serve_path(req, &path)
        }
    }

    /// Maps the raw request path to `root_prefix` + normalised segments, or a 400.
    ///
    /// Empty and `.` segments are dropped, so `//etc/passwd` stays under the root. Any `..`
    /// is refused rather than resolved: no legitimate client sends one, and refusing it
    /// needs no reasoning about where it would land.
    fn resolve(&self, raw: &[u8]) -> Result<Vec<u8>, u16> {
        let Some(rest) = raw.strip_prefix(b"/") else {
            return Err(400);
        };
        let mut out =
            Vec::with_capacity(self.root_prefix.len() + raw.len() + self.max_index_len + 2);
        out.extend_from_slice(&self.root_prefix);
        for (i, segment) in rest.split(|&b| b == b'/').enumerate() {
            let mark = out.len();
            out.push(b'/');
            decode_segment(segment, &mut out)?;
            match &out[mark + 1..] {
                b"" | b"." => out.truncate(mark),
                b".." => return Err(400),
                name if !self.rules.allow_hidden && rules::is_hidden(name, i == 0) => {
                    return Err(404)
                }
                _ => {}
            }
        }
        Ok(out)
    }

    fn relative<'p>(&self, path: &'p [u8]) -> &'p [u8] {
        &path[self.root_prefix.len()..]
    }

    /// A path without a trailing slash: a file, or a directory to redirect.
    fn serve_path(&self, req: &StaticRequest<'_>, path: &[u8]) -> Reply {
        let relative = self.relative(path);
        if let Some(opened) = self.cached(req.open_files, relative, now(req)) {
            return self.file_or_sibling(req, relative, opened);
        }
        let fs_path = as_path(path);
        let (file, meta) = match self.open_for(req, path) {
            Ok(opened) => opened,
            Err(e) => return open_failed(&e, path),
        };
        if !self.inside_root(&file, fs_path) {
            return Reply::Error(404);
        }
        if meta.is_dir() {
            return Reply::Redirect {
                location: location_for_dir(self.relative(path)),
            };
        }
        if !meta.is_file() {
            return Reply::Error(404);
        }
        let opened = self.remember(req.open_files, relative, file, &meta);
        self.file_or_sibling(req, relative, opened)
    }

    /// A path ending in `/`: the first index file that exists, else a listing or 404.
    ///
    /// Index files are opened directly, without first checking the directory, so the common
    /// case costs one open.
    fn serve_directory(&self, req: &StaticRequest<'_>, mut path: Vec<u8>) -> Reply {
        let dir_len = path.len();
        for name in &self.index {
            path.truncate(dir_len);
            path.push(b'/');
            path.extend_from_slice(name.as_bytes());
            let relative = self.relative(&path);
            if let Some(opened) = self.cached(req.open_files, relative, now(req)) {
                return self.file_or_sibling(req, relative, opened);
            }
            let fs_path = as_path(&path);
            match self.open_for(req, &path) {
                Ok((file, meta)) => {
                    if !meta.is_file() {
                        continue;
                    }
                    if !self.inside_root(&file, fs_path) {
                        return Reply::Error(404);
                    }
                    let relative = self.relative(&path);
                    let opened = self.remember(req.open_files, relative, file, &meta);
                    return self.file_or_sibling(req, relative, opened);
                }
                Err(e) if Errno::from_io_error(&e) == Some(Errno::NOENT) => continue,
                Err(e) => return open_failed(&e, &path),
            }
        }
        path.truncate(dir_len);
        if !self.autoindex {
            return Reply::Error(404);
        }
        let fs_path = as_path(&path);
        let (dir, meta) = match self.open_for(req, &path) {
            Ok(opened) => opened,
            Err(e) => return open_failed(&e, &path),
        };
        if !self.inside_root(&dir, fs_path) || !meta.is_dir() {
            return Reply::Error(404);
        }
        drop(dir);
        if req.off_loop.is_some() {
            // Reading every entry's metadata may wait on the disk: always off the loop.
            return Reply::Blocked(OffLoop::Listing {
                relative: self.relative(&path).to_vec(),
                json: req.wants_json_listing() || self.rules.autoindex_json,
                dir: path,
            });
        }
        if req.wants_json_listing() || self.rules.autoindex_json {
            return listing_json(fs_path);
        }
        listing(fs_path, self.relative(&path))
    }

    /// Opens `path` for this request. On an event loop, the result of opening
    /// it off the loop if that was done, else inline when that needs no disk;
    /// elsewhere, simply opens it.
    fn open_for(&self, req: &StaticRequest<'_>, path: &[u8]) -> io::Result<(File, Metadata)> {
        let Some(off_loop) = req.off_loop else {
            return open(as_path(path));
        };
        if let Some(opened) = off_loop.take(path) {
            return opened;
        }
        open_inline(as_path(path))
    }

    /// Sets the route's rules (hidden files, fallbacks, error pages, listing
    /// format, content types).
    pub fn with_rules(mut self, rules: StaticRules) -> Self {
        self.rules = rules;
        self
    }

    /// Sets how long an opened file is reused before its path is opened again
    /// (zero turns the cache off).
    pub fn with_cache_valid(mut self, valid: Duration) -> Self {
        self.cache_valid = valid;
        self
    }

    /// Whether the opened file really lies under the root, wherever symlinks led.
    ///
    /// Asks the kernel for the path of the descriptor actually opened (one readlink, and no
    /// race with a symlink swapped after the open); falls back to canonicalising the path
    /// when /proc is not mounted.
    fn inside_root(&self, file: &File, path: &Path) -> bool {
        if self.allow_symlinks_outside {
            return true;
        }
        let proc_path = InlineBuf::<32>::format(format_args!("/proc/self/fd/{}", file.as_raw_fd()));
        let real = match fs::read_link(as_path(proc_path.as_bytes())) {
            Ok(real) => real,
            Err(_) => match fs::canonicalize(path) {
                Ok(real) => real,
                Err(_) => return false,
            },
        };
        real.starts_with(&self.root)
    }
}

/// The time of this request's wake-up, or the clock's when it has none.
fn now(req: &StaticRequest<'_>) -> Instant {
    req.now.unwrap_or_else(Instant::now)
}

/// The reply to a failed open: the work to redo off the loop when the open
/// would have waited, else the error's status.
fn open_failed(e: &io::Error, path: &[u8]) -> Reply {
    if e.kind() == io::ErrorKind::WouldBlock {
        Reply::Blocked(OffLoop::Open(path.to_vec()))
    } else {
        Reply::Error(error_status(e))
    }
}
