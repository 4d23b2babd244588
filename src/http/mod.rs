//! The protocol-neutral request model every handler is written against.
//!
//! A driver (HTTP/1 today, HTTP/2 next) parses requests off the wire and hands
//! each one to its handler as a [`Session`]: a view of the request head, a
//! reader for the request body, and a writer that takes a [`ResponseHead`] and a
//! [`Body`]. The driver alone turns those into bytes: framing, `HEAD`,
//! keep-alive, `100 Continue`, deadlines, the access-log line and the metrics.
//! So a handler never sees HTTP/1 bytes, and a new handler (a redirect, a cache)
//! or a response filter (compression) touches no driver.

pub mod client_address;
pub mod content_coding;
pub mod date;
pub(crate) mod field_coding;
pub(crate) mod field_section;
pub(crate) mod huffman;
pub mod priority;
pub mod request;
pub mod request_fields;
pub mod request_id;
pub mod request_trace;
pub mod response;
pub mod session;
pub mod session_layer;
pub mod status;
pub mod trace_context;

pub use request::{RequestView, TlsFacts};
pub use request_id::RequestId;
pub use request_trace::RequestTrace;
pub use response::{
    Body, BodyPart, BodyStream, FieldBlock, FileRegion, OwnedField, ResponseHead, Tunnel, TunnelIo,
};
pub use session::{poll_body_once, BodyReadError, RequestRecord, Served, Session, SessionExt};
