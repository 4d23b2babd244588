//! A slow disk never stalls a worker: file work that would wait runs on the
//! blocking pool while the same single worker answers other clients.
//!
//! The wait is a real one, made without FUSE: an open of a file under a write
//! lease (`F_SETLEASE`) sleeps in the kernel until the lease holder lets go,
//! as an open on a hung network mount does. Cold reads are made by evicting a
//! file's pages (`POSIX_FADV_DONTNEED`) before it is requested.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
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
autoindex = true
"#;

fn pier(timeout: &str) -> Pier {
    Pier::with_config(&CONFIG.replace("{timeout}", timeout), &[])
}

/// Holds a write lease on a file: any other open of it sleeps in the kernel
/// until [`Lease::release`] (or the system's lease-break time, 45 s by default).
struct Lease {
    child: Child,
}

impl Lease {
    fn take(file: &Path) -> Lease {
        let script = r#"
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("leased", flush=True)
sys.stdin.readline()
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
print("released", flush=True)
"#;
        let mut child = Command::new("python3")
            .args(["-c", script])
            .arg(file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the lease holder");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "leased", "the lease was taken");
        Lease { child }
    }

    fn release(mut self) {
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"go\n")
            .unwrap();
        let mut out = String::new();
        self.child
            .stdout
            .as_mut()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(out.contains("released"));
        let _ = self.child.wait();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Still held: end the holder (by its own handle), which drops the lease.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
}

/// Starts a request on its own connection; the caller reads the answer later.
fn start(pier: &Pier, path: &str) -> Reader {
    let mut r = Reader::new(connect(pier.addr()));
    r.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    r
}

/// Whether any answer byte arrives within `wait`.
fn answered_within(r: &mut Reader, wait: Duration) -> bool {
    r.stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    let got = match r.stream.peek(&mut byte) {
        Ok(n) => n > 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    r.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    got
}

#[test]
fn a_small_file_is_answered_while_an_open_waits_on_the_disk() {
    let pier = pier("30s");
    let root = pier.root().to_path_buf();
    std::fs::write(root.join("small.txt"), b"hello, world\n").unwrap();
    let big = pattern(300 * 1024);
    std::fs::write(root.join("held.bin"), &big).unwrap();
    let lease = Lease::take(&root.join("held.bin"));

    let mut waiting = start(&pier, "/held.bin");
    assert!(
        !answered_within(&mut waiting, Duration::from_millis(300)),
        "the open of a leased file waits for the lease holder"
    );
    // The only worker answers other clients meanwhile, each well within a second.
    for _ in 0..20 {
        let t = Instant::now();
        let r = get(
            pier.addr(),
            "GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hello, world\n");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    assert!(
        !answered_within(&mut waiting, Duration::from_millis(10)),
        "still waiting on the lease"
    );
    lease.release();
    let r = waiting
        .response(false)
        .expect("answered once the open returns");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, big);
}

#[test]
fn an_open_that_hangs_past_the_timeout_is_a_503_and_frees_its_thread() {
    let pier = pier("500ms");
    let root = pier.root().to_path_buf();
    std::fs::create_dir(root.join("listed")).unwrap();
    std::fs::write(root.join("listed/entry.txt"), b"x").unwrap();
    let _leases: Vec<Lease> = (0..2)
        .map(|i| {
            let file = root.join(format!("held{i}.txt"));
            std::fs::write(&file, b"held").unwrap();
            Lease::take(&file)
        })
        .collect();

    // Both pool threads end up stuck in opens the lease holder never allows.
    let t = Instant::now();
    let mut stuck: Vec<Reader> = (0..2)
        .map(|i| start(&pier, &format!("/held{i}.txt")))
        .collect();
    for r in &mut stuck {
        let resp = r.response(false).expect("an answer after the timeout");
        assert_eq!(resp.status, 503);
        assert!(
            t.elapsed() >= Duration::from_millis(450),
            "{:?}",
            t.elapsed()
        );
    }
    // A listing always runs on the pool: it is served although both threads
    // are still stuck, because stuck threads no longer count.
    let r = get(
        pier.addr(),
        "GET /listed/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("entry.txt"));
}

/// Threads of the file IO pool in process `pid`; they start on first use.
fn pool_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "pier-file-io")
        .count()
}

/// Drops the page-cache pages of `path`. Pages a send has just used may
/// still be held by the socket for a moment, and `POSIX_FADV_DONTNEED` skips
/// pages in use, so it is asked again over a tenth of a second. (Probing
/// residency here with a non-waiting read would start a readahead and bring
/// the pages back.)
fn evict_pages(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    for _ in 0..5 {
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cold_file_pages_are_read_off_the_loop_and_sent_whole() {
    let pier = pier("30s");
    let root = pier.root().to_path_buf();
    let big = pattern(3 * 1024 * 1024 + 123);
    let path = root.join("cold.bin");
    std::fs::write(&path, &big).unwrap();
    // Hot files, large and small, never touch the pool.
    std::fs::write(root.join("hot.txt"), b"hot").unwrap();
    for target in ["/hot.txt", "/hot.txt", "/cold.bin"] {
        let r = get(
            pier.addr(),
            &format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        pool_threads(pier.pid()),
        0,
        "a hot file went through the pool"
    );
    let evict = || evict_pages(&path);
    // The kernel may keep pages a socket still holds, so a file asked for
    // while it is not cold after all is asked for again, after another
    // eviction, a few times.
    for _ in 0..5 {
        evict();
        let r = get(
            pier.addr(),
            "GET /cold.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 200);
        assert!(r.body == big, "the cold file arrives intact");
        if pool_threads(pier.pid()) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        pool_threads(pier.pid()) > 0,
        "the cold file went through the pool"
    );

    evict();
    let r = get(
        pier.addr(),
        "GET /cold.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000000-2500000\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 206);
    assert!(
        r.body == big[1_000_000..=2_500_000],
        "the cold range arrives intact"
    );

    // A small file whose pages are cold takes the same path.
    let small = pattern(40_000);
    let small_path = root.join("cold_small.bin");
    std::fs::write(&small_path, &small).unwrap();
    evict_pages(&small_path);
    let r = get(
        pier.addr(),
        "GET /cold_small.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert!(r.body == small);
}

#[test]
fn a_file_truncated_while_sent_ends_its_response_and_the_worker_goes_on() {
    let pier = pier("30s");
    let root = pier.root().to_path_buf();
    let path = root.join("shrinking.bin");
    let len = 24 * 1024 * 1024;
    std::fs::write(&path, vec![b'a'; len]).unwrap();
    std::fs::write(root.join("small.txt"), b"still here").unwrap();

    let stream = connect(pier.addr());
    rustix::net::sockopt::set_socket_recv_buffer_size(&stream, 16 * 1024).unwrap();
    let mut r = Reader::new(stream);
    r.send(b"GET /shrinking.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    // Let the socket buffers fill, then cut the file short under the sender.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1024 * 1024)
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "the response did not end");
        match r.stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read failed: {e}"),
        }
    }
    let head_end = common::find(&got, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&got[..head_end]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains(&format!("Content-Length: {len}")), "{head}");
    let body = got.len() - head_end;
    assert!(
        body < len,
        "the connection closed short of the promised length"
    );

    let r = get(
        pier.addr(),
        "GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"still here");
}

#[test]
fn an_error_page_on_a_waiting_disk_is_opened_off_the_loop() {
    let pier = Pier::with_config(
        &CONFIG
            .replace("{timeout}", "30s")
            .replace("autoindex = true", "error_pages = { 404 = \"/404.html\" }"),
        &[],
    );
    let root = pier.root().to_path_buf();
    std::fs::write(root.join("small.txt"), b"small").unwrap();
    std::fs::write(root.join("404.html"), b"<p>not here</p>").unwrap();
    let lease = Lease::take(&root.join("404.html"));

    let mut waiting = start(&pier, "/missing.txt");
    assert!(
        !answered_within(&mut waiting, Duration::from_millis(300)),
        "the error page's open waits for the lease holder"
    );
    let r = get(
        pier.addr(),
        "GET /small.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    lease.release();
    let r = waiting
        .response(false)
        .expect("answered once the open returns");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, b"<p>not here</p>");
}
