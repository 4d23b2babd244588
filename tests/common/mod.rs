//! Test support: start a real `pier` process on 127.0.0.1:0 and talk to it with raw
//! bytes over std sockets.
#![allow(dead_code)]

pub mod aioquic;
pub mod bench_run;
pub mod cache;
pub mod chromium;
pub mod dnsmasq;
pub mod h2raw;
pub mod jaeger;
pub mod load;
pub mod otlp;
pub mod pebble;
pub mod python_peer;
pub mod successor;
pub mod tls;
pub mod udp_relay;
pub mod upstream;
pub mod websocket;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A loopback address whose connections are refused, for as long as the test
/// process runs. The port stays bound (a socket that never listens) so that no
/// other listener of a test running beside this one can take it, as a port
/// bound and released could be. The same port of `::1` is held too where the
/// machine has IPv6, so `localhost` at that port is refused at both its
/// addresses.
pub fn refused_addr() -> SocketAddr {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("a TCP socket");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any.into()).expect("bind 127.0.0.1:0");
    let addr = socket
        .local_addr()
        .unwrap()
        .as_socket()
        .expect("an IP address");
    std::mem::forget(socket);
    if let Ok(v6) = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None) {
        let loopback = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()));
        if v6.set_only_v6(true).is_ok() && v6.bind(&loopback.into()).is_ok() {
            std::mem::forget(v6);
        }
    }
    addr
}

/// A loopback port free now (TCP and UDP bound and released), for a
/// configuration that must name its port upfront. It is taken below the
/// kernel's ephemeral range, so no client connection of a test running beside
/// this one can hold it as its local port before Pier binds it, as one bound
/// at port 0 and released could be; within this process no port is given twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut words = text.split_whitespace().map(|w| w.parse::<u32>().ok());
            Some((words.next()??, words.next()??))
        })
        .unwrap_or((32768, 60999));
    // The ports outside the ephemeral range: below it where there is room, else above.
    let (first, count) = if low > 11_000 {
        (10_000, low - 10_000)
    } else {
        (high + 1, 65_535 - high)
    };
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    for _ in 0..count {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (first + seed.wrapping_add(step) % count) as u16;
        let tcp = std::net::TcpListener::bind(("127.0.0.1", port));
        let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no free loopback port outside the ephemeral range");
}

/// A running `pier serve`, killed on drop.
pub struct Pier {
    pub child: Child,
    pub http: Vec<SocketAddr>,
    pub https: Vec<SocketAddr>,
    /// Stream listeners (`kind = "tcp"`): plain (`tcp://`) and TLS (`tls://`).
    pub streams: Vec<SocketAddr>,
    /// The admin listener (`/metrics`, `/status`), when on.
    pub admin: Option<SocketAddr>,
    pub dir: tempfile::TempDir,
    pub log: mpsc::Receiver<String>,
    /// Log lines written before `pier started`.
    pub startup: Vec<String>,
}

impl Pier {
    /// Starts `pier serve --config <dir>/pier.toml` with `config` written there.
    /// `{dir}` in the config is replaced with the temp dir path.
    pub fn with_config(config: &str, extra: &[&str]) -> Pier {
        let dir = tempfile::tempdir().unwrap();
        let text = config.replace("{dir}", dir.path().to_str().unwrap());
        let path = dir.path().join("pier.toml");
        std::fs::write(&path, text).unwrap();
        let mut args = vec!["serve", "--config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        Self::spawn(dir, &args)
    }

    /// Starts the embedded default with extra flags; the temp dir is its root.
    pub fn embedded(extra: &[&str]) -> Pier {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_string();
        let mut args = vec!["serve", "--root", root.as_str()];
        args.extend_from_slice(extra);
        Self::spawn(dir, &args)
    }

    /// Like [`Pier::with_config`] with `PIER_LOG` set to `level`.
    pub fn with_config_log(config: &str, extra: &[&str], level: &str) -> Pier {
        let dir = tempfile::tempdir().unwrap();
        let text = config.replace("{dir}", dir.path().to_str().unwrap());
        let path = dir.path().join("pier.toml");
        std::fs::write(&path, text).unwrap();
        let mut args = vec!["serve", "--config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        Self::spawn_logging(dir, &args, level, &[])
    }

    /// Like [`Pier::with_config`] with extra environment variables.
    pub fn with_config_env(config: &str, extra: &[&str], env: &[(&str, &str)]) -> Pier {
        let dir = tempfile::tempdir().unwrap();
        let text = config.replace("{dir}", dir.path().to_str().unwrap());
        let path = dir.path().join("pier.toml");
        std::fs::write(&path, text).unwrap();
        let mut args = vec!["serve", "--config", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        Self::spawn_logging(dir, &args, "info", env)
    }

    /// Starts `pier` with exactly these arguments (e.g. `tunnel ...`).
    pub fn with_args(args: &[&str]) -> Pier {
        Self::spawn(tempfile::tempdir().unwrap(), args)
    }

    fn spawn(dir: tempfile::TempDir, args: &[&str]) -> Pier {
        Self::spawn_logging(dir, args, "info", &[])
    }

    fn spawn_logging(
        dir: tempfile::TempDir,
        args: &[&str],
        level: &str,
        env: &[(&str, &str)],
    ) -> Pier {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pier"))
            .args(args)
            .env("PIER_LOG", level)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pier");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if line.contains("pier started") {
                        let (http, https) = parse_listeners(&line);
                        let streams = parse_stream_listeners(&line);
                        let admin = line
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("admin="))
                            .and_then(|a| a.parse().ok());
                        return Pier {
                            child,
                            http,
                            https,
                            streams,
                            admin,
                            dir,
                            log: rx,
                            startup: seen,
                        };
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("pier did not start; stderr:\n{}", seen.join("\n"));
                }
            }
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.http[0]
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal to this process (by PID).
    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }

