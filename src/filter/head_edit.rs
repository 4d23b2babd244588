//! A response head as response filters edit it: the status and the fields in
//! order, each borrowed where unchanged, values made for the request in one
//! scratch buffer. The usual head (up to [`INLINE_FIELDS`] fields) is edited on
//! the stack, so a filtered route allocates nothing for it.

use super::placeholder::Template;
use crate::http::{Body, RequestId, RequestView, ResponseHead, Session};

/// Fields an edited head hands over without allocating.
const INLINE_FIELDS: usize = 24;

/// Where an edited field's value is.
#[derive(Debug, Clone, Copy)]
enum FieldValue<'a> {
    /// Unchanged, or configuration bytes.
    Borrowed(&'a [u8]),
    /// Expanded for this request: `scratch[start..end]`.
    Scratch(usize, usize),
}

/// A response head being edited by response filters: the status and the
/// fields in order, borrowed where unchanged.
pub struct HeadEdit<'a> {
    /// The status sent; filters read it to decide whether they apply.
    pub status: u16,
    fields: FieldList<'a>,
    scratch: Vec<u8>,
}

impl<'a> HeadEdit<'a> {
    /// Every field of `head`, computed and configured, in the order it would be sent.
    pub fn from_head(head: &ResponseHead<'a>) -> Self {
        let mut fields = FieldList::Inline([("", FieldValue::Borrowed(&[])); INLINE_FIELDS], 0);
        for (n, v) in head.all_fields() {
            fields.push((n, FieldValue::Borrowed(v)));
        }
        HeadEdit {
            status: head.status,
            fields,
            scratch: Vec::new(),
        }
    }

    /// Keeps only the fields whose name passes `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.fields.retain(|n| keep(n));
    }

    /// Whether a field called `name` (any case) is present.
    pub fn contains(&self, name: &str) -> bool {
        self.fields
            .as_slice()
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// The value of the first field called `name` (any case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .as_slice()
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, v)| self.value(v))
    }

    /// Whether a `Vary` field already names `Accept-Encoding` (or `*`).
    pub fn varies_by_coding(&self) -> bool {
        self.fields
            .as_slice()
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("vary"))
            .flat_map(|&(_, v)| self.value(v).split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .any(|t| t == b"*" || t.eq_ignore_ascii_case(b"accept-encoding"))
    }

    /// Appends a field.
    pub fn push(&mut self, name: &'a str, value: &'a [u8]) {
        self.fields.push((name, FieldValue::Borrowed(value)));
    }

    /// Appends a field whose value is made for this response (copied).
    pub fn push_owned(&mut self, name: &'a str, value: &[u8]) {
        let start = self.scratch.len();
        self.scratch.extend_from_slice(value);
        self.fields
            .push((name, FieldValue::Scratch(start, self.scratch.len())));
    }

    /// Appends a field whose value is `template` expanded for `req`; nothing
    /// when it expands to nothing.
    pub fn push_template(
        &mut self,
        name: &'a str,
        template: &'a Template,
        req: &RequestView<'_>,
        id: &RequestId,
    ) {
        if let Some(v) = template.as_literal() {
            if !v.is_empty() {
                self.push(name, v);
            }
            return;
        }
        let start = self.scratch.len();
        template.expand(req, id, &mut self.scratch);
        if self.scratch.len() > start {
            self.fields
                .push((name, FieldValue::Scratch(start, self.scratch.len())));
        }
    }

    fn value(&self, v: FieldValue<'a>) -> &[u8] {
        match v {
            FieldValue::Borrowed(b) => b,
            FieldValue::Scratch(s, e) => &self.scratch[s..e],
        }
    }

    /// The fields as a head takes them.
    pub fn fields(&self) -> Vec<(&str, &[u8])> {
        self.fields
            .as_slice()
            .iter()
            .map(|&(n, v)| (n, self.value(v)))
            .collect()
    }

    /// Gives the edited head to `session` with `body`; a head with a usual
    /// number of fields is handed over from the stack.
    pub fn send<'h>(&self, session: &mut dyn Session<'h>, body: Body<'h>) {
        let mut inline: [(&str, &[u8]); INLINE_FIELDS] = [("", &[]); INLINE_FIELDS];
        if let Some(n) = self.fill(&mut inline) {
            return session.send_response(&ResponseHead::new(self.status, &inline[..n]), body);
        }
        let fields = self.fields();
        session.send_response(&ResponseHead::new(self.status, &fields), body);
    }

    /// Writes the fields into `out` and returns how many, or `None` when
    /// they do not fit.
    fn fill<'b>(&'b self, out: &mut [(&'b str, &'b [u8])]) -> Option<usize> {
        let fields = self.fields.as_slice();
        if fields.len() > out.len() {
            return None;
        }
        for (slot, &(n, v)) in out.iter_mut().zip(fields) {
            *slot = (n, self.value(v));
        }
        Some(fields.len())
    }
}

type EditedField<'a> = (&'a str, FieldValue<'a>);

/// The fields: on the stack up to [`INLINE_FIELDS`], on the heap past that.
/// The inline variant is meant to be large: it is what saves the allocation.
#[allow(clippy::large_enum_variant)]
enum FieldList<'a> {
    Inline([EditedField<'a>; INLINE_FIELDS], usize),
    Heap(Vec<EditedField<'a>>),
}

impl<'a> FieldList<'a> {
    fn as_slice(&self) -> &[EditedField<'a>] {
        match self {
            FieldList::Inline(fields, n) => &fields[..*n],
            FieldList::Heap(fields) => fields,
        }
    }

    fn push(&mut self, field: EditedField<'a>) {
        match self {
            FieldList::Inline(fields, n) if *n < INLINE_FIELDS => {
                fields[*n] = field;
                *n += 1;
            }
            FieldList::Inline(fields, n) => {
                let mut heap = fields[..*n].to_vec();
                heap.push(field);
                *self = FieldList::Heap(heap);
            }
            FieldList::Heap(fields) => fields.push(field),
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        match self {
            FieldList::Inline(fields, n) => {
                let mut kept = 0;
                for i in 0..*n {
                    if keep(fields[i].0) {
                        fields[kept] = fields[i];
                        kept += 1;
                    }
                }
                *n = kept;
            }
            FieldList::Heap(fields) => fields.retain(|(name, _)| keep(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_past_the_inline_fields_moves_to_the_heap_in_order() {
        let names: Vec<String> = (0..INLINE_FIELDS + 5).map(|i| format!("X-{i}")).collect();
        let head = ResponseHead::new(200, &[]);
        let mut edit = HeadEdit::from_head(&head);
        for n in &names {
            edit.push(n, b"v");
        }
        edit.retain(|n| n != "X-3");
        let got: Vec<&str> = edit.fields().into_iter().map(|(n, _)| n).collect();
        let want: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| *n != "X-3")
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            edit.fill(&mut [("", &b""[..]); INLINE_FIELDS]),
            None,
            "too many for the stack"
        );
        edit.retain(|n| n.len() == 3);
        assert_eq!(edit.fill(&mut [("", &b""[..]); INLINE_FIELDS]), Some(9));
        assert!(edit.contains("x-9"));
    }
}
