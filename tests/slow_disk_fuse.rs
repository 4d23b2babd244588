//! Downloads from a file system that fails or hangs part-way through a file:
//! the response ends (the connection closes short of its promised length), a
//! hung read frees its pool slot after `server.file_io_timeout`, and the worker
//! answers other clients all along. A download from a slow file system keeps a
//! window of reads in flight, and a mount whose server stops answering
//! altogether never blocks the worker, not even to reopen a file it has
//! cached.
//!
//! The file system is bench/slow_disk_fs (a FUSE passthrough built with Go):
//! reads past `-fail-after` of a `*.eio` file fail with EIO, those of a
//! `*.hang` file never answer, as on a dying disk or a dead network mount. FUSE
//! cannot say what it caches, so these downloads take the pool's send path.
//! Without `/dev/fuse` (or, outside CI, without Go) the tests say so and pass.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{connect, get, Pier, Reader};

const CONFIG: &str = r#"
[server]
workers = 1
file_io_threads = 2
file_io_timeout = "{timeout}"
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "static"
root = "{dir}"
[admin]
listen = "127.0.0.1:0"
"#;

/// Where reads start failing or hanging.
const FAIL_AFTER: usize = 1 << 20;
const FILE_LEN: usize = 8 << 20;

/// The slow file system's binary, built once per test run; `None` (with the
/// reason printed) where Go or FUSE is missing.
fn fs_binary() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !Path::new("/dev/fuse").exists() {
                eprintln!("skipped: /dev/fuse is missing");
                return None;
            }
            let go = common::which("go").or_else(|| {
                let local = PathBuf::from("/usr/local/go/bin/go");
                local.is_file().then_some(local)
            });
            let Some(go) = go else {
                assert!(std::env::var_os("CI").is_none(), ".ci/run installs Go");
                eprintln!("skipped: Go is needed to build bench/slow_disk_fs");
                return None;
            };
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slowdiskfs");
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/slow_disk_fs");
            let status = Command::new(go)
                .args(["build", "-o"])
                .arg(&out)
                .arg(".")
                .current_dir(src)
                .status()
                .expect("go runs");
            assert!(status.success(), "bench/slow_disk_fs builds");
            Some(out)
        })
        .as_deref()
}

/// A mounted slow file system; unmounted on drop.
struct SlowFs {
    child: Child,
    mountpoint: PathBuf,
    _source: tempfile::TempDir,
}

impl SlowFs {
    /// Mounts a directory holding `files` at `mountpoint`.
    fn mount(bin: &Path, mountpoint: &Path, files: &[(&str, &[u8])]) -> SlowFs {
        SlowFs::mount_with(bin, mountpoint, files, &["-delay", "1ms"])
    }

    /// Mounts with the file system's flags `args` (delay, caching, stats).
    fn mount_with(bin: &Path, mountpoint: &Path, files: &[(&str, &[u8])], args: &[&str]) -> SlowFs {
        let source = tempfile::tempdir().unwrap();
        for (name, data) in files {
            std::fs::write(source.path().join(name), data).unwrap();
        }
        std::fs::create_dir_all(mountpoint).unwrap();
        let mut child = Command::new(bin)
            .args(["-fail-after", &FAIL_AFTER.to_string()])
            .args(args)
            .arg(source.path())
            .arg(mountpoint)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the slow file system starts");
        let mut line = [0u8; 8];
        let n = child.stdout.as_mut().unwrap().read(&mut line).unwrap();
        assert!(
            line[..n].starts_with(b"mounted"),
            "the slow file system mounted: {:?}",
            String::from_utf8_lossy(&line[..n])
        );
        SlowFs {
            child,
            mountpoint: mountpoint.to_path_buf(),
            _source: source,
        }
    }
}

