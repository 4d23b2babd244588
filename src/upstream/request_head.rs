//! Where the proxy's request rewrite writes the upstream request head: one
//! interface ([`RequestHeadSink`]) with an HTTP/1 implementation that writes
//! the request line and field lines as an HTTP/1.1 origin gets them, and a
//! protocol-neutral field list ([`FieldList`]) that an HTTP/2 exchange takes
//! as it is. The rewrite is written once; no exchange parses a head another
//! one encoded.

use crate::http1::client::request::{end_head, write_framing, write_request_start};
use crate::http1::parse::BodyKind;

/// The upstream request head as the rewrite produces it, field by field.
pub trait RequestHeadSink {
    /// Forgets what was written: the head is made again for another server.
    fn clear(&mut self);

    /// The request's method, target (path and query) and authority.
    fn start(&mut self, method: &[u8], path: &[u8], query: Option<&[u8]>, authority: &[u8]);

    /// Begins a field named `name`; its value is written into
    /// [`RequestHeadSink::value`] until [`RequestHeadSink::end_field`].
    fn begin_field(&mut self, name: &[u8]);

    /// The buffer the value of the field begun last is written into.
    fn value(&mut self) -> &mut Vec<u8>;

    /// Ends the field begun last; one whose value is still empty is left
    /// out when `drop_empty` (a template that expanded to nothing).
    fn end_field(&mut self, drop_empty: bool);

    /// One field with its whole value.
    fn field(&mut self, name: &[u8], value: &[u8]) {
        self.begin_field(name);
        self.value().extend_from_slice(value);
        self.end_field(false);
    }

    /// One field, `name` and `value`, whose HTTP/1 line (`name: value\r\n`)
    /// the caller has ready as `line`: a head written as HTTP/1 copies the
    /// line, others take the field.
    fn field_line(&mut self, name: &[u8], value: &[u8], line: &[u8]) {
        let _ = line;
        self.field(name, value);
    }

    /// Ends the head: the body's framing (`Content-Length` or chunked, for
    /// protocols that frame in fields), and the upgrade the client asked
    /// for (`upgrade`: its `Upgrade` value), where the protocol has one.
    fn finish(&mut self, body: BodyKind, upgrade: Option<&[u8]>);
}

/// A sink borrowed is a sink: an exchange lends the one it keeps.
impl<S: RequestHeadSink + ?Sized> RequestHeadSink for &mut S {
    fn clear(&mut self) {
        (**self).clear()
    }

    fn start(&mut self, method: &[u8], path: &[u8], query: Option<&[u8]>, authority: &[u8]) {
        (**self).start(method, path, query, authority)
    }

    fn begin_field(&mut self, name: &[u8]) {
        (**self).begin_field(name)
    }

    fn value(&mut self) -> &mut Vec<u8> {
        (**self).value()
    }

    fn end_field(&mut self, drop_empty: bool) {
        (**self).end_field(drop_empty)
    }

    fn field(&mut self, name: &[u8], value: &[u8]) {
        (**self).field(name, value)
    }

    fn field_line(&mut self, name: &[u8], value: &[u8], line: &[u8]) {
        (**self).field_line(name, value, line)
    }

    fn finish(&mut self, body: BodyKind, upgrade: Option<&[u8]>) {
        (**self).finish(body, upgrade)
    }
}

/// An HTTP/1.1 request head, written into `out` as it goes: `Host` right
/// after the request line, then the fields, then the framing field.
pub struct Http1Head<'a> {
    out: &'a mut Vec<u8>,
    /// Where the field begun last starts, and where its value starts.
    field_at: usize,
    value_at: usize,
}

impl<'a> Http1Head<'a> {
    /// A head written into `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Http1Head {
            out,
            field_at: 0,
            value_at: 0,
        }
    }
}

impl RequestHeadSink for Http1Head<'_> {
    fn clear(&mut self) {
        self.out.clear();
    }

    fn start(&mut self, method: &[u8], path: &[u8], query: Option<&[u8]>, authority: &[u8]) {
        write_request_start(self.out, method, path, query, authority);
    }

    #[inline]
    fn begin_field(&mut self, name: &[u8]) {
        self.field_at = self.out.len();
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        self.value_at = self.out.len();
    }

    #[inline]
    fn value(&mut self) -> &mut Vec<u8> {
        self.out
    }

    #[inline]
    fn end_field(&mut self, drop_empty: bool) {
        if drop_empty && self.out.len() == self.value_at {
            self.out.truncate(self.field_at);
        } else {
            self.out.extend_from_slice(b"\r\n");
        }
    }

    #[inline]
    fn field_line(&mut self, _name: &[u8], _value: &[u8], line: &[u8]) {
        self.out.extend_from_slice(line);
    }

    #[inline]
    fn field(&mut self, name: &[u8], value: &[u8]) {
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
    }

    fn finish(&mut self, body: BodyKind, upgrade: Option<&[u8]>) {
        if let Some(protocol) = upgrade {
            self.field(b"Connection", b"upgrade");
            self.field(b"Upgrade", protocol);
        }
        write_framing(self.out, body);
        end_head(self.out);
    }
}

