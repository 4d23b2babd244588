//! The transport settings of a listener's QUIC endpoint, on the rustls
//! configuration of its TCP side (same certificates, SNI resolver and
//! ticket keys) with ALPN `h3`.

use std::sync::Arc;
use std::time::Duration;

use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{IdleTimeout, TransportConfig, VarInt};

/// Most request streams a client may have open at once.
const MAX_BIDI_STREAMS: u32 = 100;
/// Unidirectional streams a client may open: its control and two QPACK
/// streams, and a few of the reserved types clients send to keep servers
/// honest.
const MAX_UNI_STREAMS: u32 = 8;

/// The endpoint's server config for a listener whose TLS config (already
/// offering only `h3`) is `tls`. An error says why in a sentence.
pub fn quic_server_config(
    tls: Arc<rustls::ServerConfig>,
    idle_timeout: Duration,
) -> Result<Arc<quinn_proto::ServerConfig>, String> {
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| format!("the TLS configuration cannot serve QUIC: {e}"))?;
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_BIDI_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS))
        .max_idle_timeout(IdleTimeout::try_from(idle_timeout).ok());
    let mut config = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(Arc::new(config))
}
