//! QUIC for HTTP/3: each worker binds its own UDP socket per TLS listener
//! (SO_REUSEPORT, so the kernel spreads clients across workers) and drives
//! its own `quinn_proto` endpoint on its own runtime. Nothing here knows
//! HTTP, and only a packet the kernel gave the wrong worker crosses between
//! workers: the HTTP/3 driver runs each connection this module hands it.
//!
//! - `socket`: the UDP socket and its batched, GSO/GRO and ECN aware IO
//!   through `quinn-udp`.
//! - `endpoint`: the endpoint of one listener on one worker: packets in,
//!   new connections out, each connection's events routed to it.
//! - `connection`: what a connection's task needs of the endpoint (events
//!   in, packets and endpoint events out, the timer).
//! - `config`: the transport and TLS settings of a listener's endpoint.
//! - `steer`: connection IDs that name their worker, and the mailboxes
//!   that bring a packet the kernel gave another worker to its owner.
//! - `handover`: after a binary upgrade, the replaced process's packets
//!   relayed back to it by the new one.
//! - `retry`: when new clients must prove their address with a Retry.

pub mod config;
pub mod connection;
pub mod endpoint;
pub mod handover;
pub mod retry;
pub mod socket;
pub mod steer;
