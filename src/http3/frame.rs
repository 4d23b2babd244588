//! HTTP/3 frames (RFC 9114 §7): a type and a length, both variable-length
//! integers, then the payload. Here are the frame types, what each may
//! carry, and the writing of every frame this side sends; reading is
//! `frame_reader`'s.

use super::settings::Settings;
use super::{varint, Error, ErrorCode};

/// DATA (§7.2.1): a piece of a message's content.
pub const DATA: u64 = 0x00;
/// HEADERS (§7.2.2): an encoded field section.
pub const HEADERS: u64 = 0x01;
/// CANCEL_PUSH (§7.2.3).
pub const CANCEL_PUSH: u64 = 0x03;
/// SETTINGS (§7.2.4).
pub const SETTINGS: u64 = 0x04;
/// PUSH_PROMISE (§7.2.5).
pub const PUSH_PROMISE: u64 = 0x05;
/// GOAWAY (§7.2.6).
pub const GOAWAY: u64 = 0x07;
/// MAX_PUSH_ID (§7.2.7).
pub const MAX_PUSH_ID: u64 = 0x0d;
/// PRIORITY_UPDATE of a request stream (RFC 9218 §7.2).
pub const PRIORITY_UPDATE_REQUEST: u64 = 0xf0700;
/// PRIORITY_UPDATE of a push (RFC 9218 §7.2).
pub const PRIORITY_UPDATE_PUSH: u64 = 0xf0701;

/// The HTTP/2 frame types with no HTTP/3 counterpart (PRIORITY, PING,
/// WINDOW_UPDATE, CONTINUATION): receiving one is H3_FRAME_UNEXPECTED
/// (§7.2.8).
pub fn is_http2_only(ty: u64) -> bool {
    matches!(ty, 0x02 | 0x06 | 0x08 | 0x09)
}

/// A reserved type (0x1f * N + 0x21, §7.2.8), sent now and then to keep
/// peers ignoring types they do not know; received, it is skipped like any
/// unknown type.
pub fn is_reserved(ty: u64) -> bool {
    ty >= 0x21 && (ty - 0x21) % 0x1f == 0
}

/// Appends a frame header.
pub fn write_header(ty: u64, payload_len: u64, out: &mut Vec<u8>) {
    varint::write(ty, out);
    varint::write(payload_len, out);
}

/// Appends the header of a DATA frame whose `len` bytes of payload the
/// caller writes next (or sends from its own buffer).
pub fn write_data_header(len: u64, out: &mut Vec<u8>) {
    write_header(DATA, len, out);
}

/// Appends a HEADERS frame carrying `field_section`.
pub fn write_headers(field_section: &[u8], out: &mut Vec<u8>) {
    write_header(HEADERS, field_section.len() as u64, out);
    out.extend_from_slice(field_section);
}

/// Appends a SETTINGS frame.
pub fn write_settings(settings: &Settings, out: &mut Vec<u8>) {
    let mut payload = Vec::with_capacity(24);
    settings.write_payload(&mut payload);
    write_header(SETTINGS, payload.len() as u64, out);
    out.extend_from_slice(&payload);
}

/// Appends a frame whose payload is one id: GOAWAY, MAX_PUSH_ID or
/// CANCEL_PUSH.
pub fn write_id_frame(ty: u64, id: u64, out: &mut Vec<u8>) {
    write_header(ty, varint::encoded_len(id) as u64, out);
    varint::write(id, out);
}

/// Appends a GOAWAY frame: a server names the first request stream it will
/// not process, a client the first push id.
pub fn write_goaway(id: u64, out: &mut Vec<u8>) {
    write_id_frame(GOAWAY, id, out);
}

/// Reads the payload of a frame that holds exactly one id (GOAWAY,
/// MAX_PUSH_ID, CANCEL_PUSH): anything short or left over is H3_FRAME_ERROR
/// (§7.1).
pub fn parse_id_payload(payload: &[u8]) -> Result<u64, Error> {
    match varint::read(payload) {
        Some((id, n)) if n == payload.len() => Ok(id),
        _ => Err(Error::connection(
            ErrorCode::FrameError,
            "A frame that carries one id holds something else.",
        )),
    }
}

/// Appends a PRIORITY_UPDATE frame for request stream `id` with the
/// `priority` field value `value` (RFC 9218 §7.2).
pub fn write_priority_update(id: u64, value: &[u8], out: &mut Vec<u8>) {
    let len = varint::encoded_len(id) + value.len();
    write_header(PRIORITY_UPDATE_REQUEST, len as u64, out);
    varint::write(id, out);
    out.extend_from_slice(value);
}

/// Reads a PRIORITY_UPDATE payload: the element's id, then the `priority`
/// field value (RFC 9218 §7.2).
pub fn parse_priority_update(payload: &[u8]) -> Result<(u64, &[u8]), Error> {
    let (id, n) = varint::read(payload).ok_or(Error::connection(
        ErrorCode::FrameError,
        "A PRIORITY_UPDATE frame ends inside its element id.",
    ))?;
    Ok((id, &payload[n..]))
}

/// Reads a PUSH_PROMISE payload: the push id, then the field section.
pub fn parse_push_promise(payload: &[u8]) -> Result<(u64, &[u8]), Error> {
    let (id, n) = varint::read(payload).ok_or(Error::connection(
        ErrorCode::FrameError,
        "A PUSH_PROMISE frame ends inside its push id.",
    ))?;
    Ok((id, &payload[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_written_as_type_length_payload() {
        let mut out = Vec::new();
        write_headers(&[0, 0, 0xd1], &mut out);
        assert_eq!(out, [0x01, 0x03, 0, 0, 0xd1]);
        out.clear();
        write_data_header(100, &mut out);
        assert_eq!(out, [0x00, 0x40, 100]);
        out.clear();
        write_goaway(4, &mut out);
        assert_eq!(out, [0x07, 0x01, 0x04]);
        out.clear();
        write_id_frame(MAX_PUSH_ID, 16_384, &mut out);
        assert_eq!(out, [0x0d, 0x04, 0x80, 0x00, 0x40, 0x00]);
    }

    #[test]
    fn id_payloads_hold_exactly_one_id() {
        assert_eq!(parse_id_payload(&[0x40, 0x25]), Ok(37));
        for bad in [&[][..], &[0x40], &[0x04, 0x00]] {
            assert_eq!(
                parse_id_payload(bad).unwrap_err().code,
                ErrorCode::FrameError
            );
        }
        assert_eq!(parse_push_promise(&[0x02, 0, 0]), Ok((2, &[0u8, 0][..])));
        let mut update = Vec::new();
        write_priority_update(8, b"u=0", &mut update);
        assert_eq!(
            update,
            [0x80, 0x0f, 0x07, 0x00, 0x04, 0x08, b'u', b'=', b'0']
        );
        assert_eq!(parse_priority_update(&update[5..]), Ok((8, &b"u=0"[..])));
        assert!(parse_priority_update(&[]).is_err());
        assert!(parse_push_promise(&[0x40]).is_err());
    }

    #[test]
    fn reserved_and_http2_types_are_recognised() {
        assert!(is_reserved(0x21) && is_reserved(0x40) && is_reserved(0x21 + 0x1f * 1000));
        assert!(!is_reserved(0x22) && !is_reserved(0x01) && !is_reserved(0x20));
        for ty in [0x02, 0x06, 0x08, 0x09] {
            assert!(is_http2_only(ty));
        }
        assert!(!is_http2_only(0x07));
    }
}