    /// Waits for exit, returning the exit code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Log lines printed so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }

    /// Waits up to `within` for a log line containing `needle`; returns it.
    pub fn wait_log(&self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Pier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_listeners(line: &str) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
    let mut http = Vec::new();
    let mut https = Vec::new();
    for word in line.split(|c: char| c.is_whitespace() || c == '"' || c == ',' || c == '=') {
        if let Some(a) = word.strip_prefix("http://") {
            http.push(a.parse().unwrap());
        } else if let Some(a) = word.strip_prefix("https://") {
            https.push(a.parse().unwrap());
        }
    }
    (http, https)
}

fn parse_stream_listeners(line: &str) -> Vec<SocketAddr> {
    line.split(|c: char| c.is_whitespace() || c == '"' || c == ',' || c == '=')
        .filter_map(|w| {
            w.strip_prefix("tcp://")
                .or_else(|| w.strip_prefix("tls://"))
        })
        .map(|a| a.parse().unwrap())
        .collect()
}

/// Connects with read/write timeouts so a broken server fails the test instead of hanging it.
/// A connection to `to` from the local address `from` (any of 127.0.0.0/8
/// on loopback), for tests that need clients with different addresses.
pub fn connect_from(from: std::net::IpAddr, to: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response from a stream that may hold more after it; `head_request`
/// means the response has no body whatever its Content-Length says.
pub struct Reader {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    pub fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// Next response, or None if the server closed first.
    pub fn response(&mut self, head_request: bool) -> Option<Response> {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("ascii head");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        self.buf.drain(..end);
        let mut resp = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let no_body =
            head_request || status == 304 || status == 204 || (100..200).contains(&status);
        if no_body {
            return Some(resp);
        }
        if let Some(len) = resp.header("content-length") {
            let len: usize = len.parse().unwrap();
            while self.buf.len() < len {
                assert!(self.fill(), "connection closed inside a body");
            }
            resp.body = self.buf.drain(..len).collect();
        } else {
            while self.fill() {}
            resp.body = std::mem::take(&mut self.buf);
        }
        Some(resp)
    }

    /// True when the server closes the connection (EOF) within the read timeout.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One request on a fresh connection.
pub fn get(addr: SocketAddr, raw: &str) -> Response {
    let mut r = Reader::new(connect(addr));
    r.send(raw.as_bytes());
    r.response(raw.starts_with("HEAD ")).expect("a response")
}

/// Path of a binary if it is installed.
pub fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.is_file())
}

/// Runs `pier check --config <path>`: its exit code and its standard error.
pub fn check_config(path: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pier"))
        .args(["check", "--config"])
        .arg(path)
        .output()
        .expect("run pier check");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `pier check` on `path`, which must be refused with exit code 2 and
/// an error at `path:line` naming `key`; returns the error for more checks.
pub fn assert_config_error(path: &Path, line: usize, key: &str) -> String {
    let (code, err) = check_config(path);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:{line}: {key}", path.display())),
        "want line {line} key {key}: {err}"
    );
    err
}

/// The value of `series` (`name{labels}`) in a `/metrics` scrape, if present.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Resident memory of a process in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}
