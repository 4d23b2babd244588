//! One worker's UDP socket for a listener: bound with SO_REUSEPORT beside
//! the other workers' on the TLS listener's address and port, read and
//! written through `quinn-udp` so a read takes a batch of datagrams (GRO
//! where the kernel offers it), a write sends several (GSO), ECN marks go
//! both ways and each packet's destination address is known.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{RecvMeta, Transmit, UdpSocketState, BATCH_SIZE};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;

/// Bytes each receive buffer holds: room for a GRO batch of full-size
/// datagrams.
const RECV_BUF: usize = 64 * 1024;

/// Binds `count` UDP sockets to `addr` with SO_REUSEPORT, one per worker.
pub fn bind_udp_reuseport(
    addr: SocketAddr,
    ipv6_only: bool,
    count: usize,
) -> io::Result<Vec<std::net::UdpSocket>> {
    (0..count.max(1))
        .map(|_| {
            let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
            sock.set_reuse_address(true)?;
            sock.set_reuse_port(true)?;
            if addr.is_ipv6() {
                sock.set_only_v6(ipv6_only)?;
            }
            sock.set_nonblocking(true)?;
            sock.bind(&addr.into())?;
            Ok(sock.into())
        })
        .collect()
}

/// One worker's UDP socket of a listener, bound and not yet running, with
/// what steers packets between the listener's workers.
pub struct WorkerUdp {
    /// The socket, bound with SO_REUSEPORT beside the other workers'.
    pub socket: std::net::UdpSocket,
    /// Its worker's place among the listener's workers.
    pub steering: super::steer::Steering,
}

/// A worker's UDP socket with `quinn-udp`'s state for it.
pub struct QuicSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
}

/// Receive buffers, one per datagram (or GRO batch) of a read, kept by the
/// endpoint's receive loop.
pub struct RecvBuffers(Vec<Vec<u8>>);

impl Default for RecvBuffers {
    fn default() -> Self {
        RecvBuffers((0..BATCH_SIZE).map(|_| vec![0u8; RECV_BUF]).collect())
    }
}

/// One received datagram.
pub struct Received<'a> {
    /// Who sent it.
    pub from: SocketAddr,
    /// The address it was sent to, for replies from the same address.
    pub to: Option<std::net::IpAddr>,
    /// Its ECN mark.
    pub ecn: Option<quinn_udp::EcnCodepoint>,
    /// The datagram.
    pub data: &'a [u8],
}

impl QuicSocket {
    /// Takes a bound socket onto the current runtime.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<QuicSocket> {
        let state = UdpSocketState::new((&socket).into())?;
        Ok(QuicSocket {
            io: tokio::net::UdpSocket::from_std(socket)?,
            state,
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// How many datagrams one send may carry by GSO.
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Waits for datagrams, then hands each to `each` (a GRO batch split
    /// into its datagrams).
    pub async fn recv_batch(
        &self,
        bufs: &mut RecvBuffers,
        each: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<()> {
        let mut meta = [RecvMeta::default(); BATCH_SIZE];
        let n = loop {
            self.io.readable().await?;
            let mut slices: Vec<IoSliceMut<'_>> =
                bufs.0.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let state = &self.state;
            let io = &self.io;
            match io.try_io(Interest::READABLE, || {
                state.recv(io.into(), &mut slices, &mut meta)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        for (m, buf) in meta.iter().zip(&bufs.0).take(n) {
            let stride = m.stride.max(1);
            for data in buf[..m.len].chunks(stride) {
                each(Received {
                    from: m.addr,
                    to: m.dst_ip,
                    ecn: m.ecn,
                    data,
                });
            }
        }
        Ok(())
    }

    /// Sends `transmit` now if the socket takes it; `WouldBlock` when its
    /// buffer is full. Other errors are dropped packets, which QUIC's loss
    /// recovery deals with.
    pub fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            self.state.send((&self.io).into(), transmit)
        })
    }

    /// Sends a packet quinn-proto wrote into `buf`, as [`Self::try_send`].
    pub fn try_send_quinn(&self, t: &quinn_proto::Transmit, buf: &[u8]) -> io::Result<()> {
        self.try_send(&Transmit {
            destination: t.destination,
            ecn: t
                .ecn
                .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
            contents: &buf[..t.size],
            segment_size: t.segment_size,
            src_ip: t.src_ip,
        })
    }

    /// Waits until the socket may take more.
    pub async fn writable(&self) -> io::Result<()> {
        self.io.writable().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_share_one_udp_port() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let socks = bind_udp_reuseport(addr, true, 3).unwrap();
        assert_eq!(socks.len(), 3);
        assert!(socks.iter().all(|s| s.local_addr().unwrap() == addr));
    }
}
