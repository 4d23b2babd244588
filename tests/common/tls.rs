//! TLS test support: a throwaway PKI (rcgen), a rustls client that records what the
//! server presented, and `openssl s_client` runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SignatureAlgorithm,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

use super::{find, which, Response};

/// A CA that signs server and client certificates into files under `dir`.
pub struct Pki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
    ca_file: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path, ca_name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, ca_name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_file = dir.join(format!("{}.ca.pem", ca_name.replace(' ', "-")));
        std::fs::write(&ca_file, ca.pem()).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca,
            ca_file,
        }
    }

    /// The CA certificate (PEM), written at creation.
    pub fn ca_path(&self) -> PathBuf {
        self.ca_file.clone()
    }

    /// Writes `<file>.pem` and `<file>.key` for a server certificate with subject
    /// CN `cn` and DNS names `names`, signed with `alg` (None: ECDSA P-256).
    pub fn server(
        &self,
        file: &str,
        cn: &str,
        names: &[&str],
        alg: Option<&'static SignatureAlgorithm>,
    ) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.write(file, params, alg)
    }

    /// A client certificate with subject `O=Pier Tests,CN=<cn>` (RFC 4514 order).
    pub fn client(&self, file: &str, cn: &str) -> (PathBuf, PathBuf) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Pier Tests");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.write(file, params, None)
    }

    fn write(
        &self,
        file: &str,
        params: CertificateParams,
        alg: Option<&'static SignatureAlgorithm>,
    ) -> (PathBuf, PathBuf) {
        let key = match alg {
            Some(a) => KeyPair::generate_for(a).unwrap(),
            None => KeyPair::generate().unwrap(),
        };
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let cert_path = self.dir.join(format!("{file}.pem"));
        let key_path = self.dir.join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem() + &self.ca.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

/// What the server presented in the last handshake of a [`Recorder`] client.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub leaf: Option<CertificateDer<'static>>,
    pub ocsp: Vec<u8>,
}

/// Accepts any server certificate and remembers it, for tests about which
/// certificate was chosen rather than whether it verifies.
#[derive(Debug)]
pub struct Recorder {
    pub seen: Mutex<Seen>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl Recorder {
    /// The OCSP response stapled in the last handshake (empty: none).
    pub fn lock_ocsp(&self) -> Vec<u8> {
        self.seen.lock().unwrap().ocsp.clone()
    }
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap() = Seen {
            leaf: Some(end_entity.clone().into_owned()),
            ocsp: ocsp.to_vec(),
        };
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A client that accepts any certificate and records it.
pub fn recording_client(sni: bool) -> (Arc<ClientConfig>, Arc<Recorder>) {
    recording_client_for(sni, rustls::DEFAULT_VERSIONS)
}

/// [`recording_client`] limited to some protocol versions.
pub fn recording_client_for(
    sni: bool,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> (Arc<ClientConfig>, Arc<Recorder>) {
    let recorder = Arc::new(Recorder {
        seen: Mutex::new(Seen::default()),
        provider: provider(),
    });
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(recorder.clone())
        .with_no_client_auth();
    cfg.enable_sni = sni;
    // Every handshake full, so each one shows the certificate the server chose.
    cfg.resumption = rustls::client::Resumption::disabled();
    (Arc::new(cfg), recorder)
}

/// A verifying client trusting `ca`, optionally presenting a client certificate.
pub fn verifying_client(ca: &Path, client: Option<&(PathBuf, PathBuf)>) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match client {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            let key = PrivateKeyDer::from_pem_file(key).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
    };
    Arc::new(cfg)
}

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects and completes the handshake.
pub fn connect_tls(
    addr: SocketAddr,
    name: &str,
    cfg: &Arc<ClientConfig>,
) -> std::io::Result<TlsStream> {
    let sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.set_write_timeout(Some(Duration::from_secs(10)))?;
    let server_name = ServerName::try_from(name.to_string()).unwrap();
    let conn = ClientConnection::new(cfg.clone(), server_name)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut s = StreamOwned::new(conn, sock);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// Sends one GET and reads one response (Content-Length framed).
pub fn tls_get(s: &mut TlsStream, path: &str) -> std::io::Result<Response> {
    tls_request(s, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"))
}

/// Sends `request` (raw bytes, head and body) and reads one response
/// (Content-Length framed).
pub fn tls_request(s: &mut TlsStream, request: &str) -> std::io::Result<Response> {
    s.write_all(request.as_bytes())?;
    s.flush()?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 65536];
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    let mut resp = Response {
        status,
        headers,
        body: buf[end..].to_vec(),
    };
    let len: usize = resp
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while resp.body.len() < len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        resp.body.extend_from_slice(&chunk[..n]);
    }
    Ok(resp)
}

/// Subject of a certificate, e.g. `CN=a.test`.
pub fn subject(cert: &CertificateDer<'_>) -> String {
    pier::tls::subject_of(cert).unwrap_or_default()
}

/// Subject of the certificate the last handshake of `r` saw.
pub fn seen_subject(r: &Recorder) -> String {
    r.seen
        .lock()
        .unwrap()
        .leaf
        .as_ref()
        .map(subject)
        .unwrap_or_default()
}

/// `openssl s_client` against `addr` with `args`, sending `input` and waiting for
/// the server to close; returns (success, stdout + stderr). None without openssl.
pub fn s_client(addr: SocketAddr, args: &[&str], input: &str) -> Option<(bool, String)> {
    let openssl = which("openssl")?;
    let mut child = Command::new(openssl)
        .arg("s_client")
        .arg("-connect")
        .arg(addr.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}
