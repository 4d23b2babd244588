//! Rate limits shared by a fleet through a real `redis-server`: two Pier
//! instances counting in one store allow the configured rate in total; a
//! store that dies, answers slowly or was never there is answered by
//! `on_store_error` without failing a request; and the store comes back by
//! itself. Without `redis-server` on this machine the tests say so and pass
//! (`.ci/run` installs it).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_config_error, connect, get, which, Pier, Reader};

/// A `redis-server` on a loopback port of its own, killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start_on(port: u16) -> Option<Redis> {
        let bin = which("redis-server")?;
        let child = Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            thread::sleep(Duration::from_millis(20));
        }
        Some(redis)
    }

    fn start() -> Option<Redis> {
        let port = common::free_port();
        let redis = Redis::start_on(port);
        if redis.is_none() {
            eprintln!("redis-server not found; skipping (CI installs it)");
        }
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(limit: &str) -> String {
    format!(
        r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
[admin]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "respond"
body = "ok"
rate_limit = {limit}
"#
    )
}

/// Statuses of requests sent one after another on keep-alive connections to
/// each of `addrs` in turn, from `threads` threads, for `run`. A request
/// without an answer counts as status 0.
fn drive(addrs: &[SocketAddr], threads: usize, run: Duration) -> Vec<(u16, Duration)> {
    let stop = Instant::now() + run;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let addrs = addrs.to_vec();
            thread::spawn(move || {
                let mut readers: Vec<Reader> =
                    addrs.iter().map(|&a| Reader::new(connect(a))).collect();
                let mut seen = Vec::new();
                let mut i = t;
                while Instant::now() < stop {
                    let n = i % readers.len();
                    i += 1;
                    let at = Instant::now();
                    readers[n].send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Client: one\r\n\r\n");
                    match readers[n].response(false) {
                        Some(r) => seen.push((r.status, at.elapsed())),
                        None => {
                            seen.push((0, at.elapsed()));
                            readers[n] = Reader::new(connect(addrs[n]));
                        }
                    }
                }
                seen
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

fn metric(pier: &Pier, name: &str) -> f64 {
    let r = get(
        pier.admin.expect("admin listener"),
        "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    String::from_utf8_lossy(&r.body)
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn two_instances_sharing_a_store_allow_the_rate_in_total() {
    let Some(redis) = Redis::start() else { return };
    let limit = format!(
        r#"{{ rate = "40/s", burst = 10, key = "header:X-Client", store = "{}", store_timeout = "2s" }}"#,
        redis.url()
    );
    let a = Pier::with_config(&config(&limit), &[]);
    let b = Pier::with_config(&config(&limit), &[]);
    // A store timeout far above the store's answer time even on a loaded
    // machine: every decision here is the store's (a fallback would count
    // locally and let more through).
    let run = Duration::from_secs(5);
    let seen = drive(&[a.addr(), b.addr()], 4, run);
    let fallbacks = metric(&a, "pier_rate_limit_store_fallbacks_total")
        + metric(&b, "pier_rate_limit_store_fallbacks_total");
    assert_eq!(fallbacks, 0.0, "decisions fell back to the local limit");
    let passed = seen.iter().filter(|(s, _)| *s == 200).count();
    let refused = seen.iter().filter(|(s, _)| *s == 429).count();
    assert_eq!(passed + refused, seen.len(), "only 200 and 429 answers");
    // 40/s for 5 s plus a burst of 10: 210 in all, not twice that.
    let expected = 40.0 * run.as_secs_f64() + 10.0;
    assert!(
        (passed as f64 - expected).abs() <= expected * 0.1,
        "{passed} requests passed over both instances, expected about {expected}"
    );
    assert!(refused > passed, "the clients asked for more than the rate");
    let decided = metric(&a, "pier_rate_limit_store_decisions_total")
        + metric(&b, "pier_rate_limit_store_decisions_total");
    assert!(
        decided as usize >= seen.len() * 9 / 10,
        "{decided} decisions by the store"
    );
}

#[test]
fn a_store_killed_under_load_fails_no_request_and_is_used_again_when_back() {
    let Some(redis) = Redis::start() else { return };
    let port = redis.port;
    let limit = format!(
        r#"{{ rate = "1000/s", burst = 100, key = "header:X-Client", store = "{}", on_store_error = "local" }}"#,
        redis.url()
    );
    let pier = Pier::with_config(&config(&limit), &[]);
    let addr = pier.addr();
    let load = thread::spawn(move || drive(&[addr], 2, Duration::from_secs(4)));
    thread::sleep(Duration::from_secs(1));
    drop(redis);
    thread::sleep(Duration::from_secs(1));
    let seen = load.join().unwrap();
    let failed: Vec<_> = seen
        .iter()
        .filter(|(s, _)| *s != 200 && *s != 429)
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed while the store died: {failed:?}"
    );
    assert!(pier
        .wait_log("rate-limit store unreachable", Duration::from_secs(5))
        .is_some());
    assert_eq!(metric(&pier, "pier_rate_limit_store_up"), 0.0);
    let status = get(
        pier.admin.unwrap(),
        "GET /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let page = String::from_utf8_lossy(&status.body);
    assert!(
        page.contains(&format!("rate-limit store redis://127.0.0.1:{port}/0 down")),
        "{page}"
    );
    assert!(metric(&pier, "pier_rate_limit_store_fallbacks_total") > 0.0);

    // Back on the same port: connections are made again by themselves.
    let _redis = Redis::start_on(port).expect("redis-server restarts");
    let before = metric(&pier, "pier_rate_limit_store_decisions_total");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get(
            addr,
            "GET / HTTP/1.1\r\nHost: t\r\nX-Client: one\r\nConnection: close\r\n\r\n",
        );
        assert!(r.status == 200 || r.status == 429);
        if metric(&pier, "pier_rate_limit_store_decisions_total") > before {
            break;
        }
        assert!(Instant::now() < deadline, "the store was not used again");
        thread::sleep(Duration::from_millis(50));
    }
    assert!(pier
        .wait_log("rate-limit store reachable again", Duration::from_secs(5))
        .is_some());
    assert_eq!(metric(&pier, "pier_rate_limit_store_up"), 1.0);
}

/// A TCP relay to `to` that holds every chunk from the server for `delay`
/// before passing it on: a store that answers slowly.
fn slow_relay(to: SocketAddr, delay: Duration, stop: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((client, _)) = listener.accept() else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            client.set_nonblocking(false).unwrap();
            let server = TcpStream::connect(to).unwrap();
            let (mut c_read, mut s_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = c_read.read(&mut buf) {
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let (mut s_read, mut c_write) = (server, client);
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s_read.read(&mut buf) {
                    thread::sleep(delay);
                    if c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_slow_store_costs_a_request_no_more_than_store_timeout() {
    let Some(redis) = Redis::start() else { return };
    let stop = Arc::new(AtomicBool::new(false));
    let relay = slow_relay(
        SocketAddr::from(([127, 0, 0, 1], redis.port)),
        Duration::from_secs(3),
        Arc::clone(&stop),
    );
    let limit = format!(
        r#"{{ rate = "1000/s", burst = 100, store = "redis://{relay}/0", store_timeout = "50ms" }}"#
    );
    let pier = Pier::with_config(&config(&limit), &[]);
    let seen = drive(&[pier.addr()], 2, Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    assert!(
        seen.iter().all(|(s, _)| *s == 200),
        "answered by the local table"
    );
    // Each waited for the store at most its timeout: far less than the
    // store's 3 s (a generous bound for a loaded machine).
    let slowest = seen.iter().map(|(_, t)| *t).max().unwrap();
    assert!(
        slowest < Duration::from_secs(1),
        "a request took {slowest:?}"
    );
    assert!(metric(&pier, "pier_rate_limit_store_fallbacks_total") > 0.0);
}

#[test]
fn a_store_never_reached_answers_by_on_store_error() {
    let missing = common::refused_addr();
    let cases = [("allow", 200), ("deny", 503)];
    for (on_error, status) in cases {
        let limit = format!(
            r#"{{ rate = "1/m", burst = 1, store = "redis://{missing}/0", on_store_error = "{on_error}" }}"#
        );
        let pier = Pier::with_config(&config(&limit), &[]);
        for _ in 0..3 {
            let r = get(
                pier.addr(),
                "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            );
            assert_eq!(r.status, status, "on_store_error = {on_error}");
            if status == 503 {
                assert_eq!(r.header("retry-after"), Some("1"));
            }
        }
    }
    // "local": this instance's own table, burst 1 then 429.
    let limit = format!(r#"{{ rate = "1/m", burst = 1, store = "redis://{missing}/0" }}"#);
    let pier = Pier::with_config(&config(&limit), &[]);
    let statuses: Vec<u16> = (0..3)
        .map(|_| {
            get(
                pier.addr(),
                "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            )
            .status
        })
        .collect();
    assert_eq!(statuses, [200, 429, 429]);
    assert!(pier
        .wait_log("rate-limit store unreachable", Duration::from_secs(5))
        .is_some());
}

#[test]
fn store_settings_are_checked_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pier.toml");
    let cases = [
        (
            r#"{ rate = "1/s", store_timeout = "5ms" }"#,
            "route[1].rate_limit.store_timeout",
        ),
        (
            r#"{ rate = "1/s", store = "http://127.0.0.1/" }"#,
            "route[1].rate_limit.store",
        ),
        (
            r#"{ rate = "1/s", store = "redis://127.0.0.1/0", on_store_error = "fail" }"#,
            "route[1].rate_limit.on_store_error",
        ),
        (
            r#"{ rate = "1/s", store = "redis://127.0.0.1/0", store_timeout = "1m" }"#,
            "route[1].rate_limit.store_timeout",
        ),
    ];
    for (limit, key) in cases {
        std::fs::write(&path, config(limit)).unwrap();
        assert_config_error(&path, 12, key);
    }
}
