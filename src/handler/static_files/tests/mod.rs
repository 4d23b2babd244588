//! Unit tests of the static handler, fed real files in temporary directories.

use super::path::*;
use super::range::*;
use super::values::*;
use super::*;

#[test]
fn open_file_cache_reuses_a_file_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.txt"), "cached").unwrap();
    let files = StaticFiles::new(dir.path(), vec![], false, false)
        .unwrap()
        .with_cache_valid(Duration::from_millis(300));
    let cache = OpenFileCache::default();
    let req = cached_get(b"/c.txt", &cache);
    assert_eq!(files.reply_for(&req).status(), 200);
    std::fs::remove_file(dir.path().join("c.txt")).unwrap();
    // Still open in this worker's cache: served without touching the path.
    match files.reply_for(&req) {
        Reply::File(f) => assert_eq!(f.len, 6),
        other => panic!("expected the cached file, got {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(files.reply_for(&req).status(), 404);

    let uncached = StaticFiles::new(dir.path(), vec![], false, false)
        .unwrap()
        .with_cache_valid(Duration::ZERO);
    std::fs::write(dir.path().join("u.txt"), "x").unwrap();
    let req = cached_get(b"/u.txt", &cache);
    assert_eq!(uncached.reply_for(&req).status(), 200);
    std::fs::remove_file(dir.path().join("u.txt")).unwrap();
    assert_eq!(uncached.reply_for(&req).status(), 404);
}

#[test]
fn each_generation_has_its_own_open_files_and_frees_them_with_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("g.txt"), "generation").unwrap();
    let files = StaticFiles::new(dir.path(), vec![], false, false).unwrap();
    let old = OpenFileCache::default();
    let request = |cache| cached_get(b"/g.txt", cache);
    let Reply::File(f) = files.reply_for(&request(&old)) else {
        panic!("the file is served");
    };
    assert_eq!(old.len(), 1);
    let file = std::rc::Rc::downgrade(&f.file);
    drop(f);
    std::fs::remove_file(dir.path().join("g.txt")).unwrap();
    // A new generation does not see the old one's open file...
    let new = OpenFileCache::default();
    assert_eq!(files.reply_for(&request(&new)).status(), 404);
    assert!(new.is_empty());
    // ...and the old one's file is closed once that generation goes.
    assert_eq!(files.reply_for(&request(&old)).status(), 200);
    assert!(file.upgrade().is_some(), "held open by the old generation");
    drop(old);
    assert!(file.upgrade().is_none(), "closed with its generation");
}
use std::ffi::OsStr;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::{SystemTime, UNIX_EPOCH};

/// 2023-11-14T22:13:20Z; hex 6553f100.
const MTIME: u64 = 1_700_000_000;
const MTIME_DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
const HELLO: &[u8] = b"Hello, World!";
const HELLO_ETAG: &str = "\"6553f100-d\"";

/// `tmp/secret.txt` outside the root, and `tmp/www` as the root, served with
/// `index.html` as the index and neither autoindex nor symlinks outside.
struct Fixture {
    tmp: tempfile::TempDir,
    files: StaticFiles,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let www = tmp.path().join("www");
        fs::create_dir(&www).unwrap();
        fs::write(tmp.path().join("secret.txt"), b"top secret").unwrap();
        write_file(&www.join("hello.txt"), HELLO);
        fs::write(www.join("empty.txt"), b"").unwrap();
        fs::create_dir(www.join("sub")).unwrap();
        fs::write(www.join("sub/index.html"), b"<p>sub</p>").unwrap();
        fs::create_dir(www.join("noindex")).unwrap();
        fs::write(www.join("noindex/b.txt"), b"b").unwrap();
        fs::write(www.join("noindex/a.txt"), b"a").unwrap();
        fs::write(www.join("noindex/x<y&\"z'.txt"), b"x").unwrap();
        fs::write(www.join("noindex/.hidden"), b"h").unwrap();
        fs::write(www.join("noindex/javascript:alert(1)"), b"j").unwrap();
        fs::write(
            www.join("noindex").join(OsStr::from_bytes(b"caf\xe9 bar")),
            b"c",
        )
        .unwrap();
        fs::create_dir(www.join("noindex/zdir")).unwrap();
        fs::create_dir(www.join("evil.com")).unwrap();
        let files = StaticFiles::new(&www, vec!["index.html".into()], false, false).unwrap();
        Fixture { tmp, files }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("www")
    }

    fn server(&self) -> &StaticFiles {
        &self.files
    }

    /// The default server's reply to `req`.
    fn reply_to(&self, req: &StaticRequest<'_>) -> Reply {
        self.files.reply_for(req)
    }

    /// The default server's reply to a GET of `path`.
    fn reply(&self, path: &str) -> Reply {
        self.reply_to(&get(path))
    }

    /// The default server's reply to a GET of hello.txt with `Range: range`.
    fn range(&self, range: &str) -> Reply {
        self.reply_to(&ranged(range, None))
    }

    /// The status of the default server's reply to a GET of `path`.
    fn status(&self, path: &str) -> u16 {
        self.reply(path).status()
    }

    fn server_with(&self, autoindex: bool, allow_outside: bool) -> StaticFiles {
        StaticFiles::new(
            &self.root(),
            vec!["index.html".into()],
            autoindex,
            allow_outside,
        )
        .unwrap()
    }
}

