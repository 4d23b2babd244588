//! Certificate choice on an ACME listener, and the TLS-ALPN-01 responder (RFC 8737).
//!
//! Ordinary handshakes pick the name's ACME certificate from a store that the
//! ACME thread replaces whole ([`AcmeCerts::install`]); handshakes read it through
//! `arc-swap`, without a lock, and connections already open keep the certificate
//! they started with. A name without a certificate yet gets no certificate, so
//! rustls answers with an alert instead of serving something self-signed.
//!
//! A validation handshake offers only the ALPN protocol `acme-tls/1`; it gets the
//! challenge certificate of its SNI name from a process-wide table (the CA may
//! connect to any TLS listener), and the connection is closed after the handshake.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tls::sni::{CertStore, SniEntry};

/// The ALPN protocol of TLS-ALPN-01 validation handshakes.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Served ACME certificates of one listener.
pub struct AcmeCerts {
    store: ArcSwap<CertStore>,
    /// The writer's copy: name -> certificate (the ACME thread, rarely).
    by_name: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    /// Names in configuration order: the first with a certificate is the default.
    names: Vec<String>,
    sni_required: bool,
}

impl std::fmt::Debug for AcmeCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcmeCerts")
            .field("names", &self.names)
            .finish()
    }
}

impl AcmeCerts {
    /// An empty store for `names`.
    pub fn new(names: Vec<String>, sni_required: bool) -> AcmeCerts {
        AcmeCerts {
            store: ArcSwap::from_pointee(CertStore::new(Vec::new(), sni_required)),
            by_name: Mutex::new(HashMap::new()),
            names,
            sni_required,
        }
    }

    /// Serves `key` for `name` from the next handshake on.
    pub fn install(&self, name: &str, key: Arc<CertifiedKey>) {
        let mut by_name = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        by_name.insert(name.to_string(), key);
        let entries = self
            .names
            .iter()
            .filter_map(|n| {
                by_name.get(n).map(|k| SniEntry {
                    names: vec![n.clone()],
                    default: false,
                    key: k.clone(),
                })
            })
            .collect();
        self.store
            .store(Arc::new(CertStore::new(entries, self.sni_required)));
    }

    /// The certificate served for `name` now, if any.
    pub fn current(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let by_name = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        by_name.get(name).cloned()
    }

    /// The names this listener orders certificates for.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// Challenge certificates of TLS-ALPN-01 validations in progress, by name.
fn challenges() -> &'static ArcSwap<HashMap<String, Arc<CertifiedKey>>> {
    static TABLE: OnceLock<ArcSwap<HashMap<String, Arc<CertifiedKey>>>> = OnceLock::new();
    TABLE.get_or_init(|| ArcSwap::from_pointee(HashMap::new()))
}

/// Answers TLS-ALPN-01 validations of `name` with `key` until the returned guard drops.
pub fn publish_alpn_challenge(name: &str, key: Arc<CertifiedKey>) -> AlpnChallenge {
    challenges().rcu(|t| {
        let mut t = HashMap::clone(t);
        t.insert(name.to_string(), key.clone());
        t
    });
    AlpnChallenge {
        name: name.to_string(),
    }
}

/// A published TLS-ALPN-01 challenge certificate; dropping it withdraws it.
pub struct AlpnChallenge {
    name: String,
}

impl Drop for AlpnChallenge {
    fn drop(&mut self) {
        challenges().rcu(|t| {
            let mut t = HashMap::clone(t);
            t.remove(&self.name);
            t
        });
    }
}

/// Builds the self-signed certificate of a TLS-ALPN-01 answer: `name` as its only
/// SAN and the critical acmeIdentifier extension holding SHA-256 of the key
/// authorization (RFC 8737 3).
pub fn alpn_challenge_cert(
    name: &str,
    key_auth_digest: &[u8],
) -> Result<Arc<CertifiedKey>, String> {
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| format!("challenge certificate for {name}: {e}"))?;
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(key_auth_digest));
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| e.to_string())?;
    // Not `from_der`: its key check parses the certificate with webpki, which
    // refuses the critical acmeIdentifier extension this certificate must carry.
    let signing = crate::tls::provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing,
    )))
}

/// rustls' hook on an ACME listener.
#[derive(Debug)]
pub struct AcmeResolver(pub Arc<AcmeCerts>);

impl ResolvesServerCert for AcmeResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let validation = hello.alpn().is_some_and(|mut protocols| {
            protocols.next() == Some(ACME_TLS_ALPN) && protocols.next().is_none()
        });
        if validation {
            let name = hello.server_name()?.to_ascii_lowercase();
            return challenges().load().get(&name).cloned();
        }
        self.0
            .store
            .load()
            .choose(hello.server_name(), hello.signature_schemes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::test_certified_key as key;

    #[test]
    fn names_without_a_certificate_get_none_and_installs_replace() {
        let certs = AcmeCerts::new(vec!["a.test".into(), "b.test".into()], false);
        assert!(certs.store.load().choose(Some("a.test"), &[]).is_none());
        let kb = key("b.test");
        certs.install("b.test", kb.clone());
        let got = certs.store.load().choose(Some("b.test"), &[]).unwrap();
        assert!(Arc::ptr_eq(&got, &kb));
        let kb2 = key("b.test");
        certs.install("b.test", kb2.clone());
        let got = certs.store.load().choose(Some("b.test"), &[]).unwrap();
        assert!(
            Arc::ptr_eq(&got, &kb2),
            "the new certificate replaces the old"
        );
        assert!(Arc::ptr_eq(&certs.current("b.test").unwrap(), &kb2));
    }

    #[test]
    fn challenge_certificate_carries_the_digest_and_is_withdrawn() {
        let digest = [7u8; 32];
        let ck = alpn_challenge_cert("c.test", &digest).unwrap();
        let der = ck.cert[0].as_ref();
        // OID 1.3.6.1.5.5.7.1.31 followed by critical and OCTET STRING(OCTET STRING(digest)).
        let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        let at = der
            .windows(oid.len())
            .position(|w| w == oid)
            .expect("acmeIdentifier");
        assert!(der[at..].windows(32).any(|w| w == digest));
        let guard = publish_alpn_challenge("c.test", ck);
        assert!(challenges().load().contains_key("c.test"));
        drop(guard);
        assert!(!challenges().load().contains_key("c.test"));
    }
}
