//! Which kind of file system a file or a path lies on, found without asking
//! that file system: from the kernel's mount table (`/proc/self/mountinfo`),
//! never by `statfs`, which a network file system or a FUSE daemon must answer
//! and which hangs with a dead server.
//!
//! On a network file system or FUSE even an open or a stat of a path whose
//! names are cached goes to the server (NFS checks the file at every open, FUSE
//! asks its daemon), so paths under such a mount are opened off the event
//! loop ([`under_remote_mount`]); the open-file cache's revalidation of them
//! too. The table is read once and again when the kernel reports a change of
//! the mounts (it is polled at most every [`RECHECK`]).
//!
//! Every other file system counts as local, its opens of cached names made on
//! the event loop, and that is by design: an open whose every name is in the
//! dentry cache (`RESOLVE_CACHED` refuses any that needs a lookup or a
//! revalidation) finds its inode in memory, and a local file system's open
//! does no IO of its own, so it cannot wait for a disk. What can wait is a file
//! system whose open or revalidation asks a server, and those are the network
//! types and FUSE named in [`REMOTE_TYPES`]. Telling them apart by anything
//! else does not work: btrfs, overlayfs and tmpfs have anonymous devices (major
//! 0) just as NFS has, and `statfs`, which would name the type, is itself
//! answered by the server. A network file system missing from the list would
//! have its cached opens made inline; its reads are still sent off the loop
//! whenever they are not known to be cached, like every file's.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{AtFlags, StatxFlags};

/// What a file system's answers may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// Pages in memory (tmpfs, ramfs): a read never waits for a disk.
    Memory,
    /// A local disk (or a block device): cached names and attributes are
    /// answered from memory; only uncached pages wait.
    Local,
    /// A network file system or FUSE: opens and stats may wait for a server
    /// or a daemon, and hang with it.
    Remote,
}

/// How often, at most, the mount table is checked for changes.
const RECHECK: Duration = Duration::from_millis(100);

/// Network and user-space file systems, by the type `mountinfo` names; FUSE
/// mounts are `fuse`, `fuseblk` or `fuse.<name>`.
const REMOTE_TYPES: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "ceph",
    "afs",
    "coda",
    "lustre",
    "glusterfs",
    "orangefs",
    "vboxsf",
    "virtiofs",
    "ncpfs",
    "gfs2",
    "ocfs2",
    "beegfs",
    "gpfs",
    "fuse",
    "fuseblk",
];

const MEMORY_TYPES: &[&str] = &["tmpfs", "ramfs"];

fn kind_of_type(fs_type: &str) -> FsKind {
    if MEMORY_TYPES.contains(&fs_type) {
        FsKind::Memory
    } else if REMOTE_TYPES.contains(&fs_type) || fs_type.starts_with("fuse.") {
        FsKind::Remote
    } else {
        FsKind::Local
    }
}

struct Mount {
    dev: (u32, u32),
    point: Vec<u8>,
    kind: FsKind,
}

struct Table {
    /// `/proc/self/mountinfo` held open: it polls readable with `POLLPRI`
    /// once after each change of the mounts.
    watch: Option<File>,
    mounts: Vec<Mount>,
    checked: Option<Instant>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    watch: None,
    mounts: Vec::new(),
    checked: None,
});

impl Table {
    /// Reads the table again if it was never read or the mounts changed.
    fn refresh(&mut self) {
        let now = Instant::now();
        if self
            .checked
            .is_some_and(|t| now.duration_since(t) < RECHECK)
        {
            return;
        }
        self.checked = Some(now);
        let changed = match &self.watch {
            Some(watch) => {
                let mut fds = [PollFd::new(watch, PollFlags::PRI)];
                let zero = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                rustix::event::poll(&mut fds, Some(&zero)).is_ok()
                    && fds[0].revents().intersects(PollFlags::PRI | PollFlags::ERR)
            }
            None => {
                // Opened before the table is read: a change after this is seen.
                self.watch = File::open("/proc/self/mountinfo").ok();
                true
            }
        };
        if changed {
            if let Ok(text) = std::fs::read("/proc/self/mountinfo") {
                self.mounts = parse(&text);
            }
        }
    }
}

fn table() -> std::sync::MutexGuard<'static, Table> {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    t.refresh();
    t
}

/// The mounts in `mountinfo` text, in the kernel's order (a later mount on
/// the same point hides an earlier one).
fn parse(text: &[u8]) -> Vec<Mount> {
    let mut mounts = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        let (Some(dev), Some(point), Some(fs_type)) =
            (fields.get(2), fields.get(4), fields.get(sep + 1))
        else {
            continue;
        };
        let Some(dev) = parse_dev(dev) else {
            continue;
        };
        mounts.push(Mount {
            dev,
            point: unescape(point),
            kind: kind_of_type(&String::from_utf8_lossy(fs_type)),
        });
    }
    mounts
}

