//! Extensible Priorities (RFC 9218), for HTTP/2 and HTTP/3 alike: a
//! request's or a response's `priority` field, read by a hand parser of the
//! Structured Fields dictionary (RFC 8941 §4.2.2) that allocates nothing,
//! and the PRIORITY_UPDATE frames that arrive before their stream's HEADERS
//! (a few kept, as §7.1 allows dropping). What the priorities decide is
//! each driver's send scheduler's.

/// PRIORITY_UPDATE frames kept for streams not opened yet.
const PENDING_UPDATES: usize = 8;

/// A stream's priority (RFC 9218 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// 0 (most urgent) to 7; 3 by default.
    pub urgency: u8,
    /// The response is useful in pieces, so it may share the connection
    /// with others of its urgency.
    pub incremental: bool,
}

impl Default for Priority {
    fn default() -> Self {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl Priority {
    /// The priority of a request whose `priority` field lines are `lines`:
    /// the defaults where a member is absent, out of range or of another
    /// type (§4), and the defaults altogether when the field is not a valid
    /// dictionary. Later members win over earlier ones, across lines too.
    pub fn from_field_lines<'v>(lines: impl IntoIterator<Item = &'v [u8]>) -> Self {
        let mut p = Priority::default();
        for line in lines {
            if !p.apply(line) {
                return Priority::default();
            }
        }
        p
    }

    /// The priority an answer gives itself in its `priority` field lines
    /// among `fields` (RFC 9218 §8: a server may take an origin's word over
    /// the client's); `None` when it has none.
    pub fn of_answer<'v>(fields: impl Iterator<Item = (&'v str, &'v [u8])>) -> Option<Self> {
        let mut lines = fields
            .filter(|(n, _)| n.eq_ignore_ascii_case("priority"))
            .map(|(_, v)| v)
            .peekable();
        lines.peek()?;
        Some(Priority::from_field_lines(lines))
    }

    /// Applies the members of one field line; false when it is not a
    /// valid dictionary (the members applied so far stay).
    pub(crate) fn apply(&mut self, value: &[u8]) -> bool {
        let mut p = Parser { s: value, i: 0 };
        p.skip_sp();
        if p.done() {
            return true;
        }
        loop {
            let Some(key) = p.key() else { return false };
            let value = if p.eat(b'=') {
                if p.peek() == Some(b'(') {
                    if !p.inner_list() {
                        return false;
                    }
                    Bare::Other
                } else {
                    match p.bare_item() {
                        Some(b) => b,
                        None => return false,
                    }
                }
            } else {
                Bare::Bool(true)
            };
            if !p.params() {
                return false;
            }
            match (key, value) {
                (b"u", Bare::Int(n)) if (0..=7).contains(&n) => self.urgency = n as u8,
                (b"i", Bare::Bool(b)) => self.incremental = b,
                _ => {}
            }
            p.skip_ows();
            if p.done() {
                return true;
            }
            if !p.eat(b',') {
                return false;
            }
            p.skip_ows();
            if p.done() {
                return false;
            }
        }
    }
}

/// A bare item, as far as the priority's members need to tell.
#[derive(Clone, Copy)]
enum Bare {
    Int(i64),
    Bool(bool),
    Other,
}