impl SlowFs {
    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).expect("the file system runs");
    }

    /// Stalls every operation of the mount (as a file server that stopped
    /// answering), or lets them go on.
    fn toggle_stall(&self) {
        self.signal(rustix::process::Signal::USR2);
    }

    /// The file system's read counters, written to `path` (its `-stats`) on
    /// request: (reads, most reads at once since the last call).
    fn reads(&self, path: &Path) -> (u64, u64) {
        let seq = |text: &str| field(text, "seq");
        let before = std::fs::read_to_string(path).map_or(0, |t| seq(&t));
        self.signal(rustix::process::Signal::USR1);
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(text) = std::fs::read_to_string(path) {
                if seq(&text) > before {
                    return (field(&text, "reads"), field(&text, "most_in_flight"));
                }
            }
            assert!(Instant::now() < end, "the file system wrote its counters");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A number from the file system's one-line JSON counters.
fn field(text: &str, name: &str) -> u64 {
    let at = text.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        // SIGTERM answers the hung reads and unmounts; a mount still busy is
        // detached instead.
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status();
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + i / 4096) as u8).collect()
}

/// Reads an answer to the end of the connection: the head, and how many body
/// bytes came before the close; fails if it does not end within `within`.
fn read_to_close(mut r: Reader, within: Duration) -> (String, Vec<u8>) {
    let deadline = Instant::now() + within;
    r.stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        assert!(Instant::now() < deadline, "the response did not end");
        match r.stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("read failed: {e}"),
        }
    }
    let end = common::find(&got, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    (head, got.split_off(end))
}

/// The value of an unlabelled series on `/metrics`.
fn metric(admin: SocketAddr, name: &str) -> f64 {
    let r = get(
        admin,
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8(r.body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
        .parse()
        .unwrap()
}

/// The small file on the local disk answers quickly while a download waits.
fn small_file_answers(pier: &Pier) {
    let t = Instant::now();
    let r = get(
        pier.addr(),
        "GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello");
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "the worker answered in {:?}",
        t.elapsed()
    );
}

#[test]
fn a_read_error_mid_file_closes_the_download_and_the_worker_goes_on() {
    let Some(bin) = fs_binary() else { return };
    let pier = Pier::with_config(&CONFIG.replace("{timeout}", "30s"), &[]);
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    let data = pattern(FILE_LEN);
    let fs = SlowFs::mount(
        bin,
        &pier.root().join("slow"),
        &[("big.eio", &data), ("fine.bin", &data)],
    );

    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /slow/big.eio HTTP/1.1\r\nHost: t\r\n\r\n");
    small_file_answers(&pier);
    let (head, body) = read_to_close(r, Duration::from_secs(20));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {FILE_LEN}")),
        "{head}"
    );
    assert!(
        body.len() < FILE_LEN,
        "the connection closed short of the promised length"
    );
    assert!(
        body == data[..body.len()],
        "what was sent is the file's bytes"
    );
    small_file_answers(&pier);

    // The same file system still serves a file that reads cleanly, whole.
    let r = get(
        pier.addr(),
        "GET /slow/fine.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(r.body == data, "the clean file arrives intact");
    drop(pier);
    drop(fs);
}

#[test]
fn a_read_that_never_answers_times_out_frees_its_slot_and_never_blocks_the_worker() {
    let Some(bin) = fs_binary() else { return };
    let pier = Pier::with_config(&CONFIG.replace("{timeout}", "1s"), &[]);
    let admin = pier.admin.expect("admin listener on");
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    let data = pattern(FILE_LEN);
    let fs = SlowFs::mount(
        bin,
        &pier.root().join("slow"),
        &[("big.hang", &data), ("fine.bin", &data)],
    );

    let t = Instant::now();
    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"GET /slow/big.hang HTTP/1.1\r\nHost: t\r\n\r\n");
    // While the download's read hangs, the worker answers others at once.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        small_file_answers(&pier);
    }
    let (head, body) = read_to_close(r, Duration::from_secs(20));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.len() < FILE_LEN, "the hung download was cut short");
    assert!(body == data[..body.len()]);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "ended by the 1 s timeout, not before: {:?}",
        t.elapsed()
    );
    assert!(metric(admin, "pier_file_io_timeouts_total") >= 1.0);
    assert!(metric(admin, "pier_file_io_threads_stuck") >= 1.0);

    // Both configured threads may be stuck in the hung file, yet the pool
    // still opens and sends another file.
    let r = get(
        pier.addr(),
        "GET /slow/fine.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(
        r.body == data,
        "a clean file arrives intact beside a hung one"
    );
    assert!(metric(admin, "pier_file_io_jobs_total") >= 2.0);
    small_file_answers(&pier);
    drop(pier);
    drop(fs);
}

