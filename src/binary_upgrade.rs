//! Binary upgrade without a refused connection, as nginx does it: the running
//! process starts the new binary with its own arguments and hands over its
//! listening sockets, which the child adopts instead of binding. They stay the
//! same kernel sockets, so a connection waiting in a backlog is accepted by
//! whichever process takes it first. The child reports ready; only then does the
//! parent stop accepting and drain.
//!
//! The sockets travel over a `SOCK_SEQPACKET` socket pair, one message per
//! socket (`listener ADDR` with ADDR the listener's configured `listen`, plus
//! `#N` for the N+1th listener with that address, `quic ADDR` for a UDP
//! socket of a listener with HTTP/3, or `admin`) carrying the descriptor as
//! `SCM_RIGHTS`, then `quic-relay` with the child's end of a second pair,
//! over which it relays the packets of this process's QUIC connections
//! ([`crate::quic::handover`]), then `end`. The child's end of the pair is the one
//! descriptor it inherits (its close-on-exec flag is cleared for the spawn); the
//! environment names it (`PIER_UPGRADE_SOCKET`) and the parent
//! (`PIER_UPGRADE_PARENT`, so variables leaked to an unrelated descendant are
//! ignored). The child writes `ready` on the same pair. Passing the listening
//! sockets as messages rather than inherited numbers means the child owns each
//! (close-on-exec) and a listener it does not use, or later removes, really
//! closes: adopting an inherited number without `unsafe` takes a duplicate
//! (`pidfd_getfd(2)`, as for socket activation in [`crate::systemd`]) and leaves
//! the number open for the life of the process.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use rustix::io::{fcntl_setfd, FdFlags};
use rustix::net::{
    recvmsg, sendmsg, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use crate::listener_key::ListenerKey;
use crate::quic::handover::RelayToPredecessor;
use crate::quic::steer::Predecessor;

const ENV_PARENT: &str = "PIER_UPGRADE_PARENT";
const ENV_SOCKET: &str = "PIER_UPGRADE_SOCKET";

/// What the child sends once it accepts on every listener.
const READY: &[u8] = b"ready";
/// The parent's last message.
const END: &[u8] = b"end";

/// Sockets this process took over from the one it replaces. Empty when it was
/// not started by an upgrade.
#[derive(Default)]
pub struct Inherited {
    listeners: Vec<(ListenerKey, TcpListener)>,
    quic: Vec<(ListenerKey, UdpSocket)>,
    quic_relay: Option<OwnedFd>,
    admin: Option<TcpListener>,
    parent: Option<OwnedFd>,
}

impl Inherited {
    /// Receives what the parent sends, if this process was started by a Pier
    /// upgrade.
    pub fn from_env() -> io::Result<Inherited> {
        let parent = std::env::var(ENV_PARENT)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        let fd = std::env::var(ENV_SOCKET)
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok());
        let (Some(fd), true) = (fd, parent.is_some() && parent == ppid) else {
            return Ok(Inherited::default());
        };
        let pair = adopt(fd)?;
        let mut out = Inherited::default();
        loop {
            let (text, fd) = receive(&pair)?;
            if text == END {
                break;
            }
            let what = String::from_utf8_lossy(&text).into_owned();
            let fd = fd.ok_or_else(|| bad(&what))?;
            if what == "quic-relay" {
                out.quic_relay = Some(fd);
                continue;
            }
            let sock = socket2::Socket::from(fd);
            sock.set_nonblocking(true)?;
            if let Some(addr) = what.strip_prefix("quic ") {
                let key = addr.parse().map_err(|_| bad(&what))?;
                out.quic.push((key, sock.into()));
                continue;
            }
            let listener: TcpListener = sock.into();
            if what == "admin" {
                out.admin = Some(listener);
            } else {
                let key = what
                    .strip_prefix("listener ")
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| bad(&what))?;
                out.listeners.push((key, listener));
            }
        }
        out.parent = Some(pair);
        Ok(out)
    }

    /// True when this process replaces another one.
    pub fn is_upgrade(&self) -> bool {
        self.parent.is_some()
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

    /// The inherited UDP sockets of listener `key` (empty if none).
    pub fn take_quic(&mut self, key: ListenerKey) -> Vec<UdpSocket> {
        let (mine, rest) = std::mem::take(&mut self.quic)
            .into_iter()
            .partition(|(k, _)| *k == key);
        self.quic = rest;
        mine.into_iter().map(|(_, s)| s).collect()
    }

    /// The way to relay the replaced process's QUIC packets back to it.
    pub fn take_quic_relay(&mut self) -> Option<Arc<dyn Predecessor>> {
        self.quic_relay
            .take()
            .map(|fd| RelayToPredecessor::new(fd) as Arc<dyn Predecessor>)
    }

    /// The inherited admin socket.
    pub fn take_admin(&mut self) -> Option<TcpListener> {
        self.admin.take()
    }

    /// Listeners no configured listener took (the configuration changed).
    /// UDP sockets no listener with HTTP/3 took close here: left open, the
    /// kernel would go on giving them packets nobody reads.
    pub fn leftover(&mut self) -> Vec<(ListenerKey, TcpListener)> {
        self.quic.clear();
        std::mem::take(&mut self.listeners)
    }

    /// Tells the parent that this process serves, so it may stop accepting.
    pub fn report_ready(&mut self) -> io::Result<()> {
        match self.parent.take() {
            Some(pair) => {
                rustix::net::send(&pair, READY, SendFlags::NOSIGNAL)?;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the replaced process sent {what:?}"),
    )
}

/// One message and the descriptor it carries, if any.
fn receive(pair: &OwnedFd) -> io::Result<(Vec<u8>, Option<OwnedFd>)> {
    let mut buf = [0u8; 256];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        pair,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if got.bytes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the replaced process closed the hand-over early",
        ));
    }
    let mut fd = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    Ok((buf[..got.bytes.min(buf.len())].to_vec(), fd))
}

