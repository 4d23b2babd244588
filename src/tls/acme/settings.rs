//! `[listener.tls.acme]` as written and its validation: the first stage mirrors
//! the TOML, the second checks every value and yields an [`AcmeSpec`]. Kept
//! beside the ACME runtime so the config module only names the table.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::config::value::{parse_duration, RawDuration};

/// Let's Encrypt production, the directory used when none is given.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt staging, accepted as `directory = "letsencrypt-staging"`.
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";
/// Where account keys, certificates and challenge tokens live by default.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/pier/acme";
/// First wait after a failed order; doubled per further failure.
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(60);

/// `acme = { ... }` (or `[listener.tls.acme]`) of a TLS listener.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAcme {
    /// ACME directory URL (or `letsencrypt`, `letsencrypt-staging`).
    pub directory: Option<Spanned<String>>,
    /// Contact e-mail addresses given to the CA.
    pub contact: Option<Spanned<Vec<String>>>,
    /// Agreement to the CA's terms of service; required.
    pub agree_terms: Option<Spanned<bool>>,
    /// The listener's server names: one certificate is ordered per name.
    pub names: Option<Spanned<Vec<String>>>,
    /// `ecdsa-p256` (default) or `rsa-2048`.
    pub key_type: Option<Spanned<String>>,
    /// External Account Binding, for CAs that require it.
    pub eab: Option<Spanned<RawEab>>,
    /// Directory for the account key, certificates, keys and tokens; shared by a fleet.
    pub state_dir: Option<Spanned<String>>,
    /// PEM root(s) trusted for the CA's own HTTPS (a private CA); default: the system's.
    pub ca: Option<Spanned<String>>,
    /// Challenge types tried, in order of preference (`tls-alpn-01`, `http-01`).
    pub challenges: Option<Spanned<Vec<String>>>,
    /// First wait after a failed order, doubled per further failure (jittered).
    pub retry_backoff: Option<Spanned<RawDuration>>,
}

/// `eab = { kid = "...", hmac_key = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEab {
    /// Key identifier the CA gave.
    pub kid: Spanned<String>,
    /// The CA's MAC key, base64url as CAs print it.
    pub hmac_key: Spanned<String>,
}

/// Key type of ordered certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// ECDSA on P-256: small, fast, accepted everywhere that matters.
    EcdsaP256,
    /// RSA 2048 for old clients.
    Rsa2048,
}

impl KeyType {
    /// Short name used in file names and logs.
    pub fn label(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa-p256",
            KeyType::Rsa2048 => "rsa-2048",
        }
    }
}

/// A challenge type Pier answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChallengeKind {
    /// RFC 8737, on the TLS listener (ALPN `acme-tls/1`).
    TlsAlpn01,
    /// RFC 8555 8.3, on plain listeners at `/.well-known/acme-challenge/`.
    Http01,
}

impl ChallengeKind {
    /// The name the CA uses.
    pub fn label(self) -> &'static str {
        match self {
            ChallengeKind::TlsAlpn01 => "tls-alpn-01",
            ChallengeKind::Http01 => "http-01",
        }
    }
}

/// External Account Binding credentials.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Eab {
    /// Key identifier.
    pub kid: String,
    /// Decoded MAC key.
    pub hmac_key: Vec<u8>,
}

/// Validated ACME settings of one TLS listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcmeSpec {
    /// ACME directory URL.
    pub directory: String,
    /// `mailto:` URLs.
    pub contact: Vec<String>,
    /// Lower-case DNS names, one certificate each.
    pub names: Vec<String>,
    /// Key type of the certificates.
    pub key_type: KeyType,
    /// External Account Binding.
    pub eab: Option<Eab>,
    /// State directory.
    pub state_dir: PathBuf,
    /// PEM file of roots for the CA's HTTPS.
    pub ca: Option<String>,
    /// Challenge types in order of preference.
    pub challenges: Vec<ChallengeKind>,
    /// First wait after a failure.
    pub retry_backoff: Duration,
}

/// Whether `name` is a DNS name a CA can validate by HTTP-01 or TLS-ALPN-01:
/// letters, digits, `-`, dots between labels, no wildcard (those need DNS-01).
fn valid_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && name.parse::<std::net::IpAddr>().is_err()
}

/// Each element of a list read by `read`, in order, with repeats dropped; the
/// first element `read` refuses is the error.
fn each_once<T: PartialEq>(
    list: &[String],
    read: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in list {
        let value = read(item)?;
        if !out.contains(&value) {
            out.push(value);
        }
    }
    Ok(out)
}

