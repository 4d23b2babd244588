//! One ACME order for one name, through `instant-acme`: account (created once
//! and kept in the state directory), new order (naming the certificate it
//! replaces when the CA speaks ARI), the challenge answered by Pier itself,
//! a fresh key and CSR, the issued chain.
//!
//! Every failure says what failed and why in a sentence, with a cause that the
//! metrics count and the retry policy reads.

use std::time::{Duration, SystemTime};

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, CertificateIdentifier, ChallengeType,
    ExternalAccountKey, Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use rustls::pki_types::CertificateDer;

use super::http01;
use super::resolver::{alpn_challenge_cert, publish_alpn_challenge, AlpnChallenge};
use super::settings::{AcmeSpec, ChallengeKind, KeyType};
use super::state::{try_lock, write_private, StateDir, LOCK_STALE};

/// How long a task waits for another one creating the account.
const ACCOUNT_LOCK_WAIT: Duration = Duration::from_secs(60);
/// How long the CA gets to validate the challenges of one order.
const VALIDATION_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the CA gets to issue once the order is finalized.
const ISSUANCE_TIMEOUT: Duration = Duration::from_secs(90);

/// Why an attempt failed.
#[derive(Debug)]
pub struct OrderFailure {
    /// Metric label: `account`, `order`, `validation`, `finalize`,
    /// `rate_limited`, `storage`, `network`.
    pub cause: &'static str,
    /// A sentence for the log.
    pub message: String,
}

impl OrderFailure {
    fn new(cause: &'static str, message: impl Into<String>) -> OrderFailure {
        OrderFailure {
            cause,
            message: message.into(),
        }
    }

    /// Maps a client error, keeping the CA's own words and marking rate limits.
    fn from_acme(step: &'static str, what: &str, e: instant_acme::Error) -> OrderFailure {
        let cause = match &e {
            instant_acme::Error::Api(p)
                if p.r#type.as_deref() == Some("urn:ietf:params:acme:error:rateLimited") =>
            {
                "rate_limited"
            }
            instant_acme::Error::Api(_) => step,
            instant_acme::Error::Hyper(_)
            | instant_acme::Error::Http(_)
            | instant_acme::Error::Other(_) => "network",
            _ => step,
        };
        OrderFailure::new(cause, format!("{what}: {}", with_sources(&e)))
    }
}

/// An error and its causes, `a: b: c`: the HTTP client's own message ("client
/// error (Connect)") says little without the TLS or socket error beneath it.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

/// An issued certificate, as stored.
pub struct Issued {
    /// PEM chain, leaf first.
    pub chain_pem: String,
    /// PEM private key.
    pub key_pem: String,
    /// The challenge type the CA validated (`None`: the authorization was still valid).
    pub challenge: Option<ChallengeKind>,
}

