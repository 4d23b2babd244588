//! Unit tests of the static handler's validators, conditional requests and
//! byte ranges.

use super::super::range::*;
use super::*;

// Validators and conditionals.

#[test]
fn etag_and_date_formats() {
    assert_eq!(ETag::new(MTIME, 13).as_bytes(), HELLO_ETAG.as_bytes());
    assert_eq!(ETag::new(0, 0).as_bytes(), b"\"0-0\"");
    assert_eq!(
        ETag::new(u64::MAX, u64::MAX).as_bytes(),
        b"\"ffffffffffffffff-ffffffffffffffff\""
    );
    assert_eq!(
        HttpDateValue::from_unix_secs(MTIME).as_bytes(),
        MTIME_DATE.as_bytes()
    );
    assert_eq!(
        HttpDateValue::from_unix_secs(u64::MAX).as_bytes(),
        b"Fri, 31 Dec 9999 23:59:59 GMT"
    );
    assert_eq!(
        ContentRange::satisfied(u64::MAX - 1, u64::MAX - 1, u64::MAX).as_bytes(),
        b"bytes 18446744073709551614-18446744073709551614/18446744073709551615"
    );
}

#[test]
fn pre_epoch_mtime_does_not_panic() {
    let fx = Fixture::new();
    let old = UNIX_EPOCH - Duration::from_secs(86_400 * 365);
    if write_file_at(&fx.root().join("old.txt"), b"old", old).is_err() {
        return;
    }
    let reply = fx.reply("/old.txt");
    assert_eq!(
        header(&reply, "Last-Modified"),
        Some(b"Thu, 01 Jan 1970 00:00:00 GMT".as_slice())
    );
    assert_eq!(header(&reply, "ETag"), Some(b"\"0-3\"".as_slice()));
}

#[test]
fn far_future_mtime_does_not_panic() {
    let fx = Fixture::new();
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(400_000_000_000);
    if write_file_at(&fx.root().join("future.txt"), b"f", far).is_err() {
        return;
    }
    assert_eq!(fx.status("/future.txt"), 200);
}

fn conditional<'a>(inm: Option<&'a str>, ims: Option<&'a str>) -> StaticRequest<'a> {
    StaticRequest {
        if_none_match: inm.map(str::as_bytes),
        if_modified_since: ims.map(str::as_bytes),
        ..get("/hello.txt")
    }
}

#[test]
fn if_none_match_exact_gives_304() {
    let fx = Fixture::new();
    let reply = fx.reply_to(&conditional(Some(HELLO_ETAG), None));
    assert_eq!(status(&reply), 304);
    let headers: Vec<(&str, &[u8])> = reply.headers().collect();
    assert_eq!(
        headers,
        vec![
            ("ETag", HELLO_ETAG.as_bytes()),
            ("Last-Modified", MTIME_DATE.as_bytes())
        ]
    );
}

#[test]
fn if_none_match_uses_weak_comparison() {
    let fx = Fixture::new();
    let weak = format!("W/{HELLO_ETAG}");
    assert_eq!(status(&fx.reply_to(&conditional(Some(&weak), None))), 304);
}

#[test]
fn if_none_match_list_and_star() {
    let fx = Fixture::new();
    let list = format!("\"a\", W/\"b\" ,{HELLO_ETAG}, \"c\"");
    assert_eq!(status(&fx.reply_to(&conditional(Some(&list), None))), 304);
    assert_eq!(status(&fx.reply_to(&conditional(Some("*"), None))), 304);
    assert_eq!(status(&fx.reply_to(&conditional(Some(" * "), None))), 304);
    let head = StaticRequest {
        is_head: true,
        ..conditional(Some(HELLO_ETAG), None)
    };
    assert_eq!(status(&fx.reply_to(&head)), 304);
}

#[test]
fn if_none_match_mismatch_or_garbage_gives_200() {
    let fields = [
        "\"a\", \"b\"",
        "\"6553f100-c\"",
        "6553f100-d",
        "\"6553f100-d",
        "garbage, \"6553f100-d\"",
        "",
    ];
    expect_status_of(200, fields.map(|f| conditional(Some(f), None)));
}

