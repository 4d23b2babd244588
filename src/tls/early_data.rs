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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    const CONFIG: &str = "[[listener]]\nlisten = \"127.0.0.1:1\"\n\
        tls = { self_signed = true, early_data = true }\n\
        [[route]]\nhandler = \"respond\"\n";

    #[test]
    fn quic_sessions_outlive_a_reload_and_each_resumes_once() {
        let old = crate::config::check_text(CONFIG).unwrap();
        let mut next = crate::config::check_text(CONFIG).unwrap();
        let old_tls = &old.listeners[0].tls.as_ref().unwrap().listener;
        let old_quic = old_tls.quic_config();
        assert_eq!(old_quic.max_early_data_size, u32::MAX);
        assert!(!old_quic.ticketer.enabled(), "stored sessions only");
        assert!(old_quic
            .session_storage
            .put(b"id".to_vec(), b"session".to_vec()));

        let next_tls = Arc::get_mut(&mut next.listeners[0].tls.as_mut().unwrap().listener)
            .expect("not shared yet");
        assert!(next_tls.quic_config().session_storage.get(b"id").is_none());
        next_tls.keep_tickets_of(old_tls);
        let quic = next_tls.quic_config();
        assert_eq!(quic.session_storage.take(b"id"), Some(b"session".to_vec()));
        // Each session resumes once, wherever it is taken.
        assert!(old_quic.session_storage.take(b"id").is_none());
    }
}