/// The account for `spec`'s CA: read from the state directory, or created
/// (agreeing to the terms, with contact and EAB) and stored there with mode 0600.
pub async fn account(spec: &AcmeSpec, state: &StateDir) -> Result<Account, OrderFailure> {
    let builder = match &spec.ca {
        Some(ca) => Account::builder_with_root(ca),
        None => Account::builder(),
    }
    .map_err(|e| {
        OrderFailure::new(
            "network",
            format!("cannot set up the HTTPS client for the CA: {e}"),
        )
    })?;
    let path = state.account_path(&spec.directory);
    if let Ok(bytes) = state.read(&path) {
        let creds: AccountCredentials = serde_json::from_slice(&bytes).map_err(|e| {
            OrderFailure::new(
                "account",
                format!(
                    "{}: not an ACME account file ({e}); remove it to create a new account",
                    path.display()
                ),
            )
        })?;
        return builder.from_credentials(creds).await.map_err(|e| {
            OrderFailure::from_acme(
                "account",
                &format!("cannot reach the ACME directory {}", spec.directory),
                e,
            )
        });
    }
    // One account per CA for every task and instance sharing the directory.
    let lock_path = path.with_extension("lock");
    let deadline = tokio::time::Instant::now() + ACCOUNT_LOCK_WAIT;
    let _lock = loop {
        match try_lock(&lock_path, LOCK_STALE) {
            Ok(Some(l)) => break l,
            Ok(None) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(None) => {
                return Err(OrderFailure::new(
                    "account",
                    format!(
                        "{} is still locked by another instance creating the account",
                        lock_path.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(OrderFailure::new(
                    "storage",
                    format!("cannot create {}: {e}", lock_path.display()),
                ))
            }
        }
    };
    if let Ok(bytes) = state.read(&path) {
        if let Ok(creds) = serde_json::from_slice::<AccountCredentials>(&bytes) {
            return builder.from_credentials(creds).await.map_err(|e| {
                OrderFailure::from_acme(
                    "account",
                    &format!("cannot reach the ACME directory {}", spec.directory),
                    e,
                )
            });
        }
    }
    let contact: Vec<&str> = spec.contact.iter().map(String::as_str).collect();
    let eab = spec
        .eab
        .as_ref()
        .map(|e| ExternalAccountKey::new(e.kid.clone(), &e.hmac_key));
    let (account, creds) = builder
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            spec.directory.clone(),
            eab.as_ref(),
        )
        .await
        .map_err(|e| {
            OrderFailure::from_acme(
                "account",
                &format!("cannot create an account at {}", spec.directory),
                e,
            )
        })?;
    let json = serde_json::to_vec(&creds)
        .map_err(|e| OrderFailure::new("storage", format!("cannot encode the account: {e}")))?;
    write_private(&path, &json).map_err(|e| {
        OrderFailure::new("storage", format!("cannot write {}: {e}", path.display()))
    })?;
    tracing::info!(directory = %spec.directory, account = %account.id(), file = %path.display(), "ACME account created");
    Ok(account)
}

/// The ARI identifier of a certificate (authority key identifier and serial).
pub fn ari_id(leaf: &CertificateDer<'_>) -> Option<CertificateIdentifier<'static>> {
    CertificateIdentifier::try_from(leaf)
        .ok()
        .map(CertificateIdentifier::into_owned)
}

/// The CA's suggested renewal window for a certificate, when it publishes one.
pub async fn renewal_window(
    account: &Account,
    leaf: &CertificateDer<'_>,
) -> Option<(SystemTime, SystemTime)> {
    let id = ari_id(leaf)?;
    let (info, _) = account.renewal_info(&id).await.ok()?;
    let at = |unix: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(unix.max(0) as u64);
    let w = &info.suggested_window;
    Some((at(w.start.unix_timestamp()), at(w.end.unix_timestamp())))
}

/// The ACME challenge type of a configured challenge.
fn challenge_type(kind: ChallengeKind) -> ChallengeType {
    match kind {
        ChallengeKind::TlsAlpn01 => ChallengeType::TlsAlpn01,
        ChallengeKind::Http01 => ChallengeType::Http01,
    }
}

/// Orders a certificate for `name`; `replaces` is the leaf of the certificate
/// being renewed (ARI `replaces`).
pub async fn order_certificate(
    account: &Account,
    spec: &AcmeSpec,
    state: &StateDir,
    name: &str,
    replaces: Option<&CertificateDer<'_>>,
) -> Result<Issued, OrderFailure> {
    let ids = [Identifier::Dns(name.to_string())];
    let what = format!("order for {name}");
    // The CA's error at `step` of the order.
    let failed = |step: &'static str| {
        let what = &what;
        move |e| OrderFailure::from_acme(step, what, e)
    };
    let replacing = match replaces.and_then(ari_id) {
        // A CA without ARI, or one that refuses this replacement (already
        // replaced by another order), is asked for a plain order.
        Some(id) => account
            .new_order(&NewOrder::new(&ids).replaces(id))
            .await
            .ok(),
        None => None,
    };
    let mut order = match replacing {
        Some(o) => o,
        None => account
            .new_order(&NewOrder::new(&ids))
            .await
            .map_err(failed("order"))?,
    };

    // Published answers stay up until the order is decided (guards drop at return).
    let mut alpn_guards: Vec<AlpnChallenge> = Vec::new();
    let mut http_guards: Vec<http01::Http01Challenge> = Vec::new();
    let mut used = None;
    {
        let mut authorizations = order.authorizations();
        while let Some(result) = authorizations.next().await {
            let mut authz = result.map_err(failed("order"))?;
            match authz.status {
                AuthorizationStatus::Valid => continue,
                AuthorizationStatus::Pending => {}
                other => {
                    return Err(OrderFailure::new(
                        "validation",
                        format!("{what}: the CA's authorization is {other:?}, not pending"),
                    ))
                }
            }
            let offered: Vec<ChallengeType> =
                authz.challenges.iter().map(|c| c.r#type.clone()).collect();
            let Some(kind) = spec
                .challenges
                .iter()
                .copied()
                .find(|k| offered.contains(&challenge_type(*k)))
            else {
                return Err(OrderFailure::new(
                    "validation",
                    format!(
                        "{what}: the CA offers none of the configured challenges ({offered:?})"
                    ),
                ));
            };
            let mut challenge = authz
                .challenge(challenge_type(kind))
                .expect("offered above");
            let key_auth = challenge.key_authorization();
            match kind {
                ChallengeKind::TlsAlpn01 => {
                    let cert = alpn_challenge_cert(name, key_auth.digest().as_ref())
                        .map_err(|m| OrderFailure::new("validation", format!("{what}: {m}")))?;
                    alpn_guards.push(publish_alpn_challenge(name, cert));
                }
                ChallengeKind::Http01 => {
                    let guard = http01::publish(state, &challenge.token, key_auth.as_str())
                        .map_err(|e| {
                            OrderFailure::new(
                                "storage",
                                format!(
                                    "{what}: cannot write the HTTP-01 token to {}: {e}",
                                    state.root().display()
                                ),
                            )
                        })?;
                    http_guards.push(guard);
                }
            }
            tracing::info!(
                name,
                challenge = kind.label(),
                "ACME challenge published; asking the CA to validate"
            );
            used = Some(kind);
            challenge.set_ready().await.map_err(failed("validation"))?;
        }
    }
    let status = order
        .poll_ready(&RetryPolicy::new().timeout(VALIDATION_TIMEOUT))
        .await
        .map_err(failed("validation"))?;
    if status != OrderStatus::Ready {
        // Find the CA's reason on the failed challenge.
        let mut reason = String::new();
        let mut authorizations = order.authorizations();
        while let Some(Ok(mut authz)) = authorizations.next().await {
            if let Ok(s) = authz.refresh().await {
                for c in &s.challenges {
                    if let Some(p) = &c.error {
                        reason = p.to_string();
                    }
                }
            }
        }
        return Err(OrderFailure::new(
            "validation",
            format!("{what}: the CA could not validate the challenge ({status:?}): {reason}"),
        ));
    }
    drop(alpn_guards);
    drop(http_guards);

    let (csr, key_pem) = csr(name, spec.key_type)
        .map_err(|m| OrderFailure::new("finalize", format!("{what}: {m}")))?;
    order.finalize_csr(&csr).await.map_err(failed("finalize"))?;
    let chain_pem = order
        .poll_certificate(&RetryPolicy::new().timeout(ISSUANCE_TIMEOUT))
        .await
        .map_err(failed("finalize"))?;
    Ok(Issued {
        chain_pem,
        key_pem,
        challenge: used,
    })
}

/// A new key of `kt` and a CSR for `name` signed with it (DER CSR, PEM key).
fn csr(name: &str, kt: KeyType) -> Result<(Vec<u8>, String), String> {
    let key = match kt {
        KeyType::EcdsaP256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
        KeyType::Rsa2048 => rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256),
    }
    .map_err(|e| format!("cannot generate a {} key: {e}", kt.label()))?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()])
        .map_err(|e| format!("cannot make a CSR: {e}"))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let req = params
        .serialize_request(&key)
        .map_err(|e| format!("cannot make a CSR: {e}"))?;
    Ok((req.der().to_vec(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::FromDer;

    #[test]
    fn failures_name_the_underlying_error() {
        let inner =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let outer = instant_acme::Error::Other(Box::new(inner));
        let f = OrderFailure::from_acme("order", "order for a.test", outer);
        assert_eq!(f.cause, "network");
        assert!(
            f.message
                .starts_with("order for a.test: connection refused"),
            "{}",
            f.message
        );
        let limited = instant_acme::Error::Api(
            serde_json::from_str(r#"{"type":"urn:ietf:params:acme:error:rateLimited","detail":"too many certificates"}"#).unwrap(),
        );
        let f = OrderFailure::from_acme("order", "order for a.test", limited);
        assert_eq!(f.cause, "rate_limited");
        assert!(f.message.contains("too many certificates"), "{}", f.message);
    }

    #[test]
    fn csr_carries_the_name_and_key_type() {
        for kt in [KeyType::EcdsaP256, KeyType::Rsa2048] {
            let (der, key_pem) = csr("a.test", kt).unwrap();
            let (_, req) =
                x509_parser::certification_request::X509CertificationRequest::from_der(&der)
                    .unwrap();
            let names: Vec<String> = req
                .requested_extensions()
                .into_iter()
                .flatten()
                .filter_map(|e| match e {
                    x509_parser::extensions::ParsedExtension::SubjectAlternativeName(s) => Some(s),
                    _ => None,
                })
                .flat_map(|s| s.general_names.iter().map(|g| g.to_string()))
                .collect();
            assert_eq!(names, ["DNSName(a.test)"]);
            assert!(key_pem.contains("PRIVATE KEY"));
        }
    }
}
