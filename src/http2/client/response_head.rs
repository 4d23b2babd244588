//! The response head (and trailers) a client connection decodes HPACK
//! into, checked field by field as the decoder yields them (RFC 9113
//! §8.3.2, §8.2): `:status` once, three digits, before the regular fields,
//! and no request or unknown pseudo field. The regular fields and their
//! checks are the shared [`FieldList`]'s, as for the server's request
//! head. One head per connection is reused from stream to stream.

use crate::http::field_section::{FieldIter, FieldList};

/// What the fields being decoded are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeadKind {
    /// A response head, interim or final: `:status`, then regular fields.
    Response,
    /// Trailers: regular fields only.
    Trailers,
}

/// A response head, decoded and checked: `:status` present and valid, no
/// connection-specific field, names lowercase. Malformed heads never reach
/// the caller: the stream is reset with PROTOCOL_ERROR instead. Trailers
/// come in the same type, without a status. A clone is the caller's own
/// copy of a head the connection will reuse for the next one.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    /// The fields; the connection releases its buffers when no stream is
    /// open.
    pub(super) list: FieldList,
    status: Option<u16>,
}

impl ResponseHead {
    /// An empty head enforcing the connection's limits.
    pub(super) fn new(max_list_size: u32, max_fields: usize) -> Self {
        ResponseHead {
            list: FieldList::new(max_list_size, max_fields),
            status: None,
        }
    }

    /// A head decoded from `fields` (`:status` among them), for tests
    /// elsewhere that need one as the codec gives it.
    #[cfg(test)]
    pub(crate) fn decoded(fields: &[(&str, &str)]) -> Result<Self, &'static str> {
        let mut h = ResponseHead::new(64 * 1024, 100);
        h.begin(HeadKind::Response);
        for (n, v) in fields {
            h.push(n.as_bytes(), v.as_bytes());
        }
        h.finish(false).map(|()| h)
    }

    /// `:status` (0 in trailers).
    pub fn status(&self) -> u16 {
        self.status.unwrap_or(0)
    }

    /// An interim (1xx) head: the final one is still to come.
    pub fn is_interim(&self) -> bool {
        self.status.is_some_and(|s| s < 200)
    }

    /// The regular fields in the order received.
    pub fn fields(&self) -> FieldIter<'_> {
        self.list.iter()
    }

    /// The first value of the field `name` (given in lowercase, as every
    /// name here is).
    pub fn field(&self, name: &[u8]) -> Option<&[u8]> {
        self.list.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// `content-length`, when the response gave one (already checked to be
    /// a number; the DATA frames are held to it unless the response has no
    /// content).
    pub fn content_length(&self) -> Option<u64> {
        self.list.content_length()
    }

    /// The head passed `max_header_list_size` or `max_header_fields`.
    pub(super) fn oversized(&self) -> bool {
        self.list.oversized()
    }

    /// Starts decoding a new head, keeping the buffers' capacity.
    pub(super) fn begin(&mut self, kind: HeadKind) {
        self.list.begin(kind == HeadKind::Trailers);
        self.status = None;
    }

    /// Takes one decoded field; the first rule it breaks is kept for
    /// [`Self::finish`].
    pub(super) fn push(&mut self, name: &[u8], value: &[u8]) {
        let status = &mut self.status;
        self.list.push_field(name, value, |list, name| {
            match name {
                b"status" => {}
                b"method" | b"scheme" | b"authority" | b"path" | b"protocol" => {
                    return Err("request pseudo field")
                }
                _ => return Err("unknown pseudo field"),
            }
            if status.is_some() {
                return Err("duplicate :status");
            }
            *status = Some(parse_status(value).ok_or(":status not three digits")?);
            // Counts the field against the list's limit.
            list.push_pseudo(&[]);
            Ok(())
        });
    }

    /// Ends the head: the first rule broken, if any. `end_stream`: the
    /// HEADERS frame ended the stream.
    pub(super) fn finish(&mut self, end_stream: bool) -> Result<(), &'static str> {
        if !self.list.checked()? {
            return Ok(());
        }
        match self.status {
            None => Err("no :status"),
            // HTTP/2 has no upgrade (RFC 9113 §8.6).
            Some(101) => Err("101 in HTTP/2"),
            Some(s) if s < 200 && end_stream => Err("interim head ends the stream"),
            Some(_) => Ok(()),
        }
    }
}