#[test]
fn over_tls_fuse_downloads_are_read_off_the_loop_and_a_failing_one_closes_short() {
    use common::tls::{connect_tls, recording_client, tls_get, Pki};
    let Some(bin) = fs_binary() else { return };
    let certs = tempfile::tempdir().unwrap();
    let pki = Pki::new(certs.path(), "Pier Test CA");
    let (cert, key) = pki.server("slow", "a.test", &["a.test"], None);
    let tls_listener = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{}\"\nkey = \"{}\"\n[[route]]",
        cert.display(),
        key.display()
    );
    let config = CONFIG
        .replace("{timeout}", "30s")
        .replacen("[[route]]", &tls_listener, 1);
    let pier = Pier::with_config(&config, &[]);
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    let data = pattern(FILE_LEN);
    let fs = SlowFs::mount(
        bin,
        &pier.root().join("slow"),
        &[("big.eio", &data), ("fine.bin", &data)],
    );
    let (client, _) = recording_client(true);

    let mut c = connect_tls(pier.https[0], "a.test", &client).unwrap();
    let r = tls_get(&mut c, "/slow/fine.bin").unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == data, "the file arrives intact over TLS");

    let mut c = connect_tls(pier.https[0], "a.test", &client).unwrap();
    assert!(
        tls_get(&mut c, "/slow/big.eio").is_err(),
        "a read error ends the TLS response short of its length"
    );
    small_file_answers(&pier);
    let mut c = connect_tls(pier.https[0], "a.test", &client).unwrap();
    let r = tls_get(&mut c, "/hello.txt").unwrap();
    assert_eq!(r.body, b"hello");
    drop(pier);
    drop(fs);
}

