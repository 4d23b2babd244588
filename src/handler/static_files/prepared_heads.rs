//! The head fields of a cached file version's answers, kept with its entry in
//! the open-file cache (`prepared.rs` makes and uses them).

use crate::http::FieldBlock;

/// Everything a 200 and a 304 for one file version carry besides what the
/// driver adds (status line, `Date`, framing, `Connection`) and what the
/// route's response filters add: `Content-Type`, `ETag`, `Last-Modified`,
/// `Accept-Ranges` and, on a route with precompressed files, `Vary`.
#[derive(Debug)]
pub(super) struct PreparedHeads {
    /// The fields of a 200 with the whole file.
    pub(super) full: FieldBlock,
    /// The fields of a 304.
    pub(super) not_modified: FieldBlock,
}