/// A cursor over one field line.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            return true;
        }
        false
    }

    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn take_while(&mut self, ok: impl Fn(u8) -> bool) -> &'a [u8] {
        let start = self.i;
        while self.peek().is_some_and(&ok) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// A key: `( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn key(&mut self) -> Option<&'a [u8]> {
        if !matches!(self.peek(), Some(b'a'..=b'z' | b'*')) {
            return None;
        }
        Some(
            self.take_while(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')),
        )
    }

    /// Parameters: `*( ";" *SP key [ "=" bare-item ] )`.
    fn params(&mut self) -> bool {
        while self.eat(b';') {
            self.skip_sp();
            if self.key().is_none() {
                return false;
            }
            if self.eat(b'=') && self.bare_item().is_none() {
                return false;
            }
        }
        true
    }

    /// `"(" *SP [ item *( 1*SP item ) *SP ] ")"` and its parameters are
    /// read by the caller.
    fn inner_list(&mut self) -> bool {
        self.i += 1;
        loop {
            self.skip_sp();
            if self.eat(b')') {
                return true;
            }
            if self.bare_item().is_none() || !self.params() {
                return false;
            }
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return false;
            }
        }
    }

    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'?' => {
                self.i += 1;
                let b = match self.peek()? {
                    b'0' => false,
                    b'1' => true,
                    _ => return None,
                };
                self.i += 1;
                Some(Bare::Bool(b))
            }
            b'"' => self.string(),
            b'%' => {
                // A display string (RFC 9651).
                self.i += 1;
                self.string()
            }
            b'@' => {
                // A date (RFC 9651).
                self.i += 1;
                match self.number()? {
                    Bare::Int(_) => Some(Bare::Other),
                    _ => None,
                }
            }
            b':' => {
                self.i += 1;
                self.take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
                self.eat(b':').then_some(Bare::Other)
            }
            c if c.is_ascii_alphabetic() || c == b'*' => {
                self.take_while(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c));
                Some(Bare::Other)
            }
            _ => None,
        }
    }

    /// An integer (at most 15 digits) or a decimal (12 and 3).
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let int = self.take_while(|c| c.is_ascii_digit());
        if int.is_empty() || int.len() > 15 {
            return None;
        }
        if self.eat(b'.') {
            let frac = self.take_while(|c| c.is_ascii_digit());
            if int.len() > 12 || frac.is_empty() || frac.len() > 3 {
                return None;
            }
            return Some(Bare::Other);
        }
        let n = int.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
        Some(Bare::Int(if negative { -n } else { n }))
    }

    /// A string: printable ASCII, `\"` and `\\` escaped.
    fn string(&mut self) -> Option<Bare> {
        if !self.eat(b'"') {
            return None;
        }
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(Bare::Other);
                }
                b'\\' => {
                    self.i += 1;
                    if !matches!(self.peek()?, b'"' | b'\\') {
                        return None;
                    }
                    self.i += 1;
                }
                0x20..=0x7e => self.i += 1,
                _ => return None,
            }
        }
    }
}

/// PRIORITY_UPDATE frames for streams the client has not opened yet.
#[derive(Debug, Default)]
pub(crate) struct PendingUpdates<StreamId> {
    updates: [(StreamId, Option<Priority>); PENDING_UPDATES],
    next: usize,
    /// Updates kept and not yet taken (at most [`PENDING_UPDATES`]): a
    /// connection that sends none pays no search per stream.
    kept: usize,
}

impl<StreamId: Copy + PartialEq> PendingUpdates<StreamId> {
    /// Keeps `priority` for `stream`, replacing an earlier one for it or
    /// else the oldest kept.
    pub(crate) fn keep(&mut self, stream: StreamId, priority: Priority) {
        if let Some(u) = self
            .updates
            .iter_mut()
            .find(|u| u.0 == stream && u.1.is_some())
        {
            u.1 = Some(priority);
            return;
        }
        if self.updates[self.next].1.is_none() {
            self.kept += 1;
        }
        self.updates[self.next] = (stream, Some(priority));
        self.next = (self.next + 1) % PENDING_UPDATES;
    }

