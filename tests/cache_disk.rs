//! The cache's disk tier end to end: a real `pier` whose zone names a
//! directory, stopped with SIGKILL and started again on the same directory,
//! in front of a scripted origin that counts what reaches it.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::upstream::{Reply, Upstream};
use common::{get, Pier};

fn config(origin: SocketAddr, disk: &Path, zone_extra: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
[cache.main]
memory = "4MiB"
disk_path = "{}"
{zone_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
cache = "main"
"#,
        disk.display()
    )
}

fn start(origin: &Upstream, disk: &Path, zone_extra: &str) -> Pier {
    let pier = Pier::with_config(&config(origin.addr, disk, zone_extra), &[]);
    logged(&pier, "cache disk tier loaded").expect("the disk tier loads its directory");
    pier
}

/// The first log line containing `needle`, before or after `pier started`.
fn logged(pier: &Pier, needle: &str) -> Option<String> {
    match pier.startup.iter().find(|l| l.contains(needle)) {
        Some(l) => Some(l.clone()),
        None => pier.wait_log(needle, Duration::from_secs(10)),
    }
}

fn req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n{extra}\r\n")
}

/// A body of `n` bytes that differs at every offset mod 251, so a range from
/// the wrong place shows.
fn body_of(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn origin_serving(n: usize) -> Upstream {
    Upstream::start(move |r| {
        let mut body = body_of(n);
        body[..r.target.len().min(n)]
            .copy_from_slice(&r.target.as_bytes()[..r.target.len().min(n)]);
        Reply::Http(
            200,
            vec![
                ("Cache-Control".into(), "max-age=600".into()),
                ("ETag".into(), "\"v1\"".into()),
            ],
            body,
        )
    })
}

fn expected(path: &str, n: usize) -> Vec<u8> {
    let mut body = body_of(n);
    body[..path.len()].copy_from_slice(path.as_bytes());
    body
}

fn seen(origin: &Upstream, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|r| r.target == path)
        .count()
}

