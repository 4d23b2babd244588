//! Static files under a root directory with nginx `root` semantics.
//!
//! Sans-IO towards the socket: [`StaticFiles::serve`] decides the reply and opens the file,
//! and the connection driver writes the head and sends the file region (sendfile on plain
//! TCP, read+write under TLS). Hostile paths are refused before touching the filesystem:
//! the path is percent-decoded once, any `..` segment, NUL, backslash or encoded slash is a
//! 400, and the opened file's real path must lie under the canonical root unless symlinks
//! outside are allowed. Conditionals follow RFC 9110 §13.2.2 and ranges §14, restricted to
//! a single byte range.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use rustix::fs::OFlags;
use rustix::io::Errno;

use super::mime;

/// Most directory entries read for one autoindex page, bounding its time and memory.
pub const MAX_LISTING_ENTRIES: usize = 10_000;

/// Last second representable as an IMF-fixdate (9999-12-31T23:59:59Z); httpdate panics past it.
const MAX_HTTP_DATE_SECS: u64 = 253_402_300_799;

/// Content-Type of an autoindex page.
const LISTING_CONTENT_TYPE: &str = "text/html; charset=utf-8";

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
}

/// A regular file that passed the root check, with what its headers need.
#[derive(Clone, Debug)]
struct OpenedFile {
    file: Rc<File>,
    size: u64,
    mtime: u64,
    /// The whole file when it is small, read once when it was opened.
    content: Option<Rc<[u8]>>,
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
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The parts of a downstream request this handler reads, borrowed from the parsed head.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticRequest<'a> {
    /// HEAD gets the same reply as GET; the driver omits the body.
    pub is_head: bool,
    /// Whether the method is GET or HEAD; anything else is answered 405.
    pub method_allowed: bool,
    /// Raw request path as received: percent-encoded, query removed, starting with `/`.
    pub path: &'a [u8],
    /// `If-None-Match` field value, if present.
    pub if_none_match: Option<&'a [u8]>,
    /// `If-Modified-Since` field value, if present.
    pub if_modified_since: Option<&'a [u8]>,
    /// `Range` field value, if present.
    pub range: Option<&'a [u8]>,
    /// `If-Range` field value, if present.
    pub if_range: Option<&'a [u8]>,
}

/// What the driver should answer; each variant maps to one status code.
#[derive(Debug)]
pub enum Reply {
    /// 200 or 206 with a region of an open file.
    File(FileReply),
    /// 304: the client's copy is current.
    NotModified {
        /// Validator the client should keep.
        etag: ETag,
        /// Modification time the client should keep.
        last_modified: HttpDateValue,
    },
    /// 200 autoindex page, `text/html; charset=utf-8`.
    Listing {
        /// Complete HTML document.
        body: Vec<u8>,
    },
    /// 301 for a directory requested without its trailing slash, like nginx.
    Redirect {
        /// Path-absolute Location, rebuilt from the normalised path and percent-encoded.
        location: Vec<u8>,
    },
    /// 416 with `Content-Range: bytes */total`.
    RangeNotSatisfiable {
        /// Current length of the file.
        total: u64,
        /// Preformatted `bytes */total`.
        content_range: ContentRange,
    },
    /// 400, 403, 404, 405 (carries `Allow` in [`Reply::headers`]) or 500; the driver picks the body.
    Error(u16),
}

/// An open file and the region to send, with the validators for the response head.
#[derive(Debug)]
pub struct FileReply {
    /// 200 for the whole file, 206 for a byte range.
    pub status: u16,
    /// Opened read-only and non-blocking (a no-op for regular files); ready for sendfile.
    pub file: Rc<File>,
    /// The whole file, when the open-file cache holds it in memory: send
    /// `content[offset..offset + len]` instead of reading the file.
    pub content: Option<Rc<[u8]>>,
    /// First byte to send.
    pub offset: u64,
    /// Bytes to send: the Content-Length.
    pub len: u64,
    /// File size when it was opened.
    pub total: u64,
    /// From the file extension.
    pub content_type: &'static str,
    /// Strong validator, nginx format.
    pub etag: ETag,
    /// File mtime as an IMF-fixdate.
    pub last_modified: HttpDateValue,
    /// `bytes first-last/total` for a 206.
    pub content_range: Option<ContentRange>,
}

/// Header name/value pairs for a reply, with no allocation.
pub type Headers<'a> =
    std::iter::Flatten<std::array::IntoIter<Option<(&'static str, &'a [u8])>, 5>>;

impl Reply {
    /// Status code of the response head.
    pub fn status(&self) -> u16 {
        match self {
            Reply::File(f) => f.status,
            Reply::NotModified { .. } => 304,
            Reply::Listing { .. } => 200,
            Reply::Redirect { .. } => 301,
            Reply::RangeNotSatisfiable { .. } => 416,
            Reply::Error(status) => *status,
        }
    }

    /// Headers this module owns, for the driver's head writer; framing, Date and Server are
    /// the driver's.
    pub fn headers(&self) -> Headers<'_> {
        match self {
            Reply::File(f) => f.headers(),
            Reply::NotModified {
                etag,
                last_modified,
            } => [
                Some(("ETag", etag.as_bytes())),
                Some(("Last-Modified", last_modified.as_bytes())),
                None,
                None,
                None,
            ]
            .into_iter()
            .flatten(),
            Reply::Listing { .. } => only(("Content-Type", LISTING_CONTENT_TYPE.as_bytes())),
            Reply::Redirect { location } => only(("Location", location.as_slice())),
            Reply::RangeNotSatisfiable { content_range, .. } => {
                only(("Content-Range", content_range.as_bytes()))
            }
            Reply::Error(405) => only(("Allow", b"GET, HEAD")),
            Reply::Error(_) => [None, None, None, None, None].into_iter().flatten(),
        }
    }
}

impl FileReply {
    /// Content-Type, ETag, Last-Modified, Accept-Ranges and, for a 206, Content-Range.
    pub fn headers(&self) -> Headers<'_> {
        [
            Some(("Content-Type", self.content_type.as_bytes())),
            Some(("ETag", self.etag.as_bytes())),
            Some(("Last-Modified", self.last_modified.as_bytes())),
            Some(("Accept-Ranges", b"bytes".as_slice())),
            self.content_range
                .as_ref()
                .map(|cr| ("Content-Range", cr.as_bytes())),
        ]
        .into_iter()
        .flatten()
    }
}

fn only<'a>(header: (&'static str, &'a [u8])) -> Headers<'a> {
    [Some(header), None, None, None, None].into_iter().flatten()
}

