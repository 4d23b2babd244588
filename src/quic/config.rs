//! The transport settings of a listener's QUIC endpoint, on the rustls
//! configuration of its TCP side (same certificates, SNI resolver and
//! ticket keys) with ALPN `h3`, the listener's Retry token key, and the
//! limits of `[http3]`.

use std::sync::Arc;

use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::crypto::HandshakeTokenKey;
use quinn_proto::{IdleTimeout, TransportConfig, VarInt};

use crate::config::Http3Config;

/// What a listener's endpoint runs with: the server config each new
/// connection is accepted with, and when clients must prove their address.
pub struct QuicListenerConfig {
    /// TLS and transport settings.
    pub server: Arc<quinn_proto::ServerConfig>,
    /// New handshakes per second above which clients get a Retry first
    /// (0: always).
    pub retry_above: u32,
}

/// The endpoint's config for a listener whose TLS config (already offering
/// only `h3`) is `tls`, sealing Retry tokens with `token_key`, with the
/// limits of `limits`. An error says why in a sentence.
pub fn quic_listener_config(
    tls: Arc<rustls::ServerConfig>,
    token_key: Arc<dyn HandshakeTokenKey>,
    limits: &Http3Config,
) -> Result<Arc<QuicListenerConfig>, String> {
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| format!("the TLS configuration cannot serve QUIC: {e}"))?;
    let window = |n: u64| VarInt::from_u64(n).unwrap_or(VarInt::MAX);
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(limits.max_concurrent_streams))
        .max_concurrent_uni_streams(VarInt::from_u32(limits.max_uni_streams))
        .stream_receive_window(window(limits.stream_window))
        .receive_window(window(limits.connection_window))
        .send_window(limits.max_send_buffer)
        .max_idle_timeout(IdleTimeout::try_from(limits.idle_timeout).ok());
    let mut server = quinn_proto::ServerConfig::new(Arc::new(crypto), token_key);
    server.transport_config(Arc::new(transport));
    Ok(Arc::new(QuicListenerConfig {
        server: Arc::new(server),
        retry_above: limits.retry_above,
    }))
}
