//! The hot/cold decision: whether file work can be done on the event loop
//! without waiting for a disk, found out without waiting.
//!
//! Reads ask the kernel for page-cache data only (`preadv2` with `RWF_NOWAIT`,
//! Linux 4.14): a hot read costs what a plain `pread` costs, and a cold one
//! fails at once with `EAGAIN` instead of sleeping. A residency check
//! (`mincore`) would need the file mapped, which safe code cannot do, and
//! `cachestat` (Linux 6.5) has no safe binding yet; `RWF_NOWAIT` needs neither.
//! tmpfs and ramfs cannot answer `RWF_NOWAIT`; their pages are memory (the
//! mount table says which file systems those are), so they are read inline.
//! Opens resolve the path from the dentry cache only (`openat2` with
//! `RESOLVE_CACHED`, Linux 5.12), and never inline under a network or FUSE
//! mount, whose opens go to a server even for cached names. Where the kernel
//! or the file system cannot say, the answer is "cold", so the work goes to the
//! blocking pool: slower for a hot file there, never a stalled worker.

use std::fs::File;
use std::io::{self, IoSliceMut};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::{Errno, ReadWriteFlags};

use super::mounts::{self, FsKind};

/// Set once `openat2` with `RESOLVE_CACHED` turned out unsupported (an older
/// kernel, or a seccomp filter): every uncached open then goes to the pool.
static NO_CACHED_OPEN: AtomicBool = AtomicBool::new(false);

/// Reads into `buf` at `offset` only what the page cache holds. `Ok(0)` is end
/// of file; `None` means the first byte is not cached (or the file system
/// cannot tell), so the read must be done off the loop. A short count means
/// the bytes after it are not cached.
pub fn read_cached(file: &File, buf: &mut [u8], offset: u64) -> Option<io::Result<usize>> {
    match rustix::io::preadv2(
        file,
        &mut [IoSliceMut::new(buf)],
        offset,
        ReadWriteFlags::NOWAIT,
    ) {
        Ok(n) => Some(Ok(n)),
        // tmpfs and ramfs cannot say, but their pages are memory: read them.
        Err(Errno::OPNOTSUPP) if memory_backed(file) => {
            Some(rustix::io::pread(file, buf, offset).map_err(Into::into))
        }
        Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => None,
        Err(e) => Some(Err(e.into())),
    }
}

/// Whether `file` lies on a file system kept in memory, where a read never
/// waits for a disk (swap aside). Asked of the mount table, not by `fstatfs`:
/// the file systems that cannot answer `RWF_NOWAIT` include FUSE and network
/// ones, whose `statfs` goes to a server that may hang.
fn memory_backed(file: &File) -> bool {
    mounts::kind_of_file(file) == FsKind::Memory
}

/// What the page cache holds of a file region, as far as the kernel can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Cached: a send from the event loop will not wait for the disk.
    Hot,
    /// Not cached, and the file system can tell: reading it once off the loop
    /// brings it in.
    Cold,
    /// The file system cannot tell (FUSE, some network file systems), or the
    /// region reaches past the end of the file: read it off the loop.
    Unknown,
}

/// Whether `len` bytes of `file` from `offset` look resident, for a zero-copy
/// send that cannot itself refuse to wait: the first and the last byte of the
/// region are probed (two one-byte reads). Readahead fills the cache in
/// contiguous windows, so a region cached at both ends is, in practice, cached
/// throughout.
pub fn probe(file: &File, offset: u64, len: u64) -> Residency {
    if len == 0 {
        return Residency::Hot;
    }
    let mut byte = [0u8; 1];
    let at = |at: u64, byte: &mut [u8; 1]| match rustix::io::preadv2(
        file,
        &mut [IoSliceMut::new(byte)],
        at,
        ReadWriteFlags::NOWAIT,
    ) {
        Ok(1) => Residency::Hot,
        Err(Errno::AGAIN) => Residency::Cold,
        Err(Errno::OPNOTSUPP) if memory_backed(file) => Residency::Hot,
        _ => Residency::Unknown,
    };
    match at(offset, &mut byte) {
        Residency::Hot if len > 1 => at(offset + len - 1, &mut byte),
        first => first,
    }
}

/// [`probe`] as a yes or no.
pub fn looks_resident(file: &File, offset: u64, len: u64) -> bool {
    probe(file, offset, len) == Residency::Hot
}

/// Opens `path` read-only (non-blocking, so a FIFO does not wait for a
/// writer, and without acquiring a terminal) if that needs no disk: the path
/// must resolve from cached dentries, and must not lie on a network file
/// system or FUSE, where the open itself (and the stat after it) goes to a
/// server that may hang. `Err(WouldBlock)` sends the open to the pool, as
/// does a lease holder that must be asked to let go first.
///
/// The mount table is asked about the path as written, so a path with a
/// symbolic link in it is first opened with links refused; one that has a
/// link goes through [`open_cached_through_links`], which finds out where the
/// links lead before opening anything there.
pub fn open_cached(path: &Path) -> io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    if NO_CACHED_OPEN.load(Ordering::Relaxed)
        || mounts::under_remote_mount(path.as_os_str().as_bytes())
    {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let resolve = ResolveFlags::CACHED | ResolveFlags::NO_SYMLINKS;
    match rustix::fs::openat2(CWD, path, OPEN_FLAGS, Mode::empty(), resolve) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::LOOP) => open_cached_through_links(path),
        Err(e) => Err(cached_open_error(e)),
    }
}

