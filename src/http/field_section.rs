//! The field list a decoded head keeps, and the checks every HTTP/2 and
//! HTTP/3 head makes of its fields whatever its role (RFC 9113 §8.2,
//! RFC 9114 §4.2): names lowercase and of token bytes, values without NUL,
//! CR, LF or surrounding whitespace, no connection-specific field,
//! `content-length` a number, and the list bounded by our advertised field
//! section size (SETTINGS_MAX_HEADER_LIST_SIZE, SETTINGS_MAX_FIELD_SECTION_SIZE)
//! and field count. The request head (server) and the response head
//! (client) add their own pseudo fields on top.
//!
//! The field bytes go into one buffer and the list keeps spans into it, so
//! a head allocates nothing once the buffers have grown to the
//! connection's usual size.

/// A field's place in the buffer.
#[derive(Clone, Copy, Debug, Default)]
struct FieldSpan {
    start: u32,
    name_len: u32,
    value_len: u32,
}

/// A pseudo field's value in the buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

/// The regular fields of one head (or trailers), checked as they come.
#[derive(Clone, Debug)]
pub(crate) struct FieldList {
    buf: Vec<u8>,
    fields: Vec<FieldSpan>,
    content_length: Option<u64>,
    /// A `priority` field (RFC 9218) was among them.
    has_priority: bool,
    oversized: bool,
    list_size: usize,
    regular: usize,
    max_list_size: usize,
    max_fields: usize,
    /// The fields are trailers: no pseudo field, no `content-length` kept.
    trailers: bool,
    /// The first rule the fields broke: the rest are not checked.
    malformed: Option<&'static str>,
    /// Every name so far is a lowercase token and every value holds only
    /// visible bytes, SP and HTAB: see [`Self::plain`].
    plain: bool,
}

impl FieldList {
    /// An empty list enforcing the connection's limits.
    pub(crate) fn new(max_list_size: u32, max_fields: usize) -> Self {
        FieldList {
            buf: Vec::new(),
            fields: Vec::new(),
            content_length: None,
            has_priority: false,
            oversized: false,
            list_size: 0,
            regular: 0,
            max_list_size: max_list_size as usize,
            max_fields,
            trailers: false,
            malformed: None,
            plain: true,
        }
    }

    /// Starts a new head (or trailers), keeping the buffers' capacity.
    pub(crate) fn begin(&mut self, trailers: bool) {
        self.trailers = trailers;
        self.malformed = None;
        self.buf.clear();
        self.fields.clear();
        self.content_length = None;
        self.has_priority = false;
        self.oversized = false;
        self.list_size = 0;
        self.regular = 0;
        self.plain = true;
    }

    /// Drops the buffers' allocations (no stream is open).
    pub(crate) fn release_buffers(&mut self) {
        self.buf = Vec::new();
        self.fields = Vec::new();
    }

    #[cfg(test)]
    pub(crate) fn buffers_released(&self) -> bool {
        self.buf.capacity() == 0 && self.fields.capacity() == 0
    }

    /// Bytes held in the buffer (names and values), what a reader copying
    /// the head out may reserve for.
    pub(crate) fn stored_len(&self) -> usize {
        self.buf.len()
    }

    /// Checks a field's value and counts the field's size (RFC 9113
    /// §6.5.2); the first step for every field, pseudo or regular.
    fn count(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        self.plain &= check_value(value)?;
        self.list_size = self.list_size.saturating_add(name.len() + value.len() + 32);
        Ok(())
    }

    /// Takes one decoded field of the head: counted against the list's
    /// limit, a pseudo field handed to `pseudo` (its name without the `:`)
    /// where one may stand, a regular field checked and stored. The first
    /// rule broken is kept for [`Self::checked`]; the role's rules (which
    /// pseudo fields) are `pseudo`'s.
    pub(crate) fn push_field(
        &mut self,
        name: &[u8],
        value: &[u8],
        pseudo: impl FnOnce(&mut FieldList, &[u8]) -> Result<(), &'static str>,
    ) {
        if self.malformed.is_some() {
            return;
        }
        let result = match self.count_and_split(name, value) {
            Ok(Some(p)) => pseudo(self, p),
            Ok(None) => self.push_regular(name, value, !self.trailers),
            Err(why) => Err(why),
        };
        if let Err(why) = result {
            self.malformed = Some(why);
        }
    }

