//! Precompressed siblings (nginx's `gzip_static`, Caddy's `precompressed`):
//! with `precompressed = ["br", "zstd", "gzip"]`, a request for `app.js` that
//! accepts brotli gets `app.js.br` as it lies on disk, sent by sendfile like
//! any file, with `Content-Encoding: br`, ranges over the encoded bytes and an
//! ETag of its own (`"<mtime>-<size>-br"`), so a cache never mixes the
//! encodings up. A sibling older than the file is stale and ignored.
//!
//! The sibling is opened through the same path as the file (the open-file
//! cache, then an open from cached dentries, else off the event loop), so a
//! cold sibling never stalls the worker.

use std::io;
use std::time::Instant;

use rustix::io::Errno;

use super::off_loop_work::OffLoop;
use super::open_cache::OpenedFile;
use super::path::as_path;
use super::reply::{file_reply, Reply, StaticRequest};
use super::StaticFiles;
use crate::http::content_coding::{negotiate, Coding};

/// What looking for one sibling found.
enum Sibling {
    /// There, a regular file under the root, not older than the file.
    Found(OpenedFile),
    /// Not there (or not usable): try the next coding.
    Missing,
    /// Its open would wait on a disk.
    Blocked(Vec<u8>),
}

impl StaticFiles {
    /// The reply for the regular file `opened` at `relative` (its normalised
    /// path under the root): its best precompressed sibling the client
    /// accepts, when the route serves them and one is there, else the file
    /// itself.
    pub(super) fn file_or_sibling(
        &self,
        req: &StaticRequest<'_>,
        relative: &[u8],
        opened: OpenedFile,
    ) -> Reply {
        let content_type = opened.content_type;
        if self.rules.precompressed.is_empty() || req.accept_encoding.is_none() {
            return file_reply(req, opened, content_type);
        }
        let mut offered = [Coding::Gzip; 3];
        let mut n = 0;
        for &c in self.rules.precompressed.iter() {
            offered[n] = c;
            n += 1;
        }
        let mut sibling_path = Vec::with_capacity(relative.len() + 4);
        // The client's choice, then its next choice when that sibling is not there.
        while let Some(coding) = negotiate(req.accept_encoding, &offered[..n]).coding {
            sibling_path.clear();
            sibling_path.extend_from_slice(relative);
            sibling_path.extend_from_slice(coding.file_suffix().as_bytes());
            match self.sibling(req, &sibling_path, opened.mtime) {
                Sibling::Found(sibling) => {
                    let req = StaticRequest {
                        coding: Some(coding),
                        ..*req
                    };
                    return match file_reply(&req, sibling.clone(), content_type) {
                        // Several ranges of an encoded file: the whole file
                        // instead (RFC 9110 §14.2 lets a server ignore Range).
                        Reply::Multipart(_) => {
                            file_reply(&StaticRequest { range: None, ..req }, sibling, content_type)
                        }
                        reply => reply,
                    };
                }
                Sibling::Missing => {}
                Sibling::Blocked(path) => return Reply::Blocked(OffLoop::Open(path)),
            }
            let at = offered[..n].iter().position(|&c| c == coding).unwrap_or(0);
            offered.copy_within(at + 1..n, at);
            n -= 1;
        }
        file_reply(req, opened, content_type)
    }

    /// Looks for the sibling at `relative`, which must be no older than `mtime`.
    fn sibling(&self, req: &StaticRequest<'_>, relative: &[u8], mtime: u64) -> Sibling {
        let fresh = |s: OpenedFile| {
            if s.mtime >= mtime {
                Sibling::Found(s)
            } else {
                Sibling::Missing
            }
        };
        let now = req.now.unwrap_or_else(Instant::now);
        if let Some(opened) = self.cached(req.open_files, relative, now) {
            return fresh(opened);
        }
        let mut path = Vec::with_capacity(self.root_prefix.len() + relative.len());
        path.extend_from_slice(&self.root_prefix);
        path.extend_from_slice(relative);
        match self.open_for(req, &path) {
            Ok((file, meta)) => {
                if !meta.is_file() || !self.inside_root(&file, as_path(&path)) {
                    return Sibling::Missing;
                }
                fresh(self.remember(req.open_files, relative, file, &meta))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Sibling::Blocked(path),
            Err(e) => {
                if Errno::from_io_error(&e) != Some(Errno::NOENT) {
                    tracing::debug!(error = %e, "precompressed file not usable");
                }
                Sibling::Missing
            }
        }
    }
}

impl Reply {
    /// The `Content-Encoding` of a reply that sends a precompressed sibling.
    pub fn content_coding(&self) -> Option<Coding> {
        match self {
            Reply::File(f) => f.coding,
            _ => None,
        }
    }
}

impl StaticFiles {
    /// Whether the route's answers depend on `Accept-Encoding`.
    pub(super) fn varies_by_coding(&self) -> bool {
        !self.rules.precompressed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::handler::static_files::StaticRules;

    /// A root with `app.js` and the siblings named in `siblings`.
    fn site(siblings: &[&str]) -> (tempfile::TempDir, StaticFiles) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("app.js"), "console.log(1);\n".repeat(100)).unwrap();
        for s in siblings {
            fs::write(dir.path().join(format!("app.js{s}")), s.repeat(10)).unwrap();
        }
        let files = StaticFiles::new(dir.path(), vec![], false, false)
            .unwrap()
            .with_rules(StaticRules {
                precompressed: vec![Coding::Br, Coding::Zstd, Coding::Gzip].into(),
                ..StaticRules::default()
            });
        (dir, files)
    }