fn write_file(path: &Path, contents: &[u8]) {
    write_file_at(path, contents, UNIX_EPOCH + Duration::from_secs(MTIME)).unwrap();
}

/// Writes `contents` with `mtime` as its modification time; the error is the
/// file system refusing that time.
fn write_file_at(path: &Path, contents: &[u8], mtime: SystemTime) -> std::io::Result<()> {
    fs::write(path, contents).unwrap();
    let file = File::options().write(true).open(path).unwrap();
    file.set_modified(mtime)
}

fn get(path: &str) -> StaticRequest<'_> {
    StaticRequest {
        method_allowed: true,
        path: path.as_bytes(),
        ..StaticRequest::default()
    }
}

/// A GET of `path` through a worker's open-file cache.
fn cached_get<'a>(path: &'a [u8], cache: &'a OpenFileCache) -> StaticRequest<'a> {
    StaticRequest {
        method_allowed: true,
        path,
        open_files: Some(cache),
        ..StaticRequest::default()
    }
}

fn status(reply: &Reply) -> u16 {
    reply.status()
}

fn expect_file(reply: Reply) -> FileReply {
    match reply {
        Reply::File(f) => f,
        other => panic!("expected a file, got {other:?}"),
    }
}

/// Reads the region the driver would send.
fn body(f: &mut FileReply) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; f.len as usize];
    f.file.read_exact_at(&mut out, f.offset).unwrap();
    out
}

/// The HTML of a directory listing.
fn listing(reply: Reply) -> String {
    let Reply::Listing { body } = reply else {
        panic!("expected a listing, got {reply:?}");
    };
    String::from_utf8(body).unwrap()
}

fn header<'r>(reply: &'r Reply, name: &str) -> Option<&'r [u8]> {
    reply.headers().find(|(n, _)| *n == name).map(|(_, v)| v)
}

/// Asserts that a GET of each of `paths` gets `expected` from the default server.
fn expect_status(expected: u16, paths: &[&str]) {
    expect_status_of(expected, paths.iter().map(|path| get(path)));
}

/// Asserts that each of `requests` gets `expected` from the default server.
fn expect_status_of<'a>(expected: u16, requests: impl IntoIterator<Item = StaticRequest<'a>>) {
    let fx = Fixture::new();
    for req in requests {
        assert_eq!(status(&fx.reply_to(&req)), expected, "{req:?}");
    }
}

// Traversal and path hygiene.

#[test]
fn dot_dot_segment_is_rejected() {
    expect_status(
        400,
        &[
            "/../etc/passwd",
            "/../secret.txt",
            "/sub/../hello.txt",
            "/..",
        ],
    );
}

#[test]
fn encoded_dot_dot_is_rejected() {
    expect_status(
        400,
        &[
            "/%2e%2e/%2e%2e/etc/passwd",
            "/%2E%2E/secret.txt",
            "/.%2e/secret.txt",
            "/%2e./secret.txt",
        ],
    );
}

