//! The endpoint side of one QUIC connection, as its task sees it: events
//! the receive loop routed to it go into the state machine, the endpoint
//! events it makes go back to the endpoint, and its packets go out on the
//! worker's socket (a batch per send where GSO allows, held and retried
//! when the socket's buffer is full).

use std::rc::Rc;
use std::time::Instant;

use quinn_proto::{Connection, ConnectionHandle};

use super::endpoint::{ConnLink, ConnRoute, WorkerEndpoint};

/// Most datagrams one GSO send carries.
const MAX_GSO_BATCH: usize = 10;

/// One connection's handle on its endpoint; dropping it forgets the
/// connection's route.
pub struct QuicConnIo {
    endpoint: Rc<WorkerEndpoint>,
    handle: ConnectionHandle,
    link: Rc<ConnLink>,
    buf: Vec<u8>,
    /// A packet the socket would not take yet.
    held: Option<quinn_proto::Transmit>,
}

/// Whether everything the connection had to send went out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// All sent.
    Done,
    /// The socket's buffer is full: wait for [`QuicConnIo::writable`].
    Blocked,
}

impl QuicConnIo {
    /// The connection's side of its route.
    pub fn new(route: ConnRoute) -> QuicConnIo {
        QuicConnIo {
            endpoint: route.endpoint,
            handle: route.handle,
            link: route.link,
            buf: Vec::new(),
            held: None,
        }
    }

    /// The wake-up of this connection's task: packets arrived for it.
    pub fn link(&self) -> &Rc<ConnLink> {
        &self.link
    }

    /// Hands the events routed to this connection to its state machine.
    pub fn absorb(&self, conn: &mut Connection) {
        while let Some(ev) = self.link.events.borrow_mut().pop_front() {
            conn.handle_event(ev);
        }
    }

    /// Passes the connection's endpoint events on and sends its packets.
    pub fn flush(&mut self, conn: &mut Connection, now: Instant) -> Flushed {
        while let Some(ev) = conn.poll_endpoint_events() {
            let back = self
                .endpoint
                .endpoint
                .borrow_mut()
                .handle_event(self.handle, ev);
            if let Some(back) = back {
                conn.handle_event(back);
            }
        }
        let socket = &self.endpoint.socket;
        let batch = socket.max_gso_segments().clamp(1, MAX_GSO_BATCH);
        loop {
            let t = match self.held.take() {
                Some(t) => t,
                None => {
                    self.buf.clear();
                    match conn.poll_transmit(now, batch, &mut self.buf) {
                        Some(t) => t,
                        None => return Flushed::Done,
                    }
                }
            };
            match socket.try_send_quinn(&t, &self.buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.held = Some(t);
                    return Flushed::Blocked;
                }
                // Other errors lose the packet; loss recovery sends it again.
                _ => {}
            }
        }
    }

    /// Waits until the socket takes packets again.
    pub async fn writable(&self) {
        let _ = self.endpoint.socket.writable().await;
    }
}

impl Drop for QuicConnIo {
    fn drop(&mut self) {
        self.endpoint.links.borrow_mut().remove(&self.handle);
    }
}