#[test]
fn if_none_match_present_overrides_if_modified_since() {
    let fx = Fixture::new();
    let reply = fx.reply_to(&conditional(Some("\"other\""), Some(MTIME_DATE)));
    assert_eq!(status(&reply), 200);
}

#[test]
fn if_modified_since_equal_or_later_gives_304() {
    let fx = Fixture::new();
    assert_eq!(
        status(&fx.reply_to(&conditional(None, Some(MTIME_DATE)))),
        304
    );
    let later = "Wed, 15 Nov 2023 00:00:00 GMT";
    assert_eq!(status(&fx.reply_to(&conditional(None, Some(later)))), 304);
    let rfc850 = "Tuesday, 14-Nov-23 22:13:20 GMT";
    assert_eq!(status(&fx.reply_to(&conditional(None, Some(rfc850)))), 304);
}

#[test]
fn if_modified_since_earlier_or_invalid_gives_200() {
    let fields = [
        "Tue, 14 Nov 2023 22:13:19 GMT",
        "yesterday",
        "Tue, 14 Nov 2023 22:13:20 GMT garbage",
        "Tue, 14 Nov 2023 22:13:2\u{e9}GMT",
        "",
    ];
    expect_status_of(200, fields.map(|f| conditional(None, Some(f))));
}

fn precondition<'a>(im: Option<&'a str>, ius: Option<&'a str>) -> StaticRequest<'a> {
    StaticRequest {
        if_match: im.map(str::as_bytes),
        if_unmodified_since: ius.map(str::as_bytes),
        ..get("/hello.txt")
    }
}

#[test]
fn if_match_strong_or_star_gives_200_and_anything_else_412() {
    let list = format!("\"a\", W/\"b\" ,{HELLO_ETAG}");
    let fields = [HELLO_ETAG, "*", " * ", list.as_str()];
    expect_status_of(200, fields.map(|f| precondition(Some(f), None)));
    let weak = format!("W/{HELLO_ETAG}");
    let fields = [
        weak.as_str(),
        "\"a\", \"b\"",
        "\"6553f100-c\"",
        "garbage",
        "",
    ];
    expect_status_of(412, fields.map(|f| precondition(Some(f), None)));
}

#[test]
fn if_unmodified_since_before_the_file_gives_412_and_if_match_comes_first() {
    let earlier = "Tue, 14 Nov 2023 22:13:19 GMT";
    expect_status_of(412, [precondition(None, Some(earlier))]);
    let fields = [MTIME_DATE, "Wed, 15 Nov 2023 00:00:00 GMT", "yesterday"];
    expect_status_of(200, fields.map(|f| precondition(None, Some(f))));
    // If-Match decides alone when both are sent (RFC 9110 §13.2.2).
    expect_status_of(200, [precondition(Some(HELLO_ETAG), Some(earlier))]);
    expect_status_of(412, [precondition(Some("\"a\""), Some(MTIME_DATE))]);
}

#[test]
fn a_failed_precondition_wins_over_if_none_match_and_range() {
    let req = StaticRequest {
        if_none_match: Some(HELLO_ETAG.as_bytes()),
        range: Some(b"bytes=0-1"),
        ..precondition(Some("\"a\""), None)
    };
    expect_status_of(412, [req]);
}

// Ranges.

fn expect_partial(reply: Reply, first: u64, last: u64) -> FileReply {
    let cr = format!("bytes {first}-{last}/13");
    assert_eq!(header(&reply, "Content-Range"), Some(cr.as_bytes()));
    let f = expect_file(reply);
    assert_eq!(
        (f.status, f.offset, f.len, f.total),
        (206, first, last - first + 1, 13)
    );
    f
}

