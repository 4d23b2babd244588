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
use super::socket::{QuicSocket, RecvBuffers};

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
    /// the current one.
    pub fn new(socket: QuicSocket) -> Rc<WorkerEndpoint> {
        let config = Arc::new(quinn_proto::EndpointConfig::default());
        Rc::new(WorkerEndpoint {
            socket,
            endpoint: RefCell::new(quinn_proto::Endpoint::new(config, None, true, None)),
            links: RefCell::new(HashMap::new()),
            refusing: Cell::new(false),
        })
    }

    /// The socket's bound address.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.socket.local_addr()
    }

    /// New connections are refused from now on; open ones go on.
    pub fn refuse_new(&self) {
        self.refusing.set(true);
    }

    /// Connections open on this endpoint.
    pub fn open_connections(&self) -> usize {
        self.links.borrow().len()
    }

    /// Reads datagrams for ever, handing each new connection to `accept`
    /// with the config `config` gives for it (`None`: refused). A client
    /// that comes while `admit` says no (the worker is at its connection
    /// limit) is refused with CONNECTION_REFUSED; one that comes while
    /// handshakes arrive faster than the config's `retry_above` is sent a
    /// Retry (and `retried` called) unless its address is validated.
    pub async fn run(
        self: Rc<Self>,
        config: &dyn Fn() -> Option<Arc<QuicListenerConfig>>,
        admit: &dyn Fn() -> bool,
        retried: &dyn Fn(),
        accept: &mut dyn FnMut(Accepted),
    ) {
        let mut bufs = RecvBuffers::default();
        let mut out = Vec::new();
        let mut fresh: Vec<Accepted> = Vec::new();
        let mut installed: Option<Arc<QuicListenerConfig>> = None;
        let mut rate = HandshakeRate::new(std::time::Instant::now());
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
            let got = self
                .socket
                .recv_batch(&mut bufs, &mut |r| {
                    let now = std::time::Instant::now();
                    let event = self.endpoint.borrow_mut().handle(
                        now,
                        r.from,
                        r.to,
                        r.ecn
                            .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8)),
                        BytesMut::from(r.data),
                        &mut out,
                    );
                    match event {
                        None => {}
                        Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                            if let Some(link) = self.links.borrow().get(&ch) {
                                link.events.borrow_mut().push_back(ev);
                                link.notify.notify_one();
                            }
                        }
                        Some(DatagramEvent::Response(t)) => {
                            let _ = self.socket.try_send_quinn(&t, &out);
                        }
                        Some(DatagramEvent::NewConnection(incoming)) => {
                            let server_config =
                                (!self.refusing.get() && admit()).then(config).flatten();
                            let Some(listener) = server_config else {
                                let t = self.endpoint.borrow_mut().refuse(incoming, &mut out);
                                let _ = self.socket.try_send_quinn(&t, &out);
                                return;
                            };
                            if !incoming.remote_address_validated()
                                && rate.demands_retry(listener.retry_above, now)
                            {
                                let sent = self.endpoint.borrow_mut().retry(incoming, &mut out);
                                match sent {
                                    Ok(t) => {
                                        let _ = self.socket.try_send_quinn(&t, &out);
                                        retried();
                                    }
                                    // Unvalidated means a Retry may still be
                                    // sent; were it not, the packet is dropped.
                                    Err(e) => self.endpoint.borrow_mut().ignore(e.into_incoming()),
                                }
                                return;
                            }
                            let accepted = self.endpoint.borrow_mut().accept(
                                incoming,
                                now,
                                &mut out,
                                Some(listener.server.clone()),
                            );
                            match accepted {
                                Ok((handle, conn)) => {
                                    let link = Rc::new(ConnLink::default());
                                    self.links.borrow_mut().insert(handle, link.clone());
                                    fresh.push(Accepted {
                                        conn,
                                        route: ConnRoute {
                                            endpoint: self.clone(),
                                            handle,
                                            link,
                                        },
                                    });
                                }
                                Err(e) => {
                                    debug!(peer = %r.from, error = %e.cause, "QUIC connection not accepted");
                                    if let Some(t) = e.response {
                                        let _ = self.socket.try_send_quinn(&t, &out);
                                    }
                                }
                            }
                        }
                    }
                })
                .await;
            if let Err(e) = got {
                debug!(error = %e, "QUIC socket read failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            for a in fresh.drain(..) {
                accept(a);
            }
        }
    }
}
