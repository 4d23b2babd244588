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