#[test]
fn encoded_slash_and_backslash_are_rejected() {
    expect_status(
        400,
        &[
            "/..%2fetc/passwd",
            "/a/..%2f..%2fetc/passwd",
            "/sub%2Findex.html",
            "/..%5csecret.txt",
            "/..\\secret.txt",
            "/a\\b",
        ],
    );
}

#[test]
fn nul_raw_or_encoded_is_rejected() {
    let fx = Fixture::new();
    assert_eq!(fx.status("/%00"), 400);
    assert_eq!(fx.status("/hello.txt%00.png"), 400);
    let raw = StaticRequest {
        path: b"/hello\0.txt",
        ..get("/")
    };
    assert_eq!(status(&fx.reply_to(&raw)), 400);
}

#[test]
fn broken_percent_escapes_are_rejected() {
    expect_status(400, &["/%", "/%4", "/%zz", "/hello%2.txt", "/%%41"]);
}

#[test]
fn path_without_leading_slash_is_rejected() {
    expect_status(400, &["hello.txt", "", "*"]);
}

#[test]
fn double_slashes_collapse_inside_root() {
    let fx = Fixture::new();
    assert_eq!(fx.status("//etc/passwd"), 404);
    let mut f = expect_file(fx.reply("//hello.txt"));
    assert_eq!(body(&mut f), HELLO);
    let f = expect_file(fx.reply("/./sub//.//index.html"));
    assert_eq!(f.len, 10);
}

#[test]
fn percent_encoded_names_are_decoded_once() {
    let fx = Fixture::new();
    fs::write(fx.root().join("a b%41.txt"), b"x").unwrap();
    assert_eq!(fx.status("/a%20b%2541.txt"), 200);
    // Decoding twice would turn %2541 into A.
    assert_eq!(fx.status("/a%20bA.txt"), 404);
    assert_eq!(fx.status("/%68ello.txt"), 200);
}

#[test]
fn non_utf8_names_are_served_as_bytes() {
    let fx = Fixture::new();
    assert_eq!(fx.status("/noindex/caf%E9%20bar"), 200);
}

#[test]
fn symlink_to_file_outside_root_is_404() {
    let fx = Fixture::new();
    symlink(fx.tmp.path().join("secret.txt"), fx.root().join("out")).unwrap();
    symlink("../secret.txt", fx.root().join("out_rel")).unwrap();
    assert_eq!(fx.status("/out"), 404);
    assert_eq!(fx.status("/out_rel"), 404);
}

#[test]
fn symlink_to_directory_outside_root_is_404() {
    let fx = Fixture::new();
    symlink(fx.tmp.path(), fx.root().join("up")).unwrap();
    let s = fx.server_with(true, false);
    assert_eq!(status(&s.reply_for(&get("/up/secret.txt"))), 404);
    assert_eq!(status(&s.reply_for(&get("/up/"))), 404);
    assert_eq!(status(&s.reply_for(&get("/up"))), 404);
}

#[test]
fn symlink_outside_root_is_served_when_allowed() {
    let fx = Fixture::new();
    symlink(fx.tmp.path().join("secret.txt"), fx.root().join("out")).unwrap();
    let s = fx.server_with(false, true);
    let mut f = expect_file(s.reply_for(&get("/out")));
    assert_eq!(body(&mut f), b"top secret");
}

#[test]
fn symlink_inside_root_is_served() {
    let fx = Fixture::new();
    symlink("hello.txt", fx.root().join("rel_link.txt")).unwrap();
    symlink(fx.root().join("hello.txt"), fx.root().join("abs_link.txt")).unwrap();
    symlink("sub", fx.root().join("sublink")).unwrap();
    for path in ["/rel_link.txt", "/abs_link.txt"] {
        let mut f = expect_file(fx.reply(path));
        assert_eq!(body(&mut f), HELLO, "{path}");
    }
    assert_eq!(fx.status("/sublink/"), 200);
}