/// How a file is opened to be sent: read-only, non-blocking (a FIFO does not
/// wait for a writer), never a controlling terminal.
const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// [`open_cached`] for a path with a symbolic link in it, which may lead onto
/// a network or FUSE mount its words do not name. The path is resolved first
/// without opening the file (`O_PATH`: no file system's open runs, so no
/// server is asked), the file system it ends on is looked up by device, and
/// only where that is neither network nor FUSE is the file opened inline. A
/// link loop still fails as one (a 404).
fn open_cached_through_links(path: &Path) -> io::Result<File> {
    let found = rustix::fs::openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::CACHED,
    )
    .map_err(cached_open_error)?;
    if mounts::kind_of_file(&File::from(found)) == FsKind::Remote {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    match rustix::fs::openat2(CWD, path, OPEN_FLAGS, Mode::empty(), ResolveFlags::CACHED) {
        Ok(fd) => Ok(File::from(fd)),
        Err(e) => Err(cached_open_error(e)),
    }
}

/// What a refused cached open means: `WouldBlock` sends it to the pool.
fn cached_open_error(e: Errno) -> io::Error {
    match e {
        // `EPERM` may be a seccomp filter that does not know `openat2`, or a
        // security module's answer: the pool's plain open tells which.
        Errno::AGAIN | Errno::PERM => io::ErrorKind::WouldBlock.into(),
        Errno::NOSYS | Errno::INVAL => {
            NO_CACHED_OPEN.store(true, Ordering::Relaxed);
            io::ErrorKind::WouldBlock.into()
        }
        e => e.into(),
    }
}

/// Opens `path` read-only on a pool thread, where waiting is allowed: first
/// non-blocking (a FIFO must not hold the thread), then, if a lease holder is
/// being asked to let go, blocking until it has.
pub fn open_blocking(path: &Path) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags | OFlags::NONBLOCK, Mode::empty()) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::AGAIN) => Ok(File::from(rustix::fs::open(path, flags, Mode::empty())?)),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn cached_read_returns_the_bytes_of_a_just_written_file() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"hello world").unwrap();
        let file = File::open(f.path()).unwrap();
        let mut buf = [0u8; 32];
        // A file system without RWF_NOWAIT answers "cold", never wrong bytes.
        if let Some(r) = read_cached(&file, &mut buf, 6) {
            assert_eq!(r.unwrap(), 5);
            assert_eq!(&buf[..5], b"world");
        }
        assert!(matches!(
            read_cached(&file, &mut buf, 11),
            Some(Ok(0)) | None
        ));
    }

    #[test]
    fn memory_file_systems_are_read_inline() {
        let Ok(mut f) = tempfile::NamedTempFile::new_in("/dev/shm") else {
            return;
        };
        f.write_all(b"in memory").unwrap();
        let file = File::open(f.path()).unwrap();
        let mut buf = [0u8; 16];
        let n = read_cached(&file, &mut buf, 3)
            .expect("tmpfs is hot")
            .unwrap();
        assert_eq!(&buf[..n], b"memory");
        assert!(looks_resident(&file, 0, 9));
    }

    #[test]
    fn a_region_past_the_end_is_not_resident() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"0123456789").unwrap();
        let file = File::open(f.path()).unwrap();
        assert_eq!(probe(&file, 5, 10), Residency::Unknown);
        assert!(looks_resident(&file, 0, 0));
        assert!(looks_resident(&file, 0, 10));
    }

    #[test]
    fn evicted_pages_are_cold() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.as_file().sync_all().unwrap();
        let file = File::open(f.path()).unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let mut buf = [0u8; 4096];
        // Eviction is advice: a kernel may keep the pages, but a page it
        // reports resident must read back right. A refused read starts the
        // kernel's read-ahead, so the probe comes first: the cached read after
        // it may find the pages already in.
        assert_ne!(probe(&file, 512 * 1024, 4096), Residency::Unknown);
        if let Some(r) = read_cached(&file, &mut buf, 512 * 1024) {
            assert!(r.unwrap() > 0 && buf[0] == 7);
        }
    }

    #[test]
    fn cached_open_finds_a_known_path_and_reports_a_missing_one() {
        let f = tempfile::NamedTempFile::new().unwrap();
        match open_cached(f.path()) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
        }
        let missing = f.path().with_extension("missing");
        match open_cached(&missing) {
            Err(e) => assert!(matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::WouldBlock
            )),
            Ok(_) => panic!("opened a file that does not exist"),
        }
        assert!(open_blocking(&missing).is_err());
        assert!(open_blocking(f.path()).is_ok());
    }
}
