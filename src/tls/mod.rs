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
pub mod dn;
pub mod error_text;
pub mod names;
pub mod plain_http;
pub mod sni;
pub mod stream;
pub mod tickets;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawCertificate, RawTls};
use crate::config::value::{int, parse_duration, read_named_file, MAX_PEM_FILE};
use sni::{CertStore, SniEntry, SniResolver};
use tickets::{TicketSecret, Ticketer};

/// Names the generated certificate is valid for.
pub const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Sessions remembered per worker for clients that resume without tickets. Each
/// worker owns its cache, so no lock is shared between workers.
const DEFAULT_SESSION_CACHE: i64 = 1024;

/// Default rotation of session ticket keys.
const DEFAULT_TICKET_ROTATION: Duration = Duration::from_secs(3600);
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
fn build(spec: &TlsSpec, ticketer: Option<&Arc<Ticketer>>) -> Result<Built, LoadError> {
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
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
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
        let ticketer = if session_tickets {
            let secret = match &spec.ticket_key_file {
                Some(path) => TicketSecret::from_file(path),
                None => TicketSecret::random(),
            }
            .map_err(|m| LoadError::new(TlsSetting::TicketKeyFile, m))?;
            Some(Arc::new(Ticketer::new(secret, ticket_rotation)))
        } else {
            None
        };
        let built = build(&spec, ticketer.as_ref())?;
        Ok((
            TlsListener {
                spec,
                ticketer,
                rotation: ticket_rotation,
                config: Arc::new(built.config),
                served: built.served,
            },
            built.fingerprint,
        ))
    }

    /// After a reload: when both this listener and the one it replaces key their
    /// tickets from a random secret with the same rotation, this one takes over
    /// the old keys, so tickets issued before the reload still resume. (With a
    /// `ticket_key_file` the keys come from the file, re-read by the reload.)
    /// Returns whether the keys were carried over.
    pub fn keep_tickets_of(&mut self, old: &TlsListener) -> bool {
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

fn spanned_path(s: &Spanned<String>) -> String {
    s.get_ref().clone()
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
        Some(d) => parse_duration(d.get_ref())
            .map_err(|m| loc.error(d.span(), &format!("{key}.handshake_timeout"), m))?,
    };
    let ticket_rotation = match &raw.ticket_rotation {
        None => DEFAULT_TICKET_ROTATION,
        Some(d) => {
            let v = parse_duration(d.get_ref())
                .map_err(|m| loc.error(d.span(), &format!("{key}.ticket_rotation"), m))?;
            if v < Duration::from_secs(60) || v > Duration::from_secs(7 * 24 * 3600) {
                return Err(loc.error(
                    d.span(),
                    &format!("{key}.ticket_rotation"),
                    "must be between 1m and 168h",
                ));
            }
            v
        }
    };

    // The shorthand `cert`/`key`/`ocsp_response` is certificate 1; the
    // `certificate` list follows; the spans stay for error messages.
    let mut entries: Vec<(String, RawCertificateRef<'_>)> = Vec::new();
    match (&raw.cert, &raw.key) {
        (Some(c), Some(k)) => {
            let shorthand = RawCertificateRef {
                span: t.span(),
                cert: c,
                key: k,
                ocsp_response: raw.ocsp_response.as_ref(),
                names: None,
                default: false,
            };
            entries.push((key.to_string(), shorthand));
        }
        (None, None) => {
            if let Some(o) = &raw.ocsp_response {
                return Err(loc.error(
                    o.span(),
                    &format!("{key}.ocsp_response"),
                    "goes with `cert` and `key` (or inside a `certificate` entry)",
                ));
            }
        }
        (Some(c), None) => {
            return Err(loc.error(c.span(), &format!("{key}.key"), "`cert` needs `key`"))
        }
        (None, Some(k)) => {
            return Err(loc.error(k.span(), &format!("{key}.cert"), "`key` needs `cert`"))
        }
    }
    for (i, c) in raw.certificate.iter().flatten().enumerate() {
        entries.push((format!("{key}.certificate[{}]", i + 1), c.into()));
    }
    let generate = raw.self_signed.unwrap_or(false);
    let acme = match &raw.acme {
        None => None,
        Some(a) => {
            if generate || !entries.is_empty() {
                return Err(loc.error(
                    a.span(),
                    &format!("{key}.acme"),
                    "ACME orders this listener's certificates: remove `cert`/`key`, `certificate` and `self_signed`",
                ));
            }
            Some(acme::validate_acme(loc, &format!("{key}.acme"), a)?)
        }
    };
    if generate && !entries.is_empty() {
        return Err(loc.error(
            t.span(),
            key,
            "`self_signed = true` cannot be combined with certificate files",
        ));
    }
    if !generate && entries.is_empty() && acme.is_none() {
        return Err(loc.error(
            t.span(),
            key,
            "give `cert` and `key`, a `certificate` list, `self_signed = true` or an `acme` table",
        ));
    }
    let mut files = Vec::new();
    for (prefix, c) in &entries {
        let names = match c.names {
            None => None,
            Some(n) => {
                for name in n.get_ref() {
                    let bare = name.strip_prefix("*.").unwrap_or(name);
                    if bare.is_empty()
                        || bare.contains('*')
                        || !bare
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                    {
                        return Err(loc.error(
                            n.span(),
                            &format!("{prefix}.names"),
                            format!("{name:?} is not a host name or `*.` wildcard"),
                        ));
                    }
                }
                Some(n.get_ref().iter().map(|s| s.to_ascii_lowercase()).collect())
            }
        };
        files.push(CertFiles {
            cert: spanned_path(c.cert),
            key: spanned_path(c.key),
            ocsp_response: c.ocsp_response.map(spanned_path),
            names,
            default: c.default,
        });
    }

    let client_auth = match &raw.client_auth {
        None if raw.client_ca.is_some() => ClientAuth::Required,
        None => ClientAuth::None,
        Some(s) => match s.get_ref().as_str() {
            "none" => ClientAuth::None,
            "optional" => ClientAuth::Optional,
            "required" => ClientAuth::Required,
            other => {
                return Err(loc.error(
                    s.span(),
                    &format!("{key}.client_auth"),
                    format!("{other:?}: use \"none\", \"optional\" or \"required\""),
                ))
            }
        },
    };
    if client_auth != ClientAuth::None && raw.client_ca.is_none() {
        let span = raw.client_auth.as_ref().map_or(t.span(), |s| s.span());
        return Err(loc.error(
            span,
            &format!("{key}.client_auth"),
            "needs `client_ca`, the CA file client certificates are verified against",
        ));
    }
    let session_tickets = raw.session_tickets.unwrap_or(true);
    if !session_tickets {
        if let Some(f) = &raw.ticket_key_file {
            return Err(loc.error(
                f.span(),
                &format!("{key}.ticket_key_file"),
                "session_tickets = false: there are no tickets to key",
            ));
        }
    }

    let sni_required = raw.sni_required.unwrap_or(false);
    let (certs, origin) = if let Some(spec) = acme {
        let a = acme::AcmeListener::new(spec, sni_required);
        let origin = a.origin();
        (CertSource::Acme(a), origin)
    } else if generate {
        let ck = self_signed().map_err(|m| loc.error(t.span(), key, m))?;
        let certified = CertifiedKey::from_der(ck.chain, ck.key, &provider())
            .map_err(|e| loc.error(t.span(), key, e.to_string()))?;
        (
            CertSource::Generated(Arc::new(certified)),
            "self-signed for localhost".to_string(),
        )
    } else {
        let origin = match files.len() {
            1 => files[0].cert.clone(),
            n => format!("{} (+{} more)", files[0].cert, n - 1),
        };
        (CertSource::Files(files), origin)
    };
    let spec = TlsSpec {
        certs,
        sni_required,
        client_ca: raw.client_ca.as_ref().map(spanned_path),
        client_auth,
        ticket_key_file: raw.ticket_key_file.as_ref().map(spanned_path),
        session_cache: int(
            loc,
            &raw.session_cache,
            &format!("{key}.session_cache"),
            0..=1_000_000,
            DEFAULT_SESSION_CACHE,
        )? as usize,
    };
    let (listener, fingerprint) = TlsListener::new(spec, session_tickets, ticket_rotation)
        .map_err(|e| match e.field {
            TlsSetting::Cert | TlsSetting::Key | TlsSetting::Ocsp => {
                let (prefix, c) = &entries[e.index];
                let (span, name) = match e.field {
                    TlsSetting::Cert => (c.cert.span(), "cert"),
                    TlsSetting::Key => (c.key.span(), "key"),
                    _ => (
                        c.ocsp_response.map_or(c.span.clone(), |o| o.span()),
                        "ocsp_response",
                    ),
                };
                loc.error(span, &format!("{prefix}.{name}"), e.message)
            }
            TlsSetting::ClientCa => {
                let span = raw.client_ca.as_ref().map_or(t.span(), |s| s.span());
                loc.error(span, &format!("{key}.client_ca"), e.message)
            }
            TlsSetting::TicketKeyFile => {
                let span = raw.ticket_key_file.as_ref().map_or(t.span(), |s| s.span());
                loc.error(span, &format!("{key}.ticket_key_file"), e.message)
            }
        })?;
    Ok(ListenerTls {
        listener: Arc::new(listener),
        fingerprint,
        origin,
        handshake_timeout,
    })
}

/// A certificate entry, from the shorthand or the `certificate` list.
struct RawCertificateRef<'a> {
    span: std::ops::Range<usize>,
    cert: &'a Spanned<String>,
    key: &'a Spanned<String>,
    ocsp_response: Option<&'a Spanned<String>>,
    names: Option<&'a Spanned<Vec<String>>>,
    default: bool,
}

