//! Keeping each QUIC connection on the worker that owns it. The kernel's
//! SO_REUSEPORT hash picks a worker by the client's address and port, so a
//! client whose address changes (NAT rebinding, migration) may land on
//! another worker. Every connection ID a worker issues carries the worker's
//! index, hidden under a keyed hash of the ID's random bytes (an observer
//! cannot tell workers apart or link the IDs of one connection); a worker
//! that reads a short-header packet whose ID names another worker hands the
//! datagram to that worker's mailbox instead of answering it as unknown.
//!
//! Only such packets cross between workers: one bounded mailbox per worker
//! and listener, and a full mailbox drops the datagram, which QUIC's loss
//! recovery resends like any lost packet.

use std::hash::BuildHasher;
use std::hash::RandomState;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use quinn_proto::{ConnectionId, ConnectionIdGenerator};
use tokio::sync::mpsc;

/// Bytes in a connection ID this server issues: the worker's byte and
/// seven random ones.
pub const CID_LEN: usize = 8;

/// Datagrams a worker's mailbox holds before more are dropped.
const MAILBOX: usize = 256;

/// A datagram read by one worker for a connection another one owns.
pub struct Steered {
    /// Who sent it.
    pub from: SocketAddr,
    /// The address it was sent to.
    pub to: Option<IpAddr>,
    /// Its ECN mark.
    pub ecn: Option<quinn_udp::EcnCodepoint>,
    /// The datagram.
    pub data: Vec<u8>,
}

/// One listener's steering, as one worker sees it.
pub struct Steering {
    index: u8,
    key: Arc<RandomState>,
    mailboxes: Arc<[mpsc::Sender<Steered>]>,
    inbox: Option<mpsc::Receiver<Steered>>,
}

impl Steering {
    /// The steering of a listener with `workers` sockets, one per worker
    /// in order. More than 256 workers share indexes modulo 256, and a
    /// worker steers only to indexes it knows.
    pub fn group(workers: usize) -> Vec<Steering> {
        let key = Arc::new(RandomState::new());
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers.max(1)).map(|_| mpsc::channel(MAILBOX)).unzip();
        let mailboxes: Arc<[mpsc::Sender<Steered>]> = senders.into();
        receivers
            .into_iter()
            .enumerate()
            .map(|(i, inbox)| Steering {
                index: i as u8,
                key: key.clone(),
                mailboxes: mailboxes.clone(),
                inbox: Some(inbox),
            })
            .collect()
    }

    /// The connection ID generator for this worker's endpoint.
    pub fn cid_generator(&self) -> WorkerCids {
        WorkerCids {
            index: self.index,
            key: self.key.clone(),
        }
    }

    /// This worker's mailbox, taken once by its endpoint.
    pub fn take_inbox(&mut self) -> Option<mpsc::Receiver<Steered>> {
        self.inbox.take()
    }

    /// The worker another one should have: `Some` only for a short-header
    /// packet whose connection ID this listener issued on another worker.
    pub fn elsewhere(&self, datagram: &[u8]) -> Option<usize> {
        let owner = owner_of(&self.key, datagram)?;
        (usize::from(owner) != usize::from(self.index) && usize::from(owner) < self.mailboxes.len())
            .then_some(usize::from(owner))
    }

    /// Hands a datagram to worker `owner`; false when its mailbox is full
    /// or gone (the datagram is dropped).
    pub fn hand_to(&self, owner: usize, datagram: Steered) -> bool {
        self.mailboxes
            .get(owner)
            .is_some_and(|m| m.try_send(datagram).is_ok())
    }
}

/// The worker byte of a short-header packet's destination connection ID.
fn owner_of(key: &RandomState, datagram: &[u8]) -> Option<u8> {
    let first = *datagram.first()?;
    // Long headers (handshakes) carry the client's own choice of ID at
    // first; only short-header packets name an ID this server issued.
    if first & 0x80 != 0 {
        return None;
    }
    let cid = datagram.get(1..1 + CID_LEN)?;
    Some(cid[0] ^ mask(key, &cid[1..]))
}

/// The keyed byte that hides the worker index.
fn mask(key: &RandomState, random: &[u8]) -> u8 {
    key.hash_one(random) as u8
}

/// Connection IDs that carry their worker (see the module's text).
#[derive(Clone)]
pub struct WorkerCids {
    index: u8,
    key: Arc<RandomState>,
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0u8; CID_LEN];
        if aws_lc_rs::rand::fill(&mut bytes[1..]).is_err() {
            // The system's generator failed: the time's nanoseconds still
            // differ from ID to ID, and the ID stays valid.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            bytes[1..].copy_from_slice(&nanos.to_le_bytes()[..CID_LEN - 1]);
        }
        bytes[0] = self.index ^ mask(&self.key, &bytes[1..]);
        ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short_packet(cid: &ConnectionId) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(cid);
        p.extend_from_slice(&[0u8; 24]);
        p
    }

    #[test]
    fn an_id_names_the_worker_that_issued_it_to_every_other_worker() {
        let group = Steering::group(4);
        for (i, issuer) in group.iter().enumerate() {
            let mut gen = issuer.cid_generator();
            for _ in 0..50 {
                let cid = gen.generate_cid();
                assert_eq!(cid.len(), CID_LEN);
                let packet = short_packet(&cid);
                for (j, reader) in group.iter().enumerate() {
                    let want = (i != j).then_some(i);
                    assert_eq!(reader.elsewhere(&packet), want, "issuer {i}, reader {j}");
                }
            }
        }
    }

    #[test]
    fn the_worker_byte_is_not_the_index_in_clear() {
        let group = Steering::group(2);
        let mut gen = group[0].cid_generator();
        let firsts: std::collections::HashSet<u8> =
            (0..200).map(|_| gen.generate_cid()[0]).collect();
        assert!(firsts.len() > 50, "{firsts:?}");
    }

    #[test]
    fn long_headers_short_packets_and_other_listeners_ids_stay_where_they_land() {
        let group = Steering::group(2);
        let cid = group[1].cid_generator().generate_cid();
        let mut long = short_packet(&cid);
        long[0] = 0xc0;
        assert_eq!(group[0].elsewhere(&long), None);
        assert_eq!(group[0].elsewhere(&[0x40, 1, 2]), None);
        assert_eq!(group[0].elsewhere(&[]), None);
        // Another listener's key reads another worker, or none, but never
        // panics; with one worker nothing is ever elsewhere.
        let alone = Steering::group(1);
        assert_eq!(alone[0].elsewhere(&short_packet(&cid)), None);
    }

    #[test]
    fn a_full_mailbox_drops_rather_than_grows() {
        let mut group = Steering::group(2);
        let _inbox = group[1].take_inbox();
        let datagram = || Steered {
            from: "127.0.0.1:9".parse().unwrap(),
            to: None,
            ecn: None,
            data: vec![0x40; 40],
        };
        let taken = (0..MAILBOX + 10)
            .filter(|_| group[0].hand_to(1, datagram()))
            .count();
        assert_eq!(taken, MAILBOX);
    }
}
