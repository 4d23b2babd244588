//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte frame head, the frame
//! types and flags, and the writers of the frames either role sends. Frames are
//! read in place from the input slice and written straight into the
//! connection's output buffer, so no frame is ever allocated on its own.

/// The client connection preface (RFC 9113 §3.4), before the first frame.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes in a frame head.
pub const HEAD_LEN: usize = 9;

/// The smallest SETTINGS_MAX_FRAME_SIZE and the default of every peer.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// The window every stream and the connection start with.
pub const DEFAULT_WINDOW: u32 = 65_535;

/// The largest flow-control window (2^31-1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// The highest stream id (31 bits).
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// Frame types (RFC 9113 §6); other values are extension frames, ignored.
pub mod kind {
    /// Request or response body bytes.
    pub const DATA: u8 = 0x0;
    /// Opens a stream or carries trailers.
    pub const HEADERS: u8 = 0x1;
    /// Deprecated prioritisation, checked and ignored.
    pub const PRIORITY: u8 = 0x2;
    /// Ends one stream.
    pub const RST_STREAM: u8 = 0x3;
    /// Connection parameters.
    pub const SETTINGS: u8 = 0x4;
    /// Server push, which a client never sends and Pier as a client turns off.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// Liveness and round-trip checks.
    pub const PING: u8 = 0x6;
    /// Ends the connection gracefully or on an error.
    pub const GOAWAY: u8 = 0x7;
    /// Opens a send window.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// The rest of a header block too large for one frame.
    pub const CONTINUATION: u8 = 0x9;
    /// A stream's new priority, on stream 0 (RFC 9218 §7.1).
    pub const PRIORITY_UPDATE: u8 = 0x10;
}

/// Frame flags (each meaningful only on some frame types).
pub mod flag {
    /// DATA, HEADERS: the sender's last frame on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends here.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte and padding surround the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a 5-byte priority block starts the payload.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2); unknown ones are ignored.
pub mod setting {
    /// The peer's HPACK dynamic table limit for what we encode.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// Server push allowed (0 or 1): a client sends 0; a server may send only 0.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// Streams the sender lets the other side open at once.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// Each new stream's send window.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// The largest frame payload the sender accepts.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// Advisory limit of a header list's decoded size.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    /// The sender takes extended CONNECT, a request's `:protocol` (0 or 1,
    /// RFC 8441 §3): how a WebSocket opens on an HTTP/2 stream.
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
    /// The sender ignores RFC 7540's PRIORITY scheme (RFC 9218 §2.1):
    /// Extensible Priorities are what it reads.
    pub const NO_RFC7540_PRIORITIES: u16 = 0x9;
}

/// A parsed frame head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// Payload length.
    pub len: usize,
    /// Frame type.
    pub kind: u8,
    /// Frame flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
}

impl FrameHead {
    /// Reads the head from the first 9 bytes of `b` (which must hold them).
    pub fn parse(b: &[u8]) -> FrameHead {
        FrameHead {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: read_u31(&b[5..9]),
        }
    }

    /// Whether `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// A 31-bit big-endian number (the top bit is reserved and ignored).
pub fn read_u31(b: &[u8]) -> u32 {
    read_u32(b) & 0x7fff_ffff
}

/// A 32-bit big-endian number from the first 4 bytes of `b`.
pub fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A frame head's bytes.
pub fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEAD_LEN] {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    let s = (stream & 0x7fff_ffff).to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Appends a frame head.
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// Appends a SETTINGS frame of `(identifier, value)` pairs.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_head(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the acknowledgement of the peer's SETTINGS.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a PING (not an ack) carrying `payload`.
pub fn write_ping(out: &mut Vec<u8>, payload: &[u8; 8]) {
    write_head(out, 8, kind::PING, 0, 0);
    out.extend_from_slice(payload);
}

/// Appends the answer to a PING, echoing its payload.
pub fn write_ping_ack(out: &mut Vec<u8>, payload: &[u8]) {
    write_head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(payload);
}

/// Appends RST_STREAM.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends GOAWAY (no debug data).
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    write_head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends WINDOW_UPDATE.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

/// Appends one DATA frame carrying `data`.
pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    write_head(out, data.len(), kind::DATA, flags, stream);
    out.extend_from_slice(data);
}

/// Appends a header block as HEADERS plus CONTINUATION frames of at most
/// `max_frame` bytes each.
pub fn write_header_block(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut chunks = block.chunks(max_frame.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if first.len() == block.len() {
        flags |= flag::END_HEADERS;
    }
    write_head(out, first.len(), kind::HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut sent = first.len();
    for chunk in chunks {
        sent += chunk.len();
        let flags = if sent == block.len() {
            flag::END_HEADERS
        } else {
            0
        };
        write_head(out, chunk.len(), kind::CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// The payload of a PADDED frame without its pad length byte and padding,
/// and how many bytes those took; `None` when the padding does not fit
/// (a connection error PROTOCOL_ERROR, RFC 9113 §6.1).
pub fn unpad(padded: bool, payload: &[u8]) -> Option<(&[u8], usize)> {
    if !padded {
        return Some((payload, 0));
    }
    let (&pad, rest) = payload.split_first()?;
    let pad = usize::from(pad);
    if pad >= payload.len() {
        return None;
    }
    Some((&rest[..rest.len() - pad], pad + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trips_and_drops_the_reserved_bit() {
        let mut out = Vec::new();
        write_head(&mut out, 0x01_02_03, kind::HEADERS, 0x25, 0xffff_ffff);
        assert_eq!(out, [1, 2, 3, 1, 0x25, 0x7f, 0xff, 0xff, 0xff]);
        let h = FrameHead::parse(&[1, 2, 3, 1, 0x25, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            h,
            FrameHead {
                len: 0x01_02_03,
                kind: 1,
                flags: 0x25,
                stream: 0x7fff_ffff
            }
        );
        assert!(h.has(flag::END_HEADERS) && !h.has(flag::PADDED));
    }

    #[test]
    fn unpad_checks_the_pad_length() {
        assert_eq!(unpad(false, b"abc"), Some((&b"abc"[..], 0)));
        assert_eq!(unpad(true, b"\x02abcxx"), Some((&b"abc"[..], 3)));
        assert_eq!(unpad(true, b"\x00"), Some((&b""[..], 1)));
        assert_eq!(unpad(true, b"\x01x"), Some((&b""[..], 2)));
        assert_eq!(
            unpad(true, b"\x03xx"),
            None,
            "padding as long as the payload"
        );
        assert_eq!(unpad(true, b""), None, "no pad length byte");
    }

    #[test]
    fn header_blocks_split_into_continuations() {
        let mut out = Vec::new();
        write_header_block(&mut out, 3, b"abcde", true, 2);
        let h = FrameHead::parse(&out);
        assert_eq!(
            (h.kind, h.flags, h.len),
            (kind::HEADERS, flag::END_STREAM, 2)
        );
        let h = FrameHead::parse(&out[11..]);
        assert_eq!((h.kind, h.flags, h.len), (kind::CONTINUATION, 0, 2));
        let h = FrameHead::parse(&out[22..]);
        assert_eq!(
            (h.kind, h.flags, h.len),
            (kind::CONTINUATION, flag::END_HEADERS, 1)
        );
        assert_eq!(out.len(), 32);
        out.clear();
        write_header_block(&mut out, 1, b"ab", false, 16_384);
        assert_eq!(FrameHead::parse(&out).flags, flag::END_HEADERS);
    }
}
