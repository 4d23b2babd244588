//! Downstream drivers: the code that owns a client connection's bytes. Each
//! driver turns requests into [`crate::http::Session`]s for the handlers and
//! their answers back into bytes; handlers never import a driver. Above them,
//! each worker thread's life ([`run`]), its accept loops and the one dispatch
//! after accept (PROXY header, TLS, ALPN).

mod accept;
pub(crate) mod body_send;
mod chunk_buffers;
mod dispatch;
pub mod download_pacing;
mod file_region;
pub mod h1;
pub mod h2;
pub mod h3;
pub(crate) mod prior_knowledge;
mod pseudo_head;
mod response_fields;
pub mod run;
pub(crate) mod stream_session;
pub(crate) mod stream_tunnel;
#[cfg(test)]
mod test_harness;
pub mod transport;
