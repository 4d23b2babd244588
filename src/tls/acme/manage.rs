//! The ACME thread: one task per (listener, name) keeps that name's certificate
//! served and fresh. Each round it picks up the stored certificate (one this
//! instance or another of the fleet wrote), and once renewal is due it takes the
//! name's lock in the state directory and orders; an instance that finds the
//! lock taken waits for the holder's result instead of ordering too.
//!
//! Tasks hold their listener's certificates weakly: a reload builds new ones
//! (which start from the stored certificates) and the old tasks end.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use super::metrics;
use super::order::{self, OrderFailure};
use super::resolver::AcmeCerts;
use super::schedule;
use super::settings::AcmeSpec;
use super::state::{self, StateDir, StoredCert};

/// Longest sleep between two looks at the state directory while nothing is due.
const RECHECK: Duration = Duration::from_secs(60);
/// Poll interval while another instance holds the order lock.
const LOCK_POLL: Duration = Duration::from_millis(500);
/// Bound on fetching the CA's directory or renewal information for scheduling;
/// without an answer, renewal falls back to two thirds of the lifetime.
const CA_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on one whole order (account, validation, issuance), below the lock's staleness.
const ORDER_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The certificate this task serves and when it is due.
struct CurrentCert {
    fingerprint: String,
    renew_at: SystemTime,
    leaf: rustls::pki_types::CertificateDer<'static>,
}

