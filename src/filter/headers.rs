//! Header rules: fields a route sets, adds or removes on its responses (HSTS,
//! Cache-Control, CSP, CORS) and, on proxy routes, on the request sent
//! upstream. Names are checked and values compiled into [`Template`]s when the
//! configuration loads; a response is edited through [`HeadEdit`], which
//! borrows every unchanged field and copies only expanded placeholders.
//!
//! Which responses: like nginx's `add_header`, success and redirect answers
//! (2xx, 3xx, 304 included, so caches revalidating keep `Cache-Control`) get
//! the rules; error answers (4xx, 5xx) get them only with `always = true`, as
//! `add_header ... always` does.
//!
//! Interim heads (a relayed `103 Early Hints`) get the removals only: a field
//! the route removes, or replaces with a `set` value, is left out of them, so
//! a 103 never shows a client what the final answer would not. Nothing is
//! set or added to them, as nginx's `add_header` does not reach early hints:
//! the values are meant for the final answer, whose status is not known yet.

use std::fmt;

use super::placeholder::Template;
use super::{HeadEdit, RouteFilter};
use crate::http::{RequestId, RequestView, ResponseHead};
use crate::upstream::request_head::RequestHeadSink;

/// Field names the rules may not touch, on either side: framing and
/// connection management belong to the driver (and the proxy), and `Date` and
/// `Server` are written by the driver on every answer.
pub const DRIVER_FIELDS: [&str; 10] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
    "date",
    "server",
];

/// One route's rules for one direction.
#[derive(Default)]
pub struct HeaderRules {
    /// Names removed (lowercase).
    remove: Box<[Box<str>]>,
    /// Names replaced: every field of the name is dropped, then this one sent.
    set: Box<[(Box<str>, Template)]>,
    /// Fields sent in addition to any of the same name.
    add: Box<[(Box<str>, Template)]>,
    /// Error answers (4xx, 5xx) too.
    always: bool,
    /// The set and added fields as HTTP/1 field lines, made once when no
    /// value has a placeholder: a head none of whose fields the rules drop
    /// takes them as they are, with no field list rebuilt per response.
    fixed_lines: Option<Box<[u8]>>,
}

impl fmt::Debug for HeaderRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeaderRules")
            .field("remove", &self.remove)
            .field("set", &self.set.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("add", &self.add.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("always", &self.always)
            .finish()
    }
}

impl HeaderRules {
    /// Rules from checked parts: names are tokens outside [`DRIVER_FIELDS`].
    pub fn new(
        remove: Vec<String>,
        set: Vec<(String, Template)>,
        add: Vec<(String, Template)>,
        always: bool,
    ) -> Self {
        let mut rules = HeaderRules {
            remove: remove
                .into_iter()
                .map(|n| n.to_ascii_lowercase().into())
                .collect(),
            set: set.into_iter().map(|(n, t)| (n.into(), t)).collect(),
            add: add.into_iter().map(|(n, t)| (n.into(), t)).collect(),
            always,
            fixed_lines: None,
        };
        rules.fixed_lines = rules.prepare_lines();
        rules
    }

    /// The set and added fields as field lines when every value is fixed and
    /// reads back the same from a line (no space or tab at either end, which
    /// a reader of the line would trim); `None` otherwise.
    fn prepare_lines(&self) -> Option<Box<[u8]>> {
        let mut lines = Vec::new();
        for (name, template) in self.set.iter().chain(self.add.iter()) {
            let value = template.as_literal()?;
            if value.is_empty() {
                // Not sent, as `HeadEdit::push_template` leaves it out.
                continue;
            }
            let padded = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
            if padded(value.first()) || padded(value.last()) {
                return None;
            }
            lines.extend_from_slice(name.as_bytes());
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(value);
            lines.extend_from_slice(b"\r\n");
        }
        Some(lines.into_boxed_slice())
    }

    /// The head `head` becomes under these rules without being rebuilt: its
    /// own fields, then the prepared lines. `None` when the rules have
    /// placeholders, drop one of the head's fields, or the head already ends
    /// in field lines; then [`HeaderRules::apply`] edits it. The caller has
    /// checked [`HeaderRules::applies_to`].
    pub fn with_fixed_lines<'a>(&'a self, head: &ResponseHead<'a>) -> Option<ResponseHead<'a>> {
        let lines = self.fixed_lines.as_deref()?;
        if !head.field_lines.is_empty() || head.all_fields().any(|(n, _)| self.drops(n.as_bytes()))
        {
            return None;
        }
        Some(ResponseHead {
            field_lines: lines,
            ..*head
        })
    }