/// A series' value on `/metrics`.
fn metric(pier: &Pier, series: &str) -> u64 {
    let page = get(
        pier.admin.expect("admin"),
        "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let text = String::from_utf8(page.body).unwrap();
    text.lines()
        .find(|l| l.starts_with(series))
        .unwrap_or_else(|| panic!("{series} in {text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Waits until the disk tier has written `n` objects in all.
fn wait_written(pier: &Pier, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(pier, "pier_cache_disk_writes_total{zone=\"main\"}") < n {
        assert!(Instant::now() < deadline, "{n} objects written to disk");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn object_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The object file whose header names `path`.
fn file_holding(dir: &Path, path: &str) -> PathBuf {
    let key = format!("app.test{path}");
    object_files(dir)
        .into_iter()
        .find(|f| {
            let bytes = std::fs::read(f).unwrap();
            common::find(&bytes[..bytes.len().min(4096)], key.as_bytes()).is_some()
        })
        .unwrap_or_else(|| panic!("a file for {path}"))
}

#[test]
fn a_hit_survives_a_restart_and_is_sent_from_the_disk() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(100_000);
    let first = start(&origin, disk.path(), "");
    let miss = get(first.addr(), &req("/a", ""));
    assert_eq!(miss.header("cache-status"), Some("pier; fwd=miss; stored"));
    wait_written(&first, 1);
    drop(first);

    let second = start(&origin, disk.path(), "");
    assert_eq!(
        metric(&second, "pier_cache_objects{zone=\"main\",tier=\"disk\"}"),
        1
    );
    assert_eq!(
        metric(&second, "pier_cache_objects{zone=\"main\",tier=\"memory\"}"),
        0
    );
    let hit = get(second.addr(), &req("/a", ""));
    assert_eq!(hit.status, 200);
    let status = hit.header("cache-status").unwrap();
    assert!(
        status.starts_with("pier; hit") && status.contains("detail=disk"),
        "{status}"
    );
    assert_eq!(hit.body, expected("/a", 100_000));
    assert_eq!(hit.header("etag"), Some("\"v1\""));
    assert_eq!(seen(&origin, "/a"), 1, "the origin was asked once in all");
    assert_eq!(
        metric(&second, "pier_cache_disk_hits_total{zone=\"main\"}"),
        1
    );
    assert_eq!(metric(&second, "pier_cache_hits_total{zone=\"main\"}"), 1);
}

#[test]
fn head_range_and_conditionals_are_answered_from_a_disk_object() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(50_000);
    let first = start(&origin, disk.path(), "");
    get(first.addr(), &req("/r", ""));
    wait_written(&first, 1);
    drop(first);

    let pier = start(&origin, disk.path(), "");
    let mut conn = common::Reader::new(common::connect(pier.addr()));
    conn.send(b"HEAD /r HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let head = conn.response(true).expect("an answer to HEAD");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("50000"));
    assert!(head.body.is_empty());
    assert!(head.header("cache-status").unwrap().contains("detail=disk"));

    conn.send(req("/r", "Range: bytes=1000-1999\r\n").as_bytes());
    let part = conn.response(false).expect("an answer to the range");
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some("bytes 1000-1999/50000"));
    assert_eq!(part.body, &expected("/r", 50_000)[1000..2000]);

    conn.send(req("/r", "Range: bytes=-10\r\n").as_bytes());
    let tail = conn.response(false).expect("an answer to the suffix range");
    assert_eq!(tail.status, 206);
    assert_eq!(tail.body, &expected("/r", 50_000)[49_990..]);

    conn.send(req("/r", "If-None-Match: \"v1\"\r\n").as_bytes());
    let not_modified = conn.response(false).expect("an answer to the conditional");
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());

    // The same connection still works after every kind of answer.
    conn.send(req("/r", "").as_bytes());
    let whole = conn.response(false).expect("the whole body");
    assert_eq!(whole.body, expected("/r", 50_000));
    assert_eq!(seen(&origin, "/r"), 1);
}

#[test]
fn the_disk_budget_is_kept_by_evicting_files() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(100_000);
    let pier = start(&origin, disk.path(), "disk_size = \"1MiB\"");
    for i in 0..30 {
        let r = get(pier.addr(), &req(&format!("/b{i}"), ""));
        assert_eq!(r.status, 200);
    }
    wait_written(&pier, 30);
    let bytes = metric(&pier, "pier_cache_bytes{zone=\"main\",tier=\"disk\"}");
    assert!(bytes <= 1 << 20, "{bytes} bytes charged");
    let objects = metric(&pier, "pier_cache_objects{zone=\"main\",tier=\"disk\"}");
    assert!((5..30).contains(&objects), "{objects} objects on disk");
    assert!(metric(&pier, "pier_cache_disk_evictions_total{zone=\"main\"}") >= 30 - objects);
    assert_eq!(
        metric(
            &pier,
            "pier_cache_budget_bytes{zone=\"main\",tier=\"disk\"}"
        ),
        1 << 20
    );
    // What the index charges is what the directory holds.
    let files = object_files(disk.path());
    let on_disk: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert_eq!(files.len() as u64, objects);
    assert!(on_disk <= 1 << 20, "{on_disk} bytes of files");
}

#[test]
fn an_unusable_directory_keeps_the_cache_in_memory_with_one_error() {
    let origin = origin_serving(1000);
    // A path under a regular file: no user, root included, can make it.
    let text = config(origin.addr, Path::new("{dir}/pier.toml/cache"), "");
    let pier = Pier::with_config(&text, &[]);
    let error = logged(&pier, "cannot use the directory").expect("the error is logged");
    assert!(error.contains("keeps to memory"), "{error}");
    for _ in 0..3 {
        let r = get(pier.addr(), &req("/m", ""));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, expected("/m", 1000));
    }
    let hit = get(pier.addr(), &req("/m", ""));
    assert!(hit
        .header("cache-status")
        .unwrap()
        .starts_with("pier; hit; ttl="));
    assert_eq!(seen(&origin, "/m"), 1, "memory still caches");
    assert_eq!(
        metric(&pier, "pier_cache_disk_writes_total{zone=\"main\"}"),
        0
    );
    std::thread::sleep(Duration::from_millis(200));
    let errors = pier
        .log_lines()
        .iter()
        .filter(|l| l.contains("disk tier"))
        .count();
    assert_eq!(errors, 0, "one error only");
}

#[test]
fn a_write_that_fails_turns_the_disk_tier_off_and_no_request_fails() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("cache");
    let origin = origin_serving(1000);
    let pier = start(&origin, &dir, "");
    get(pier.addr(), &req("/w0", ""));
    wait_written(&pier, 1);
    // The directory goes away under the server (as a full disk would fail
    // the next write).
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    for i in 1..5 {
        let r = get(pier.addr(), &req(&format!("/w{i}"), ""));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, expected(&format!("/w{i}"), 1000));
    }
    let error = pier
        .wait_log("cannot write a file", Duration::from_secs(10))
        .expect("the failed write is logged");
    assert!(error.contains("keeps to memory"), "{error}");
    for i in 1..5 {
        let r = get(pier.addr(), &req(&format!("/w{i}"), ""));
        assert!(
            r.header("cache-status").unwrap().starts_with("pier; hit"),
            "/w{i} from memory"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    let more = pier
        .log_lines()
        .iter()
        .filter(|l| l.contains("disk tier"))
        .count();
    assert_eq!(more, 0, "one error only");
    assert_eq!(
        metric(&pier, "pier_cache_disk_writes_total{zone=\"main\"}"),
        1
    );
}

#[test]
fn a_file_cut_short_by_a_crash_is_ignored_and_removed() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(20_000);
    let first = start(&origin, disk.path(), "");
    get(first.addr(), &req("/cut", ""));
    get(first.addr(), &req("/whole", ""));
    wait_written(&first, 2);
    drop(first);
    let cut = file_holding(disk.path(), "/cut");
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let partial = disk.path().join("1-2.tmp");
    std::fs::write(&partial, b"PIERC\0\0\x01half a header").unwrap();

    let pier = start(&origin, disk.path(), "");
    assert!(!cut.exists(), "the truncated file is removed");
    assert!(!partial.exists(), "the partial file is removed");
    let again = get(pier.addr(), &req("/cut", ""));
    assert_eq!(again.header("cache-status"), Some("pier; fwd=miss; stored"));
    assert_eq!(again.body, expected("/cut", 20_000));
    assert_eq!(seen(&origin, "/cut"), 2);
    let whole = get(pier.addr(), &req("/whole", ""));
    assert!(whole
        .header("cache-status")
        .unwrap()
        .contains("detail=disk"));
    assert_eq!(whole.body, expected("/whole", 20_000));
    assert_eq!(seen(&origin, "/whole"), 1);
}

