//! `respond`: a fixed status, header fields and body from the config — health
//! checks and benchmarks. The fields, and the HTTP/1 head around them, are
//! validated and encoded once at start; each answer borrows them and the
//! body, so it costs no allocation.

use crate::http::status::has_no_body;
use crate::http::{Body, FieldBlock, OwnedField, ResponseHead, Served, Session};
use crate::observe::metrics::HandlerKind;

use super::Handler;

/// A fixed response.
#[derive(Debug)]
pub struct Respond {
    status: u16,
    body: Box<[u8]>,
    fields: FieldBlock,
}

impl Respond {
    /// Keeps the fields; names and values were validated by the config.
    pub fn new(status: u16, body: Vec<u8>, headers: &[(String, String)]) -> Self {
        let fields = FieldBlock::new(
            headers
                .iter()
                .map(|(name, value)| OwnedField::new(name, value.as_bytes()))
                .collect(),
        );
        // The whole HTTP/1 head but the date, once: every answer is the same.
        let fields = if has_no_body(status) {
            fields
        } else {
            fields.with_http1_head(status, body.len() as u64)
        };
        Respond {
            status,
            body: body.into_boxed_slice(),
            fields,
        }
    }

    /// Status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Body bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

impl Handler for Respond {
    fn kind(&self) -> HandlerKind {
        HandlerKind::Respond
    }

    fn answers_at_once(&self) -> bool {
        true
    }

    fn serve<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Served<'s> {
        let head = ResponseHead {
            date: None,
            status: self.status,
            fields: &[],
            configured: Some(&self.fields),
            field_lines: &[],
        };
        let body = if self.body.is_empty() {
            Body::Empty
        } else {
            Body::Bytes(&self.body)
        };
        session.send_response(&head, body);
        Served::Done
    }
}
