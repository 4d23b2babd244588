//! The frames of one request stream in the order RFC 9114 §4.1 allows:
//! one HEADERS (the request head), DATA frames (the content), optionally a
//! last HEADERS (trailers), then the end of the stream. Any other order is
//! H3_FRAME_UNEXPECTED. Once the head is decoded, the content is held to
//! its `content-length` (§4.1.2): more DATA, or a stream that ends short,
//! is a malformed request (H3_MESSAGE_ERROR on the stream).

use super::frame_reader::{FrameEvent, FrameLimits, FrameReader, StreamKind};
use super::{Error, ErrorCode, Role};

/// What a request stream carried.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestEvent<'a> {
    /// The request head's encoded field section, for QPACK.
    Head(&'a [u8]),
    /// The head was longer than this side holds: its frame was skipped and
    /// the request is answered 431. The section was never decoded, so the
    /// driver tells the QPACK decoder (`Decoder::stream_cancelled`) that
    /// it will not be acknowledged.
    HeadTooLarge,
    /// A piece of the content, in order.
    Data(&'a [u8]),
    /// The trailers' encoded field section.
    Trailers(&'a [u8]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Head,
    Content,
    AfterTrailers,
}

/// The receiving side of one request stream at a server.
#[derive(Debug)]
pub struct RequestStream {
    frames: FrameReader,
    phase: Phase,
    content_length: Option<u64>,
    received: u64,
}

impl RequestStream {
    /// A new request stream, holding frames within `limits`.
    pub fn new(limits: FrameLimits) -> Self {
        RequestStream {
            frames: FrameReader::new(StreamKind::Request, Role::Server, limits),
            phase: Phase::Head,
            content_length: None,
            received: 0,
        }
    }

    /// Reads from `input` as [`FrameReader::read`] does: how many bytes were
    /// taken and the event, if any.
    pub fn read<'a>(
        &'a mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<RequestEvent<'a>>), Error> {
        let (n, event) = self.frames.read(input)?;
        let event = match event {
            None => None,
            Some(FrameEvent::Headers(section)) => Some(match self.phase {
                Phase::Head => {
                    self.phase = Phase::Content;
                    RequestEvent::Head(section)
                }
                Phase::Content => {
                    check_length_at_end(self.content_length, self.received)?;
                    self.phase = Phase::AfterTrailers;
                    RequestEvent::Trailers(section)
                }
                Phase::AfterTrailers => return Err(after_trailers()),
            }),
            Some(FrameEvent::HeadersTooLarge(_)) => match self.phase {
                Phase::Head => {
                    self.phase = Phase::Content;
                    Some(RequestEvent::HeadTooLarge)
                }
                Phase::Content => {
                    return Err(Error::stream(
                        ErrorCode::ExcessiveLoad,
                        "The request's trailers are larger than this side holds.",
                    ))
                }
                Phase::AfterTrailers => return Err(after_trailers()),
            },
            Some(FrameEvent::Data(piece)) => match self.phase {
                Phase::Head => {
                    return Err(Error::connection(
                        ErrorCode::FrameUnexpected,
                        "The request sent DATA before its HEADERS.",
                    ))
                }
                Phase::Content => {
                    self.received += piece.len() as u64;
                    if self.content_length.is_some_and(|n| self.received > n) {
                        return Err(Error::stream(
                            ErrorCode::MessageError,
                            "The request's content is longer than its content-length.",
                        ));
                    }
                    Some(RequestEvent::Data(piece))
                }
                Phase::AfterTrailers => return Err(after_trailers()),
            },
            Some(_) => unreachable!("the parser lets only message frames through"),
        };
        Ok((n, event))
    }

    /// The head was decoded: its `content-length`, which the content must
    /// match. DATA already received counts.
    pub fn set_content_length(&mut self, length: Option<u64>) -> Result<(), Error> {
        self.content_length = length;
        if length.is_some_and(|n| self.received > n) {
            return Err(content_length_mismatch());
        }
        Ok(())
    }

    /// The frame credits this stream's frames cost since the last call
    /// ([`super::frame_budget`]).
    pub fn take_spent(&mut self) -> u64 {
        self.frames.take_spent()
    }

    /// The content received so far, in bytes.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The client ended the stream: an error if it ended inside a frame,
    /// before the head, or short of `content-length`.
    pub fn finish(&self) -> Result<(), Error> {
        self.frames.finish()?;
        if self.phase == Phase::Head {
            return Err(Error::stream(
                ErrorCode::RequestIncomplete,
                "The request stream ended before its head.",
            ));
        }
        check_length_at_end(self.content_length, self.received)
    }
}

/// The content is over: it must be as long as `content-length` said.
fn check_length_at_end(content_length: Option<u64>, received: u64) -> Result<(), Error> {
    match content_length {
        Some(n) if n != received => Err(content_length_mismatch()),
        _ => Ok(()),
    }
}

fn content_length_mismatch() -> Error {
    Error::stream(
        ErrorCode::MessageError,
        "The request's content does not match its content-length.",
    )
}

fn after_trailers() -> Error {
    Error::connection(
        ErrorCode::FrameUnexpected,
        "The request sent a frame after its trailers.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http3::frame::{self, write_header, write_headers};

    fn data(payload: &[u8], out: &mut Vec<u8>) {
        write_header(frame::DATA, payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    /// Reads all of `bytes`, setting `content_length` once the head comes;
    /// the content received, or the first error.
    fn run(bytes: &[u8], content_length: Option<u64>) -> Result<(RequestStream, Vec<u8>), Error> {
        let mut s = RequestStream::new(FrameLimits::default());
        let mut body = Vec::new();
        let mut input = bytes;
        while !input.is_empty() {
            let (n, e) = s.read(input)?;
            input = &input[n..];
            let head = matches!(e, Some(RequestEvent::Head(_)));
            if let Some(RequestEvent::Data(d)) = e {
                body.extend_from_slice(d);
            }
            if head {
                s.set_content_length(content_length)?;
            }
        }
        s.finish()?;
        Ok((s, body))
    }

    #[test]
    fn head_content_and_trailers_in_order() {
        let mut b = Vec::new();
        write_headers(&[0, 0, 0xd1], &mut b);
        data(b"abc", &mut b);
        data(b"", &mut b);
        data(b"de", &mut b);
        write_headers(&[0, 0], &mut b);
        let (s, body) = run(&b, Some(5)).unwrap();
        assert_eq!((body.as_slice(), s.received()), (&b"abcde"[..], 5));
        assert!(run(&b, None).is_ok());
    }

    #[test]
    fn frames_out_of_order_are_unexpected() {
        let mut before = Vec::new();
        data(b"x", &mut before);
        write_headers(&[0, 0], &mut before);
        assert_eq!(
            run(&before, None).unwrap_err().code,
            ErrorCode::FrameUnexpected
        );

        let mut after = Vec::new();
        write_headers(&[0, 0], &mut after);
        write_headers(&[0, 0], &mut after);
        data(b"x", &mut after);
        assert_eq!(
            run(&after, None).unwrap_err().code,
            ErrorCode::FrameUnexpected
        );

        let mut third = Vec::new();
        for _ in 0..3 {
            write_headers(&[0, 0], &mut third);
        }
        assert_eq!(
            run(&third, None).unwrap_err().code,
            ErrorCode::FrameUnexpected
        );
    }

    #[test]
    fn content_length_is_held_against_data() {
        let mut b = Vec::new();
        write_headers(&[0, 0], &mut b);
        data(b"abc", &mut b);
        for (len, ok) in [
            (Some(3), true),
            (Some(2), false),
            (Some(4), false),
            (Some(0), false),
        ] {
            let r = run(&b, len);
            assert_eq!(r.is_ok(), ok, "content-length {len:?}");
            if let Err(e) = r {
                assert_eq!(
                    (e.code, e.scope),
                    (ErrorCode::MessageError, crate::http3::Scope::Stream)
                );
            }
        }
        // Trailers end the content: it must be whole by then.
        let mut t = b.clone();
        write_headers(&[0, 0], &mut t);
        assert_eq!(run(&t, Some(4)).unwrap_err().code, ErrorCode::MessageError);
        // DATA seen before the length was known counts too.
        let mut s = RequestStream::new(FrameLimits::default());
        let mut input = &b[..];
        while !input.is_empty() {
            let (n, _) = s.read(input).unwrap();
            input = &input[n..];
        }
        assert_eq!(
            s.set_content_length(Some(2)).unwrap_err().code,
            ErrorCode::MessageError
        );
    }

    #[test]
    fn a_stream_without_a_head_is_incomplete() {
        assert_eq!(
            run(&[], None).unwrap_err().code,
            ErrorCode::RequestIncomplete
        );
        let mut cut = Vec::new();
        write_headers(&[0, 0, 0xd1], &mut cut);
        cut.pop();
        assert_eq!(run(&cut, None).unwrap_err().code, ErrorCode::FrameError);
    }

    #[test]
    fn an_oversized_head_is_reported_and_the_stream_goes_on() {
        let limits = FrameLimits {
            max_field_section: 4,
            ..FrameLimits::default()
        };
        let mut b = Vec::new();
        write_headers(&[0; 5], &mut b);
        data(b"x", &mut b);
        let mut s = RequestStream::new(limits);
        let (n, e) = s.read(&b).unwrap();
        assert_eq!(e, Some(RequestEvent::HeadTooLarge));
        let (_, e) = s.read(&b[n..]).unwrap();
        assert_eq!(
            e,
            Some(RequestEvent::Data(b"x")),
            "the skipped payload is no event"
        );
    }
}
