//! Zero-downtime operation: SIGHUP reloads the configuration in place, SIGUSR2 (or
//! `pier upgrade`) replaces the process with the listening sockets handed over.
//! Client loops run through each on new and keep-alive connections and must see
//! no failed request.
//!
//! The clients behave like browsers and proxies do: a request written on a
//! *reused* keep-alive connection that the server closes before any byte of a
//! response arrives is sent again on a new connection (counted as a retry, not a
//! failure). Draining closes idle keep-alive connections, and such a close can
//! cross a request already on the wire; no request that got a response byte may
//! fail, and no new connection may be refused or reset.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::successor::Successor;
use common::{get, Pier};
use rustix::process::{kill_process, Pid, Signal};

fn config(body: &str, extra: &str) -> String {
    format!(
        r#"
[server]
workers = 2
drain_timeout = "5s"
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "respond"
body = "{body}"
{extra}
"#
    )
}

fn config_path(pier: &Pier) -> PathBuf {
    pier.root().join("pier.toml")
}

fn body_of(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = get(addr, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
    (r.status, String::from_utf8(r.body).unwrap())
}

/// What went wrong with one request.
#[derive(Debug)]
enum Failure {
    /// Nothing of a response arrived; safe to send again if the connection was reused.
    BeforeResponse(String),
    /// Part of a response arrived, or it was not a 200.
    Broken(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::BeforeResponse(why) => write!(f, "before any response byte: {why}"),
            Failure::Broken(why) => write!(f, "{why}"),
        }
    }
}

/// One response: body, and whether the server closes after it.
struct Answer {
    body: String,
    close: bool,
}

fn exchange(stream: &mut TcpStream, path: &str) -> Result<Answer, Failure> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    stream
        .write_all(req.as_bytes())
        .map_err(|e| Failure::BeforeResponse(format!("write: {e}")))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = common::find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Err(Failure::BeforeResponse("closed".into())),
            Err(e) if buf.is_empty() => return Err(Failure::BeforeResponse(format!("read: {e}"))),
            Ok(0) => return Err(Failure::Broken("closed inside a head".into())),
            Err(e) => return Err(Failure::Broken(format!("read inside a head: {e}"))),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 200 ") {
        return Err(Failure::Broken(format!(
            "status line {:?}",
            head.lines().next()
        )));
    }
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| Failure::Broken("no content-length".into()))?;
    while buf.len() < head_end + len {
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Failure::Broken("closed inside a body".into())),
            Err(e) => return Err(Failure::Broken(format!("read inside a body: {e}"))),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(Answer {
        body: String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned(),
        close: head.contains("\r\nconnection: close\r\n"),
    })
}

fn connect(addr: SocketAddr) -> Result<TcpStream, Failure> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| Failure::Broken(format!("connect: {e}")))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    Ok(s)
}

/// Tallies of a client run.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    retried: AtomicU64,
    failures: Mutex<Vec<String>>,
    bodies: Mutex<std::collections::BTreeSet<String>>,
}

/// Client threads looping until stopped (and at most 30 s): half open a new
/// connection per request, half keep one connection for many requests.
struct Load {
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let threads = (0..threads)
            .map(|i| {
                let (stop, tally) = (stop.clone(), tally.clone());
                std::thread::spawn(move || client(addr, i % 2 == 1, &stop, &tally))
            })
            .collect();
        Load {
            stop,
            tally,
            threads,
        }
    }

    /// Stops the clients and returns the tallies.
    fn finish(self) -> Arc<Tally> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        self.tally
    }
}

