//! rustls errors as sentences. rustls's own `Display` falls back to Debug text for
//! certificate and key problems (`Other(OtherError(CaUsedAsEndEntity))`,
//! `KeyMismatch`), which tells a user neither what happened nor what to do.

use rustls::{CertificateError, Error, InconsistentKeys};

/// What went wrong, as a sentence fragment that says what to check.
pub fn describe_tls_error(e: &Error) -> String {
    match e {
        Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate (its public key differs)".into()
        }
        Error::InconsistentKeys(_) => {
            "the private key cannot be checked against the certificate".into()
        }
        Error::InvalidCertificate(c) => describe_certificate_error(c),
        Error::NoCertificatesPresented => "the peer sent no certificate".into(),
        Error::PeerIncompatible(p) => format!(
            "the peer shares no protocol version, cipher suite or key exchange with Pier ({})",
            snake(&format!("{p:?}"))
        ),
        Error::AlertReceived(a) => format!(
            "the peer refused the handshake with the alert {}",
            snake(&format!("{a:?}"))
        ),
        other => other.to_string(),
    }
}

/// A certificate the peer presented did not verify: why, and what to do.
fn describe_certificate_error(c: &CertificateError) -> String {
    match c {
        CertificateError::UnknownIssuer => {
            "the peer's certificate is not signed by a trusted CA".into()
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the peer's certificate has expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the peer's certificate is not valid yet (check the clocks)".into()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "the peer's certificate is not valid for the name asked (set `sni` to a name it covers)"
                .into()
        }
        CertificateError::Revoked => "the peer's certificate is revoked".into(),
        CertificateError::BadEncoding => "the peer's certificate does not parse".into(),
        CertificateError::BadSignature => "the peer's certificate has a bad signature".into(),
        CertificateError::Other(o) => {
            let text = format!("{o:?}");
            if text.contains("CaUsedAsEndEntity") {
                "the peer presented a CA certificate as its own: it must send its server certificate (leaf first)".into()
            } else {
                format!(
                    "the peer's certificate was refused ({})",
                    snake(text.trim_start_matches("OtherError(").trim_end_matches(')'))
                )
            }
        }
        other => format!(
            "the peer's certificate was refused ({})",
            snake(&format!("{other:?}"))
        ),
    }
}

/// `NoCipherSuitesInCommon` -> `no cipher suites in common`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push(' ');
            }
            out.push(ch.to_ascii_lowercase());
        } else if ch.is_ascii_alphanumeric() || ch == ' ' {
            out.push(ch);
        }
    }
    out
}

/// A certificate webpki cannot use, in words (`UnsupportedCertVersion` ->
/// `unsupported cert version`).
pub fn describe_webpki_error(e: &webpki::Error) -> String {
    snake(&format!("{e:?}"))
}

/// An IO error that may carry a rustls error (as tokio-rustls returns them),
/// described as a sentence.
pub fn describe_io_error(e: &std::io::Error) -> String {
    match e.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
        Some(tls) => describe_tls_error(tls),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_debug_text_reaches_the_user() {
        let cases = [
            Error::InconsistentKeys(InconsistentKeys::KeyMismatch),
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                std::sync::Arc::new(webpki::Error::CaUsedAsEndEntity),
            ))),
            Error::PeerIncompatible(rustls::PeerIncompatible::NoCipherSuitesInCommon),
        ];
        for e in &cases {
            let text = describe_tls_error(e);
            assert!(
                !text.contains('(') || !text.contains("Error("),
                "debug text in {text:?}"
            );
            assert!(
                !text.contains("KeyMismatch") && !text.contains("CaUsedAsEndEntity"),
                "{text}"
            );
        }
        assert!(describe_tls_error(&cases[1]).contains("trusted CA"));
        assert!(describe_tls_error(&cases[2]).contains("CA certificate"));
        assert!(describe_tls_error(&cases[3]).contains("no cipher suites in common"));
        let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, cases[0].clone());
        assert!(describe_io_error(&wrapped).contains("does not belong"));
    }
}
