//! Interim (1xx) answers from an upstream, relayed to the client as
//! they come (RFC 9110 §15.2: a proxy forwards 1xx answers it did not ask
//! for): `103 Early Hints` lets the client fetch what its `Link` fields name
//! while the upstream still works on the answer. The session decides where a
//! head can go (not to HTTP/1.0 clients, not after the final head, a `100
//! Continue` only to a client that asked and was not told yet); the route's
//! header rules take out the fields it removes. A 101 is a final answer here
//! (the upgrade path), and no interim head reaches a cache: it is given to the
//! session only, never to the response tap.
//!
//! An upstream may send only [`MAX_INTERIM`] of them per request: an endless
//! run of 1xx heads is a bad response (502), as it would otherwise hold the
//! request forever.

use super::fields::{ConnectionOptions, Field};
use crate::http::status::is_interim;
use crate::http::Session;
use crate::http1::parse::{Limits, Method, Parsed};
use crate::http1::response::{parse_response, ParsedResponseHead, ResponseError};
use crate::http1::HeaderLines;

/// Interim heads one request takes from its upstream; one more is a bad
/// response. Real servers send one or two (a `100`, a `103`).
pub const MAX_INTERIM: u32 = 8;

/// Why the heads at the start of an upstream's bytes are a bad response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InterimError {
    /// A head that does not parse.
    #[error(transparent)]
    Malformed(#[from] ResponseError),
    /// More than [`MAX_INTERIM`] interim heads.
    #[error("more than {MAX_INTERIM} interim responses")]
    TooMany,
}

/// Relays the complete interim heads at the start of `buf` through `session`
/// and drops them from `buf`; `relayed` counts those that came, across calls
/// (a head the session or the rules leave out counts too). True when
/// the final head is complete there (then `head` describes it); false when
/// more bytes are needed.
pub fn relay_interim(
    session: &mut dyn Session<'_>,
    buf: &mut Vec<u8>,
    limits: &Limits,
    method: Method,
    head: &mut ParsedResponseHead,
    relayed: &mut u32,
) -> Result<bool, InterimError> {
    loop {
        if buf.is_empty() {
            return Ok(false);
        }
        match parse_response(buf, limits, method, head)? {
            Parsed::Partial => return Ok(false),
            Parsed::Complete if is_interim(head.status) => {
                if *relayed >= MAX_INTERIM {
                    return Err(InterimError::TooMany);
                }
                *relayed += 1;
                send_head(session, head, buf);
                buf.drain(..head.head_len.min(buf.len()));
            }
            Parsed::Complete => return Ok(true),
        }
    }
}

/// Gives one interim head to the session: its end-to-end fields, without the
/// hop-by-hop ones, those its `Connection` names, and the `Date`, `Server`
/// and framing fields a final head gets from the proxy itself. Early hints
/// left without a field are not sent.
fn send_head(session: &mut dyn Session<'_>, head: &ParsedResponseHead, buf: &[u8]) {
    let options = ConnectionOptions::gather(|| head.headers(buf));
    let fields: Vec<(&str, &[u8])> = head
        .headers(buf)
        .filter(|&(name, _)| match Field::of(name) {
            Field::Date | Field::Server => false,
            field if field.is_hop_by_hop() => false,
            _ => !options.names(name),
        })
        .filter_map(|(name, value)| Some((std::str::from_utf8(name).ok()?, value)))
        .collect();
    if head.status == 103 && fields.is_empty() {
        return;
    }
    session.send_interim(head.status, &fields);
}

/// Gives one interim head from an HTTP/2 upstream to the session, with the
/// same fields left out as from an HTTP/1 one (HTTP/2 carries no
/// connection-specific fields already).
pub(super) fn send_h2_head(
    session: &mut dyn Session<'_>,
    head: &crate::http2::client::ResponseHead,
) {
    let status = head.status();
    let fields: Vec<(&str, &[u8])> = head
        .fields()
        .filter(|&(name, _)| {
            let field = Field::of(name);
            !matches!(field, Field::Date | Field::Server) && !field.is_hop_by_hop()
        })
        .filter_map(|(name, value)| Some((std::str::from_utf8(name).ok()?, value)))
        .collect();
    if status == 103 && fields.is_empty() {
        return;
    }
    session.send_interim(status, &fields);
}