/// A piece of [`FieldList::bytes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Piece {
    start: u32,
    end: u32,
}

impl Piece {
    fn of(bytes: &[u8], start: usize) -> Piece {
        Piece {
            start: start as u32,
            end: bytes.len() as u32,
        }
    }

    fn get(self, bytes: &[u8]) -> &[u8] {
        bytes
            .get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }
}

/// A request head as protocol-neutral parts: method, path (with its query),
/// authority and fields in order (names in lowercase, as HTTP/2 and HTTP/3
/// carry them), all in one reused byte buffer. The
/// framing is not a field here: the protocol that sends it frames the body.
#[derive(Debug, Default)]
pub struct FieldList {
    bytes: Vec<u8>,
    method: Piece,
    path: Piece,
    authority: Piece,
    fields: Vec<(Piece, Piece)>,
    /// The field begun last: its name, and where its value starts.
    open: (Piece, usize),
    /// The declared body length, when the body has one.
    content_length: Option<u64>,
}

impl FieldList {
    /// The request method.
    pub fn method(&self) -> &[u8] {
        self.method.get(&self.bytes)
    }

    /// The path and query (`/a?b`), as the request target.
    pub fn path(&self) -> &[u8] {
        self.path.get(&self.bytes)
    }

    /// The authority (`host:port`).
    pub fn authority(&self) -> &[u8] {
        self.authority.get(&self.bytes)
    }

    /// The fields in order, names in lowercase.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|&(n, v)| (n.get(&self.bytes), v.get(&self.bytes)))
    }

    /// The body's declared length, if it has one.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The buffer's capacity, for whoever pools it.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

impl RequestHeadSink for FieldList {
    fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
        self.content_length = None;
    }

    fn start(&mut self, method: &[u8], path: &[u8], query: Option<&[u8]>, authority: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(method);
        self.method = Piece::of(&self.bytes, at);
        let at = self.bytes.len();
        self.bytes.extend_from_slice(path);
        if let Some(q) = query {
            self.bytes.push(b'?');
            self.bytes.extend_from_slice(q);
        }
        self.path = Piece::of(&self.bytes, at);
        let at = self.bytes.len();
        self.bytes.extend_from_slice(authority);
        self.authority = Piece::of(&self.bytes, at);
    }

    fn begin_field(&mut self, name: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend(name.iter().map(u8::to_ascii_lowercase));
        self.open = (Piece::of(&self.bytes, at), self.bytes.len());
    }

    fn value(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    fn end_field(&mut self, drop_empty: bool) {
        let (name, value_at) = self.open;
        if drop_empty && self.bytes.len() == value_at {
            self.bytes.truncate(name.start as usize);
        } else {
            self.fields.push((name, Piece::of(&self.bytes, value_at)));
        }
    }

    fn finish(&mut self, body: BodyKind, _upgrade: Option<&[u8]>) {
        // HTTP/2 and later upgrade by extended CONNECT, not by fields.
        if let BodyKind::Length(n) = body {
            self.content_length = Some(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(sink: &mut impl RequestHeadSink) {
        sink.start(b"POST", b"/a", Some(b"b=c"), b"ex.com:81");
        sink.field(b"X-A", b"1");
        sink.begin_field(b"X-Empty");
        sink.end_field(true);
        sink.begin_field(b"X-Joined");
        sink.value().extend_from_slice(b"1, ");
        sink.value().extend_from_slice(b"2");
        sink.end_field(true);
        sink.finish(BodyKind::Length(12), None);
    }

    #[test]
    fn one_rewrite_gives_the_http1_bytes_and_the_field_list_alike() {
        let mut out = Vec::new();
        write(&mut Http1Head::new(&mut out));
        assert_eq!(
            out,
            &b"POST /a?b=c HTTP/1.1\r\nHost: ex.com:81\r\nX-A: 1\r\nX-Joined: 1, 2\r\nContent-Length: 12\r\n\r\n"[..]
        );
        let mut list = FieldList::default();
        write(&mut list);
        assert_eq!(list.method(), b"POST");
        assert_eq!(list.path(), b"/a?b=c");
        assert_eq!(list.authority(), b"ex.com:81");
        let fields: Vec<_> = list.fields().collect();
        assert_eq!(
            fields,
            [(&b"x-a"[..], &b"1"[..]), (&b"x-joined"[..], &b"1, 2"[..])]
        );
        assert_eq!(list.content_length(), Some(12));
        list.clear();
        assert_eq!(list.fields().count(), 0);
        assert_eq!(list.content_length(), None);
    }

    #[test]
    fn an_upgrade_is_two_fields_in_http1_and_none_in_the_list() {
        let mut out = Vec::new();
        let mut head = Http1Head::new(&mut out);
        head.start(b"GET", b"/ws", None, b"a");
        head.finish(BodyKind::None, Some(b"websocket"));
        assert!(out.ends_with(b"Connection: upgrade\r\nUpgrade: websocket\r\n\r\n"));
        let mut list = FieldList::default();
        list.start(b"GET", b"/ws", None, b"a");
        list.finish(BodyKind::None, Some(b"websocket"));
        assert_eq!(list.fields().count(), 0);
    }
}
