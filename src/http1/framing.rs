//! Body framing of a request decided from its head (RFC 9112 §6.1, §6.3):
//! Content-Length, Transfer-Encoding, Connection and Expect gathered over
//! every field line, then judged once.

use super::grammar::{eq_lowercase, is_tchar, list_elements, parse_content_length, trim_ows};
use super::request_error::RequestError;

/// How the request body is framed (RFC 9112 §6.3); decided once, from the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body: neither Content-Length nor Transfer-Encoding.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// Chunked transfer coding; decode with `BodyDecoder`.
    Chunked,
}

/// Which header fields need more than storing.
pub(super) enum FieldRole {
    /// `Host`: the caller validates and records it.
    Host,
    /// Anything else, framing fields included (already recorded here).
    Other,
}

/// What the framing-relevant fields said, gathered over all lines.
#[derive(Default)]
pub(super) struct Framing {
    pub(super) host_lines: u32,
    content_length: Option<u64>,
    te: TeSummary,
    pub(super) close: bool,
    pub(super) keep_alive: bool,
    pub(super) expect_continue: bool,
}

/// Transfer-Encoding list elements over all lines, in order.
#[derive(Default)]
struct TeSummary {
    present: bool,
    elements: u32,
    malformed: bool,
    last_is_chunked: bool,
    chunked: u32,
    other: bool,
}

impl Framing {
    /// Records one field line; dispatches on length first so most names cost
    /// one integer compare.
    pub(super) fn field(&mut self, name: &[u8], value: &[u8]) -> Result<FieldRole, RequestError> {
        match name.len() {
            4 if eq_lowercase(name, b"host") => {
                self.host_lines += 1;
                if self.host_lines > 1 {
                    return Err(RequestError::DuplicateHost);
                }
                return Ok(FieldRole::Host);
            }
            14 if eq_lowercase(name, b"content-length") => {
                if self.content_length.is_some() {
                    return Err(RequestError::DuplicateContentLength);
                }
                self.content_length =
                    Some(parse_content_length(value).ok_or(RequestError::InvalidContentLength)?);
            }
            17 if eq_lowercase(name, b"transfer-encoding") => {
                self.te.present = true;
                for element in list_elements(value) {
                    self.te.add(element);
                }
            }
            10 if eq_lowercase(name, b"connection") => {
                for token in list_elements(value) {
                    if eq_lowercase(token, b"close") {
                        self.close = true;
                    } else if eq_lowercase(token, b"keep-alive") {
                        self.keep_alive = true;
                    }
                }
            }
            6 if eq_lowercase(name, b"expect") && eq_lowercase(value, b"100-continue") => {
                self.expect_continue = true;
            }
            _ => {}
        }
        Ok(FieldRole::Other)
    }

    /// RFC 9112 §6.1/§6.3 for requests. Checked in this order, so the status
    /// is predictable when several rules are broken: Transfer-Encoding in 1.0
    /// (400), with Content-Length (400), malformed or empty (400), final coding
    /// not chunked (400), chunked twice (400), other codings before chunked (501).
    pub(super) fn body_kind(&self, http10: bool) -> Result<BodyKind, RequestError> {
        if !self.te.present {
            return Ok(match self.content_length {
                Some(n) => BodyKind::Length(n),
                None => BodyKind::None,
            });
        }
        if http10 {
            return Err(RequestError::TransferEncodingInHttp10);
        }
        if self.content_length.is_some() {
            return Err(RequestError::ContentLengthWithTransferEncoding);
        }
        let te = &self.te;
        if te.malformed || te.elements == 0 || !te.last_is_chunked || te.chunked > 1 {
            return Err(RequestError::BadTransferEncoding);
        }
        if te.other {
            return Err(RequestError::UnsupportedTransferCoding);
        }
        Ok(BodyKind::Chunked)
    }
}

impl TeSummary {
    fn add(&mut self, element: &[u8]) {
        self.elements += 1;
        // transfer-coding = token *( OWS ";" OWS transfer-parameter ); only the
        // name matters, since anything with parameters is not plain chunked.
        let name_len = element
            .iter()
            .position(|&b| !is_tchar(b))
            .unwrap_or(element.len());
        let (name, params) = element.split_at(name_len);
        if name.is_empty() || !(params.is_empty() || trim_ows(params).first() == Some(&b';')) {
            self.malformed = true;
        }
        self.last_is_chunked = params.is_empty() && name.eq_ignore_ascii_case(b"chunked");
        if self.last_is_chunked {
            self.chunked += 1;
        } else {
            self.other = true;
        }
    }
}
