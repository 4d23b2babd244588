//! Raw frames and header blocks built by hand for the tests of both roles
//! (the codec's own writers are what is under test), the limits they run
//! with, the frames an endpoint wrote, parsed back, and what the two roles'
//! harnesses check alike.

use super::{ConnCore, ConnError, ConnLimits};
use crate::http2::frame::{self, flag, kind, FrameHead, PREFACE};
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

/// All of an endpoint's queued output, pieces joined.
pub(crate) fn joined(slices: &[std::io::IoSlice<'_>]) -> Vec<u8> {
    slices.iter().flat_map(|s| s.iter().copied()).collect()
}

/// The frames `core` queued since the last call (a client's preface left
/// out), its output consumed.
pub(crate) fn take_frames(core: &mut ConnCore) -> Vec<Out> {
    let mut slices = [std::io::IoSlice::new(&[]); 256];
    let n = core.out.slices(&mut slices);
    let out = joined(&slices[..n]);
    assert_eq!(out.len(), core.out.len());
    core.out.consume(out.len());
    parse_frames(out.strip_prefix(PREFACE).unwrap_or(&out))
}

/// An endpoint under test fed raw frames by its peer, as either role's
/// harness plays it.
pub(crate) trait Peer {
    /// Feeds bytes, all of which must be used unless there is an error.
    fn send(&mut self, bytes: &[u8]) -> Result<(), ConnError>;

    /// The connection's shared state.
    fn core_mut(&mut self) -> &mut ConnCore;

    /// What a role checks more once GOAWAY(`code`) ended the connection.
    fn after_goaway(&mut self, _last: &Out, _code: ErrorCode) {}

    /// What a role checks more once it reset `stream` with `code`.
    fn after_reset(&mut self, _stream: u32, _code: ErrorCode) {}

    /// The frames written since the last call.
    fn frames(&mut self) -> Vec<Out> {
        take_frames(self.core_mut())
    }

    /// The single frame written, which must be of `kind`.
    #[track_caller]
    fn one(&mut self, kind: u8) -> Out {
        let mut f = self.frames();
        assert_eq!(f.len(), 1, "one frame expected: {f:?}");
        let f = f.remove(0);
        assert_eq!(f.kind, kind, "{f:?}");
        f
    }

    /// Sends `bytes`, which must end the connection with GOAWAY(`code`).
    #[track_caller]
    fn expect_goaway(&mut self, bytes: &[u8], code: ErrorCode) {
        assert_eq!(self.send(bytes), Err(ConnError { code }));
        let f = self.frames();
        let last = f.last().expect("a GOAWAY");
        assert_eq!((last.kind, last.code()), (kind::GOAWAY, code), "{f:?}");
        assert_eq!(self.send(&settings(&[])), Err(ConnError { code }), "dead");
        assert!(
            self.core_mut().out.first().is_empty(),
            "nothing more after GOAWAY"
        );
        self.after_goaway(last, code);
    }

    /// Sends `bytes`, which must reset `stream` with `code`.
    #[track_caller]
    fn expect_reset(&mut self, bytes: &[u8], stream: u32, code: ErrorCode) {
        self.send(bytes).unwrap();
        let f = self.one(kind::RST_STREAM);
        assert_eq!((f.stream, f.code()), (stream, code));
        self.after_reset(stream, code);
    }
}
