//! SETTINGS (RFC 9114 §7.2.4): the parameters each side announces once, at
//! the start of its control stream, and the defaults that hold until they
//! arrive. Unknown and reserved identifiers are ignored, as §7.2.4 and §9
//! require; the identifiers HTTP/2 used without an HTTP/3 counterpart are a
//! connection error (§7.2.4.1).

use super::{varint, Error, ErrorCode};

/// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5).
pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §7.2.4.1).
pub const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
/// SETTINGS_QPACK_BLOCKED_STREAMS (RFC 9204 §5).
pub const QPACK_BLOCKED_STREAMS: u64 = 0x07;
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220 §3, from RFC 8441).
pub const ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
/// SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1).
pub const H3_DATAGRAM: u64 = 0x33;

/// A reserved identifier (0x1f * N + 0x21, §7.2.4.1) sent with our settings
/// so peers keep ignoring identifiers they do not know.
const GREASE_SETTING: u64 = 0x1f * 0x1d + 0x21;

/// One side's settings: the defaults of §7.2.4.1 (all zero, no limit)
/// until its SETTINGS frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The largest QPACK dynamic table the side's decoder accepts.
    pub qpack_max_table_capacity: u64,
    /// The largest field section the side accepts (RFC 9114 §4.2.2);
    /// `None`: no limit announced.
    pub max_field_section_size: Option<u64>,
    /// How many streams the side's decoder lets wait on inserts.
    pub qpack_blocked_streams: u64,
    /// Extended CONNECT is taken (RFC 9220).
    pub enable_connect_protocol: bool,
    /// HTTP Datagrams are taken (RFC 9297).
    pub h3_datagram: bool,
}

impl Settings {
    /// Reads a SETTINGS frame's payload.
    pub fn parse(mut payload: &[u8]) -> Result<Self, Error> {
        let mut settings = Settings::default();
        // The known identifiers seen so far, a bit each: a repeat is an error.
        let mut seen = 0u8;
        while !payload.is_empty() {
            let (id, n) = varint::read(payload).ok_or(TRUNCATED)?;
            payload = &payload[n..];
            let (value, n) = varint::read(payload).ok_or(TRUNCATED)?;
            payload = &payload[n..];
            let bit = match id {
                QPACK_MAX_TABLE_CAPACITY => {
                    settings.qpack_max_table_capacity = value;
                    1
                }
                MAX_FIELD_SECTION_SIZE => {
                    settings.max_field_section_size = Some(value);
                    2
                }
                QPACK_BLOCKED_STREAMS => {
                    settings.qpack_blocked_streams = value;
                    4
                }
                ENABLE_CONNECT_PROTOCOL => {
                    settings.enable_connect_protocol = flag(value)?;
                    8
                }
                H3_DATAGRAM => {
                    settings.h3_datagram = flag(value)?;
                    16
                }
                0x02..=0x05 => {
                    return Err(Error::connection(
                        ErrorCode::SettingsError,
                        "The peer sent an HTTP/2 setting that HTTP/3 forbids.",
                    ))
                }
                _ => 0,
            };
            if seen & bit != 0 {
                return Err(Error::connection(
                    ErrorCode::SettingsError,
                    "The peer's SETTINGS frame names one setting twice.",
                ));
            }
            seen |= bit;
        }
        Ok(settings)
    }

    /// Appends the payload of our SETTINGS frame: every value that differs
    /// from its default, and one reserved identifier.
    pub fn write_payload(&self, out: &mut Vec<u8>) {
        let mut pair = |id: u64, value: u64| {
            varint::write(id, out);
            varint::write(value, out);
        };
        if self.qpack_max_table_capacity != 0 {
            pair(QPACK_MAX_TABLE_CAPACITY, self.qpack_max_table_capacity);
        }
        if let Some(size) = self.max_field_section_size {
            pair(MAX_FIELD_SECTION_SIZE, size);
        }
        if self.qpack_blocked_streams != 0 {
            pair(QPACK_BLOCKED_STREAMS, self.qpack_blocked_streams);
        }
        if self.enable_connect_protocol {
            pair(ENABLE_CONNECT_PROTOCOL, 1);
        }
        if self.h3_datagram {
            pair(H3_DATAGRAM, 1);
        }
        pair(GREASE_SETTING, 0);
    }
}

const TRUNCATED: Error = Error::connection(
    ErrorCode::FrameError,
    "The peer's SETTINGS frame ends in the middle of a setting.",
);

/// A setting that is 0 or 1 (RFC 9220 §3, RFC 9297 §2.1.1).
fn flag(value: u64) -> Result<bool, Error> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::connection(
            ErrorCode::SettingsError,
            "The peer gave a setting that must be 0 or 1 another value.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(id, value) in pairs {
            varint::write(id, &mut out);
            varint::write(value, &mut out);
        }
        out
    }

    #[test]
    fn our_settings_read_back_the_same() {
        let ours = Settings {
            qpack_max_table_capacity: 4096,
            max_field_section_size: Some(65_536),
            qpack_blocked_streams: 16,
            enable_connect_protocol: true,
            h3_datagram: true,
        };
        let mut out = Vec::new();
        ours.write_payload(&mut out);
        assert_eq!(Settings::parse(&out), Ok(ours));
        let mut out = Vec::new();
        Settings::default().write_payload(&mut out);
        assert_eq!(Settings::parse(&out), Ok(Settings::default()));
        assert!(!out.is_empty(), "the reserved identifier is always sent");
    }

    #[test]
    fn unknown_and_reserved_identifiers_are_ignored() {
        let p = payload(&[(0x21, 7), (0x00, 1), (0x1f * 5 + 0x21, 9), (0x06, 100)]);
        let s = Settings::parse(&p).unwrap();
        assert_eq!(s.max_field_section_size, Some(100));
    }

    #[test]
    fn http2_identifiers_are_a_settings_error() {
        for id in 2..=5 {
            let e = Settings::parse(&payload(&[(id, 0)])).unwrap_err();
            assert_eq!(e.code, ErrorCode::SettingsError, "id {id}");
        }
    }

    #[test]
    fn repeated_identifiers_and_bad_flags_are_a_settings_error() {
        let e = Settings::parse(&payload(&[(0x01, 1), (0x07, 1), (0x01, 2)])).unwrap_err();
        assert_eq!(e.code, ErrorCode::SettingsError);
        for id in [ENABLE_CONNECT_PROTOCOL, H3_DATAGRAM] {
            let e = Settings::parse(&payload(&[(id, 2)])).unwrap_err();
            assert_eq!(e.code, ErrorCode::SettingsError);
        }
    }

    #[test]
    fn a_truncated_pair_is_a_frame_error() {
        let mut p = payload(&[(0x01, 300)]);
        p.pop();
        assert_eq!(Settings::parse(&p).unwrap_err().code, ErrorCode::FrameError);
        assert_eq!(
            Settings::parse(&[0x01]).unwrap_err().code,
            ErrorCode::FrameError
        );
    }
}
