//! How a plain connection on a listener with `http2 = true` begins: the
//! HTTP/2 connection preface (prior knowledge, RFC 9113 §3.3), an HTTP/1
//! request, or neither. Neither is an invalid preface, a connection error
//! (RFC 9113 §3.4): the connection closes without an answer, since HTTP/1
//! bytes would be garbage to an HTTP/2 client, while every request that is
//! HTTP/1 at all still reaches the HTTP/1 driver and its status answers.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::deadline;

/// Most input read and dropped while closing after an invalid preface.
const CLOSE_DRAIN_BYTES: usize = 64 * 1024;

/// Longest wait for the peer to stop sending after an invalid preface.
const CLOSE_DRAIN_WAIT: Duration = Duration::from_secs(1);

/// How a plain connection on a listener with `http2 = true` opens.
#[derive(Debug, PartialEq)]
pub(crate) enum PlainOpening {
    /// The HTTP/2 connection preface (prior knowledge).
    H2,
    /// Anything an HTTP/1 parser should see, and answer if it is bad.
    Http1,
    /// A first line that is no HTTP/1 request line (it names no `HTTP/`
    /// version), or the preface's request line with a wrong rest: an invalid
    /// HTTP/2 preface, closed without an answer.
    Neither,
}

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Tells the HTTP/2 preface from an HTTP/1 request by looking at the first
/// bytes without consuming them, within `limit`. Only a preface split across
/// segments is waited for; an HTTP/1 request is told apart by its first
/// segment.
pub(crate) async fn plain_opening(stream: &TcpStream, limit: Duration) -> PlainOpening {
    let mut buf = [0u8; 256];
    let peek = async {
        loop {
            let n = match stream.peek(&mut buf).await {
                Ok(n) if n > 0 => n,
                _ => return PlainOpening::Http1,
            };
            match classify_opening(&buf[..n]) {
                Some(opening) => return opening,
                // A preface split across segments: wait for the rest.
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    };
    deadline::within(limit, peek)
        .await
        .unwrap_or(PlainOpening::Http1)
}

/// What the first bytes of a plain connection are; `None` while they are a
/// strict prefix of the preface.
fn classify_opening(first: &[u8]) -> Option<PlainOpening> {
    let n = first.len().min(H2_PREFACE.len());
    if first[..n] == H2_PREFACE[..n] {
        return (n == H2_PREFACE.len()).then_some(PlainOpening::H2);
    }
    // The preface's request line with something else after it.
    if first.starts_with(&H2_PREFACE[..16]) {
        return Some(PlainOpening::Neither);
    }
    // The first line, when the first segment holds it whole (leading empty
    // lines are HTTP/1's to skip); a longer one is the parser's.
    let Some(end) = first.iter().position(|&b| b == b'\n') else {
        return Some(PlainOpening::Http1);
    };
    let line = first[..end].strip_suffix(b"\r").unwrap_or(&first[..end]);
    if line.is_empty() {
        return Some(PlainOpening::Http1);
    }
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or(line);
    Some(if version.starts_with(b"HTTP/") {
        PlainOpening::Http1
    } else {
        PlainOpening::Neither
    })
}

/// Closes after an invalid preface with a FIN, not a reset: what the client
/// sent is read and dropped (bounded in bytes and time), since closing a
/// socket with unread input makes the kernel send RST, which a client may
/// read as a network failure rather than a refusal.
pub(crate) async fn close_invalid_preface(mut stream: TcpStream) {
    let drain = async {
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let mut left = CLOSE_DRAIN_BYTES;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = deadline::within(CLOSE_DRAIN_WAIT, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_opening_is_the_preface_an_http1_request_or_neither() {
        use PlainOpening::{Http1, Neither, H2};
        assert_eq!(classify_opening(H2_PREFACE), Some(H2));
        assert_eq!(
            classify_opening(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0"),
            Some(H2)
        );
        assert_eq!(classify_opening(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(
            classify_opening(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
            Some(Neither)
        );
        assert_eq!(
            classify_opening(b"INVALID CONNECTION PREFACE\r\n\r\n"),
            Some(Neither)
        );
        assert_eq!(classify_opening(b"GET /\r\n"), Some(Neither));
        assert_eq!(
            classify_opening(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Some(Http1)
        );
        assert_eq!(classify_opening(b"GET / HTTP/1.0\n\n"), Some(Http1));
        // Malformed HTTP/1 is the parser's to answer (400, 505).
        assert_eq!(classify_opening(b"GET /a b HTTP/1.1\r\n\r\n"), Some(Http1));
        assert_eq!(classify_opening(b"GET / HTTP/3.0\r\n\r\n"), Some(Http1));
        assert_eq!(classify_opening(b"\r\nGET / HTTP/1.1\r\n\r\n"), Some(Http1));
        // A first line longer than the first segment.
        assert_eq!(classify_opening(b"GET /very/long/pa"), Some(Http1));
        assert_eq!(classify_opening(b"P"), None);
        assert_eq!(classify_opening(b"POST / HTTP/1.1\r\n"), Some(Http1));
    }
}
