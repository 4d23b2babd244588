//! TLS termination on rustls with the aws-lc-rs provider: TLS 1.2 and 1.3 only,
//! AEAD suites only, X25519 / P-256 / X25519MLKEM768, ALPN `http/1.1`, no
//! renegotiation (rustls has none).
//!
//! Each TLS listener has a [`TlsListener`]: the rustls config built from its
//! settings. SIGHUP builds new ones with the rest of the configuration, so new
//! connections get re-read certificates while open ones keep theirs. Each worker
//! keeps its own copy of that config ([`WorkerTls`]) with its own TLS 1.2 session
//! cache; certificate choice ([`sni`]) and session tickets ([`tickets`]) read
//! lock-free structures. Nothing takes a process-wide lock per handshake.

pub mod acme;
pub mod any_server_cert;
pub mod dn;
mod early_data;
pub mod error_text;
mod listener_config;
pub mod names;
pub mod plain_http;
pub mod sni;
pub mod stream;
pub mod tickets;

pub use listener_config::listener_tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::config::value::{read_named_file, MAX_PEM_FILE};
use early_data::EarlyDataSessions;
use sni::{CertStore, SniEntry, SniResolver};
use tickets::{TicketSecret, Ticketer};

/// Names the generated certificate is valid for.
pub const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Largest OCSP response file read; real responses are a few KiB.
const MAX_OCSP_FILE: u64 = 1 << 20;

/// The crypto provider: aws-lc-rs, restricted to AEAD cipher suites and to the
/// X25519, P-256 and hybrid post-quantum key exchanges.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::aws_lc_rs::kx_group;
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    // Every suite aws-lc-rs offers for 1.2 and 1.3 is ECDHE + AEAD; keep it that way
    // should the default list ever grow.
    p.cipher_suites.retain(|s| {
        let name = format!("{:?}", s.suite());
        name.contains("GCM") || name.contains("CHACHA20_POLY1305")
    });
    p.kx_groups = vec![
        kx_group::X25519MLKEM768,
        kx_group::X25519,
        kx_group::SECP256R1,
    ];
    Arc::new(p)
}

/// A certificate chain and key, generated or loaded.
pub struct CertKey {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Private key.
    pub key: PrivateKeyDer<'static>,
}

/// How long a generated certificate is valid: long enough for any test or
/// trial, short as certificates go (rcgen's default ends in 4096).
pub const SELF_SIGNED_LIFETIME: std::time::Duration = std::time::Duration::from_secs(90 * 86400);

/// The generated certificate, kept for the process's life so a reload serves
/// the same one (a client that accepted it once need not again); replaced
/// when less than a third of its lifetime is left.
static SELF_SIGNED: std::sync::Mutex<Option<(i64, CertificateDer<'static>, Vec<u8>)>> =
    std::sync::Mutex::new(None);

/// A self-signed ECDSA P-256 certificate for localhost, 127.0.0.1 and ::1,
/// valid for [`SELF_SIGNED_LIFETIME`]: generated once, then the same one.
pub fn self_signed() -> Result<CertKey, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    let mut kept = SELF_SIGNED.lock().unwrap_or_else(|e| e.into_inner());
    let renew_at = |not_after: i64| not_after - (SELF_SIGNED_LIFETIME.as_secs() / 3) as i64;
    let fresh = kept
        .as_ref()
        .is_some_and(|(not_after, _, _)| (now.as_secs() as i64) < renew_at(*not_after));
    if !fresh {
        let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names)
            .map_err(|e| format!("cannot generate a certificate: {e}"))?;
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        // An hour back for clients whose clocks run behind.
        params.not_before = epoch + now.saturating_sub(std::time::Duration::from_secs(3600));
        params.not_after = epoch + now + SELF_SIGNED_LIFETIME;
        let key = rcgen::KeyPair::generate()
            .map_err(|e| format!("cannot generate a certificate: {e}"))?;
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("cannot generate a certificate: {e}"))?;
        let not_after = (now + SELF_SIGNED_LIFETIME).as_secs() as i64;
        *kept = Some((not_after, cert.der().clone(), key.serialize_der()));
    }
    let (_, cert, key) = kept.as_ref().expect("generated above");
    let key = PrivateKeyDer::try_from(key.clone()).map_err(|e| e.to_string())?;
    Ok(CertKey {
        chain: vec![cert.clone()],
        key,
    })
}

