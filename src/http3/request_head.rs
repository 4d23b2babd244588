//! A request's field section decoded by QPACK and checked as RFC 9114
//! §4.1.2 and §4.3.1 ask, into the head HTTP/2 fills the same way
//! ([`crate::http::request_fields::RequestHead`]: pseudo fields, names,
//! connection-specific fields, `content-length`). What HTTP/3 adds is the
//! rule that `:authority` or `Host` names the target for `http` and `https`
//! and that the two agree. A malformed request is H3_MESSAGE_ERROR on its
//! stream; the connection goes on.

use super::qpack::{Decoder, SectionOutcome};
use super::{Error, ErrorCode};
use crate::http::request_fields::{HeadKind, RequestHead};

/// What became of a request's (or its trailers') field section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadOutcome {
    /// The head is decoded and valid.
    Ready,
    /// The section waits on QPACK inserts: decode it again when the
    /// decoder hands it back.
    Blocked,
    /// The section passed our SETTINGS_MAX_FIELD_SECTION_SIZE: answer 431.
    TooLarge,
}

/// A new head for a connection's requests: `max_section_size` is our
/// SETTINGS_MAX_FIELD_SECTION_SIZE, `connect_protocol` whether we announced
/// SETTINGS_ENABLE_CONNECT_PROTOCOL.
pub fn new_request_head(
    max_section_size: u64,
    max_fields: usize,
    connect_protocol: bool,
) -> RequestHead {
    let limit = u32::try_from(max_section_size).unwrap_or(u32::MAX);
    RequestHead::new(limit, max_fields, connect_protocol)
}

/// Decodes the request head of `stream_id` from `section` into `head`.
/// `end_stream`: the stream ended with the HEADERS frame (no content).
pub fn decode_request_head(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
    end_stream: bool,
) -> Result<HeadOutcome, Error> {
    decode_into(
        decoder,
        stream_id,
        section,
        head,
        HeadKind::Request,
        end_stream,
    )
}

/// Decodes a request's trailers on `stream_id` into `head` (regular fields
/// only).
pub fn decode_trailers(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
) -> Result<HeadOutcome, Error> {
    decode_into(decoder, stream_id, section, head, HeadKind::Trailers, true)
}

fn decode_into(
    decoder: &mut Decoder,
    stream_id: u64,
    section: &[u8],
    head: &mut RequestHead,
    kind: HeadKind,
    end_stream: bool,
) -> Result<HeadOutcome, Error> {
    head.begin(kind);
    let outcome = decoder.decode_section(stream_id, section, &mut |name, value, _| {
        head.push(name, value)
    })?;
    match outcome {
        SectionOutcome::Blocked => return Ok(HeadOutcome::Blocked),
        SectionOutcome::TooLarge => return Ok(HeadOutcome::TooLarge),
        SectionOutcome::Decoded => {}
    }
    head.finish(end_stream).map_err(malformed)?;
    if kind == HeadKind::Request {
        check_authority(head)?;
    }
    Ok(HeadOutcome::Ready)
}

/// RFC 9114 §4.3.1: for a scheme with an authority (`http`, `https`),
/// `:authority` or `Host` is there and not empty, and when both are they
/// agree.
fn check_authority(head: &RequestHead) -> Result<(), Error> {
    let host = head.fields().find(|(n, _)| *n == b"host").map(|(_, v)| v);
    if let (Some(a), Some(h)) = (head.authority(), host) {
        if a != h {
            return Err(malformed(":authority and host differ"));
        }
    }
    let needs_authority = matches!(head.scheme(), Some(b"http") | Some(b"https"));
    match head.authority().or(host) {
        Some([]) => Err(malformed("empty :authority or host")),
        None if needs_authority => Err(malformed("no :authority or host")),
        _ => Ok(()),
    }
}

