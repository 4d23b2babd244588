//! Raw frames and header blocks built by hand for the tests of both roles
//! (the codec's own writers are what is under test), the limits they run
//! with, and the frames an endpoint wrote, parsed back.

use super::ConnLimits;
use crate::http2::frame::{self, flag, kind, FrameHead};
use crate::http2::ErrorCode;

/// Small limits, so each budget is quick to reach.
pub(crate) fn limits() -> ConnLimits {
    ConnLimits {
        max_concurrent_streams: 4,
        initial_stream_window: 65_535,
        initial_connection_window: 1 << 20,
        max_frame_size: 16_384,
        header_table_size: 4096,
        max_header_list_size: 8192,
        max_header_fields: 20,
        max_control_frames: 10,
        max_error_resets: 5,
        max_empty_frames: 10,
        max_inert_frames: 20,
        enable_connect_protocol: false,
        no_rfc7540_priorities: false,
    }
}

/// A frame as bytes.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::write_head(&mut f, payload.len(), kind, flags, stream);
    f.extend_from_slice(payload);
    f
}

/// An HPACK integer with an `n`-bit prefix after `first`'s high bits.
pub(crate) fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A header block of literal fields without indexing (new names, no
/// Huffman coding): the decoder's simplest form.
pub(crate) fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        b.push(0);
        hpack_int(&mut b, 0, 7, n.len());
        b.extend_from_slice(n.as_bytes());
        hpack_int(&mut b, 0, 7, v.len());
        b.extend_from_slice(v.as_bytes());
    }
    b
}

pub(crate) fn headers(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
    let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
    frame(kind::HEADERS, flags, stream, block)
}

pub(crate) fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    frame(kind::DATA, flags, stream, payload)
}

pub(crate) fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::write_settings(&mut f, pairs);
    f
}

pub(crate) fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    frame(kind::WINDOW_UPDATE, 0, stream, &inc.to_be_bytes())
}

/// A parsed output frame.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
    pub(crate) payload: Vec<u8>,
}

impl Out {
    pub(crate) fn code(&self) -> ErrorCode {
        let at = if self.kind == kind::GOAWAY { 4 } else { 0 };
        ErrorCode::from_u32(frame::read_u32(&self.payload[at..]))
    }
}

/// The frames in `bytes` (whole frames only).
pub(crate) fn parse_frames(bytes: &[u8]) -> Vec<Out> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at + frame::HEAD_LEN <= bytes.len() {
        let h = FrameHead::parse(&bytes[at..]);
        let payload = bytes[at + 9..at + 9 + h.len].to_vec();
        frames.push(Out {
            kind: h.kind,
            flags: h.flags,
            stream: h.stream,
            payload,
        });
        at += 9 + h.len;
    }
    frames
}