/// Fixed-capacity byte buffer for a header value, so replies format without allocating.
#[derive(Clone, Copy)]
struct InlineBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> InlineBuf<N> {
    fn new() -> Self {
        InlineBuf {
            buf: [0; N],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Capacities are sized for the largest value, so truncation cannot happen; it is still
    /// checked rather than trusted.
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn push_hex(&mut self, mut v: u64) {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v & 0xf) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn push_dec(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

impl<const N: usize> fmt::Write for InlineBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.len() > N - self.len {
            return Err(fmt::Error);
        }
        self.push(s.as_bytes());
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for InlineBuf<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Strong entity tag like nginx's, `"<mtime hex>-<size hex>"`, quotes included.
#[derive(Clone, Copy, Debug)]
pub struct ETag(InlineBuf<40>);

impl ETag {
    /// The tag for a file with this mtime (seconds) and size.
    pub fn new(mtime_secs: u64, size: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"\"");
        b.push_hex(mtime_secs);
        b.push(b"-");
        b.push_hex(size);
        b.push(b"\"");
        ETag(b)
    }

    /// The header value, quotes included.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The opaque tag without quotes, for weak comparison.
    fn opaque(&self) -> &[u8] {
        let b = self.as_bytes();
        &b[1..b.len() - 1]
    }
}

/// An IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`, always 29 bytes.
#[derive(Clone, Copy, Debug)]
pub struct HttpDateValue(InlineBuf<32>);

impl HttpDateValue {
    /// Formats seconds since the epoch, clamped to the years 1970..=9999 the format can carry.
    pub fn from_unix_secs(secs: u64) -> Self {
        use fmt::Write as _;
        let t = UNIX_EPOCH + Duration::from_secs(secs.min(MAX_HTTP_DATE_SECS));
        let mut b = InlineBuf::new();
        // Always 29 bytes, within capacity; an error would leave a shorter value, never a panic.
        let _ = write!(b, "{}", httpdate::HttpDate::from(t));
        HttpDateValue(b)
    }

    /// The header value.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A Content-Range value, `bytes first-last/total` or `bytes */total`.
#[derive(Clone, Copy, Debug)]
pub struct ContentRange(InlineBuf<72>);

impl ContentRange {
    /// For a 206 carrying bytes `first..=last` of `total`.
    pub fn satisfied(first: u64, last: u64, total: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"bytes ");
        b.push_dec(first);
        b.push(b"-");
        b.push_dec(last);
        b.push(b"/");
        b.push_dec(total);
        ContentRange(b)
    }

    /// For a 416.
    pub fn unsatisfied(total: u64) -> Self {
        let mut b = InlineBuf::new();
        b.push(b"bytes */");
        b.push_dec(total);
        ContentRange(b)
    }

    /// The header value.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
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
        })
    }

