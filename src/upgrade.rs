//! Binary upgrade without a refused connection, as nginx does it: the running
//! process starts the new binary with its own arguments and hands over its
//! listening sockets, which the child inherits (their close-on-exec flag is
//! cleared for the spawn) and adopts instead of binding. They stay the same
//! kernel sockets, so a connection waiting in a backlog is accepted by whichever
//! process takes it first. The child reports ready over a pipe; only then does
//! the parent stop accepting and drain.
//!
//! The child learns what it inherited from the environment:
//! `PIER_UPGRADE_PARENT` (the parent's PID, so variables leaked to an unrelated
//! descendant are ignored), `PIER_UPGRADE_FDS` (`fd=listener ADDR` or
//! `fd=admin`, comma-separated; ADDR is the listener's configured `listen`) and
//! `PIER_UPGRADE_READY_FD` (the pipe to write `ready` to). As with socket
//! activation (see [`crate::systemd`]), descriptors are adopted through
//! `pidfd_getfd(2)` on the own process, which needs no `unsafe`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use rustix::io::{fcntl_setfd, FdFlags};
use tracing::warn;

use crate::worker::ListenerKey;

const ENV_PARENT: &str = "PIER_UPGRADE_PARENT";
const ENV_FDS: &str = "PIER_UPGRADE_FDS";
const ENV_READY: &str = "PIER_UPGRADE_READY_FD";

/// What the child writes once it accepts on every listener.
const READY: &[u8] = b"ready\n";

/// Sockets this process took over from the one it replaces. Empty when it was
/// not started by an upgrade.
#[derive(Default)]
pub struct Inherited {
    listeners: Vec<(ListenerKey, TcpListener)>,
    admin: Option<TcpListener>,
    ready: Option<OwnedFd>,
}

impl Inherited {
    /// Adopts what the parent described in the environment, if this process was
    /// started by a Pier upgrade.
    pub fn from_env() -> io::Result<Inherited> {
        let parent = std::env::var(ENV_PARENT)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if parent.is_none() || parent != ppid {
            return Ok(Inherited::default());
        }
        let mut out = Inherited::default();
        let fds = std::env::var(ENV_FDS).unwrap_or_default();
        for item in fds.split(',').filter(|s| !s.is_empty()) {
            let (fd, what) = item.split_once('=').ok_or_else(|| bad_env(ENV_FDS, item))?;
            let fd: i32 = fd.parse().map_err(|_| bad_env(ENV_FDS, item))?;
            let sock = socket2::Socket::from(adopt(fd)?);
            sock.set_nonblocking(true)?;
            let listener: TcpListener = sock.into();
            if what == "admin" {
                out.admin = Some(listener);
            } else {
                let key = what
                    .strip_prefix("listener ")
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| bad_env(ENV_FDS, item))?;
                out.listeners.push((key, listener));
            }
        }
        if let Some(fd) = std::env::var(ENV_READY)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
        {
            out.ready = Some(adopt(fd)?);
        }
        Ok(out)
    }

    /// True when this process replaces another one.
    pub fn is_upgrade(&self) -> bool {
        self.ready.is_some()
    }

    /// The inherited sockets of listener `key` (empty if none).
    pub fn take_listener(&mut self, key: ListenerKey) -> Vec<TcpListener> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.listeners.len() {
            if self.listeners[i].0 == key {
                out.push(self.listeners.remove(i).1);
            } else {
                i += 1;
            }
        }
        out
    }

    /// The inherited admin socket.
    pub fn take_admin(&mut self) -> Option<TcpListener> {
        self.admin.take()
    }

    /// Listeners no configured listener took (the configuration changed).
    pub fn leftover(&mut self) -> Vec<(ListenerKey, TcpListener)> {
        std::mem::take(&mut self.listeners)
    }

    /// Tells the parent that this process serves, so it may stop accepting.
    pub fn report_ready(&mut self) -> io::Result<()> {
        match self.ready.take() {
            Some(fd) => std::fs::File::from(fd).write_all(READY),
            None => Ok(()),
        }
    }
}

fn bad_env(name: &str, item: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{name}: cannot read {item:?}"),
    )
}