/// Reads a PEM chain and key from files; the error says which of the two failed.
pub fn load_pem(cert: &str, key: &str) -> Result<CertKey, LoadError> {
    let chain = read_pem_certs(cert).map_err(|e| LoadError::new(TlsSetting::Cert, e))?;
    if chain.is_empty() {
        return Err(LoadError::new(
            TlsSetting::Cert,
            format!("{cert}: no certificate found"),
        ));
    }
    let pem = read_named_file(key, MAX_PEM_FILE)
        .map_err(|e| LoadError::new(TlsSetting::Key, format!("{key}: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| LoadError::new(TlsSetting::Key, format!("{key}: {e}")))?;
    Ok(CertKey { chain, key })
}

/// Every certificate in a PEM file (a chain or a CA bundle), read bounded; the
/// error names the file.
pub fn read_pem_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_named_file(path, MAX_PEM_FILE).map_err(|e| format!("{path}: {e}"))?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{path}: {e}"))
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

/// The subject of a (verified) client certificate as an RFC 4514 string, for logs
/// and for forwarding upstream.
pub fn subject_of(cert: &CertificateDer<'_>) -> Option<String> {
    let parsed = webpki::EndEntityCert::try_from(cert).ok()?;
    dn::format_name(parsed.subject())
}

/// Builds a rustls server config serving one certificate (for `pier echo` and
/// tests); listeners use [`TlsListener`].
pub fn server_config(ck: CertKey) -> Result<Arc<ServerConfig>, String> {
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(ck.chain, ck.key)
        .map_err(|e| format!("certificate and key do not work together: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Client certificate policy of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// A certificate is asked for; one that is sent must verify, none is fine.
    Optional,
    /// A verified certificate is required to complete the handshake.
    Required,
}

/// Files of one certificate, re-read on reload.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM chain, leaf first.
    pub cert: String,
    /// PEM private key (ECDSA, RSA or Ed25519).
    pub key: String,
    /// DER OCSP response to staple.
    pub ocsp_response: Option<String>,
    /// SNI names; `None` takes the certificate's DNS names.
    pub names: Option<Vec<String>>,
    /// Served to clients without SNI or with an unknown name.
    pub default: bool,
}

/// Where a listener's certificates come from.
#[derive(Clone)]
pub enum CertSource {
    /// Files, re-read on SIGHUP.
    Files(Vec<CertFiles>),
    /// Generated at start for localhost; kept across reloads.
    Generated(Arc<CertifiedKey>),
    /// Ordered from an ACME CA and renewed by the ACME thread.
    Acme(acme::AcmeListener),
}

/// A TLS listener's validated settings: everything needed to (re)build its config.
#[derive(Clone)]
pub struct TlsSpec {
    /// Protocols offered by ALPN, in order of preference.
    pub alpn: Vec<Vec<u8>>,
    /// Certificates.
    pub certs: CertSource,
    /// Reject handshakes without SNI or with a name no certificate covers.
    pub sni_required: bool,
    /// PEM file of CAs that client certificates must chain to.
    pub client_ca: Option<String>,
    /// Whether a client certificate is asked for or required.
    pub client_auth: ClientAuth,
    /// Secret file for session tickets shared across instances.
    pub ticket_key_file: Option<String>,
    /// Sessions cached per worker (0: none).
    pub session_cache: usize,
    /// QUIC accepts 0-RTT early data from resuming clients.
    pub early_data: bool,
}

/// Which setting a load error is about, so config errors can point at its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsSetting {
    /// `cert` of certificate N (index filled in by the caller).
    Cert,
    /// `key` of certificate N.
    Key,
    /// `ocsp_response` of certificate N.
    Ocsp,
    /// `client_ca`.
    ClientCa,
    /// `ticket_key_file`.
    TicketKeyFile,
}

/// A certificate, key, CA or ticket file that could not be used.
#[derive(Debug, Clone)]
pub struct LoadError {
    /// The setting at fault.
    pub field: TlsSetting,
    /// Certificate index for `Cert`, `Key` and `Ocsp`.
    pub index: usize,
    /// What is wrong, naming the file.
    pub message: String,
}

impl LoadError {
    fn new(field: TlsSetting, message: String) -> LoadError {
        LoadError {
            field,
            index: 0,
            message,
        }
    }

    fn at(mut self, index: usize) -> LoadError {
        self.index = index;
        self
    }
}

/// Loads one certificate with its key and OCSP staple, and the names it serves.
fn load_certificate(f: &CertFiles) -> Result<SniEntry, LoadError> {
    let ck = load_pem(&f.cert, &f.key)?;
    let names = match &f.names {
        Some(n) => n.clone(),
        None => {
            let leaf = webpki::EndEntityCert::try_from(&ck.chain[0]).map_err(|e| {
                LoadError::new(
                    TlsSetting::Cert,
                    format!(
                        "{}: not a usable X.509 certificate ({})",
                        f.cert,
                        error_text::describe_webpki_error(&e)
                    ),
                )
            })?;
            leaf.valid_dns_names()
                .map(|n| n.to_ascii_lowercase())
                .collect()
        }
    };
    let mut key = CertifiedKey::from_der(ck.chain, ck.key, &provider()).map_err(|e| {
        LoadError::new(
            TlsSetting::Key,
            format!(
                "the key in {} does not fit the certificate in {}: {}; give the key the \
                 certificate was issued for",
                f.key,
                f.cert,
                error_text::describe_tls_error(&e)
            ),
        )
    })?;
    if let Some(path) = &f.ocsp_response {
        let der = read_named_file(path, MAX_OCSP_FILE)
            .map_err(|e| LoadError::new(TlsSetting::Ocsp, format!("{path}: {e}")))?;
        if der.is_empty() || der[0] != 0x30 {
            return Err(LoadError::new(
                TlsSetting::Ocsp,
                format!("{path}: not a DER OCSP response"),
            ));
        }
        key.ocsp = Some(der);
    }
    Ok(SniEntry {
        names,
        default: f.default,
        key: Arc::new(key),
    })
}

/// What the log says about a built config.
struct Built {
    config: ServerConfig,
    /// SHA-256 of the default (or first) certificate.
    fingerprint: String,
    /// What the status page shows of each certificate.
    served: Vec<ServedCert>,
}

/// A certificate a listener serves, as operators see it: the names it answers
/// for and when it expires, read once when it is loaded.
#[derive(Debug, Clone)]
pub struct ServedCert {
    /// Names chosen by SNI (`*.` prefixes are wildcards).
    pub names: Vec<String>,
    /// Served to clients without SNI or with an unknown name.
    pub default: bool,
    /// The leaf's `notAfter`, in seconds since the Unix epoch.
    pub not_after_unix: Option<i64>,
    /// SHA-256 of the leaf, as in the startup log.
    pub fingerprint: String,
}

/// The leaf's `notAfter` (seconds since the Unix epoch), if it parses.
pub fn not_after_unix(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, not_after) = acme::state::validity(cert).ok()?;
    let secs = not_after
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    i64::try_from(secs).ok()
}

/// Reads every file of `spec` and builds the rustls config.
fn build_listener_config(
    spec: &TlsSpec,
    ticketer: Option<&Arc<Ticketer>>,
) -> Result<Built, LoadError> {
    let entries = match &spec.certs {
        CertSource::Acme(_) => Vec::new(),
        CertSource::Generated(key) => vec![SniEntry {
            names: SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect(),
            default: true,
            key: key.clone(),
        }],
        CertSource::Files(files) => files
            .iter()
            .enumerate()
            .map(|(i, f)| load_certificate(f).map_err(|e| e.at(i)))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let shown = match &spec.certs {
        CertSource::Acme(a) => a
            .spec
            .names
            .iter()
            .find_map(|n| a.certs.current(n))
            .map_or_else(|| "none yet".to_string(), |k| fingerprint(&k.cert[0])),
        _ => entries
            .iter()
            .find(|e| e.default)
            .or(entries.first())
            .map(|e| fingerprint(&e.key.cert[0]))
            .unwrap_or_default(),
    };
    let served = entries
        .iter()
        .map(|e| ServedCert {
            names: e.names.clone(),
            default: e.default,
            not_after_unix: not_after_unix(&e.key.cert[0]),
            fingerprint: fingerprint(&e.key.cert[0]),
        })
        .collect();
    let verifier = match (&spec.client_ca, spec.client_auth) {
        (Some(ca), auth) if auth != ClientAuth::None => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = read_pem_certs(ca).map_err(|e| LoadError::new(TlsSetting::ClientCa, e))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(LoadError::new(
                    TlsSetting::ClientCa,
                    format!("{ca}: no usable CA certificate"),
                ));
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let b = if auth == ClientAuth::Optional {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| LoadError::new(TlsSetting::ClientCa, format!("{ca}: {e}")))?
        }
        _ => WebPkiClientVerifier::no_client_auth(),
    };
    let resolver: Arc<dyn rustls::server::ResolvesServerCert> = match &spec.certs {
        CertSource::Acme(a) => Arc::new(acme::AcmeResolver(a.certs.clone())),
        _ => Arc::new(SniResolver(CertStore::new(entries, spec.sni_required))),
    };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| LoadError::new(TlsSetting::Cert, e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(resolver);
    config.alpn_protocols = spec.alpn.clone();
    if matches!(spec.certs, CertSource::Acme(_)) {
        // Chosen only by validation handshakes, which offer nothing else.
        config.alpn_protocols.push(acme::ACME_TLS_ALPN.to_vec());
    }
    if let Some(t) = ticketer {
        config.ticketer = t.clone();
    }
    Ok(Built {
        config,
        fingerprint: shown,
        served,
    })
}

/// A TLS listener at run time: the config built from its settings. A reload
/// builds a new one with the rest of the configuration; [`TlsListener::keep_tickets_of`]
/// then carries the old session-ticket keys over.
pub struct TlsListener {
    spec: TlsSpec,
    ticketer: Option<Arc<Ticketer>>,
    rotation: Duration,
    config: Arc<ServerConfig>,
    served: Vec<ServedCert>,
    /// The QUIC side's session store, with `early_data`.
    early_data: Option<EarlyDataSessions>,
    /// The key of the QUIC side's Retry tokens, kept across reloads so a
    /// token sent just before one is still taken after it.
    quic_token_key: Arc<aws_lc_rs::hkdf::Prk>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("session_tickets", &self.ticketer.is_some())
            .finish()
    }
}

impl TlsListener {
    /// Loads everything once; the returned fingerprint is for the startup log.
    pub fn new(
        spec: TlsSpec,
        session_tickets: bool,
        ticket_rotation: Duration,
    ) -> Result<(TlsListener, String), LoadError> {
        let secret = match &spec.ticket_key_file {
            Some(path) => TicketSecret::from_file(path),
            None => TicketSecret::random(),
        }
        .map_err(|m| LoadError::new(TlsSetting::TicketKeyFile, m))?;
        let quic_token_key = secret.quic_token_key();
        let ticketer = session_tickets.then(|| Arc::new(Ticketer::new(secret, ticket_rotation)));
        let built = build_listener_config(&spec, ticketer.as_ref())?;
        let early_data = spec
            .early_data
            .then(|| EarlyDataSessions::new(spec.session_cache));
        Ok((
            TlsListener {
                early_data,
                spec,
                ticketer,
                rotation: ticket_rotation,
                config: Arc::new(built.config),
                served: built.served,
                quic_token_key,
            },
            built.fingerprint,
        ))
    }

    /// After a reload: when both this listener and the one it replaces key their
    /// tickets from a random secret with the same rotation, this one takes over
    /// the old keys, so tickets issued before the reload still resume. (With a
    /// `ticket_key_file` the keys come from the file, re-read by the reload.)
    /// The QUIC side's Retry token key is carried over the same way.
    /// Returns whether the ticket keys were carried over.
    pub fn keep_tickets_of(&mut self, old: &TlsListener) -> bool {
        if self.spec.ticket_key_file.is_none() {
            self.quic_token_key = old.quic_token_key.clone();
        }
        // The QUIC side's stored sessions go on resuming 0-RTT clients.
        if let (Some(_), Some(sessions)) = (&self.early_data, &old.early_data) {
            self.early_data = Some(sessions.clone());
        }
        let (Some(_), Some(old_ticketer)) = (&self.ticketer, &old.ticketer) else {
            return false;
        };
        if self.spec.ticket_key_file.is_some()
            || old.spec.ticket_key_file.is_some()
            || self.rotation != old.rotation
        {
            return false;
        }
        let mut config = ServerConfig::clone(&self.config);
        config.ticketer = old_ticketer.clone();
        self.config = Arc::new(config);
        self.ticketer = Some(old_ticketer.clone());
        true
    }

    /// The certificates this listener serves now, for the status page (an ACME
    /// listener's change as they are issued and renewed).
    pub fn certificates(&self) -> Vec<ServedCert> {
        let CertSource::Acme(a) = &self.spec.certs else {
            return self.served.clone();
        };
        a.certs
            .names()
            .iter()
            .filter_map(|n| {
                let k = a.certs.current(n)?;
                Some(ServedCert {
                    names: vec![n.clone()],
                    default: false,
                    not_after_unix: not_after_unix(&k.cert[0]),
                    fingerprint: fingerprint(&k.cert[0]),
                })
            })
            .collect()
    }

    /// The ACME settings and certificates, for a listener that orders its own.
    pub fn acme(&self) -> Option<&acme::AcmeListener> {
        match &self.spec.certs {
            CertSource::Acme(a) => Some(a),
            _ => None,
        }
    }

    /// A worker's handle: its own config copy, with its own TLS 1.2 session cache.
    pub fn worker(&self) -> WorkerTls {
        let mut config = ServerConfig::clone(&self.config);
        config.session_storage = match self.spec.session_cache {
            0 => Arc::new(NoServerSessionStorage {}),
            n => ServerSessionMemoryCache::new(n),
        };
        WorkerTls {
            config: Arc::new(config),
        }
    }
}

impl TlsListener {
    /// A worker's TLS config for the listener's QUIC side: the same
    /// certificates and SNI resolver as its TCP side, ALPN `h3` only. Without
    /// `early_data` it resumes with the TCP side's ticket keys and takes no
    /// early data; with it, 0-RTT is accepted on resumptions from the
    /// listener's shared session store.
    pub fn quic_config(&self) -> Arc<ServerConfig> {
        let mut config = ServerConfig::clone(&self.config);
        config.alpn_protocols = vec![b"h3".to_vec()];
        match &self.early_data {
            Some(sessions) => sessions.allow_in(&mut config),
            None => {
                config.max_early_data_size = 0;
                config.session_storage = match self.spec.session_cache {
                    0 => Arc::new(NoServerSessionStorage {}),
                    n => ServerSessionMemoryCache::new(n),
                };
            }
        }
        Arc::new(config)
    }

    /// The key of the QUIC side's Retry tokens: the same for every worker
    /// and across reloads ([`TlsListener::keep_tickets_of`]), and derived
    /// from the `ticket_key_file` when there is one.
    pub fn quic_token_key(&self) -> Arc<aws_lc_rs::hkdf::Prk> {
        self.quic_token_key.clone()
    }

    /// Whether the QUIC side accepts 0-RTT early data.
    pub fn early_data(&self) -> bool {
        self.early_data.is_some()
    }
}

/// One worker's view of a TLS listener.
pub struct WorkerTls {
    config: Arc<ServerConfig>,
}

impl WorkerTls {
    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

/// A TLS listener's ready-to-use server configuration.
#[derive(Clone)]
pub struct ListenerTls {
    /// Certificates and rustls configuration.
    pub listener: Arc<TlsListener>,
    /// SHA-256 fingerprint of the default certificate, for the startup log.
    pub fingerprint: String,
    /// Where the certificate came from, for the startup log.
    pub origin: String,
    /// Deadline for a full handshake.
    pub handshake_timeout: Duration,
}

impl fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerTls")
            .field("fingerprint", &self.fingerprint)
            .field("origin", &self.origin)
            .finish()
    }
}

/// A certificate and key for one name, generated for unit tests.
#[cfg(test)]
pub(crate) fn test_certified_key(name: &str) -> Arc<CertifiedKey> {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    let der = PrivateKeyDer::try_from(ck.signing_key.serialize_der()).unwrap();
    Arc::new(CertifiedKey::from_der(vec![ck.cert.der().clone()], der, &provider()).unwrap())
}

#[cfg(test)]
mod self_signed_tests {
    use super::*;

    #[test]
    fn the_generated_certificate_is_kept_and_lives_90_days() {
        let first = self_signed().unwrap();
        let second = self_signed().unwrap();
        assert_eq!(first.chain, second.chain, "one certificate per process");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let left = not_after_unix(&first.chain[0]).unwrap() - now;
        assert!((89 * 86400..=90 * 86400).contains(&left), "{left} s left");
    }
}

#[cfg(test)]
mod quic_token_key_tests {
    use std::sync::Arc;

    use aws_lc_rs::hkdf::{Prk, HKDF_SHA256};

    fn listener(tls: &str) -> crate::config::Config {
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:1\"\ntls = {{ self_signed = true{tls} }}\n\
             [[route]]\nhandler = \"respond\"\n"
        );
        crate::config::check_text(&text).unwrap()
    }

    fn okm(key: &Prk) -> [u8; 32] {
        let mut out = [0u8; 32];
        let info = [&b"probe"[..]];
        key.expand(&info, HKDF_SHA256)
            .unwrap()
            .fill(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn a_reload_keeps_the_quic_token_key() {
        let old = listener("");
        let mut next = listener("");
        let old_tls = &old.listeners[0].tls.as_ref().unwrap().listener;
        let next_tls = Arc::get_mut(&mut next.listeners[0].tls.as_mut().unwrap().listener)
            .expect("not shared yet");
        let (before, fresh) = (old_tls.quic_token_key(), next_tls.quic_token_key());
        assert_ne!(okm(&before), okm(&fresh), "random until carried over");
        next_tls.keep_tickets_of(old_tls);
        assert_eq!(okm(&before), okm(&next_tls.quic_token_key()));
    }

    #[test]
    fn a_ticket_key_file_derives_the_same_quic_token_key_in_every_instance() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticket.key");
        std::fs::write(&path, [7u8; 80]).unwrap();
        let tls = format!(", ticket_key_file = {:?}", path.display().to_string());
        let (a, b) = (listener(&tls), listener(&tls));
        let key = |c: &crate::config::Config| {
            okm(&c.listeners[0]
                .tls
                .as_ref()
                .unwrap()
                .listener
                .quic_token_key())
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&listener("")));
    }
}
