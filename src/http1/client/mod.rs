//! The client side of HTTP/1.1, written once for the three places Pier is a
//! client: the proxy's upstream side, the active health checks and `pier bench`.
//!
//! - [`request`]: the request-head encoder (request line and `Host` first, one
//!   framing field, the blank line).
//! - [`head`]: the response-head reader: interim 1xx heads skipped, the final
//!   head's body framing decided.
//! - [`transport`]: the one IO piece, a plain or TLS connection with the reads
//!   and writes every client does (one system call each on plain TCP).

pub mod head;
pub mod request;
pub mod transport;

pub use head::{parse_final_head, FinalHead};
pub use transport::{connect_stream, ClientStream, ConnectFailure, ConnectStep};
