//! Names operators know for TLS versions and cipher suites: `TLSv1.3` and the
//! OpenSSL suite names (`TLS_AES_128_GCM_SHA256`, `ECDHE-RSA-AES128-GCM-SHA256`),
//! as nginx's `$ssl_protocol` and `$ssl_cipher` print them, rather than rustls's
//! enum names. Used by the access log and the metrics.

use rustls::{CipherSuite, ProtocolVersion};

/// `TLSv1.2` or `TLSv1.3` (OpenSSL's spelling); `None` for versions Pier never speaks.
pub fn protocol_name(v: ProtocolVersion) -> Option<&'static str> {
    Some(match v {
        ProtocolVersion::TLSv1_3 => "TLSv1.3",
        ProtocolVersion::TLSv1_2 => "TLSv1.2",
        ProtocolVersion::TLSv1_1 => "TLSv1.1",
        ProtocolVersion::TLSv1_0 => "TLSv1",
        _ => return None,
    })
}

/// The OpenSSL name of a suite (for TLS 1.3 it is also the IANA name); `None`
/// for suites the provider does not offer.
pub fn cipher_name(s: CipherSuite) -> Option<&'static str> {
    Some(match s {
        CipherSuite::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => {
            "ECDHE-ECDSA-CHACHA20-POLY1305"
        }
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_the_provider_offers_has_an_openssl_name() {
        for s in &crate::tls::provider().cipher_suites {
            let name = cipher_name(s.suite()).expect("a name for every offered suite");
            assert!(
                !name.contains("TLS13_") && !name.contains("_WITH_"),
                "{name}"
            );
        }
        assert_eq!(protocol_name(ProtocolVersion::TLSv1_3), Some("TLSv1.3"));
        assert_eq!(protocol_name(ProtocolVersion::TLSv1_2), Some("TLSv1.2"));
        assert_eq!(
            cipher_name(CipherSuite::TLS13_AES_256_GCM_SHA384),
            Some("TLS_AES_256_GCM_SHA384")
        );
    }
}