#[test]
fn root_given_through_a_symlink_is_canonicalised() {
    let fx = Fixture::new();
    let alias = fx.tmp.path().join("alias");
    symlink(fx.root(), &alias).unwrap();
    let s = StaticFiles::new(&alias, vec![], false, false).unwrap();
    assert_eq!(status(&s.reply_for(&get("/hello.txt"))), 200);
}

#[test]
fn filesystem_root_serves_absolute_paths() {
    let fx = Fixture::new();
    // The temporary directory's name starts with a dot.
    let s = StaticFiles::new(Path::new("/"), vec![], false, false)
        .unwrap()
        .with_rules(StaticRules {
            allow_hidden: true,
            ..StaticRules::default()
        });
    let www = fs::canonicalize(fx.root()).unwrap();
    let path = format!("{}/hello.txt", www.display());
    assert_eq!(status(&s.reply_for(&get(&path))), 200);
}

#[test]
fn symlink_loop_is_404() {
    let fx = Fixture::new();
    symlink("loop_b", fx.root().join("loop_a")).unwrap();
    symlink("loop_a", fx.root().join("loop_b")).unwrap();
    assert_eq!(fx.status("/loop_a"), 404);
}

// Files, directories and errors.

#[test]
fn serves_file_with_validators_and_type() {
    let fx = Fixture::new();
    let reply = fx.reply("/hello.txt");
    assert_eq!(status(&reply), 200);
    let headers: Vec<(&str, &[u8])> = reply.headers().collect();
    assert_eq!(
        headers,
        vec![
            ("Content-Type", b"text/plain; charset=utf-8".as_slice()),
            ("ETag", HELLO_ETAG.as_bytes()),
            ("Last-Modified", MTIME_DATE.as_bytes()),
            ("Accept-Ranges", b"bytes".as_slice()),
        ]
    );
    let mut f = expect_file(reply);
    assert_eq!((f.offset, f.len, f.total), (0, 13, 13));
    assert_eq!(body(&mut f), HELLO);
}

#[test]
fn head_gets_the_same_reply_as_get() {
    let fx = Fixture::new();
    let get_reply = fx.reply("/hello.txt");
    let head_reply = fx.reply_to(&StaticRequest {
        is_head: true,
        ..get("/hello.txt")
    });
    assert_eq!(status(&head_reply), 200);
    let a: Vec<_> = get_reply.headers().collect();
    let b: Vec<_> = head_reply.headers().collect();
    assert_eq!(a, b);
    assert_eq!(expect_file(head_reply).len, 13);
}

#[test]
fn missing_file_or_file_as_directory_is_404() {
    expect_status(404, &["/nope.txt", "/nope/", "/hello.txt/x", "/hello.txt/"]);
    // With autoindex on too.
    let fx = Fixture::new();
    let listing = fx.server_with(true, false);
    assert_eq!(status(&listing.reply_for(&get("/hello.txt/"))), 404);
}

#[test]
fn overlong_name_is_404() {
    let fx = Fixture::new();
    let path = format!("/{}", "a".repeat(300));
    assert_eq!(fx.status(&path), 404);
}

#[test]
fn other_methods_get_405_with_allow() {
    let fx = Fixture::new();
    let reply = fx.reply_to(&StaticRequest {
        method_allowed: false,
        ..get("/hello.txt")
    });
    assert_eq!(status(&reply), 405);
    assert_eq!(header(&reply, "Allow"), Some(b"GET, HEAD".as_slice()));
    assert_eq!(Reply::Error(404).headers().count(), 0);
}

#[test]
fn directory_with_slash_serves_index() {
    let fx = Fixture::new();
    let reply = fx.reply("/sub/");
    assert_eq!(
        header(&reply, "Content-Type"),
        Some(b"text/html; charset=utf-8".as_slice())
    );
    let mut f = expect_file(reply);
    assert_eq!(body(&mut f), b"<p>sub</p>");
}

