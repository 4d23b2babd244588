//! TLS termination on rustls with the aws-lc-rs provider: TLS 1.2 and 1.3 only,
//! AEAD suites only, ALPN `http/1.1`. A [`rustls::ServerConfig`] is built once per
//! listener at start and shared read-only; nothing here takes a lock per handshake.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use toml::Spanned;

use crate::config::raw::RawTls;
use crate::config::{ConfigError, ListenerTls, Locator};

/// Names the generated certificate is valid for.
pub const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The crypto provider: aws-lc-rs, restricted to AEAD cipher suites.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    // Every suite aws-lc-rs offers for 1.2 and 1.3 is ECDHE + AEAD; keep it that way
    // should the default list ever grow.
    p.cipher_suites.retain(|s| {
        let name = format!("{:?}", s.suite());
        name.contains("GCM") || name.contains("CHACHA20_POLY1305")
    });
    Arc::new(p)
}

/// A certificate chain and key, generated or loaded.
pub struct CertKey {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Private key.
    pub key: PrivateKeyDer<'static>,
}

/// Generates a self-signed ECDSA P-256 certificate for localhost, 127.0.0.1 and ::1.
pub fn self_signed() -> Result<CertKey, String> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot generate a certificate: {e}"))?;
    let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der()).map_err(|e| e.to_string())?;
    Ok(CertKey {
        chain: vec![ck.cert.der().clone()],
        key,
    })
}

/// Reads a PEM chain and key from files.
pub fn load_pem(cert: &str, key: &str) -> Result<CertKey, (bool, String)> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| (true, format!("{cert}: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| (true, format!("{cert}: {e}")))?;
    if chain.is_empty() {
        return Err((true, format!("{cert}: no certificate found")));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| (false, format!("{key}: {e}")))?;
    Ok(CertKey { chain, key })
}

/// Hex SHA-256 of a DER certificate, colon-separated like `openssl x509 -fingerprint`.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, cert.as_ref());
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Builds the rustls server config for one certificate.
pub fn server_config(ck: CertKey) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(ck.chain, ck.key)
        .map_err(|e| format!("certificate and key do not work together: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Validates a listener's `tls` table and builds its server config.
pub fn listener_tls(
    loc: &Locator<'_>,
    key: &str,
    t: &Spanned<RawTls>,
) -> Result<ListenerTls, ConfigError> {
    let raw = t.get_ref();
    let handshake_timeout = match &raw.handshake_timeout {
        None => Duration::from_secs(10),
        Some(d) => crate::config::parse_duration(d.get_ref())
            .map_err(|m| loc.error(d.span(), &format!("{key}.handshake_timeout"), m))?,
    };
    let (ck, origin) = match (&raw.cert, &raw.key, raw.self_signed.unwrap_or(false)) {
        (Some(c), Some(k), false) => {
            let ck = load_pem(c.get_ref(), k.get_ref()).map_err(|(is_cert, m)| {
                if is_cert {
                    loc.error(c.span(), &format!("{key}.cert"), m)
                } else {
                    loc.error(k.span(), &format!("{key}.key"), m)
                }
            })?;
            (ck, c.get_ref().clone())
        }
        (None, None, true) => {
            let ck = self_signed().map_err(|m| loc.error(t.span(), key, m))?;
            (ck, "self-signed for localhost".to_string())
        }
        _ => {
            return Err(loc.error(
                t.span(),
                key,
                "give either `cert` and `key`, or `self_signed = true`",
            ))
        }
    };
    let fingerprint = fingerprint(&ck.chain[0]);
    let server_config = server_config(ck).map_err(|m| loc.error(t.span(), key, m))?;
    Ok(ListenerTls {
        server_config,
        fingerprint,
        origin,
        handshake_timeout,
    })
}
