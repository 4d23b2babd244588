//! systemd `Type=notify` readiness: tell the service manager when the listeners are
//! bound and the workers run (`READY=1`) and when shutdown starts (`STOPPING=1`), so
//! dependent units start only once Pier really accepts connections.
//!
//! Socket activation (`LISTEN_FDS`) is not supported: taking ownership of an
//! inherited descriptor by number needs `unsafe` (`OwnedFd::from_raw_fd`), which
//! this crate forbids. Pier binds with SO_REUSEPORT itself and fails the start
//! on a busy port, which covers the restart case socket activation is used for.

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