#[test]
fn index_names_are_tried_in_order() {
    let fx = Fixture::new();
    fs::write(fx.root().join("sub/index.htm"), b"htm").unwrap();
    let both = vec!["index.htm".to_string(), "index.html".to_string()];
    let s = StaticFiles::new(&fx.root(), both, false, false).unwrap();
    assert_eq!(body(&mut expect_file(s.reply_for(&get("/sub/")))), b"htm");
    let later = vec!["default.html".to_string(), "index.html".to_string()];
    let s = StaticFiles::new(&fx.root(), later, false, false).unwrap();
    assert_eq!(
        body(&mut expect_file(s.reply_for(&get("/sub/")))),
        b"<p>sub</p>"
    );
}

#[test]
fn index_that_is_a_directory_is_skipped() {
    let fx = Fixture::new();
    fs::create_dir(fx.root().join("noindex/index.html")).unwrap();
    let s = fx.server_with(true, false);
    assert!(matches!(
        s.reply_for(&get("/noindex/")),
        Reply::Listing { .. }
    ));
}

#[test]
fn index_symlink_outside_root_is_404() {
    let fx = Fixture::new();
    symlink(
        fx.tmp.path().join("secret.txt"),
        fx.root().join("noindex/index.html"),
    )
    .unwrap();
    assert_eq!(
        status(&fx.server_with(true, false).reply_for(&get("/noindex/"))),
        404
    );
}

#[test]
fn root_directory_serves_index() {
    let fx = Fixture::new();
    fs::write(fx.root().join("index.html"), b"home").unwrap();
    assert_eq!(body(&mut expect_file(fx.reply("/"))), b"home");
}

#[test]
fn directory_without_index_is_404_when_autoindex_off() {
    let fx = Fixture::new();
    assert_eq!(fx.status("/noindex/"), 404);
    assert_eq!(fx.status("/"), 404);
}

#[test]
fn autoindex_lists_sorted_escaped_entries() {
    let fx = Fixture::new();
    let s = fx.server_with(true, false);
    let reply = s.reply_for(&get("/noindex/"));
    assert_eq!(
        header(&reply, "Content-Type"),
        Some(b"text/html; charset=utf-8".as_slice())
    );
    let html = listing(reply);
    for shown in [
        "<title>Index of /noindex/</title>",
        "<a href=\"../\">../</a>",
        "<a href=\"zdir/\">zdir/</a>",
        "<a href=\"a.txt\">a.txt</a>",
        "<a href=\"x%3Cy%26%22z%27.txt\">x&lt;y&amp;&quot;z&#39;.txt</a>",
        "<a href=\"javascript%3Aalert%281%29\">",
        "<a href=\"caf%E9%20bar\">caf\u{fffd} bar</a>",
    ] {
        assert!(html.contains(shown), "{shown} missing: {html}");
    }
    assert!(!html.contains("hidden"));
    let pos = |needle: &str| html.find(needle).unwrap();
    assert!(pos("zdir/") < pos("a.txt"), "directories first");
    assert!(pos("a.txt") < pos("b.txt"));
    assert!(pos("b.txt") < pos("caf"));
    // Each entry shows its date and its size; a directory has no size.
    let line = |name: &str| html.lines().find(|l| l.contains(name)).unwrap().to_string();
    let a = line("\">a.txt</a>");
    let a_len = std::fs::metadata(fx.root().join("noindex/a.txt"))
        .unwrap()
        .len();
    assert!(a.ends_with(&format!(" {a_len}")), "{a}");
    assert!(a.contains(" GMT "), "{a}");
    let z = line("\">zdir/</a>");
    assert!(z.contains(" GMT") && z.ends_with(" -"), "{z}");
}

#[test]
fn autoindex_of_root_has_no_parent_link() {
    let fx = Fixture::new();
    let s = fx.server_with(true, false);
    let html = listing(s.reply_for(&get("/")));
    assert!(html.contains("<title>Index of /</title>"));
    assert!(!html.contains("../"));
    assert!(html.contains("<a href=\"sub/\">sub/</a>"));
}

#[test]
fn autoindex_prefers_index_file() {
    let fx = Fixture::new();
    let s = fx.server_with(true, false);
    assert!(matches!(s.reply_for(&get("/sub/")), Reply::File(_)));
}

