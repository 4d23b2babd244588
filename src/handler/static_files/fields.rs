//! The head fields of a static reply, in the order they are sent: what the
//! handler gives the session for each answer, and what a cached file
//! version's prepared heads hold for its 200 and 304.

use super::reply::Reply;

/// `Content-Type` of status pages.
const TEXT_PLAIN: &[u8] = b"text/plain; charset=utf-8";

/// Most fields a reply carries (a 206 of a precompressed file: five of its
/// own, `Content-Encoding` and `Vary`).
const MAX_FIELDS: usize = 8;

/// The fields of one reply, collected on the stack.
pub(super) struct ReplyFields<'r> {
    fields: [(&'static str, &'r [u8]); MAX_FIELDS],
    len: usize,
}

impl<'r> ReplyFields<'r> {
    /// The fields `reply` is sent with. `vary_coding`: the route serves
    /// precompressed files, so its 200, 206 and 304 answers depend on
    /// `Accept-Encoding`. Listings are not covered: they vary by `Accept`.
    pub(super) fn of(reply: &'r Reply, vary_coding: bool) -> Self {
        let mut out = ReplyFields {
            fields: [("", &[]); MAX_FIELDS],
            len: 0,
        };
        let text = matches!(
            reply,
            Reply::Redirect { .. }
                | Reply::RangeNotSatisfiable { .. }
                | Reply::Error(_)
                | Reply::Blocked(_)
        );
        if text {
            out.push(("Content-Type", TEXT_PLAIN));
        }
        for field in reply.headers() {
            out.push(field);
        }
        if let Some(coding) = reply.content_coding() {
            out.push(("Content-Encoding", coding.token().as_bytes()));
        }
        if vary_coding && matches!(reply.status(), 200 | 206 | 304) {
            out.push(("Vary", b"Accept-Encoding"));
        }
        out
    }

    fn push(&mut self, field: (&'static str, &'r [u8])) {
        if let Some(slot) = self.fields.get_mut(self.len) {
            *slot = field;
            self.len += 1;
        }
    }

    /// The fields, in order.
    pub(super) fn as_slice(&self) -> &[(&'static str, &'r [u8])] {
        &self.fields[..self.len]
    }
}