/// A status code: three digits, 100 to 999 (RFC 9110 §15 defines 1xx to
/// 5xx; other first digits are carried as the `http` crate carries them).
fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A named malformed head: its fields, and whether HEADERS ends the
    /// stream.
    type Case = (&'static str, &'static [(&'static str, &'static str)], bool);

    fn head(fields: &[(&str, &str)], end_stream: bool) -> Result<ResponseHead, &'static str> {
        let mut h = ResponseHead::new(1024, 8);
        h.begin(HeadKind::Response);
        for (n, v) in fields {
            h.push(n.as_bytes(), v.as_bytes());
        }
        h.finish(end_stream).map(|()| h)
    }

    #[test]
    fn a_valid_head_keeps_its_status_and_fields() {
        let h = head(
            &[(":status", "200"), ("content-length", "5"), ("x-a", "b")],
            false,
        )
        .unwrap();
        assert_eq!((h.status(), h.is_interim()), (200, false));
        assert_eq!(h.content_length(), Some(5));
        assert_eq!(h.fields().count(), 2);
        let h = head(&[(":status", "103"), ("link", "</a>")], false).unwrap();
        assert!(h.is_interim());
        assert!(head(&[(":status", "999")], true).is_ok());
    }

    #[test]
    fn each_malformed_response_head_is_refused() {
        let cases: &[Case] = &[
            ("no status", &[("a", "b")], false),
            (
                "status twice",
                &[(":status", "200"), (":status", "200")],
                false,
            ),
            ("two digits", &[(":status", "20")], false),
            ("four digits", &[(":status", "2000")], false),
            ("letters", &[(":status", "2x0")], false),
            ("leading zero", &[(":status", "099")], false),
            ("101", &[(":status", "101")], false),
            ("interim with END_STREAM", &[(":status", "103")], true),
            (
                "request pseudo",
                &[(":status", "200"), (":path", "/")],
                false,
            ),
            ("method", &[(":method", "GET"), (":status", "200")], false),
            (
                "unknown pseudo",
                &[(":status", "200"), (":foo", "x")],
                false,
            ),
            (
                "pseudo after regular",
                &[("a", "b"), (":status", "200")],
                false,
            ),
            ("uppercase name", &[(":status", "200"), ("A", "b")], false),
            (
                "connection",
                &[(":status", "200"), ("connection", "close")],
                false,
            ),
            (
                "keep-alive",
                &[(":status", "200"), ("keep-alive", "1")],
                false,
            ),
            (
                "proxy-connection",
                &[(":status", "200"), ("proxy-connection", "x")],
                false,
            ),
            (
                "transfer-encoding",
                &[(":status", "200"), ("transfer-encoding", "chunked")],
                false,
            ),
            ("upgrade", &[(":status", "200"), ("upgrade", "h2c")], false),
            ("te gzip", &[(":status", "200"), ("te", "gzip")], false),
            (
                "content-length letters",
                &[(":status", "200"), ("content-length", "x")],
                false,
            ),
            (
                "content-lengths differ",
                &[
                    (":status", "200"),
                    ("content-length", "1"),
                    ("content-length", "2"),
                ],
                false,
            ),
            ("CR in a value", &[(":status", "200"), ("a", "b\rc")], false),
        ];
        for (name, fields, end_stream) in cases {
            assert!(
                head(fields, *end_stream).is_err(),
                "case {name:?} was accepted"
            );
        }
    }

    #[test]
    fn trailers_take_no_pseudo_field_and_oversized_heads_are_marked() {
        let mut h = ResponseHead::new(1024, 8);
        h.begin(HeadKind::Trailers);
        h.push(b"grpc-status", b"0");
        assert!(h.finish(true).is_ok());
        assert_eq!((h.status(), h.fields().count()), (0, 1));
        h.begin(HeadKind::Trailers);
        h.push(b":status", b"200");
        assert!(h.finish(true).is_err());

        let long = "x".repeat(2000);
        let h = head(&[(":status", "200"), ("big", &long)], false).unwrap();
        assert!(h.oversized());
        assert_eq!(h.fields().count(), 0);
    }
}