fn parse_dev(field: &[u8]) -> Option<(u32, u32)> {
    let text = std::str::from_utf8(field).ok()?;
    let (major, minor) = text.split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Undoes `mountinfo`'s octal escapes (`\040` for a space, and so on).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// Whether `path` (absolute) lies on `point` (a mount point).
fn lies_under(path: &[u8], point: &[u8]) -> bool {
    if point == b"/" {
        return path.starts_with(b"/");
    }
    path.starts_with(point) && matches!(path.get(point.len()), None | Some(b'/'))
}

/// Whether the mount `path` (absolute) lies on is a network file system or
/// FUSE, as far as the mount table says (symbolic links along the path are
/// not followed); `false` where `/proc` is not mounted.
pub fn under_remote_mount(path: &[u8]) -> bool {
    remote_in(&table().mounts, path)
}

fn remote_in(mounts: &[Mount], path: &[u8]) -> bool {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if lies_under(path, &m.point) && best.is_none_or(|b| m.point.len() >= b.point.len()) {
            best = Some(m);
        }
    }
    best.is_some_and(|m| m.kind == FsKind::Remote)
}

/// The kind of file system whose device is `dev` (major, minor); where the
/// mount table does not know it, a block device's is [`FsKind::Local`] and
/// another's [`FsKind::Remote`] (its answers may wait).
pub fn kind_of_device(dev: (u32, u32)) -> FsKind {
    let t = table();
    match t.mounts.iter().rev().find(|m| m.dev == dev) {
        Some(m) => m.kind,
        None if dev.0 != 0 => FsKind::Local,
        None => FsKind::Remote,
    }
}

/// The kind of file system `file` lies on. Its device comes from `statx`
/// with `AT_STATX_DONT_SYNC`, which FUSE and NFS answer from what they have
/// cached, never by asking their server.
pub fn kind_of_file(file: &File) -> FsKind {
    let flags = AtFlags::EMPTY_PATH | AtFlags::STATX_DONT_SYNC;
    match rustix::fs::statx(file, "", flags, StatxFlags::empty()) {
        Ok(st) => kind_of_device((st.stx_dev_major, st.stx_dev_minor)),
        Err(_) => FsKind::Remote,
    }
}

/// The kind of file system of a file whose metadata is at hand.
pub fn kind_of_metadata(meta: &std::fs::Metadata) -> FsKind {
    let dev = meta.dev();
    kind_of_device((rustix::fs::major(dev), rustix::fs::minor(dev)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &[u8] = b"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
        30 22 0:26 / /dev/shm rw,nosuid shared:4 - tmpfs tmpfs rw\n\
        41 22 0:39 / /srv/www/slow rw,nosuid - fuse.slowdisk slowdisk rw,max_read=131072\n\
        42 22 0:40 / /srv/my\\040files rw - nfs4 server:/export rw\n\
        43 42 254:2 / /srv/my\\040files/local rw - xfs /dev/vdb rw\n";

    #[test]
    fn the_mount_table_is_read_with_its_escapes_and_kinds() {
        let mounts = parse(SAMPLE);
        assert_eq!(mounts.len(), 5);
        assert_eq!(mounts[1].dev, (0, 26));
        assert_eq!(mounts[1].kind, FsKind::Memory);
        assert_eq!(mounts[2].kind, FsKind::Remote, "FUSE");
        assert_eq!(mounts[3].point, b"/srv/my files");
        assert_eq!(mounts[3].kind, FsKind::Remote, "NFS");
        assert_eq!(mounts[4].kind, FsKind::Local);
    }

    #[test]
    fn the_longest_mount_point_decides() {
        let mounts = parse(SAMPLE);
        let remote = |path: &[u8]| remote_in(&mounts, path);
        assert!(remote(b"/srv/www/slow/big.bin"));
        assert!(remote(b"/srv/www/slow"));
        assert!(
            !remote(b"/srv/www/slower/big.bin"),
            "a prefix, not a parent"
        );
        assert!(!remote(b"/srv/www/hello.txt"));
        assert!(remote(b"/srv/my files/a"));
        assert!(!remote(b"/srv/my files/local/a"), "a local mount inside");
    }

    #[test]
    fn this_machines_memory_and_disk_file_systems_are_known() {
        if !std::path::Path::new("/proc/self/mountinfo").exists() {
            return;
        }
        assert!(!under_remote_mount(b"/proc/self"));
        if let Ok(f) = tempfile::tempfile_in("/dev/shm") {
            assert_eq!(kind_of_file(&f), FsKind::Memory);
        }
        let f = File::open("/proc/self/mountinfo").unwrap();
        assert_eq!(kind_of_file(&f), FsKind::Local, "proc is neither");
    }
}