    fn request<'a>(accept: Option<&'a str>, range: Option<&'a str>) -> StaticRequest<'a> {
        StaticRequest {
            method_allowed: true,
            path: b"/app.js",
            accept_encoding: accept.map(str::as_bytes),
            range: range.map(str::as_bytes),
            ..StaticRequest::default()
        }
    }

    fn served(reply: Reply) -> (u16, Option<Coding>, u64, String) {
        match reply {
            Reply::File(f) => (
                f.status,
                f.coding,
                f.len,
                String::from_utf8(f.etag.as_bytes().to_vec()).unwrap(),
            ),
            other => panic!("expected a file, got {other:?}"),
        }
    }

    #[test]
    fn the_best_accepted_sibling_is_served_with_its_own_etag() {
        let (_dir, files) = site(&[".br", ".zst", ".gz"]);
        let (status, coding, len, etag) =
            served(files.reply_for(&request(Some("gzip, br, zstd"), None)));
        assert_eq!((status, coding, len), (200, Some(Coding::Br), 30));
        assert!(etag.ends_with("-br\""), "{etag}");
        let (_, coding, len, _) = served(files.reply_for(&request(Some("gzip, zstd;q=0.9"), None)));
        assert_eq!((coding, len), (Some(Coding::Gzip), 30));
        let (_, coding, len, plain) = served(files.reply_for(&request(None, None)));
        assert_eq!((coding, len), (None, 1600));
        assert!(!plain.contains("-br"), "{plain}");
        let (_, coding, _, _) = served(files.reply_for(&request(Some("deflate"), None)));
        assert_eq!(coding, None);
    }

    #[test]
    fn a_missing_sibling_falls_back_to_the_next_accepted_one() {
        let (_dir, files) = site(&[".gz"]);
        let (_, coding, _, etag) = served(files.reply_for(&request(Some("br, zstd, gzip"), None)));
        assert_eq!(coding, Some(Coding::Gzip));
        assert!(etag.ends_with("-gzip\""), "{etag}");
        let (_, coding, _, _) = served(files.reply_for(&request(Some("br, zstd"), None)));
        assert_eq!(coding, None);
    }

    #[test]
    fn a_sibling_older_than_the_file_is_ignored() {
        let (dir, files) = site(&[".br"]);
        let old = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(dir.path().join("app.js.br"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let (_, coding, len, _) = served(files.reply_for(&request(Some("br"), None)));
        assert_eq!((coding, len), (None, 1600));
    }

    #[test]
    fn ranges_count_the_encoded_bytes_and_a_match_gives_304() {
        let (_dir, files) = site(&[".br"]);
        match files.reply_for(&request(Some("br"), Some("bytes=0-9"))) {
            Reply::File(f) => {
                assert_eq!((f.status, f.len, f.coding), (206, 10, Some(Coding::Br)));
                assert_eq!(f.content_range.unwrap().as_bytes(), b"bytes 0-9/30");
            }
            other => panic!("expected a range, got {other:?}"),
        }
        // Several ranges of an encoded file: the whole file.
        let (status, coding, len, etag) =
            served(files.reply_for(&request(Some("br"), Some("bytes=0-1,5-6"))));
        assert_eq!((status, coding, len), (200, Some(Coding::Br), 30));
        let conditional = StaticRequest {
            if_none_match: Some(etag.as_bytes()),
            ..request(Some("br"), None)
        };
        assert_eq!(files.reply_for(&conditional).status(), 304);
        // The same tag names no other encoding.
        let identity = StaticRequest {
            if_none_match: Some(etag.as_bytes()),
            ..request(None, None)
        };
        assert_eq!(files.reply_for(&identity).status(), 200);
    }

    #[test]
    fn a_sibling_that_is_a_directory_is_not_served() {
        let (dir, files) = site(&[]);
        fs::create_dir(dir.path().join("app.js.br")).unwrap();
        let (_, coding, _, _) = served(files.reply_for(&request(Some("br"), None)));
        assert_eq!(coding, None);
    }
}