#[test]
fn autoindex_escapes_the_title() {
    let fx = Fixture::new();
    fs::create_dir(fx.root().join("<b>")).unwrap();
    let s = fx.server_with(true, false);
    let html = listing(s.reply_for(&get("/%3Cb%3E/")));
    assert!(html.contains("Index of /&lt;b&gt;/"));
    assert!(!html.contains("<b>"));
}

#[test]
fn directory_without_slash_redirects() {
    let fx = Fixture::new();
    let reply = fx.reply("/sub");
    assert_eq!(status(&reply), 301);
    assert_eq!(header(&reply, "Location"), Some(b"/sub/".as_slice()));
    let reply = fx.reply("/.");
    assert_eq!(header(&reply, "Location"), Some(b"/".as_slice()));
}

#[test]
fn redirect_is_never_protocol_relative() {
    let fx = Fixture::new();
    let reply = fx.reply("//evil.com");
    assert_eq!(header(&reply, "Location"), Some(b"/evil.com/".as_slice()));
}

#[test]
fn redirect_location_is_percent_encoded() {
    let fx = Fixture::new();
    fs::create_dir(fx.root().join("a b\r\nSet-Cookie: x")).unwrap();
    let reply = fx.reply("/a%20b%0D%0ASet-Cookie:%20x");
    assert_eq!(
        header(&reply, "Location"),
        Some(b"/a%20b%0D%0ASet-Cookie%3A%20x/".as_slice())
    );
}

#[test]
fn fifo_is_404_without_blocking() {
    let fx = Fixture::new();
    let fifo = fx.root().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    assert_eq!(fx.status("/pipe"), 404);
}

#[test]
fn unix_socket_is_404() {
    let fx = Fixture::new();
    let _listener = std::os::unix::net::UnixListener::bind(fx.root().join("sock")).unwrap();
    assert_eq!(fx.status("/sock"), 404);
}

#[test]
fn device_is_404() {
    let fx = Fixture::new();
    symlink("/dev/null", fx.root().join("null")).unwrap();
    let s = fx.server_with(false, true);
    assert_eq!(status(&s.reply_for(&get("/null"))), 404);
}

#[test]
fn unreadable_file_is_403() {
    let fx = Fixture::new();
    let path = fx.root().join("locked.txt");
    fs::write(&path, b"no").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if File::open(&path).is_ok() {
        eprintln!("permission bits are not enforced (running as root?); skipping");
        return;
    }
    assert_eq!(fx.status("/locked.txt"), 403);
}

#[test]
fn open_errors_map_like_nginx() {
    let errno = |e: Errno| io::Error::from_raw_os_error(e.raw_os_error());
    assert_eq!(error_status(&errno(Errno::ACCESS)), 403);
    assert_eq!(error_status(&errno(Errno::PERM)), 403);
    for e in [
        Errno::NOENT,
        Errno::NOTDIR,
        Errno::NAMETOOLONG,
        Errno::LOOP,
        Errno::NXIO,
    ] {
        assert_eq!(error_status(&errno(e)), 404);
    }
    assert_eq!(error_status(&errno(Errno::MFILE)), 500);
    assert_eq!(error_status(&errno(Errno::IO)), 500);
}

#[test]
fn new_rejects_bad_roots_and_index_names() {
    let fx = Fixture::new();
    assert!(StaticFiles::new(&fx.root().join("hello.txt"), vec![], false, false).is_err());
    assert!(StaticFiles::new(&fx.root().join("missing"), vec![], false, false).is_err());
    for bad in ["", ".", "..", "a/b", "a\\b", "a\0b"] {
        assert!(
            StaticFiles::new(&fx.root(), vec![bad.to_string()], false, false).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn empty_index_list_means_no_index() {
    let fx = Fixture::new();
    let s = StaticFiles::new(&fx.root(), vec![], false, false).unwrap();
    assert_eq!(status(&s.reply_for(&get("/sub/"))), 404);
}

/// A GET of `/hello.txt` with `Range: range` (and `If-Range`).
fn ranged<'a>(range: &'a str, if_range: Option<&'a str>) -> StaticRequest<'a> {
    StaticRequest {
        range: Some(range.as_bytes()),
        if_range: if_range.map(str::as_bytes),
        ..get("/hello.txt")
    }
}

mod conditionals_and_ranges;
