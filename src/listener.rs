//! One SO_REUSEPORT listening socket per worker per listener, so the kernel spreads
//! connections across workers and no accept lock is shared; or, when the
//! sockets already exist, the ones a replaced process or systemd handed over.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use anyhow::Context;
use tracing::{info, warn};

use crate::binary_upgrade::Inherited;
use crate::config::ListenerConfig;
use crate::listener_key::ListenerKey;
use crate::sockopt::{self, SocketOptions};

/// Binds `count` sockets to `addr` with SO_REUSEPORT and default socket options.
/// With port 0 the first socket picks the port and the rest join it.
pub fn bind_reuseport(
    addr: SocketAddr,
    backlog: u32,
    count: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    bind_listener(addr, backlog, &SocketOptions::default(), count)
}

/// Binds `count` sockets to `addr` with SO_REUSEPORT and a listener's socket
/// options, each set before `bind` or `listen` where the kernel needs it so.
pub fn bind_listener(
    addr: SocketAddr,
    backlog: u32,
    opts: &SocketOptions,
    count: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        probe_free(addr, opts.ipv6_only)?;
    }
    let mut out = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_reuse_address(true)?;
        sock.set_reuse_port(true)?;
        sockopt::prepare_listener(&sock, addr, opts)?;
        sock.set_nonblocking(true)?;
        sock.bind(&addr.into())?;
        sock.listen(backlog.min(i32::MAX as u32) as i32)?;
        sockopt::apply_listener(&sock, opts)?;
        let l: std::net::TcpListener = sock.into();
        if addr.port() == 0 {
            addr = l.local_addr()?;
        }
        out.push(l);
    }
    Ok(out)
}

/// SO_REUSEPORT would let a second server silently share a port with a running one
/// and take half its connections; a plain bind first makes that an "address in use"
/// error, as operators expect.
fn probe_free(addr: SocketAddr, ipv6_only: bool) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(ipv6_only)?;
    }
    probe.bind(&addr.into())
}

/// Sets the accept backlog of a socket that already listens: listen(2) again
/// takes the new length, so a kept or handed-over socket follows `backlog`.
pub(crate) fn set_backlog(s: &std::net::TcpListener, backlog: u32) -> std::io::Result<()> {
    socket2::SockRef::from(s).listen(i32::try_from(backlog).unwrap_or(i32::MAX))
}

/// Whether `l` listens on `addr` (any port when `addr` asks for port 0).
pub(crate) fn bound_to(l: &std::net::TcpListener, addr: SocketAddr) -> bool {
    l.local_addr()
        .is_ok_and(|b| b.ip() == addr.ip() && (addr.port() == 0 || b.port() == addr.port()))
}

/// The listening sockets of one listener, one per worker (or shared copies of
/// one socket passed by systemd or a replaced process).
pub(crate) fn open_listener(
    lc: &ListenerConfig,
    key: ListenerKey,
    workers: usize,
    systemd: &mut Vec<(SocketAddr, std::net::TcpListener)>,
    inherited: &mut Inherited,
) -> anyhow::Result<Vec<std::net::TcpListener>> {
    let handed = inherited.take_listener(key);
    if !handed.is_empty() {
        // The replaced process's sockets, same kernel sockets and queues. With
        // fewer of them than workers some workers share; with more, some
        // workers accept from several, so no socket's backlog goes unread.
        info!(listener = %key, sockets = handed.len(), "using the sockets of the replaced process");
        for s in &handed {
            set_backlog(s, lc.backlog)
                .with_context(|| format!("cannot set the backlog of {key}"))?;
            sockopt::apply_listener(s, &lc.socket)
                .with_context(|| format!("cannot set the socket options of {key}"))?;
        }
        if lc.addr.is_ipv6() {
            let kept = socket2::SockRef::from(&handed[0]).only_v6().ok();
            if kept.is_some_and(|v| v != lc.socket.ipv6_only) {
                warn!(listener = %key, "ipv6_only = {} applies when the address is bound again (restart, or change `listen`); the handed-over sockets keep the old setting", lc.socket.ipv6_only);
            }
        }
        let mut out = Vec::with_capacity(handed.len().max(workers));
        for i in handed.len()..workers {
            out.push(handed[i % handed.len()].try_clone()?);
        }
        out.splice(0..0, handed);
        return Ok(out);
    }
    if let Some(i) = systemd.iter().position(|(a, _)| *a == lc.addr) {
        // One socket shared by every worker: it was bound without
        // SO_REUSEPORT, so the workers take turns accepting from it.
        let (_, s) = systemd.swap_remove(i);
        info!(listener = %lc.addr, "using the socket passed by systemd");
        sockopt::apply_listener(&s, &lc.socket)
            .with_context(|| format!("cannot set the socket options of {}", lc.addr))?;
        return (0..workers.max(1))
            .map(|_| s.try_clone())
            .collect::<std::io::Result<Vec<_>>>()
            .with_context(|| format!("cannot share the socket for {}", lc.addr));
    }
    bind_listener(lc.addr, lc.backlog, &lc.socket, workers)
        .with_context(|| format!("cannot listen on {}", lc.addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_share_one_port_but_a_second_server_is_refused() {
        let socks = bind_reuseport("127.0.0.1:0".parse().unwrap(), 16, 3).unwrap();
        let port = socks[0].local_addr().unwrap().port();
        assert!(socks.iter().all(|s| s.local_addr().unwrap().port() == port));
        let again = bind_reuseport(socks[0].local_addr().unwrap(), 16, 1);
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::AddrInUse);
    }
}