    /// Decides the reply for one request and opens the file it names.
    pub fn serve(&self, req: &StaticRequest<'_>) -> Reply {
        if !req.method_allowed {
            return Reply::Error(405);
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
        for segment in rest.split(|&b| b == b'/') {
            let mark = out.len();
            out.push(b'/');
            decode_segment(segment, &mut out)?;
            match &out[mark + 1..] {
                b"" | b"." => out.truncate(mark),
                b".." => return Err(400),
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
        let name = last_segment(path);
        if let Some(opened) = self.cached(path) {
            return file_reply(req, opened, mime::for_file_name(name));
        }
        let fs_path = as_path(path);
        let (file, meta) = match open(fs_path) {
            Ok(opened) => opened,
            Err(e) => return Reply::Error(error_status(&e)),
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
        let opened = self.remember(path, file, &meta);
        file_reply(req, opened, mime::for_file_name(name))
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
            if let Some(opened) = self.cached(&path) {
                return file_reply(req, opened, mime::for_file_name(name.as_bytes()));
            }
            let fs_path = as_path(&path);
            match open(fs_path) {
                Ok((file, meta)) => {
                    if !meta.is_file() {
                        continue;
                    }
                    if !self.inside_root(&file, fs_path) {
                        return Reply::Error(404);
                    }
                    let opened = self.remember(&path, file, &meta);
                    return file_reply(req, opened, mime::for_file_name(name.as_bytes()));
                }
                Err(e) if Errno::from_io_error(&e) == Some(Errno::NOENT) => continue,
                Err(e) => return Reply::Error(error_status(&e)),
            }
        }
        path.truncate(dir_len);
        if !self.autoindex {
            return Reply::Error(404);
        }
        let fs_path = as_path(&path);
        let (dir, meta) = match open(fs_path) {
            Ok(opened) => opened,
            Err(e) => return Reply::Error(error_status(&e)),
        };
        if !self.inside_root(&dir, fs_path) || !meta.is_dir() {
            return Reply::Error(404);
        }
        drop(dir);
        listing(fs_path, self.relative(&path))
    }

    /// A fresh entry of this worker's open-file cache for `path`, if any.
    fn cached(&self, path: &[u8]) -> Option<OpenedFile> {
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
    fn remember(&self, path: &[u8], file: File, meta: &Metadata) -> OpenedFile {
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
        let mut proc_path = InlineBuf::<32>::new();
        proc_path.push(b"/proc/self/fd/");
        proc_path.push_dec(u64::try_from(file.as_raw_fd()).unwrap_or(u64::MAX));
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

/// Appends one percent-decoded segment; NUL, `/` and `\` (raw or encoded) and broken escapes
/// are a 400. Other bytes, including non-UTF-8, are kept as the file name's bytes.
fn decode_segment(segment: &[u8], out: &mut Vec<u8>) -> Result<(), u16> {
    let mut i = 0;
    while i < segment.len() {
        let byte = if segment[i] == b'%' {
            let hi = segment.get(i + 1).and_then(|&c| hex_value(c));
            let lo = segment.get(i + 2).and_then(|&c| hex_value(c));
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(400);
            };
            i += 3;
            hi << 4 | lo
        } else {
            i += 1;
            segment[i - 1]
        };
        if matches!(byte, 0 | b'/' | b'\\') {
            return Err(400);
        }
        out.push(byte);
    }
    Ok(())
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn as_path(bytes: &[u8]) -> &Path {
    if bytes.is_empty() {
        Path::new("/")
    } else {
        Path::new(OsStr::from_bytes(bytes))
    }
}

fn last_segment(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

/// Opens without blocking on a FIFO and without acquiring a controlling terminal; the
/// non-blocking flag has no effect on reads of a regular file.
fn open(path: &Path) -> io::Result<(File, Metadata)> {
    let flags = (OFlags::NONBLOCK | OFlags::NOCTTY).bits();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags).unwrap_or(0))
        .open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Like nginx: missing, not-a-directory, too long, symlink loops and device-less nodes
/// (sockets) are 404; access denied is 403; anything else is a server-side 500.
fn error_status(e: &io::Error) -> u16 {
    match Errno::from_io_error(e) {
        Some(
            Errno::NOENT
            | Errno::NOTDIR
            | Errno::NAMETOOLONG
            | Errno::LOOP
            | Errno::NXIO
            | Errno::NODEV,
        ) => 404,
        Some(Errno::ACCESS | Errno::PERM) => 403,
        _ => match e.kind() {
            io::ErrorKind::NotFound => 404,
            io::ErrorKind::PermissionDenied => 403,
            _ => 500,
        },
    }
}

/// Conditionals (RFC 9110 §13.2.2), then Range (§14), for an open regular file.
fn file_reply(req: &StaticRequest<'_>, opened: OpenedFile, content_type: &'static str) -> Reply {
    let OpenedFile {
        file,
        size: total,
        mtime,
        content,
    } = opened;
    let etag = ETag::new(mtime, total);
    let last_modified = HttpDateValue::from_unix_secs(mtime);

    let not_modified = match (req.if_none_match, req.if_modified_since) {
        (Some(inm), _) => none_match_fails(inm, &etag),
        (None, Some(ims)) => parse_http_date_secs(ims).is_some_and(|since| mtime <= since),
        (None, None) => false,
    };
    if not_modified {
        return Reply::NotModified {
            etag,
            last_modified,
        };
    }

    let honor_range = match req.if_range {
        Some(validator) => if_range_matches(validator, &etag, mtime),
        None => true,
    };
    let range = match req.range {
        Some(range) if honor_range => parse_range(range, total),
        _ => RangeOutcome::Full,
    };
    let (status, offset, len, content_range) = match range {
        RangeOutcome::Full => (200, 0, total, None),
        RangeOutcome::Partial { first, last } => (
            206,
            first,
            last - first + 1,
            Some(ContentRange::satisfied(first, last, total)),
        ),
        RangeOutcome::Unsatisfiable => {
            return Reply::RangeNotSatisfiable {
                total,
                content_range: ContentRange::unsatisfied(total),
            }
        }
    };
    Reply::File(FileReply {
        status,
        file,
        content,
        offset,
        len,
        total,
        content_type,
        etag,
        last_modified,
        content_range,
    })
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// If-None-Match evaluates to false (so 304) when `*` or any listed tag matches weakly.
/// A malformed list stops at the malformed member: what was read so far decides.
fn none_match_fails(field: &[u8], etag: &ETag) -> bool {
    let mut rest = trim_ows(field);
    if rest == b"*" {
        return true;
    }
    let ours = etag.opaque();
    loop {
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return false;
        }
        if let Some(tail) = rest.strip_prefix(b"W/") {
            rest = tail;
        }
        let Some(quoted) = rest.strip_prefix(b"\"") else {
            return false;
        };
        let Some(end) = quoted.iter().position(|&b| b == b'"') else {
            return false;
        };
        if &quoted[..end] == ours {
            return true;
        }
        rest = &quoted[end + 1..];
    }
}

/// If-Range (RFC 9110 §13.1.5): a strong match with the ETag, or the exact Last-Modified.
fn if_range_matches(field: &[u8], etag: &ETag, mtime: u64) -> bool {
    let field = trim_ows(field);
    if field.starts_with(b"\"") || field.starts_with(b"W/") {
        // Strong comparison: a weak tag never matches, and ours is never weak.
        return field == etag.as_bytes();
    }
    parse_http_date_secs(field) == Some(mtime)
}

/// Any of the three HTTP-date formats, as seconds since the epoch; invalid dates are None,
/// so the header is ignored as RFC 9110 requires.
fn parse_http_date_secs(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    time.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// How a Range header applies to a representation of a given length.
#[derive(Debug, PartialEq, Eq)]
enum RangeOutcome {
    /// Ignore the header: send 200 with the whole file.
    Full,
    /// Send 206 with bytes `first..=last`.
    Partial { first: u64, last: u64 },
    /// Send 416.
    Unsatisfiable,
}

/// Parses one `bytes` range (RFC 9110 §14.1.2). Another unit, bad syntax, `last < first` and
/// multiple ranges are ignored (200 full). Numbers saturate rather than overflow, so a huge
/// first-pos is unsatisfiable and a huge last-pos or suffix covers the rest of the file.
fn parse_range(field: &[u8], total: u64) -> RangeOutcome {
    let field = trim_ows(field);
    let Some(eq) = field.iter().position(|&b| b == b'=') else {
        return RangeOutcome::Full;
    };
    if !field[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut specs = field[eq + 1..]
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return RangeOutcome::Full;
    };
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return RangeOutcome::Full;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        let Some(suffix) = parse_digits(last) else {
            return RangeOutcome::Full;
        };
        return match (suffix, total) {
            (0, _) => RangeOutcome::Unsatisfiable,
            // Satisfiable per §14.1.1 yet not expressible as a 206 of an empty file.
            (_, 0) => RangeOutcome::Full,
            _ => RangeOutcome::Partial {
                first: total - suffix.min(total),
                last: total - 1,
            },
        };
    }
    let Some(first) = parse_digits(first) else {
        return RangeOutcome::Full;
    };
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(last) if last >= first => last,
            _ => return RangeOutcome::Full,
        }
    };
    if first >= total {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial {
        first,
        last: last.min(total - 1),
    }
}

fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Percent-encodes everything but RFC 3986 unreserved bytes, so the result is safe in a
/// header, in an HTML attribute and as a relative reference (no `:` to read as a scheme).
fn push_percent_encoded(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[
                b'%',
                b"0123456789ABCDEF"[usize::from(b >> 4)],
                b"0123456789ABCDEF"[usize::from(b & 0xf)],
            ]);
        }
    }
}

/// `relative` is the normalised path (`/a/b`, or empty for the root). Rebuilding it rather
/// than echoing the raw path keeps `//evil.example` from becoming a protocol-relative
/// redirect off-site.
fn location_for_dir(relative: &[u8]) -> Vec<u8> {
    let mut location = Vec::with_capacity(relative.len() * 3 + 1);
    for segment in relative.split(|&b| b == b'/').filter(|s| !s.is_empty()) {
        location.push(b'/');
        push_percent_encoded(&mut location, segment);
    }
    location.push(b'/');
    location
}

fn push_html_escaped(out: &mut Vec<u8>, text: &str) {
    for b in text.bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            b'\'' => out.extend_from_slice(b"&#39;"),
            _ => out.push(b),
        }
    }
}