#[test]
fn satisfiable_ranges_give_206_with_their_bytes() {
    let fx = Fixture::new();
    for (range, first, last) in [
        // First and last.
        ("bytes=0-4", 0, 4),
        ("bytes=12-12", 12, 12),
        // Open-ended.
        ("bytes=7-", 7, 12),
        ("bytes=0-", 0, 12),
        // Suffix.
        ("bytes=-6", 7, 12),
        ("bytes=-100", 0, 12),
        // The last byte clamped.
        ("bytes=5-1000", 5, 12),
        // Lenient syntax, where RFC 9110 allows it.
        ("Bytes=0-0", 0, 0),
        (" bytes= 1-2 ", 1, 2),
        ("bytes=1-2, ,", 1, 2),
    ] {
        let mut f = expect_partial(fx.range(range), first, last);
        let bytes = &HELLO[first as usize..=last as usize];
        assert_eq!(body(&mut f), bytes, "{range}");
    }
}

#[test]
fn range_numbers_past_u64_are_clamped() {
    let fx = Fixture::new();
    expect_partial(fx.range("bytes=-99999999999999999999999999"), 0, 12);
    expect_partial(fx.range("bytes=5-99999999999999999999999"), 5, 12);
}

#[test]
fn unsatisfiable_range_gives_416() {
    let fx = Fixture::new();
    for field in [
        "bytes=13-",
        "bytes=13-20",
        "bytes=-0",
        "bytes=99999999999999999999999-",
    ] {
        let reply = fx.range(field);
        assert_eq!(status(&reply), 416, "{field}");
        assert_eq!(
            header(&reply, "Content-Range"),
            Some(b"bytes */13".as_slice())
        );
        assert!(matches!(
            reply,
            Reply::RangeNotSatisfiable { total: 13, .. }
        ));
    }
}

#[test]
fn malformed_ranges_give_200_full() {
    let fields = [
        "bytes=0-1,3-x",
        "bytes=abc",
        "bytes=5-2",
        "bytes=-",
        "bytes=",
        "bytes 0-1",
        "items=0-1",
        "bytes=0x1-2",
        "bytes=1 - 2",
        "bytes=+1-2",
        "",
    ];
    let fx = Fixture::new();
    for field in fields {
        let reply = fx.range(field);
        assert_eq!(status(&reply), 200, "{field:?}");
        assert_eq!(header(&reply, "Content-Range"), None);
        assert_eq!(expect_file(reply).len, 13);
    }
}

#[test]
fn range_on_empty_file() {
    let fx = Fixture::new();
    let mk = |r: &'static str| StaticRequest {
        range: Some(r.as_bytes()),
        ..get("/empty.txt")
    };
    let reply = fx.reply_to(&mk("bytes=0-"));
    assert_eq!(status(&reply), 416);
    assert_eq!(
        header(&reply, "Content-Range"),
        Some(b"bytes */0".as_slice())
    );
    // A non-zero suffix is satisfiable on an empty representation but has no 206 form.
    let f = expect_file(fx.reply_to(&mk("bytes=-5")));
    assert_eq!((f.status, f.len), (200, 0));
    assert_eq!(status(&fx.reply_to(&mk("bytes=-0"))), 416);
}

#[test]
fn if_range_matching_etag_or_date_honours_range() {
    let fx = Fixture::new();
    expect_partial(fx.reply_to(&ranged("bytes=0-4", Some(HELLO_ETAG))), 0, 4);
    expect_partial(fx.reply_to(&ranged("bytes=0-4", Some(MTIME_DATE))), 0, 4);
}

#[test]
fn if_range_mismatch_gives_200_full() {
    let fx = Fixture::new();
    let weak = format!("W/{HELLO_ETAG}");
    for validator in [
        "\"other\"",
        weak.as_str(),
        "Tue, 14 Nov 2023 22:13:21 GMT",
        "Tue, 14 Nov 2023 22:13:19 GMT",
        "garbage",
    ] {
        let reply = fx.reply_to(&ranged("bytes=0-4", Some(validator)));
        assert_eq!(status(&reply), 200, "{validator}");
        assert_eq!(expect_file(reply).len, 13);
    }
    let reply = fx.reply_to(&ranged("bytes=20-", Some("\"other\"")));
    assert_eq!(status(&reply), 200, "If-Range mismatch also skips the 416");
}

#[test]
fn if_range_without_range_is_ignored() {
    let fx = Fixture::new();
    let reply = fx.reply_to(&StaticRequest {
        if_range: Some(b"\"other\""),
        ..get("/hello.txt")
    });
    assert_eq!(status(&reply), 200);
}