#[test]
fn a_purge_removes_the_disk_copy_too() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(1000);
    let first = start(&origin, disk.path(), "");
    get(first.addr(), &req("/p", ""));
    wait_written(&first, 1);
    drop(first);
    let pier = start(&origin, disk.path(), "");
    let purged = get(
        pier.admin.unwrap(),
        "PURGE /cache/main?key=http%3A%2F%2Fapp.test%2Fp HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(purged.body, b"purged 1\n");
    let after = get(pier.addr(), &req("/p", ""));
    assert_eq!(after.header("cache-status"), Some("pier; fwd=miss; stored"));
    assert_eq!(seen(&origin, "/p"), 2);
}

#[test]
fn disk_settings_errors_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let base = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\ncache = \"a\"\n";
    std::fs::write(&path, format!("{base}[cache.a]\ndisk_size = \"1GiB\"\n")).unwrap();
    let err = common::assert_config_error(&path, 11, "cache.a.disk_size");
    assert!(err.contains("needs a disk_path"), "{err}");
    std::fs::write(
        &path,
        format!("{base}[cache.a]\ndisk_path = \"/tmp/x\"\ndisk_size = \"10KiB\"\n"),
    )
    .unwrap();
    common::assert_config_error(&path, 12, "cache.a.disk_size");
    std::fs::write(
        &path,
        format!("{base}[cache.a]\ndisk_path = \"/tmp/x\"\n[cache.b]\ndisk_path = \"/tmp/x\"\n"),
    )
    .unwrap();
    let err = common::assert_config_error(&path, 13, "cache.b.disk_path");
    assert!(err.contains("another cache"), "{err}");
    // `pier check` touches no directory.
    std::fs::write(
        &path,
        format!(
            "{base}[cache.a]\ndisk_path = \"{}\"\n",
            dir.path().join("made").display()
        ),
    )
    .unwrap();
    let (code, err) = common::check_config(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(!dir.path().join("made").exists());
}