/// Autoindex page: directories first, then files, each by name bytes. Dot-files are left out
/// (as nginx does) and at most [`MAX_LISTING_ENTRIES`] entries are read.
fn listing(dir: &Path, relative: &[u8]) -> Reply {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return Reply::Error(error_status(&e)),
    };
    let mut names: Vec<(bool, Vec<u8>)> = Vec::new();
    let mut truncated = false;
    for (seen, entry) in entries.enumerate() {
        if seen == MAX_LISTING_ENTRIES {
            truncated = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().into_vec();
        if name.starts_with(b".") {
            continue;
        }
        let is_dir = match entry.file_type() {
            Ok(t) if t.is_symlink() => fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()),
            Ok(t) => t.is_dir(),
            Err(_) => false,
        };
        names.push((!is_dir, name));
    }
    names.sort_unstable();

    let mut title = String::from_utf8_lossy(relative).into_owned();
    title.push('/');
    let mut body =
        Vec::with_capacity(256 + names.iter().map(|(_, n)| 2 * n.len() + 24).sum::<usize>());
    body.extend_from_slice(
        b"<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>Index of ",
    );
    push_html_escaped(&mut body, &title);
    body.extend_from_slice(b"</title></head>\n<body>\n<h1>Index of ");
    push_html_escaped(&mut body, &title);
    body.extend_from_slice(b"</h1><hr><pre>\n");
    if !relative.is_empty() {
        body.extend_from_slice(b"<a href=\"../\">../</a>\n");
    }
    for (is_file, name) in &names {
        let slash: &[u8] = if *is_file { b"" } else { b"/" };
        body.extend_from_slice(b"<a href=\"");
        push_percent_encoded(&mut body, name);
        body.extend_from_slice(slash);
        body.extend_from_slice(b"\">");
        push_html_escaped(&mut body, &String::from_utf8_lossy(name));
        body.extend_from_slice(slash);
        body.extend_from_slice(b"</a>\n");
    }
    if truncated {
        body.extend_from_slice(b"(listing truncated)\n");
    }
    body.extend_from_slice(b"</pre><hr></body>\n</html>\n");
    Reply::Listing { body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_file_cache_reuses_a_file_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.txt"), "cached").unwrap();
        let files = StaticFiles::new(dir.path(), vec![], false, false)
            .unwrap()
            .with_cache_valid(Duration::from_millis(300));
        let req = StaticRequest {
            method_allowed: true,
            path: b"/c.txt",
            ..Default::default()
        };
        assert_eq!(files.serve(&req).status(), 200);
        std::fs::remove_file(dir.path().join("c.txt")).unwrap();
        // Still open in this worker's cache: served without touching the path.
        match files.serve(&req) {
            Reply::File(f) => assert_eq!(f.len, 6),
            other => panic!("expected the cached file, got {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(files.serve(&req).status(), 404);

        let uncached = StaticFiles::new(dir.path(), vec![], false, false)
            .unwrap()
            .with_cache_valid(Duration::ZERO);
        std::fs::write(dir.path().join("u.txt"), "x").unwrap();
        let req = StaticRequest {
            method_allowed: true,
            path: b"/u.txt",
            ..Default::default()
        };
        assert_eq!(uncached.serve(&req).status(), 200);
        std::fs::remove_file(dir.path().join("u.txt")).unwrap();
        assert_eq!(uncached.serve(&req).status(), 404);
    }
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::time::SystemTime;

    /// 2023-11-14T22:13:20Z; hex 6553f100.
    const MTIME: u64 = 1_700_000_000;
    const MTIME_DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    const HELLO: &[u8] = b"Hello, World!";
    const HELLO_ETAG: &str = "\"6553f100-d\"";

    /// `tmp/secret.txt` outside the root, and `tmp/www` as the root.
    struct Fixture {
        tmp: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            let tmp = tempfile::tempdir().expect("tempdir");
            let www = tmp.path().join("www");
            fs::create_dir(&www).unwrap();
            fs::write(tmp.path().join("secret.txt"), b"top secret").unwrap();
            write_file(&www.join("hello.txt"), HELLO);
            fs::write(www.join("empty.txt"), b"").unwrap();
            fs::create_dir(www.join("sub")).unwrap();
            fs::write(www.join("sub/index.html"), b"<p>sub</p>").unwrap();
            fs::create_dir(www.join("noindex")).unwrap();
            fs::write(www.join("noindex/b.txt"), b"b").unwrap();
            fs::write(www.join("noindex/a.txt"), b"a").unwrap();
            fs::write(www.join("noindex/x<y&\"z'.txt"), b"x").unwrap();
            fs::write(www.join("noindex/.hidden"), b"h").unwrap();
            fs::write(www.join("noindex/javascript:alert(1)"), b"j").unwrap();
            fs::write(
                www.join("noindex").join(OsStr::from_bytes(b"caf\xe9 bar")),
                b"c",
            )
            .unwrap();
            fs::create_dir(www.join("noindex/zdir")).unwrap();
            fs::create_dir(www.join("evil.com")).unwrap();
            Fixture { tmp }
        }

        fn root(&self) -> PathBuf {
            self.tmp.path().join("www")
        }

        fn server(&self) -> StaticFiles {
            StaticFiles::new(&self.root(), vec!["index.html".into()], false, false).unwrap()
        }

        fn server_with(&self, autoindex: bool, allow_outside: bool) -> StaticFiles {
            StaticFiles::new(
                &self.root(),
                vec!["index.html".into()],
                autoindex,
                allow_outside,
            )
            .unwrap()
        }
    }

    fn write_file(path: &Path, contents: &[u8]) {
        fs::write(path, contents).unwrap();
        let file = File::options().write(true).open(path).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
            .unwrap();
    }

    fn get(path: &str) -> StaticRequest<'_> {
        StaticRequest {
            method_allowed: true,
            path: path.as_bytes(),
            ..StaticRequest::default()
        }
    }

    fn status(reply: &Reply) -> u16 {
        reply.status()
    }

    fn expect_file(reply: Reply) -> FileReply {
        match reply {
            Reply::File(f) => f,
            other => panic!("expected a file, got {other:?}"),
        }
    }

    /// Reads the region the driver would send.
    fn body(f: &mut FileReply) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let mut out = vec![0u8; f.len as usize];
        f.file.read_exact_at(&mut out, f.offset).unwrap();
        out
    }

    fn header<'r>(reply: &'r Reply, name: &str) -> Option<&'r [u8]> {
        reply.headers().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    // Traversal and path hygiene.

    #[test]
    fn dot_dot_segment_is_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/../etc/passwd"))), 400);
        assert_eq!(status(&s.serve(&get("/../secret.txt"))), 400);
        assert_eq!(status(&s.serve(&get("/sub/../hello.txt"))), 400);
        assert_eq!(status(&s.serve(&get("/.."))), 400);
    }

    #[test]
    fn encoded_dot_dot_is_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        for path in [
            "/%2e%2e/%2e%2e/etc/passwd",
            "/%2E%2E/secret.txt",
            "/.%2e/secret.txt",
            "/%2e./secret.txt",
        ] {
            assert_eq!(status(&s.serve(&get(path))), 400, "{path}");
        }
    }

    #[test]
    fn encoded_slash_and_backslash_are_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        for path in [
            "/..%2fetc/passwd",
            "/a/..%2f..%2fetc/passwd",
            "/sub%2Findex.html",
            "/..%5csecret.txt",
            "/..\\secret.txt",
            "/a\\b",
        ] {
            assert_eq!(status(&s.serve(&get(path))), 400, "{path}");
        }
    }

    #[test]
    fn nul_raw_or_encoded_is_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/%00"))), 400);
        assert_eq!(status(&s.serve(&get("/hello.txt%00.png"))), 400);
        let raw = StaticRequest {
            path: b"/hello\0.txt",
            ..get("/")
        };
        assert_eq!(status(&s.serve(&raw)), 400);
    }

    #[test]
    fn broken_percent_escapes_are_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        for path in ["/%", "/%4", "/%zz", "/hello%2.txt", "/%%41"] {
            assert_eq!(status(&s.serve(&get(path))), 400, "{path}");
        }
    }

    #[test]
    fn path_without_leading_slash_is_rejected() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("hello.txt"))), 400);
        assert_eq!(status(&s.serve(&get(""))), 400);
        assert_eq!(status(&s.serve(&get("*"))), 400);
    }

    #[test]
    fn double_slashes_collapse_inside_root() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("//etc/passwd"))), 404);
        let mut f = expect_file(s.serve(&get("//hello.txt")));
        assert_eq!(body(&mut f), HELLO);
        let f = expect_file(s.serve(&get("/./sub//.//index.html")));
        assert_eq!(f.len, 10);
    }

    #[test]
    fn percent_encoded_names_are_decoded_once() {
        let fx = Fixture::new();
        fs::write(fx.root().join("a b%41.txt"), b"x").unwrap();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/a%20b%2541.txt"))), 200);
        // Decoding twice would turn %2541 into A.
        assert_eq!(status(&s.serve(&get("/a%20bA.txt"))), 404);
        assert_eq!(status(&s.serve(&get("/%68ello.txt"))), 200);
    }

    #[test]
    fn non_utf8_names_are_served_as_bytes() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/noindex/caf%E9%20bar"))), 200);
    }

    #[test]
    fn symlink_to_file_outside_root_is_404() {
        let fx = Fixture::new();
        symlink(fx.tmp.path().join("secret.txt"), fx.root().join("out")).unwrap();
        symlink("../secret.txt", fx.root().join("out_rel")).unwrap();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/out"))), 404);
        assert_eq!(status(&s.serve(&get("/out_rel"))), 404);
    }

    #[test]
    fn symlink_to_directory_outside_root_is_404() {
        let fx = Fixture::new();
        symlink(fx.tmp.path(), fx.root().join("up")).unwrap();
        let s = fx.server_with(true, false);
        assert_eq!(status(&s.serve(&get("/up/secret.txt"))), 404);
        assert_eq!(status(&s.serve(&get("/up/"))), 404);
        assert_eq!(status(&s.serve(&get("/up"))), 404);
    }

    #[test]
    fn symlink_outside_root_is_served_when_allowed() {
        let fx = Fixture::new();
        symlink(fx.tmp.path().join("secret.txt"), fx.root().join("out")).unwrap();
        let s = fx.server_with(false, true);
        let mut f = expect_file(s.serve(&get("/out")));
        assert_eq!(body(&mut f), b"top secret");
    }

    #[test]
    fn symlink_inside_root_is_served() {
        let fx = Fixture::new();
        symlink("hello.txt", fx.root().join("rel_link.txt")).unwrap();
        symlink(fx.root().join("hello.txt"), fx.root().join("abs_link.txt")).unwrap();
        symlink("sub", fx.root().join("sublink")).unwrap();
        let s = fx.server();
        for path in ["/rel_link.txt", "/abs_link.txt"] {
            let mut f = expect_file(s.serve(&get(path)));
            assert_eq!(body(&mut f), HELLO, "{path}");
        }
        assert_eq!(status(&s.serve(&get("/sublink/"))), 200);
    }

    #[test]
    fn root_given_through_a_symlink_is_canonicalised() {
        let fx = Fixture::new();
        let alias = fx.tmp.path().join("alias");
        symlink(fx.root(), &alias).unwrap();
        let s = StaticFiles::new(&alias, vec![], false, false).unwrap();
        assert_eq!(status(&s.serve(&get("/hello.txt"))), 200);
    }

    #[test]
    fn filesystem_root_serves_absolute_paths() {
        let fx = Fixture::new();
        let s = StaticFiles::new(Path::new("/"), vec![], false, false).unwrap();
        let www = fs::canonicalize(fx.root()).unwrap();
        let path = format!("{}/hello.txt", www.display());
        assert_eq!(status(&s.serve(&get(&path))), 200);
    }

    #[test]
    fn symlink_loop_is_404() {
        let fx = Fixture::new();
        symlink("loop_b", fx.root().join("loop_a")).unwrap();
        symlink("loop_a", fx.root().join("loop_b")).unwrap();
        assert_eq!(status(&fx.server().serve(&get("/loop_a"))), 404);
    }

    // Files, directories and errors.

    #[test]
    fn serves_file_with_validators_and_type() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&get("/hello.txt"));
        assert_eq!(status(&reply), 200);
        let headers: Vec<(&str, &[u8])> = reply.headers().collect();
        assert_eq!(
            headers,
            vec![
                ("Content-Type", b"text/plain; charset=utf-8".as_slice()),
                ("ETag", HELLO_ETAG.as_bytes()),
                ("Last-Modified", MTIME_DATE.as_bytes()),
                ("Accept-Ranges", b"bytes".as_slice()),
            ]
        );
        let mut f = expect_file(reply);
        assert_eq!((f.offset, f.len, f.total), (0, 13, 13));
        assert_eq!(body(&mut f), HELLO);
    }

    #[test]
    fn head_gets_the_same_reply_as_get() {
        let fx = Fixture::new();
        let s = fx.server();
        let get_reply = s.serve(&get("/hello.txt"));
        let head_reply = s.serve(&StaticRequest {
            is_head: true,
            ..get("/hello.txt")
        });
        assert_eq!(status(&head_reply), 200);
        let a: Vec<_> = get_reply.headers().collect();
        let b: Vec<_> = head_reply.headers().collect();
        assert_eq!(a, b);
        assert_eq!(expect_file(head_reply).len, 13);
    }

    #[test]
    fn missing_file_is_404() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/nope.txt"))), 404);
        assert_eq!(status(&s.serve(&get("/nope/"))), 404);
        assert_eq!(status(&s.serve(&get("/hello.txt/x"))), 404);
    }

    #[test]
    fn file_requested_with_trailing_slash_is_404() {
        let fx = Fixture::new();
        assert_eq!(status(&fx.server().serve(&get("/hello.txt/"))), 404);
        assert_eq!(
            status(&fx.server_with(true, false).serve(&get("/hello.txt/"))),
            404
        );
    }

    #[test]
    fn overlong_name_is_404() {
        let fx = Fixture::new();
        let s = fx.server();
        let path = format!("/{}", "a".repeat(300));
        assert_eq!(status(&s.serve(&get(&path))), 404);
    }

    #[test]
    fn other_methods_get_405_with_allow() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&StaticRequest {
            method_allowed: false,
            ..get("/hello.txt")
        });
        assert_eq!(status(&reply), 405);
        assert_eq!(header(&reply, "Allow"), Some(b"GET, HEAD".as_slice()));
        assert_eq!(Reply::Error(404).headers().count(), 0);
    }

    #[test]
    fn directory_with_slash_serves_index() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&get("/sub/"));
        assert_eq!(
            header(&reply, "Content-Type"),
            Some(b"text/html; charset=utf-8".as_slice())
        );
        let mut f = expect_file(reply);
        assert_eq!(body(&mut f), b"<p>sub</p>");
    }

    #[test]
    fn index_names_are_tried_in_order() {
        let fx = Fixture::new();
        fs::write(fx.root().join("sub/index.htm"), b"htm").unwrap();
        let both = vec!["index.htm".to_string(), "index.html".to_string()];
        let s = StaticFiles::new(&fx.root(), both, false, false).unwrap();
        assert_eq!(body(&mut expect_file(s.serve(&get("/sub/")))), b"htm");
        let later = vec!["default.html".to_string(), "index.html".to_string()];
        let s = StaticFiles::new(&fx.root(), later, false, false).unwrap();
        assert_eq!(
            body(&mut expect_file(s.serve(&get("/sub/")))),
            b"<p>sub</p>"
        );
    }

    #[test]
    fn index_that_is_a_directory_is_skipped() {
        let fx = Fixture::new();
        fs::create_dir(fx.root().join("noindex/index.html")).unwrap();
        let s = fx.server_with(true, false);
        assert!(matches!(s.serve(&get("/noindex/")), Reply::Listing { .. }));
    }

    #[test]
    fn index_symlink_outside_root_is_404() {
        let fx = Fixture::new();
        symlink(
            fx.tmp.path().join("secret.txt"),
            fx.root().join("noindex/index.html"),
        )
        .unwrap();
        assert_eq!(
            status(&fx.server_with(true, false).serve(&get("/noindex/"))),
            404
        );
    }

    #[test]
    fn root_directory_serves_index() {
        let fx = Fixture::new();
        fs::write(fx.root().join("index.html"), b"home").unwrap();
        assert_eq!(
            body(&mut expect_file(fx.server().serve(&get("/")))),
            b"home"
        );
    }

    #[test]
    fn directory_without_index_is_404_when_autoindex_off() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&get("/noindex/"))), 404);
        assert_eq!(status(&s.serve(&get("/"))), 404);
    }

    #[test]
    fn autoindex_lists_sorted_escaped_entries() {
        let fx = Fixture::new();
        let s = fx.server_with(true, false);
        let reply = s.serve(&get("/noindex/"));
        assert_eq!(
            header(&reply, "Content-Type"),
            Some(b"text/html; charset=utf-8".as_slice())
        );
        let Reply::Listing { body } = reply else {
            panic!("expected a listing");
        };
        let html = String::from_utf8(body).unwrap();
        assert!(html.contains("<title>Index of /noindex/</title>"), "{html}");
        assert!(html.contains("<a href=\"../\">../</a>"));
        assert!(html.contains("<a href=\"zdir/\">zdir/</a>"));
        assert!(html.contains("<a href=\"a.txt\">a.txt</a>"));
        assert!(html.contains("<a href=\"x%3Cy%26%22z%27.txt\">x&lt;y&amp;&quot;z&#39;.txt</a>"));
        assert!(html.contains("<a href=\"javascript%3Aalert%281%29\">"));
        assert!(html.contains("<a href=\"caf%E9%20bar\">caf\u{fffd} bar</a>"));
        assert!(!html.contains("hidden"));
        let pos = |needle: &str| html.find(needle).unwrap();
        assert!(pos("zdir/") < pos("a.txt"), "directories first");
        assert!(pos("a.txt") < pos("b.txt"));
        assert!(pos("b.txt") < pos("caf"));
    }

    #[test]
    fn autoindex_of_root_has_no_parent_link() {
        let fx = Fixture::new();
        let s = fx.server_with(true, false);
        let Reply::Listing { body } = s.serve(&get("/")) else {
            panic!("expected a listing");
        };
        let html = String::from_utf8(body).unwrap();
        assert!(html.contains("<title>Index of /</title>"));
        assert!(!html.contains("../"));
        assert!(html.contains("<a href=\"sub/\">sub/</a>"));
    }

    #[test]
    fn autoindex_prefers_index_file() {
        let fx = Fixture::new();
        let s = fx.server_with(true, false);
        assert!(matches!(s.serve(&get("/sub/")), Reply::File(_)));
    }

    #[test]
    fn autoindex_escapes_the_title() {
        let fx = Fixture::new();
        fs::create_dir(fx.root().join("<b>")).unwrap();
        let s = fx.server_with(true, false);
        let Reply::Listing { body } = s.serve(&get("/%3Cb%3E/")) else {
            panic!("expected a listing");
        };
        let html = String::from_utf8(body).unwrap();
        assert!(html.contains("Index of /&lt;b&gt;/"));
        assert!(!html.contains("<b>"));
    }

    #[test]
    fn directory_without_slash_redirects() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&get("/sub"));
        assert_eq!(status(&reply), 301);
        assert_eq!(header(&reply, "Location"), Some(b"/sub/".as_slice()));
        let reply = s.serve(&get("/."));
        assert_eq!(header(&reply, "Location"), Some(b"/".as_slice()));
    }

    #[test]
    fn redirect_is_never_protocol_relative() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&get("//evil.com"));
        assert_eq!(header(&reply, "Location"), Some(b"/evil.com/".as_slice()));
    }

    #[test]
    fn redirect_location_is_percent_encoded() {
        let fx = Fixture::new();
        fs::create_dir(fx.root().join("a b\r\nSet-Cookie: x")).unwrap();
        let s = fx.server();
        let reply = s.serve(&get("/a%20b%0D%0ASet-Cookie:%20x"));
        assert_eq!(
            header(&reply, "Location"),
            Some(b"/a%20b%0D%0ASet-Cookie%3A%20x/".as_slice())
        );
    }

    #[test]
    fn fifo_is_404_without_blocking() {
        let fx = Fixture::new();
        let fifo = fx.root().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            eprintln!("mkfifo unavailable; skipping");
            return;
        }
        assert_eq!(status(&fx.server().serve(&get("/pipe"))), 404);
    }

    #[test]
    fn unix_socket_is_404() {
        let fx = Fixture::new();
        let _listener = std::os::unix::net::UnixListener::bind(fx.root().join("sock")).unwrap();
        assert_eq!(status(&fx.server().serve(&get("/sock"))), 404);
    }

    #[test]
    fn device_is_404() {
        let fx = Fixture::new();
        symlink("/dev/null", fx.root().join("null")).unwrap();
        let s = fx.server_with(false, true);
        assert_eq!(status(&s.serve(&get("/null"))), 404);
    }

    #[test]
    fn unreadable_file_is_403() {
        let fx = Fixture::new();
        let path = fx.root().join("locked.txt");
        fs::write(&path, b"no").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
        if File::open(&path).is_ok() {
            eprintln!("permission bits are not enforced (running as root?); skipping");
            return;
        }
        assert_eq!(status(&fx.server().serve(&get("/locked.txt"))), 403);
    }

    #[test]
    fn open_errors_map_like_nginx() {
        let errno = |e: Errno| io::Error::from_raw_os_error(e.raw_os_error());
        assert_eq!(error_status(&errno(Errno::ACCESS)), 403);
        assert_eq!(error_status(&errno(Errno::PERM)), 403);
        for e in [
            Errno::NOENT,
            Errno::NOTDIR,
            Errno::NAMETOOLONG,
            Errno::LOOP,
            Errno::NXIO,
        ] {
            assert_eq!(error_status(&errno(e)), 404);
        }
        assert_eq!(error_status(&errno(Errno::MFILE)), 500);
        assert_eq!(error_status(&errno(Errno::IO)), 500);
    }

    #[test]
    fn new_rejects_bad_roots_and_index_names() {
        let fx = Fixture::new();
        assert!(StaticFiles::new(&fx.root().join("hello.txt"), vec![], false, false).is_err());
        assert!(StaticFiles::new(&fx.root().join("missing"), vec![], false, false).is_err());
        for bad in ["", ".", "..", "a/b", "a\\b", "a\0b"] {
            assert!(
                StaticFiles::new(&fx.root(), vec![bad.to_string()], false, false).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn empty_index_list_means_no_index() {
        let fx = Fixture::new();
        let s = StaticFiles::new(&fx.root(), vec![], false, false).unwrap();
        assert_eq!(status(&s.serve(&get("/sub/"))), 404);
    }

    // Validators and conditionals.

    #[test]
    fn etag_and_date_formats() {
        assert_eq!(ETag::new(MTIME, 13).as_bytes(), HELLO_ETAG.as_bytes());
        assert_eq!(ETag::new(0, 0).as_bytes(), b"\"0-0\"");
        assert_eq!(
            ETag::new(u64::MAX, u64::MAX).as_bytes(),
            b"\"ffffffffffffffff-ffffffffffffffff\""
        );
        assert_eq!(
            HttpDateValue::from_unix_secs(MTIME).as_bytes(),
            MTIME_DATE.as_bytes()
        );
        assert_eq!(
            HttpDateValue::from_unix_secs(u64::MAX).as_bytes(),
            b"Fri, 31 Dec 9999 23:59:59 GMT"
        );
        assert_eq!(
            ContentRange::satisfied(u64::MAX - 1, u64::MAX - 1, u64::MAX).as_bytes(),
            b"bytes 18446744073709551614-18446744073709551614/18446744073709551615"
        );
    }

    #[test]
    fn pre_epoch_mtime_does_not_panic() {
        let fx = Fixture::new();
        let path = fx.root().join("old.txt");
        fs::write(&path, b"old").unwrap();
        let file = File::options().write(true).open(&path).unwrap();
        let old = UNIX_EPOCH - Duration::from_secs(86_400 * 365);
        if file.set_modified(old).is_err() {
            return;
        }
        let reply = fx.server().serve(&get("/old.txt"));
        assert_eq!(
            header(&reply, "Last-Modified"),
            Some(b"Thu, 01 Jan 1970 00:00:00 GMT".as_slice())
        );
        assert_eq!(header(&reply, "ETag"), Some(b"\"0-3\"".as_slice()));
    }

    #[test]
    fn far_future_mtime_does_not_panic() {
        let fx = Fixture::new();
        let path = fx.root().join("future.txt");
        fs::write(&path, b"f").unwrap();
        let file = File::options().write(true).open(&path).unwrap();
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        if file.set_modified(far).is_err() {
            return;
        }
        assert_eq!(status(&fx.server().serve(&get("/future.txt"))), 200);
    }

    fn conditional<'a>(inm: Option<&'a str>, ims: Option<&'a str>) -> StaticRequest<'a> {
        StaticRequest {
            if_none_match: inm.map(str::as_bytes),
            if_modified_since: ims.map(str::as_bytes),
            ..get("/hello.txt")
        }
    }

    #[test]
    fn if_none_match_exact_gives_304() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&conditional(Some(HELLO_ETAG), None));
        assert_eq!(status(&reply), 304);
        let headers: Vec<(&str, &[u8])> = reply.headers().collect();
        assert_eq!(
            headers,
            vec![
                ("ETag", HELLO_ETAG.as_bytes()),
                ("Last-Modified", MTIME_DATE.as_bytes())
            ]
        );
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        let fx = Fixture::new();
        let s = fx.server();
        let weak = format!("W/{HELLO_ETAG}");
        assert_eq!(status(&s.serve(&conditional(Some(&weak), None))), 304);
    }

    #[test]
    fn if_none_match_list_and_star() {
        let fx = Fixture::new();
        let s = fx.server();
        let list = format!("\"a\", W/\"b\" ,{HELLO_ETAG}, \"c\"");
        assert_eq!(status(&s.serve(&conditional(Some(&list), None))), 304);
        assert_eq!(status(&s.serve(&conditional(Some("*"), None))), 304);
        assert_eq!(status(&s.serve(&conditional(Some(" * "), None))), 304);
        let head = StaticRequest {
            is_head: true,
            ..conditional(Some(HELLO_ETAG), None)
        };
        assert_eq!(status(&s.serve(&head)), 304);
    }

    #[test]
    fn if_none_match_mismatch_or_garbage_gives_200() {
        let fx = Fixture::new();
        let s = fx.server();
        for field in [
            "\"a\", \"b\"",
            "\"6553f100-c\"",
            "6553f100-d",
            "\"6553f100-d",
            "garbage, \"6553f100-d\"",
            "",
        ] {
            assert_eq!(
                status(&s.serve(&conditional(Some(field), None))),
                200,
                "{field}"
            );
        }
    }

    #[test]
    fn if_none_match_present_overrides_if_modified_since() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&conditional(Some("\"other\""), Some(MTIME_DATE)));
        assert_eq!(status(&reply), 200);
    }

    #[test]
    fn if_modified_since_equal_or_later_gives_304() {
        let fx = Fixture::new();
        let s = fx.server();
        assert_eq!(status(&s.serve(&conditional(None, Some(MTIME_DATE)))), 304);
        let later = "Wed, 15 Nov 2023 00:00:00 GMT";
        assert_eq!(status(&s.serve(&conditional(None, Some(later)))), 304);
        let rfc850 = "Tuesday, 14-Nov-23 22:13:20 GMT";
        assert_eq!(status(&s.serve(&conditional(None, Some(rfc850)))), 304);
    }

    #[test]
    fn if_modified_since_earlier_or_invalid_gives_200() {
        let fx = Fixture::new();
        let s = fx.server();
        for field in [
            "Tue, 14 Nov 2023 22:13:19 GMT",
            "yesterday",
            "Tue, 14 Nov 2023 22:13:20 GMT garbage",
            "Tue, 14 Nov 2023 22:13:2\u{e9}GMT",
            "",
        ] {
            assert_eq!(
                status(&s.serve(&conditional(None, Some(field)))),
                200,
                "{field}"
            );
        }
    }

    // Ranges.

    fn ranged<'a>(range: &'a str, if_range: Option<&'a str>) -> StaticRequest<'a> {
        StaticRequest {
            range: Some(range.as_bytes()),
            if_range: if_range.map(str::as_bytes),
            ..get("/hello.txt")
        }
    }

    fn expect_partial(reply: Reply, first: u64, last: u64) -> FileReply {
        let cr = format!("bytes {first}-{last}/13");
        assert_eq!(header(&reply, "Content-Range"), Some(cr.as_bytes()));
        let f = expect_file(reply);
        assert_eq!(
            (f.status, f.offset, f.len, f.total),
            (206, first, last - first + 1, 13)
        );
        f
    }

    #[test]
    fn range_first_last() {
        let fx = Fixture::new();
        let s = fx.server();
        let mut f = expect_partial(s.serve(&ranged("bytes=0-4", None)), 0, 4);
        assert_eq!(body(&mut f), b"Hello");
        expect_partial(s.serve(&ranged("bytes=12-12", None)), 12, 12);
    }

    #[test]
    fn range_open_ended() {
        let fx = Fixture::new();
        let s = fx.server();
        let mut f = expect_partial(s.serve(&ranged("bytes=7-", None)), 7, 12);
        assert_eq!(body(&mut f), b"World!");
        expect_partial(s.serve(&ranged("bytes=0-", None)), 0, 12);
    }

    #[test]
    fn range_suffix() {
        let fx = Fixture::new();
        let s = fx.server();
        let mut f = expect_partial(s.serve(&ranged("bytes=-6", None)), 7, 12);
        assert_eq!(body(&mut f), b"World!");
        expect_partial(s.serve(&ranged("bytes=-100", None)), 0, 12);
        expect_partial(
            s.serve(&ranged("bytes=-99999999999999999999999999", None)),
            0,
            12,
        );
    }

    #[test]
    fn range_last_is_clamped() {
        let fx = Fixture::new();
        let s = fx.server();
        expect_partial(s.serve(&ranged("bytes=5-1000", None)), 5, 12);
        expect_partial(
            s.serve(&ranged("bytes=5-99999999999999999999999", None)),
            5,
            12,
        );
    }

    #[test]
    fn range_syntax_is_lenient_where_rfc_allows() {
        let fx = Fixture::new();
        let s = fx.server();
        expect_partial(s.serve(&ranged("Bytes=0-0", None)), 0, 0);
        expect_partial(s.serve(&ranged(" bytes= 1-2 ", None)), 1, 2);
        expect_partial(s.serve(&ranged("bytes=1-2, ,", None)), 1, 2);
    }

    #[test]
    fn unsatisfiable_range_gives_416() {
        let fx = Fixture::new();
        let s = fx.server();
        for field in [
            "bytes=13-",
            "bytes=13-20",
            "bytes=-0",
            "bytes=99999999999999999999999-",
        ] {
            let reply = s.serve(&ranged(field, None));
            assert_eq!(status(&reply), 416, "{field}");
            assert_eq!(
                header(&reply, "Content-Range"),
                Some(b"bytes */13".as_slice())
            );
            assert!(matches!(
                reply,
                Reply::RangeNotSatisfiable { total: 13, .. }
            ));
        }
    }

    #[test]
    fn malformed_or_multiple_ranges_give_200_full() {
        let fx = Fixture::new();
        let s = fx.server();
        for field in [
            "bytes=0-1,3-4",
            "bytes=abc",
            "bytes=5-2",
            "bytes=-",
            "bytes=",
            "bytes 0-1",
            "items=0-1",
            "bytes=0x1-2",
            "bytes=1 - 2",
            "bytes=+1-2",
            "",
        ] {
            let reply = s.serve(&ranged(field, None));
            assert_eq!(status(&reply), 200, "{field:?}");
            assert_eq!(header(&reply, "Content-Range"), None);
            assert_eq!(expect_file(reply).len, 13);
        }
    }

    #[test]
    fn range_on_empty_file() {
        let fx = Fixture::new();
        let s = fx.server();
        let mk = |r: &'static str| StaticRequest {
            range: Some(r.as_bytes()),
            ..get("/empty.txt")
        };
        let reply = s.serve(&mk("bytes=0-"));
        assert_eq!(status(&reply), 416);
        assert_eq!(
            header(&reply, "Content-Range"),
            Some(b"bytes */0".as_slice())
        );
        // A non-zero suffix is satisfiable on an empty representation but has no 206 form.
        let f = expect_file(s.serve(&mk("bytes=-5")));
        assert_eq!((f.status, f.len), (200, 0));
        assert_eq!(status(&s.serve(&mk("bytes=-0"))), 416);
    }

    #[test]
    fn if_range_matching_etag_or_date_honours_range() {
        let fx = Fixture::new();
        let s = fx.server();
        expect_partial(s.serve(&ranged("bytes=0-4", Some(HELLO_ETAG))), 0, 4);
        expect_partial(s.serve(&ranged("bytes=0-4", Some(MTIME_DATE))), 0, 4);
    }

    #[test]
    fn if_range_mismatch_gives_200_full() {
        let fx = Fixture::new();
        let s = fx.server();
        let weak = format!("W/{HELLO_ETAG}");
        for validator in [
            "\"other\"",
            weak.as_str(),
            "Tue, 14 Nov 2023 22:13:21 GMT",
            "Tue, 14 Nov 2023 22:13:19 GMT",
            "garbage",
        ] {
            let reply = s.serve(&ranged("bytes=0-4", Some(validator)));
            assert_eq!(status(&reply), 200, "{validator}");
            assert_eq!(expect_file(reply).len, 13);
        }
        let reply = s.serve(&ranged("bytes=20-", Some("\"other\"")));
        assert_eq!(status(&reply), 200, "If-Range mismatch also skips the 416");
    }

    #[test]
    fn if_range_without_range_is_ignored() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&StaticRequest {
            if_range: Some(b"\"other\""),
            ..get("/hello.txt")
        });
        assert_eq!(status(&reply), 200);
    }

    #[test]
    fn conditional_304_wins_over_range() {
        let fx = Fixture::new();
        let s = fx.server();
        let reply = s.serve(&StaticRequest {
            if_none_match: Some(HELLO_ETAG.as_bytes()),
            ..ranged("bytes=0-4", None)
        });
        assert_eq!(status(&reply), 304);
    }

    #[test]
    fn parse_range_table() {
        use RangeOutcome::*;
        assert_eq!(parse_range(b"bytes=0-0", 1), Partial { first: 0, last: 0 });
        assert_eq!(parse_range(b"bytes=0-", 1), Partial { first: 0, last: 0 });
        assert_eq!(parse_range(b"bytes=1-", 1), Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-1", 1), Partial { first: 0, last: 0 });
        assert_eq!(parse_range(b"bytes=0-0,", 1), Partial { first: 0, last: 0 });
        assert_eq!(parse_range(b"bytes=0-0,1-1", 5), Full);
        assert_eq!(parse_range(b"bytes=1-0", 5), Full);
        assert_eq!(parse_range(b"bytes==0-1", 5), Full);
        assert_eq!(parse_range(b"bytes=0--1", 5), Full);
    }
}
