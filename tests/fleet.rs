//! Scale-out behind an L4 balancer: two `pier` instances behind haproxy in TCP
//! mode, which opens every connection with a PROXY v2 header and health-checks
//! both instances over TLS. The instances share one `ticket_key_file`, so a
//! session begun on one resumes on the other. Skipped (with a note) when
//! haproxy is not installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tls::{tls_get, verifying_client, Pki, TlsStream};
use common::{free_port, which, Pier};
use rustix::process::Signal;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, HandshakeKind, StreamOwned};

/// The name the fleet's shared certificate is issued for.
const NAME: &str = "fleet.test";

/// One instance: TLS with the fleet's certificate and ticket secret, a PROXY
/// header required first, a health route for the balancer, and an access log.
fn instance_config(name: &str, cert: &Path, key: &Path, tickets: &Path) -> String {
    format!(
        r#"
[server]
workers = 1
drain_timeout = "5s"
[[listener]]
listen = "127.0.0.1:0"
accept_proxy_protocol = true
[listener.tls]
cert = "{cert}"
key = "{key}"
ticket_key_file = "{tickets}"
[[route]]
path = "/health"
handler = "respond"
status = 200
body = "ok"
[[route]]
path = "/"
handler = "respond"
status = 200
body = "{name}"
headers = {{ "X-Instance" = "{name}" }}
[admin]
listen = "127.0.0.1:0"
[access_log]
path = "{{dir}}/access.log"
format = "json"
flush_interval = "50ms"
"#,
        cert = cert.display(),
        key = key.display(),
        tickets = tickets.display(),
    )
}

/// The haproxy side, as an operator would write it: TCP mode, PROXY v2 to the
/// servers, HTTPS health checks (which send the PROXY header too), and a
/// refused connect retried on the other server (`retries` with `redispatch`).
fn haproxy_config(port: u16, a: SocketAddr, b: SocketAddr, admin: &Path) -> String {
    format!(
        "global
  maxconn 256
  stats socket {admin} level admin
defaults
  mode tcp
  timeout connect 1s
  timeout client 10s
  timeout server 10s
  retries 3
  option redispatch 1
frontend fleet
  bind 127.0.0.1:{port}
  default_backend pier
backend pier
  balance roundrobin
  option httpchk GET /health
  http-check expect status 200
  timeout check 2s
  default-server send-proxy-v2 check check-send-proxy check-ssl verify none inter 200ms fall 3 rise 2
  server a {a}
  server b {b}
",
        admin = admin.display()
    )
}

/// haproxy in the foreground until dropped (killed by PID).
struct Haproxy {
    child: std::process::Child,
    addr: SocketAddr,
    /// Its admin socket (the runtime API).
    admin: PathBuf,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    fn start(a: SocketAddr, b: SocketAddr) -> Option<Haproxy> {
        let bin = which("haproxy")?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let path = dir.path().join("haproxy.cfg");
        let admin = dir.path().join("admin.sock");
        std::fs::write(&path, haproxy_config(port, a, b, &admin)).unwrap();
        let child = std::process::Command::new(bin)
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "haproxy did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Haproxy {
            child,
            addr,
            admin,
            _dir: dir,
        })
    }

    /// Sends one command to the runtime API; returns its answer.
    fn command(&self, line: &str) -> String {
        use std::os::unix::net::UnixStream;
        let mut s = UnixStream::connect(&self.admin).expect("haproxy admin socket");
        s.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// Current sessions on `server` of the `pier` backend, from `show stat`.
    fn sessions(&self, server: &str) -> Option<u64> {
        let stat = self.command("show stat");
        let header: Vec<&str> = stat
            .lines()
            .next()?
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let scur = header.iter().position(|h| *h == "scur")?;
        stat.lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&"pier") && f.get(1) == Some(&server))?
            .get(scur)?
            .parse()
            .ok()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two instances sharing a certificate and a ticket key file, and haproxy in front.