#[test]
fn conditional_304_wins_over_range() {
    let fx = Fixture::new();
    let reply = fx.reply_to(&StaticRequest {
        if_none_match: Some(HELLO_ETAG.as_bytes()),
        ..ranged("bytes=0-4", None)
    });
    assert_eq!(status(&reply), 304);
}

#[test]
fn parse_range_table() {
    use RangeOutcome::*;
    assert_eq!(parse_range(b"bytes=0-0", 1), Partial { first: 0, last: 0 });
    assert_eq!(parse_range(b"bytes=0-", 1), Partial { first: 0, last: 0 });
    assert_eq!(parse_range(b"bytes=1-", 1), Unsatisfiable);
    assert_eq!(parse_range(b"bytes=-1", 1), Partial { first: 0, last: 0 });
    assert_eq!(parse_range(b"bytes=0-0,", 1), Partial { first: 0, last: 0 });
    assert_eq!(
        parse_range(b"bytes=0-0,1-1", 5),
        Multiple(vec![
            ByteSpan { first: 0, last: 0 },
            ByteSpan { first: 1, last: 1 }
        ])
    );
    assert_eq!(parse_range(b"bytes=1-0", 5), Full);
    assert_eq!(parse_range(b"bytes==0-1", 5), Full);
    assert_eq!(parse_range(b"bytes=0--1", 5), Full);
}

#[test]
fn dot_segments_are_hidden_unless_allowed_except_well_known_first() {
    let fx = Fixture::new();
    fs::write(fx.root().join(".env"), "s").unwrap();
    fs::create_dir_all(fx.root().join(".well-known/x")).unwrap();
    fs::write(fx.root().join(".well-known/x/t.txt"), "t").unwrap();
    let s = StaticFiles::new(&fx.root(), vec![], false, false).unwrap();
    assert_eq!(status(&s.reply_for(&get("/.env"))), 404);
    assert_eq!(status(&s.reply_for(&get("/%2Eenv"))), 404);
    assert_eq!(status(&s.reply_for(&get("/.well-known/x/t.txt"))), 200);
    assert_eq!(status(&s.reply_for(&get("/x/.well-known/t.txt"))), 404);
    assert_eq!(
        status(&s.reply_for(&get("/../.env"))),
        400,
        "traversal stays a 400"
    );
    let open = s.with_rules(StaticRules {
        allow_hidden: true,
        ..StaticRules::default()
    });
    assert_eq!(status(&open.reply_for(&get("/.env"))), 200);
}

#[test]
fn try_files_falls_back_in_order_and_error_pages_keep_the_status() {
    let fx = Fixture::new();
    fs::write(fx.root().join("app.html"), "app").unwrap();
    fs::write(fx.root().join("oops.html"), "oops").unwrap();
    let s = StaticFiles::new(&fx.root(), vec![], false, false)
        .unwrap()
        .with_rules(StaticRules {
            try_files: vec!["{path}".into(), "{path}.html".into(), "/app.html".into()].into(),
            error_pages: vec![(404, b"/oops.html"[..].into())].into(),
            ..StaticRules::default()
        });
    let body_len = |r: Reply| match r {
        Reply::File(f) => (f.status, f.len),
        other => (other.status(), 0),
    };
    assert_eq!(body_len(s.decide(&get("/hello.txt"))).0, 200);
    assert_eq!(body_len(s.decide(&get("/oops"))), (200, 4), "{{path}}.html");
    assert_eq!(
        body_len(s.decide(&get("/any/where"))),
        (200, 3),
        "the fallback"
    );
    let plain = StaticFiles::new(&fx.root(), vec![], false, false)
        .unwrap()
        .with_rules(StaticRules {
            error_pages: vec![(404, b"/oops.html"[..].into())].into(),
            ..StaticRules::default()
        });
    assert_eq!(body_len(plain.decide(&get("/missing"))), (404, 4));
}

