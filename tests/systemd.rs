//! systemd `Type=notify`: `READY=1` once the listeners accept, `STOPPING=1` when
//! shutdown starts, sent to the datagram socket named by `NOTIFY_SOCKET`.

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use common::{get, Pier};

const CONFIG: &str = r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
[[route]]
path = "/"
handler = "respond"
status = 200
"#;

fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).expect("a notification from pier");
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

#[test]
fn ready_is_sent_once_listening_and_stopping_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut pier = Pier::with_config_env(CONFIG, &[], &[("NOTIFY_SOCKET", path.to_str().unwrap())]);
    assert_eq!(recv(&sock), "READY=1");
    assert_eq!(
        get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    pier.signal(rustix::process::Signal::TERM);
    assert_eq!(recv(&sock), "STOPPING=1");
    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn abstract_notify_socket_gets_ready() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("pier-test-notify-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _pier = Pier::with_config_env(CONFIG, &[], &[("NOTIFY_SOCKET", &format!("@{name}"))]);
    assert_eq!(recv(&sock), "READY=1");
}

#[test]
fn a_bad_notify_socket_does_not_stop_the_server() {
    let pier = Pier::with_config_env(
        CONFIG,
        &[],
        &[("NOTIFY_SOCKET", "/nonexistent/notify.sock")],
    );
    assert_eq!(
        get(pier.addr(), "GET / HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
}

/// A socket made by the "service manager" (this test) reaches pier as descriptor
/// 3 with LISTEN_PID/LISTEN_FDS set, as systemd passes it; a shell moves it from
/// stdin to 3 so the test needs no `unsafe` pre-exec hook.
#[test]
fn socket_passed_by_systemd_is_used_for_the_matching_listener() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pier.toml");
    std::fs::write(&config, CONFIG.replace("127.0.0.1:0", &addr.to_string())).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec 3<&0 0</dev/null; export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" serve --config "$1""#)
        .arg(env!("CARGO_BIN_EXE_pier"))
        .arg(&config)
        .env("PIER_LOG", "info")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let started = line.contains("pier started");
        seen.push(line);
        if started {
            break;
        }
    }
    let used = seen
        .iter()
        .any(|l| l.contains("using the socket passed by systemd"));
    let response = used.then(|| get(addr, "GET / HTTP/1.1\r\nHost: t\r\n\r\n").status);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        used,
        "the passed socket was not used; stderr:\n{}",
        seen.join("\n")
    );
    assert_eq!(response, Some(200));
}