/// An origin whose `/v` is fresh for 1 s with an ETag, and answers a
/// revalidation 304 with a longer freshness and a field of its own.
fn revalidating_origin(n: usize) -> Upstream {
    Upstream::start(move |r| {
        if r.header("if-none-match") == Some("\"v1\"") {
            return Reply::Http(
                304,
                vec![
                    ("ETag".into(), "\"v1\"".into()),
                    ("Cache-Control".into(), "max-age=600".into()),
                    ("X-Refreshed".into(), "yes".into()),
                ],
                Vec::new(),
            );
        }
        Reply::Http(
            200,
            vec![
                ("Cache-Control".into(), "max-age=1".into()),
                ("ETag".into(), "\"v1\"".into()),
            ],
            expected(&r.target, n),
        )
    })
}

#[test]
fn a_stale_disk_object_is_revalidated_and_a_304_refreshes_its_head_on_disk() {
    let disk = tempfile::tempdir().unwrap();
    let origin = revalidating_origin(50_000);
    let first = start(&origin, disk.path(), "");
    get(first.addr(), &req("/v", ""));
    wait_written(&first, 1);
    drop(first);
    std::thread::sleep(Duration::from_millis(1200));

    // Memory is empty after the restart: the stale object is on disk only.
    let pier = start(&origin, disk.path(), "");
    let revalidated = get(pier.addr(), &req("/v", ""));
    assert_eq!(revalidated.status, 200);
    assert_eq!(
        revalidated.header("cache-status"),
        Some("pier; fwd=stale; fwd-status=304")
    );
    assert_eq!(revalidated.body, expected("/v", 50_000));
    assert_eq!(revalidated.header("x-refreshed"), Some("yes"));
    let asked: Vec<_> = origin
        .requests()
        .into_iter()
        .filter(|r| r.target == "/v")
        .collect();
    assert_eq!(
        asked.len(),
        2,
        "one full fetch, then one conditional request"
    );
    assert_eq!(asked[1].header("if-none-match"), Some("\"v1\""));
    assert_eq!(
        metric(&pier, "pier_cache_revalidated_total{zone=\"main\"}"),
        1
    );

    // Fresh now, from the disk, with the refreshed head.
    let hit = get(pier.addr(), &req("/v", ""));
    let status = hit.header("cache-status").unwrap();
    assert!(
        status.contains("hit") && status.contains("detail=disk"),
        "{status}"
    );
    assert_eq!(hit.header("x-refreshed"), Some("yes"));
    assert_eq!(hit.body, expected("/v", 50_000));

    // The file holds the refreshed head, so a restart finds it fresh too.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let file = file_holding(disk.path(), "/v");
        let bytes = std::fs::read(&file).unwrap_or_default();
        if common::find(&bytes, b"X-Refreshed").is_some() && object_files(disk.path()).len() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the head rewritten on disk");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(pier);
    let again = start(&origin, disk.path(), "");
    let hit = get(again.addr(), &req("/v", ""));
    assert!(hit.header("cache-status").unwrap().contains("detail=disk"));
    assert_eq!(hit.header("x-refreshed"), Some("yes"));
    assert_eq!(hit.body, expected("/v", 50_000));
    assert_eq!(seen(&origin, "/v"), 2, "no full fetch after the first");
}

