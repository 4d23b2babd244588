//! The second stage of a listener's `tls` table: raw keys validated (with
//! their file, line and key on error) and turned into a ready [`ListenerTls`].

use std::sync::Arc;
use std::time::Duration;

use rustls::sign::CertifiedKey;
use toml::Spanned;

use super::{
    acme, provider, self_signed, CertFiles, CertSource, ClientAuth, ListenerTls, TlsListener,
    TlsSetting, TlsSpec,
};
use crate::config::error::{ConfigError, Locator};
use crate::config::raw::{RawCertificate, RawTls};
use crate::config::value::{int, is_host_name, parse_duration};

/// Sessions remembered per worker for clients that resume without tickets. Each
/// worker owns its cache, so no lock is shared between workers.
const DEFAULT_SESSION_CACHE: i64 = 1024;

/// Default rotation of session ticket keys.
const DEFAULT_TICKET_ROTATION: Duration = Duration::from_secs(3600);

fn spanned_path(s: &Spanned<String>) -> String {
    s.get_ref().clone()
}

/// Validates a listener's `tls` table and builds its server config.
pub fn listener_tls(
    loc: &Locator<'_>,
    key: &str,
    t: &Spanned<RawTls>,
    alpn: Vec<Vec<u8>>,
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
                    if bare.contains('*') || !is_host_name(bare) {
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
    let session_cache = int(
        loc,
        &raw.session_cache,
        &format!("{key}.session_cache"),
        0..=1_000_000,
        DEFAULT_SESSION_CACHE,
    )? as usize;
    let early_data = raw.early_data.as_ref().is_some_and(|e| *e.get_ref());
    if early_data && session_cache == 0 {
        // rustls takes early data only on a resumption from its session
        // cache, whose tickets are single-use: the replay defence.
        let span = raw.early_data.as_ref().map_or(t.span(), |e| e.span());
        return Err(loc.error(
            span,
            &format!("{key}.early_data"),
            "0-RTT resumes sessions from the session cache: session_cache = 0 leaves none",
        ));
    }
    let spec = TlsSpec {
        alpn,
        certs,
        sni_required,
        client_ca: raw.client_ca.as_ref().map(spanned_path),
        client_auth,
        ticket_key_file: raw.ticket_key_file.as_ref().map(spanned_path),
        session_cache,
        early_data,
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
    use crate::config::check_text as check;

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
        e.assert_at(10, "listener[1].tls.certificate[2].cert");
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
        e.assert_at(3, "listener[1].tls.key");
        assert!(e.message.contains("does not fit"), "{e}");

        let (_d, cert, key) = files();
        let ocsp = _d.path().join("o.der");
        std::fs::write(&ocsp, "text, not DER").unwrap();
        let text = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\nocsp_response = \"{}\"\n{TAIL}",
            ocsp.display()
        );
        let e = check(&text).unwrap_err();
        e.assert_at(6, "listener[1].tls.ocsp_response");
    }

    #[test]
    fn client_auth_ticket_and_names_settings_are_checked() {
        let (d, cert, key) = files();
        let base = format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[listener.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\n"
        );
        let e = check(&format!("{base}client_auth = \"required\"\n{TAIL}")).unwrap_err();
        e.assert_at(6, "listener[1].tls.client_auth");
        let e = check(&format!("{base}client_auth = \"maybe\"\n{TAIL}")).unwrap_err();
        assert_eq!(e.key, "listener[1].tls.client_auth");
        let e = check(&format!("{base}client_ca = \"{key}\"\n{TAIL}")).unwrap_err();
        e.assert_at(6, "listener[1].tls.client_ca");

        let short = d.path().join("short.key");
        std::fs::write(&short, [1u8; 32]).unwrap();
        let e = check(&format!(
            "{base}ticket_key_file = \"{}\"\n{TAIL}",
            short.display()
        ))
        .unwrap_err();
        e.assert_at(6, "listener[1].tls.ticket_key_file");
        assert!(e.message.contains("48 or 80"), "{e}");
        let e = check(&format!("{base}ticket_rotation = \"5s\"\n{TAIL}")).unwrap_err();
        assert_eq!(e.key, "listener[1].tls.ticket_rotation");

        let e = check(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[listener.tls.certificate]]\ncert = \"{cert}\"\nkey = \"{key}\"\nnames = [\"ok.test\", \"bad name\"]\n{TAIL}"
        ))
        .unwrap_err();
        e.assert_at(6, "listener[1].tls.certificate[1].names");
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
