//! Stream forwarding and the PROXY protocol end to end: `kind = "tcp"` listeners
//! (plain and TLS-terminating), `pier tunnel`, PROXY headers received by an HTTP
//! listener and sent to upstreams, and interop with haproxy when it is installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tls::{connect_tls, recording_client, seen_subject, verifying_client, Pki};
use common::upstream::{ok, Upstream};
use common::{connect, free_port, which, Pier, Reader};
use pier::proxy_protocol::{self, Header, ProxyParsed};

/// A TCP echo server that optionally expects a PROXY header first (recording
/// it), echoes every byte, and after the client half-closes writes `bye` and closes.
struct Echo {
    addr: SocketAddr,
    headers: Arc<Mutex<Vec<Header>>>,
}

impl Echo {
    fn start(expect_proxy: bool) -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let headers = Arc::new(Mutex::new(Vec::new()));
        let seen = headers.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 65536];
                    if expect_proxy {
                        loop {
                            match proxy_protocol::parse_proxy_header(&buf) {
                                Ok(ProxyParsed::Complete(h, n)) => {
                                    seen.lock().unwrap().push(h);
                                    buf.drain(..n);
                                    break;
                                }
                                Ok(ProxyParsed::Partial) => {}
                                Err(_) => return,
                            }
                            match s.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                    }
                    if s.write_all(&buf).is_err() {
                        return;
                    }
                    loop {
                        match s.read(&mut chunk) {
                            Ok(0) => {
                                let _ = s.write_all(b"bye");
                                return;
                            }
                            Ok(n) => {
                                if s.write_all(&chunk[..n]).is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                });
            }
        });
        Echo { addr, headers }
    }
}

/// A certificate for localhost written to `dir`, and a client config trusting it.
fn cert_files(dir: &std::path::Path) -> (String, String, Arc<rustls::ClientConfig>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (
        cert.display().to_string(),
        key.display().to_string(),
        Arc::new(config),
    )
}

fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let conn = rustls::ClientConnection::new(config, "localhost".try_into().unwrap()).unwrap();
    rustls::StreamOwned::new(conn, connect(addr))
}

fn echo_over_tls(addr: SocketAddr, config: Arc<rustls::ClientConfig>) {
    let mut tls = tls_connect(addr, config);
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 249) as u8).collect();
    tls.write_all(&payload).unwrap();
    tls.flush().unwrap();
    let mut back = vec![0u8; payload.len()];
    tls.read_exact(&mut back).unwrap();
    assert!(back == payload, "echoed bytes differ");
    // Half-close: close_notify, then the upstream's last words still arrive.
    tls.conn.send_close_notify();
    tls.flush().unwrap();
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest);
    assert_eq!(rest, b"bye");
}

#[test]
fn tls_terminating_tcp_listener_forwards_to_an_echo_upstream_with_proxy_v2() {
    let echo = Echo::start(true);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, client) = cert_files(dir.path());
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
kind = "tcp"
upstream = "echo"
proxy_protocol = "v2"
tls = {{ cert = "{cert}", key = "{key}" }}
[[upstream]]
name = "echo"
servers = [{{ address = "{}" }}]
"#,
            echo.addr
        ),
        &[],
    );
    let addr = pier.streams[0];
    echo_over_tls(addr, client);
    let headers = echo.headers.lock().unwrap().clone();
    assert_eq!(headers.len(), 1);
    let h = &headers[0];
    assert_eq!(h.source.unwrap().ip().to_string(), "127.0.0.1");
    assert_eq!(h.destination, Some(addr));
    assert_eq!(h.authority.as_deref(), Some(&b"localhost"[..]));
}

/// Writes `ping` through a TLS stream and reads the echo.
fn ping(tls: &mut common::tls::TlsStream) {
    tls.write_all(b"ping").unwrap();
    tls.flush().unwrap();
    let mut back = [0u8; 4];
    tls.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"ping");
}

