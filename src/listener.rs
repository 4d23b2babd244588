//! One SO_REUSEPORT listening socket per worker per listener, so the kernel spreads
//! connections across workers and no accept lock is shared.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

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