    /// Whether the rules do nothing.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty()
    }

    /// Whether an answer with `status` gets the rules.
    pub fn applies_to(&self, status: u16) -> bool {
        match status {
            200..=399 => true,
            400..=599 => self.always,
            _ => false,
        }
    }

    /// Whether a field called `name` is removed or replaced by the rules.
    pub fn drops(&self, name: &[u8]) -> bool {
        self.remove
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
            || self
                .set
                .iter()
                .any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
    }

    /// Edits a response head: removals, then replacements, then additions.
    /// A field whose template expands to nothing is not sent.
    pub fn apply<'a>(&'a self, req: &RequestView<'_>, id: &RequestId, head: &mut HeadEdit<'a>) {
        head.retain(|name| !self.drops(name.as_bytes()));
        for (name, template) in self.set.iter().chain(self.add.iter()) {
            head.push_template(name, template, req, id);
        }
    }

    /// Writes the set and added fields into a head the proxy makes itself
    /// (the request sent upstream), whatever protocol carries it; a field
    /// whose template expands to nothing is left out.
    pub fn write_fields(
        &self,
        req: &RequestView<'_>,
        id: &RequestId,
        out: &mut impl RequestHeadSink,
    ) {
        for (name, template) in self.set.iter().chain(self.add.iter()) {
            out.begin_field(name.as_bytes());
            match template.as_literal() {
                Some(v) => out.value().extend_from_slice(v),
                None => template.expand(req, id, out.value()),
            }
            out.end_field(true);
        }
    }
}

/// The response side of a route's header rules, as a route filter.
#[derive(Debug)]
pub struct ResponseHeaders(pub HeaderRules);

impl RouteFilter for ResponseHeaders {
    fn decides_at_once(&self) -> bool {
        true
    }

    fn edits_response(&self) -> bool {
        true
    }