#[test]
fn tls_tcp_listener_reloads_on_sighup_and_logs_client_subjects() {
    let echo = Echo::start(false);
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "Stream Test CA");
    let (cert, key) = pki.server("live", "first", &["a.test"], None);
    let ca = pki.ca_path();
    let pier = Pier::with_config_log(
        &format!(
            r#"
[server]
workers = 2
[[listener]]
listen = "127.0.0.1:0"
kind = "tcp"
upstream = "echo"
[listener.tls]
cert = "{}"
key = "{}"
client_ca = "{}"
client_auth = "optional"
[[upstream]]
name = "echo"
servers = [{{ address = "{}" }}]
"#,
            cert.display(),
            key.display(),
            ca.display(),
            echo.addr
        ),
        &[],
        "debug",
    );
    let addr = pier.streams[0];

    let alice = pki.client("alice", "alice");
    let mut c = connect_tls(addr, "a.test", &verifying_client(&ca, Some(&alice))).unwrap();
    ping(&mut c);
    let line = pier
        .wait_log("TLS client certificate verified", Duration::from_secs(5))
        .expect("subject logged");
    assert!(line.contains("O=Pier Tests,CN=alice"), "{line}");

    let (client, seen) = recording_client(true);
    let mut held = connect_tls(addr, "a.test", &client).unwrap();
    ping(&mut held);
    assert_eq!(seen_subject(&seen), "CN=first");

    let (new_cert, new_key) = pki.server("next", "second", &["a.test"], None);
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    pier.signal(rustix::process::Signal::HUP);
    pier.wait_log("TLS certificates reloaded", Duration::from_secs(5))
        .expect("reload logged");
    for _ in 0..4 {
        let mut c = connect_tls(addr, "a.test", &client).unwrap();
        ping(&mut c);
        assert_eq!(
            seen_subject(&seen),
            "CN=second",
            "new handshakes, every worker"
        );
    }
    ping(&mut held);
}

#[test]
fn tunnel_command_terminates_tls_with_proxy_v1() {
    let echo = Echo::start(true);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, client) = cert_files(dir.path());
    let to = echo.addr.to_string();
    let pier = Pier::with_args(&[
        "tunnel",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &to,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--proxy-protocol",
        "v1",
        "--workers",
        "1",
    ]);
    echo_over_tls(pier.streams[0], client);
    let h = echo.headers.lock().unwrap()[0].clone();
    assert_eq!(h.source.unwrap().ip().to_string(), "127.0.0.1");
    assert!(h.authority.is_none(), "v1 carries no TLVs");
}

/// A plain tcp listener forwarding to `upstream`, idle streams closed after `idle`.
fn plain_tcp_to(upstream: std::net::SocketAddr, idle: &str) -> Pier {
    Pier::with_config(
        &format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\nkind = \"tcp\"\nupstream = \"e\"\nidle_timeout = \"{idle}\"\n[[upstream]]\nname = \"e\"\nservers = [{{ address = \"{upstream}\" }}]\n"
        ),
        &[],
    )
}

#[test]
fn plain_tcp_listener_relays_and_half_closes() {
    let echo = Echo::start(false);
    let pier = plain_tcp_to(echo.addr, "2s");
    let mut s = connect(pier.streams[0]);
    s.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"bye");
}

#[test]
fn tcp_listener_closes_idle_streams() {
    let echo = Echo::start(false);
    let pier = plain_tcp_to(echo.addr, "300ms");
    let mut s = connect(pier.streams[0]);
    let started = std::time::Instant::now();
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    assert!(started.elapsed() < Duration::from_secs(3));
}

fn accept_proxy_config(upstream: SocketAddr) -> String {
    format!(
        r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
accept_proxy_protocol = true
[[upstream]]
name = "app"
servers = [{{ address = "{upstream}" }}]
[[route]]
handler = "proxy"
upstream = "app"
client_addr_header = "X-Client"
"#
    )
}

#[test]
fn http_listener_takes_the_client_address_from_proxy_v1_and_v2() {
    let up = Upstream::start(|_| ok("seen"));
    let pier = Pier::with_config(&accept_proxy_config(up.addr), &[]);

    let mut r = Reader::new(connect(pier.addr()));
    r.send(b"PROXY TCP4 198.51.100.7 127.0.0.1 40000 80\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);
    r.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.response(false).unwrap().status, 200);

    let mut v2 = Vec::new();
    proxy_protocol::encode_v2(
        &mut v2,
        "[2001:db8::5]:1234".parse().unwrap(),
        "[::1]:80".parse().unwrap(),
        None,
        None,
    );
    let mut r = Reader::new(connect(pier.addr()));
    v2.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    r.send(&v2);
    assert_eq!(r.response(false).unwrap().status, 200);

    let seen = up.requests();
    assert_eq!(seen[0].header("x-client"), Some("198.51.100.7"));
    assert_eq!(seen[0].header("x-forwarded-for"), Some("198.51.100.7"));
    assert_eq!(seen[1].header("x-client"), Some("198.51.100.7"));
    assert_eq!(seen[2].header("x-client"), Some("2001:db8::5"));
}

#[test]
fn missing_or_malformed_proxy_header_closes_the_connection() {
    let up = Upstream::start(|_| ok("seen"));
    let pier = Pier::with_config(&accept_proxy_config(up.addr), &[]);
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"PROXY TCP9 1.2.3.4 5.6.7.8 1 2\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x99\x11\x00\x0c123456789012",
    ] {
        let mut s = connect(pier.addr());
        s.write_all(bad).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(
            got.is_empty(),
            "answered {:?}",
            String::from_utf8_lossy(&got)
        );
    }
    assert!(up.requests().is_empty());
}

