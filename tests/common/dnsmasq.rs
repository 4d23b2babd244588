//! A real DNS server for the discovery tests: Debian's dnsmasq, started on a
//! free loopback UDP/TCP port in the foreground, answering only from files the
//! test writes (A/AAAA records in a hosts file, SRV records in a conf file),
//! each with a TTL of one second. Host records change with a rewrite and
//! SIGHUP (dnsmasq rereads its hosts files then); SRV records are read only
//! at start, so changing them restarts the server on the same port. Stopped
//! by PID on drop.
#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};

/// The TTL every record is served with.
pub const TTL: Duration = Duration::from_secs(1);

/// The dnsmasq binary, if installed (Debian puts it in /usr/sbin).
pub fn dnsmasq_binary() -> Option<PathBuf> {
    super::which("dnsmasq").or_else(|| {
        let p = PathBuf::from("/usr/sbin/dnsmasq");
        p.is_file().then_some(p)
    })
}

/// A running dnsmasq.
pub struct Dnsmasq {
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    child: Child,
    bin: PathBuf,
    hosts: PathBuf,
    conf: PathBuf,
    dir: PathBuf,
}

impl Dnsmasq {
    /// Starts dnsmasq in `dir` answering for `*.pier.test` from `hosts`
    /// (hosts-file lines) and `srv` (dnsmasq `srv-host=` lines); `None`
    /// (the caller skips) when dnsmasq is not installed.
    pub fn start(dir: &Path, hosts: &str, srv: &str) -> Option<Dnsmasq> {
        let bin = dnsmasq_binary()?;
        let hosts_path = dir.join("dns-hosts");
        let conf = dir.join("dns.conf");
        std::fs::write(&hosts_path, hosts).unwrap();
        std::fs::write(&conf, srv).unwrap();
        // A port another test takes between the probe and dnsmasq's bind
        // makes dnsmasq exit: another port is tried.
        for _ in 0..5 {
            let port = free_udp_and_tcp_port();
            let mut d = Dnsmasq {
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                child: spawn(&bin, port, &hosts_path, &conf, dir),
                bin: bin.clone(),
                hosts: hosts_path.clone(),
                conf: conf.clone(),
                dir: dir.to_path_buf(),
            };
            if d.wait_ready() {
                return Some(d);
            }
        }
        panic!("dnsmasq did not start on any of five ports");
    }

    /// New host records, read at once (SIGHUP).
    pub fn set_hosts(&self, hosts: &str) {
        std::fs::write(&self.hosts, hosts).unwrap();
        self.signal(Signal::HUP);
    }

    /// New SRV records: dnsmasq reads them only at start, so it restarts on
    /// the same port.
    pub fn set_srv(&mut self, srv: &str) {
        std::fs::write(&self.conf, srv).unwrap();
        self.kill();
        self.child = spawn(
            &self.bin,
            self.addr.port(),
            &self.hosts,
            &self.conf,
            &self.dir,
        );
        assert!(
            self.wait_ready(),
            "dnsmasq did not start again on {}",
            self.addr
        );
    }

    /// Stops answering (SIGSTOP): queries time out, as with a server gone dark.
    pub fn pause(&self) {
        self.signal(Signal::STOP);
    }

    /// Answers again (SIGCONT).
    pub fn resume(&self) {
        self.signal(Signal::CONT);
    }

    fn signal(&self, sig: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32).unwrap();
        kill_process(pid, sig).unwrap();
    }

    fn kill(&mut self) {
        let pid = Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = kill_process(pid, Signal::CONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until the port answers a query (an A query for a name of the
    /// zone); false when dnsmasq exited (its port was taken).
    fn wait_ready(&mut self) -> bool {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        // A query for `ready.pier.test` A, id 0x1234, recursion desired.
        let mut q = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in ["ready", "pier", "test"] {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        for _ in 0..100 {
            if self.child.try_wait().unwrap().is_some() {
                let log = std::fs::read_to_string(self.dir.join("dnsmasq.log")).unwrap_or_default();
                eprintln!("dnsmasq exited at start on {}: {log}", self.addr);
                return false;
            }
            let _ = sock.send_to(&q, self.addr);
            let mut buf = [0u8; 512];
            if let Ok((n, _)) = sock.recv_from(&mut buf) {
                if n >= 2 && buf[..2] == [0x12, 0x34] {
                    return true;
                }
            }
        }
        panic!("dnsmasq did not answer on {}", self.addr);
    }
}

/// A loopback port free for UDP and TCP both, as dnsmasq binds both.
fn free_udp_and_tcp_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn spawn(bin: &Path, port: u16, hosts: &Path, conf: &Path, dir: &Path) -> Child {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--no-daemon",
        "--no-resolv",
        "--no-hosts",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--local=/pier.test/",
        "--local-ttl=1",
        "--neg-ttl=1",
    ])
    .arg(format!("--port={port}"))
    .arg(format!("--addn-hosts={}", hosts.display()))
    .arg(format!("--conf-file={}", conf.display()))
    .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display()))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(
        std::fs::File::create(dir.join("dnsmasq.log"))
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null()),
    );
    // As root, dnsmasq would drop to its own user, who cannot read the
    // test's private directory when it rereads the hosts file.
    if rustix::process::geteuid().is_root() {
        cmd.arg("--user=root");
    }
    cmd.spawn().expect("start dnsmasq")
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.kill();
    }
}
