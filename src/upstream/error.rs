//! Proxy failures, recording which side failed (Pingora's habit), and the
//! status each gives the client.

use std::fmt;

/// Which side of the proxy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client.
    Downstream,
    /// The origin server.
    Upstream,
}

/// What went wrong.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Connection refused, unreachable, or TLS handshake failed.
    Connect,
    /// A deadline passed.
    Timeout,
    /// Connection reset or closed before the exchange finished.
    Reset,
    /// Bytes that break HTTP/1.1 framing or syntax.
    Malformed,
    /// No server is up.
    NoServer,
}

/// A proxy failure: the side, the kind, and a cause for the log.
#[derive(Debug, Clone)]
pub struct ProxyError {
    /// Which side failed.
    pub side: Side,
    /// What happened.
    pub kind: ErrorKind,
    /// Detail for the log line.
    pub cause: String,
}

impl ProxyError {
    pub(crate) fn upstream(kind: ErrorKind, cause: impl fmt::Display) -> Self {
        ProxyError {
            side: Side::Upstream,
            kind,
            cause: crate::io_text::without_os_error(&cause.to_string()),
        }
    }

    /// The status the client gets: upstream timeouts are 504, no server 503,
    /// other upstream failures 502; downstream timeouts 408, other faults 400.
    pub fn status(&self) -> u16 {
        match (self.side, self.kind) {
            (Side::Upstream, ErrorKind::Timeout) => 504,
            (Side::Upstream, ErrorKind::NoServer) => 503,
            (Side::Upstream, _) => 502,
            (Side::Downstream, ErrorKind::Timeout) => 408,
            (Side::Downstream, _) => 400,
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
        };
        let what = match self.kind {
            ErrorKind::Connect => "could not be connected to",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Reset => "closed the connection before the exchange finished",
            ErrorKind::Malformed => "sent malformed HTTP/1.1",
            ErrorKind::NoServer => "has no server up",
        };
        write!(f, "the {side} {what}: {}", self.cause)
    }
}

impl std::error::Error for ProxyError {}