    /// The head is over: the first rule broken, else whether it is a head
    /// (`true`), whose pseudo fields the role checks next, or trailers.
    pub(crate) fn checked(&self) -> Result<bool, &'static str> {
        match self.malformed {
            Some(why) => Err(why),
            None => Ok(!self.trailers),
        }
    }

    /// Counts a decoded field against the list's limit and, for a pseudo
    /// field, gives its name without the `:`, refusing one where no pseudo
    /// field may stand: in trailers, or after a regular field (RFC 9113
    /// §8.3).
    fn count_and_split<'n>(
        &mut self,
        name: &'n [u8],
        value: &[u8],
    ) -> Result<Option<&'n [u8]>, &'static str> {
        self.count(name, value)?;
        let Some(pseudo) = name.strip_prefix(b":") else {
            return Ok(None);
        };
        if self.trailers {
            return Err("pseudo field in trailers");
        }
        if self.has_regular() {
            return Err("pseudo field after a regular field");
        }
        Ok(Some(pseudo))
    }

    /// A regular field came before: pseudo fields may no longer follow.
    fn has_regular(&self) -> bool {
        !self.fields.is_empty() || self.regular > 0
    }

    /// Stores a pseudo field's value (kept even when the head is oversized:
    /// a handful at most, each bounded by the header block or the HPACK
    /// table), marking the head oversized when the list passed its limit.
    pub(crate) fn push_pseudo(&mut self, value: &[u8]) -> Span {
        if self.list_size > self.max_list_size {
            self.oversized = true;
        }
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(value);
        Span {
            start,
            len: value.len() as u32,
        }
    }

    /// A stored pseudo field's value.
    pub(crate) fn pseudo(&self, s: Span) -> &[u8] {
        &self.buf[s.start as usize..(s.start + s.len) as usize]
    }

    /// Checks and stores a regular field; `content_length`: a
    /// `content-length` field is the head's (not a trailer's) and is
    /// parsed. Past the limits the head is oversized and its regular fields
    /// are dropped.
    fn push_regular(
        &mut self,
        name: &[u8],
        value: &[u8],
        content_length: bool,
    ) -> Result<(), &'static str> {
        self.plain &= check_name(name)?;
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return Err("connection-specific field"),
            b"te" if !value.eq_ignore_ascii_case(b"trailers") => {
                return Err("te other than trailers")
            }
            b"content-length" if content_length => {
                let n = parse_content_length(value).ok_or("content-length not a number")?;
                if self.content_length.is_some_and(|c| c != n) {
                    return Err("content-length given twice with different values");
                }
                self.content_length = Some(n);
            }
            b"priority" => self.has_priority = true,
            _ => {}
        }
        self.regular += 1;
        if self.list_size > self.max_list_size || self.regular > self.max_fields {
            self.oversized = true;
            self.fields.clear();
        }
        if !self.oversized {
            let start = self.buf.len() as u32;
            self.buf.extend_from_slice(name);
            self.buf.extend_from_slice(value);
            self.fields.push(FieldSpan {
                start,
                name_len: name.len() as u32,
                value_len: value.len() as u32,
            });
        }
        Ok(())
    }

    /// The regular fields in the order received.
    pub(crate) fn iter(&self) -> FieldIter<'_> {
        FieldIter {
            buf: &self.buf,
            spans: self.fields.iter(),
        }
    }

    /// `content-length`, when the head gave one.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// Whether a `priority` field was among the fields.
    pub(crate) fn has_priority(&self) -> bool {
        self.has_priority
    }

    /// The list passed `max_header_list_size` or `max_header_fields`.
    pub(crate) fn oversized(&self) -> bool {
        self.oversized
    }

    /// Every regular field's name is a token and every value (pseudo
    /// fields' too) holds only visible bytes, SP and HTAB: all an HTTP/1
    /// head may carry, learnt by the same pass over the bytes that checked
    /// them here, so a reader that builds one need not look at them again.
    pub(crate) fn plain(&self) -> bool {
        self.plain
    }
}

/// The regular fields of a decoded head, as (name, value), in the order
/// received: a named type, so a caller can keep the walk in a field of its
/// own.
#[derive(Clone, Debug)]
pub struct FieldIter<'a> {
    buf: &'a [u8],
    spans: std::slice::Iter<'a, FieldSpan>,
}

