//! The QUIC endpoint of one TLS listener on one worker: the receive loop
//! hands each datagram to `quinn_proto`, accepts new connections (or
//! refuses them once the worker stops taking connections, or sends a Retry
//! first under a flood of handshakes), answers stateless packets, and
//! routes each connection's events to the task that runs it. Everything is
//! on the worker's thread: the endpoint and the connection table sit in
//! cells, borrowed only between awaits.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use quinn_proto::{ConnectionEvent, ConnectionHandle, DatagramEvent};
use tokio::sync::Notify;
use tracing::debug;

use super::config::QuicListenerConfig;
use super::retry::HandshakeRate;
use super::socket::{QuicSocket, Received, RecvBuffers};
use super::steer::{Route, Steered, Steering};

/// What a connection's task and the receive loop share: events the loop
/// routed to the connection, and the wake-up for them.
#[derive(Default)]
pub struct ConnLink {
    pub(super) events: RefCell<VecDeque<ConnectionEvent>>,
    /// Wakes the connection's task.
    pub notify: Notify,
}

/// One listener's endpoint on one worker.
pub struct WorkerEndpoint {
    pub(super) socket: QuicSocket,
    pub(super) endpoint: RefCell<quinn_proto::Endpoint>,
    pub(super) links: RefCell<HashMap<ConnectionHandle, Rc<ConnLink>>>,
    /// Set once new connections are refused (the worker drains).
    refusing: Cell<bool>,
    /// Which worker owns a packet, and the way to it.
    steering: RefCell<Steering>,
    /// Set once a new process reads the socket: only what it relays (and
    /// the other workers hand over) comes in.
    stop_reading: Cell<bool>,
    /// Wakes the receive loop to see `stop_reading`.
    wake: Notify,
}

/// A connection just accepted: its state machine and its route on the
/// endpoint.
pub struct Accepted {
    /// The connection's state machine.
    pub conn: quinn_proto::Connection,
    /// Where its events come from and its packets go.
    pub route: ConnRoute,
}

/// A connection's place on its endpoint.
pub struct ConnRoute {
    pub(super) endpoint: Rc<WorkerEndpoint>,
    pub(super) handle: ConnectionHandle,
    pub(super) link: Rc<ConnLink>,
}

impl WorkerEndpoint {
    /// An endpoint on `socket` with no server config yet: each accept gives
    /// the current one. Its connection IDs name this worker (`steering`).
    pub fn new(socket: QuicSocket, steering: Steering) -> Rc<WorkerEndpoint> {
        let mut config = quinn_proto::EndpointConfig::default();
        let ids = steering.cid_generator();
        config.cid_generator(move || Box::new(ids.clone()));
        Rc::new(WorkerEndpoint {
            socket,
            endpoint: RefCell::new(quinn_proto::Endpoint::new(
                Arc::new(config),
                None,
                true,
                None,
            )),
            links: RefCell::new(HashMap::new()),
            refusing: Cell::new(false),
            steering: RefCell::new(steering),
            stop_reading: Cell::new(false),
            wake: Notify::new(),
        })
    }

