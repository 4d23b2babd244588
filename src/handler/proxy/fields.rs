//! Field names the proxy treats specially in both directions, the options of
//! `Connection` fields (which make further fields hop-by-hop), and the copy of
//! forwarded field lines in runs. Shared by the two rewrite phases.

use crate::http1::grammar::list_elements;
use crate::http1::parse::HeaderSpan;
use crate::http1::response::eq_lowercase;

/// Whether a request trailer is relayed upstream: an end-to-end field
/// (`grpc-*`, checksums), never one about framing, routing or the connection
/// (RFC 9110 §6.5.1).
pub(super) fn relayed_trailer(name: &str) -> bool {
    Field::of(name.as_bytes()) == Field::Other
}

/// The field-name classes both rewrite phases go by (the response parser
/// records them for the upstream's head as it checks the framing).
pub(super) use crate::http1::field_name::FieldName as Field;

/// Options a `Connection` field may hold gathered in place: more than this and
/// the values are searched again for each field.
pub(super) const CONNECTION_TOKENS: usize = 8;

/// The options of a message's `Connection` fields, gathered once so that each
/// other field is checked against a short list (`Connection: close, X-Foo`
/// means X-Foo is for this hop only).
pub(super) struct ConnectionOptions<'b> {
    pub(super) tokens: [&'b [u8]; CONNECTION_TOKENS],
    pub(super) len: usize,
    /// Every `Connection` value, when the options did not fit in `tokens`.
    pub(super) overflow: Option<Vec<&'b [u8]>>,
}

impl<'b> ConnectionOptions<'b> {
    /// `fields` gives the message's field lines, from the start each time.
    pub(super) fn gather<I: Iterator<Item = (&'b [u8], &'b [u8])>>(fields: impl Fn() -> I) -> Self {
        let is_connection = |name: &[u8]| eq_lowercase(name, b"connection");
        let mut options = ConnectionOptions {
            tokens: [&[]; CONNECTION_TOKENS],
            len: 0,
            overflow: None,
        };
        for (_, value) in fields().filter(|(n, _)| is_connection(n)) {
            for token in list_elements(value) {
                if options.len == CONNECTION_TOKENS {
                    options.len = 0;
                    options.overflow = Some(
                        fields()
                            .filter(|(n, _)| is_connection(n))
                            .map(|(_, v)| v)
                            .collect(),
                    );
                    return options;
                }
                options.tokens[options.len] = token;
                options.len += 1;
            }
        }
        options
    }

    /// Whether an option names the field `name`.
    pub(super) fn names(&self, name: &[u8]) -> bool {
        match &self.overflow {
            None => self.tokens[..self.len]
                .iter()
                .any(|t| t.eq_ignore_ascii_case(name)),
            Some(values) => values
                .iter()
                .any(|v| list_elements(v).any(|t| t.eq_ignore_ascii_case(name))),
        }
    }
}

/// Appends forwarded field lines as `name: value\r\n`. Lines that already read
/// so in the received head and follow one another there are copied as one run,
/// so a head forwarded mostly unchanged costs a few copies, not four per line.
#[derive(Default)]
pub(super) struct FieldCopy {
    /// Received lines `start..end` not yet appended.
    pub(super) run: Option<(usize, usize)>,
}

impl FieldCopy {
    pub(super) fn field(&mut self, out: &mut Vec<u8>, buf: &[u8], h: HeaderSpan) {
        let (name, value) = (h.name, h.value);
        let plain = value.start() == name.end() + 2
            && buf.get(name.end()..value.start()) == Some(b": ")
            && buf.get(value.end()..value.end() + 2) == Some(b"\r\n");
        if !plain {
            self.finish(out, buf);
            out.extend_from_slice(name.get(buf));
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.get(buf));
            out.extend_from_slice(b"\r\n");
            return;
        }
        match &mut self.run {
            Some((_, end)) if *end == name.start() => *end = value.end() + 2,
            _ => {
                self.finish(out, buf);
                self.run = Some((name.start(), value.end() + 2));
            }
        }
    }

    /// Appends the pending run; call once the last line has been given.
    pub(super) fn finish(&mut self, out: &mut Vec<u8>, buf: &[u8]) {
        if let Some((start, end)) = self.run.take() {
            out.extend_from_slice(buf.get(start..end).unwrap_or(&[]));
        }
    }
}
