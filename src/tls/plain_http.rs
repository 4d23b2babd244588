//! Plain HTTP sent to a TLS port (`http://host:443/`, a proxy speaking the wrong
//! scheme): answered with a readable `400` rather than a TLS alert the client
//! cannot show, as nginx does ("The plain HTTP request was sent to HTTPS port").

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The answer, then the connection closes.
const ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Length: 88\r\n\
Connection: close\r\n\
\r\n\
This port speaks HTTPS: the plain HTTP request was sent to an HTTPS port. Use https://.\n";

/// Longest wait, and most bytes read and dropped, after the answer so that the
/// client's unread request does not turn the close into a reset that hides it.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

/// Whether a connection's first bytes are an HTTP request line rather than a TLS
/// record: a record starts with its content type (20..=23, or 0x80 for an SSLv2
/// hello); a request starts with a method, upper-case letters then a space.
pub fn is_plain_http(first: &[u8]) -> bool {
    let method_len = first
        .iter()
        .take(17)
        .take_while(|b| b.is_ascii_uppercase())
        .count();
    method_len > 0 && first.get(method_len).is_none_or(|&b| b == b' ')
}

/// Writes the 400 on the raw socket, stops writing, then reads and drops what the
/// client still sends for a moment before the close.
pub async fn answer_plain_http(tcp: &mut (impl AsyncRead + AsyncWrite + Unpin)) {
    let write = async {
        tcp.write_all(ANSWER).await?;
        tcp.shutdown().await
    };
    if crate::deadline::within(LINGER, write).await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = crate::deadline::within(LINGER, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_request_lines_from_tls_records() {
        assert!(is_plain_http(b"GET / HTTP/1.1\r\n"));
        assert!(is_plain_http(b"OPTIONS * HTTP/1.1\r\n"));
        assert!(is_plain_http(b"G"));
        assert!(!is_plain_http(b"\x16\x03\x01\x02\x00\x01"));
        assert!(!is_plain_http(b"\x80\x2e\x01"));
        assert!(!is_plain_http(b""));
        assert!(!is_plain_http(b"get / HTTP/1.1"));
        assert!(!is_plain_http(b"GET/"));
        let body = &ANSWER[ANSWER.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
        assert_eq!(body.len(), 88);
        assert!(body.starts_with(b"This port speaks HTTPS"));
    }
}
