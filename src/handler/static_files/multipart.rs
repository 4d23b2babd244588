//! `206 multipart/byteranges` (RFC 9110 §14.6): several ranges of one file in one
//! answer, laid out as nginx lays them out, with every length known up front so
//! the head carries an exact Content-Length and the connection stays alive.
//!
//! The body is a list of parts for the driver: each part head is a few bytes
//! built here, each range a region of the open file that the driver sends like
//! any file body (sendfile on plain TCP, bounded chunks under TLS). How many
//! ranges and how many bytes they may add up to is decided in `range.rs`.

use std::fs::File;
use std::rc::Rc;

use crate::http::{Body, BodyPart, FileRegion};

use super::range::ByteSpan;
use super::values::{ContentRange, ETag, HttpDateValue};

/// Media type of the answer, before its boundary parameter.
const MULTIPART_BYTERANGES: &str = "multipart/byteranges; boundary=";

/// A 206 carrying two or more ranges of one open file.
#[derive(Debug)]
pub struct MultipartReply {
    /// Opened read-only; every range is a region of it.
    file: Rc<File>,
    /// The whole file when the open-file cache holds it in memory.
    content: Option<Rc<[u8]>>,
    /// The ranges, in the order the client asked for them.
    spans: Vec<ByteSpan>,
    /// File size when it was opened.
    total: u64,
    /// Media type of each part (the file's own).
    part_type: &'static str,
    /// `multipart/byteranges; boundary=...`, the answer's Content-Type.
    content_type: String,
    /// Strong validator of the file.
    pub(super) etag: ETag,
    /// File mtime as an IMF-fixdate.
    pub(super) last_modified: HttpDateValue,
}

impl MultipartReply {
    /// A reply for `spans` (at least two, each within `total`) with a fresh boundary.
    pub(super) fn new(
        file: Rc<File>,
        content: Option<Rc<[u8]>>,
        spans: Vec<ByteSpan>,
        total: u64,
        part_type: &'static str,
        etag: ETag,
        last_modified: HttpDateValue,
    ) -> Self {
        let mut content_type = String::with_capacity(MULTIPART_BYTERANGES.len() + 20);
        content_type.push_str(MULTIPART_BYTERANGES);
        content_type.push_str(&fresh_boundary());
        MultipartReply {
            file,
            content,
            spans,
            total,
            part_type,
            content_type,
            etag,
            last_modified,
        }
    }

    /// The answer's `Content-Type` value, with its boundary.
    pub fn content_type(&self) -> &[u8] {
        self.content_type.as_bytes()
    }

    /// The boundary that separates the parts.
    pub fn boundary(&self) -> &str {
        &self.content_type[MULTIPART_BYTERANGES.len()..]
    }

    /// The body as the driver sends it: for each range its part head then its
    /// bytes, then the closing delimiter. Its length is the Content-Length.
    pub fn body(&self) -> Body<'static> {
        let boundary = self.boundary().as_bytes();
        let mut parts = Vec::with_capacity(self.spans.len() * 2 + 1);
        for span in &self.spans {
            let range = ContentRange::satisfied(span.first, span.last, self.total);
            let mut head = Vec::with_capacity(
                boundary.len() + self.part_type.len() + range.as_bytes().len() + 48,
            );
            head.extend_from_slice(b"\r\n--");
            head.extend_from_slice(boundary);
            head.extend_from_slice(b"\r\nContent-Type: ");
            head.extend_from_slice(self.part_type.as_bytes());
            head.extend_from_slice(b"\r\nContent-Range: ");
            head.extend_from_slice(range.as_bytes());
            head.extend_from_slice(b"\r\n\r\n");
            parts.push(BodyPart::Owned(head));
            parts.push(BodyPart::File(FileRegion {
                file: self.file.clone(),
                offset: span.first,
                len: span.len(),
                content: self.content.clone(),
            }));
        }
        let mut close = Vec::with_capacity(boundary.len() + 8);
        close.extend_from_slice(b"\r\n--");
        close.extend_from_slice(boundary);
        close.extend_from_slice(b"--\r\n");
        parts.push(BodyPart::Owned(close));
        Body::Parts(parts)
    }
}

/// Sixteen random hex digits: a boundary that file content cannot be made to
/// contain on purpose (nginx uses a counter; a guessable boundary lets a file
/// that contains it confuse clients that split on it).
fn fresh_boundary() -> String {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        // No system randomness: a boundary that still differs per answer.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos as u64).to_le_bytes();
    }
    data_encoding::HEXLOWER.encode(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::BodyPart;

    fn reply_for(content: &[u8], spans: &[(u64, u64)]) -> (tempfile::TempDir, MultipartReply) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, content).unwrap();
        let file = Rc::new(File::open(&path).unwrap());
        let spans = spans
            .iter()
            .map(|&(first, last)| ByteSpan { first, last })
            .collect();
        let total = content.len() as u64;
        let reply = MultipartReply::new(
            file,
            None,
            spans,
            total,
            "text/plain",
            ETag::new(1, total),
            HttpDateValue::from_unix_secs(1),
        );
        (dir, reply)
    }

    /// The body with every file region read, as a client receives it.
    fn flatten(body: &Body<'_>) -> Vec<u8> {
        let Body::Parts(parts) = body else {
            panic!("a multipart body is sent as parts, got {body:?}");
        };
        let mut out = Vec::new();
        for part in parts {
            match part {
                BodyPart::Owned(b) => out.extend_from_slice(b),
                BodyPart::File(r) => {
                    use std::os::unix::fs::FileExt;
                    let mut buf = vec![0; r.len as usize];
                    r.file.read_exact_at(&mut buf, r.offset).unwrap();
                    out.extend_from_slice(&buf);
                }
            }
        }
        out
    }

    #[test]
    fn body_is_laid_out_as_nginx_lays_it_out() {
        let (_dir, reply) = reply_for(b"Hello, World!", &[(0, 4), (7, 11)]);
        let b = reply.boundary().to_string();
        assert_eq!(b.len(), 16);
        assert!(b.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            reply.content_type(),
            format!("multipart/byteranges; boundary={b}").as_bytes()
        );
        let body = reply.body();
        let expected = format!(
            "\r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-4/13\r\n\r\nHello\
             \r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 7-11/13\r\n\r\nWorld\
             \r\n--{b}--\r\n"
        );
        assert_eq!(String::from_utf8(flatten(&body)).unwrap(), expected);
        assert_eq!(body.len(), Some(expected.len() as u64), "exact length");
    }

    #[test]
    fn each_answer_gets_its_own_boundary() {
        let (_d1, a) = reply_for(b"abcdef", &[(0, 0), (2, 2)]);
        let (_d2, b) = reply_for(b"abcdef", &[(0, 0), (2, 2)]);
        assert_ne!(a.boundary(), b.boundary());
    }
}
