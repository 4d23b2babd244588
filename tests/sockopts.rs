//! Socket options end to end: what a listener's `[listener.socket]` and an upstream
//! group's `[upstream.socket]` ask for is what `ss` shows on the kernel's sockets,
//! on accepted connections, after a reload and after a binary upgrade, on `tcp`
//! stream listeners and on connections to upstream servers.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::successor::Successor;
use common::{get, Pier};
use rustix::process::Signal;

/// What `ss` shows for the TCP connections matching `filter` (socket memory,
/// timers), or `None` without `ss`.
fn ss(filter: &str) -> Option<String> {
    let out = std::process::Command::new("ss")
        .args(["-tnmoiH", "state", "established", filter])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Pier's end of the connection from `client`: its `tb` (SO_SNDBUF as the
/// kernel holds it) and whether a keepalive timer runs.
fn server_side(server: SocketAddr, client: &TcpStream) -> (u64, bool) {
    let local = client.local_addr().unwrap().port();
    let filter = format!("( sport = :{} and dport = :{local} )", server.port());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = ss(&filter).expect("ss runs");
        if let Some(tb) = skmem(&text, "tb").first() {
            return (*tb, text.contains("timer:(keepalive"));
        }
        assert!(
            Instant::now() < deadline,
            "no such connection in ss:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every value of one `skmem:(...)` field in `ss -m` output.
fn skmem(text: &str, field: &str) -> Vec<u64> {
    text.split("skmem:(")
        .skip(1)
        .filter_map(|rest| {
            rest.split([',', ')'])
                .find_map(|f| f.strip_prefix(field)?.parse().ok())
        })
        .collect()
}

fn config(body: &str, socket: &str) -> String {
    format!(
        r#"
[server]
workers = 2
drain_timeout = "2s"
[[listener]]
listen = "127.0.0.1:0"
[listener.socket]
{socket}
[[route]]
path = "/"
handler = "respond"
body = "{body}"
"#
    )
}

/// One request on a connection kept open, so its server end can be inspected.
fn open_answered(addr: SocketAddr, body: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).ends_with(body) {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    c
}

#[test]
fn listener_options_reach_accepted_connections_across_reload_and_upgrade() {
    if ss("( sport = :1 )").is_none() {
        eprintln!("skipped: `ss` (iproute2) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pier.pid");
    let mut pier = Pier::with_config(
        &config(
            "one",
            "send_buffer = \"16KiB\"\nkeepalive_idle = \"2m\"\nkeepalive_count = 3",
        ),
        &["--pid-file", pid_file.to_str().unwrap()],
    );
    let addr = pier.addr();
    let logged = pier
        .startup
        .iter()
        .find(|l| l.contains("socket options"))
        .cloned()
        .unwrap_or_default();
    assert!(
        logged.contains("send_buffer=32768") && logged.contains("idle 120s"),
        "the values the kernel set are logged at start: {logged:?}"
    );
    let first = open_answered(addr, "one");
    assert_eq!(
        server_side(addr, &first),
        (32 * 1024, true),
        "SO_SNDBUF (doubled by the kernel) and SO_KEEPALIVE on the accepted socket"
    );

    // A reload sets the new values on the kept sockets: new connections get them.
    let path = pier.root().join("pier.toml");
    std::fs::write(&path, config("two", "send_buffer = \"48KiB\"")).unwrap();
    pier.signal(Signal::HUP);
    pier.wait_log("configuration reloaded", Duration::from_secs(10))
        .expect("reload logged");
    let second = open_answered(addr, "two");
    assert_eq!(server_side(addr, &second), (96 * 1024, false));
    assert_eq!(
        server_side(addr, &first).0,
        32 * 1024,
        "an open connection keeps what it was accepted with"
    );
    drop((first, second));

    // A binary upgrade hands the sockets over; the new process sets its file's values.
    std::fs::write(
        &path,
        config("three", "send_buffer = \"24KiB\"\nkeepalive = true"),
    )
    .unwrap();
    let old = pier.pid();
    pier.signal(Signal::USR2);
    let next = Successor::from_pid_file(&pid_file, old);
    assert_eq!(pier.wait_exit(Duration::from_secs(15)), Some(0));
    let third = open_answered(addr, "three");
    assert_eq!(server_side(addr, &third), (48 * 1024, true));
    drop(next);
}

/// The largest SO_SNDBUF the kernel grants, from /proc.
fn wmem_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn buffers_above_the_system_maximum_are_a_warning_naming_the_sysctl() {
    let Some(max) = wmem_max().filter(|m| *m < 256 << 20) else {
        eprintln!("skipped: net.core.wmem_max is unknown or very large");
        return;
    };
    let text = config("big", &format!("send_buffer = {}", max * 2));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pier.toml");
    std::fs::write(&file, &text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("sysctl -w net.core.wmem_max="), "{stderr}");

    let pier = Pier::with_config(&text, &[]);
    let warned = pier.startup.iter().any(|l| l.contains("net.core.wmem_max"));
    assert!(warned, "{:#?}", pier.startup);
    let logged = pier.startup.iter().find(|l| l.contains("socket options"));
    assert!(
        logged.is_some_and(|l| l.contains(&format!("send_buffer={}", max * 2))),
        "the kernel's clamped value is what is logged: {logged:?}"
    );
}

#[test]
fn pier_check_names_the_line_and_key_of_a_bad_socket_option() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pier.toml");
    std::fs::write(
        &file,
        config("x", "tcp_nodelay = false\nrecv_buffer = \"64 bananas\""),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pier.toml:9: listener[1].socket.recv_buffer"),
        "{stderr}"
    );
}

/// An upstream that answers `GET` with `ok` and echoes anything else, noting
/// the address each connection came from.
fn upstream(peers: Arc<Mutex<Vec<IpAddr>>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { break };
            peers.lock().unwrap().push(c.peer_addr().unwrap().ip());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let reply: &[u8] = if buf.starts_with(b"GET ") {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                    } else {
                        &buf[..n]
                    };
                    if c.write_all(reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn upstream_groups_and_tcp_listeners_take_their_options() {
    if ss("( sport = :1 )").is_none() {
        eprintln!("skipped: `ss` (iproute2) is not installed");
        return;
    }
    let peers = Arc::new(Mutex::new(Vec::new()));
    let up = upstream(peers.clone());
    let pier = Pier::with_config(
        &format!(
            r#"
[[upstream]]
name = "u"
servers = [{{ address = "{up}" }}]
[upstream.socket]
bind = "127.0.0.2"
send_buffer = "8KiB"
keepalive_idle = "90s"
[[listener]]
listen = "127.0.0.1:0"
kind = "tcp"
upstream = "u"
[listener.socket]
send_buffer = "12KiB"
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "proxy"
upstream = "u"
"#
        ),
        &[],
    );
    let stream_addr = pier.streams[0];
    let mut s = TcpStream::connect(stream_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    assert_eq!(
        server_side(stream_addr, &s).0,
        24 * 1024,
        "the tcp listener's accepted socket"
    );
    // Pier's connection to the upstream: from the bound address, with the group's options.
    let text = ss(&format!("( dport = :{} )", up.port())).unwrap();
    assert!(text.contains("127.0.0.2:"), "{text}");
    assert_eq!(skmem(&text, "tb"), vec![16 * 1024], "{text}");
    assert!(text.contains("timer:(keepalive"), "{text}");

    let r = get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    let peers = peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2, "{peers:?}");
    assert!(
        peers
            .iter()
            .all(|p| *p == "127.0.0.2".parse::<IpAddr>().unwrap()),
        "stream and proxy connections leave from the bound address: {peers:?}"
    );
}