    fn response_filter<'a>(
        &'a self,
        req: &RequestView<'_>,
        id: &RequestId,
        head: &mut HeadEdit<'a>,
    ) {
        if self.0.applies_to(head.status) {
            self.0.apply(req, id, head);
        }
    }

    fn drops_from_interim(&self, name: &str) -> bool {
        self.0.drops(name.as_bytes())
    }

    fn header_rules(&self) -> Option<&HeaderRules> {
        Some(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ResponseHead;
    use crate::http1::parse::{parse_request, Limits, Parsed, RequestHead};

    fn rules(always: bool) -> HeaderRules {
        let t = |s: &str| Template::compile(s).unwrap();
        HeaderRules::new(
            vec!["X-Powered-By".into()],
            vec![
                ("Cache-Control".into(), t("no-store")),
                ("X-Seen".into(), t("{path}")),
            ],
            vec![
                ("Link".into(), t("</a.css>; rel=preload")),
                ("X-Empty".into(), t("{query}")),
            ],
            always,
        )
    }

    /// `GET /p` from 127.0.0.1, parsed into `head`: the request the rules see.
    fn get_p(head: &mut RequestHead) -> RequestView<'_> {
        let raw: &'static [u8] = b"GET /p HTTP/1.1\r\nHost: h\r\n\r\n";
        assert!(matches!(
            parse_request(raw, &Limits::default(), head),
            Ok(Parsed::Complete)
        ));
        RequestView::http1(head, raw, "127.0.0.1:1".parse().unwrap(), None)
    }

    fn edited(r: &HeaderRules, status: u16) -> Vec<(String, String)> {
        let mut req_head = RequestHead::default();
        let req = get_p(&mut req_head);
        let fields: [(&str, &[u8]); 4] = [
            ("Content-Type", b"text/html"),
            ("cache-control", b"max-age=60"),
            ("x-powered-by", b"php"),
            ("Link", b"</b.js>; rel=preload"),
        ];
        let head = ResponseHead::new(status, &fields);
        let mut edit = HeadEdit::from_head(&head);
        if r.applies_to(status) {
            r.apply(&req, &RequestId::default(), &mut edit);
        }
        edit.fields()
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v).into_owned()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn set_replaces_add_appends_remove_drops_and_empty_expansions_are_not_sent() {
        assert_eq!(
            edited(&rules(false), 200),
            pairs(&[
                ("Content-Type", "text/html"),
                ("Link", "</b.js>; rel=preload"),
                ("Cache-Control", "no-store"),
                ("X-Seen", "/p"),
                ("Link", "</a.css>; rel=preload"),
            ])
        );
    }

    #[test]
    fn interim_heads_lose_removed_and_replaced_fields_and_gain_none() {
        let filter = ResponseHeaders(rules(false));
        // Removed, and replaced by a `set` on the final answer: left out.
        assert!(filter.drops_from_interim("x-powered-by"));
        assert!(filter.drops_from_interim("Cache-Control"));
        // Added to the final answer only: the upstream's own hints stay.
        assert!(!filter.drops_from_interim("link"));
        assert!(!filter.drops_from_interim("content-type"));
    }

    /// A head as the HTTP/1 driver writes its fields.
    fn http1_lines(head: &ResponseHead<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        for &(n, v) in head.fields {
            out.extend_from_slice(n.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(block) = head.configured {
            out.extend_from_slice(block.http1_lines());
        }
        out.extend_from_slice(head.field_lines);
        out
    }

    fn fixed_rules(set: &[(&str, &str)], add: &[(&str, &str)]) -> HeaderRules {
        let list = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(n, v)| (n.to_string(), Template::compile(v).unwrap()))
                .collect()
        };
        HeaderRules::new(vec!["X-Powered-By".into()], list(set), list(add), false)
    }

    #[test]
    fn prepared_lines_send_what_the_edit_sends() {
        let r = fixed_rules(
            &[
                ("Strict-Transport-Security", "max-age=31536000"),
                ("Cache-Control", "no-store"),
            ],
            &[("Link", "</a.css>; rel=preload"), ("X-Empty", "")],
        );
        let configured = crate::http::FieldBlock::new(vec![crate::http::OwnedField::new(
            "Content-Type",
            b"text/plain",
        )]);
        let computed: [(&str, &[u8]); 1] = [("ETag", b"\"1\"")];
        let head = ResponseHead {
            configured: Some(&configured),
            ..ResponseHead::new(200, &computed)
        };
        let fixed = r
            .with_fixed_lines(&head)
            .expect("fixed values, nothing dropped");
        let mut req_head = RequestHead::default();
        let req = get_p(&mut req_head);
        let mut edit = HeadEdit::from_head(&head);
        r.apply(&req, &RequestId::default(), &mut edit);
        let edited_fields = edit.fields();
        let edited = ResponseHead::new(200, &edited_fields);
        assert_eq!(
            String::from_utf8(http1_lines(&fixed)).unwrap(),
            String::from_utf8(http1_lines(&edited)).unwrap()
        );
        // Other protocols read the same fields one by one.
        assert_eq!(
            fixed.all_fields().collect::<Vec<_>>(),
            edited.all_fields().collect::<Vec<_>>()
        );
    }

    #[test]
    fn heads_the_prepared_lines_do_not_fit_are_edited() {
        let fixed = fixed_rules(&[("Cache-Control", "no-store")], &[]);
        let plain: [(&str, &[u8]); 1] = [("Content-Type", b"text/html")];
        assert!(fixed
            .with_fixed_lines(&ResponseHead::new(200, &plain))
            .is_some());
        // A field the rules replace or remove.
        let replaced: [(&str, &[u8]); 1] = [("cache-control", b"max-age=5")];
        assert!(fixed
            .with_fixed_lines(&ResponseHead::new(200, &replaced))
            .is_none());
        let removed: [(&str, &[u8]); 1] = [("X-POWERED-BY", b"php")];
        assert!(fixed
            .with_fixed_lines(&ResponseHead::new(200, &removed))
            .is_none());
        // A head that already ends in lines (a proxied one).
        let proxied = ResponseHead {
            field_lines: b"X-Up: 1\r\n",
            ..ResponseHead::new(200, &plain)
        };
        assert!(fixed.with_fixed_lines(&proxied).is_none());
        // Values made per request, or that a reader of the line would trim.
        let placeholder = fixed_rules(&[("X-Path", "{path}")], &[]);
        assert!(placeholder
            .with_fixed_lines(&ResponseHead::new(200, &plain))
            .is_none());
        let padded = fixed_rules(&[], &[("X-Pad", "a ")]);
        assert!(padded
            .with_fixed_lines(&ResponseHead::new(200, &plain))
            .is_none());
    }

    #[test]
    fn errors_get_the_rules_only_with_always() {
        let untouched = edited(&rules(false), 404);
        assert!(untouched.iter().any(|(n, _)| n == "x-powered-by"));
        let touched = edited(&rules(true), 404);
        assert!(!touched.iter().any(|(n, _)| n == "x-powered-by"));
        assert!(rules(false).applies_to(304));
        assert!(!rules(true).applies_to(101));
    }
}
