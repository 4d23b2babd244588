//! Hostile clients against a real `pier` process: slowloris, slow bodies, clients
//! that never read, header floods, absurd chunk sizes and pipelining floods. Each
//! test starts its own server with timeouts short enough to keep it quick, and
//! checks what the server does with its descriptors and memory (/proc/PID), not
//! only what the client sees.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, get, Pier, Reader};

/// A static root and a fixed response, with `[http]` settings spliced in.
fn config(http: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[http]
{http}
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "static"
root = "{{dir}}"
[[route]]
path = "/fixed"
handler = "respond"
status = 200
body = "Hello, World!"
"#
    )
}

/// Open sockets of a process (its other descriptors, such as cached open
/// files, come and go with the file cache).
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| {
            target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"socket:")
        })
        .count()
}

/// Polls until the server's descriptor count is at most `limit`; returns the last count.
fn wait_fds_at_most(pid: u32, limit: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let n = fd_count(pid);
        if n <= limit || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Raises this process's soft open-file limit towards `want` (up to the hard
/// limit); returns the soft limit now in force. The server inherits it and
/// raises its own to the hard limit.
fn raise_nofile(want: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    let hard = lim.maximum.unwrap_or(u64::MAX);
    let current = lim.current.unwrap_or(u64::MAX);
    if current >= want {
        return current;
    }
    let soft = want.min(hard);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(soft),
            maximum: lim.maximum,
        },
    )
    .unwrap();
    soft
}

/// Receive queue (bytes the process has not read yet) of the established TCP
/// socket from `local` to `remote`, from /proc/net/tcp.
fn recv_queue(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let port = |field: &str| u16::from_str_radix(field.rsplit(':').next()?, 16).ok();
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || port(f[1])? != local.port() || port(f[2])? != remote.port() {
            return None;
        }
        u64::from_str_radix(f[4].split(':').nth(1)?, 16).ok()
    })
}

/// Reads until the server closes (EOF or reset); returns the bytes read, or
/// panics if the connection is still open after `within`.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("connection still open after {within:?}: {e}"),
        }
    }
}

/// The status of the response at the start of `bytes`.
fn status_of(bytes: &[u8]) -> Option<u16> {
    let line = bytes.strip_prefix(b"HTTP/1.1 ")?;
    std::str::from_utf8(line.get(..3)?).ok()?.parse().ok()
}