    /// The socket's bound address.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.socket.local_addr()
    }

    /// New connections are refused from now on; open ones go on. When a
    /// new process took the socket over, this one stops reading it and
    /// takes its connections' packets from what the new process relays.
    pub fn refuse_new(&self) {
        self.refusing.set(true);
        if self.steering.borrow().handed_over() {
            self.stop_reading.set(true);
            self.wake.notify_one();
        }
    }

    /// Connections open on this endpoint.
    pub fn open_connections(&self) -> usize {
        self.links.borrow().len()
    }

    /// Reads datagrams for ever, from the socket and from the other
    /// workers (packets the kernel gave them for this worker's
    /// connections), handing each new connection to `accept` with the
    /// config `config` gives for it (`None`: refused). A client that comes
    /// while `admit` says no (the worker is at its connection limit) is
    /// refused with CONNECTION_REFUSED; one that comes while handshakes
    /// arrive faster than the config's `retry_above` is sent a Retry (and
    /// `retried` called) unless its address is validated. `steered` counts
    /// each datagram handed to another worker.
    pub async fn run(
        self: Rc<Self>,
        config: &dyn Fn() -> Option<Arc<QuicListenerConfig>>,
        admit: &dyn Fn() -> bool,
        steered: &dyn Fn(),
        retried: &dyn Fn(),
        accept: &mut dyn FnMut(Accepted),
    ) {
        let mut bufs = RecvBuffers::default();
        let mut inbox = self.steering.borrow_mut().take_inbox();
        let mut installed: Option<Arc<QuicListenerConfig>> = None;
        let mut step = Step {
            out: Vec::new(),
            fresh: Vec::new(),
            config,
            admit,
            retried,
            rate: HandshakeRate::new(std::time::Instant::now()),
        };
        loop {
            // The current config decides whether new connections are taken
            // at all, and how (a reload replaces it).
            let current = config();
            let changed = match (&installed, &current) {
                (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
                (None, None) => false,
                _ => true,
            };
            if changed {
                self.endpoint
                    .borrow_mut()
                    .set_server_config(current.as_ref().map(|c| c.server.clone()));
                installed = current;
            }
            let from_peer = async {
                match inbox.as_mut() {
                    Some(inbox) => inbox.recv().await,
                    None => std::future::pending().await,
                }
            };
            let got = {
                let mut each = |r: Received<'_>| {
                    let steering = self.steering.borrow();
                    let copy = || Steered {
                        from: r.from,
                        to: r.to,
                        ecn: r.ecn,
                        data: r.data.to_vec(),
                    };
                    match steering.route(r.data) {
                        Route::Here => {
                            drop(steering);
                            self.handle(&mut step, r.from, r.to, r.ecn, BytesMut::from(r.data));
                        }
                        Route::Worker(owner) => {
                            if steering.hand_to(owner, copy()) {
                                steered();
                            }
                        }
                        Route::Predecessor => {
                            steering.relay(&copy());
                        }
                    }
                };
                let read_socket = !self.stop_reading.get();
                tokio::select! {
                    got = self.socket.recv_batch(&mut bufs, &mut each), if read_socket => Read::Socket(got),
                    d = from_peer => Read::Peer(d),
                    _ = self.wake.notified(), if read_socket => Read::Socket(Ok(())),
                }
            };
            match got {
                Read::Socket(Ok(())) => {}
                Read::Socket(Err(e)) => {
                    debug!(error = %e, "QUIC socket read failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Read::Peer(Some(d)) => {
                    self.handle(&mut step, d.from, d.to, d.ecn, BytesMut::from(&d.data[..]));
                }
                Read::Peer(None) => inbox = None,
            }
            for a in step.fresh.drain(..) {
                accept(a);
            }
        }
    }

    /// Hands one datagram to the endpoint and acts on what it says.
    fn handle(
        self: &Rc<Self>,
        step: &mut Step<'_>,
        from: std::net::SocketAddr,
        to: Option<std::net::IpAddr>,
        ecn: Option<quinn_udp::EcnCodepoint>,
        data: BytesMut,
    ) {
        let now = std::time::Instant::now();
        let out = &mut step.out;
        // Each packet the endpoint writes starts the buffer: a transmit
        // names its bytes from the start, and an older packet left in front
        // would go out glued to it (a Retry after a Retry, which the client
        // must discard).
        out.clear();
        let ecn = ecn.and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
        let event = self
            .endpoint
            .borrow_mut()
            .handle(now, from, to, ecn, data, out);
        match event {
            None => {}
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some(link) = self.links.borrow().get(&ch) {
                    link.events.borrow_mut().push_back(ev);
                    link.notify.notify_one();
                }
            }
            Some(DatagramEvent::Response(t)) => {
                let _ = self.socket.try_send_quinn(&t, out);
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                let listener = (!self.refusing.get() && (step.admit)())
                    .then(step.config)
                    .flatten();
                let Some(listener) = listener else {
                    out.clear();
                    let t = self.endpoint.borrow_mut().refuse(incoming, out);
                    let _ = self.socket.try_send_quinn(&t, out);
                    return;
                };
                if !incoming.remote_address_validated()
                    && step.rate.demands_retry(listener.retry_above, now)
                {
                    out.clear();
                    let sent = self.endpoint.borrow_mut().retry(incoming, out);
                    match sent {
                        Ok(t) => {
                            let _ = self.socket.try_send_quinn(&t, out);
                            (step.retried)();
                        }
                        // Unvalidated means a Retry may still be sent; were
                        // it not, the packet is dropped.
                        Err(e) => self.endpoint.borrow_mut().ignore(e.into_incoming()),
                    }
                    return;
                }
                out.clear();
                let accepted = self.endpoint.borrow_mut().accept(
                    incoming,
                    now,
                    out,
                    Some(listener.server.clone()),
                );
                match accepted {
                    Ok((handle, conn)) => {
                        let link = Rc::new(ConnLink::default());
                        self.links.borrow_mut().insert(handle, link.clone());
                        step.fresh.push(Accepted {
                            conn,
                            route: ConnRoute {
                                endpoint: self.clone(),
                                handle,
                                link,
                            },
                        });
                    }
                    Err(e) => {
                        debug!(peer = %from, error = %e.cause, "QUIC connection not accepted");
                        if let Some(t) = e.response {
                            let _ = self.socket.try_send_quinn(&t, out);
                        }
                    }
                }
            }
        }
    }
}

/// Where a turn of the receive loop got its datagrams.
enum Read {
    Socket(std::io::Result<()>),
    Peer(Option<Steered>),
}

/// What the receive loop keeps between datagrams.
struct Step<'a> {
    /// Where the endpoint writes a packet it answers with.
    out: Vec<u8>,
    /// Connections accepted during a read, started after it.
    fresh: Vec<Accepted>,
    config: &'a dyn Fn() -> Option<Arc<QuicListenerConfig>>,
    admit: &'a dyn Fn() -> bool,
    retried: &'a dyn Fn(),
    /// New handshakes of late, for `retry_above`.
    rate: HandshakeRate,
}
