//! The request head (and trailers) an HTTP/2 or HTTP/3 connection decodes
//! its field sections into (HPACK or QPACK), checked field by field as the
//! decoder yields them (RFC 9113 §8.2, §8.3.1; RFC 9114 §4.2, §4.3.1; the
//! two protocols ask the same of a request's fields). One head per
//! connection is reused from stream to stream; the regular fields and their
//! checks are the shared [`FieldList`]'s, the request's pseudo fields are
//! kept here.

use crate::http::field_section::{FieldList, Span};

/// The pseudo fields of a request, in the order [`RequestHead`] keeps them.
const METHOD: usize = 0;
const SCHEME: usize = 1;
const AUTHORITY: usize = 2;
const PATH: usize = 3;
/// `:protocol`, of an extended CONNECT (RFC 8441 §4).
const PROTOCOL: usize = 4;

/// What the fields being decoded are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeadKind {
    /// A request head: pseudo fields first, then regular fields.
    Request,
    /// Trailers: regular fields only.
    Trailers,
}

/// A request head, decoded and checked (RFC 9113 §8.2, §8.3.1): pseudo
/// fields present and valid, no connection-specific field, names lowercase.
/// Malformed heads never reach the driver: the stream is reset instead
/// (PROTOCOL_ERROR in HTTP/2, H3_MESSAGE_ERROR in HTTP/3). Trailers come in the same type, without pseudo
/// fields.
pub struct RequestHead {
    /// The fields; the connection releases its buffers when no stream is
    /// open.
    pub(crate) list: FieldList,
    pseudo: [Option<Span>; 5],
    /// `:protocol` is taken (SETTINGS_ENABLE_CONNECT_PROTOCOL was announced).
    connect_protocol: bool,
    /// The block was the connection's last request block again, so these
    /// are that request's fields, unchanged.
    repeated: bool,
}

impl RequestHead {
    /// An empty head enforcing the connection's limits; `connect_protocol`:
    /// extended CONNECT is taken.
    pub(crate) fn new(max_list_size: u32, max_fields: usize, connect_protocol: bool) -> Self {
        RequestHead {
            list: FieldList::new(max_list_size, max_fields),
            pseudo: [None; 5],
            connect_protocol,
            repeated: false,
        }
    }

    /// The fields are those of the connection's last request, decoded from
    /// the same block over the same HPACK table: whatever a reader made of
    /// that head (with the same `end_stream`) it may take again.
    pub fn repeated(&self) -> bool {
        self.repeated
    }

    /// Marks the head as the last request's again, or as new.
    pub(crate) fn set_repeated(&mut self, repeated: bool) {
        self.repeated = repeated;
    }

    /// `:method`.
    pub fn method(&self) -> &[u8] {
        self.pseudo_value(METHOD).unwrap_or(&[])
    }

    /// `:scheme` (absent for CONNECT).
    pub fn scheme(&self) -> Option<&[u8]> {
        self.pseudo_value(SCHEME)
    }

    /// `:authority`.
    pub fn authority(&self) -> Option<&[u8]> {
        self.pseudo_value(AUTHORITY)
    }

    /// `:path` (absent for CONNECT).
    pub fn path(&self) -> Option<&[u8]> {
        self.pseudo_value(PATH)
    }

    /// `:protocol`: the request is an extended CONNECT (RFC 8441 §4, RFC 9220) opening
    /// a tunnel of that protocol (`websocket`) on the stream.
    pub fn protocol(&self) -> Option<&[u8]> {
        self.pseudo_value(PROTOCOL)
    }

