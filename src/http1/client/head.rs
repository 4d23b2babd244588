//! The response-head reader of the clients that answer nobody (health checks,
//! `pier bench`). Interim 1xx heads (RFC 9110 §15.2) other than 101 are
//! skipped: such a client decides for itself when to send a body, and `103
//! Early Hints` is advice it does not act on. The proxy reads heads one at a
//! time instead, to relay interim ones to its client
//! (`handler/proxy/interim.rs`). The final head's framing comes from
//! [`parse_response`] (RFC 9112 §6.3, given the request's method), and
//! [`body_decoder`] turns it into the decoder that reads the body.

use crate::http1::body::BodyDecoder;
use crate::http1::parse::{BodyKind, Limits, Method, Parsed};
use crate::http1::response::{parse_response, ParsedResponseHead, ResponseBody, ResponseError};

/// Where the final response head stands at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalHead {
    /// Bytes of complete interim heads in front of it, for the caller to drop
    /// (they also tell that the server has answered something).
    pub interim: usize,
    /// The final head is complete: `head` describes it, starting at `interim`.
    pub complete: bool,
}

pub use crate::http::status::is_interim;

/// Parses the response heads at the start of `buf`, skipping interim ones,
/// until the final head (complete or not yet).
pub fn parse_final_head(
    buf: &[u8],
    limits: &Limits,
    method: Method,
    head: &mut ParsedResponseHead,
) -> Result<FinalHead, ResponseError> {
    let mut interim = 0;
    loop {
        let rest = buf.get(interim..).unwrap_or(&[]);
        if rest.is_empty() {
            return Ok(FinalHead {
                interim,
                complete: false,
            });
        }
        match parse_response(rest, limits, method, head)? {
            Parsed::Partial => {
                return Ok(FinalHead {
                    interim,
                    complete: false,
                })
            }
            Parsed::Complete if is_interim(head.status) => interim += head.head_len,
            Parsed::Complete => {
                return Ok(FinalHead {
                    interim,
                    complete: true,
                })
            }
        }
    }
}

/// The decoder of a response body framed as `body`, `None` when there is none.
pub fn body_decoder(body: ResponseBody) -> Option<BodyDecoder> {
    match body {
        ResponseBody::None => None,
        ResponseBody::Length(n) => Some(BodyDecoder::new(BodyKind::Length(n))),
        ResponseBody::Chunked => Some(BodyDecoder::new(BodyKind::Chunked)),
        ResponseBody::UntilClose => Some(BodyDecoder::until_close()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(buf: &[u8], method: Method) -> (Result<FinalHead, ResponseError>, ParsedResponseHead) {
        let mut head = ParsedResponseHead::new();
        let r = parse_final_head(buf, &Limits::default(), method, &mut head);
        (r, head)
    }

    #[test]
    fn interim_heads_are_skipped_and_counted() {
        let buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        let (r, head) = scan(buf, Method::Get);
        let r = r.unwrap();
        assert!(r.complete);
        assert_eq!(&buf[r.interim..r.interim + 15], b"HTTP/1.1 200 OK");
        assert_eq!(head.status, 200);
        assert_eq!(head.body, ResponseBody::Length(3));
        assert_eq!(&buf[r.interim + head.head_len..], b"abc");
    }

    #[test]
    fn a_final_head_in_pieces_waits_past_the_interim_ones() {
        let buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 413 Too";
        let (r, _) = scan(buf, Method::Post);
        assert_eq!(
            r.unwrap(),
            FinalHead {
                interim: 25,
                complete: false
            }
        );
        let (r, _) = scan(b"", Method::Get);
        assert_eq!(
            r.unwrap(),
            FinalHead {
                interim: 0,
                complete: false
            }
        );
    }

    #[test]
    fn switching_protocols_is_final_and_bad_bytes_are_errors() {
        let (r, head) = scan(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            Method::Get,
        );
        assert!(r.unwrap().complete);
        assert_eq!(head.status, 101);
        let (r, _) = scan(b"HTTP/1.1 100 Continue\r\n\r\nxyz 200\r\n\r\n", Method::Get);
        assert!(r.is_err());
    }

    #[test]
    fn framing_gives_the_matching_decoder() {
        assert!(body_decoder(ResponseBody::None).is_none());
        let mut d = body_decoder(ResponseBody::Length(2)).unwrap();
        let step = d.decode(b"abcd").unwrap();
        assert_eq!((step.data, step.done), (&b"ab"[..], true));
        let mut d = body_decoder(ResponseBody::Chunked).unwrap();
        let step = d.decode(b"1\r\nx\r\n0\r\n\r\n").unwrap();
        assert_eq!(step.data, b"x");
        let mut d = body_decoder(ResponseBody::UntilClose).unwrap();
        assert!(!d.decode(b"zz").unwrap().done);
        assert!(d.finish().is_ok());
    }
}