#[test]
fn normal_paths_are_the_ones_resolving_leaves_as_they_are() {
    for path in [
        "/hello.txt",
        "/a/b/c.tar.gz",
        "/a..b",
        "/x/y.",
        "/caf\u{e9}",
    ] {
        assert!(is_normal(path.as_bytes()), "{path}");
    }
    for path in [
        "",
        "/",
        "a",
        "/a/",
        "//a",
        "/a//b",
        "/.env",
        "/a/./b",
        "/a/../b",
        "/a%2fb",
        "/a\\b",
        "/a\0b",
        "/.well-known/x",
    ] {
        assert!(!is_normal(path.as_bytes()), "{path:?}");
    }
}

/// `is_normal` a byte at a time, as it was written before it looked at
/// words.
fn is_normal_bytewise(path: &[u8]) -> bool {
    let mut prev = 0u8;
    for &b in path {
        if matches!(b, b'%' | b'\\' | 0) || (prev == b'/' && matches!(b, b'/' | b'.')) {
            return false;
        }
        prev = b;
    }
    path.first() == Some(&b'/') && prev != b'/'
}

#[test]
fn normal_paths_are_found_a_word_at_a_time_as_a_byte_at_a_time() {
    // Every path of up to 7 bytes over the bytes that matter and two that
    // do not (one with the top bit set), then the same after a prefix that
    // puts each of them at every place in a word and across words.
    const BYTES: [u8; 7] = [b'/', b'.', b'%', b'\\', 0, b'a', 0xe9];
    let mut checked = 0;
    for len in 0..=7u32 {
        for mut n in 0..7usize.pow(len) {
            let mut path = Vec::new();
            for _ in 0..len {
                path.push(BYTES[n % 7]);
                n /= 7;
            }
            for prefix in ["", "/", "/abcdefg", "/abcdef/", "/abcdefgh/ijklmn"] {
                let mut whole = prefix.as_bytes().to_vec();
                whole.extend_from_slice(&path);
                assert_eq!(
                    is_normal(&whole),
                    is_normal_bytewise(&whole),
                    "{:?}",
                    String::from_utf8_lossy(&whole)
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100_000);
}

#[test]
fn every_spelling_of_a_path_shares_one_cache_entry_and_its_decided_headers() {
    let fx = Fixture::new();
    let s = fx.server();
    let cache = OpenFileCache::default();
    let spellings = [
        "/hello.txt",
        "/hello.txt",
        "/%68ello.txt",
        "//hello.txt",
        "/./hello.txt",
    ];
    for path in spellings {
        let req = cached_get(path.as_bytes(), &cache);
        let Reply::File(f) = s.reply_for(&req) else {
            panic!("{path:?} is the file");
        };
        assert_eq!(f.content_type, "text/plain; charset=utf-8");
        assert_eq!(f.etag.as_bytes(), HELLO_ETAG.as_bytes());
        assert_eq!(f.last_modified.as_bytes(), MTIME_DATE.as_bytes());
        assert_eq!(f.content.as_deref(), Some(HELLO));
    }
    assert_eq!(cache.len(), 1);
    // An index file is cached under its own path: asking for it by name hits.
    let dir = cached_get(b"/sub/", &cache);
    assert_eq!(s.reply_for(&dir).status(), 200);
    fs::remove_file(fx.root().join("sub/index.html")).unwrap();
    let by_name = StaticRequest {
        path: b"/sub/index.html",
        ..dir
    };
    let Reply::File(f) = s.reply_for(&by_name) else {
        panic!("the cached index file");
    };
    assert_eq!(f.content_type, "text/html; charset=utf-8");
    assert_eq!(cache.len(), 2);
}

#[test]
fn hidden_files_stay_hidden_with_a_warm_cache() {
    let fx = Fixture::new();
    let s = fx.server();
    let cache = OpenFileCache::default();
    for path in [
        &b"/noindex/a.txt"[..],
        b"/noindex/.hidden",
        b"/noindex/%2ehidden",
    ] {
        let req = cached_get(path, &cache);
        let expected = if path == b"/noindex/a.txt" { 200 } else { 404 };
        assert_eq!(s.reply_for(&req).status(), expected, "{path:?}");
        assert_eq!(s.reply_for(&req).status(), expected, "{path:?} again");
    }
    assert_eq!(cache.len(), 1);
}