    /// The regular fields in the order received (`cookie` fields as sent,
    /// one per crumb or not: joining them is the reader's business).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.list.iter()
    }

    /// The regular fields copied out, for trailers kept past their section
    /// (a field whose name is not UTF-8 cannot have passed validation).
    pub fn owned_fields(&self) -> Vec<crate::http::OwnedField> {
        self.fields()
            .filter_map(|(name, value)| {
                Some(crate::http::OwnedField::new(
                    std::str::from_utf8(name).ok()?,
                    value,
                ))
            })
            .collect()
    }

    /// Whether the request carried a `priority` field (RFC 9218).
    pub fn has_priority(&self) -> bool {
        self.list.has_priority()
    }

    /// `content-length`, when the request gave one (already checked to be a
    /// number, and the DATA frames are held to it).
    pub fn content_length(&self) -> Option<u64> {
        self.list.content_length()
    }

    /// The head passed `max_header_list_size` or `max_header_fields`; its
    /// fields are not kept (pseudo fields are, when they fit).
    pub fn oversized(&self) -> bool {
        self.list.oversized()
    }

    /// Every field's bytes are ones an HTTP/1 head may carry, names tokens
    /// and values visible bytes, SP and HTAB (seen as they were checked
    /// here): a head built from this one need not check them again.
    pub(crate) fn plain(&self) -> bool {
        self.list.plain()
    }

    fn pseudo_value(&self, i: usize) -> Option<&[u8]> {
        self.pseudo[i].map(|s| self.list.pseudo(s))
    }

    /// Starts decoding a new head, keeping the buffers' capacity.
    pub(crate) fn begin(&mut self, kind: HeadKind) {
        self.list.begin(kind == HeadKind::Trailers);
        self.pseudo = [None; 5];
        self.repeated = false;
    }

    /// Takes one decoded field; the first rule it breaks is kept for
    /// [`Self::finish`].
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) {
        let (pseudo, connect_protocol) = (&mut self.pseudo, self.connect_protocol);
        self.list.push_field(name, value, |list, name| {
            let i = match name {
                b"method" => METHOD,
                b"scheme" => SCHEME,
                b"authority" => AUTHORITY,
                b"path" => PATH,
                b"protocol" if connect_protocol => PROTOCOL,
                b"status" => return Err("response pseudo field"),
                _ => return Err("unknown pseudo field"),
            };
            if pseudo[i].is_some() {
                return Err("duplicate pseudo field");
            }
            // Kept even when oversized, so the driver can answer 431 to
            // the right request.
            pseudo[i] = Some(list.push_pseudo(value));
            Ok(())
        });
    }

    /// Ends the head: the first rule broken, if any. `end_stream`: the
    /// HEADERS frame ended the stream (a request head then promises no body).
    pub(crate) fn finish(&mut self, end_stream: bool) -> Result<(), &'static str> {
        if !self.list.checked()? {
            return Ok(());
        }
        if self.pseudo[METHOD].is_none() {
            return Err("no :method");
        }
        if self.pseudo[PROTOCOL].is_some() {
            // RFC 8441 §4: an extended CONNECT names its target as a request
            // does; `:protocol` on any other method is malformed.
            if self.method() != b"CONNECT" {
                return Err(":protocol without CONNECT");
            }
            if self.pseudo[SCHEME].is_none() || self.pseudo[AUTHORITY].is_none() {
                return Err("extended CONNECT without :scheme or :authority");
            }
            if self.path().is_none_or(<[u8]>::is_empty) {
                return Err("extended CONNECT without :path");
            }
        } else if self.method() == b"CONNECT" {
            if self.pseudo[SCHEME].is_some() || self.pseudo[PATH].is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            if self.pseudo[AUTHORITY].is_none() {
                return Err("CONNECT without :authority");
            }
        } else {
            if self.pseudo[SCHEME].is_none() {
                return Err("no :scheme");
            }
            match self.path() {
                None => return Err("no :path"),
                Some([]) => return Err("empty :path"),
                Some(_) => {}
            }
        }
        if end_stream && self.content_length().is_some_and(|n| n > 0) {
            return Err("content-length without a body");
        }
        Ok(())
    }
}