#[test]
fn a_download_from_a_slow_file_system_keeps_a_window_of_reads_in_flight() {
    let Some(bin) = fs_binary() else { return };
    // Two pool threads: one for the send, one for read-ahead.
    let pier = Pier::with_config(&CONFIG.replace("{timeout}", "30s"), &[]);
    let data = pattern(FILE_LEN);
    let stats = pier.root().join("fs-stats.json");
    let fs = SlowFs::mount_with(
        bin,
        &pier.root().join("slow"),
        &[("fine.bin", &data)],
        &["-delay", "20ms", "-stats", stats.to_str().unwrap()],
    );
    let (reads_before, _) = fs.reads(&stats);
    let r = get(
        pier.addr(),
        "GET /slow/fine.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(r.body == data, "the file arrives intact");
    let (reads, most) = fs.reads(&stats);
    // Read by 128 KiB (the mount's max_read): 64 reads of 20 ms each. One
    // read-ahead thread keeps a window of them under way at once, where
    // reading as the send goes keeps the kernel's one or two.
    assert!(reads - reads_before >= 64, "{} reads", reads - reads_before);
    assert!(most >= 6, "at most {most} reads were in flight at once");
    drop(pier);
    drop(fs);
}

#[test]
fn a_mount_that_stops_answering_never_blocks_the_worker_not_even_to_reopen_a_cached_file() {
    let Some(bin) = fs_binary() else { return };
    let pier = Pier::with_config(&CONFIG.replace("{timeout}", "1s"), &[]);
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    let big = pattern(256 * 1024);
    // Names and attributes cached for a minute, as an NFS mount's attribute
    // cache: the kernel resolves the paths without asking, yet an open (and
    // a statfs) still goes to the server.
    let fs = SlowFs::mount_with(
        bin,
        &pier.root().join("slow"),
        &[("small.txt", b"small"), ("big.bin", &big)],
        &["-delay", "1ms", "-cache-timeout", "60s"],
    );
    let fetch = |path: &str| {
        get(
            pier.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        )
    };
    let r = fetch("/slow/small.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"small"[..]));
    let r = fetch("/slow/big.bin");
    assert_eq!(r.status, 200);
    assert!(r.body == big);

    fs.toggle_stall();
    // The big file is in the open-file cache and its pages in the page
    // cache; sending it must not ask the stalled mount anything on the
    // worker (what the file system is, whether its pages are cached). On a
    // machine slow enough for the cache entry to expire first, it is opened
    // again instead, and the pool's timeout answers that.
    let mut hit = Reader::new(connect(pier.addr()));
    hit.send(b"GET /slow/big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
    small_file_answers(&pier);
    let (head, _) = read_to_close(hit, Duration::from_secs(20));
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.1 503"),
        "{head}"
    );

    // Past the open-file cache's second, the small file is opened again to
    // see whether it changed: that open waits for the stalled mount off the
    // loop, and the pool's timeout answers it.
    std::thread::sleep(Duration::from_millis(1100));
    let t = Instant::now();
    let mut reopen = Reader::new(connect(pier.addr()));
    reopen.send(b"GET /slow/small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        small_file_answers(&pier);
    }
    let (head, _) = read_to_close(reopen, Duration::from_secs(20));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );

    fs.toggle_stall();
    let r = fetch("/slow/small.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"small"[..]));
    drop(pier);
    drop(fs);
}

/// A symbolic link in the document root that leads onto a mount which has
/// stopped answering: the mount table names no such mount under the path as
/// written, yet the open of a file through the link goes to the stalled
/// server. It is opened off the loop (and the pool's timeout answers it), so
/// the worker answers other clients meanwhile. (A file Pier has opened before
/// is reopened off the loop by its device; this one it has not.)
#[test]
fn a_link_onto_a_mount_that_stops_answering_is_followed_off_the_loop() {
    let Some(bin) = fs_binary() else { return };
    let config = CONFIG.replace("{timeout}", "1s").replace(
        "root = \"{dir}\"",
        "root = \"{dir}\"\nallow_symlinks_outside = true",
    );
    let pier = Pier::with_config(&config, &[]);
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    // The mount lies outside the document root; names and attributes are
    // cached for a minute, so the kernel follows the link without asking.
    let outside = tempfile::tempdir().unwrap();
    let fs = SlowFs::mount_with(
        bin,
        &outside.path().join("slow"),
        &[("small.txt", b"small")],
        &["-delay", "1ms", "-cache-timeout", "60s"],
    );
    std::os::unix::fs::symlink(outside.path().join("slow"), pier.root().join("linked")).unwrap();
    let fetch = |path: &str| {
        get(
            pier.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        )
    };
    // Read once through the link by another process: the names are in the
    // dentry cache and the link's access time is later than its change time
    // (a tick of the coarse clock after it was made), so the kernel would
    // resolve the path without asking or writing; the open itself still goes
    // to the server.
    std::thread::sleep(Duration::from_millis(50));
    let direct = std::fs::read(pier.root().join("linked/small.txt")).unwrap();
    assert_eq!(direct, b"small");

    fs.toggle_stall();
    std::thread::sleep(Duration::from_millis(100));
    let mut through = Reader::new(connect(pier.addr()));
    through.send(b"GET /linked/small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        small_file_answers(&pier);
    }
    let (head, _) = read_to_close(through, Duration::from_secs(20));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");

    fs.toggle_stall();
    let r = fetch("/linked/small.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"small"[..]));
    drop(pier);
    drop(fs);
}

/// Downloads from a FUSE mount are sent by pool threads. While the worker
/// answers nothing else, the four of them send at once; once small requests
/// are answered beside them, each send waits its turn (a worker keeps one
/// MiB of download sends on the pool at a time), counted in
/// `pier_download_turns_waited_total`. A rule of a yield per chunk alone
/// never holds a download back, so the count would stay where it was.
#[test]
fn downloads_take_turns_on_the_pool_only_while_the_worker_answers_other_requests() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let Some(bin) = fs_binary() else { return };
    let config = CONFIG
        .replace("{timeout}", "30s")
        .replace("file_io_threads = 2", "file_io_threads = 8");
    let pier = Pier::with_config(&config, &[]);
    let admin = pier.admin.expect("admin listener on");
    std::fs::write(pier.root().join("hello.txt"), b"hello").unwrap();
    const LEN: u64 = 64 << 20;
    let names = ["a.bin", "b.bin", "c.bin", "d.bin"];
    let empty: Vec<(&str, &[u8])> = names.iter().map(|n| (*n, &b""[..])).collect();
    let fs = SlowFs::mount(bin, &pier.root().join("slow"), &empty);
    for name in names {
        // Sparse: the source costs no disk, the file system reads zeros.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(fs._source.path().join(name))
            .unwrap();
        f.set_len(LEN).unwrap();
    }

    let progress: Vec<Arc<AtomicU64>> = names.iter().map(|_| Arc::default()).collect();
    let readers: Vec<_> = names
        .iter()
        .zip(&progress)
        .map(|(name, got)| {
            let mut r = Reader::new(connect(pier.addr()));
            r.send(
                format!("GET /slow/{name} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
            let got = got.clone();
            std::thread::spawn(move || {
                r.stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut buf = vec![0u8; 1 << 16];
                let mut all = 0u64;
                loop {
                    match r.stream.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            all += n as u64;
                            got.store(all, Ordering::Relaxed);
                        }
                        Err(e) => panic!("download failed: {e}"),
                    }
                }
                all
            })
        })
        .collect();
    let wait_for_each = |more: u64| {
        let want: Vec<u64> = progress
            .iter()
            .map(|p| p.load(Ordering::Relaxed) + more)
            .collect();
        let end = Instant::now() + Duration::from_secs(60);
        while progress
            .iter()
            .zip(&want)
            .any(|(p, w)| p.load(Ordering::Relaxed) < *w)
        {
            assert!(Instant::now() < end, "the downloads stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
    };

    // Past their start (each download's own request counts as other work
    // until a send has ended after it): downloads alone never wait.
    wait_for_each(2 << 20);
    let waited = || metric(admin, "pier_download_turns_waited_total");
    let alone = waited();
    wait_for_each(4 << 20);
    assert_eq!(waited(), alone, "downloads alone took turns");

    // Small requests beside them: the downloads take turns, and the small
    // requests are answered all along.
    let mut small = Reader::new(connect(pier.addr()));
    let mut answered = 0;
    let beside = loop {
        for _ in 0..20 {
            small.send(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = small.response(false).expect("a small answer");
            assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
            answered += 1;
        }
        let now = waited();
        let running = progress.iter().all(|p| p.load(Ordering::Relaxed) < LEN);
        if now > alone || !running {
            break now;
        }
    };
    assert!(
        beside > alone,
        "no download waited for its turn while {answered} small requests were answered"
    );
    for reader in readers {
        let got = reader.join().unwrap();
        // The whole body after a head of a few hundred bytes.
        assert!(
            (LEN + 64..LEN + 1024).contains(&got),
            "a download ended short: {got} bytes with its head"
        );
    }
    drop(pier);
    drop(fs);
}
