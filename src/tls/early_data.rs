//! 0-RTT for a listener's QUIC side. rustls takes early data only on a
//! resumption from its session store, whose tickets name a stored session
//! and are each used once: a replayed ClientHello finds its session gone and
//! gets a full handshake. One store serves all of a listener's workers, so a
//! client resumes whichever worker the kernel hands its next connection to,
//! and a ticket is spent everywhere at once (the store takes a short lock per
//! handshake, never per request).

use std::sync::Arc;

use rustls::server::{ProducesTickets, ServerSessionMemoryCache, StoresServerSessions};
use rustls::ServerConfig;

/// Stateless tickets off, so TLS 1.3 tickets name sessions in the store.
#[derive(Debug)]
struct StoredSessionsOnly;

impl ProducesTickets for StoredSessionsOnly {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The session store a listener's QUIC side resumes 0-RTT clients from.
#[derive(Debug, Clone)]
pub struct EarlyDataSessions(Arc<dyn StoresServerSessions>);

impl EarlyDataSessions {
    /// A store for `sessions` sessions.
    pub fn new(sessions: usize) -> EarlyDataSessions {
        EarlyDataSessions(ServerSessionMemoryCache::new(sessions.max(1)))
    }

    /// Makes `config` (a QUIC server's) accept early data: the size QUIC
    /// requires (RFC 9001 §4.6.1), tickets naming sessions in this store.
    pub fn allow_in(&self, config: &mut ServerConfig) {
        config.max_early_data_size = u32::MAX;
        config.ticketer = Arc::new(StoredSessionsOnly);
        config.session_storage = self.0.clone();
    }
}
