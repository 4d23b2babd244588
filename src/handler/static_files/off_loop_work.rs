//! What a static request waits for off the event loop, and what it got back:
//! plain data, so the reply types can name it without depending on the code
//! that runs the work (off_loop.rs).

use std::cell::RefCell;
use std::fs::{File, Metadata};
use std::io;

/// Work a request is waiting for; runs on any thread.
#[derive(Debug)]
pub enum OffLoop {
    /// Open this resolved path (and read its metadata).
    Open(Vec<u8>),
    /// List this directory (already checked to lie under the root);
    /// `relative` is its path as the page titles it.
    Listing {
        /// Resolved path of the directory.
        dir: Vec<u8>,
        /// Normalised request path of the directory.
        relative: Vec<u8>,
        /// As JSON rather than HTML.
        json: bool,
    },
}

/// An open file with its metadata, or why it could not be opened.
pub(super) type OpenResult = io::Result<(File, Metadata)>;

/// Files opened off the loop for one request, by resolved path, each taken
/// by the decision that asked for it.
#[derive(Default)]
pub struct OpenedOffLoop {
    opened: RefCell<Vec<(Vec<u8>, OpenResult)>>,
}

impl std::fmt::Debug for OpenedOffLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenedOffLoop({} paths)", self.opened.borrow().len())
    }
}

impl OpenedOffLoop {
    /// The result of opening `path` off the loop, if it was.
    pub(super) fn take(&self, path: &[u8]) -> Option<OpenResult> {
        let mut opened = self.opened.borrow_mut();
        let i = opened.iter().position(|(p, _)| p == path)?;
        Some(opened.swap_remove(i).1)
    }

    /// Records the result of opening `path` off the loop.
    pub(super) fn push(&self, path: Vec<u8>, result: OpenResult) {
        self.opened.borrow_mut().push((path, result));
    }
}