#[cfg(test)]
impl RequestHead {
    /// The checked head of `fields` (pseudo fields first) as a connection
    /// would deliver it, for the tests of code that reads heads.
    pub fn decoded_for_test(
        fields: &[(&str, &str)],
        max_list_size: u32,
        end_stream: bool,
    ) -> Result<Self, &'static str> {
        let mut head = RequestHead::new(max_list_size, 100, true);
        head.begin(HeadKind::Request);
        for (name, value) in fields {
            head.push(name.as_bytes(), value.as_bytes());
        }
        head.finish(end_stream)?;
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)], end_stream: bool) -> Result<RequestHead, &'static str> {
        let mut h = RequestHead::new(1024, 8, true);
        h.begin(HeadKind::Request);
        for (n, v) in fields {
            h.push(n.as_bytes(), v.as_bytes());
        }
        h.finish(end_stream).map(|()| h)
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
    ];

    #[test]
    fn a_valid_head_keeps_its_fields() {
        let mut f = GET.to_vec();
        f.extend([("accept", "*/*"), ("cookie", "a=1"), ("cookie", "b=2")]);
        f.push(("content-length", "12"));
        f.push(("te", "trailers"));
        let h = head(&f, false).unwrap();
        assert_eq!(h.method(), b"GET");
        assert_eq!(h.scheme(), Some(&b"https"[..]));
        assert_eq!(h.authority(), Some(&b"example.com"[..]));
        assert_eq!(h.path(), Some(&b"/a?b"[..]));
        assert_eq!(h.content_length(), Some(12));
        let got: Vec<_> = h.fields().collect();
        assert_eq!(got[0], (&b"accept"[..], &b"*/*"[..]));
        assert_eq!(got[2], (&b"cookie"[..], &b"b=2"[..]));
        assert_eq!(got.len(), 5);
        assert!(!h.oversized());
    }

    #[test]
    fn connect_needs_only_method_and_authority() {
        let h = head(&[(":method", "CONNECT"), (":authority", "a:443")], false).unwrap();
        assert_eq!((h.scheme(), h.path()), (None, None));
    }

    #[test]
    fn extended_connect_names_its_protocol_and_target() {
        let ws = [
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":authority", "a.test"),
            (":path", "/chat?room=1"),
        ];
        let h = head(&ws, false).unwrap();
        assert_eq!(h.protocol(), Some(&b"websocket"[..]));
        assert_eq!(h.path(), Some(&b"/chat?room=1"[..]));
        let plain = head(&[(":method", "CONNECT"), (":authority", "a:443")], false).unwrap();
        assert_eq!(plain.protocol(), None);

        let without = |name: &str| {
            let f: Vec<_> = ws.iter().copied().filter(|(n, _)| *n != name).collect();
            head(&f, false).map(|_| ())
        };
        assert_eq!(
            without(":scheme"),
            Err("extended CONNECT without :scheme or :authority")
        );
        assert_eq!(
            without(":authority"),
            Err("extended CONNECT without :scheme or :authority")
        );
        assert_eq!(without(":path"), Err("extended CONNECT without :path"));
        let mut get = ws;
        get[0] = (":method", "GET");
        assert_eq!(
            head(&get, false).map(|_| ()),
            Err(":protocol without CONNECT")
        );

        // Not announced: `:protocol` is an unknown pseudo field.
        let mut h = RequestHead::new(1024, 8, false);
        h.begin(HeadKind::Request);
        for (n, v) in ws {
            h.push(n.as_bytes(), v.as_bytes());
        }
        assert_eq!(h.finish(false), Err("unknown pseudo field"));
    }

    #[test]
    fn each_malformed_head_is_refused() {
        let get = |extra: &[(&'static str, &'static str)]| {
            let mut f = GET.to_vec();
            f.extend_from_slice(extra);
            f
        };
        type Case = (&'static str, Vec<(&'static str, &'static str)>, bool);
        let cases: Vec<Case> = vec![
            ("uppercase name", get(&[("Accept", "x")]), false),
            ("space in name", get(&[("a b", "x")]), false),
            ("colon in name", get(&[("a:b", "x")]), false),
            ("non-ascii name", get(&[("caf\u{e9}", "x")]), false),
            ("empty name", get(&[("", "x")]), false),
            (
                "pseudo after regular",
                {
                    let mut f = GET[..3].to_vec();
                    f.push(("accept", "x"));
                    f.push((":path", "/"));
                    f
                },
                false,
            ),
            ("unknown pseudo", get(&[(":protocol", "websocket")]), false),
            (
                "response pseudo",
                {
                    let mut f = vec![(":status", "200")];
                    f.extend(GET);
                    f
                },
                false,
            ),
            (
                "duplicate pseudo",
                {
                    let mut f = GET.to_vec();
                    f.insert(1, (":method", "GET"));
                    f
                },
                false,
            ),
            ("no method", GET[1..].to_vec(), false),
            ("no scheme", vec![GET[0], GET[2], GET[3]], false),
            ("no path", GET[..3].to_vec(), false),
            (
                "empty path",
                vec![GET[0], GET[1], GET[2], (":path", "")],
                false,
            ),
            (
                "CONNECT with path",
                vec![(":method", "CONNECT"), (":authority", "a"), (":path", "/")],
                false,
            ),
            (
                "CONNECT with scheme",
                vec![
                    (":method", "CONNECT"),
                    (":authority", "a"),
                    (":scheme", "https"),
                ],
                false,
            ),
            (
                "CONNECT without authority",
                vec![(":method", "CONNECT")],
                false,
            ),
            ("connection", get(&[("connection", "close")]), false),
            ("keep-alive", get(&[("keep-alive", "1")]), false),
            ("proxy-connection", get(&[("proxy-connection", "x")]), false),
            (
                "transfer-encoding",
                get(&[("transfer-encoding", "chunked")]),
                false,
            ),
            ("upgrade", get(&[("upgrade", "h2c")]), false),
            ("te gzip", get(&[("te", "gzip")]), false),
            (
                "content-length letters",
                get(&[("content-length", "1a")]),
                false,
            ),
            (
                "content-length empty",
                get(&[("content-length", "")]),
                false,
            ),
            (
                "content-length overflow",
                get(&[("content-length", "99999999999999999999")]),
                false,
            ),
            (
                "content-length twice",
                get(&[("content-length", "1"), ("content-length", "2")]),
                false,
            ),
            (
                "content-length without body",
                get(&[("content-length", "1")]),
                true,
            ),
            ("NUL in value", get(&[("a", "x\0y")]), false),
            ("CR in value", get(&[("a", "x\ry")]), false),
            ("LF in value", get(&[("a", "x\ny")]), false),
            ("leading space", get(&[("a", " x")]), false),
            ("trailing tab", get(&[("a", "x\t")]), false),
            (
                "bad pseudo value",
                vec![GET[0], GET[1], GET[2], (":path", "/\n")],
                false,
            ),
        ];
        for (name, fields, end_stream) in cases {
            assert!(
                head(&fields, end_stream).is_err(),
                "case {name:?} was accepted"
            );
        }
        assert!(head(&get(&[("content-length", "0")]), true).is_ok());
        assert!(head(
            &get(&[("content-length", "3"), ("content-length", "3")]),
            false
        )
        .is_ok());
    }

    /// The codec's one pass over each field both refuses what RFC 9113
    /// §8.2 refuses, with the same reasons, and learns whether an HTTP/1
    /// head may carry the bytes, which the head builder then trusts.
    #[test]
    fn one_pass_refuses_as_before_and_tells_plain_bytes() {
        let get = |extra: (&'static str, &'static str)| {
            let mut f = GET.to_vec();
            f.push(extra);
            f
        };
        for (field, why) in [
            (("Accept", "x"), "uppercase field name"),
            (("aCcept", "x"), "uppercase field name"),
            (("a b", "x"), "invalid character in field name"),
            (("a:b", "x"), "invalid character in field name"),
            (("caf\u{e9}", "x"), "invalid character in field name"),
            (("", "x"), "empty field name"),
            (("a", "x\0y"), "NUL, CR or LF in a field value"),
            (("a", "x\ry"), "NUL, CR or LF in a field value"),
            (("a", "\tx\ny"), "NUL, CR or LF in a field value"),
            (("a", " x"), "whitespace around a field value"),
            (("a", "x\t"), "whitespace around a field value"),
            (("connection", "close"), "connection-specific field"),
            (("te", "gzip"), "te other than trailers"),
        ] {
            assert_eq!(head(&get(field), false).err(), Some(why), "{field:?}");
        }
        let mut pseudo = GET.to_vec();
        pseudo[3] = (":path", "/\r");
        assert_eq!(
            head(&pseudo, false).err(),
            Some("NUL, CR or LF in a field value")
        );

        let plain = |extra: (&'static str, &'static str)| head(&get(extra), false).unwrap().plain();
        assert!(plain(("user-agent", "curl/8 (x; y)\tz")), "a usual head");
        assert!(plain(("x-!#$%&'*+-.^_`|~09az", "v")), "every tchar");
        assert!(plain(("a", "caf\u{e9}")), "obs-text in a value");
        // Valid HTTP/2, refused by an HTTP/1 head: the builder looks again.
        assert!(!plain(("a(b", "v")), "a name byte that is no tchar");
        assert!(!plain(("a\"b", "v")), "a quote in a name");
        assert!(!plain(("a", "x\u{1}y")), "a control byte");
        assert!(!plain(("a", "x\u{7f}")), "DEL");
        pseudo[3] = (":path", "/\u{7f}");
        assert!(
            !head(&pseudo, false).unwrap().plain(),
            "DEL in a pseudo field"
        );
        let mut h = head(&get(("a", "x\u{1}")), false).unwrap();
        h.begin(HeadKind::Request);
        assert!(h.plain(), "each head starts plain");
    }

    #[test]
    fn trailers_take_no_pseudo_field() {
        let mut h = RequestHead::new(1024, 8, true);
        h.begin(HeadKind::Trailers);
        h.push(b"grpc-status", b"0");
        assert!(h.finish(true).is_ok());
        assert_eq!(h.fields().count(), 1);
        h.begin(HeadKind::Trailers);
        h.push(b":path", b"/");
        assert!(h.finish(true).is_err());
    }

    #[test]
    fn oversized_heads_keep_only_pseudo_fields() {
        let long = "x".repeat(2000);
        let mut f = GET.to_vec();
        f.push(("a", "1"));
        f.push(("big", &long));
        let h = head(&f, false).unwrap();
        assert!(h.oversized());
        assert_eq!(h.fields().count(), 0);
        assert_eq!(h.path(), Some(&b"/a?b"[..]));

        let mut f = GET.to_vec();
        f.extend(std::iter::repeat_n(("a", "1"), 9));
        let h = head(&f, false).unwrap();
        assert!(h.oversized(), "nine fields past a limit of eight");
        assert!(h.list.stored_len() < 64, "dropped fields are not stored");
    }
}
