//! HTTP/2 (RFC 9113), sans-IO: frames in, frames out, as `http1` is for
//! HTTP/1. One implementation in both roles: [`conn::ServerConnection`] for
//! the downstream driver (`server::h2`), [`client::ClientConnection`] for
//! the proxy's exchanges with `protocol = "h2"` origins and their health
//! checks (driven by `upstream::h2_connection`); what the roles share
//! (frames, HPACK,
//! flow control, settings, GOAWAY, the flood budgets, the output queue)
//! is written once in `shared`, so an origin meets the defences a client
//! does. Nothing here touches a socket, a clock of its own or a runtime.
//! `pier bench http --h2` keeps the `h2` crate as an independent client.
//!
//! Pier keeps its own codec because the downstream side is where the cost
//! and the memory of HTTP/2 are: per request it decodes HPACK straight into
//! the head the handlers read, and an idle connection holds no buffers.

pub mod client;
pub mod conn;
pub mod frame;
pub mod hpack;
mod shared;
/// Frames and blocks built by hand, for the tests of the drivers too.
#[cfg(test)]
pub(crate) use shared::test_wire;

/// An HTTP/2 error code (RFC 9113 §7), as RST_STREAM and GOAWAY carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// Graceful: no error.
    NoError,
    /// The peer broke a protocol rule.
    ProtocolError,
    /// The sender failed on its own.
    InternalError,
    /// A flow-control window was overrun.
    FlowControlError,
    /// SETTINGS were not acknowledged in time.
    SettingsTimeout,
    /// A frame came on a stream already half-closed or closed.
    StreamClosed,
    /// A frame had the wrong size.
    FrameSizeError,
    /// The stream was refused before any processing; it may be retried.
    RefusedStream,
    /// The stream is no longer needed.
    Cancel,
    /// The HPACK state could not be kept in step.
    CompressionError,
    /// The CONNECT tunnel failed.
    ConnectError,
    /// The peer is generating too much load.
    EnhanceYourCalm,
    /// The TLS parameters are too weak.
    InadequateSecurity,
    /// HTTP/1.1 must be used instead.
    Http11Required,
    /// A code this codec does not know, kept as received.
    Other(u32),
}

impl ErrorCode {
    /// The code's number on the wire.
    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::NoError => 0,
            ErrorCode::ProtocolError => 1,
            ErrorCode::InternalError => 2,
            ErrorCode::FlowControlError => 3,
            ErrorCode::SettingsTimeout => 4,
            ErrorCode::StreamClosed => 5,
            ErrorCode::FrameSizeError => 6,
            ErrorCode::RefusedStream => 7,
            ErrorCode::Cancel => 8,
            ErrorCode::CompressionError => 9,
            ErrorCode::ConnectError => 10,
            ErrorCode::EnhanceYourCalm => 11,
            ErrorCode::InadequateSecurity => 12,
            ErrorCode::Http11Required => 13,
            ErrorCode::Other(n) => n,
        }
    }

    /// The code a number on the wire names.
    pub fn from_u32(n: u32) -> Self {
        match n {
            0 => ErrorCode::NoError,
            1 => ErrorCode::ProtocolError,
            2 => ErrorCode::InternalError,
            3 => ErrorCode::FlowControlError,
            4 => ErrorCode::SettingsTimeout,
            5 => ErrorCode::StreamClosed,
            6 => ErrorCode::FrameSizeError,
            7 => ErrorCode::RefusedStream,
            8 => ErrorCode::Cancel,
            9 => ErrorCode::CompressionError,
            10 => ErrorCode::ConnectError,
            11 => ErrorCode::EnhanceYourCalm,
            12 => ErrorCode::InadequateSecurity,
            13 => ErrorCode::Http11Required,
            n => ErrorCode::Other(n),
        }
    }
}
