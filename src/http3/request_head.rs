//! A request's field section decoded by QPACK and checked as RFC 9114
//! §4.1.2 and §4.3.1 ask, into the head HTTP/2 fills the same way
//! ([`crate::http::request_fields::RequestHead`]: pseudo fields, names,
//! connection-specific fields, `content-length`). What HTTP/3 adds is the
//! rule that `:authority` or `Host` names the target for `http` and `https`
//! and that the two agree. A malformed request is H3_MESSAGE_ERROR on its
//! stream; the connection goes on.

use super::qpack::{Decoder, SectionOutcome};
use super::{Error, ErrorCode};
use crate::http::request_fields::{HeadKind, RequestHead};

/// What became of a request's (or its trailers') field section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadOutcome {
    /// The head is decoded and valid.
    Ready,
    /// The section waits on QPACK inserts: decode it again when the
    /// decoder hands it back.
    Blocked,
    /// The section passed our SETTINGS_MAX_FIELD_SECTION_SIZE: answer 431.
    TooLarge,
}

/// A new head for a connection's requests: `max_section_size` is our
/// SETTINGS_MAX_FIELD_SECTION_SIZE, `connect_protocol` whether we announced
/// SETTINGS_ENABLE_CONNECT_PROTOCOL.
pub fn new_request_head(
    max_section_size: u64,
    max_fields: usize,
    connect_protocol: bool,
) -> RequestHead {
    let limit = u32::try_from(max_section_size).unwrap_or(u32::MAX);
    RequestHead::new(limit, max_fields, connect_protocol)
}

/// Decodes the request head of `stream_id` from `section` into `head`.
/// `end_stream`: the stream ended with the HEADERS frame (no content).
pub fn decode_request_head(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
    end_stream: bool,
) -> Result<HeadOutcome, Error> {
    decode_into(
        decoder,
        stream_id,
        section,
        head,
        HeadKind::Request,
        end_stream,
    )
}

/// Decodes a request's trailers on `stream_id` into `head` (regular fields
/// only).
pub fn decode_trailers(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
) -> Result<HeadOutcome, Error> {
    decode_into(decoder, stream_id, section, head, HeadKind::Trailers, true)
}

fn decode_into(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
    kind: HeadKind,
    end_stream: bool,
) -> Result<HeadOutcome, Error> {
    head.begin(kind);
    let outcome = decoder.decode_section(stream_id, section, &mut |name, value, _| {
        head.push(name, value)
    })?;
    match outcome {
        SectionOutcome::Blocked => return Ok(HeadOutcome::Blocked),
        SectionOutcome::TooLarge => return Ok(HeadOutcome::TooLarge),
        SectionOutcome::Decoded => {}
    }
    head.finish(end_stream).map_err(malformed)?;
    if kind == HeadKind::Request {
        check_authority(head)?;
    }
    Ok(HeadOutcome::Ready)
}

/// RFC 9114 §4.3.1: for a scheme with an authority (`http`, `https`),
/// `:authority` or `Host` is there and not empty, and when both are they
/// agree.
fn check_authority(head: &RequestHead) -> Result<(), Error> {
    let host = head.fields().find(|(n, _)| *n == b"host").map(|(_, v)| v);
    if let (Some(a), Some(h)) = (head.authority(), host) {
        if a != h {
            return Err(malformed(":authority and host differ"));
        }
    }
    let needs_authority = matches!(head.scheme(), Some(b"http") | Some(b"https"));
    match head.authority().or(host) {
        Some([]) => Err(malformed("empty :authority or host")),
        None if needs_authority => Err(malformed("no :authority or host")),
        _ => Ok(()),
    }
}

fn malformed(why: &'static str) -> Error {
    Error::stream(ErrorCode::MessageError, "The request is malformed.").with_detail(why)
}
