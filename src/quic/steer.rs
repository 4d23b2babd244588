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
//!
//! Two more bytes of the same hash mark an ID as this process's: after a
//! binary upgrade the new process reads every packet from the sockets it
//! took over, and relays those whose IDs the replaced process issued back
//! to it (the `handover` module), so that process's connections finish.

use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quinn_proto::{ConnectionId, ConnectionIdGenerator};
use tokio::sync::mpsc;

use crate::listener_key::ListenerKey;

/// Bytes in a connection ID this server issues: the worker's byte, two
/// check bytes and eight random ones.
pub const CID_LEN: usize = 11;

/// Where the random bytes of an ID begin.
const RANDOM_AT: usize = 3;

/// Datagrams a worker's mailbox holds before more are dropped.
const MAILBOX: usize = 256;

/// A datagram read by one worker (or relayed by a new process) for a
/// connection another worker owns.
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

/// The way back to the process this one replaced (see
/// the `handover` module).
pub trait Predecessor: Send + Sync {
    /// False once that process is gone.
    fn alive(&self) -> bool;
    /// Relays one datagram of listener `key`; false when it could not go.
    fn send(&self, key: ListenerKey, datagram: &Steered) -> bool;
}

/// Where a datagram goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// To this worker's endpoint.
    Here,
    /// To the worker with this index.
    Worker(usize),
    /// To the process this one replaced.
    Predecessor,
}

/// What every worker of one listener shares: the key, the mailboxes, and
/// whether the sockets went to a new process.
#[derive(Clone)]
pub struct SteerGroup {
    listener: ListenerKey,
    key: Arc<RandomState>,
    mailboxes: Arc<[mpsc::Sender<Steered>]>,
    handed_over: Arc<AtomicBool>,
}

impl SteerGroup {
    /// Hands a datagram to the worker whose ID it carries; false when it
    /// names none of this listener's workers or the mailbox is full.
    pub fn deliver(&self, datagram: Steered) -> bool {
        match owner_of(&self.key, &datagram.data) {
            Some(Owner::Ours(w)) if usize::from(w) < self.mailboxes.len() => {
                self.mailboxes[usize::from(w)].try_send(datagram).is_ok()
            }
            _ => false,
        }
    }

    /// From now on a new process reads the sockets: this process's
    /// endpoints stop reading them and take only what it relays.
    pub fn hand_over(&self) {
        self.handed_over.store(true, Ordering::Release);
    }
}

/// One listener's steering, as one worker sees it.
pub struct Steering {
    index: u8,
    group: SteerGroup,
    inbox: Option<mpsc::Receiver<Steered>>,
    predecessor: Option<Arc<dyn Predecessor>>,
}

impl Steering {
    /// The steering of a listener with `workers` sockets, one per worker
    /// in order, relaying IDs it did not issue to `predecessor` when this
    /// process replaced one. More than 256 workers share indexes modulo
    /// 256, and a worker steers only to indexes it knows.
    pub fn group(
        listener: ListenerKey,
        workers: usize,
        predecessor: Option<Arc<dyn Predecessor>>,
    ) -> (SteerGroup, Vec<Steering>) {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..workers.max(1)).map(|_| mpsc::channel(MAILBOX)).unzip();
        let group = SteerGroup {
            listener,
            key: Arc::new(RandomState::new()),
            mailboxes: senders.into(),
            handed_over: Arc::default(),
        };
        let each = receivers
            .into_iter()
            .enumerate()
            .map(|(i, inbox)| Steering {
                index: i as u8,
                group: group.clone(),
                inbox: Some(inbox),
                predecessor: predecessor.clone(),
            })
            .collect();
        (group, each)
    }

    /// The connection ID generator for this worker's endpoint.
    pub fn cid_generator(&self) -> WorkerCids {
        WorkerCids {
            index: self.index,
            key: self.group.key.clone(),
        }
    }

    /// This worker's mailbox, taken once by its endpoint.
    pub fn take_inbox(&mut self) -> Option<mpsc::Receiver<Steered>> {
        self.inbox.take()
    }

    /// Whether a new process took the sockets over.
    pub fn handed_over(&self) -> bool {
        self.group.handed_over.load(Ordering::Acquire)
    }

    /// Where a datagram this worker read goes: elsewhere only for a
    /// short-header packet whose connection ID another worker issued, or
    /// the replaced process (while it runs).
    pub fn route(&self, datagram: &[u8]) -> Route {
        // One worker and no replaced process: nothing to look up.
        if self.group.mailboxes.len() <= 1 && self.predecessor.is_none() {
            return Route::Here;
        }
        match owner_of(&self.group.key, datagram) {
            Some(Owner::Ours(w))
                if usize::from(w) != usize::from(self.index)
                    && usize::from(w) < self.group.mailboxes.len() =>
            {
                Route::Worker(usize::from(w))
            }
            Some(Owner::Foreign) if self.predecessor.as_ref().is_some_and(|p| p.alive()) => {
                Route::Predecessor
            }
            _ => Route::Here,
        }
    }

    /// Hands a datagram to worker `owner`; false when its mailbox is full
    /// or gone (the datagram is dropped).
    pub fn hand_to(&self, owner: usize, datagram: Steered) -> bool {
        self.group
            .mailboxes
            .get(owner)
            .is_some_and(|m| m.try_send(datagram).is_ok())
    }

    /// Relays a datagram to the replaced process; false when it could not
    /// be sent.
    pub fn relay(&self, datagram: &Steered) -> bool {
        self.predecessor
            .as_ref()
            .is_some_and(|p| p.send(self.group.listener, datagram))
    }
}