/// Serves `name`'s certificate from `state` into `certs` and keeps it renewed.
pub async fn manage_name(spec: Arc<AcmeSpec>, certs: Weak<AcmeCerts>, name: String) {
    let state = StateDir::new(&spec.state_dir);
    let kt = spec.key_type;
    let lock_path = state.lock_path(&name, kt);
    let mut served: Option<CurrentCert> = None;
    let mut failures = 0u32;
    let mut waiting_logged = false;
    let mut account: Option<instant_acme::Account> = None;
    loop {
        if certs.strong_count() == 0 {
            return;
        }
        if let Err(e) = state.create() {
            failures += 1;
            metrics::count_failure("storage");
            let wait = schedule::backoff(spec.retry_backoff, failures, schedule::random_unit());
            warn!(name, dir = %state.root().display(), error = %e, retry_in_s = wait.as_secs(), "cannot create the ACME state directory");
            tokio::time::sleep(wait).await;
            continue;
        }
        let now = SystemTime::now();
        match state.load_cert(&name, kt) {
            Ok(Some(s)) if s.not_after > now => {
                if served.as_ref().map(|x| &x.fingerprint) != Some(&s.fingerprint) {
                    match certs.upgrade() {
                        Some(c) => c.install(&name, s.key.clone()),
                        None => return,
                    }
                    metrics::set_expiry(&name, s.not_after);
                    let renew_at = renewal_time(&spec, &state, &mut account, &s).await;
                    info!(name, expires = %httpdate::fmt_http_date(s.not_after), renew_at = %httpdate::fmt_http_date(renew_at), sha256 = %s.fingerprint, "ACME certificate loaded from the state directory");
                    served = Some(CurrentCert {
                        fingerprint: s.fingerprint.clone(),
                        renew_at,
                        leaf: s.key.cert[0].clone(),
                    });
                    failures = 0;
                }
            }
            Ok(_) => {}
            // A chain and key being replaced by another instance: look again shortly.
            Err(e) => {
                warn!(name, error = %e, "stored ACME certificate unreadable");
            }
        }
        let due = served.as_ref().map_or(now, |s| s.renew_at);
        if due > now {
            waiting_logged = false;
            let wait = due.duration_since(now).unwrap_or_default().min(RECHECK);
            tokio::time::sleep(wait).await;
            continue;
        }
        let lock = match state::try_lock(&lock_path, state::LOCK_STALE) {
            Ok(Some(l)) => l,
            Ok(None) => {
                if !waiting_logged {
                    info!(name, lock = %lock_path.display(), "another instance is ordering this certificate; waiting for its result");
                    waiting_logged = true;
                }
                tokio::time::sleep(LOCK_POLL).await;
                continue;
            }
            Err(e) => {
                failures += 1;
                metrics::count_failure("storage");
                let wait = schedule::backoff(spec.retry_backoff, failures, schedule::random_unit());
                warn!(name, lock = %lock_path.display(), error = %e, retry_in_s = wait.as_secs(), "cannot take the ACME order lock");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        // Another instance may have stored a fresh one between our look and the lock.
        if let Ok(Some(s)) = state.load_cert(&name, kt) {
            if served.as_ref().map(|x| &x.fingerprint) != Some(&s.fingerprint)
                && s.not_after > SystemTime::now()
            {
                drop(lock);
                continue;
            }
        }
        let renewing = served.is_some();
        info!(name, directory = %spec.directory, reason = if renewing { "renewal due" } else { "no valid certificate" }, "ordering an ACME certificate");
        let replaces = served.as_ref().map(|s| s.leaf.clone());
        let attempt = crate::deadline::within(ORDER_TIMEOUT, async {
            if account.is_none() {
                account = Some(order::account(&spec, &state).await?);
            }
            let acct = account.as_ref().expect("set above");
            order::order_certificate(acct, &spec, &state, &name, replaces.as_ref()).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(OrderFailure {
                cause: "network",
                message: format!(
                    "order for {name}: no result within {}s",
                    ORDER_TIMEOUT.as_secs()
                ),
            })
        });
        let stored = attempt.and_then(|issued| {
            let s = state::certified(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes())
                .map_err(|m| OrderFailure {
                    cause: "finalize",
                    message: format!("order for {name}: the CA's certificate is unusable: {m}"),
                })?;
            state
                .store_cert(
                    &name,
                    kt,
                    issued.chain_pem.as_bytes(),
                    issued.key_pem.as_bytes(),
                )
                .map_err(|e| OrderFailure {
                    cause: "storage",
                    message: format!(
                        "cannot store the certificate of {name} in {}: {e}",
                        state.root().display()
                    ),
                })?;
            Ok((s, issued.challenge))
        });
        drop(lock);
        match stored {
            Ok((s, challenge)) => {
                failures = 0;
                metrics::count_order("issued");
                metrics::set_expiry(&name, s.not_after);
                match certs.upgrade() {
                    Some(c) => c.install(&name, s.key.clone()),
                    None => return,
                }
                let renew_at = renewal_time(&spec, &state, &mut account, &s).await;
                info!(
                    name,
                    challenge = challenge.map_or("none (authorization still valid)", |c| c.label()),
                    expires = %httpdate::fmt_http_date(s.not_after),
                    renew_at = %httpdate::fmt_http_date(renew_at),
                    sha256 = %s.fingerprint,
                    "{}",
                    if renewing { "ACME certificate renewed" } else { "ACME certificate issued" }
                );
                served = Some(CurrentCert {
                    fingerprint: s.fingerprint,
                    renew_at,
                    leaf: s.key.cert[0].clone(),
                });
            }
            Err(f) => {
                failures += 1;
                metrics::count_order("failed");
                metrics::count_failure(f.cause);
                if f.cause == "account" {
                    account = None;
                }
                let mut wait =
                    schedule::backoff(spec.retry_backoff, failures, schedule::random_unit());
                if f.cause == "rate_limited" {
                    wait = wait.max(schedule::RATE_LIMITED_BACKOFF);
                }
                warn!(name, cause = f.cause, error = %f.message, attempt = failures, retry_in_ms = wait.as_millis() as u64, "ACME order failed");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// When `s` is due: the CA's renewal window if it publishes one (the account is
/// only loaded if it exists already), never later than two thirds of its life.
async fn renewal_time(
    spec: &AcmeSpec,
    state: &StateDir,
    account: &mut Option<instant_acme::Account>,
    s: &StoredCert,
) -> SystemTime {
    if account.is_none() && state.account_path(&spec.directory).exists() {
        *account = crate::deadline::within(CA_LOOKUP_TIMEOUT, order::account(spec, state))
            .await
            .ok()
            .and_then(Result::ok);
    }
    let window = match account.as_ref() {
        Some(a) => crate::deadline::within(
            Duration::from_secs(10),
            order::renewal_window(a, &s.key.cert[0]),
        )
        .await
        .ok()
        .flatten(),
        None => None,
    };
    schedule::renew_at(s.not_before, s.not_after, window, schedule::random_unit())
}
