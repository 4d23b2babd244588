//! HTTP/2 (RFC 9113) for the server side, sans-IO: frames in, frames out, as
//! `http1` is for HTTP/1. The downstream driver (`server::h2`) moves bytes
//! between a socket and a [`conn::ServerConnection`]; nothing here touches a
//! socket, a clock of its own or a runtime. Upstream HTTP/2 (gRPC to origins)
//! and `pier bench http --h2` use the `h2` crate as clients.
//!
//! Pier keeps its own server codec because the downstream side is where the
//! cost and the memory of HTTP/2 are: per request it decodes HPACK straight
//! into the head the handlers read, and an idle connection holds no buffers.

pub mod conn;
pub mod frame;
pub mod hpack;

/// An HTTP/2 error code (RFC 9113 §7), as RST_STREAM and GOAWAY carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// Not an error: a graceful end.
    NoError,
    /// The peer broke the protocol.
    ProtocolError,
    /// Something failed on this side.
    InternalError,
    /// A flow-control window was overrun.
    FlowControlError,
    /// SETTINGS were not acknowledged in time.
    SettingsTimeout,
    /// A frame came on a stream already half-closed.
    StreamClosed,
    /// A frame had a size its type does not allow.
    FrameSizeError,
    /// The stream was not processed: safe to retry.
    RefusedStream,
    /// The stream is no longer wanted.
    Cancel,
    /// The HPACK state cannot be kept in step.
    CompressionError,
    /// A CONNECT tunnel failed.
    ConnectError,
    /// The peer does too much (a flood).
    EnhanceYourCalm,
    /// The TLS parameters are not good enough.
    InadequateSecurity,
    /// The request needs HTTP/1.1.
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