/// Whose a short-header packet's connection ID is.
enum Owner {
    /// Issued by this process, by the worker with this index.
    Ours(u8),
    /// Not issued by this process.
    Foreign,
}

/// The owner of a short-header packet's destination connection ID; `None`
/// for a long header (handshakes carry the client's own choice of ID at
/// first) or a datagram too short to hold one.
fn owner_of(key: &RandomState, datagram: &[u8]) -> Option<Owner> {
    let first = *datagram.first()?;
    if first & 0x80 != 0 {
        return None;
    }
    let cid = datagram.get(1..1 + CID_LEN)?;
    let [h0, h1, h2, ..] = mask(key, &cid[RANDOM_AT..]);
    if cid[1] != h1 || cid[2] != h2 {
        return Some(Owner::Foreign);
    }
    Some(Owner::Ours(cid[0] ^ h0))
}

/// The keyed bytes that hide the worker index and mark an ID as ours.
fn mask(key: &RandomState, random: &[u8]) -> [u8; 8] {
    key.hash_one(random).to_le_bytes()
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
        if aws_lc_rs::rand::fill(&mut bytes[RANDOM_AT..]).is_err() {
            // The system's generator failed: the time's nanoseconds still
            // differ from ID to ID, and the ID stays valid.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            bytes[RANDOM_AT..].copy_from_slice(&nanos.to_le_bytes()[..CID_LEN - RANDOM_AT]);
        }
        let [h0, h1, h2, ..] = mask(&self.key, &bytes[RANDOM_AT..]);
        bytes[..RANDOM_AT].copy_from_slice(&[self.index ^ h0, h1, h2]);
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

    fn key() -> ListenerKey {
        "127.0.0.1:443".parse().unwrap()
    }

    fn short_packet(cid: &ConnectionId) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(cid);
        p.extend_from_slice(&[0u8; 24]);
        p
    }

    fn datagram(data: Vec<u8>) -> Steered {
        Steered {
            from: "127.0.0.1:9".parse().unwrap(),
            to: None,
            ecn: None,
            data,
        }
    }

    #[test]
    fn an_id_names_the_worker_that_issued_it_to_every_other_worker() {
        let (_, group) = Steering::group(key(), 4, None);
        for (i, issuer) in group.iter().enumerate() {
            let mut gen = issuer.cid_generator();
            for _ in 0..50 {
                let cid = gen.generate_cid();
                assert_eq!(cid.len(), CID_LEN);
                let packet = short_packet(&cid);
                for (j, reader) in group.iter().enumerate() {
                    let want = if i == j {
                        Route::Here
                    } else {
                        Route::Worker(i)
                    };
                    assert_eq!(reader.route(&packet), want, "issuer {i}, reader {j}");
                }
            }
        }
    }

    #[test]
    fn the_worker_byte_is_not_the_index_in_clear() {
        let (_, group) = Steering::group(key(), 2, None);
        let mut gen = group[0].cid_generator();
        let firsts: std::collections::HashSet<u8> =
            (0..200).map(|_| gen.generate_cid()[0]).collect();
        assert!(firsts.len() > 50, "{firsts:?}");
    }

    #[test]
    fn long_headers_short_packets_and_another_process_s_ids_stay_here_without_a_predecessor() {
        let (_, group) = Steering::group(key(), 2, None);
        let cid = group[1].cid_generator().generate_cid();
        let mut long = short_packet(&cid);
        long[0] = 0xc0;
        assert_eq!(group[0].route(&long), Route::Here);
        assert_eq!(group[0].route(&[0x40, 1, 2]), Route::Here);
        assert_eq!(group[0].route(&[]), Route::Here);
        // Another listener's (or process's) key: foreign, and with no
        // process to relay to, answered here.
        let (_, other) = Steering::group(key(), 2, None);
        let mut foreign = 0;
        for _ in 0..100 {
            let cid = other[1].cid_generator().generate_cid();
            assert_eq!(group[0].route(&short_packet(&cid)), Route::Here);
            if matches!(
                owner_of(&group[0].group.key, &short_packet(&cid)),
                Some(Owner::Foreign)
            ) {
                foreign += 1;
            }
        }
        assert!(foreign >= 98, "{foreign} of 100 told apart");
    }

    #[test]
    fn a_group_delivers_a_relayed_datagram_to_the_worker_its_id_names() {
        let (shared, mut group) = Steering::group(key(), 3, None);
        let mut inbox = group[2].take_inbox().unwrap();
        let cid = group[2].cid_generator().generate_cid();
        assert!(shared.deliver(datagram(short_packet(&cid))));
        assert_eq!(inbox.try_recv().unwrap().data, short_packet(&cid));
        let (_, other) = Steering::group(key(), 3, None);
        let foreign = other[0].cid_generator().generate_cid();
        assert!(!shared.deliver(datagram(short_packet(&foreign))));
        assert!(!group[0].handed_over());
        shared.hand_over();
        assert!(group[0].handed_over());
    }

    #[test]
    fn a_full_mailbox_drops_rather_than_grows() {
        let (_, mut group) = Steering::group(key(), 2, None);
        let _inbox = group[1].take_inbox();
        let taken = (0..MAILBOX + 10)
            .filter(|_| group[0].hand_to(1, datagram(vec![0x40; 40])))
            .count();
        assert_eq!(taken, MAILBOX);
    }
}