impl<'a> Iterator for FieldIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let f = self.spans.next()?;
        let s = f.start as usize;
        let n = s + f.name_len as usize;
        let end = n + f.value_len as usize;
        Some((self.buf.get(s..n)?, self.buf.get(n..end)?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

/// The bytes allowed in a regular field's name (RFC 9113 §8.2.1): no
/// control characters, space, DEL, non-ASCII or uppercase letters, and no
/// colon; one lookup a byte.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = !(b as u8).is_ascii_uppercase() && b != b':' as usize;
        b += 1;
    }
    t
};

/// The bytes of a lowercase token (RFC 9110 tchars but uppercase letters),
/// all of them among [`NAME_BYTE`]: a name of these is valid here and a
/// token as HTTP/1 reads it, known in one lookup a byte.
const LOWER_TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_digit() || c.is_ascii_lowercase();
        b += 1;
    }
    let symbols = b"!#$%&'*+-.^_`|~";
    let mut i = 0;
    while i < symbols.len() {
        t[symbols[i] as usize] = true;
        i += 1;
    }
    t
};

/// Checks a regular field's name (RFC 9113 §8.2.1); `Ok(true)` when it is
/// also a token (see [`FieldList::plain`]).
fn check_name(name: &[u8]) -> Result<bool, &'static str> {
    if name.is_empty() {
        return Err("empty field name");
    }
    // No early exit: valid names are the usual case, and the loop is then
    // one lookup and one OR a byte.
    let token = name
        .iter()
        .fold(true, |all, &b| all & LOWER_TCHAR[usize::from(b)]);
    if token || name.iter().all(|&b| NAME_BYTE[usize::from(b)]) {
        return Ok(token);
    }
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err("uppercase field name");
    }
    Err("invalid character in field name")
}

/// RFC 9113 §8.2.1: no NUL, CR or LF in a value, and no whitespace around
/// it; `Ok(true)` when it also holds no other control byte nor DEL (see
/// [`FieldList::plain`]).
fn check_value(value: &[u8]) -> Result<bool, &'static str> {
    let visible = all_visible(value);
    if !visible && value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
        return Err("NUL, CR or LF in a field value");
    }
    if let (Some(&first), Some(&last)) = (value.first(), value.last()) {
        if matches!(first, b' ' | b'\t') || matches!(last, b' ' | b'\t') {
            return Err("whitespace around a field value");
        }
    }
    Ok(visible)
}

/// Eight bytes of `b` a word.
const LANES: u64 = 0x0101_0101_0101_0101;

/// No byte of `value` is a control byte (HTAB aside) or DEL. Eight bytes are
/// judged at once (the last word overlapping the one before it): a word
/// with a byte below SP or equal to DEL (HTAB among them) sends the value to
/// the byte-by-byte test, so the usual value costs a few instructions a
/// word and a value with HTAB is still judged exactly.
fn all_visible(value: &[u8]) -> bool {
    let visible = |b: u8| !((b < b' ' && b != b'\t') || b == 0x7f);
    let Some(last) = value.len().checked_sub(8) else {
        // Shorter than a word.
        return value.iter().fold(true, |all, &b| all & visible(b));
    };
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&value[at..at + 8]);
        control_or_del(u64::from_le_bytes(w))
    };
    let mut suspect = word(last);
    let mut at = 0;
    while at < last {
        suspect |= word(at);
        at += 8;
    }
    suspect == 0 || value.iter().all(|&b| visible(b))
}

/// Non-zero when a byte of `x` is below SP or is DEL (exact for both, as
/// both bounds are at most 0x80).
fn control_or_del(x: u64) -> u64 {
    let below_space = x.wrapping_sub(LANES * 0x20) & !x;
    let del = x ^ (LANES * 0x7f);
    let del = del.wrapping_sub(LANES) & !del;
    (below_space | del) & (LANES * 0x80)
}

fn parse_content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time test agrees with the byte-by-byte definition for
    /// every byte value, at every place in values of every length around
    /// the word size.
    #[test]
    fn all_visible_agrees_with_each_byte() {
        let visible = |b: u8| !((b < b' ' && b != b'\t') || b == 0x7f);
        for len in 1..=20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut value = vec![b'x'; len];
                    value[at] = b;
                    assert_eq!(all_visible(&value), visible(b), "{b:#x} at {at} of {len}");
                }
            }
        }
        assert!(all_visible(b""));
        assert!(all_visible("caf\u{e9} \t~".as_bytes()));
    }
}
