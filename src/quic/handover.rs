//! QUIC across a binary upgrade. The new process takes over the UDP
//! sockets (as it does the TCP listeners) and from then on reads every
//! datagram; the replaced process stops reading them but keeps sending on
//! them. A short-header packet whose connection ID the new process did not
//! issue belongs to one of the replaced process's connections: the new
//! process relays it over a `SOCK_SEQPACKET` pair made for the upgrade, and
//! the replaced process hands it to the worker its ID names. So the
//! connections open at the upgrade go on until they finish or the drain
//! ends, instead of losing their packets to the new process.
//!
//! One message per datagram: a flags byte (bit 0 the sender is IPv6, bit 1
//! the destination address follows, bit 2 it is IPv6, bits 4-5 the ECN
//! codepoint), the listener's key as text after its length byte, the
//! sender's address and port, the destination address, then the datagram.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::net::{RecvFlags, SendFlags};
use tracing::debug;

use super::steer::{Predecessor, SteerGroup, Steered};
use crate::listener_key::ListenerKey;

/// The new process's way to the process it replaced.
pub struct RelayToPredecessor {
    socket: OwnedFd,
    alive: AtomicBool,
}

impl RelayToPredecessor {
    /// The new process's end of the upgrade's relay pair.
    pub fn new(socket: OwnedFd) -> Arc<RelayToPredecessor> {
        Arc::new(RelayToPredecessor {
            socket,
            alive: AtomicBool::new(true),
        })
    }
}

impl Predecessor for RelayToPredecessor {
    fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Fails when the pair is full, or the replaced process is gone, after
    /// which nothing more is relayed.
    fn send(&self, key: ListenerKey, datagram: &Steered) -> bool {
        let message = encode(key, datagram);
        match rustix::net::send(
            &self.socket,
            &message,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        ) {
            Ok(_) => true,
            Err(rustix::io::Errno::AGAIN) => false,
            Err(e) => {
                debug!(error = %e, "the replaced process no longer takes QUIC packets");
                self.alive.store(false, Ordering::Relaxed);
                false
            }
        }
    }
}

/// In the replaced process: reads what the new process relays and hands
/// each datagram to the worker of `groups` its connection ID names, on a
/// thread of its own, until the new process closes its end.
pub fn serve_relayed(socket: OwnedFd, groups: Vec<(ListenerKey, SteerGroup)>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("pier-quic-relay".into())
        .spawn(move || {
            let mut buf = vec![0u8; 65_536 + 64];
            loop {
                let n = match rustix::net::recv(&socket, &mut buf, RecvFlags::empty()) {
                    Ok((0, _)) => return,
                    Ok((n, _)) => n.min(buf.len()),
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => return,
                };
                let Some((key, datagram)) = decode(&buf[..n]) else {
                    continue;
                };
                if let Some((_, group)) = groups.iter().find(|(k, _)| *k == key) {
                    group.deliver(datagram);
                }
            }
        })?;
    Ok(())
}

fn encode(key: ListenerKey, d: &Steered) -> Vec<u8> {
    let key = key.to_string();
    let mut out = Vec::with_capacity(1 + 1 + key.len() + 18 + 16 + d.data.len());
    let mut flags = 0u8;
    if d.from.is_ipv6() {
        flags |= 1;
    }
    if let Some(to) = d.to {
        flags |= 2;
        if to.is_ipv6() {
            flags |= 4;
        }
    }
    flags |= (d.ecn.map_or(0, |e| e as u8) & 3) << 4;
    out.push(flags);
    out.push(key.len().min(255) as u8);
    out.extend_from_slice(&key.as_bytes()[..key.len().min(255)]);
    push_ip(&mut out, d.from.ip());
    out.extend_from_slice(&d.from.port().to_be_bytes());
    if let Some(to) = d.to {
        push_ip(&mut out, to);
    }
    out.extend_from_slice(&d.data);
    out
}

fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
}

fn decode(m: &[u8]) -> Option<(ListenerKey, Steered)> {
    let (&flags, rest) = m.split_first()?;
    let (&len, rest) = rest.split_first()?;
    let (key, rest) = rest.split_at_checked(usize::from(len))?;
    let key: ListenerKey = std::str::from_utf8(key).ok()?.parse().ok()?;
    let (from_ip, rest) = take_ip(rest, flags & 1 != 0)?;
    let (port, rest) = rest.split_at_checked(2)?;
    let from = SocketAddr::new(from_ip, u16::from_be_bytes([port[0], port[1]]));
    let (to, rest) = if flags & 2 != 0 {
        let (ip, rest) = take_ip(rest, flags & 4 != 0)?;
        (Some(ip), rest)
    } else {
        (None, rest)
    };
    let ecn = quinn_udp::EcnCodepoint::from_bits((flags >> 4) & 3);
    Some((
        key,
        Steered {
            from,
            to,
            ecn,
            data: rest.to_vec(),
        },
    ))
}

fn take_ip(m: &[u8], v6: bool) -> Option<(IpAddr, &[u8])> {
    if v6 {
        let (a, rest) = m.split_at_checked(16)?;
        let octets: [u8; 16] = a.try_into().ok()?;
        Some((IpAddr::V6(Ipv6Addr::from(octets)), rest))
    } else {
        let (a, rest) = m.split_at_checked(4)?;
        let octets: [u8; 4] = a.try_into().ok()?;
        Some((IpAddr::V4(Ipv4Addr::from(octets)), rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_datagram_arrives_as_it_was_read() {
        let key: ListenerKey = "[::1]:443#1".parse().unwrap();
        for (from, to, ecn) in [
            ("192.0.2.7:5000", Some("127.0.0.1"), None),
            (
                "[2001:db8::1]:65535",
                Some("::1"),
                Some(quinn_udp::EcnCodepoint::Ce),
            ),
            ("10.0.0.1:1", None, Some(quinn_udp::EcnCodepoint::Ect0)),
        ] {
            let d = Steered {
                from: from.parse().unwrap(),
                to: to.map(|t| t.parse().unwrap()),
                ecn,
                data: vec![0x41, 1, 2, 3, 4, 5],
            };
            let (k, back) = decode(&encode(key, &d)).unwrap();
            assert_eq!(k, key);
            assert_eq!(back.from, d.from);
            assert_eq!(back.to, d.to);
            assert_eq!(back.ecn, d.ecn);
            assert_eq!(back.data, d.data);
        }
    }

    #[test]
    fn a_cut_message_is_dropped_not_misread() {
        let d = Steered {
            from: "192.0.2.7:5000".parse().unwrap(),
            to: Some("127.0.0.1".parse().unwrap()),
            ecn: None,
            data: vec![],
        };
        let whole = encode("127.0.0.1:443".parse().unwrap(), &d);
        for cut in 0..whole.len() {
            assert!(decode(&whole[..cut]).is_none(), "cut at {cut}");
        }
        assert!(decode(&whole).is_some());
    }

    #[test]
    fn a_gone_predecessor_is_no_longer_sent_to() {
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let p = RelayToPredecessor::new(ours);
        let d = Steered {
            from: "192.0.2.7:5000".parse().unwrap(),
            to: None,
            ecn: None,
            data: vec![0x40; 30],
        };
        let key = "127.0.0.1:443".parse().unwrap();
        assert!(p.send(key, &d));
        drop(theirs);
        assert!(!p.send(key, &d));
        assert!(!p.alive());
    }
}