fn client(addr: SocketAddr, keep_alive: bool, stop: &AtomicBool, tally: &Tally) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut held: Option<TcpStream> = None;
    let record = |r: Result<Answer, Failure>| -> Option<Answer> {
        match r {
            Ok(a) => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                tally.bodies.lock().unwrap().insert(a.body.clone());
                Some(a)
            }
            Err(f) => {
                tally.failures.lock().unwrap().push(f.to_string());
                None
            }
        }
    };
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        if !keep_alive {
            let r = connect(addr).and_then(|mut s| exchange(&mut s, "/"));
            record(r);
            continue;
        }
        let result = match held.take() {
            Some(mut s) => match exchange(&mut s, "/") {
                Err(Failure::BeforeResponse(_)) => {
                    // A reused connection closed under the request: send it again.
                    tally.retried.fetch_add(1, Ordering::Relaxed);
                    connect(addr).and_then(|mut s| exchange(&mut s, "/").map(|a| (a, s)))
                }
                other => other.map(|a| (a, s)),
            },
            None => connect(addr).and_then(|mut s| exchange(&mut s, "/").map(|a| (a, s))),
        };
        match result {
            Ok((answer, s)) => {
                if !answer.close {
                    held = Some(s);
                }
                record(Ok(answer));
            }
            Err(f) => {
                record(Err(f));
            }
        }
    }
}

/// Checks a finished run: requests were made and none failed.
fn assert_no_failures(tally: &Tally) {
    let failures = tally.failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed request(s) (of {} ok, {} retried on a reused connection): {:?}",
        failures.len(),
        tally.ok.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
        &failures[..failures.len().min(5)]
    );
    assert!(tally.ok.load(Ordering::Relaxed) > 20, "the clients ran");
}

/// A short keep-alive timeout: a replaced configuration drains after it.
const SHORT_KEEPALIVE: &str = "[http]\nkeepalive_timeout = \"1s\"\n";

#[test]
fn sighup_under_load_fails_no_request_and_applies_to_new_connections_only() {
    let pier = Pier::with_config(&config("old", SHORT_KEEPALIVE), &[]);
    let addr = pier.addr();
    assert_eq!(body_of(addr, "/"), (200, "old".into()));
    assert_eq!(
        body_of(addr, "/added").1,
        "old",
        "one route serves every path"
    );

    // A request that began before the reload: its head is not complete yet.
    let mut held = connect(addr).unwrap();
    held.write_all(b"GET /added HTTP/1.1\r\nHost: t\r\n")
        .unwrap();
    // A keep-alive connection that served a request before the reload.
    let mut kept = connect(addr).unwrap();
    assert_eq!(exchange(&mut kept, "/").unwrap().body, "old");

    let load = Load::start(addr, 4);
    std::thread::sleep(Duration::from_millis(300));
    let added = "[[route]]\npath = \"/added\"\nhandler = \"respond\"\nbody = \"added\"\n";
    std::fs::write(
        config_path(&pier),
        config("new", &format!("{added}{SHORT_KEEPALIVE}")),
    )
    .unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    let reloaded = Instant::now();

    // New connections: the new body and the new route.
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
    assert_eq!(body_of(addr, "/added"), (200, "added".into()));
    // Connections open before the reload finish on the old configuration: the
    // request begun before it, and the next one on a kept connection.
    held.write_all(b"\r\n").unwrap();
    assert_eq!(exchange_rest(&mut held).body, "old");
    let again = exchange(&mut kept, "/").expect("kept connection still serves");
    assert_eq!(
        again.body, "old",
        "an open connection keeps the old configuration"
    );

    // One keepalive_timeout later the old configuration drains (under load too):
    // its idle connections close.
    let mut b = [0u8; 1];
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(
        matches!(kept.read(&mut b), Ok(0) | Err(_)),
        "idle old connection closed"
    );
    assert!(
        reloaded.elapsed() >= Duration::from_millis(900),
        "not before the keep-alive timeout"
    );
    std::thread::sleep(Duration::from_millis(300));
    let tally = load.finish();
    assert_no_failures(&tally);
    let bodies = tally.bodies.lock().unwrap().clone();
    assert!(
        bodies.contains("old") && bodies.contains("new"),
        "the clients saw both configurations: {bodies:?}"
    );
}