/// Second stage of `[listener.tls.acme]`; `key` is its dotted path for errors.
pub fn validate_acme(
    loc: &Locator<'_>,
    key: &str,
    a: &Spanned<RawAcme>,
) -> Result<AcmeSpec, ConfigError> {
    let raw = a.get_ref();
    let err = |span: std::ops::Range<usize>, field: &str, msg: String| {
        loc.error(span, &format!("{key}.{field}"), msg)
    };
    let directory = match &raw.directory {
        None => LETS_ENCRYPT.to_string(),
        Some(d) => match d.get_ref().as_str() {
            "letsencrypt" => LETS_ENCRYPT.to_string(),
            "letsencrypt-staging" => LETS_ENCRYPT_STAGING.to_string(),
            url if url.starts_with("https://") && url.len() > "https://".len() => url.to_string(),
            other => {
                return Err(err(
                    d.span(),
                    "directory",
                    format!(
                        "{other:?} is not an https:// directory URL (or \"letsencrypt\", \"letsencrypt-staging\")"
                    ),
                ))
            }
        },
    };
    match &raw.agree_terms {
        Some(t) if *t.get_ref() => {}
        Some(t) => {
            return Err(err(
                t.span(),
                "agree_terms",
                "certificates are only issued to accounts that agree to the CA's terms of service; set `agree_terms = true` after reading them".into(),
            ))
        }
        None => {
            return Err(loc.error(
                a.span(),
                &format!("{key}.agree_terms"),
                "set `agree_terms = true` to agree to the CA's terms of service (required to order certificates)",
            ))
        }
    }
    let mut contact = Vec::new();
    if let Some(c) = &raw.contact {
        for m in c.get_ref() {
            let addr = m.strip_prefix("mailto:").unwrap_or(m);
            let ok = addr
                .split_once('@')
                .is_some_and(|(user, host)| !user.is_empty() && valid_dns_name(host))
                && !addr.contains([' ', ',', '<', '>']);
            if !ok {
                return Err(err(
                    c.span(),
                    "contact",
                    format!("{m:?} is not an e-mail address"),
                ));
            }
            contact.push(format!("mailto:{addr}"));
        }
    }
    let names = match &raw.names {
        None => {
            return Err(loc.error(
                a.span(),
                &format!("{key}.names"),
                "list the server names to order certificates for, e.g. `names = [\"example.com\", \"www.example.com\"]`",
            ))
        }
        Some(n) if n.get_ref().is_empty() => {
            return Err(err(n.span(), "names", "needs at least one name".into()))
        }
        Some(n) => each_once(n.get_ref(), |name| {
            let lower = name.trim_end_matches('.').to_ascii_lowercase();
            if lower.starts_with("*.") {
                return Err(format!("{name:?}: wildcard certificates need the DNS-01 challenge, which Pier does not answer"));
            }
            if !valid_dns_name(&lower) {
                return Err(format!("{name:?} is not a DNS name"));
            }
            Ok(lower)
        })
        .map_err(|m| err(n.span(), "names", m))?,
    };
    let key_type = match raw.key_type.as_ref().map(|k| (k, k.get_ref().as_str())) {
        None | Some((_, "ecdsa-p256")) => KeyType::EcdsaP256,
        Some((_, "rsa-2048")) => KeyType::Rsa2048,
        Some((k, other)) => {
            return Err(err(
                k.span(),
                "key_type",
                format!("{other:?}: use \"ecdsa-p256\" or \"rsa-2048\""),
            ))
        }
    };
    let eab = match &raw.eab {
        None => None,
        Some(e) => {
            let r = e.get_ref();
            if r.kid.get_ref().is_empty() {
                return Err(err(r.kid.span(), "eab.kid", "is empty".into()));
            }
            let hmac = decode_base64url(r.hmac_key.get_ref().trim()).ok_or_else(|| {
                err(
                    r.hmac_key.span(),
                    "eab.hmac_key",
                    "is not base64url text (the MAC key as the CA printed it)".into(),
                )
            })?;
            if hmac.len() < 16 {
                return Err(err(
                    r.hmac_key.span(),
                    "eab.hmac_key",
                    "is shorter than 16 bytes; copy the whole key the CA gave".into(),
                ));
            }
            Some(Eab {
                kid: r.kid.get_ref().clone(),
                hmac_key: hmac,
            })
        }
    };
    let state_dir = match &raw.state_dir {
        None => PathBuf::from(DEFAULT_STATE_DIR),
        Some(s) if s.get_ref().is_empty() => {
            return Err(err(s.span(), "state_dir", "is empty".into()))
        }
        Some(s) => PathBuf::from(s.get_ref()),
    };
    if let Ok(meta) = std::fs::metadata(&state_dir) {
        if !meta.is_dir() {
            let span = raw.state_dir.as_ref().map_or(a.span(), |s| s.span());
            return Err(err(
                span,
                "state_dir",
                format!("{} exists and is not a directory", state_dir.display()),
            ));
        }
    }
    let ca = match &raw.ca {
        None => None,
        Some(c) => {
            let certs =
                crate::tls::read_pem_certs(c.get_ref()).map_err(|m| err(c.span(), "ca", m))?;
            if certs.is_empty() {
                return Err(err(
                    c.span(),
                    "ca",
                    format!("{}: no certificate found", c.get_ref()),
                ));
            }
            Some(c.get_ref().clone())
        }
    };
    let challenges = match &raw.challenges {
        None => vec![ChallengeKind::TlsAlpn01, ChallengeKind::Http01],
        Some(c) => {
            let out = each_once(c.get_ref(), |s| match s {
                "tls-alpn-01" => Ok(ChallengeKind::TlsAlpn01),
                "http-01" => Ok(ChallengeKind::Http01),
                "dns-01" => {
                    Err("\"dns-01\" is not supported; use \"tls-alpn-01\" or \"http-01\"".into())
                }
                other => Err(format!("{other:?}: use \"tls-alpn-01\" and/or \"http-01\"")),
            })
            .map_err(|m| err(c.span(), "challenges", m))?;
            if out.is_empty() {
                return Err(err(c.span(), "challenges", "needs at least one".into()));
            }
            out
        }
    };
    let retry_backoff = match &raw.retry_backoff {
        None => DEFAULT_RETRY_BACKOFF,
        Some(d) => {
            let v = parse_duration(d.get_ref()).map_err(|m| err(d.span(), "retry_backoff", m))?;
            if v < Duration::from_secs(1) || v > Duration::from_secs(24 * 3600) {
                return Err(err(
                    d.span(),
                    "retry_backoff",
                    "must be between 1s and 24h".into(),
                ));
            }
            v
        }
    };
    Ok(AcmeSpec {
        directory,
        contact,
        names,
        key_type,
        eab,
        state_dir,
        ca,
        challenges,
        retry_backoff,
    })
}

