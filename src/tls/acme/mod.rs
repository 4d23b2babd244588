//! Automatic certificates by ACME (RFC 8555) for TLS listeners with a `tls.acme`
//! table: ordered at start for names without a valid stored certificate,
//! renewed at two thirds of their life or when the CA's renewal information
//! (ARI, RFC 9773) says so, swapped in without a reload, shared by a fleet
//! through the state directory.
//!
//! Pier answers TLS-ALPN-01 on its TLS listeners ([`resolver`]) and HTTP-01 on
//! its plain HTTP listeners ([`http01`], ahead of the routes); DNS-01 (and so wildcard names) is not
//! supported. The protocol itself is `instant-acme`'s. All ACME work runs on one
//! background thread ([`manage`]); workers only read certificates and tokens.

pub mod http01;
mod manage;
pub mod metrics;
pub mod order;
pub mod resolver;
pub mod schedule;
pub mod settings;
pub mod state;

use std::sync::Arc;
use std::time::SystemTime;

pub use resolver::{AcmeCerts, AcmeResolver, ACME_TLS_ALPN};
pub use settings::{validate_acme, AcmeSpec, RawAcme};

/// An ACME listener's settings and the certificates it serves.
#[derive(Debug, Clone)]
pub struct AcmeListener {
    /// Validated settings.
    pub spec: Arc<AcmeSpec>,
    /// Certificates served, replaced by the ACME thread.
    pub certs: Arc<AcmeCerts>,
}

impl AcmeListener {
    /// Starts serving the valid certificates already in the state directory, so a
    /// restart or reload serves at once without ordering again.
    pub fn new(spec: AcmeSpec, sni_required: bool) -> AcmeListener {
        let certs = Arc::new(AcmeCerts::new(spec.names.clone(), sni_required));
        let state = state::StateDir::new(&spec.state_dir);
        for name in &spec.names {
            match state.load_cert(name, spec.key_type) {
                Ok(Some(s)) if s.not_after > SystemTime::now() => {
                    certs.install(name, s.key.clone());
                    metrics::set_expiry(name, s.not_after);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(name, error = %e, "stored ACME certificate unreadable; it will be ordered again")
                }
            }
        }
        AcmeListener {
            spec: Arc::new(spec),
            certs,
        }
    }

    /// How the startup log names this listener's certificates.
    pub fn origin(&self) -> String {
        let have = self
            .spec
            .names
            .iter()
            .filter(|n| self.certs.current(n).is_some())
            .count();
        format!(
            "ACME from {} for {} ({have} of {} stored)",
            self.spec.directory,
            self.spec.names.join(", "),
            self.spec.names.len()
        )
    }
}

/// Starts the ACME thread for the TLS listeners (of one configuration) that use
/// ACME (none: nothing starts). Called at start and after every reload; the tasks
/// of a replaced configuration end on their own.
pub fn spawn_renewals<'a>(
    tls: impl Iterator<Item = &'a super::ListenerTls>,
) -> std::io::Result<()> {
    let listeners: Vec<AcmeListener> = tls.filter_map(|t| t.listener.acme().cloned()).collect();
    let mut dirs: Vec<_> = listeners.iter().map(|l| l.spec.state_dir.clone()).collect();
    dirs.sort();
    dirs.dedup();
    http01::watch_state_dirs(dirs);
    if listeners.is_empty() {
        return Ok(());
    }
    crate::local_thread::spawn_local_thread(
        "pier-acme",
        "ACME certificate management",
        move || async move {
            let mut tasks = Vec::new();
            for l in &listeners {
                for name in &l.spec.names {
                    tasks.push(tokio::task::spawn_local(manage::manage_name(
                        l.spec.clone(),
                        Arc::downgrade(&l.certs),
                        name.clone(),
                    )));
                }
            }
            drop(listeners);
            for t in tasks {
                let _ = t.await;
            }
        },
    )
}
