//! `--cacert` as curl reads it: the file's certificates are trust anchors, and
//! a server certificate the file holds itself (a self-signed one made by
//! `openssl req -x509`, which marks itself CA:TRUE) is trusted as it is when
//! it is exactly the certificate presented; its name and expiry are still
//! checked. webpki alone refuses such a certificate as an end entity ("the
//! peer presented a CA certificate as its own").

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, WebPkiServerVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Chains to the roots, or is one of the pinned certificates byte for byte.
#[derive(Debug)]
pub struct CacertVerifier {
    chains: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl CacertVerifier {
    /// Verifies against `roots`, also taking any of `pinned` as it is.
    pub fn new(
        roots: Arc<RootCertStore>,
        pinned: Vec<CertificateDer<'static>>,
    ) -> Result<CacertVerifier, String> {
        let chains = WebPkiServerVerifier::builder_with_provider(roots, crate::tls::provider())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(CacertVerifier { chains, pinned })
    }
}

impl ServerCertVerifier for CacertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return self.chains.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
        }
        verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if crate::tls::not_after_unix(end_entity).is_some_and(|end| end < now) {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Expired,
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chains.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chains.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chains.supported_verify_schemes()
    }
}
