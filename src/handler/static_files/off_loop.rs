//! The static handler's file work that may wait on a disk: an open of a path
//! whose dentries are not cached, and directory listings.
//!
//! A request is first decided inline ([`StaticFiles::decide`]); an open that
//! would wait makes it a [`Reply::Blocked`] naming the work. The handler runs
//! that work on the blocking pool and decides again with the result in hand
//! ([`OpenedOffLoop`]), so the decision logic (index files, `try_files`, error
//! pages, redirects, the root check, conditionals, ranges) exists once,
//! whichever thread opened.

use super::autoindex::listing;
use super::autoindex_json::listing_json;
use super::off_loop_work::{OffLoop, OpenResult, OpenedOffLoop};
use super::path::{as_path, open};
use super::reply::Reply;
use super::StaticFiles;
use crate::file_io::FileIoPool;

/// What the work found; sent back from a pool thread.
enum OffLoopDone {
    Opened(Vec<u8>, OpenResult),
    /// The listing's body, and whether it is JSON; or the error status.
    Listed(Result<(Vec<u8>, bool), u16>),
}

impl OffLoop {
    fn run(self) -> OffLoopDone {
        match self {
            OffLoop::Open(path) => {
                let opened = open(as_path(&path));
                OffLoopDone::Opened(path, opened)
            }
            OffLoop::Listing {
                dir,
                relative,
                json,
            } => {
                let listed = if json {
                    listing_json(as_path(&dir))
                } else {
                    listing(as_path(&dir), &relative)
                };
                OffLoopDone::Listed(match listed {
                    Reply::Listing { body } => Ok((body, false)),
                    Reply::ListingJson { body } => Ok((body, true)),
                    Reply::Error(status) => Err(status),
                    _ => Err(500),
                })
            }
        }
    }
}

/// Rounds of off-loop work one request may need beyond its index files and
/// `try_files` entries: the path itself, the directory for a listing, the
/// listing, an error page.
const EXTRA_ROUNDS: usize = 4;

impl StaticFiles {
    /// Finishes a request whose decision needs `work`: runs it on `pool`
    /// while the worker serves other connections, and decides again with its
    /// result, as often as the decision needs. A pool that does not answer in
    /// time makes the reply a 503.
    pub(super) async fn finish_off_loop(
        &self,
        pool: &FileIoPool,
        request: impl Fn(&OpenedOffLoop) -> Reply,
        mut work: OffLoop,
    ) -> Reply {
        let opened = OpenedOffLoop::default();
        for _ in 0..self.index.len() + self.rules.try_files.len() + EXTRA_ROUNDS {
            let done = match pool.run(move || work.run()).await {
                Ok(done) => done,
                Err(_) => return Reply::Error(503),
            };
            match done {
                OffLoopDone::Listed(listed) => return listed_reply(listed),
                OffLoopDone::Opened(path, result) => {
                    opened.push(path, result);
                    match request(&opened) {
                        Reply::Blocked(next) => work = next,
                        reply => return reply,
                    }
                }
            }
        }
        Reply::Error(503)
    }
}

fn listed_reply(listed: Result<(Vec<u8>, bool), u16>) -> Reply {
    match listed {
        Ok((body, false)) => Reply::Listing { body },
        Ok((body, true)) => Reply::ListingJson { body },
        Err(status) => Reply::Error(status),
    }
}