/// Sends `raw` and expects `status` with `Connection: close`, then the close itself.
fn assert_refused_and_closed(pier: &Pier, raw: &[u8], status: u16) {
    let mut s = connect(pier.addr());
    // The server may answer and close before it has read all of a large request.
    let _ = s.write_all(raw);
    let got = read_until_closed(&mut s, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&got[..got.len().min(200)]).into_owned();
    assert_eq!(status_of(&got), Some(status), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
}

/// What became of a wave of slowloris clients.
struct SlowlorisWave {
    answered_408: usize,
    /// Closed without a response.
    closed: usize,
    /// Answered with anything but 408.
    other: usize,
    still_open: usize,
    /// Time from the first connect to the first connection the server cut.
    first_cut: Option<Duration>,
}

/// Connects `n` clients that each send the start of a head, then a few more
/// bytes of never-ending header fields about every second; a thread keeps them
/// trickling (a fiftieth of them every 20 ms, as unsynchronised clients would)
/// until the server has cut them all (or 20 s pass).
fn slowloris_wave(
    addr: SocketAddr,
    n: usize,
) -> (Instant, Duration, std::thread::JoinHandle<SlowlorisWave>) {
    let started = Instant::now();
    let mut slow: Vec<Option<TcpStream>> = (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect a slow client");
            s.write_all(b"GET /fixed HTTP/1.1\r\nHost: t\r\n").unwrap();
            s.set_nonblocking(true).unwrap();
            Some(s)
        })
        .collect();
    let connected = started.elapsed();
    let trickler = std::thread::spawn(move || {
        let drip = b"X-Slow-Header: still-coming\r\n";
        let mut pos = vec![0usize; n];
        let mut wave = SlowlorisWave {
            answered_408: 0,
            closed: 0,
            other: 0,
            still_open: 0,
            first_cut: None,
        };
        let deadline = started + Duration::from_secs(20);
        let mut buf = [0u8; 256];
        let slice = n.div_ceil(50);
        let mut open = n;
        let mut next = 0;
        while open > 0 && Instant::now() < deadline {
            for i in (next..n).take(slice) {
                let slot = &mut slow[i];
                let Some(s) = slot else { continue };
                let cut = match s.read(&mut buf) {
                    Ok(0) => {
                        wave.closed += 1;
                        true
                    }
                    Ok(got) => {
                        if status_of(&buf[..got]) == Some(408) {
                            wave.answered_408 += 1;
                        } else {
                            wave.other += 1;
                        }
                        true
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        let p = pos[i] % drip.len();
                        let end = (p + 3).min(drip.len());
                        match s.write(&drip[p..end]) {
                            Ok(w) => {
                                pos[i] += w;
                                false
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
                            Err(_) => {
                                wave.closed += 1;
                                true
                            }
                        }
                    }
                    Err(_) => {
                        wave.closed += 1;
                        true
                    }
                };
                if cut {
                    wave.first_cut.get_or_insert(started.elapsed());
                    *slot = None;
                    open -= 1;
                }
            }
            next = if next + slice >= n { 0 } else { next + slice };
            std::thread::sleep(Duration::from_millis(20));
        }
        wave.still_open = slow.iter().filter(|s| s.is_some()).count();
        wave
    });
    (started, connected, trickler)
}

/// Waits until the server holds at least `want` descriptors.
fn wait_fds_at_least(pid: u32, want: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let n = fd_count(pid);
        if n >= want || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn slowloris_5000_connections_are_cut_by_the_header_timeout_while_keep_alive_p99_stays_under_50ms()
{
    const SLOW: usize = 5000;
    let soft = raise_nofile(SLOW as u64 + 1024);
    if soft < SLOW as u64 + 256 {
        eprintln!(
            "skipping slowloris test: the open-file limit allows {soft} descriptors, \
             {SLOW} slow connections need at least {}",
            SLOW + 256
        );
        return;
    }
    let header_timeout = Duration::from_secs(4);
    let pier = Pier::with_config(
        &config("header_read_timeout = \"4s\"\nkeepalive_timeout = \"60s\""),
        &[],
    );
    let pid = pier.pid();
    let mut legit = Reader::new(connect(pier.addr()));
    legit.stream.set_nodelay(true).unwrap();
    for _ in 0..50 {
        legit.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(legit.response(false).unwrap().status, 200);
    }
    std::thread::sleep(Duration::from_millis(200));
    let base_fds = fd_count(pid);
    let base_rss = common::rss_kib(pid);

    let (started, connected, trickler) = slowloris_wave(pier.addr(), SLOW);
    // Once the server holds all of them, time a legitimate keep-alive client.
    let held = wait_fds_at_least(pid, base_fds + SLOW, Duration::from_secs(5));
    assert!(
        held >= base_fds + SLOW,
        "server holds {held} sockets, expected {SLOW} slow connections on top of \
         {base_fds} (connecting took {connected:?})"
    );
    let peak_rss = common::rss_kib(pid);
    let mut latencies = Vec::with_capacity(300);
    for _ in 0..300 {
        let t = Instant::now();
        legit.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = legit.response(false).expect("legitimate response");
        latencies.push(t.elapsed());
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"Hello, World!");
        std::thread::sleep(Duration::from_millis(2));
    }
    let legit_done = started.elapsed();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100 - 1];
    let max = *latencies.last().unwrap();

    let wave = trickler.join().unwrap();
    let first_cut = wave.first_cut.expect("slow connections were cut");
    eprintln!(
        "slowloris: {SLOW} connected in {connected:?}; legitimate p99 {p99:?} max {max:?}, \
         done at {legit_done:?}; first cut at {first_cut:?}; 408: {}, closed: {}, other: {}; \
         RSS {base_rss} KiB -> {peak_rss} KiB",
        wave.answered_408, wave.closed, wave.other
    );
    assert!(
        legit_done < first_cut,
        "the legitimate client ran while the slow connections were open"
    );
    assert!(
        p99 < Duration::from_millis(50),
        "legitimate p99 {p99:?} under slowloris"
    );
    assert_eq!(wave.still_open, 0, "slow connections never cut");
    assert_eq!(
        wave.other, 0,
        "slow connections got something other than 408"
    );
    assert_eq!(wave.answered_408 + wave.closed, SLOW);
    assert!(
        first_cut >= header_timeout - Duration::from_millis(300),
        "cut before the header timeout: {first_cut:?}"
    );

    // The server gives every descriptor back.
    let fds = wait_fds_at_most(pid, base_fds, Duration::from_secs(15));
    assert!(fds <= base_fds, "{fds} sockets open, {base_fds} before");
    let after_first = common::rss_kib(pid);

    // The memory the slow connections held goes back to the allocator, and a
    // second wave reuses it rather than adding its own. (The allocator keeps the
    // freed pages of its arenas resident, so RSS stays near the first wave's
    // peak rather than dropping to the baseline.)
    let (_, _, trickler) = slowloris_wave(pier.addr(), SLOW);
    let held = wait_fds_at_least(pid, base_fds + SLOW, Duration::from_secs(5));
    assert!(held >= base_fds + SLOW, "second wave: {held} sockets");
    let wave = trickler.join().unwrap();
    assert_eq!(
        (wave.still_open, wave.other),
        (0, 0),
        "second wave not cut cleanly"
    );
    let fds = wait_fds_at_most(pid, base_fds, Duration::from_secs(15));
    assert!(fds <= base_fds, "{fds} sockets open after the second wave");
    let after_second = common::rss_kib(pid);
    eprintln!(
        "slowloris: RSS {base_rss} KiB before, {peak_rss} KiB with {SLOW} slow clients, \
         {after_first} KiB after, {after_second} KiB after a second wave"
    );
    // A slow client costs its socket, its task and a read buffer (no output
    // buffer while it has not sent a head): well under 12 KiB each.
    assert!(
        after_first.max(peak_rss) <= base_rss + SLOW as u64 * 12,
        "RSS {after_first} KiB after the attack (peak {peak_rss} KiB), {base_rss} KiB \
         before: over 12 KiB per slow client"
    );
    // A second wave fits the same budget: what the first held was freed.
    assert!(
        after_second <= base_rss + SLOW as u64 * 12,
        "RSS {after_second} KiB after a second wave, {after_first} KiB after the first, \
         {base_rss} KiB before: memory accumulates across waves"
    );
    // And the legitimate connection is still served.
    legit.send(b"GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(legit.response(false).unwrap().status, 200);
}

#[test]
fn slow_post_body_beyond_the_body_timeout_gets_408_and_frees_the_connection() {
    let pier = Pier::with_config(&config("body_read_timeout = \"1s\""), &[]);
    let pid = pier.pid();
    assert_eq!(
        get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let base_fds = fd_count(pid);

    let mut s = connect(pier.addr());
    s.write_all(b"POST /fixed HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nx")
        .unwrap();
    let started = Instant::now();
    // One byte every 1.5 s: each gap is longer than the 1 s body timeout.
    let mut writer = s.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_writer = stop.clone();
    let trickle = std::thread::spawn(move || {
        for _ in 0..4 {
            for _ in 0..15 {
                if stop_writer.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if writer.write_all(b"x").is_err() {
                return;
            }
        }
    });

    // Meanwhile a legitimate client is served at once.
    let t = Instant::now();
    let resp = get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );

    let got = read_until_closed(&mut s, Duration::from_secs(5));
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    trickle.join().unwrap();
    assert_eq!(
        status_of(&got),
        Some(408),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // The first gap (1.5 s) already exceeds the timeout; an answer only at a
    // later gap would come at 2.5 s or after, so the bound tells them apart
    // with room for a loaded machine.
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_millis(2400),
        "408 after {elapsed:?}, body timeout 1 s"
    );
    let fds = wait_fds_at_most(pid, base_fds, Duration::from_secs(15));
    assert!(fds <= base_fds, "{fds} sockets open, {base_fds} before");
}

#[test]
fn never_reading_clients_are_dropped_after_the_write_timeout_without_buffering_responses() {
    // Large fixed bodies are written from the configuration, not copied per client.
    let generated = "g".repeat(8 * 1024 * 1024);
    let pier = Pier::with_config(
        &(config("write_timeout = \"1s\"")
            + &format!(
                "[[route]]\npath = \"/generated\"\nhandler = \"respond\"\nbody = \"{generated}\"\n"
            )),
        &[],
    );
    let pid = pier.pid();
    let big_len = 64 * 1024 * 1024;
    std::fs::write(pier.root().join("big.bin"), vec![b'b'; big_len]).unwrap();
    // Warm up both paths on a reading client, so the baseline includes them.
    for path in ["/big.bin", "/generated"] {
        let resp = get(
            pier.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"),
        );
        assert_eq!(resp.status, 200);
    }
    std::thread::sleep(Duration::from_millis(200));
    let base_fds = fd_count(pid);
    let base_rss = common::rss_kib(pid);

    let open = |path: &str| {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(16 * 1024).unwrap();
        sock.connect(&pier.addr().into()).unwrap();
        let mut s: TcpStream = sock.into();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        s
    };
    let mut clients: Vec<(TcpStream, usize)> = Vec::new();
    for _ in 0..4 {
        clients.push((open("/big.bin"), big_len));
    }
    for _ in 0..6 {
        clients.push((open("/generated"), generated.len()));
    }
    std::thread::sleep(Duration::from_millis(500));
    let during_rss = common::rss_kib(pid);
    eprintln!("never-read: RSS {base_rss} KiB -> {during_rss} KiB with 10 stalled responses");
    // Buffering the fixed bodies alone would take 48 MiB, less what the kernel took.
    assert!(
        during_rss <= base_rss + 8 * 1024,
        "RSS grew from {base_rss} KiB to {during_rss} KiB"
    );
    assert!(
        fd_count(pid) >= base_fds + clients.len(),
        "clients still held"
    );

    // After a 1 s stall every connection is dropped, its response cut short.
    let fds = wait_fds_at_most(pid, base_fds, Duration::from_secs(15));
    assert!(fds <= base_fds, "{fds} sockets open, {base_fds} before");
    for (s, full) in &mut clients {
        let got = read_until_closed(s, Duration::from_secs(2));
        assert_eq!(status_of(&got), Some(200));
        assert!(got.len() < *full, "all {} bytes arrived", got.len());
    }
}

#[test]
fn never_reading_client_of_a_proxied_stream_is_dropped_without_buffering_it() {
    use common::upstream::{Reply, Upstream};
    const LEN: u64 = 512 * 1024 * 1024;
    let up = Upstream::start(|_| Reply::Stream(LEN));
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[http]
write_timeout = "1s"
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{}" }}]
read_timeout = "1s"
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
[[route]]
path = "/ping"
handler = "respond"
"#,
            up.addr
        ),
        &[],
    );
    let pid = pier.pid();
    // The worker is running (its runtime holds a socket of its own) once it
    // has answered.
    assert_eq!(
        get(pier.addr(), "GET /ping HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let base_fds = fd_count(pid);
    let base_rss = common::rss_kib(pid);
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(16 * 1024).unwrap();
    sock.connect(&pier.addr().into()).unwrap();
    let mut s: TcpStream = sock.into();
    s.write_all(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let during_rss = common::rss_kib(pid);
    eprintln!("never-read proxied: RSS {base_rss} KiB -> {during_rss} KiB");
    assert!(
        during_rss <= base_rss + 8 * 1024,
        "RSS grew from {base_rss} KiB to {during_rss} KiB"
    );
    // Both sides of the stalled exchange are closed after the write timeout.
    let fds = wait_fds_at_most(pid, base_fds, Duration::from_secs(15));
    assert!(fds <= base_fds, "{fds} sockets open, {base_fds} before");
    let got = read_until_closed(&mut s, Duration::from_secs(2));
    assert_eq!(status_of(&got), Some(200));
    assert!((got.len() as u64) < LEN, "the whole stream arrived");
}

#[test]
fn header_floods_get_431_or_414_and_a_closed_connection() {
    let pier = Pier::with_config(&config(""), &[]);
    let many = format!(
        "GET /fixed HTTP/1.1\r\nHost: t\r\n{}\r\n",
        "X-Flood: 1\r\n".repeat(1000)
    );
    assert_refused_and_closed(&pier, many.as_bytes(), 431);
    let huge_line = format!(
        "GET /fixed HTTP/1.1\r\nHost: t\r\nX-Huge: {}\r\n\r\n",
        "h".repeat(100 * 1024)
    );
    assert_refused_and_closed(&pier, huge_line.as_bytes(), 431);
    let huge_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "u".repeat(20 * 1024));
    assert_refused_and_closed(&pier, huge_uri.as_bytes(), 414);
    // A request line that never ends is judged on its length, not its CRLF.
    let endless_uri = format!("GET /{}", "u".repeat(20 * 1024));
    assert_refused_and_closed(&pier, endless_uri.as_bytes(), 414);
    let good = get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(
        (good.status, good.body.as_slice()),
        (200, &b"Hello, World!"[..])
    );
}

#[test]
fn endless_header_bytes_are_refused_without_growing_memory() {
    let pier = Pier::with_config(&config(""), &[]);
    let pid = pier.pid();
    assert_eq!(
        get(pier.addr(), "GET /fixed HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    let base_rss = common::rss_kib(pid);
    // 32 clients each try to send 8 MiB of one header field, and then of many
    // valid field lines; the server stops at max_head_bytes each time.
    let floods: Vec<_> = (0..32)
        .map(|i| {
            let addr = pier.addr();
            std::thread::spawn(move || {
                let mut s = connect(addr);
                let mut reader = s.try_clone().unwrap();
                let answer = std::thread::spawn(move || {
                    read_until_closed(&mut reader, Duration::from_secs(10))
                });
                let _ = s.write_all(b"GET /fixed HTTP/1.1\r\nHost: t\r\n");
                let piece: Vec<u8> = if i % 2 == 0 {
                    let mut p = b"X-Endless: ".to_vec();
                    p.resize(64 * 1024, b'e');
                    p
                } else {
                    b"X-A: b\r\n".repeat(8 * 1024)
                };
                let mut sent = 0;
                while sent < 8 * 1024 * 1024 {
                    if s.write_all(&piece).is_err() {
                        break;
                    }
                    sent += piece.len();
                }
                (sent, answer.join().unwrap())
            })
        })
        .collect();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (peak, watching) = (peak.clone(), watching.clone());
        std::thread::spawn(move || {
            while watching.load(Ordering::Relaxed) {
                peak.fetch_max(common::rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    for f in floods {
        let (sent, got) = f.join().unwrap();
        assert_eq!(
            status_of(&got),
            Some(431),
            "after {sent} bytes: {}",
            String::from_utf8_lossy(&got[..got.len().min(200)])
        );
        assert!(sent < 8 * 1024 * 1024, "all 8 MiB were taken");
    }
    watching.store(false, Ordering::Relaxed);
    watcher.join().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    eprintln!("header flood: RSS {base_rss} KiB, peak {peak} KiB");
    // Each connection may hold one head's worth (64 KiB) plus read slack.
    assert!(
        peak <= base_rss + 16 * 1024,
        "RSS peaked at {peak} KiB from {base_rss} KiB"
    );
}

#[test]
fn chunk_size_overflowing_u64_is_400_and_closes() {
    let pier = Pier::with_config(&config(""), &[]);
    for size in [
        "10000000000000000",
        "fffffffffffffffff0",
        "1ffffffffffffffffffffffff",
    ] {
        let raw = format!(
            "POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n"
        );
        assert_refused_and_closed(&pier, raw.as_bytes(), 400);
    }
}

#[test]
fn chunk_size_beyond_max_body_is_413_at_its_size_line() {
    // A long body timeout: the answer must not wait for data that never comes.
    let pier = Pier::with_config(
        &config("body_read_timeout = \"20s\"\nmax_body_bytes = 1048576"),
        &[],
    );
    for size in ["ffffffffffffffff", "100001", "7fffffff"] {
        let started = Instant::now();
        let raw = format!(
            "POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n"
        );
        assert_refused_and_closed(&pier, raw.as_bytes(), 413);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "413 for chunk size {size} took {:?}",
            started.elapsed()
        );
    }
    // Exactly the limit in one chunk is accepted.
    let mut r = Reader::new(connect(pier.addr()));
    let mut raw =
        b"POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n".to_vec();
    raw.extend(std::iter::repeat_n(b'd', 1 << 20));
    raw.extend_from_slice(b"\r\n0\r\n\r\n");
    r.send(&raw);
    assert_eq!(r.response(false).unwrap().status, 200);
}

#[test]
fn chunk_extension_flood_is_refused_with_400() {
    let pier = Pier::with_config(&config(""), &[]);
    // One over-long size line.
    let raw = format!(
        "POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1;x={}\r\nz\r\n0\r\n\r\n",
        "e".repeat(8192)
    );
    assert_refused_and_closed(&pier, raw.as_bytes(), 400);
    // Lines within bounds, but one data byte per kilobyte of extensions, without end.
    let mut s = connect(pier.addr());
    let mut reader = s.try_clone().unwrap();
    let answer =
        std::thread::spawn(move || read_until_closed(&mut reader, Duration::from_secs(10)));
    s.write_all(b"POST /fixed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    let chunk = format!("1;ext=\"{}\"\r\nz\r\n", "e".repeat(1000)).repeat(64);
    let mut sent = 0;
    while sent < 16 * 1024 * 1024 {
        if s.write_all(chunk.as_bytes()).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let got = answer.join().unwrap();
    assert_eq!(
        status_of(&got),
        Some(400),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(sent < 16 * 1024 * 1024, "the whole flood was read");
}

#[test]
fn pipelining_flood_stops_reading_while_output_is_full_and_answers_every_request_in_order() {
    const REQUESTS: usize = 100_000;
    const FILES: usize = 7;
    let pier = Pier::with_config(&config("write_timeout = \"20s\""), &[]);
    let pid = pier.pid();
    let bodies: Vec<Vec<u8>> = (0..FILES)
        .map(|i| {
            let body: Vec<u8> = (0..1000 + 37 * i)
                .map(|j| b'a' + ((i + j) % 26) as u8)
                .collect();
            std::fs::write(pier.root().join(format!("f{i}")), &body).unwrap();
            body
        })
        .collect();
    for (i, body) in bodies.iter().enumerate() {
        let resp = get(
            pier.addr(),
            &format!("GET /f{i} HTTP/1.1\r\nHost: t\r\n\r\n"),
        );
        assert_eq!(&resp.body, body);
    }
    std::thread::sleep(Duration::from_millis(200));
    let base_rss = common::rss_kib(pid);

    let s = TcpStream::connect(pier.addr()).unwrap();
    let (client, server) = (s.local_addr().unwrap(), pier.addr());
    let mut writer = s.try_clone().unwrap();
    let written = std::thread::spawn(move || {
        let mut batch = Vec::new();
        let mut sent = 0;
        for i in 0..REQUESTS {
            batch.extend_from_slice(
                format!("GET /f{} HTTP/1.1\r\nHost: t\r\n\r\n", i % FILES).as_bytes(),
            );
            if batch.len() >= 64 * 1024 || i + 1 == REQUESTS {
                writer.write_all(&batch).expect("requests written");
                sent += batch.len();
                batch.clear();
            }
        }
        sent
    });

    // Not reading for 2 s: the server's output to us fills the socket buffers,
    // and then it must stop taking requests rather than queue their responses.
    std::thread::sleep(Duration::from_secs(2));
    let stalled_rss = common::rss_kib(pid);
    let unread_by_server = recv_queue(server, client);
    std::thread::sleep(Duration::from_millis(300));
    let unread_later = recv_queue(server, client);
    eprintln!(
        "pipelining flood: RSS {base_rss} KiB -> {stalled_rss} KiB; requests the server \
         left unread: {unread_by_server:?} then {unread_later:?}"
    );
    assert!(
        unread_by_server.is_some_and(|n| n > 0) && unread_later >= unread_by_server,
        "the server kept reading requests: {unread_by_server:?} then {unread_later:?}"
    );
    // Buffering every response would take over 100 MiB.
    assert!(
        stalled_rss <= base_rss + 8 * 1024,
        "RSS grew from {base_rss} KiB to {stalled_rss} KiB"
    );

    // Now read: every request is answered, in order, and nothing more.
    let mut s = s;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut start = 0;
    let mut chunk = vec![0u8; 256 * 1024];
    for i in 0..REQUESTS {
        let want = &bodies[i % FILES];
        let (head_end, body_len) = loop {
            if let Some(at) = common::find(&buf[start..], b"\r\n\r\n") {
                let head = std::str::from_utf8(&buf[start..start + at]).unwrap();
                assert!(head.starts_with("HTTP/1.1 200 "), "response {i}: {head}");
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .and_then(|v| v.parse::<usize>().ok())
                    .expect("content-length");
                break (start + at + 4, len);
            }
            let n = s.read(&mut chunk).expect("responses keep coming");
            assert!(n > 0, "closed after {i} responses");
            buf.extend_from_slice(&chunk[..n]);
        };
        while buf.len() < head_end + body_len {
            let n = s.read(&mut chunk).expect("responses keep coming");
            assert!(n > 0, "closed inside response {i}");
            buf.extend_from_slice(&chunk[..n]);
        }
        assert!(
            &buf[head_end..head_end + body_len] == want.as_slice(),
            "response {i} is not /f{}",
            i % FILES
        );
        start = head_end + body_len;
        if start > 512 * 1024 {
            buf.drain(..start);
            start = 0;
        }
    }
    assert_eq!(start, buf.len(), "bytes beyond the last response");
    written.join().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        matches!(s.read(&mut chunk), Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut),
        "nothing after the last response, and the connection stays open"
    );
}