struct Fleet {
    a: Pier,
    b: Pier,
    haproxy: Haproxy,
    ca: PathBuf,
    _files: tempfile::TempDir,
}

impl Fleet {
    fn start() -> Option<Fleet> {
        if which("haproxy").is_none() {
            eprintln!("haproxy not installed; skipping the fleet test");
            return None;
        }
        let files = tempfile::tempdir().unwrap();
        let pki = Pki::new(files.path(), "Fleet CA");
        let (cert, key) = pki.server("fleet", NAME, &[NAME], None);
        let tickets = files.path().join("ticket.key");
        let mut secret = [0u8; 80];
        aws_lc_rs::rand::fill(&mut secret).unwrap();
        std::fs::write(&tickets, secret).unwrap();
        let a = Pier::with_config(&instance_config("a", &cert, &key, &tickets), &[]);
        let b = Pier::with_config(&instance_config("b", &cert, &key, &tickets), &[]);
        let haproxy = Haproxy::start(a.https[0], b.https[0])?;
        let fleet = Fleet {
            a,
            b,
            haproxy,
            ca: pki.ca_path(),
            _files: files,
        };
        fleet.wait_both_serving();
        Some(fleet)
    }

    /// Waits until requests through haproxy have reached both instances.
    fn wait_both_serving(&self) {
        let client = self.client();
        let mut seen = (false, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(seen.0 && seen.1) {
            assert!(Instant::now() < deadline, "both instances never served");
            if let Ok(served) = request(self.haproxy.addr, "127.0.0.1", &client, "/warmup") {
                match served.instance.as_str() {
                    "a" => seen.0 = true,
                    "b" => seen.1 = true,
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client trusting the fleet's CA, with its own (empty) session store.
    fn client(&self) -> Arc<ClientConfig> {
        verifying_client(&self.ca, None)
    }

    fn instance(&self, name: &str) -> &Pier {
        match name {
            "a" => &self.a,
            "b" => &self.b,
            other => panic!("no instance {other:?}"),
        }
    }
}

/// What one request through the balancer showed.
#[derive(Debug)]
struct Served {
    instance: String,
    resumed: bool,
}

/// A TLS connection to `to` from the loopback address `from`.
fn connect_from(from: &str, to: SocketAddr, cfg: &Arc<ClientConfig>) -> std::io::Result<TlsStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    sock.bind(&local.into())?;
    sock.connect(&to.into())?;
    let sock: TcpStream = sock.into();
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.set_write_timeout(Some(Duration::from_secs(10)))?;
    let conn = ClientConnection::new(cfg.clone(), ServerName::try_from(NAME).unwrap())
        .map_err(std::io::Error::other)?;
    let mut s = StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// One GET over a new TLS connection through the balancer, from `from`.
fn request(
    balancer: SocketAddr,
    from: &str,
    cfg: &Arc<ClientConfig>,
    path: &str,
) -> std::io::Result<Served> {
    let mut s = connect_from(from, balancer, cfg)?;
    let resumed = s.conn.handshake_kind() == Some(HandshakeKind::Resumed);
    let resp = tls_get(&mut s, path)?;
    s.conn.send_close_notify();
    let _ = s.flush();
    if resp.status != 200 {
        return Err(std::io::Error::other(format!("status {}", resp.status)));
    }
    let instance = resp.header("x-instance").unwrap_or_default().to_string();
    if String::from_utf8_lossy(&resp.body) != instance {
        return Err(std::io::Error::other("body and X-Instance disagree"));
    }
    Ok(Served { instance, resumed })
}

/// Access-log lines (JSON) of `pier` whose target is `target`, waiting up to
/// three seconds for at least `n`.
fn logged(pier: &Pier, target: &str, n: usize) -> Vec<serde_json::Value> {
    let path = pier.root().join("access.log");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let got: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["target"] == target)
            .collect();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One counter (with its label set, e.g. `{result="resumed"}`) from `/metrics`.
fn metric(pier: &Pier, series: &str) -> u64 {
    let admin = pier.admin.expect("admin listener");
    let body = common::get(
        admin,
        "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    )
    .body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in /metrics"))
}

#[test]
fn client_addresses_survive_the_balancer() {
    let Some(fleet) = Fleet::start() else { return };
    let client = fleet.client();
    let mut served = Vec::new();
    // Round robin alternates; a health check that a loaded machine answers
    // late can take one instance out for a moment, so ask until both served.
    let both = |served: &Vec<(String, &str, String)>| {
        served.iter().any(|s| s.2 == "a") && served.iter().any(|s| s.2 == "b")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    for (i, from) in ["127.0.0.2", "127.0.0.3"].iter().cycle().enumerate() {
        if i >= 4 && both(&served) || Instant::now() > deadline {
            break;
        }
        let target = format!("/who?n={i}");
        let s = request(fleet.haproxy.addr, from, &client, &target).unwrap();
        served.push((target, *from, s.instance));
    }
    assert!(
        both(&served),
        "round robin should reach both instances: {served:?}"
    );
    for (target, from, instance) in &served {
        let lines = logged(fleet.instance(instance), target, 1);
        assert_eq!(lines.len(), 1, "{target} on {instance}: {lines:?}");
        assert_eq!(lines[0]["client"], *from, "{target} on {instance}");
        assert_eq!(lines[0]["sni"], NAME);
    }
}

#[test]
fn sessions_resume_on_the_other_instance() {
    let Some(fleet) = Fleet::start() else { return };
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let v = format!("{:?}", versions[0].version);
        let before = (
            metric(&fleet.a, "pier_tls_handshakes_total{result=\"resumed\"}"),
            metric(&fleet.b, "pier_tls_handshakes_total{result=\"resumed\"}"),
        );
        // A fresh session store per attempt: the first connection gets a ticket
        // from one instance, the second must be sent to the other one.
        let mut crossed = None;
        // Round robin alternates; a health check a loaded machine answers late
        // can take one instance out for a moment, so keep trying for a while.
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let cfg = Arc::new(
                ClientConfig::builder_with_provider(provider)
                    .with_protocol_versions(versions)
                    .unwrap()
                    .with_root_certificates(root_store(&fleet.ca))
                    .with_no_client_auth(),
            );
            let first = request(fleet.haproxy.addr, "127.0.0.2", &cfg, "/first").unwrap();
            assert!(!first.resumed, "{v}: a new store cannot resume");
            let second = request(fleet.haproxy.addr, "127.0.0.2", &cfg, "/second").unwrap();
            if second.instance != first.instance {
                crossed = Some((first, second));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (first, second) = crossed.expect("haproxy never alternated the instances");
        assert!(
            second.resumed,
            "{v}: a ticket from {} was not resumed by {}",
            first.instance, second.instance
        );
        let after = (
            metric(&fleet.a, "pier_tls_handshakes_total{result=\"resumed\"}"),
            metric(&fleet.b, "pier_tls_handshakes_total{result=\"resumed\"}"),
        );
        let grew = |name: &str| match name {
            "a" => after.0 > before.0,
            _ => after.1 > before.1,
        };
        assert!(
            grew(&second.instance),
            "{v}: {} counted no resumed handshake ({before:?} -> {after:?})",
            second.instance
        );
    }
}

fn root_store(ca: &Path) -> rustls::RootCertStore {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    roots
}

#[test]
fn stopping_one_instance_fails_no_request() {
    let Some(mut fleet) = Fleet::start() else {
        return;
    };
    let balancer = fleet.haproxy.addr;
    let client = fleet.client();
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        // A steady client, one connection per request, bounded in count and time.
        std::thread::spawn(move || {
            let mut results = Vec::new();
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed)
                && results.len() < 5000
                && started.elapsed() < Duration::from_secs(30)
            {
                let at = Instant::now();
                results.push((at, request(balancer, "127.0.0.3", &client, "/steady")));
                std::thread::sleep(Duration::from_millis(5));
            }
            results
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // As docs/fleet.md has it: out of the rotation first, then stopped once its
    // sessions are done. (SIGTERM alone also serves everything Pier accepted and
    // refuses what comes after, which haproxy redispatches; only a handshake
    // the kernel is completing at the instant the listener closes would be
    // reset, and draining at the balancer first removes that too.)
    let answer = fleet.haproxy.command("set server pier/a state drain");
    assert!(answer.trim().is_empty(), "haproxy: {answer}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.haproxy.sessions("a") != Some(0) {
        assert!(Instant::now() < deadline, "a kept sessions after the drain");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sigterm_at = Instant::now();
    fleet.a.signal(Signal::TERM);
    assert_eq!(fleet.a.wait_exit(Duration::from_secs(10)), Some(0));
    let exited_at = Instant::now();
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, Ordering::Relaxed);
    let results = load.join().unwrap();

    let failed: Vec<_> = results
        .iter()
        .filter_map(|(at, r)| r.as_ref().err().map(|e| (at.duration_since(sigterm_at), e)))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed (times after SIGTERM): {failed:?}",
        failed.len(),
        results.len()
    );
    let served = |pred: &dyn Fn(&Instant) -> bool, name: &str| {
        results
            .iter()
            .filter(|(at, r)| pred(at) && r.as_ref().is_ok_and(|s| s.instance == name))
            .count()
    };
    assert!(
        served(&|at| *at < sigterm_at, "a") > 0,
        "a served nothing before SIGTERM"
    );
    assert!(
        served(&|at| *at < sigterm_at, "b") > 0,
        "b served nothing before SIGTERM"
    );
    let after_exit = results.iter().filter(|(at, _)| *at > exited_at).count();
    assert!(after_exit > 0, "no request after a exited");
    assert_eq!(
        served(&|at| *at > exited_at, "b"),
        after_exit,
        "after a exited, b serves everything"
    );
}

/// An instance taken out of a balancer's rotation still owes an answer to the
/// connections it accepted before SIGTERM, including ones whose PROXY header,
/// TLS handshake or first request arrive only after the drain began.
#[test]
fn connections_accepted_before_sigterm_are_still_served() {
    let mut pier = Pier::with_config(
        r#"
[server]
workers = 1
drain_timeout = "5s"
[[listener]]
listen = "127.0.0.1:0"
[[listener]]
listen = "127.0.0.1:0"
accept_proxy_protocol = true
tls = { self_signed = true }
[[route]]
handler = "respond"
body = "still here"
"#,
        &[],
    );
    let plain = common::connect(pier.addr());
    let proxied = common::connect(pier.https[0]);
    // Accepted by the worker, then the drain begins before a byte is sent.
    std::thread::sleep(Duration::from_millis(300));
    pier.signal(Signal::TERM);
    std::thread::sleep(Duration::from_millis(300));

    let mut r = common::Reader::new(plain);
    r.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let resp = r
        .response(false)
        .expect("an answer on the plain connection");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("close"));
    assert_eq!(resp.body, b"still here");

    let mut sock = proxied;
    let mut header = Vec::new();
    pier::proxy_protocol::encode_v2(
        &mut header,
        "192.0.2.9:4000".parse().unwrap(),
        pier.https[0],
        None,
        None,
    );
    sock.write_all(&header).unwrap();
    let (cfg, _) = common::tls::recording_client(true);
    let conn = ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .expect("the handshake completes during the drain");
    }
    let resp = tls_get(&mut tls, "/").expect("an answer over TLS");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"still here");

    assert_eq!(pier.wait_exit(Duration::from_secs(10)), Some(0));
}
