//! HTTP/3 (RFC 9114) and QPACK (RFC 9204), sans-IO: bytes in and bytes out
//! per QUIC stream, as `http2` is for HTTP/2. Nothing here touches a socket,
//! a QUIC connection or a clock: a driver on a QUIC transport hands each
//! stream's bytes to the codec and sends what it produces.
//!
//! - `varint`: QUIC's variable-length integers (RFC 9000 §16).
//! - `frame`, `frame_reader`: frame layout, writing, and an incremental
//!   parser for one stream that checks which frames that stream may carry.
//! - `frame_budget`: what small and unknown frames and streams may cost a
//!   connection before it is closed.
//! - `settings`: SETTINGS both ways.
//! - `uni_stream`: the type that opens a unidirectional stream, and the
//!   rule of one control, one QPACK encoder and one decoder stream per side.
//! - `control`: the peer's control stream (SETTINGS first, GOAWAY, push ids).
//! - `message`: the frame sequence of a request stream (HEADERS, DATA,
//!   trailers) and its `content-length`.
//! - `request_head`: a request's field section decoded and checked
//!   (RFC 9114 §4.1.2, §4.3.1) into the head HTTP/2 uses too.
//! - `qpack`: field compression, its dynamic table both ways and its two
//!   instruction streams.

pub mod control;
pub mod frame;
pub mod frame_budget;
pub mod frame_reader;
pub mod message;
pub mod qpack;
pub mod request_head;
pub mod settings;
pub mod uni_stream;
pub mod varint;

/// An HTTP/3 or QPACK error code (RFC 9114 §8.1, RFC 9204 §6), as a
/// CONNECTION_CLOSE, RESET_STREAM or STOP_SENDING carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// Graceful: no error.
    NoError,
    /// The peer broke a rule no more specific code covers.
    GeneralProtocolError,
    /// The sender failed on its own.
    InternalError,
    /// A stream was opened that the peer may not open.
    StreamCreationError,
    /// A control or QPACK stream was closed or reset.
    ClosedCriticalStream,
    /// A frame came where it is not allowed.
    FrameUnexpected,
    /// A frame's layout or size is wrong.
    FrameError,
    /// The peer is generating too much load.
    ExcessiveLoad,
    /// A stream or push id was used wrongly.
    IdError,
    /// A SETTINGS frame was wrong.
    SettingsError,
    /// The control stream did not open with SETTINGS.
    MissingSettings,
    /// The request was refused before any processing; it may be retried.
    RequestRejected,
    /// The request or its answer is no longer needed.
    RequestCancelled,
    /// The stream ended before the request was whole.
    RequestIncomplete,
    /// The message was malformed (RFC 9114 §4.1.2).
    MessageError,
    /// The CONNECT tunnel failed.
    ConnectError,
    /// HTTP/1.1 must be used instead.
    VersionFallback,
    /// A field section could not be decoded.
    QpackDecompressionFailed,
    /// An instruction on the QPACK encoder stream was wrong.
    QpackEncoderStreamError,
    /// An instruction on the QPACK decoder stream was wrong.
    QpackDecoderStreamError,
}

impl ErrorCode {
    /// The code's number on the wire.
    pub fn to_u64(self) -> u64 {
        match self {
            ErrorCode::NoError => 0x100,
            ErrorCode::GeneralProtocolError => 0x101,
            ErrorCode::InternalError => 0x102,
            ErrorCode::StreamCreationError => 0x103,
            ErrorCode::ClosedCriticalStream => 0x104,
            ErrorCode::FrameUnexpected => 0x105,
            ErrorCode::FrameError => 0x106,
            ErrorCode::ExcessiveLoad => 0x107,
            ErrorCode::IdError => 0x108,
            ErrorCode::SettingsError => 0x109,
            ErrorCode::MissingSettings => 0x10a,
            ErrorCode::RequestRejected => 0x10b,
            ErrorCode::RequestCancelled => 0x10c,
            ErrorCode::RequestIncomplete => 0x10d,
            ErrorCode::MessageError => 0x10e,
            ErrorCode::ConnectError => 0x10f,
            ErrorCode::VersionFallback => 0x110,
            ErrorCode::QpackDecompressionFailed => 0x200,
            ErrorCode::QpackEncoderStreamError => 0x201,
            ErrorCode::QpackDecoderStreamError => 0x202,
        }
    }
}

/// What an error ends: the whole connection (CONNECTION_CLOSE) or one
/// request stream (RESET_STREAM and STOP_SENDING).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The connection is closed with the code.
    Connection,
    /// Only the stream is reset; the connection goes on.
    Stream,
}

/// Why the codec refused the peer's bytes: the code to send, whether it
/// ends the connection or one stream, and a sentence for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// The code sent to the peer.
    pub code: ErrorCode,
    /// What the error ends.
    pub scope: Scope,
    /// What went wrong, as a sentence.
    pub reason: &'static str,
    /// Which rule a malformed message broke, when there is one to name.
    pub detail: Option<&'static str>,
}

impl Error {
    /// An error that closes the connection.
    pub(crate) const fn connection(code: ErrorCode, reason: &'static str) -> Self {
        Error {
            code,
            scope: Scope::Connection,
            reason,
            detail: None,
        }
    }

    /// An error that resets one stream.
    pub(crate) const fn stream(code: ErrorCode, reason: &'static str) -> Self {
        Error {
            code,
            scope: Scope::Stream,
            reason,
            detail: None,
        }
    }

    /// The same error naming the rule broken.
    pub(crate) const fn with_detail(mut self, detail: &'static str) -> Self {
        self.detail = Some(detail);
        self
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.detail {
            // "The request is malformed." becomes "The request is
            // malformed: no :method."
            Some(detail) => write!(
                f,
                "{}: {detail}.",
                self.reason.strip_suffix('.').unwrap_or(self.reason)
            ),
            None => f.write_str(self.reason),
        }
    }
}

impl std::error::Error for Error {}

/// Which side of the connection this codec is: what the peer may send
/// depends on it (a client never sends PUSH_PROMISE, a server never
/// MAX_PUSH_ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// We accept requests.
    Server,
    /// We send requests.
    Client,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_have_their_rfc_numbers() {
        assert_eq!(ErrorCode::NoError.to_u64(), 0x100);
        assert_eq!(ErrorCode::FrameUnexpected.to_u64(), 0x105);
        assert_eq!(ErrorCode::MissingSettings.to_u64(), 0x10a);
        assert_eq!(ErrorCode::MessageError.to_u64(), 0x10e);
        assert_eq!(ErrorCode::VersionFallback.to_u64(), 0x110);
        assert_eq!(ErrorCode::QpackDecompressionFailed.to_u64(), 0x200);
        assert_eq!(ErrorCode::QpackDecoderStreamError.to_u64(), 0x202);
    }

    #[test]
    fn errors_read_as_sentences() {
        let e = Error::stream(ErrorCode::MessageError, "The request is malformed.");
        assert_eq!(e.to_string(), "The request is malformed.");
        assert_eq!(
            e.with_detail("no :method").to_string(),
            "The request is malformed: no :method."
        );
    }
}