/// Runs haproxy with `config` in the foreground until dropped (killed by PID);
/// the temp dir holding its config lives as long.
struct Haproxy(std::process::Child, #[allow(dead_code)] tempfile::TempDir);

impl Haproxy {
    fn start(config: &str) -> Option<Haproxy> {
        let bin = which("haproxy")?;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = std::process::Command::new(bin)
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        Some(Haproxy(child, dir))
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(addr: SocketAddr) {
    for _ in 0..200 {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listening on {addr}");
}

/// A client connection from a chosen loopback address, so the address seen
/// behind two proxies proves the PROXY header carried it.
fn connect_from(local: &str, to: SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    sock.bind(&local.into()).unwrap();
    sock.connect(&to.into()).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

const HAPROXY_DEFAULTS: &str = "global\n  maxconn 100\ndefaults\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n";

#[test]
fn haproxy_accepts_the_proxy_headers_pier_sends() {
    let up = Upstream::start(|_| ok("via haproxy"));
    for version in ["v1", "v2"] {
        let hport = free_port();
        let Some(_h) = Haproxy::start(&format!(
            "{HAPROXY_DEFAULTS}frontend f\n  mode http\n  bind 127.0.0.1:{hport} accept-proxy\n  option forwardfor\n  default_backend b\nbackend b\n  mode http\n  server s {}\n",
            up.addr
        )) else {
            eprintln!("haproxy not installed; skipping");
            return;
        };
        let haddr: SocketAddr = format!("127.0.0.1:{hport}").parse().unwrap();
        wait_for_port(haddr);
        let pier = Pier::with_config(
            &format!("[[listener]]\nlisten = \"127.0.0.1:0\"\nkind = \"tcp\"\nupstream = \"h\"\nproxy_protocol = \"{version}\"\n[[upstream]]\nname = \"h\"\nservers = [{{ address = \"{haddr}\" }}]\n"),
            &[],
        );
        let mut r = Reader::new(connect_from("127.0.0.2", pier.streams[0]));
        r.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let resp = r.response(false).expect("a response through haproxy");
        assert_eq!(resp.status, 200, "{version}");
        let last = up.requests().pop().unwrap();
        assert_eq!(
            last.header("x-forwarded-for"),
            Some("127.0.0.2"),
            "{version}"
        );
    }
}

#[test]
fn pier_accepts_the_proxy_headers_haproxy_sends() {
    let up = Upstream::start(|_| ok("behind haproxy"));
    let pier = Pier::with_config(&accept_proxy_config(up.addr), &[]);
    for send in ["send-proxy", "send-proxy-v2"] {
        let hport = free_port();
        let Some(_h) = Haproxy::start(&format!(
            "{HAPROXY_DEFAULTS}frontend f\n  mode tcp\n  bind 127.0.0.1:{hport}\n  default_backend b\nbackend b\n  mode tcp\n  server s {} {send}\n",
            pier.addr()
        )) else {
            eprintln!("haproxy not installed; skipping");
            return;
        };
        let haddr: SocketAddr = format!("127.0.0.1:{hport}").parse().unwrap();
        wait_for_port(haddr);
        let mut r = Reader::new(connect_from("127.0.0.3", haddr));
        r.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(r.response(false).unwrap().status, 200, "{send}");
        let last = up.requests().pop().unwrap();
        assert_eq!(last.header("x-client"), Some("127.0.0.3"), "{send}");
    }
}

#[test]
fn config_errors_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    let cases = [
        (
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[route]]\nhandler = \"proxy\"\nupstream = \"nope\"\n",
            ":5: route[1].upstream",
        ),
        (
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nservers = [{ address = \"nohost\" }]\n[[route]]\nhandler = \"proxy\"\nupstream = \"a\"\n",
            ":5: upstream[1].servers[1].address",
        ),
        (
            "[[listener]]\nlisten = \"127.0.0.1:1\"\nkind = \"tcp\"\nupstream = \"a\"\nproxy_protocol = \"v3\"\n[[upstream]]\nname = \"a\"\nservers = [{ address = \"127.0.0.1:2\" }]\n",
            ":5: listener[1].proxy_protocol",
        ),
        (
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nbalance = \"random\"\nservers = [{ address = \"127.0.0.1:2\" }]\n[[route]]\nhandler = \"respond\"\n",
            ":5: upstream[1].balance",
        ),
        (
            "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nservers = [{ address = \"127.0.0.1:2\" }]\n[[route]]\nhandler = \"respond\"\nupstream = \"a\"\n",
            "route[1].upstream",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pier"))
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want} not in {err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
}

/// A TCP server that writes `name` to every connection and closes it.
fn name_server(listener: TcpListener, name: &'static str) {
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let _ = s.write_all(name.as_bytes());
        }
    });
}

/// What a stream through `addr` was answered with ("" when it was closed at once).
fn stream_answer(addr: SocketAddr) -> String {
    let mut s = connect(addr);
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    got
}

#[test]
fn tcp_health_checks_keep_streams_off_a_down_server_until_it_rises() {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let a_addr = a.local_addr().unwrap();
    name_server(a, "a");
    let b_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // No retries and no passive health: only the active checks keep streams
    // away from the server that is down.
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[[listener]]
listen = "127.0.0.1:0"
kind = "tcp"
upstream = "pair"
[[upstream]]
name = "pair"
servers = [{{ address = "{a_addr}" }}, {{ address = "{b_addr}" }}]
retries = 0
max_fails = 0
health_check = {{ kind = "tcp", interval = "100ms", timeout = "500ms", rise = 3, fall = 1 }}
"#
        ),
        &[],
    );
    // The first check may report it down before the start line is read, so
    // wait for it by its effect: with round robin over two servers, four
    // streams in a row answered by "a" mean the other one is out.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (0..4).any(|_| stream_answer(pier.streams[0]) != "a") {
        assert!(
            std::time::Instant::now() < deadline,
            "the server without a listener was never taken out"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let answers: Vec<String> = (0..8).map(|_| stream_answer(pier.streams[0])).collect();
    assert!(answers.iter().all(|a| a == "a"), "{answers:?}");

    let b = (0..100)
        .find_map(|_| {
            TcpListener::bind(b_addr).ok().or_else(|| {
                std::thread::sleep(Duration::from_millis(20));
                None
            })
        })
        .expect("bind the second server");
    let back = std::time::Instant::now();
    name_server(b, "b");
    let up = pier
        .wait_log("health check: server is up", Duration::from_secs(5))
        .expect("the server comes back");
    assert!(up.contains(&b_addr.to_string()), "{up}");
    // rise = 3 checks 100ms apart: not before the third success.
    assert!(
        back.elapsed() >= Duration::from_millis(190),
        "{:?}",
        back.elapsed()
    );
    let answers: Vec<String> = (0..8).map(|_| stream_answer(pier.streams[0])).collect();
    assert_eq!(
        answers.iter().filter(|a| *a == "b").count(),
        4,
        "round robin over both again: {answers:?}"
    );
    assert!(answers.iter().all(|a| a == "a" || a == "b"), "{answers:?}");
}

#[test]
fn tcp_streams_count_against_max_in_flight() {
    let echo = Echo::start(false);
    let pier = Pier::with_config(
        &format!(
            r#"
[server]
workers = 1
[admin]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
kind = "tcp"
upstream = "echo"
[[upstream]]
name = "echo"
servers = [{{ address = "{}" }}]
max_in_flight = 1
"#,
            echo.addr
        ),
        &[],
    );
    let mut first = connect(pier.streams[0]);
    first.write_all(b"one").unwrap();
    let mut back = [0u8; 3];
    first.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"one");
    // Over the limit: closed at once, without reaching the upstream (which
    // would echo and say bye).
    let mut second = connect(pier.streams[0]);
    let _ = second.write_all(b"two");
    let _ = second.shutdown(std::net::Shutdown::Write);
    let mut got = Vec::new();
    let _ = second.read_to_end(&mut got);
    assert_eq!(got, b"");
    first.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    first.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"bye");
    // The slot is free again once the first stream has ended.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = connect(pier.streams[0]);
        s.write_all(b"two").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        if got == b"twobye" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never admitted again: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let metrics = common::get(
        pier.admin.unwrap(),
        "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(text.contains("pier_upstream_rejected_total 1\n"), "{text}");
}

#[test]
fn a_dead_upstream_under_load_does_not_flood_the_log() {
    let dead = common::refused_addr().to_string();
    let pier = Pier::with_args(&[
        "tunnel",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &dead,
        "--workers",
        "1",
    ]);
    let started = std::time::Instant::now();
    for _ in 0..300 {
        let mut s = connect(pier.streams[0]);
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = s.read(&mut [0u8; 16]);
    }
    let secs = started.elapsed().as_secs() + 1;
    // Past the second the flood ended in, one more failure reports the rest.
    std::thread::sleep(Duration::from_millis(1100));
    let mut s = connect(pier.streams[0]);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.read(&mut [0u8; 16]);
    std::thread::sleep(Duration::from_millis(300));
    let warnings: Vec<String> = pier
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("WARN"))
        .collect();
    // Without the limit: 300 or more lines. With it: a burst of 5 per second per
    // call site (connect failed, no server up, marked down), and the count of
    // the rest on a later line.
    let bound = 3 * 5 * (secs as usize + 2);
    assert!(
        !warnings.is_empty() && warnings.len() <= bound,
        "{} warnings (bound {bound}): {warnings:#?}",
        warnings.len()
    );
    assert!(
        warnings.iter().any(|l| l.contains("suppressed=")),
        "{warnings:#?}"
    );
}
