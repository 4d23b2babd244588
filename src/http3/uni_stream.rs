//! Unidirectional streams (RFC 9114 §6.2): each opens with a type. A side
//! opens one control stream, one QPACK encoder and one decoder stream
//! (RFC 9204 §4.2), and a server push streams; a second of the critical
//! ones, or a push stream from a client, is H3_STREAM_CREATION_ERROR.
//! Reserved and unknown types are ignored: the driver stops reading them
//! (STOP_SENDING with H3_STREAM_CREATION_ERROR) and the connection goes on.

use super::varint::{self, PartialVarint};
use super::{Error, ErrorCode, Role};

/// The type a unidirectional stream opens with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UniStreamType {
    /// 0x00: the control stream.
    Control,
    /// 0x01: a server push.
    Push,
    /// 0x02: the QPACK encoder stream.
    QpackEncoder,
    /// 0x03: the QPACK decoder stream.
    QpackDecoder,
    /// Any other type, reserved ones (0x1f * N + 0x21) included.
    Unknown(u64),
}

impl UniStreamType {
    /// The type a number on the wire names.
    pub fn from_u64(n: u64) -> Self {
        match n {
            0x00 => UniStreamType::Control,
            0x01 => UniStreamType::Push,
            0x02 => UniStreamType::QpackEncoder,
            0x03 => UniStreamType::QpackDecoder,
            n => UniStreamType::Unknown(n),
        }
    }

    /// The type's number on the wire.
    pub fn to_u64(self) -> u64 {
        match self {
            UniStreamType::Control => 0x00,
            UniStreamType::Push => 0x01,
            UniStreamType::QpackEncoder => 0x02,
            UniStreamType::QpackDecoder => 0x03,
            UniStreamType::Unknown(n) => n,
        }
    }

    /// Appends the type, the first bytes of a stream this side opens.
    pub fn write(self, out: &mut Vec<u8>) {
        varint::write(self.to_u64(), out);
    }
}

/// The type of one incoming unidirectional stream, read from input split
/// anywhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamTypeReader {
    partial: PartialVarint,
}

impl StreamTypeReader {
    /// Takes bytes until the type is whole: the type once it is, and how
    /// many bytes were taken (the stream's payload starts after them).
    pub fn read(&mut self, input: &[u8]) -> (Option<UniStreamType>, usize) {
        let (n, taken) = self.partial.feed(input);
        (n.map(UniStreamType::from_u64), taken)
    }
}

/// The critical streams the peer has opened, to refuse a second one.
#[derive(Clone, Copy, Debug)]
pub struct PeerUniStreams {
    role: Role,
    control: bool,
    encoder: bool,
    decoder: bool,
}

impl PeerUniStreams {
    /// None opened yet, on the `role` side.
    pub fn new(role: Role) -> Self {
        PeerUniStreams {
            role,
            control: false,
            encoder: false,
            decoder: false,
        }
    }

    /// A stream of type `ty` was opened by the peer: whether it is taken
    /// (`Ok(true)`), to be ignored (`Ok(false)`: unknown types), or an
    /// error.
    pub fn accept(&mut self, ty: UniStreamType) -> Result<bool, Error> {
        let seen = match ty {
            UniStreamType::Control => &mut self.control,
            UniStreamType::QpackEncoder => &mut self.encoder,
            UniStreamType::QpackDecoder => &mut self.decoder,
            UniStreamType::Push => {
                return Err(match self.role {
                    Role::Server => Error::connection(
                        ErrorCode::StreamCreationError,
                        "The client opened a push stream, which only servers open.",
                    ),
                    Role::Client => Error::connection(
                        ErrorCode::IdError,
                        "The server opened a push stream, and this client allows no push.",
                    ),
                })
            }
            UniStreamType::Unknown(_) => return Ok(false),
        };
        if *seen {
            return Err(Error::connection(
                ErrorCode::StreamCreationError,
                "The peer opened a second control or QPACK stream.",
            ));
        }
        *seen = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_types_are_read_across_pieces() {
        let mut bytes = Vec::new();
        UniStreamType::Unknown(0x21 + 0x1f * 1000).write(&mut bytes);
        bytes.push(0xaa);
        for split in 0..bytes.len() - 1 {
            let mut r = StreamTypeReader::default();
            let (ty, n) = r.read(&bytes[..split]);
            assert_eq!((ty, n), (None, split));
            let (ty, n) = r.read(&bytes[split..]);
            assert_eq!(ty, Some(UniStreamType::Unknown(0x21 + 0x1f * 1000)));
            assert_eq!(split + n, bytes.len() - 1, "the payload byte is left");
        }
        for n in 0..4 {
            let mut r = StreamTypeReader::default();
            assert_eq!(r.read(&[n as u8]).0.map(UniStreamType::to_u64), Some(n));
        }
    }

    #[test]
    fn one_critical_stream_of_each_type() {
        let mut peer = PeerUniStreams::new(Role::Server);
        for ty in [
            UniStreamType::Control,
            UniStreamType::QpackEncoder,
            UniStreamType::QpackDecoder,
        ] {
            assert_eq!(peer.accept(ty), Ok(true));
            assert_eq!(
                peer.accept(ty).unwrap_err().code,
                ErrorCode::StreamCreationError
            );
        }
        assert_eq!(peer.accept(UniStreamType::Unknown(0x21)), Ok(false));
        assert_eq!(peer.accept(UniStreamType::Unknown(0x21)), Ok(false));
    }

    #[test]
    fn push_streams_are_refused_by_either_side() {
        let e = PeerUniStreams::new(Role::Server).accept(UniStreamType::Push);
        assert_eq!(e.unwrap_err().code, ErrorCode::StreamCreationError);
        let e = PeerUniStreams::new(Role::Client).accept(UniStreamType::Push);
        assert_eq!(e.unwrap_err().code, ErrorCode::IdError);
    }
}