fn malformed(why: &'static str) -> Error {
    Error::stream(ErrorCode::MessageError, "The request is malformed.").with_detail(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http3::qpack::{DecoderLimits, Encoder};
    use crate::http3::Scope;

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
    ];

    fn section(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = Encoder::new();
        e.encode_section(
            0,
            &mut fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut out,
        );
        out
    }

    fn decode(
        fields: &[(&str, &str)],
        end_stream: bool,
    ) -> Result<(HeadOutcome, RequestHead), Error> {
        let mut d = Decoder::new(DecoderLimits {
            max_field_section_size: 1024,
            ..DecoderLimits::default()
        });
        let mut head = new_request_head(1024, 100, true);
        let outcome = decode_request_head(&mut d, 0, &section(fields), &mut head, end_stream)?;
        Ok((outcome, head))
    }

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut f = GET.to_vec();
        f.extend_from_slice(extra);
        f
    }

    #[test]
    fn a_valid_request_head_is_ready() {
        let (outcome, head) =
            decode(&with(&[("accept", "*/*"), ("content-length", "3")]), false).unwrap();
        assert_eq!(outcome, HeadOutcome::Ready);
        assert_eq!(head.method(), b"GET");
        assert_eq!(head.path(), Some(&b"/a?b"[..]));
        assert_eq!(head.content_length(), Some(3));
        assert_eq!(head.fields().count(), 2);
    }

    #[test]
    fn malformed_requests_are_message_errors_on_their_stream() {
        type Case = (&'static str, Vec<(&'static str, &'static str)>, bool);
        let cases: Vec<Case> = vec![
            ("uppercase name", with(&[("Accept", "x")]), false),
            ("connection", with(&[("connection", "close")]), false),
            ("keep-alive", with(&[("keep-alive", "1")]), false),
            (
                "proxy-connection",
                with(&[("proxy-connection", "x")]),
                false,
            ),
            (
                "transfer-encoding",
                with(&[("transfer-encoding", "chunked")]),
                false,
            ),
            ("upgrade", with(&[("upgrade", "websocket")]), false),
            ("te other than trailers", with(&[("te", "gzip")]), false),
            (
                "pseudo after regular",
                {
                    let mut f = vec![GET[0], GET[1], ("accept", "x")];
                    f.extend([GET[2], GET[3]]);
                    f
                },
                false,
            ),
            ("unknown pseudo", with(&[(":foo", "x")]), false),
            (
                "response pseudo",
                vec![(":status", "200"), GET[0], GET[1], GET[2], GET[3]],
                false,
            ),
            ("no method", GET[1..].to_vec(), false),
            ("no path", GET[..3].to_vec(), false),
            (
                "CONNECT with path",
                vec![
                    (":method", "CONNECT"),
                    (":authority", "a:443"),
                    (":path", "/"),
                ],
                false,
            ),
            (
                "content-length not a number",
                with(&[("content-length", "x")]),
                false,
            ),
            (
                "content-length without content",
                with(&[("content-length", "2")]),
                true,
            ),
            (
                "authority and host differ",
                with(&[("host", "other.example")]),
                false,
            ),
            ("no authority nor host", vec![GET[0], GET[1], GET[3]], false),
            (
                "empty authority",
                vec![GET[0], GET[1], (":authority", ""), GET[3]],
                false,
            ),
            (
                "protocol without CONNECT",
                with(&[])
                    .into_iter()
                    .chain([(":protocol", "websocket")])
                    .collect(),
                false,
            ),
        ];
        for (what, fields, end_stream) in cases {
            let e = decode(&fields, end_stream)
                .err()
                .unwrap_or_else(|| panic!("{what} was taken"));
            assert_eq!(
                (e.code, e.scope),
                (ErrorCode::MessageError, Scope::Stream),
                "{what}"
            );
            assert!(
                e.to_string().starts_with("The request is malformed: "),
                "{e}"
            );
        }
    }

    #[test]
    fn host_alone_names_the_target_and_connect_needs_no_scheme() {
        let host_only = [GET[0], GET[1], GET[3], ("host", "example.com")];
        assert_eq!(decode(&host_only, true).unwrap().0, HeadOutcome::Ready);
        let same = with(&[("host", "example.com")]);
        assert_eq!(decode(&same, true).unwrap().0, HeadOutcome::Ready);
        let connect = [(":method", "CONNECT"), (":authority", "a:443")];
        assert_eq!(decode(&connect, false).unwrap().0, HeadOutcome::Ready);
    }

    #[test]
    fn extended_connect_is_taken_only_when_announced() {
        let ws = [
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":authority", "a.test"),
            (":path", "/chat"),
        ];
        let (_, head) = decode(&ws, false).unwrap();
        assert_eq!(head.protocol(), Some(&b"websocket"[..]));
        let mut d = Decoder::new(DecoderLimits::default());
        let mut head = new_request_head(1024, 100, false);
        let e = decode_request_head(&mut d, 0, &section(&ws), &mut head, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::MessageError);
    }

    #[test]
    fn an_oversized_head_is_too_large_and_a_blocked_one_waits() {
        let long = "v".repeat(2000);
        let mut big: Vec<(&str, &str)> = GET.to_vec();
        big.push(("x-big", &long));
        let (outcome, _) = decode(&big, false).unwrap();
        assert_eq!(outcome, HeadOutcome::TooLarge);
        // Required Insert Count 1 with an empty table: blocked.
        let mut d = Decoder::new(DecoderLimits::default());
        let mut head = new_request_head(1024, 100, false);
        let outcome = decode_request_head(&mut d, 0, &[0x02, 0x00, 0x80], &mut head, true).unwrap();
        assert_eq!(outcome, HeadOutcome::Blocked);
    }

    #[test]
    fn trailers_take_regular_fields_only() {
        let mut d = Decoder::new(DecoderLimits::default());
        let mut head = new_request_head(1024, 100, false);
        let ok = section(&[("x-checksum", "abc")]);
        assert_eq!(
            decode_trailers(&mut d, 0, &ok, &mut head),
            Ok(HeadOutcome::Ready)
        );
        assert_eq!(head.fields().count(), 1);
        let bad = section(&[(":path", "/")]);
        let e = decode_trailers(&mut d, 0, &bad, &mut head).unwrap_err();
        assert_eq!(e.code, ErrorCode::MessageError);
    }
}
