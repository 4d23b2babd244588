//! systemd `Type=notify` readiness: tell the service manager when the listeners are
//! bound and the workers run (`READY=1`) and when shutdown starts (`STOPPING=1`), so
//! dependent units start only once Pier really accepts connections.
//!
//! Socket activation (`LISTEN_FDS`/`LISTEN_PID`) hands over listening sockets as
//! descriptors 3 and up. Adopting a descriptor by number would need `unsafe`
//! (`OwnedFd::from_raw_fd`), which this crate forbids, so each one is duplicated
//! with `pidfd_getfd(2)` on our own process (Linux 5.6+), which returns an owned
//! descriptor safely. The originals stay open, unused, for the life of the process.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (e.g. `"READY=1"`) to `$NOTIFY_SOCKET`. Returns `Ok(false)` when
/// the variable is unset, i.e. not started by systemd as `Type=notify`.
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let addr = notify_addr(path.as_bytes())?;
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

/// Listening TCP sockets passed by systemd socket activation, each with the
/// address it is bound to. Empty when `LISTEN_PID` names another process (the
/// variables were inherited, not meant for us) or nothing was passed.
pub fn inherited_listeners() -> io::Result<Vec<(std::net::SocketAddr, std::net::TcpListener)>> {
    let for_us = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<i32>().ok())
        .unwrap_or(0);
    if !for_us || count <= 0 {
        return Ok(Vec::new());
    }
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let me = pidfd_open(getpid(), PidfdFlags::empty())?;
    let mut out = Vec::new();
    for fd in LISTEN_FDS_START..LISTEN_FDS_START + count {
        let owned = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty())?;
        let sock = socket2::Socket::from(owned);
        if sock.r#type()? != socket2::Type::STREAM || !sock.is_listener()? {
            continue;
        }
        let Some(addr) = sock.local_addr()?.as_socket() else {
            continue;
        };
        sock.set_nonblocking(true)?;
        out.push((addr, sock.into()));
    }
    Ok(out)
}

/// First descriptor of socket activation (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

/// A name starting with '@' is in the abstract namespace (Linux); anything else is
/// a filesystem path.
fn notify_addr(name: &[u8]) -> io::Result<SocketAddr> {
    match name.split_first() {
        Some((b'@', abstract_name)) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name)
        }
        Some((b'/', _)) => SocketAddr::from_pathname(OsStr::from_bytes(name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NOTIFY_SOCKET must be an absolute path or start with '@'",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_and_path_names_are_told_apart() {
        use std::os::linux::net::SocketAddrExt;
        let a = notify_addr(b"@pier/notify").unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"pier/notify"[..]));
        let p = notify_addr(b"/run/systemd/notify").unwrap();
        assert_eq!(
            p.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        assert!(notify_addr(b"relative").is_err());
        assert!(notify_addr(b"").is_err());
    }
}