/// Base64url or standard base64, padding optional, as CAs print MAC keys.
fn decode_base64url(s: &str) -> Option<Vec<u8>> {
    let bare = s.trim_end_matches('=');
    data_encoding::BASE64URL_NOPAD
        .decode(bare.as_bytes())
        .or_else(|_| data_encoding::BASE64_NOPAD.decode(bare.as_bytes()))
        .ok()
}

#[cfg(test)]
mod tests {
    use crate::config::build::load_str;
    use crate::config::ConfigError;

    fn check(acme: &str) -> Result<crate::config::Config, ConfigError> {
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls.acme]\n{acme}\n[[route]]\nhandler = \"respond\"\n"
        );
        load_str("t.toml", &text)
    }

    #[test]
    fn settings_errors_name_the_key_and_line() {
        let base =
            "agree_terms = true\nnames = [\"a.test\"]\nstate_dir = \"/nonexistent/pier-acme\"\n";
        let ok = check(base).unwrap();
        let tls = ok.listeners[0].tls.as_ref().unwrap();
        let a = tls.listener.acme().expect("an ACME listener");
        assert_eq!(a.spec.directory, super::LETS_ENCRYPT);
        assert_eq!(a.spec.key_type, super::KeyType::EcdsaP256);
        assert_eq!(
            a.spec.challenges,
            [
                super::ChallengeKind::TlsAlpn01,
                super::ChallengeKind::Http01
            ]
        );

        for (extra, key, line) in [
            ("directory = \"http://ca.test/dir\"", "directory", 7),
            ("key_type = \"ed25519\"", "key_type", 7),
            ("challenges = [\"dns-01\"]", "challenges", 7),
            ("contact = [\"not an address\"]", "contact", 7),
            ("retry_backoff = \"10ms\"", "retry_backoff", 7),
            (
                "eab = { kid = \"k\", hmac_key = \"$$$\" }",
                "eab.hmac_key",
                7,
            ),
            ("ca = \"/no/such/ca.pem\"", "ca", 7),
        ] {
            let e = check(&format!("{base}{extra}")).unwrap_err();
            e.assert_at(line, &format!("listener[1].tls.acme.{key}"));
        }
        let e = check("names = [\"a.test\"]").unwrap_err();
        assert_eq!(e.key, "listener[1].tls.acme.agree_terms");
        let e = check("agree_terms = false\nnames = [\"a.test\"]").unwrap_err();
        assert_eq!(e.key, "listener[1].tls.acme.agree_terms");
        let e = check("agree_terms = true\nnames = [\"*.a.test\"]").unwrap_err();
        assert!(e.message.contains("DNS-01"), "{e}");
        let e = check("agree_terms = true").unwrap_err();
        assert_eq!(e.key, "listener[1].tls.acme.names");
        let eab = check(&format!(
            "{base}eab = {{ kid = \"kid-1\", hmac_key = \"zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\" }}\nkey_type = \"rsa-2048\""
        ))
        .unwrap();
        let a = eab.listeners[0]
            .tls
            .as_ref()
            .unwrap()
            .listener
            .acme()
            .unwrap()
            .spec
            .clone();
        assert_eq!(a.eab.as_ref().unwrap().hmac_key.len(), 48);
        assert_eq!(a.key_type, super::KeyType::Rsa2048);
    }

    #[test]
    fn acme_excludes_certificate_files() {
        let text = "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\nself_signed = true\n[listener.tls.acme]\nagree_terms = true\nnames = [\"a.test\"]\n[[route]]\nhandler = \"respond\"\n";
        let e = load_str("t.toml", text).unwrap_err();
        assert_eq!(e.key, "listener[1].tls.acme");
    }
}
