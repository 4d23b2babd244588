//! A client-side verifier that takes any server certificate, for the two places
//! a user asks for that: upstreams with `verify = false` (a trusted network)
//! and `pier bench --insecure` (the benchmark measures the server, not the
//! client's checks). One type, so the two differ only in what they say they do.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Whether the handshake signature is still checked once the certificate
/// itself is taken unchecked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeSignatures {
    /// Verified with the provider's algorithms: the handshake stays a real one.
    Checked,
    /// Accepted as they are, so the client spends nothing on them.
    Unchecked,
}

/// Accepts any chain for any name; see [`HandshakeSignatures`] for the rest.
#[derive(Debug)]
pub struct AnyServerCert {
    provider: Arc<CryptoProvider>,
    signatures: HandshakeSignatures,
}

impl AnyServerCert {
    /// A verifier on `provider`'s signature algorithms.
    pub fn new(provider: Arc<CryptoProvider>, signatures: HandshakeSignatures) -> AnyServerCert {
        AnyServerCert {
            provider,
            signatures,
        }
    }

    fn signature(
        &self,
        verify: fn(
            &[u8],
            &CertificateDer<'_>,
            &DigitallySignedStruct,
            &rustls::crypto::WebPkiSupportedAlgorithms,
        ) -> Result<HandshakeSignatureValid, rustls::Error>,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match self.signatures {
            HandshakeSignatures::Checked => verify(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            ),
            HandshakeSignatures::Unchecked => Ok(HandshakeSignatureValid::assertion()),
        }
    }
}

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(verify_tls12_signature, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(verify_tls13_signature, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