/// Sends one message, with a descriptor if given.
fn send(pair: &OwnedFd, text: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let fds = fd.as_slice();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    sendmsg(
        pair,
        &[IoSlice::new(text)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
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
    /// This process's end of the pair the new process relays QUIC packets
    /// of this process's connections over.
    relay: OwnedFd,
}

/// A new process that reported ready.
pub struct Succeeded {
    /// Its PID.
    pub pid: u32,
    /// Where it relays the packets of this process's QUIC connections.
    pub quic_relay: OwnedFd,
}

/// Starts `exe args` and sends it `listeners` (whose listener, socket), the
/// UDP sockets of listeners with HTTP/3 (`quic`), and `admin`.
pub fn spawn_successor(
    exe: &Path,
    args: &[std::ffi::OsString],
    listeners: &[(ListenerKey, TcpListener)],
    quic: &[(ListenerKey, &UdpSocket)],
    admin: Option<&TcpListener>,
) -> io::Result<Pending> {
    let (relay, child_relay) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    fcntl_setfd(&theirs, FdFlags::empty())?;
    let mut child = Command::new(exe)
        .args(args)
        .env(ENV_PARENT, std::process::id().to_string())
        .env(ENV_SOCKET, theirs.as_raw_fd().to_string())
        .spawn()?;
    // Only the child holds its end now: end of file means it is gone.
    drop(theirs);
    let sent = (|| {
        for (key, l) in listeners {
            send(&ours, format!("listener {key}").as_bytes(), Some(l.as_fd()))?;
        }
        for (key, s) in quic {
            send(&ours, format!("quic {key}").as_bytes(), Some(s.as_fd()))?;
        }
        send(&ours, b"quic-relay", Some(child_relay.as_fd()))?;
        if let Some(a) = admin {
            send(&ours, b"admin", Some(a.as_fd()))?;
        }
        send(&ours, END, None)
    })();
    if let Err(e) = sent {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::Builder::new()
        .name("pier-upgrade".into())
        .spawn(move || {
            let mut buf = [0u8; 16];
            let ok = matches!(
                rustix::net::recv(&ours, &mut buf, RecvFlags::empty()),
                Ok((n, _)) if &buf[..n] == READY
            );
            let _ = tx.send(ok);
        });
    if let Err(e) = waiter {
        // The child holds the sockets already; without a way to hear from it,
        // it must not go on serving beside this process.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    drop(child_relay);
    Ok(Pending {
        child,
        ready: rx,
        relay,
    })
}

impl Pending {
    /// Waits up to `limit` for the child to report ready. On failure the child
    /// is stopped (if still running) and reaped, and the reason returned.
    pub fn wait_ready(mut self, limit: Duration) -> Result<Succeeded, String> {
        let pid = self.child.id();
        let why = match self.ready.recv_timeout(limit) {
            Ok(true) => {
                return Ok(Succeeded {
                    pid,
                    quic_relay: self.relay,
                })
            }
            Ok(false) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The pipe closed: the child exited, or closed it without a word.
                match wait_exit(&mut self.child, Duration::from_secs(2)) {
                    Some(status) => format!(
                        "the new process (PID {pid}) exited with {status} before it was ready"
                    ),
                    None => format!(
                        "the new process (PID {pid}) closed the hand-over without reporting ready"
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
