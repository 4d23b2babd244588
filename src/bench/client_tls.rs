//! The load generator's TLS client: rustls on the same aws-lc-rs provider and
//! suites as the server side ([`crate::tls::provider`]), so both ends of a
//! benchmark run the same crypto.
//!
//! A [`rustls::ClientConfig`] is built once per client thread: its session cache
//! (for `--resume`) then belongs to that thread and no handshake takes a lock
//! another thread holds.

use std::path::Path;
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::RootCertStore;

use super::args::TlsArgs;
use super::cacert_trust::CacertVerifier;
use crate::tls::any_server_cert::{AnyServerCert, HandshakeSignatures};

/// Where system trust anchors usually live on Linux.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// How to verify the server, decided once from the flags.
#[derive(Clone, Debug)]
enum Trust {
    /// `--insecure`.
    Anything,
    /// The system bundle.
    Roots(Arc<RootCertStore>),
    /// `--cacert`: its certificates as roots, or as the server's own.
    Cacert(Arc<CacertVerifier>),
}

/// Everything needed to build per-thread client configs and connect.
#[derive(Clone, Debug)]
pub struct ClientTls {
    trust: Trust,
    /// Name sent as SNI and checked against the certificate.
    pub server_name: ServerName<'static>,
    alpn: Vec<Vec<u8>>,
    resume: bool,
}

impl ClientTls {
    /// Validates the flags and loads the trust anchors; `host` is the target's
    /// host, the server name unless `--sni` says otherwise. `alpn` is offered as given.
    pub fn new(
        args: &TlsArgs,
        host: &str,
        alpn: &[&[u8]],
        resume: bool,
    ) -> Result<ClientTls, String> {
        let name = args.sni.as_deref().unwrap_or(host);
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|_| format!("{name:?} is not a valid TLS server name"))?;
        let trust = if args.insecure {
            Trust::Anything
        } else if let Some(path) = &args.cacert {
            let certs = load_certs(path)?;
            let roots = Arc::new(roots_of(path, certs.clone())?);
            Trust::Cacert(Arc::new(CacertVerifier::new(roots, certs)?))
        } else {
            let bundle = SYSTEM_BUNDLES
                .iter()
                .map(Path::new)
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    "no system CA bundle found; give --cacert FILE or --insecure".to_string()
                })?;
            Trust::Roots(Arc::new(load_roots(bundle)?))
        };
        Ok(ClientTls {
            trust,
            server_name,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            resume,
        })
    }

    /// A fresh client config with its own session cache (one per client thread).
    pub fn config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let provider = crate::tls::provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?;
        let mut cfg = match &self.trust {
            Trust::Anything => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyServerCert::new(
                    provider,
                    HandshakeSignatures::Unchecked,
                )))
                .with_no_client_auth(),
            Trust::Roots(roots) => builder
                .with_root_certificates(roots.clone())
                .with_no_client_auth(),
            Trust::Cacert(verifier) => builder
                .dangerous()
                .with_custom_certificate_verifier(verifier.clone())
                .with_no_client_auth(),
        };
        cfg.alpn_protocols = self.alpn.clone();
        cfg.resumption = if self.resume {
            Resumption::in_memory_sessions(256)
        } else {
            Resumption::disabled()
        };
        Ok(Arc::new(cfg))
    }
}

/// Advice for a server certificate the client does not trust (a self-signed or
/// private CA certificate, as `pier serve` generates).
pub fn untrusted_hint(error: &str) -> &'static str {
    let lower = error.to_ascii_lowercase();
    if lower.contains("issuer") || lower.contains("trusted ca") || lower.contains("self-signed") {
        ". The server's certificate is not signed by a trusted CA: pass -k to accept \
         any certificate, or --cacert FILE to trust the CA that signed it"
    } else {
        ""
    }
}

fn load_roots(path: &Path) -> Result<RootCertStore, String> {
    roots_of(path, load_certs(path)?)
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn roots_of(path: &Path, certs: Vec<CertificateDer<'static>>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("{}: no usable certificate found", path.display()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_name_defaults_to_host_and_sni_overrides() {
        let args = TlsArgs {
            insecure: true,
            ..TlsArgs::default()
        };
        let t = ClientTls::new(&args, "127.0.0.1", &[], false).unwrap();
        assert!(matches!(t.server_name, ServerName::IpAddress(_)));
        let args = TlsArgs {
            insecure: true,
            sni: Some("example.com".into()),
            ..TlsArgs::default()
        };
        let t = ClientTls::new(&args, "127.0.0.1", &[b"http/1.1"], true).unwrap();
        assert!(matches!(t.server_name, ServerName::DnsName(_)));
        let cfg = t.config().unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let args = TlsArgs {
            insecure: true,
            sni: Some("bad name!".into()),
            ..TlsArgs::default()
        };
        assert!(ClientTls::new(&args, "h", &[], false).is_err());
    }

    #[test]
    fn cacert_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let args = TlsArgs {
            cacert: Some(empty),
            ..TlsArgs::default()
        };
        let e = ClientTls::new(&args, "localhost", &[], false).unwrap_err();
        assert!(e.contains("no usable certificate"), "{e}");
        let args = TlsArgs {
            cacert: Some(dir.path().join("missing.pem")),
            ..TlsArgs::default()
        };
        assert!(ClientTls::new(&args, "localhost", &[], false).is_err());
    }
}
