//! Requests for a cached file that need nothing but the file, answered from
//! the heads prepared for its version: per request only what depends on the
//! request is decided (its conditionals), and the head's fields are one block
//! the HTTP/1 driver copies whole. Everything else goes the whole way through
//! [`StaticFiles::decide`], which answers these requests the same.

use std::rc::Rc;

use crate::http::{Body, FieldBlock, FileRegion, OwnedField, ResponseHead, Session};

use super::conditional::not_modified;
use super::fields::ReplyFields;
use super::open_cache::OpenedFile;
use super::path::is_normal;
use super::prepared_heads::PreparedHeads;
use super::reply::{file_reply, Reply, StaticRequest};
use super::{now, StaticFiles};

/// An answer decided from prepared heads; it holds nothing of the request.
pub(super) struct PreparedAnswer {
    heads: Rc<PreparedHeads>,
    /// The whole file for a 200; `None` for a 304.
    file: Option<FileRegion>,
}

impl StaticFiles {
    /// The answer from the open-file cache's prepared heads when `req` needs
    /// nothing more: a GET or HEAD of a path already normal, whose entry is
    /// fresh, without `Range` or preconditions (`If-Match`,
    /// `If-Unmodified-Since`), on a route without `try_files`, and where no
    /// precompressed sibling could be chosen instead. `None`: the request
    /// goes the whole way. It opens and reads nothing, so `req.off_loop` is
    /// not asked.
    pub(super) fn prepared_answer(&self, req: &StaticRequest<'_>) -> Option<PreparedAnswer> {
        let vary_coding = self.varies_by_coding();
        if !req.method_allowed
            || req.range.is_some()
            || req.if_match.is_some()
            || req.if_unmodified_since.is_some()
            || !self.rules.try_files.is_empty()
            || (vary_coding && req.accept_encoding.is_some())
            || !is_normal(req.path)
        {
            return None;
        }
        self.with_fresh(req.open_files, req.path, now(req), |entry| {
            let opened = &entry.opened;
            let heads = entry
                .heads
                .get_or_init(|| Rc::new(prepare(opened, vary_coding)))
                .clone();
            let current = not_modified(
                req.if_none_match,
                req.if_modified_since,
                &opened.etag,
                opened.mtime,
            );
            let file = (!current).then(|| FileRegion {
                file: opened.file.clone(),
                offset: 0,
                len: opened.size,
                content: opened.content.clone(),
            });
            PreparedAnswer { heads, file }
        })
    }
}

impl PreparedAnswer {
    /// Hands the answer to the session: a 200 with the whole file, or a 304.
    pub(super) fn give(self, session: &mut dyn Session<'_>) {
        let (status, fields, body) = match self.file {
            Some(region) => (200, &self.heads.full, Body::File(region)),
            None => (304, &self.heads.not_modified, Body::Empty),
        };
        let head = ResponseHead {
            configured: Some(fields),
            ..ResponseHead::new(status, &[])
        };
        session.send_response(&head, body);
    }
}

/// The heads of `opened`'s 200 and 304, made by the functions that decide and
/// list the fields of every static reply, so both ways send the same fields.
fn prepare(opened: &OpenedFile, vary_coding: bool) -> PreparedHeads {
    let full = file_reply(
        &StaticRequest::default(),
        opened.clone(),
        opened.content_type,
    );
    let not_modified = Reply::NotModified {
        etag: opened.etag,
        last_modified: opened.last_modified,
    };
    PreparedHeads {
        full: block(&full, vary_coding),
        not_modified: block(&not_modified, vary_coding),
    }
}

fn block(reply: &Reply, vary_coding: bool) -> FieldBlock {
    let fields = ReplyFields::of(reply, vary_coding);
    FieldBlock::new(
        fields
            .as_slice()
            .iter()
            .map(|&(name, value)| OwnedField::new(name, value))
            .collect(),
    )
}