impl<'a> From<&'a Spanned<RawCertificate>> for RawCertificateRef<'a> {
    fn from(c: &'a Spanned<RawCertificate>) -> Self {
        let r = c.get_ref();
        RawCertificateRef {
            span: c.span(),
            cert: &r.cert,
            key: &r.key,
            ocsp_response: r.ocsp_response.as_ref(),
            names: r.names.as_ref(),
            default: r.default.unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{parse, validate, Config, ConfigError};

    fn check(text: &str) -> Result<Config, ConfigError> {
        let raw = parse("t.toml", text)?;
        validate("t.toml", text, raw)
    }

    /// A directory with `a.pem`/`a.key` (names a.test, *.w.test) and a config prefix.
    fn files() -> (tempfile::TempDir, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let ck =
            rcgen::generate_simple_self_signed(vec!["a.test".into(), "*.w.test".into()]).unwrap();
        let cert = dir.path().join("a.pem");
        let key = dir.path().join("a.key");
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
        (dir, cert.display().to_string(), key.display().to_string())
    }

    const TAIL: &str = "[[route]]\nhandler = \"respond\"\n";

    #[test]
    fn certificate_list_errors_name_the_entry_and_line() {
        let (_d, cert, key) = files();
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\n\
             [[listener.tls.certificate]]\ncert = \"{cert}\"\nkey = \"{key}\"\n\
             [[listener.tls.certificate]]\ncert = \"/no/such.pem\"\nkey = \"{key}\"\n{TAIL}"
        );
        let e = check(&text).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (10, "listener[1].tls.certificate[2].cert"),
            "{e}"
        );
        assert!(e.message.contains("/no/such.pem"), "{e}");
    }

    #[test]
    fn mismatched_key_and_bad_ocsp_are_reported_on_their_keys() {
        let (_d, cert, _key) = files();
        let other = rcgen::KeyPair::generate().unwrap();
        let other_path = _d.path().join("other.key");
        std::fs::write(&other_path, other.serialize_pem()).unwrap();
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ cert = \"{cert}\", key = \"{}\" }}\n{TAIL}",
            other_path.display()
        );
        let e = check(&text).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (3, "listener[1].tls.key"), "{e}");
        assert!(e.message.contains("does not fit"), "{e}");

        let (_d, cert, key) = files();
        let ocsp = _d.path().join("o.der");
        std::fs::write(&ocsp, "text, not DER").unwrap();
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\nocsp_response = \"{}\"\n{TAIL}",
            ocsp.display()
        );
        let e = check(&text).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (6, "listener[1].tls.ocsp_response"),
            "{e}"
        );
    }

    #[test]
    fn client_auth_ticket_and_names_settings_are_checked() {
        let (d, cert, key) = files();
        let base = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\n"
        );
        let e = check(&format!("{base}client_auth = \"required\"\n{TAIL}")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "listener[1].tls.client_auth"));
        let e = check(&format!("{base}client_auth = \"maybe\"\n{TAIL}")).unwrap_err();
        assert_eq!(e.key, "listener[1].tls.client_auth");
        let e = check(&format!("{base}client_ca = \"{key}\"\n{TAIL}")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (6, "listener[1].tls.client_ca"));

        let short = d.path().join("short.key");
        std::fs::write(&short, [1u8; 32]).unwrap();
        let e = check(&format!(
            "{base}ticket_key_file = \"{}\"\n{TAIL}",
            short.display()
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (6, "listener[1].tls.ticket_key_file")
        );
        assert!(e.message.contains("48 or 80"), "{e}");
        let e = check(&format!("{base}ticket_rotation = \"5s\"\n{TAIL}")).unwrap_err();
        assert_eq!(e.key, "listener[1].tls.ticket_rotation");

        let e = check(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[listener.tls.certificate]]\ncert = \"{cert}\"\nkey = \"{key}\"\nnames = [\"ok.test\", \"bad name\"]\n{TAIL}"
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (6, "listener[1].tls.certificate[1].names")
        );
        let e = check(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ self_signed = true, cert = \"{cert}\", key = \"{key}\" }}\n{TAIL}"
        ))
        .unwrap_err();
        assert_eq!(e.key, "listener[1].tls");
        let e = check(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\ntls = {{ sni_required = true }}\n{TAIL}"
        ))
        .unwrap_err();
        assert_eq!(e.key, "listener[1].tls");

        let ok = check(&format!(
            "{base}client_ca = \"{cert}\"\nclient_auth = \"optional\"\nticket_rotation = \"2h\"\nsni_required = true\n{TAIL}"
        ));
        assert!(ok.is_ok(), "{:?}", ok.err());
    }
}