/// An owned duplicate of inherited descriptor `fd`.
fn adopt(fd: i32) -> io::Result<OwnedFd> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let me = pidfd_open(getpid(), PidfdFlags::empty())?;
    Ok(pidfd_getfd(&me, fd, PidfdGetfdFlags::empty())?)
}

/// The binary to start for an upgrade: the path this process was started as
/// (resolved against the working directory or `PATH` as the shell did), not
/// `/proc/self/exe`, which names the replaced file — "(deleted)" — once a package
/// upgrade put a new binary in its place.
pub fn startup_exe() -> PathBuf {
    let argv0 = std::env::args_os().next().map(PathBuf::from);
    if let Some(p) = argv0 {
        if p.components().count() > 1 {
            if p.is_absolute() {
                return p;
            }
            if let Ok(cwd) = std::env::current_dir() {
                return cwd.join(p);
            }
        } else if let Some(path) = std::env::var_os("PATH") {
            if let Some(found) = std::env::split_paths(&path)
                .map(|d| d.join(&p))
                .find(|c| c.is_file())
            {
                return found;
            }
        }
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pier"))
}

/// A started child that has not reported ready yet.
pub struct Pending {
    /// The new process.
    pub child: Child,
    ready: std::sync::mpsc::Receiver<bool>,
}

/// Starts `exe args` with `listeners` (whose listener, socket) and `admin`
/// inherited. The descriptors are inheritable only for the spawn.
pub fn spawn(
    exe: &Path,
    args: &[OsString],
    listeners: &[(ListenerKey, TcpListener)],
    admin: Option<&TcpListener>,
) -> io::Result<Pending> {
    let (ready_read, ready_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let mut fds = String::new();
    let mut handed: Vec<std::os::fd::BorrowedFd<'_>> = Vec::new();
    for (key, l) in listeners {
        let _ = write!(fds, "{}=listener {key},", l.as_raw_fd());
        handed.push(l.as_fd());
    }
    if let Some(a) = admin {
        let _ = write!(fds, "{}=admin,", a.as_raw_fd());
        handed.push(a.as_fd());
    }
    handed.push(ready_write.as_fd());
    let spawned = (|| {
        for fd in &handed {
            fcntl_setfd(fd, FdFlags::empty())?;
        }
        Command::new(exe)
            .args(args)
            .env(ENV_PARENT, std::process::id().to_string())
            .env(ENV_FDS, fds.trim_end_matches(','))
            .env(ENV_READY, ready_write.as_raw_fd().to_string())
            .spawn()
    })();
    // Whatever happened, later spawns must not inherit these.
    for fd in &handed {
        if let Err(e) = fcntl_setfd(fd, FdFlags::CLOEXEC) {
            warn!(error = %e, "cannot restore close-on-exec on a listening socket");
        }
    }
    drop(handed);
    let child = spawned?;
    // Only the child holds the write end now: end of file means it is gone.
    drop(ready_write);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pier-upgrade".into())
        .spawn(move || {
            let mut buf = [0u8; READY.len()];
            let ok = std::fs::File::from(ready_read).read_exact(&mut buf).is_ok() && buf == READY;
            let _ = tx.send(ok);
        })?;
    Ok(Pending { child, ready: rx })
}

impl Pending {
    /// Waits up to `limit` for the child to report ready. On failure the child
    /// is stopped (if still running) and reaped, and the reason returned.
    pub fn wait_ready(mut self, limit: Duration) -> Result<u32, String> {
        let pid = self.child.id();
        let why = match self.ready.recv_timeout(limit) {
            Ok(true) => return Ok(pid),
            Ok(false) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The pipe closed: the child exited, or closed it without a word.
                match wait_exit(&mut self.child, Duration::from_secs(2)) {
                    Some(status) => format!(
                        "the new process (PID {pid}) exited with {status} before it was ready"
                    ),
                    None => format!(
                        "the new process (PID {pid}) closed its ready pipe without reporting ready"
                    ),
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                format!("the new process (PID {pid}) was not ready within {limit:?}")
            }
        };
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        Err(why)
    }
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