/// Reads the response to a request written before.
fn exchange_rest(stream: &mut TcpStream) -> Answer {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(b"old") && !buf.ends_with(b"new") && !buf.ends_with(b"added") {
        let n = stream.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    Answer {
        body: body.to_string(),
        close: head.contains("\r\nconnection: close"),
    }
}

#[test]
fn an_invalid_config_on_sighup_keeps_the_running_one() {
    let pier = Pier::with_config(&config("old", ""), &[]);
    let addr = pier.addr();
    let text = config(
        "new",
        "[[route]]\npath = \"/x\"\nhandler = \"respond\"\nstatus = 999\n",
    );
    std::fs::write(config_path(&pier), &text).unwrap();
    let load = Load::start(addr, 2);
    std::thread::sleep(Duration::from_millis(200));
    pier.signal(Signal::HUP);
    let line = pier
        .wait_log("configuration reload failed", Duration::from_secs(10))
        .expect("failure logged");
    std::thread::sleep(Duration::from_millis(200));
    let tally = load.finish();
    assert_no_failures(&tally);
    let status_line = text.lines().position(|l| l.starts_with("status")).unwrap() + 1;
    assert!(
        line.contains(&format!("pier.toml:{status_line}: route[2].status")),
        "names file, line and key: {line}"
    );
    assert_eq!(body_of(addr, "/"), (200, "old".into()));
    assert_eq!(body_of(addr, "/x"), (200, "old".into()));
    assert_eq!(
        *tally.bodies.lock().unwrap(),
        ["old".to_string()].into(),
        "nothing changed"
    );

    // Fixed, it applies.
    std::fs::write(config_path(&pier), config("new", "")).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
}

#[test]
fn sighup_adds_and_removes_listeners_and_keeps_the_worker_count() {
    let extra = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let pier = Pier::with_config(&config("old", ""), &[]);
    let addr = pier.addr();
    let with_extra = config("new", "")
        .replace("workers = 2", "workers = 3")
        .replace(
            "[[route]]",
            &format!("[[listener]]\nlisten = \"{extra}\"\n[[route]]"),
        );
    std::fs::write(config_path(&pier), with_extra).unwrap();
    pier.signal(Signal::HUP);
    let warned = pier
        .wait_log(
            "worker count needs a binary upgrade",
            Duration::from_secs(10),
        )
        .expect("worker change refused with a warning");
    assert!(warned.contains("running=2"), "{warned}");
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
    assert_eq!(
        body_of(extra, "/"),
        (200, "new".into()),
        "added listener serves"
    );

    // Removing it closes it: connections are refused again.
    std::fs::write(config_path(&pier), config("third", "")).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(addr, "/"), (200, "third".into()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(extra).is_ok() {
        assert!(Instant::now() < deadline, "removed listener still accepts");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn upgrade_config(body: &str) -> String {
    config(body, "[admin]\nlisten = \"127.0.0.1:0\"\n")
}

/// Starts a Pier with `--pid-file` and waits until the file names it.
fn with_pid_file(body: &str) -> (Pier, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let pier = Pier::with_config(
        &upgrade_config(body),
        &["--pid-file", pid_file.to_str().unwrap()],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&pid_file)
        .ok()
        .map(|t| t.trim().to_string())
        != Some(pier.pid().to_string())
    {
        assert!(Instant::now() < deadline, "PID file not written");
        std::thread::sleep(Duration::from_millis(20));
    }
    (pier, dir, pid_file)
}

fn admin_status(addr: SocketAddr) -> u16 {
    get(addr, "GET /status HTTP/1.1\r\nHost: t\r\n\r\n").status
}

#[test]
fn sigusr2_upgrade_under_load_fails_no_request_and_the_old_process_exits() {
    let (mut pier, _dir, pid_file) = with_pid_file("old");
    let addr = pier.addr();
    let admin = pier.admin.expect("admin listener");
    let old = pier.pid();
    let load = Load::start(addr, 4);
    std::thread::sleep(Duration::from_millis(300));
    // The new process reads the file afresh, so its answers tell it apart.
    std::fs::write(config_path(&pier), upgrade_config("new")).unwrap();
    pier.signal(Signal::USR2);
    let successor = Successor::from_pid_file(&pid_file, old);
    pier.wait_log("the new process serves", Duration::from_secs(35))
        .expect("hand-over logged");
    assert_eq!(
        pier.wait_exit(Duration::from_secs(15)),
        Some(0),
        "the old process drains and exits by itself"
    );
    std::thread::sleep(Duration::from_millis(300));
    let tally = load.finish();
    assert_no_failures(&tally);
    let bodies = tally.bodies.lock().unwrap().clone();
    assert!(
        bodies.contains("old") && bodies.contains("new"),
        "both processes answered: {bodies:?}"
    );
    assert!(successor.alive(), "the new process serves");
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
    assert_eq!(
        admin_status(admin),
        200,
        "the admin socket was handed over too"
    );
}

fn pier_upgrade(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
        .arg("upgrade")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn pier_upgrade_replaces_the_process_twice_under_load() {
    let (mut pier, _dir, pid_file) = with_pid_file("old");
    let addr = pier.addr();
    let old = pier.pid();
    let load = Load::start(addr, 4);
    std::thread::sleep(Duration::from_millis(200));

    std::fs::write(config_path(&pier), upgrade_config("second")).unwrap();
    let out = pier_upgrade(&["--pid-file", pid_file.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let second = Successor::from_pid_file(&pid_file, old);
    assert!(
        said.contains(&format!("PID {} serves now", second.0)),
        "{said}"
    );
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    std::thread::sleep(Duration::from_millis(200));

    // The new process hands the sockets it inherited on again.
    std::fs::write(config_path(&pier), upgrade_config("third")).unwrap();
    let out = pier_upgrade(&["--pid", &second.0.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let third = Successor::from_pid_file(&pid_file, second.0 as u32);
    let deadline = Instant::now() + Duration::from_secs(15);
    while second.alive() {
        assert!(Instant::now() < deadline, "the second process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let tally = load.finish();
    assert_no_failures(&tally);
    let bodies = tally.bodies.lock().unwrap().clone();
    assert!(
        ["old", "second", "third"]
            .iter()
            .all(|b| bodies.contains(*b)),
        "every process answered: {bodies:?}"
    );
    assert!(third.alive());
    assert_eq!(body_of(addr, "/"), (200, "third".into()));
}

#[test]
fn an_upgrade_whose_new_process_cannot_start_leaves_the_old_one_serving() {
    let (mut pier, _dir, pid_file) = with_pid_file("old");
    let addr = pier.addr();
    let load = Load::start(addr, 2);
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(
        config_path(&pier),
        upgrade_config("new").replace("workers = 2", "workers = \"two\""),
    )
    .unwrap();
    pier.signal(Signal::USR2);
    let line = pier
        .wait_log(
            "binary upgrade failed; still serving",
            Duration::from_secs(35),
        )
        .expect("failure logged");
    assert!(line.contains("exited with exit status: 2"), "{line}");
    // `pier upgrade` reports the failure too.
    let out = pier_upgrade(&["--pid-file", pid_file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("upgrade failed"));
    let tally = load.finish();
    assert_no_failures(&tally);
    assert_eq!(*tally.bodies.lock().unwrap(), ["old".to_string()].into());
    assert_eq!(body_of(addr, "/"), (200, "old".into()));
    assert!(
        pier.child.try_wait().unwrap().is_none(),
        "the old process runs on"
    );
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pier.pid().to_string()
    );
    // And a later upgrade, with the file fixed, goes through.
    std::fs::write(config_path(&pier), upgrade_config("new")).unwrap();
    pier.signal(Signal::USR2);
    let _next = Successor::from_pid_file(&pid_file, pier.pid());
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
}

#[test]
fn listeners_sharing_a_port_0_address_keep_their_own_settings_across_reload_and_upgrade() {
    use common::tls::{connect_tls, recording_client, tls_get};
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let text = |body: &str| {
        config(body, "").replace(
            "[[route]]",
            "[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = { self_signed = true }\n[[route]]",
        )
    };
    let mut pier = Pier::with_config(&text("old"), &["--pid-file", pid_file.to_str().unwrap()]);
    let (plain, tls) = (pier.addr(), pier.https[0]);
    let (client, _) = recording_client(true);
    let check = |want: &str| {
        assert_eq!(body_of(plain, "/"), (200, want.to_string()));
        let mut c = connect_tls(tls, "localhost", &client).unwrap();
        let r = tls_get(&mut c, "/").unwrap();
        assert_eq!((r.status, r.body), (200, want.as_bytes().to_vec()));
    };
    check("old");
    std::fs::write(config_path(&pier), text("new")).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    check("new");
    std::fs::write(config_path(&pier), text("upgraded")).unwrap();
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let _next = Successor::from_pid_file(&pid_file, old);
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    check("upgraded");
}

#[test]
fn sighup_moves_new_connections_to_new_upstreams_and_a_new_access_log() {
    use common::upstream::{ok, Upstream};
    let a = Upstream::start(|_| ok("from a"));
    let b = Upstream::start(|_| ok("from b"));
    let text = |up: SocketAddr, log: &str| {
        format!(
            r#"
[server]
workers = 2
[http]
keepalive_timeout = "200ms"
[access_log]
path = "{{dir}}/{log}"
flush_interval = "50ms"
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{up}" }}]
health_check = {{ path = "/health", interval = "100ms" }}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
"#
        )
    };
    let pier = Pier::with_config(&text(a.addr, "a.log"), &[]);
    let addr = pier.addr();
    assert_eq!(body_of(addr, "/first"), (200, "from a".into()));
    let dir = pier.root().to_str().unwrap().to_string();
    std::fs::write(
        config_path(&pier),
        text(b.addr, "b.log").replace("{dir}", &dir),
    )
    .unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(addr, "/second"), (200, "from b".into()));
    assert_eq!(body_of(addr, "/third"), (200, "from b".into()));
    let lines = |name: &str| std::fs::read_to_string(pier.root().join(name)).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(lines("a.log").contains("/first") && lines("b.log").contains("/third")) {
        assert!(
            Instant::now() < deadline,
            "a.log: {}\nb.log: {}",
            lines("a.log"),
            lines("b.log")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !lines("a.log").contains("/second"),
        "new requests log to the new file"
    );
    assert!(!lines("b.log").contains("/first"));
    // The replaced group's health checks stop once nothing uses it.
    std::thread::sleep(Duration::from_millis(500));
    let checks = |up: &Upstream| {
        up.requests()
            .iter()
            .filter(|r| r.target == "/health")
            .count()
    };
    let (a_then, b_then) = (checks(&a), checks(&b));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(checks(&a), a_then, "old group no longer checked");
    assert!(checks(&b) > b_then, "new group checked");
}

#[test]
fn a_listener_removed_after_an_upgrade_really_closes() {
    let extra = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let with_extra = |body: &str| {
        config(body, "").replace(
            "[[route]]",
            &format!("[[listener]]\nlisten = \"{extra}\"\n[[route]]"),
        )
    };
    let mut pier = Pier::with_config(
        &with_extra("old"),
        &["--pid-file", pid_file.to_str().unwrap()],
    );
    assert_eq!(body_of(extra, "/"), (200, "old".into()));
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let next = Successor::from_pid_file(&pid_file, old);
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    assert_eq!(body_of(extra, "/"), (200, "old".into()), "handed over");

    // The new process holds only the sockets it was sent: removing the
    // listener closes it, so clients are refused instead of left waiting.
    std::fs::write(config_path(&pier), config("new", "")).unwrap();
    kill_process(Pid::from_raw(next.0).unwrap(), Signal::HUP).unwrap();
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(pier.addr(), "/"), (200, "new".into()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(extra).is_ok() {
        assert!(Instant::now() < deadline, "removed listener still accepts");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tunnel_reload_reads_its_certificate_files_again() {
    use common::tls::{connect_tls, recording_client, seen_subject, Pki};
    let up = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "Reload CA");
    let (cert, key) = pki.server("live", "first", &["a.test"], None);
    let pier = Pier::with_args(&[
        "tunnel",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &up.local_addr().unwrap().to_string(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--workers",
        "1",
    ]);
    let (client, seen) = recording_client(true);
    connect_tls(pier.streams[0], "a.test", &client).unwrap();
    assert_eq!(seen_subject(&seen), "CN=first");
    let (next_cert, next_key) = pki.server("next", "second", &["a.test"], None);
    std::fs::copy(next_cert, &cert).unwrap();
    std::fs::copy(next_key, &key).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    connect_tls(pier.streams[0], "a.test", &client).unwrap();
    assert_eq!(seen_subject(&seen), "CN=second");
}

#[test]
fn a_connection_accepted_before_an_upgrade_gets_its_first_request_answered() {
    use common::tls::{recording_client, tls_get};
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let text = config("old", "").replace(
        "[[route]]",
        "[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = { self_signed = true }\n[[route]]",
    );
    let mut pier = Pier::with_config(&text, &["--pid-file", pid_file.to_str().unwrap()]);
    // Accepted by the old process, but nothing sent yet: no request is under
    // way, yet the client has not reused anything and must not see a close.
    let mut plain = connect(pier.addr()).unwrap();
    let tls_sock = connect(pier.https[0]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let _next = Successor::from_pid_file(&pid_file, old);
    pier.wait_log("the new process serves", Duration::from_secs(35))
        .expect("hand-over logged");
    std::thread::sleep(Duration::from_millis(200));

    let answer = exchange(&mut plain, "/").expect("first request on a fresh connection");
    assert_eq!(answer.body, "old");
    assert!(
        answer.close,
        "answered by the draining process, then closed"
    );

    let (client, _) = recording_client(true);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(client, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tls_sock);
    let r = tls_get(&mut tls, "/").expect("handshake and first request");
    assert_eq!((r.status, r.body), (200, b"old".to_vec()));
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
}

#[test]
fn an_upgrade_moves_the_admin_listener_to_a_new_address() {
    let (mut pier, _dir, pid_file) = with_pid_file("old");
    let old_admin = pier.admin.expect("admin listener");
    let new_admin = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    std::fs::write(
        config_path(&pier),
        config("new", &format!("[admin]\nlisten = \"{new_admin}\"\n")),
    )
    .unwrap();
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let next = Successor::from_pid_file(&pid_file, old);
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    assert!(next.alive());
    assert_eq!(admin_status(new_admin), 200, "the new address serves");
    // The old address was not carried over: nothing listens there any more.
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(old_admin).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the old admin address still accepts"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The backlogs of the sockets listening on `addr`, as `ss` shows them (its
/// Send-Q column for a listening socket), or `None` without `ss`.
fn backlogs(addr: SocketAddr) -> Option<Vec<u32>> {
    let out = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{}", addr.port())])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
            .collect(),
    )
}

#[test]
fn a_new_backlog_applies_on_upgrade_and_on_reload() {
    let with_backlog = |body: &str, n: u32| {
        config(body, "").replace(
            "listen = \"127.0.0.1:0\"\n",
            &format!("listen = \"127.0.0.1:0\"\nbacklog = {n}\n"),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let mut pier = Pier::with_config(
        &with_backlog("old", 100),
        &["--pid-file", pid_file.to_str().unwrap()],
    );
    let addr = pier.addr();
    let Some(before) = backlogs(addr) else {
        eprintln!("skipped: `ss` (iproute2) is not installed");
        return;
    };
    assert_eq!(before, vec![100, 100], "one socket per worker");
    std::fs::write(config_path(&pier), with_backlog("new", 300)).unwrap();
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let next = Successor::from_pid_file(&pid_file, old);
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    assert_eq!(body_of(addr, "/"), (200, "new".into()));
    assert_eq!(backlogs(addr).unwrap(), vec![300, 300]);

    // A reload sets it in place too.
    std::fs::write(config_path(&pier), with_backlog("newer", 200)).unwrap();
    kill_process(Pid::from_raw(next.0).unwrap(), Signal::HUP).unwrap();
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    assert_eq!(body_of(addr, "/"), (200, "newer".into()));
    assert_eq!(backlogs(addr).unwrap(), vec![200, 200]);
}

#[test]
fn a_reload_stops_the_replaced_generations_health_checks() {
    let checked =
        |body: &'static str| common::upstream::Upstream::start(move |_| common::upstream::ok(body));
    let (old, new) = (checked("old"), checked("new"));
    let text = |up: SocketAddr| {
        format!(
            "[server]\nworkers = 1\n[[listener]]\nlisten = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n\
             health_check = {{ path = \"/health\", interval = \"50ms\" }}\n\
             [[route]]\nhandler = \"proxy\"\nupstream = \"app\"\n"
        )
    };
    let pier = Pier::with_config(&text(old.addr), &[]);
    // A keep-alive connection on the first generation keeps its groups alive.
    let mut kept = TcpStream::connect(pier.addr()).unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    let n = kept.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("old"));
    let checks = |up: &common::upstream::Upstream| {
        up.requests()
            .iter()
            .filter(|r| r.target == "/health")
            .count()
    };
    std::fs::write(config_path(&pier), text(new.addr)).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    // The old generation's checks stop: their count settles (a check in
    // flight at the reload may still land) and then stays.
    let settle_by = std::time::Instant::now() + Duration::from_secs(10);
    let mut after_reload = checks(&old);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = checks(&old);
        if now == after_reload {
            break;
        }
        assert!(
            std::time::Instant::now() < settle_by,
            "the old generation still checks ({now} checks)"
        );
        after_reload = now;
    }
    assert!(after_reload > 0);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        checks(&old),
        after_reload,
        "the old generation still checks"
    );
    let new_by = std::time::Instant::now() + Duration::from_secs(10);
    while checks(&new) < 5 {
        assert!(
            std::time::Instant::now() < new_by,
            "the new generation checks"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(kept);
}

#[test]
fn the_generated_certificate_lives_90_days_and_survives_a_reload() {
    let text = "[server]\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
                [[listener]]\nlisten = \"127.0.0.1:0\"\ntls = { self_signed = true }\n\
                [[route]]\nhandler = \"respond\"\nbody = \"ok\"\n";
    let pier = Pier::with_config(text, &[]);
    let admin = pier.admin.expect("admin listener");
    let cert = || {
        let r = get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["certificates"][0].clone()
    };
    let before = cert();
    let expires = before["expires_in_s"].as_i64().expect("an expiry");
    assert!(
        (89 * 86400..=90 * 86400).contains(&expires),
        "expires in {expires} s"
    );
    std::fs::write(config_path(&pier), text.replace("\"ok\"", "\"new\"")).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    let deadline = Instant::now() + Duration::from_secs(5);
    while status_generation(admin) < 2 {
        assert!(Instant::now() < deadline, "the reload took effect");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(cert()["sha256"], before["sha256"], "the same certificate");
}

fn status_generation(admin: SocketAddr) -> u64 {
    let r = get(admin, "GET /status.json HTTP/1.1\r\nHost: admin\r\n\r\n");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["generation"].as_u64().unwrap_or(0)
}