#[test]
fn an_object_hit_on_disk_more_than_once_is_promoted_to_memory() {
    let disk = tempfile::tempdir().unwrap();
    let origin = origin_serving(20_000);
    let first = start(&origin, disk.path(), "");
    get(first.addr(), &req("/p", ""));
    wait_written(&first, 1);
    drop(first);

    let pier = start(&origin, disk.path(), "");
    let promotions = "pier_cache_promotions_total{zone=\"main\"}";
    let in_memory = "pier_cache_objects{zone=\"main\",tier=\"memory\"}";
    let hit = get(pier.addr(), &req("/p", ""));
    assert!(hit.header("cache-status").unwrap().contains("detail=disk"));
    assert_eq!(metric(&pier, promotions), 0, "one hit is not enough");
    assert_eq!(metric(&pier, in_memory), 0);
    let hit = get(pier.addr(), &req("/p", ""));
    assert!(hit.header("cache-status").unwrap().contains("detail=disk"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&pier, promotions) < 1 {
        assert!(Instant::now() < deadline, "promoted after the second hit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(metric(&pier, in_memory), 1);
    let from_memory = get(pier.addr(), &req("/p", ""));
    let status = from_memory.header("cache-status").unwrap();
    assert!(
        status.starts_with("pier; hit") && !status.contains("disk"),
        "{status}"
    );
    assert_eq!(from_memory.body, expected("/p", 20_000));
    assert_eq!(metric(&pier, promotions), 1);
    assert_eq!(seen(&origin, "/p"), 1);
}

#[test]
fn each_tier_keeps_responses_up_to_its_own_size_limit() {
    let disk = tempfile::tempdir().unwrap();
    let origin = Upstream::start(|r| {
        let n = if r.target.starts_with("/big") {
            200_000
        } else {
            10_000
        };
        Reply::Http(
            200,
            vec![("Cache-Control".into(), "max-age=600".into())],
            expected(&r.target, n),
        )
    });
    let memory = "pier_cache_objects{zone=\"main\",tier=\"memory\"}";
    let on_disk = "pier_cache_objects{zone=\"main\",tier=\"disk\"}";

    // Larger on disk than in memory.
    let pier = start(
        &origin,
        disk.path(),
        "max_object = \"64KiB\"\ndisk_max_object = \"1MiB\"",
    );
    let miss = get(pier.addr(), &req("/big1", ""));
    assert_eq!(miss.header("cache-status"), Some("pier; fwd=miss; stored"));
    get(pier.addr(), &req("/small1", ""));
    wait_written(&pier, 2);
    assert_eq!(metric(&pier, memory), 1, "only the small one in memory");
    assert_eq!(metric(&pier, on_disk), 2);
    let hit = get(pier.addr(), &req("/big1", ""));
    assert!(hit.header("cache-status").unwrap().contains("detail=disk"));
    assert_eq!(hit.body, expected("/big1", 200_000));
    assert_eq!(seen(&origin, "/big1"), 1);
    drop(pier);

    // Larger in memory than on disk.
    let disk = tempfile::tempdir().unwrap();
    let pier = start(
        &origin,
        disk.path(),
        "max_object = \"1MiB\"\ndisk_max_object = \"64KiB\"",
    );
    get(pier.addr(), &req("/big2", ""));
    get(pier.addr(), &req("/small2", ""));
    wait_written(&pier, 1);
    assert_eq!(metric(&pier, memory), 2);
    assert_eq!(metric(&pier, on_disk), 1, "only the small one on disk");
    let hit = get(pier.addr(), &req("/big2", ""));
    assert!(hit.header("cache-status").unwrap().starts_with("pier; hit"));
    assert_eq!(seen(&origin, "/big2"), 1);
}

#[test]
fn disk_max_object_errors_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let base = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"app\"\ncache = \"a\"\n";
    std::fs::write(
        &path,
        format!("{base}[cache.a]\ndisk_max_object = \"1MiB\"\n"),
    )
    .unwrap();
    let err = common::assert_config_error(&path, 11, "cache.a.disk_max_object");
    assert!(err.contains("needs a disk_path"), "{err}");
    std::fs::write(
        &path,
        format!("{base}[cache.a]\nmemory = \"1MiB\"\ndisk_path = \"/tmp/x\"\ndisk_max_object = \"2MiB\"\n"),
    )
    .unwrap();
    let err = common::assert_config_error(&path, 13, "cache.a.disk_max_object");
    assert!(err.contains("larger than memory"), "{err}");
}