    /// The update kept for `stream`, forgotten as it is taken.
    #[inline]
    pub(crate) fn take(&mut self, stream: StreamId) -> Option<Priority> {
        if self.kept == 0 {
            return None;
        }
        let taken = self
            .updates
            .iter_mut()
            .find(|u| u.0 == stream && u.1.is_some())
            .and_then(|u| u.1.take());
        if taken.is_some() {
            self.kept -= 1;
        }
        taken
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A priority, short, for the tests here and of the drivers' send order.
    pub(crate) fn p(urgency: u8, incremental: bool) -> Priority {
        Priority {
            urgency,
            incremental,
        }
    }

    #[test]
    fn an_answer_names_its_priority_in_its_priority_lines_only() {
        let fields = [("Content-Type", &b"text/css"[..]), ("Priority", b"u=2")];
        assert_eq!(Priority::of_answer(fields.into_iter()), Some(p(2, false)));
        // Members across lines, the later winning; junk is the default.
        let two = [
            ("priority", &b"u=2"[..]),
            ("x", b"u=7"),
            ("priority", b"i, u=6"),
        ];
        assert_eq!(Priority::of_answer(two.into_iter()), Some(p(6, true)));
        let junk = [("priority", &b"u=(("[..])];
        assert_eq!(Priority::of_answer(junk.into_iter()), Some(p(3, false)));
        let none = [("content-type", &b"text/css"[..])];
        assert_eq!(Priority::of_answer(none.into_iter()), None);
    }

    #[test]
    fn priority_field_shapes() {
        let cases: &[(&str, Priority)] = &[
            ("", p(3, false)),
            ("u=0", p(0, false)),
            ("u=7", p(7, false)),
            ("i", p(3, true)),
            ("i=?1", p(3, true)),
            ("i=?0", p(3, false)),
            ("u=5, i", p(5, true)),
            ("u=5,i", p(5, true)),
            ("  u=1 ,\ti ", p(1, true)),
            ("i, u=2", p(2, true)),
            ("u=1, u=6", p(6, false)),
            ("i, i=?0", p(3, false)),
            // Out of range or of another type: the member is ignored.
            ("u=8", p(3, false)),
            ("u=-1, i", p(3, true)),
            ("u=1.5", p(3, false)),
            ("u=\"1\"", p(3, false)),
            ("u=?1", p(3, false)),
            ("i=1", p(3, false)),
            ("u=tok", p(3, false)),
            ("u", p(3, false)),
            // Unknown keys, parameters and other members are ignored.
            ("foo=bar, u=2", p(2, false)),
            ("u=2;x=1, i;y", p(2, true)),
            ("a=(1 2 \"x\");p, b=:AAE=:, c=@1700000000, u=4", p(4, false)),
            ("s=\"a\\\"b\", d=%\"x\", u=6", p(6, false)),
            ("*x=1, u=1", p(1, false)),
            // Not a dictionary: the defaults altogether.
            ("u=1,", p(3, false)),
            ("u=1 i", p(3, false)),
            ("U=1", p(3, false)),
            ("u=1, ,i", p(3, false)),
            ("u==1", p(3, false)),
            ("u=1, i=?2", p(3, false)),
            ("u=1, s=\"open", p(3, false)),
            ("u=1, a=(1", p(3, false)),
            ("u=0, 9=x", p(3, false)),
            ("u=1234567890123456", p(3, false)),
            ("u=1\u{e9}", p(3, false)),
        ];
        for (field, want) in cases {
            assert_eq!(
                Priority::from_field_lines([field.as_bytes()]),
                *want,
                "{field:?}"
            );
        }
        // Lines of one field are one dictionary.
        let lines: [&[u8]; 2] = [b"u=1", b"i"];
        assert_eq!(Priority::from_field_lines(lines), p(1, true));
        let lines: [&[u8]; 2] = [b"u=1", b"i,"];
        assert_eq!(Priority::from_field_lines(lines), p(3, false));
    }

    #[test]
    fn pending_updates_are_bounded_and_taken_once() {
        let mut kept = PendingUpdates::default();
        kept.keep(1, p(0, false));
        kept.keep(1, p(1, false));
        assert_eq!(kept.take(1), Some(p(1, false)));
        assert_eq!(kept.take(1), None);
        for id in (3..3 + 2 * PENDING_UPDATES as u32 + 2).step_by(2) {
            kept.keep(id, p(2, true));
        }
        assert_eq!(kept.take(3), None, "the oldest is dropped");
        assert_eq!(kept.take(3 + 2 * PENDING_UPDATES as u32), Some(p(2, true)));
    }
}
