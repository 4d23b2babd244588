//! Pebble, Let's Encrypt's test CA, started on loopback for the ACME tests with
//! its DNS pointed at `pebble-challtestsrv` (every name resolves to 127.0.0.1),
//! so validations really connect to Pier's listeners. Both are killed on drop.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tls::Pki;

/// A running Pebble and its DNS server.
pub struct Pebble {
    children: Vec<Child>,
    /// ACME directory URL.
    pub directory: String,
    /// PEM root of Pebble's HTTPS listener (Pier's `acme.ca`).
    pub ca: PathBuf,
    /// Port Pebble sends HTTP-01 validations to.
    pub http_port: u16,
    /// Port Pebble sends TLS-ALPN-01 validations to.
    pub tls_port: u16,
    pub dir: tempfile::TempDir,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

use super::free_port;

/// The Pebble binaries: `$PEBBLE_BIN_DIR`, then `PATH`, then Go's bin directory.
fn find_binary(name: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("PEBBLE_BIN_DIR") {
        candidates.push(Path::new(&d).join(name));
    }
    if let Some(p) = super::which(name) {
        candidates.push(p);
    }
    if let Some(d) = std::env::var_os("GOBIN") {
        candidates.push(Path::new(&d).join(name));
    }
    if let Some(d) = std::env::var_os("GOPATH") {
        candidates.push(Path::new(&d).join("bin").join(name));
    }
    if let Some(h) = std::env::var_os("HOME") {
        candidates.push(Path::new(&h).join("go/bin").join(name));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn binary(name: &str) -> PathBuf {
    find_binary(name).expect("checked by Pebble::installed")
}

/// Whether Pebble can run here. Missing, a test says so and passes, as
/// README says of every missing tool; under CI (`CI` set) or when `.ci/run`
/// named its directory (`PEBBLE_BIN_DIR`), a missing Pebble fails the test.
pub fn installed() -> bool {
    let missing: Vec<&str> = ["pebble", "pebble-challtestsrv"]
        .into_iter()
        .filter(|n| find_binary(n).is_none())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{} not found: run .ci/run, or `go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.1` \
         (and pebble-challtestsrv)",
        missing.join(" and ")
    );
    if std::env::var_os("CI").is_some() || std::env::var_os("PEBBLE_BIN_DIR").is_some() {
        panic!("{why}");
    }
    eprintln!("skipped: {why}");
    false
}

impl Pebble {
    /// Starts Pebble validating on `http_port` / `tls_port`, issuing certificates
    /// valid for `validity_s` seconds.
    pub fn start(http_port: u16, tls_port: u16, validity_s: u64) -> Pebble {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path(), "Pebble Test Root");
        let (cert, key) = pki.server("pebble", "pebble", &["localhost", "127.0.0.1"], None);
        let (acme_port, mgmt_port, dns_port, dns_mgmt) =
            (free_port(), free_port(), free_port(), free_port());
        let config = dir.path().join("pebble.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"pebble": {{
  "listenAddress": "127.0.0.1:{acme_port}",
  "managementListenAddress": "127.0.0.1:{mgmt_port}",
  "certificate": "{}",
  "privateKey": "{}",
  "httpPort": {http_port},
  "tlsPort": {tls_port},
  "ocspResponderURL": "",
  "externalAccountBindingRequired": false,
  "domainBlocklist": ["blocked-domain.example"],
  "retryAfter": {{"authz": 1, "order": 1}},
  "keyAlgorithm": "ecdsa",
  "profiles": {{"default": {{"description": "test", "validityPeriod": {validity_s}}}}}
}}}}"#,
                cert.display(),
                key.display()
            ),
        )
        .unwrap();
        let dns = Command::new(binary("pebble-challtestsrv"))
            .args([
                "-http01",
                "",
                "-https01",
                "",
                "-tlsalpn01",
                "",
                "-doh",
                "",
                "-dnsserver",
                &format!("127.0.0.1:{dns_port}"),
                "-management",
                &format!("127.0.0.1:{dns_mgmt}"),
                "-defaultIPv4",
                "127.0.0.1",
                "-defaultIPv6",
                "",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pebble-challtestsrv");
        let mut children = vec![dns];
        let pebble = Command::new(binary("pebble"))
            .args([
                "-config",
                config.to_str().unwrap(),
                "-dnsserver",
                &format!("127.0.0.1:{dns_port}"),
                "-strict=false",
            ])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("pebble.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pebble");
        children.push(pebble);
        let p = Pebble {
            children,
            directory: format!("https://127.0.0.1:{acme_port}/dir"),
            ca: pki.ca_path(),
            http_port,
            tls_port,
            dir,
        };
        for port in [acme_port, dns_mgmt] {
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while TcpStream::connect(addr).is_err() {
                assert!(Instant::now() < deadline, "pebble did not start on {addr}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        p
    }

    /// Pebble's own log so far (validation attempts and their results).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pebble.log")).unwrap_or_default()
    }
}
