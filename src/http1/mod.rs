//! Sans-IO HTTP/1.1 codec: pure functions and state machines over byte buffers.
//!
//! Nothing here touches a socket, so the same code serves the downstream
//! connection driver, the upstream side of the proxy and the load generator,
//! and every rule is unit-tested by feeding raw bytes.
//!
//! - [`parse`]: request heads, strict RFC 9112 checks; [`framing`] decides
//!   their body framing, [`request_error`] says why one is refused, [`span`]
//!   holds the offsets both head parsers store and the header lookups they share.
//! - [`field_name`]: the field names framing and relaying treat specially.
//! - [`body`]: body framing decoder (Content-Length, chunked, read-until-close).
//! - [`mod@write`]: response heads, error responses, chunk encoding, cached `Date`.
//! - [`response`]: response heads as seen by a client (proxy upstream, load generator).
//! - [`client`]: the client side built on these (request encoder, response-head
//!   reader) and the one IO piece of this module, the client transport.

mod authority;
pub mod body;
pub mod client;
pub mod field_name;
pub mod framing;
pub(crate) mod grammar;
pub mod parse;
pub mod request_error;
pub mod response;
pub mod span;
#[cfg(test)]
mod test_support;
pub mod write;

pub use body::{BodyDecoder, BodyError, Decoded};
pub(crate) use grammar::parse_content_length;
pub use parse::{
    parse_request, BodyKind, HeaderLines, HeaderSpan, Limits, Method, Parsed, RequestError,
    RequestHead, Span, TargetForm, Version,
};
pub use response::{parse_response, ParsedResponseHead, ResponseBody, ResponseError};
pub use write::{
    format_http_date, reason_phrase, write_chunk, write_error, write_head, BodyFraming,
    ConnectionHeader, DateCache, CONTINUE, LAST_CHUNK,
};
