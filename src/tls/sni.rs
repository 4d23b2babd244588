//! Certificate choice by SNI: exact name first, then a wildcard covering exactly one
//! label (`*.example.com` matches `a.example.com`, not `a.b.example.com` nor
//! `example.com`), then the listener's default certificate — or no certificate,
//! which rejects the handshake, when SNI is required.
//!
//! The store is immutable and lives inside one `ServerConfig`; a reload builds a new
//! store and a new config, so choosing a certificate reads plain maps, no lock.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;

/// One certificate and the names it answers for.
pub struct SniEntry {
    /// Lower-case names; `*.` prefixes are wildcards.
    pub names: Vec<String>,
    /// Served to clients without SNI or with an unknown name.
    pub default: bool,
    /// Chain, key and OCSP staple.
    pub key: Arc<CertifiedKey>,
}

/// Certificates of one listener, indexed for the handshake.
pub struct CertStore {
    exact: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// Keyed by the part after `*.`.
    wildcard: HashMap<String, Vec<Arc<CertifiedKey>>>,
    /// Empty when SNI is required.
    default: Vec<Arc<CertifiedKey>>,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore")
            .field("exact", &self.exact.keys().collect::<Vec<_>>())
            .field("wildcard", &self.wildcard.keys().collect::<Vec<_>>())
            .field("default", &self.default.len())
            .finish()
    }
}

impl CertStore {
    /// Indexes `entries`. The default is every entry marked `default`, or the first
    /// entry when none is; `sni_required` drops the default altogether.
    pub fn new(entries: Vec<SniEntry>, sni_required: bool) -> CertStore {
        let mut exact: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        let mut wildcard: HashMap<String, Vec<Arc<CertifiedKey>>> = HashMap::new();
        let mut default = Vec::new();
        let any_default = entries.iter().any(|e| e.default);
        for (i, e) in entries.iter().enumerate() {
            for name in &e.names {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                match name.strip_prefix("*.") {
                    Some(parent) => wildcard.entry(parent.to_string()).or_default(),
                    None => exact.entry(name).or_default(),
                }
                .push(e.key.clone());
            }
            if !sni_required && (e.default || (!any_default && i == 0)) {
                default.push(e.key.clone());
            }
        }
        CertStore {
            exact,
            wildcard,
            default,
        }
    }

    /// The candidates for a server name (`None`: the client sent no SNI).
    pub fn candidates(&self, server_name: Option<&str>) -> &[Arc<CertifiedKey>] {
        let Some(name) = server_name else {
            return &self.default;
        };
        let lower;
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = name.to_ascii_lowercase();
            lower.as_str()
        } else {
            name
        };
        let name = name.trim_end_matches('.');
        if let Some(v) = self.exact.get(name) {
            return v;
        }
        if let Some((_, parent)) = name.split_once('.') {
            if let Some(v) = self.wildcard.get(parent) {
                return v;
            }
        }
        &self.default
    }

    /// The first candidate whose key can sign with a scheme the client offers (an
    /// ECDSA and an RSA certificate for the same names), else the first.
    pub fn choose(
        &self,
        server_name: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let c = self.candidates(server_name);
        if c.len() > 1 {
            if let Some(k) = c.iter().find(|k| k.key.choose_scheme(schemes).is_some()) {
                return Some(k.clone());
            }
        }
        c.first().cloned()
    }
}

/// rustls' hook into the store.
#[derive(Debug)]
pub struct SniResolver(pub CertStore);

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0
            .choose(hello.server_name(), hello.signature_schemes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::test_certified_key as key;

    fn entry(names: &[&str], default: bool) -> (SniEntry, Arc<CertifiedKey>) {
        let k = key(names.first().copied().unwrap_or("x"));
        (
            SniEntry {
                names: names.iter().map(|s| s.to_string()).collect(),
                default,
                key: k.clone(),
            },
            k,
        )
    }

    fn same(a: Option<Arc<CertifiedKey>>, b: &Arc<CertifiedKey>) -> bool {
        a.is_some_and(|a| Arc::ptr_eq(&a, b))
    }

    #[test]
    fn exact_then_wildcard_then_default() {
        let (a, ka) = entry(&["a.test", "www.a.test"], false);
        let (w, kw) = entry(&["*.w.test"], false);
        let (x, kx) = entry(&["x.w.test"], true);
        let s = CertStore::new(vec![a, w, x], false);
        let none: &[SignatureScheme] = &[];
        assert!(same(s.choose(Some("a.test"), none), &ka));
        assert!(same(s.choose(Some("WWW.A.Test."), none), &ka));
        assert!(
            same(s.choose(Some("x.w.test"), none), &kx),
            "exact beats wildcard"
        );
        assert!(same(s.choose(Some("y.w.test"), none), &kw));
        assert!(
            same(s.choose(Some("y.z.w.test"), none), &kx),
            "one label only"
        );
        assert!(same(s.choose(Some("w.test"), none), &kx));
        assert!(same(s.choose(None, none), &kx), "marked default");
    }

    #[test]
    fn first_entry_is_the_default_unless_sni_is_required() {
        let (a, ka) = entry(&["a.test"], false);
        let (b, _) = entry(&["b.test"], false);
        let s = CertStore::new(vec![a, b], false);
        assert!(same(s.choose(None, &[]), &ka));
        assert!(same(s.choose(Some("other.test"), &[]), &ka));
        let (a, ka) = entry(&["a.test"], false);
        let s = CertStore::new(vec![a], true);
        assert!(s.choose(None, &[]).is_none());
        assert!(s.choose(Some("other.test"), &[]).is_none());
        assert!(same(s.choose(Some("a.test"), &[]), &ka));
    }

    #[test]
    fn picks_the_key_type_the_client_can_verify() {
        let ecdsa = key("d.test");
        let rsa_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
        let rsa_cert = rcgen::CertificateParams::new(vec!["d.test".to_string()])
            .unwrap()
            .self_signed(&rsa_key)
            .unwrap();
        let der = rustls::pki_types::PrivateKeyDer::try_from(rsa_key.serialize_der()).unwrap();
        let rsa = Arc::new(
            CertifiedKey::from_der(vec![rsa_cert.der().clone()], der, &crate::tls::provider())
                .unwrap(),
        );
        let s = CertStore::new(
            vec![
                SniEntry {
                    names: vec!["d.test".into()],
                    default: false,
                    key: ecdsa.clone(),
                },
                SniEntry {
                    names: vec!["d.test".into()],
                    default: false,
                    key: rsa.clone(),
                },
            ],
            false,
        );
        let rsa_only = [SignatureScheme::RSA_PSS_SHA256];
        assert!(same(s.choose(Some("d.test"), &rsa_only), &rsa));
        let both = [
            SignatureScheme::ECDSA_NISTP256_SHA256,
            SignatureScheme::RSA_PSS_SHA256,
        ];
        assert!(same(s.choose(Some("d.test"), &both), &ecdsa));
    }
}
